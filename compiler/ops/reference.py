"""Integer references of every operator, in plain numpy (framework layouts).

These define what the VTA kernels of this package compute, bit for bit: int8
operands, int32 accumulation that wraps modulo 2^32, and an epilogue made of
exactly the ALU steps VTA executes (wrapping adds, arithmetic shift, signed
min/max), followed by the narrowing store (the low 8 bits of each lane).
"""

from __future__ import annotations

import numpy as np

from ...hw.fixedpoint import wrap_int32 as wrap32
from ...runtime.layout import normalize_padding
from ...runtime.layout import pair as _pair

__all__ = [
    "wrap32", "normalize_padding", "conv2d_output_shape", "conv2d_ref", "group_conv2d_ref",
    "dense_ref",
    "epilogue_ref", "add_ref", "max_pool2d_ref", "pool_sum_ref", "avg_pool2d_ref",
    "global_avg_pool2d_ref", "round_shift_div",
]


def conv2d_output_shape(h, w, kh, kw, stride, padding) -> tuple[int, int]:
    """(OH, OW) of a convolution or pooling window."""
    sh, sw = _pair(stride, "stride")
    t, l, b, r = normalize_padding(padding)
    oh, ow = (h + t + b - kh) // sh + 1, (w + l + r - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"window {kh}x{kw} with padding {padding!r} does not fit the "
                         f"{h}x{w} input")
    return oh, ow


def _windows(x, kh, kw, stride, padding, fill):
    """(N, C, OH, OW, KH, KW) view of the padded input windows."""
    sh, sw = _pair(stride, "stride")
    t, l, b, r = normalize_padding(padding)
    n, c, h, w = x.shape
    oh, ow = conv2d_output_shape(h, w, kh, kw, stride, padding)
    xp = np.full((n, c, h + t + b, w + l + r), fill, dtype=x.dtype)
    xp[:, :, t:t + h, l:l + w] = x
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return win[:, :, ::sh, ::sw][:, :, :oh, :ow]


def conv2d_ref(x, w, stride=1, padding=0) -> np.ndarray:
    """int8 NCHW x int8 OIHW -> int32 NCHW (groups = 1), accumulation mod 2^32."""
    x, w = np.asarray(x), np.asarray(w)
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"conv2d_ref: input has {x.shape[1]} channels, weight expects "
                         f"{w.shape[1]}")
    win = _windows(x.astype(np.int64), w.shape[2], w.shape[3], stride, padding, 0)
    return wrap32(np.einsum("ncyxij,ocij->noyx", win, w.astype(np.int64), optimize=True))


def group_conv2d_ref(x, w, stride=1, padding=0, groups=1) -> np.ndarray:
    """Grouped convolution: input channels split in ``groups`` slices, the weight is
    (O, C/groups, KH, KW) and output slice g sees input slice g only."""
    x, w = np.asarray(x), np.asarray(w)
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    return np.concatenate([conv2d_ref(x[:, k * cg:(k + 1) * cg], w[k * og:(k + 1) * og],
                                      stride, padding) for k in range(groups)], axis=1)


def dense_ref(x, w) -> np.ndarray:
    """int8 (N, K) x int8 (O, K) -> int32 (N, O)."""
    return wrap32(np.asarray(x, np.int64) @ np.asarray(w, np.int64).T)


def epilogue_ref(acc, *, bias=None, residual=None, shift=0, clip=None, relu=False,
                 out_dtype=np.int8) -> np.ndarray:
    """The fused epilogue on an int32 NCHW (or (N, C)) accumulator.

    ``y = clip(((acc + bias + residual) + 2^(shift-1)) >> shift, lo, hi)``, every add
    wrapping mod 2^32, ``>>`` arithmetic, rounding only when ``shift > 0``; ``relu``
    raises ``lo`` to 0. The result is the low 8 bits (``out_dtype=int8``, the VTA
    store) or the int32 value (``out_dtype=int32``).
    """
    y = np.asarray(acc).astype(np.int64)
    if bias is not None:
        shape = (1, -1) + (1,) * (y.ndim - 2)
        y = wrap32(y + np.asarray(bias, np.int64).reshape(shape)).astype(np.int64)
    if residual is not None:
        y = wrap32(y + np.asarray(residual, np.int64)).astype(np.int64)
    if shift:
        y = wrap32(y + (1 << (shift - 1))).astype(np.int64) >> shift
    lo, hi = clip if clip is not None else (None, None)
    if relu:
        lo = 0 if lo is None else max(lo, 0)
    if lo is not None:
        y = np.maximum(y, lo)
    if hi is not None:
        y = np.minimum(y, hi)
    y = wrap32(y)
    return y.astype(np.int8) if np.dtype(out_dtype) == np.int8 else y


def add_ref(a, b, *, shift=0, clip=None, relu=False, out_dtype=np.int8) -> np.ndarray:
    """Element-wise ``a + b`` of two int8 (or int32) tensors, then the epilogue."""
    return epilogue_ref(wrap32(np.asarray(a, np.int64) + np.asarray(b, np.int64)),
                        shift=shift, clip=clip, relu=relu, out_dtype=out_dtype)


def max_pool2d_ref(x, kernel, stride=None, padding=0) -> np.ndarray:
    """int8 NCHW max pooling; padded positions never win (they act as -infinity)."""
    kh, kw = _pair(kernel, "kernel")
    stride = (kh, kw) if stride is None else stride
    win = _windows(np.asarray(x, np.int64), kh, kw, stride, padding, np.iinfo(np.int64).min)
    return win.max(axis=(4, 5)).astype(np.asarray(x).dtype)


def pool_sum_ref(x, kernel, stride=None, padding=0) -> np.ndarray:
    """int32 window sums (zero padding), the first half of average pooling."""
    kh, kw = _pair(kernel, "kernel")
    stride = (kh, kw) if stride is None else stride
    return wrap32(_windows(np.asarray(x, np.int64), kh, kw, stride, padding, 0).sum(axis=(4, 5)))


def round_shift_div(s, area: int) -> np.ndarray:
    """``floor((s + area // 2) / area)``: division rounding half up. For a power-of-two
    ``area`` it is exactly the VTA sequence ADD imm area/2, SHR imm log2(area)."""
    return (np.asarray(s, np.int64) + area // 2) // area


def avg_pool2d_ref(x, kernel, stride=None, padding=0) -> np.ndarray:
    """int8 NCHW average pooling, padding counted in the window (count_include_pad),
    rounding half up (see :func:`round_shift_div`)."""
    kh, kw = _pair(kernel, "kernel")
    return round_shift_div(pool_sum_ref(x, kernel, stride, padding), kh * kw).astype(np.int8)


def global_avg_pool2d_ref(x) -> np.ndarray:
    """int8 NCHW -> int8 (N, C, 1, 1) mean over H x W, rounding half up."""
    x = np.asarray(x)
    return avg_pool2d_ref(x, (x.shape[2], x.shape[3]))
