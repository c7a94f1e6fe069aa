"""Packed tensor layouts of VTA (reference section 5.4).

VTA moves whole tensor tiles: one INP/OUT element holds ``BATCH x BLOCK``
scalars, one WGT element ``BLOCK x BLOCK``, one ACC element ``BATCH x BLOCK``
int32 lanes. These functions convert between the framework layouts (NCHW,
OIHW, (N, K), (O, K)) and the packed layouts whose last two axes are one
element, zero-padding the batch and channel axes to whole blocks:

========================  ====================================  ================
framework                  packed                                 layout string
========================  ====================================  ================
activation (N, C, H, W)    (N/b, C/c, H, W, b, c)                 NCHW{b}n{c}c
conv weight (O, I, H, W)   (O/c, I/c, H, W, c_o, c_i)             OIHW{c}o{c}i
dense data (N, K)          (N/b, K/c, b, c)                       NC{b}n{c}c
dense weight (O, K)        (O/c, K/c, c_o, c_i)                   OI{c}o{c}i
per-channel bias (C,)      (C/c, b, c) int32, broadcast over b    acc tile
========================  ====================================  ================

Dense data is the activation layout with ``H = W = 1``, so a dense layer is a
1x1 convolution on a 1x1 image for the operator library. Packing never changes
the dtype (sign-extend int8 to int32 *before* packing when an operand goes to
the accumulator). The activation layout itself is :mod:`vtakit.runtime.layout`
(the VM keeps device tensors in it).
"""

from __future__ import annotations

import numpy as np

from ...runtime.layout import (LayoutError, _check, _pad_to, ceil_div, pack_blocks,  # noqa: F401
                              pack_activation, unpack_activation)

__all__ = [
    "ceil_div", "pack_activation", "unpack_activation", "pack_conv_weight",
    "unpack_conv_weight", "pack_block_diagonal_weight", "pack_dense_data", "unpack_dense_data", "pack_dense_weight",
    "unpack_dense_weight", "pack_bias", "unpack_bias", "LayoutError",
]


def pack_conv_weight(wt, config) -> np.ndarray:
    """OIHW -> (O/c, I/c, H, W, c_o, c_i), zero-padding O and I to whole blocks."""
    return pack_blocks(_check("pack_conv_weight", wt, 4, "OIHW"), config.block, config.block)


def unpack_conv_weight(wp, config, o: int, i: int) -> np.ndarray:
    """(O/c, I/c, H, W, c_o, c_i) -> OIHW, dropping channel padding."""
    wp = _check("unpack_conv_weight", wp, 6, "packed conv weight")
    ob, ib, kh, kw, co, ci = wp.shape
    wt = wp.transpose(0, 4, 1, 5, 2, 3).reshape(ob * co, ib * ci, kh, kw)
    return np.ascontiguousarray(wt[:o, :i])


def pack_block_diagonal_weight(wt, config, groups: int) -> np.ndarray:
    """Grouped-conv weight (O, O/groups, H, W), groups of g = O/groups channels with g
    dividing the block (depthwise: g = 1) -> (O/c, 1, H, W, c_o, c_i): for every output
    block only its diagonal weight tile, which maps the block's input channels to its
    output channels group by group (zero across groups)."""
    wt = _check("pack_block_diagonal_weight", wt, 4, "(O, O/groups, H, W)")
    c = config.block
    o, g, kh, kw = wt.shape
    if o % groups or o // groups != g or c % g:
        raise LayoutError(f"pack_block_diagonal_weight: weight {wt.shape} with groups={groups} "
                          f"needs O/groups == {g} channels per group dividing the block {c}")
    ob = ceil_div(o, c)
    tiles = np.zeros((ob * c, c, kh, kw), dtype=wt.dtype)       # [o][input lane in block]
    rows = np.arange(o)[:, None]
    lanes = (rows // g * g) % c + np.arange(g)[None, :]
    tiles[rows, lanes] = wt
    tiles = tiles.reshape(ob, c, c, kh, kw).transpose(0, 3, 4, 1, 2)
    return np.ascontiguousarray(tiles[:, None])


def pack_dense_data(x, config) -> np.ndarray:
    """(N, K) -> (N/b, K/c, b, c)."""
    x = _check("pack_dense_data", x, 2, "(N, K)")
    return pack_activation(x[:, :, None, None], config)[:, :, 0, 0]


def unpack_dense_data(xp, config, n: int, k: int) -> np.ndarray:
    """(N/b, K/c, b, c) -> (N, K)."""
    xp = _check("unpack_dense_data", xp, 4, "packed dense data")
    return unpack_activation(xp[:, :, None, None], config, n, k)[:, :, 0, 0]


def pack_dense_weight(wt, config) -> np.ndarray:
    """(O, K) -> (O/c, K/c, c_o, c_i)."""
    wt = _check("pack_dense_weight", wt, 2, "(O, K)")
    return pack_conv_weight(wt[:, :, None, None], config)[:, :, 0, 0]


def unpack_dense_weight(wp, config, o: int, k: int) -> np.ndarray:
    """(O/c, K/c, c_o, c_i) -> (O, K)."""
    wp = _check("unpack_dense_weight", wp, 4, "packed dense weight")
    return unpack_conv_weight(wp[:, :, None, None], config, o, k)[:, :, 0, 0]


def pack_bias(bias, config) -> np.ndarray:
    """Per-channel int32 constants (C,) -> (C/c, b, c) acc tiles, one per channel block,
    the same row repeated for every batch row of the tile."""
    bias = _check("pack_bias", bias, 1, "(C,)").astype(np.int32)
    b, c = config.batch, config.block
    bp = _pad_to(bias, (ceil_div(len(bias), c) * c,)).reshape(-1, 1, c)
    return np.ascontiguousarray(np.broadcast_to(bp, (bp.shape[0], b, c)))


def unpack_bias(bp, config, c: int) -> np.ndarray:
    """(C/c, b, c) -> (C,), taking batch row 0."""
    bp = _check("unpack_bias", bp, 3, "packed bias")
    return np.ascontiguousarray(bp[:, 0, :].reshape(-1)[:c])
