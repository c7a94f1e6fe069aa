"""Host steps of VTA layers, registered as ``vtakit.op.vta.*``.

After a kernel, on its packed result (``planes``: the downloaded ``out`` operand,
``(planes, N/b, C/c, H, W, b, c)``, one int8 plane or the byte planes of an int32
result): each returns the packed int8 result, so a layer whose output stays on the
device is never unpacked. Before a kernel, on its NCHW int8 input (a *pre* step):
``vta.fold_input``, the re-layout that folds a thin convolution's kernel taps into
its channels (:func:`fold_axis`; :func:`fold_taps` is what
:mod:`vtakit.compiler.vta.fold` re-lays the weights by)."""

from __future__ import annotations

import numpy as np

from . import fixed_point as fp
from . import hostop
from .pool import divide_round
from .qnn import requantize

__all__ = ["assemble_planes", "requantize_packed", "divide_round_packed", "clip_cast_packed",
           "FOLD_MODES", "fold_taps", "fold_axis", "fold_input"]


def assemble_planes(planes) -> np.ndarray:
    """1 to 4 int8 byte planes (least significant first, stacked on axis 0) -> int32,
    sign-extended from the top plane (fewer than four: the results fit that many
    bytes)."""
    p = np.asarray(planes)
    acc = p[-1].astype(np.int32)                 # the top plane carries the sign
    for plane in p[-2::-1]:
        acc = (acc << 8) | plane.view(np.uint8).astype(np.int32)
    return acc


@hostop("vta.requantize")
def requantize_packed(planes, scale, zero_point, correction=None, *, rounding, a_min, a_max,
                      out_dtype):
    """The exact requantize (``qnn.requantize`` with the framework's ``rounding``), clip and
    cast of an int32 result, after adding ``correction`` (packed int32: what a non-zero
    padding value adds at the border). ``scale`` and ``zero_point`` are scalars or
    per-lane arrays shaped to broadcast over the packed layout."""
    acc = assemble_planes(planes)
    if correction is not None:
        acc = fp.wrap_int32(acc.astype(np.int64) + correction)
    y = requantize(acc, scale=scale, zero_point=zero_point, axis=None, rounding=rounding)
    return np.clip(y.astype(np.int64), a_min, a_max).astype(out_dtype)


@hostop("vta.divide_round")
def divide_round_packed(planes, counts, *, rounding, a_min, a_max, out_dtype):
    """Window sums (int32) divided by each window's count with the framework's rounding
    (:func:`.pool.divide_round`), clipped and cast: an average pool's host step."""
    return np.clip(divide_round(assemble_planes(planes), counts, rounding),
                   a_min, a_max).astype(out_dtype)


@hostop("vta.clip_cast")
def clip_cast_packed(planes, *, a_min, a_max, out_dtype):
    """An int8 result clipped and cast (a clip narrower than int8's range, or a wider
    dtype)."""
    return np.clip(planes[0], a_min, a_max).astype(out_dtype)


#: How :func:`fold_axis` treats one spatial axis of a convolution.
FOLD_MODES = ("none", "taps", "phase")


def fold_taps(mode, kernel, stride):
    """``(taps, stride)`` of one axis folded by ``mode`` (see :func:`fold_axis`):
    ``taps[f, p]`` the original kernel tap of folded channel ``f``'s tap ``p`` (-1: a
    zero weight), and the folded convolution's stride."""
    if mode == "none":
        return np.arange(kernel)[None], stride
    if mode == "taps":
        return np.arange(kernel)[:, None], 1
    if mode == "phase":
        taps = np.arange(-(-kernel // stride))[None] * stride + np.arange(stride)[:, None]
        return np.where(taps < kernel, taps, -1), 1
    raise ValueError(f"fold: mode {mode!r} is not one of {', '.join(FOLD_MODES)}")


def fold_axis(mode, size, kernel, stride, pad_before, pad_after) -> np.ndarray:
    """One axis of a convolution re-laid out so that part of it moves into the channels.

    ``mode`` is ``"none"`` (kept: the padded axis, the same kernel and stride),
    ``"taps"`` (im2col: each of the ``kernel`` taps becomes a channel, the axis is the
    output's, kernel 1, stride 1) or ``"phase"`` (space-to-depth: each of the
    ``stride`` phases becomes a channel, kernel ``ceil(kernel / stride)``, stride 1).
    Returns ``src``: ``src[f, u]`` the input position (outside ``[0, size)``: the
    padding) that folded channel ``f`` holds at position ``u``; :func:`fold_taps` gives
    the kernel. The folded convolution, unpadded, has the original's output size.
    """
    out = (size + pad_before + pad_after - kernel) // stride + 1
    taps, _ = fold_taps(mode, kernel, stride)
    step = stride if mode == "none" else 1
    length = (out - 1) * step + taps.shape[1]
    fold = np.arange(taps.shape[0])[:, None] * (0 if mode == "none" else 1)
    pos = np.arange(length)[None] * (1 if mode == "none" else stride)
    return pos + fold - pad_before


@hostop("vta.fold_input")
def fold_input(x, *, modes, kernel, strides, padding, pad_value):
    """The input (N, C, H, W) of a convolution with ``kernel`` (KH, KW), ``strides`` and
    ``padding`` (top, left, bottom, right) of value ``pad_value``, re-laid out with its
    rows and columns folded by ``modes`` (:func:`fold_axis`): (N, C * FH * FW, H', W'),
    channel ``c * FH * FW + a * FW + b`` holding row fold ``a`` and column fold ``b`` of
    input channel ``c``. The padding is inserted here, so the folded convolution has
    none."""
    x = np.asarray(x)
    n, c, h, w = x.shape
    t, l, b, r = padding
    sh = fold_axis(modes[0], h, kernel[0], strides[0], t, b)
    sw = fold_axis(modes[1], w, kernel[1], strides[1], l, r)
    # pad once with the pad value, as far as the folded positions reach
    bh, bw = max(0, -int(sh.min())), max(0, -int(sw.min()))
    xp = np.pad(x, ((0, 0), (0, 0), (bh, max(0, int(sh.max()) + 1 - h)),
                    (bw, max(0, int(sw.max()) + 1 - w))), constant_values=pad_value)
    g = xp[:, :, sh + bh][..., sw + bw]                     # (N, C, FH, H', FW, W')
    fh, hh, fw, ww = g.shape[2:]
    return np.ascontiguousarray(g.transpose(0, 1, 2, 4, 3, 5)).reshape(n, c * fh * fw, hh, ww)
