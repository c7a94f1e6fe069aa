"""Computes of the ``qnn.*`` operators (quantize, dequantize, requantize, add, mul).

Each is exact: integers in, integers out, with the rounding of the framework named
by its ``rounding`` attribute:

* ``"tflite"``: TFLite's reference kernels (``QuantizeMultiplier`` +
  ``MultiplyByQuantizedMultiplier`` with gemmlowp's double rounding,
  ``TfLiteRound`` = half away from zero);
* ``"tflite_single"`` (requantize only): the same multiplier applied with a single
  rounding half up, as LiteRT's FULLY_CONNECTED does;
* ``"onnx"``: ONNX Runtime (float32 arithmetic, round half to even);
* ``"vta"``: VTA's ALU (power-of-two scales, ``(x + 2^(k-1)) >> k``).

Scales are attributes in double precision: the frontend computes them the way its
framework does, so the op only rounds. The type rules of these operators are in
:mod:`vtakit.compiler.quant.ops`.
"""

from __future__ import annotations

import numpy as np

from . import fixed_point as fp
from . import hostop

__all__ = ["ROUNDINGS", "INT_RANGE", "saturate", "quantize", "dequantize", "requantize",
           "add_shifts", "add", "mul", "ADD_LEFT_SHIFT"]

#: Accepted values of every ``rounding`` attribute.
ROUNDINGS = ("tflite", "tflite_single", "onnx", "vta")

#: The value range of every integer ``out_dtype``.
INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-(1 << 15), (1 << 15) - 1),
             "int32": (fp.INT32_MIN, fp.INT32_MAX)}


def saturate(y, dtype):
    """``y`` clipped to the range of ``dtype`` and cast to it."""
    lo, hi = INT_RANGE[dtype]
    return np.clip(np.asarray(y, np.int64), lo, hi).astype(dtype)


def quantize(x, *, scale, zero_point=0, axis=None, out_dtype="int8", rounding="tflite"):
    """float -> int: ``saturate(round(x / scale) + zero_point)``.

    ``"tflite"``: ``x / scale`` in double, rounded half away from zero (TFLite's
    reference ``AffineQuantize``); ``"onnx"``: float32 division, half to even.
    """
    x = np.asarray(x)
    if rounding == "tflite":
        s = fp.per_axis(np.asarray(scale, np.float64), x.ndim, axis)
        q = fp.round_half_away(x.astype(np.float64) / s)
    else:
        s = fp.per_axis(np.asarray(scale, np.float32), x.ndim, axis)
        q = np.rint(x.astype(np.float32) / s).astype(np.float64)
    lo, hi = INT_RANGE[out_dtype]
    q = np.clip(q, lo - (1 << 31), hi + (1 << 31)).astype(np.int64)
    return saturate(q + fp.per_axis(np.asarray(zero_point, np.int64), x.ndim, axis), out_dtype)


def dequantize(x, *, scale, zero_point=0, axis=None):
    """int -> float32: ``scale * (x - zero_point)``, exact in double then rounded once
    (the same float32 result as TFLite's double and ONNX's float32 formulas)."""
    x = np.asarray(x)
    s = fp.per_axis(np.asarray(np.asarray(scale, np.float32), np.float64), x.ndim, axis)
    z = fp.per_axis(np.asarray(zero_point, np.int64), x.ndim, axis)
    return (s * (x.astype(np.int64) - z)).astype(np.float32)


def requantize(x, *, scale, zero_point=0, axis=None, rounding="tflite", out_dtype="int32"):
    """int32 accumulator -> ``round(x * scale) + zero_point`` with the framework's rounding;
    saturated to ``out_dtype`` (int32 by default: the clip that follows does the rest)."""
    if rounding == "tflite_single":
        return saturate(fp.requantize_tflite(x, scale, zero_point, axis, single_rounding=True),
                         out_dtype)
    fn = {"tflite": fp.requantize_tflite, "onnx": fp.requantize_onnx,
          "vta": fp.requantize_vta}[rounding]
    return saturate(fn(x, scale, zero_point, axis), out_dtype)


#: TFLite rescales both int8 operands of ADD to 20 fractional bits before adding.
ADD_LEFT_SHIFT = 20


