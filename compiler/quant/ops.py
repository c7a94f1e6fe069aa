"""The ``qnn.*`` operators of the quantized IR form (see :mod:`vtakit.compiler.quant`).

Each op's compute is exact: integers in, integers out, with the rounding of the
framework named by its ``rounding`` attribute:

* ``"tflite"``: TFLite's reference kernels (``QuantizeMultiplier`` +
  ``MultiplyByQuantizedMultiplier`` with gemmlowp's double rounding,
  ``TfLiteRound`` = half away from zero);
* ``"tflite_single"`` (requantize only): the same multiplier applied with a single
  rounding half up, as LiteRT's FULLY_CONNECTED does;
* ``"onnx"``: ONNX Runtime (float32 arithmetic, round half to even);
* ``"vta"``: VTA's ALU (power-of-two scales, ``(x + 2^(k-1)) >> k``).

Scales are attributes in double precision: the frontend computes them the way its
framework does (e.g. TFLite multiplies float32 scales in double for per-channel
convolutions, in float32 for per-tensor fully connected layers), so the op only
rounds.
"""

from __future__ import annotations

import numpy as np

from ..ir import OpPattern, TensorType, register_op
from . import fixed_point as fp
from .pool import avg_pool2d_int, avg_pool2d_type, mean_int

__all__ = ["ROUNDINGS", "QNN_OPS"]

#: Accepted values of every ``rounding`` attribute.
ROUNDINGS = ("tflite", "tflite_single", "onnx", "vta")

_INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-(1 << 15), (1 << 15) - 1),
              "int32": (fp.INT32_MIN, fp.INT32_MAX)}


def _tensor(types, i, op):
    t = types[i]
    if not isinstance(t, TensorType):
        raise TypeError(f"{op}: argument {i} must be a tensor, got {t!r}")
    return t


def _check_rounding(op, rounding, allowed=ROUNDINGS):
    if rounding not in allowed:
        raise ValueError(f"{op}: rounding {rounding!r}; expected one of {', '.join(allowed)}")


def _check_out_dtype(op, dtype):
    if dtype not in _INT_RANGE:
        raise ValueError(f"{op}: out_dtype {dtype!r}; expected one of {', '.join(_INT_RANGE)}")


def _check_axis(op, t, scale, zero_point, axis):
    n = max(np.size(scale), np.size(zero_point))
    if n > 1 or np.ndim(scale) or np.ndim(zero_point):
        if axis is None:
            raise TypeError(f"{op}: per-channel scale/zero_point need an axis")
        if not -t.ndim <= axis < t.ndim:
            raise TypeError(f"{op}: axis {axis} is out of range for shape {t.shape}")
        if n not in (1, t.shape[axis]):
            raise TypeError(f"{op}: {n} per-channel parameters for axis {axis} of shape "
                            f"{t.shape} (expected {t.shape[axis]})")


def _saturate(y, dtype):
    lo, hi = _INT_RANGE[dtype]
    return np.clip(np.asarray(y, np.int64), lo, hi).astype(dtype)


# --------------------------------------------------------------------------- quantize

def _quantize_type(types, attrs):
    t = _tensor(types, 0, "qnn.quantize")
    if not np.issubdtype(np.dtype(t.dtype), np.floating):
        raise TypeError(f"qnn.quantize: input must be float, got {t.dtype}")
    _check_out_dtype("qnn.quantize", attrs["out_dtype"])
    _check_rounding("qnn.quantize", attrs["rounding"], ("tflite", "onnx"))
    _check_axis("qnn.quantize", t, attrs["scale"], attrs["zero_point"], attrs["axis"])
    return TensorType(t.shape, attrs["out_dtype"])


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
    lo, hi = _INT_RANGE[out_dtype]
    q = np.clip(q, lo - (1 << 31), hi + (1 << 31)).astype(np.int64)
    return _saturate(q + fp.per_axis(np.asarray(zero_point, np.int64), x.ndim, axis), out_dtype)


# --------------------------------------------------------------------------- dequantize

def _dequantize_type(types, attrs):
    t = _tensor(types, 0, "qnn.dequantize")
    if not np.issubdtype(np.dtype(t.dtype), np.integer):
        raise TypeError(f"qnn.dequantize: input must be an integer tensor, got {t.dtype}")
    _check_axis("qnn.dequantize", t, attrs["scale"], attrs["zero_point"], attrs["axis"])
    return TensorType(t.shape, "float32")


