"""Integer arithmetic of quantized inference, exactly as the reference kernels do it.

Plain numpy on int64 intermediates, vectorized over arrays. Three families:

* TFLite (and gemmlowp): a real multiplier becomes a Q31 significand and a
  power-of-two exponent (:func:`quantize_multiplier`), applied with a rounding
  doubling high multiply followed by a rounding right shift
  (:func:`multiply_by_quantized_multiplier`);
* ONNX Runtime: float32 multiply, round half to even (:func:`requantize_onnx`);
* VTA: the ALU's rounding shift ``(x + 2^(k-1)) >> k`` (:func:`requantize_vta`),
  exact only when the scale is a power of two.
"""

from __future__ import annotations

import numpy as np

from ...hw.fixedpoint import (INT32_MAX, INT32_MIN, round_shift_right, rounding_divide_by_pot,
                              srdhm, wrap_int32)

__all__ = [
    "INT32_MIN", "INT32_MAX", "quantize_multiplier", "saturating_rounding_doubling_high_mul",
    "rounding_divide_by_pot", "multiply_by_quantized_multiplier", "round_half_away",
    "requantize_tflite", "requantize_onnx", "requantize_vta", "vta_shift", "wrap_int32",
    "per_axis",
]


def round_half_away(x) -> np.ndarray:
    """Round to nearest, ties away from zero (C's ``std::round``, TFLite's ``TfLiteRound``)."""
    x = np.asarray(x, np.float64)
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def quantize_multiplier(real, *, single_rounding=False) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's ``QuantizeMultiplier``: ``real ~= m * 2^(shift - 31)``, ``m`` in [2^30, 2^31).

    Parameters
    ----------
    real : float or array of float
        Non-negative real multipliers (double precision, as the caller computed them).

    Returns
    -------
    (multiplier, shift) : int64 arrays of ``real``'s shape
        ``shift`` > 0 is a left shift. A zero multiplier gives (0, 0); an exponent
        below -31 flushes to (0, 0) as TFLite does; with ``single_rounding`` an
        exponent above 30 saturates to (2^31 - 1, 30), as TFLite's single-rounding build.
    """
    real = np.asarray(real, np.float64)
    if np.any(real < 0) or not np.all(np.isfinite(real)):
        raise ValueError(f"quantize_multiplier: multipliers must be finite and >= 0, got {real}")
    frac, shift = np.frexp(real)
    q = round_half_away(frac * float(1 << 31)).astype(np.int64)
    carry = q == (1 << 31)
    q = np.where(carry, q // 2, q)
    shift = np.where(carry, shift + 1, shift).astype(np.int64)
    tiny = shift < -31
    q = np.where(tiny | (real == 0), 0, q)
    shift = np.where(tiny | (real == 0), 0, shift)
    if single_rounding:
        big = shift > 30
        q = np.where(big, (1 << 31) - 1, q)
        shift = np.where(big, 30, shift)
    return q, shift


#: gemmlowp's ``SaturatingRoundingDoublingHighMul`` (the ALU's SRDHM lane function).
saturating_rounding_doubling_high_mul = srdhm


def multiply_by_quantized_multiplier(x, multiplier, shift, *, single_rounding=False) -> np.ndarray:
    """TFLite's ``MultiplyByQuantizedMultiplier``: ``x * multiplier * 2^(shift - 31)`` rounded.

    ``x`` int32 values, ``multiplier``/``shift`` from :func:`quantize_multiplier`
    (broadcast against ``x``). Returns int64 values in the int32 range.

    ``single_rounding=False`` (default) is gemmlowp's double rounding
    (:func:`saturating_rounding_doubling_high_mul` then :func:`rounding_divide_by_pot`),
    what TFLite's reference integer kernels (conv, depthwise, add, mean) and
    tflite-micro do. ``True`` is TFLite's ``TFLITE_SINGLE_ROUNDING`` form (one 64-bit
    product, one rounding half up), which LiteRT's FULLY_CONNECTED gives even with the
    reference op resolver (measured on the MLPerf Tiny models). The two differ by
    one step when the first rounding of the double form crosses a half.
    """
    if single_rounding:
        shift = np.minimum(np.asarray(shift, np.int64), 30)
        return round_shift_right(np.asarray(x, np.int64) * np.asarray(multiplier, np.int64),
                                 31 - shift)
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    # The left shift happens in int32 in C; wrap to match.
    xs = wrap_int32(np.asarray(x, np.int64) << left).astype(np.int64)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(xs, multiplier), right)


def per_axis(v, ndim: int, axis) -> np.ndarray:
    """Shape a per-channel vector to broadcast along ``axis`` of an ``ndim``-D tensor."""
    v = np.asarray(v)
    if v.ndim == 0 or axis is None:
        return v
    shape = [1] * ndim
    shape[axis % ndim] = v.shape[0]
    return v.reshape(shape)


def requantize_tflite(x, scale, zero_point=0, axis=None, *, single_rounding=False) -> np.ndarray:
    """``MultiplyByQuantizedMultiplier(x, QuantizeMultiplier(scale)) + zero_point`` as int32."""
    x = np.asarray(x)
    m, s = quantize_multiplier(scale, single_rounding=single_rounding)
    y = multiply_by_quantized_multiplier(x, per_axis(m, x.ndim, axis), per_axis(s, x.ndim, axis),
                                         single_rounding=single_rounding)
    return wrap_int32(y + per_axis(np.asarray(zero_point, np.int64), x.ndim, axis))


def requantize_onnx(x, scale, zero_point=0, axis=None) -> np.ndarray:
    """ONNX Runtime's requantization: ``rint(float32(x) * float32(scale)) + zero_point``.

    The product is clamped to the int32 range before the conversion.
    """
    x = np.asarray(x)
    s = per_axis(np.asarray(scale, np.float32), x.ndim, axis)
    v = np.rint(x.astype(np.float32) * s).astype(np.float64)
    v = np.clip(v, INT32_MIN, INT32_MAX).astype(np.int64)
    return wrap_int32(v + per_axis(np.asarray(zero_point, np.int64), x.ndim, axis))


def vta_shift(scale) -> int | None:
    """``k`` when every element of ``scale`` is exactly ``2^-k`` (0 <= k <= 31), else None."""
    s = np.unique(np.asarray(scale, np.float64))
    if s.size != 1 or s[0] <= 0:
        return None
    frac, exp = np.frexp(s[0])
    if frac != 0.5:
        return None
    k = 1 - int(exp)
    return k if 0 <= k <= 31 else None


def requantize_vta(x, scale, zero_point=0, axis=None) -> np.ndarray:
    """VTA's rounding shift: ``((x + 2^(k-1)) >> k) + zero_point`` for ``scale == 2^-k``.

    The add wraps at 32 bits as on the ALU. Raises ValueError when ``scale`` is
    not one power of two in [2^-31, 1].
    """
    k = vta_shift(scale)
    if k is None:
        raise ValueError(f"requantize rounding 'vta' needs one scale 2^-k with 0 <= k <= 31, "
                         f"got {np.asarray(scale).ravel()[:4]}")
    x = np.asarray(x, np.int64)
    r = (1 << (k - 1)) if k else 0
    y = wrap_int32(x + r).astype(np.int64) >> k
    return wrap_int32(y + per_axis(np.asarray(zero_point, np.int64), x.ndim, axis))