def add_shifts(lhs_scale, rhs_scale, out_scale) -> tuple[int, int, int]:
    """``(e_a, e_b, k)`` of an add with power-of-two scales: with ``s`` the smallest scale,
    ``s_a = 2^e_a s``, ``s_b = 2^e_b s`` and ``s_out = 2^k s``.

    Raises
    ------
    ValueError
        When a scale is not a power of two (rounding ``"vta"`` needs them).
    """
    exps = []
    for name, v in (("lhs_scale", lhs_scale), ("rhs_scale", rhs_scale), ("out_scale", out_scale)):
        frac, e = np.frexp(float(v))
        if frac != 0.5:
            raise ValueError(f"qnn.add rounding 'vta' needs power-of-two scales; {name} is {v}")
        exps.append(int(e))
    low = min(exps)
    return exps[0] - low, exps[1] - low, exps[2] - low


def add(a, b, *, lhs_scale, lhs_zero_point=0, rhs_scale, rhs_zero_point=0, out_scale,
        out_zero_point=0, rounding="tflite", out_dtype="int32"):
    """Quantized ``a + b`` (the output zero point added, not clipped).

    ``"tflite"``: TFLite's int8 ADD: both inputs minus their zero points, shifted left
    by 20, scaled by ``s_i / (2 max(s_a, s_b))``; the sum scaled by
    ``2 max(s_a, s_b) / (2^20 s_out)``; each multiplier through QuantizeMultiplier.
    ``"onnx"``: ``rint((s_a (a - z_a) + s_b (b - z_b)) / s_out) + z_out`` in float32.
    ``"vta"`` (power-of-two scales, :func:`add_shifts`): ``((a - z_a) 2^e_a + (b - z_b)
    2^e_b + 2^(k-1)) >> k`` + z_out, exact in integers: VTA's rounding shift.
    """
    a = np.asarray(a, np.int64) - lhs_zero_point
    b = np.asarray(b, np.int64) - rhs_zero_point
    if rounding == "vta":
        ea, eb, k = add_shifts(lhs_scale, rhs_scale, out_scale)
        acc = (a << ea) + (b << eb)
        return saturate(((acc + ((1 << k) >> 1)) >> k) + out_zero_point, out_dtype)
    if rounding == "onnx":
        f = (np.float32(lhs_scale) * a.astype(np.float32)
             + np.float32(rhs_scale) * b.astype(np.float32)) / np.float32(out_scale)
        return saturate(np.rint(f).astype(np.int64) + out_zero_point, out_dtype)
    # Scales are float32 in TFLite; every ratio below is taken in double from them.
    sa, sb, so = (float(np.float32(s)) for s in (lhs_scale, rhs_scale, out_scale))
    twice_max = 2.0 * max(sa, sb)
    ma, ka = fp.quantize_multiplier(sa / twice_max)
    mb, kb = fp.quantize_multiplier(sb / twice_max)
    mo, ko = fp.quantize_multiplier(twice_max / float(np.float32((1 << ADD_LEFT_SHIFT) * so)))
    xa = fp.multiply_by_quantized_multiplier(a << ADD_LEFT_SHIFT, ma, ka)
    xb = fp.multiply_by_quantized_multiplier(b << ADD_LEFT_SHIFT, mb, kb)
    y = fp.multiply_by_quantized_multiplier(fp.wrap_int32(xa + xb), mo, ko)
    return saturate(y + out_zero_point, out_dtype)


def mul(a, b, *, lhs_scale, lhs_zero_point=0, rhs_scale, rhs_zero_point=0, out_scale,
        out_zero_point=0, rounding="tflite", out_dtype="int32"):
    """Quantized ``a * b`` (the output zero point added, not clipped).

    ``"tflite"``: ``(a - z_a)(b - z_b)`` times ``s_a s_b / s_out`` (double) through
    QuantizeMultiplier; ``"onnx"``: float32 as for :func:`add`.
    """
    a = np.asarray(a, np.int64) - lhs_zero_point
    b = np.asarray(b, np.int64) - rhs_zero_point
    if rounding == "onnx":
        f = (np.float32(lhs_scale) * np.float32(rhs_scale) / np.float32(out_scale)
             * (a * b).astype(np.float32))
        return saturate(np.rint(f).astype(np.int64) + out_zero_point, out_dtype)
    sa, sb, so = (float(np.float32(s)) for s in (lhs_scale, rhs_scale, out_scale))
    m, k = fp.quantize_multiplier(sa * sb / so)
    y = fp.multiply_by_quantized_multiplier(fp.wrap_int32(a * b), m, k)
    return saturate(y + out_zero_point, out_dtype)


for _name, _fn in (("qnn.quantize", quantize), ("qnn.dequantize", dequantize),
                   ("qnn.requantize", requantize), ("qnn.add", add), ("qnn.mul", mul)):
    hostop(_name, _fn)