def dequantize(x, *, scale, zero_point=0, axis=None):
    """int -> float32: ``scale * (x - zero_point)``, exact in double then rounded once
    (the same float32 result as TFLite's double and ONNX's float32 formulas)."""
    x = np.asarray(x)
    s = fp.per_axis(np.asarray(np.asarray(scale, np.float32), np.float64), x.ndim, axis)
    z = fp.per_axis(np.asarray(zero_point, np.int64), x.ndim, axis)
    return (s * (x.astype(np.int64) - z)).astype(np.float32)


# --------------------------------------------------------------------------- requantize

def _requantize_type(types, attrs):
    t = _tensor(types, 0, "qnn.requantize")
    if t.dtype not in ("int32", "int16", "int8", "uint8"):
        raise TypeError(f"qnn.requantize: input must be int32 (or a narrower int), got {t.dtype}")
    _check_rounding("qnn.requantize", attrs["rounding"])
    _check_out_dtype("qnn.requantize", attrs["out_dtype"])
    _check_axis("qnn.requantize", t, attrs["scale"], attrs["zero_point"], attrs["axis"])
    if attrs["rounding"] == "vta" and fp.vta_shift(attrs["scale"]) is None:
        raise ValueError(f"qnn.requantize: rounding 'vta' needs a power-of-two scale 2^-k "
                         f"(0 <= k <= 31), got {attrs['scale']!r}")
    return TensorType(t.shape, attrs["out_dtype"])


def requantize(x, *, scale, zero_point=0, axis=None, rounding="tflite", out_dtype="int32"):
    """int32 accumulator -> ``round(x * scale) + zero_point`` with the framework's rounding;
    saturated to ``out_dtype`` (int32 by default: the clip that follows does the rest)."""
    if rounding == "tflite_single":
        return _saturate(fp.requantize_tflite(x, scale, zero_point, axis, single_rounding=True),
                         out_dtype)
    fn = {"tflite": fp.requantize_tflite, "onnx": fp.requantize_onnx,
          "vta": fp.requantize_vta}[rounding]
    return _saturate(fn(x, scale, zero_point, axis), out_dtype)


# --------------------------------------------------------------------------- add / mul

_BINARY_ATTRS = {"lhs_scale": None, "lhs_zero_point": 0, "rhs_scale": None, "rhs_zero_point": 0,
                 "out_scale": None, "out_zero_point": 0, "rounding": "tflite",
                 "out_dtype": "int32"}


def _binary_type(name, roundings=("tflite", "onnx")):
    def infer(types, attrs):
        a, b = _tensor(types, 0, name), _tensor(types, 1, name)
        for k in ("lhs_scale", "rhs_scale", "out_scale"):
            if attrs[k] is None or not attrs[k] > 0:
                raise ValueError(f"{name}: {k} must be a positive float, got {attrs[k]!r}")
        _check_rounding(name, attrs["rounding"], roundings)
        if attrs["rounding"] == "vta":
            add_shifts(attrs["lhs_scale"], attrs["rhs_scale"], attrs["out_scale"])
        _check_out_dtype(name, attrs["out_dtype"])
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise TypeError(f"{name}: shapes {a.shape} and {b.shape} do not broadcast") from None
        return TensorType(shape, attrs["out_dtype"])
    return infer


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


