"""The ``qnn.*`` operators of the quantized IR form (see :mod:`vtakit.compiler.quant`):
attributes and type rules here, computes in the runtime (:mod:`vtakit.runtime.hostops.qnn`
and :mod:`~vtakit.runtime.hostops.pool`, registered by operator name).

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

from ...runtime.hostops import fixed_point as fp
from ...runtime.hostops import get_hostop
from ...runtime.hostops.pool import pad4, pair
from ...runtime.hostops.qnn import (ROUNDINGS, INT_RANGE, add, add_shifts, dequantize, mul,
                                    quantize, requantize)
from ..ir import OpPattern, TensorType, register_op

__all__ = ["ROUNDINGS", "QNN_OPS", "quantize", "dequantize", "requantize", "add", "mul",
           "add_shifts"]

_INT_RANGE = INT_RANGE


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


# --------------------------------------------------------------------------- quantize

def _quantize_type(types, attrs):
    t = _tensor(types, 0, "qnn.quantize")
    if not np.issubdtype(np.dtype(t.dtype), np.floating):
        raise TypeError(f"qnn.quantize: input must be float, got {t.dtype}")
    _check_out_dtype("qnn.quantize", attrs["out_dtype"])
    _check_rounding("qnn.quantize", attrs["rounding"], ("tflite", "onnx"))
    _check_axis("qnn.quantize", t, attrs["scale"], attrs["zero_point"], attrs["axis"])
    return TensorType(t.shape, attrs["out_dtype"])


# --------------------------------------------------------------------------- dequantize

def _dequantize_type(types, attrs):
    t = _tensor(types, 0, "qnn.dequantize")
    if not np.issubdtype(np.dtype(t.dtype), np.integer):
        raise TypeError(f"qnn.dequantize: input must be an integer tensor, got {t.dtype}")
    _check_axis("qnn.dequantize", t, attrs["scale"], attrs["zero_point"], attrs["axis"])
    return TensorType(t.shape, "float32")


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


# --------------------------------------------------------------------------- pools, mean

def _avg_pool2d_type(types, attrs):
    t = types[0]
    if not isinstance(t, TensorType) or t.ndim != 4:
        raise TypeError(f"qnn.avg_pool2d: input must be a 4-D NCHW tensor, got {t!r}")
    if attrs["pool_size"] is None:
        raise ValueError("qnn.avg_pool2d needs attribute 'pool_size'")
    if attrs["rounding"] not in ("tflite", "vta"):
        raise ValueError(f"qnn.avg_pool2d: rounding {attrs['rounding']!r}; expected tflite or vta")
    kh, kw = pair(attrs["pool_size"])
    sh, sw = pair(attrs["strides"])
    top, left, bottom, right = pad4(attrs["padding"])
    n, c, h, w = t.shape
    oh = (h + top + bottom - kh) // sh + 1
    ow = (w + left + right - kw) // sw + 1
    if oh <= 0 or ow <= 0:
        raise TypeError(f"qnn.avg_pool2d: window {kh}x{kw} larger than the padded input {t.shape}")
    return TensorType((n, c, oh, ow), "int32")


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
                infer_type=_quantize_type, compute=get_hostop("qnn.quantize"), num_inputs=1,
                pattern=OpPattern.ELEMWISE,
                description="float -> int: saturate(round(x / scale) + zero_point)")
    register_op("qnn.dequantize", attrs={"scale": None, "zero_point": 0, "axis": None},
                infer_type=_dequantize_type, compute=get_hostop("qnn.dequantize"), num_inputs=1,
                pattern=OpPattern.ELEMWISE,
                description="int -> float32: scale * (x - zero_point)")
    register_op("qnn.requantize", attrs={"scale": None, "zero_point": 0, "axis": None,
                                         "rounding": "tflite", "out_dtype": "int32"},
                infer_type=_requantize_type, compute=get_hostop("qnn.requantize"), num_inputs=1,
                pattern=OpPattern.ELEMWISE,
                description="int32 -> round(x * scale) + zero_point (framework rounding)")
    register_op("qnn.add", attrs=dict(_BINARY_ATTRS), infer_type=_binary_type("qnn.add", ("tflite", "onnx", "vta")),
                compute=get_hostop("qnn.add"), num_inputs=2, pattern=OpPattern.BROADCAST,
                description="quantized add, output zero point added, not clipped")
    register_op("qnn.mul", attrs=dict(_BINARY_ATTRS), infer_type=_binary_type("qnn.mul"),
                compute=get_hostop("qnn.mul"), num_inputs=2, pattern=OpPattern.BROADCAST,
                description="quantized multiply, output zero point added, not clipped")
    register_op("qnn.avg_pool2d", attrs={"pool_size": None, "strides": (1, 1),
                                         "padding": (0, 0, 0, 0), "rounding": "tflite"},
                infer_type=_avg_pool2d_type, compute=get_hostop("qnn.avg_pool2d"), num_inputs=1,
                pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
                description="integer average pool: TFLite (padding not counted, half away "
                            "from zero) or VTA (padding counted, half up) rounding; int32 out")
    register_op("qnn.mean", attrs={"axis": None, "keepdims": False, "in_scale": None,
                                   "in_zero_point": 0, "out_scale": None, "out_zero_point": 0,
                                   "rounding": "tflite", "out_dtype": "int8"},
                infer_type=_mean_type, compute=get_hostop("qnn.mean"), num_inputs=1,
                pattern=OpPattern.COMM_REDUCE,
                description="TFLite's int8 MEAN (sum, requantize with the element count)")


#: Names of the operators this package registers.
QNN_OPS = ("qnn.quantize", "qnn.dequantize", "qnn.requantize", "qnn.add", "qnn.mul",
           "qnn.avg_pool2d", "qnn.mean")

_register()
