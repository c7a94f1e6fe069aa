"""Packed layouts: element placement, zero padding of blocks, round trips."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtakit.compiler.ops import layout as L
from vtakit.hw.config import VTAConfig

CONFIGS = {name: VTAConfig.preset(name) for name in ("default", "4x8", "tiny")}


def _rand(rng, shape, dtype=np.int8):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=dtype)


@pytest.mark.parametrize("preset", list(CONFIGS))
def test_activation_element_placement(preset):
    cfg = CONFIGS[preset]
    b, c = cfg.batch, cfg.block
    x = _rand(np.random.default_rng(0), (2 * b + 1, 2 * c + 3, 3, 5))
    xp = L.pack_activation(x, cfg)
    assert xp.shape == (3, 3, 3, 5, b, c) and xp.dtype == np.int8
    for n, ch, h, w in [(0, 0, 0, 0), (2 * b, 2 * c + 2, 2, 4), (b + 1, c + 5, 1, 3)]:
        assert xp[n // b, ch // c, h, w, n % b, ch % c] == x[n, ch, h, w]
    # batch and channel padding are zeros
    assert not xp[2, :, :, :, 1:, :].any()
    assert not xp[:, 2, :, :, :, 3:].any()


@pytest.mark.parametrize("preset", list(CONFIGS))
def test_conv_weight_element_placement(preset):
    cfg = CONFIGS[preset]
    c = cfg.block
    w = _rand(np.random.default_rng(1), (c + 1, 2 * c - 1, 3, 2))
    wp = L.pack_conv_weight(w, cfg)
    assert wp.shape == (2, 2, 3, 2, c, c)
    for o, i, kh, kw in [(0, 0, 0, 0), (c, 2 * c - 2, 2, 1), (3, c + 1, 1, 0)]:
        assert wp[o // c, i // c, kh, kw, o % c, i % c] == w[o, i, kh, kw]
    assert not wp[1, :, :, :, 1:, :].any() and not wp[:, 1, :, :, :, c - 1:].any()


@settings(max_examples=40, deadline=None)
@given(preset=st.sampled_from(list(CONFIGS)), n=st.integers(1, 9), c=st.integers(1, 40),
       h=st.integers(1, 4), w=st.integers(1, 4), seed=st.integers(0, 2 ** 16))
def test_activation_round_trip(preset, n, c, h, w, seed):
    cfg = CONFIGS[preset]
    rng = np.random.default_rng(seed)
    x = _rand(rng, (n, c, h, w))
    assert np.array_equal(L.unpack_activation(L.pack_activation(x, cfg), cfg, n, c), x)
    x32 = _rand(rng, (n, c, h, w), np.int32)
    back = L.unpack_activation(L.pack_activation(x32, cfg), cfg, n, c)
    assert back.dtype == np.int32 and np.array_equal(back, x32)


@settings(max_examples=30, deadline=None)
@given(preset=st.sampled_from(list(CONFIGS)), o=st.integers(1, 40), i=st.integers(1, 40),
       k=st.integers(1, 5), seed=st.integers(0, 2 ** 16))
def test_conv_weight_round_trip(preset, o, i, k, seed):
    cfg = CONFIGS[preset]
    w = _rand(np.random.default_rng(seed), (o, i, k, k))
    assert np.array_equal(L.unpack_conv_weight(L.pack_conv_weight(w, cfg), cfg, o, i), w)


@settings(max_examples=30, deadline=None)
@given(preset=st.sampled_from(list(CONFIGS)), n=st.integers(1, 20), k=st.integers(1, 50),
       o=st.integers(1, 50), seed=st.integers(0, 2 ** 16))
def test_dense_round_trip_and_placement(preset, n, k, o, seed):
    cfg = CONFIGS[preset]
    b, c = cfg.batch, cfg.block
    rng = np.random.default_rng(seed)
    x, w = _rand(rng, (n, k)), _rand(rng, (o, k))
    xp, wp = L.pack_dense_data(x, cfg), L.pack_dense_weight(w, cfg)
    assert xp.shape == (L.ceil_div(n, b), L.ceil_div(k, c), b, c)
    assert wp.shape == (L.ceil_div(o, c), L.ceil_div(k, c), c, c)
    assert xp[(n - 1) // b, (k - 1) // c, (n - 1) % b, (k - 1) % c] == x[n - 1, k - 1]
    assert wp[(o - 1) // c, (k - 1) // c, (o - 1) % c, (k - 1) % c] == w[o - 1, k - 1]
    assert np.array_equal(L.unpack_dense_data(xp, cfg, n, k), x)
    assert np.array_equal(L.unpack_dense_weight(wp, cfg, o, k), w)


@pytest.mark.parametrize("preset", list(CONFIGS))
def test_bias_tiles(preset):
    cfg = CONFIGS[preset]
    b, c = cfg.batch, cfg.block
    bias = np.arange(-5, c + 2, dtype=np.int32) * 1000
    bp = L.pack_bias(bias, cfg)
    assert bp.shape == (L.ceil_div(len(bias), c), b, c) and bp.dtype == np.int32
    for row in range(b):                      # every batch row of the acc tile holds the bias
        assert np.array_equal(bp[:, row, :].reshape(-1)[:len(bias)], bias)
    assert not bp.reshape(bp.shape[0], -1)[-1, len(bias) % c:c].any()
    assert np.array_equal(L.unpack_bias(bp, cfg, len(bias)), bias)


def test_layout_errors():
    cfg = CONFIGS["default"]
    with pytest.raises(L.LayoutError, match=r"^pack_activation: expected a 4-D NCHW array, "
                                            r"got shape \(3, 4\)$"):
        L.pack_activation(np.zeros((3, 4), np.int8), cfg)
    with pytest.raises(L.LayoutError, match=r"^unpack_activation: element shape \(4, 8\) does "
                                            r"not match the config's \(BATCH, BLOCK\) = \(1, 16\)$"):
        L.unpack_activation(np.zeros((1, 1, 1, 1, 4, 8), np.int8), cfg, 1, 1)
    with pytest.raises(L.LayoutError, match=r"^unpack_activation: cannot take N=2, C=1"):
        L.unpack_activation(np.zeros((1, 1, 1, 1, 1, 16), np.int8), cfg, 2, 1)


@pytest.mark.parametrize("preset", list(CONFIGS))
@pytest.mark.parametrize("channels, g", [(32, 1), (20, 1), (24, 2), (16, 4)])
def test_block_diagonal_weight(preset, channels, g):
    """Each diagonal tile equals the block of the equivalent dense (O, C) weight."""
    cfg = CONFIGS[preset]
    c = cfg.block
    groups = channels // g
    w = _rand(np.random.default_rng(channels), (channels, g, 3, 2))
    dense = np.zeros((channels, channels, 3, 2), np.int8)
    for o in range(channels):
        dense[o, o // g * g:o // g * g + g] = w[o]
    full = L.pack_conv_weight(dense, cfg)
    wp = L.pack_block_diagonal_weight(w, cfg, groups)
    assert wp.shape == (full.shape[0], 1, 3, 2, c, c)
    for ob in range(full.shape[0]):
        assert np.array_equal(wp[ob, 0], full[ob, ob])
    with pytest.raises(L.LayoutError, match=r"^pack_block_diagonal_weight: weight"):
        L.pack_block_diagonal_weight(w, cfg, groups + 1)