def tflite_add_multipliers(lhs_scale, rhs_scale, out_scale) -> tuple:
    """TFLite's int8 ADD rescales: ``((m_a, s_a), (m_b, s_b), (m_out, s_out))`` of
    :func:`~.fixed_point.quantize_multiplier`; the operands (minus their zero points,
    shifted left by :data:`ADD_LEFT_SHIFT`) are scaled by the first two, their sum by the
    third."""
    # Scales are float32 in TFLite; every ratio below is taken in double from them.
    sa, sb, so = (float(np.float32(s)) for s in (lhs_scale, rhs_scale, out_scale))
    twice_max = 2.0 * max(sa, sb)
    return (fp.quantize_multiplier(sa / twice_max), fp.quantize_multiplier(sb / twice_max),
            fp.quantize_multiplier(twice_max / float(np.float32((1 << ADD_LEFT_SHIFT) * so))))


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
        return _saturate(((acc + ((1 << k) >> 1)) >> k) + out_zero_point, out_dtype)
    if rounding == "onnx":
        f = (np.float32(lhs_scale) * a.astype(np.float32)
             + np.float32(rhs_scale) * b.astype(np.float32)) / np.float32(out_scale)
        return _saturate(np.rint(f).astype(np.int64) + out_zero_point, out_dtype)
    (ma, ka), (mb, kb), (mo, ko) = tflite_add_multipliers(lhs_scale, rhs_scale, out_scale)
    xa = fp.multiply_by_quantized_multiplier(a << ADD_LEFT_SHIFT, ma, ka)
    xb = fp.multiply_by_quantized_multiplier(b << ADD_LEFT_SHIFT, mb, kb)
    y = fp.multiply_by_quantized_multiplier(fp.wrap_int32(xa + xb), mo, ko)
    return _saturate(y + out_zero_point, out_dtype)


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
        return _saturate(np.rint(f).astype(np.int64) + out_zero_point, out_dtype)
    sa, sb, so = (float(np.float32(s)) for s in (lhs_scale, rhs_scale, out_scale))
    m, k = fp.quantize_multiplier(sa * sb / so)
    y = fp.multiply_by_quantized_multiplier(fp.wrap_int32(a * b), m, k)
    return _saturate(y + out_zero_point, out_dtype)


# --------------------------------------------------------------------------- pools, mean

def _mean_type(types, attrs):
    t = _tensor(types, 0, "qnn.mean")
    axes = sorted(a % t.ndim for a in attrs["axis"])
    shape = tuple(1 if i in axes else d for i, d in enumerate(t.shape)
                  if attrs["keepdims"] or i not in axes)
    _check_out_dtype("qnn.mean", attrs["out_dtype"])
    return TensorType(shape, attrs["out_dtype"])


def _register():
    register_op("qnn.quantize", attrs={"scale": None, "zero_point": 0, "axis": None,
                                       "out_dtype": "int8", "rounding": "tflite"},
                infer_type=_quantize_type, compute=quantize, num_inputs=1,
                pattern=OpPattern.ELEMWISE,
                description="float -> int: saturate(round(x / scale) + zero_point)")
    register_op("qnn.dequantize", attrs={"scale": None, "zero_point": 0, "axis": None},
                infer_type=_dequantize_type, compute=dequantize, num_inputs=1,
                pattern=OpPattern.ELEMWISE,
                description="int -> float32: scale * (x - zero_point)")
    register_op("qnn.requantize", attrs={"scale": None, "zero_point": 0, "axis": None,
                                         "rounding": "tflite", "out_dtype": "int32"},
                infer_type=_requantize_type, compute=requantize, num_inputs=1,
                pattern=OpPattern.ELEMWISE,
                description="int32 -> round(x * scale) + zero_point (framework rounding)")
    register_op("qnn.add", attrs=dict(_BINARY_ATTRS), infer_type=_binary_type("qnn.add", ("tflite", "onnx", "vta")),
                compute=add, num_inputs=2, pattern=OpPattern.BROADCAST,
                description="quantized add, output zero point added, not clipped")
    register_op("qnn.mul", attrs=dict(_BINARY_ATTRS), infer_type=_binary_type("qnn.mul"),
                compute=mul, num_inputs=2, pattern=OpPattern.BROADCAST,
                description="quantized multiply, output zero point added, not clipped")
    register_op("qnn.avg_pool2d", attrs={"pool_size": None, "strides": (1, 1),
                                         "padding": (0, 0, 0, 0), "rounding": "tflite"},
                infer_type=avg_pool2d_type, compute=avg_pool2d_int, num_inputs=1,
                pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
                description="integer average pool: TFLite (padding not counted, half away "
                            "from zero) or VTA (padding counted, half up) rounding; int32 out")
    register_op("qnn.mean", attrs={"axis": None, "keepdims": False, "in_scale": None,
                                   "in_zero_point": 0, "out_scale": None, "out_zero_point": 0,
                                   "rounding": "tflite", "out_dtype": "int8"},
                infer_type=_mean_type, compute=mean_int, num_inputs=1,
                pattern=OpPattern.COMM_REDUCE,
                description="TFLite's int8 MEAN (sum, requantize with the element count)")


#: Names of the operators this package registers.
QNN_OPS = ("qnn.quantize", "qnn.dequantize", "qnn.requantize", "qnn.add", "qnn.mul",
           "qnn.avg_pool2d", "qnn.mean")

_register()
