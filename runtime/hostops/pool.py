"""Computes of integer average pooling and mean with the frameworks' exact rounding (NCHW):
``qnn.avg_pool2d`` and ``qnn.mean``."""

from __future__ import annotations

import numpy as np

from . import fixed_point as fp
from . import hostop
from ..layout import pair  # noqa: F401  (re-exported)

__all__ = ["avg_pool2d_int", "mean_int", "divide_round", "pool_counts", "pair", "pad4"]


def pad4(p) -> tuple:
    """An int, (ph, pw) or (top, left, bottom, right) -> (top, left, bottom, right)."""
    p = (int(p),) * 4 if np.isscalar(p) else tuple(int(a) for a in p)
    return p * 2 if len(p) == 2 else p


def divide_round(s, count, rounding: str) -> np.ndarray:
    """``s / count`` for integer arrays: ``"tflite"`` rounds half away from zero
    (``(s +- count/2) / count`` with C truncation), ``"vta"`` half up (floor)."""
    s = np.asarray(s, np.int64)
    count = np.asarray(count, np.int64)
    if rounding == "vta":
        return (s + count // 2) // count
    half = count // 2
    num = np.where(s > 0, s + half, s - half)
    q = np.abs(num) // count
    return np.where(num < 0, -q, q)


def avg_pool2d_int(x, *, pool_size, strides=(1, 1), padding=(0, 0, 0, 0), rounding="tflite"):
    """int NCHW -> int32 window means.

    ``"tflite"``: TFLite's int8 AVERAGE_POOL_2D: padded positions are not counted and
    the mean rounds half away from zero. ``"vta"``: padding counted as zeros
    (``count_include_pad``), rounding half up, as the VTA pool operator.
    """
    x = np.asarray(x, np.int64)
    kh, kw = pair(pool_size)
    sh, sw = pair(strides)
    top, left, bottom, right = pad4(padding)
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (h + top + bottom - kh) // sh + 1
    ow = (w + left + right - kw) // sw + 1
    sums = np.zeros((n, c, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            sums += xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
    return divide_round(sums, pool_counts((h, w), pool_size, strides, padding, rounding),
                        rounding).astype(np.int32)


def pool_counts(hw, pool_size, strides, padding, rounding) -> np.ndarray:
    """The divisor of every output position of an average pool over an (H, W) input:
    the window's positions inside the input (``"tflite"``: padding is not counted) or
    the whole window (``"vta"``)."""
    h, w = hw
    kh, kw = pair(pool_size)
    sh, sw = pair(strides)
    top, left, bottom, right = pad4(padding)
    oh = (h + top + bottom - kh) // sh + 1
    ow = (w + left + right - kw) // sw + 1
    if rounding == "vta":
        return np.full((oh, ow), kh * kw, np.int64)
    ones = np.pad(np.ones((h, w), np.int64), ((top, bottom), (left, right)))
    counts = np.zeros((oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            counts += ones[i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
    return counts


def mean_int(x, *, axis, keepdims=False, in_scale, in_zero_point=0, out_scale,
             out_zero_point=0, rounding="tflite", out_dtype="int8"):
    """TFLite's int8 MEAN (reference kernels), three cases as TFLite picks them:

    * ``"tflite"`` (scales or zero points differ): ``sum(x) - zp_in * count`` times
      ``QuantizeMultiplier(s_in / s_out)`` with ``1/count`` folded into the multiplier
      (TFLite's ``QuantizedMeanOrSum``), plus ``zp_out``;
    * ``"tflite_same"`` (same scale and zero point in and out): ``sum(x) / count``
      truncated toward zero;
    * ``"tflite_float"`` (otherwise): the float formula
      ``round(float(sum) / count * (s_in / s_out) - zp_in * (s_in / s_out)) + zp_out``
      in float32.
    """
    x = np.asarray(x)
    axes = tuple(sorted(a % x.ndim for a in axis))
    count = int(np.prod([x.shape[a] for a in axes]))
    lo, hi = np.iinfo(out_dtype).min, np.iinfo(out_dtype).max
    if rounding == "tflite":
        # The multiplier s_in/s_out absorbs 1/count: shifted left by floor(log2(count))
        # (at most 32, and keeping the exponent >= -31), then divided by the count.
        m, k = fp.quantize_multiplier(float(np.float32(in_scale)) / float(np.float32(out_scale)))
        m, k = int(m), int(k)
        sh = min(count.bit_length() - 1, 32, 31 + k)
        m = (m << sh) // count
        k -= sh
        s = x.astype(np.int64).sum(axis=axes, keepdims=keepdims) - in_zero_point * count
        acc = fp.multiply_by_quantized_multiplier(fp.wrap_int32(s), m, k)
        y = acc + out_zero_point
    elif rounding == "tflite_same":
        s = x.astype(np.int64).sum(axis=axes, keepdims=keepdims)
        y = np.sign(s) * (np.abs(s) // count)
    elif rounding == "tflite_float":
        scale = np.float32(in_scale) / np.float32(out_scale)
        bias = np.float32(-in_zero_point) * scale
        s = x.astype(np.int64).sum(axis=axes, keepdims=keepdims).astype(np.float32)
        f = (s / np.float32(count)) * scale + bias
        y = fp.round_half_away(f.astype(np.float32)) + out_zero_point
    else:
        raise ValueError(f"qnn.mean: rounding {rounding!r}; expected tflite, tflite_same or "
                         "tflite_float")
    return np.clip(np.asarray(y, np.int64), lo, hi).astype(out_dtype)


hostop("qnn.avg_pool2d", avg_pool2d_int)
hostop("qnn.mean", mean_int)
