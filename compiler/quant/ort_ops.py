"""``qnn.*`` operators for onnxruntime's fused kernels that are not an integer layer
(attributes and type rules; the computes are in :mod:`vtakit.runtime.hostops.ort`).

Each op takes and returns int8-domain tensors (a uint8 ONNX tensor ``u`` is held as
``u - 128``, see :mod:`vtakit.compiler.frontend.onnx`) and computes exactly the
kernel of :mod:`vtakit.runtime.hostops.ort_kernels` on the raw values (``raw_dtype``),
which is where each formula is documented with its onnxruntime source:

* ``qnn.ort_avg_pool2d``: QLinearAveragePool (float32 window sums, the output zero
  point added before rounding, in the raw domain);
* ``qnn.ort_global_avg_pool2d``: QLinearGlobalAveragePool (exact integer sum,
  MlasRequantizeOutput);
* ``qnn.ort_softmax``: QLinearSoftmax (exp table, ``floor(1 / y_scale)``);
* ``qnn.lut``: a 256-entry table (QLinearSigmoid, QLinearLeakyRelu), built by the
  frontend with :func:`.ort_kernels.lookup_table`.

They run on the host (float32 arithmetic or a table lookup, not VTA's ALU). Measured
on this shared 2-core machine (numpy, per call): a 3x3 average pool over 1x64x56x56,
6-10 ms (nine float32 passes, one per tap, in onnxruntime's order); a global
average pool over 1x512x7x7, 0.04-0.3 ms; a softmax over 1000 values, 0.1 ms; a
table over 1x64x56x56, 0.2-0.7 ms.
"""

from __future__ import annotations

from ...runtime.hostops import get_hostop
from ...runtime.hostops import ort_kernels as K
from ...runtime.hostops.ort import from_raw, pool_kw, to_raw
from ..ir import OpPattern, TensorType, register_op

__all__ = ["ORT_OPS", "to_raw", "from_raw"]

_RAW = ("uint8", "int8")


def _int8_input(op, types):
    t = types[0]
    if not isinstance(t, TensorType) or t.dtype != "int8":
        raise TypeError(f"{op}: input must be an int8 tensor, got {t!r}")
    return t


def _check_raw(op, attrs):
    if attrs["raw_dtype"] not in _RAW:
        raise ValueError(f"{op}: raw_dtype {attrs['raw_dtype']!r}; expected uint8 or int8")


# --------------------------------------------------------------------------- pools

def _avg_pool_type(types, attrs):
    t = _int8_input("qnn.ort_avg_pool2d", types)
    _check_raw("qnn.ort_avg_pool2d", attrs)
    if t.ndim != 4:
        raise TypeError(f"qnn.ort_avg_pool2d: input must be NCHW, got shape {t.shape}")
    kw = pool_kw(attrs)
    (kh, kwd), (sh, sw), (top, left, bottom, right) = kw["kernel"], kw["strides"], kw["pads"]
    oh = K.avg_pool_out_size(t.shape[2], kh, sh, top, bottom, kw["ceil_mode"])
    ow = K.avg_pool_out_size(t.shape[3], kwd, sw, left, right, kw["ceil_mode"])
    if oh <= 0 or ow <= 0:
        raise TypeError(f"qnn.ort_avg_pool2d: window {kh}x{kwd} larger than the padded input "
                        f"{t.shape}")
    return TensorType(t.shape[:2] + (oh, ow), "int8")


def _gap_type(types, attrs):
    t = _int8_input("qnn.ort_global_avg_pool2d", types)
    _check_raw("qnn.ort_global_avg_pool2d", attrs)
    if t.ndim < 3:
        raise TypeError(f"qnn.ort_global_avg_pool2d: input must be NC[D...], got {t.shape}")
    return TensorType(t.shape[:2] + (1,) * (t.ndim - 2), "int8")


# --------------------------------------------------------------------------- softmax, table

def _same_type(name):
    def infer(types, attrs):
        t = _int8_input(name, types)
        _check_raw(name, attrs)
        return TensorType(t.shape, "int8")
    return infer


def _lut_type(types, attrs):
    t = _int8_input("qnn.lut", types)
    table = attrs["table"]
    if table is None or len(table) != 256 or not all(-128 <= int(v) <= 127 for v in table):
        raise ValueError("qnn.lut: table must hold 256 int8 values (indexed by x + 128)")
    return TensorType(t.shape, "int8")


def lut_table(fn, in_scale, in_zero_point, out_scale, out_zero_point, raw_dtype):
    """The int8-domain table of :func:`.ort_kernels.lookup_table` (zero points raw)."""
    t = K.lookup_table(fn, in_scale, in_zero_point, out_scale, out_zero_point, raw_dtype)
    return tuple(int(v) for v in from_raw(t, raw_dtype))


def _register():
    q = {"in_scale": None, "in_zero_point": 0, "out_scale": None, "out_zero_point": 0,
         "raw_dtype": "int8"}
    register_op("qnn.ort_avg_pool2d",
                attrs=dict(pool_size=None, strides=(1, 1), padding=(0, 0, 0, 0),
                           count_include_pad=False, ceil_mode=False, **q),
                infer_type=_avg_pool_type, compute=get_hostop("qnn.ort_avg_pool2d"),
                num_inputs=1,
                pattern=OpPattern.OPAQUE,
                description="onnxruntime's QLinearAveragePool (float32, host)")
    register_op("qnn.ort_global_avg_pool2d", attrs=dict(q), infer_type=_gap_type,
                compute=get_hostop("qnn.ort_global_avg_pool2d"), num_inputs=1,
                pattern=OpPattern.OPAQUE,
                description="onnxruntime's QLinearGlobalAveragePool (integer sum, host)")
    register_op("qnn.ort_softmax",
                attrs={"axis": -1, "in_scale": None, "out_scale": None, "out_zero_point": 0,
                       "raw_dtype": "int8"},
                infer_type=_same_type("qnn.ort_softmax"),
                compute=get_hostop("qnn.ort_softmax"), num_inputs=1,
                pattern=OpPattern.OPAQUE,
                description="onnxruntime's QLinearSoftmax (exp table, float32, host)")
    register_op("qnn.lut", attrs={"table": None}, infer_type=_lut_type, compute=get_hostop("qnn.lut"),
                num_inputs=1, pattern=OpPattern.ELEMWISE,
                description="int8 -> int8 through a 256-entry table (host)")


#: Names of the operators this module registers.
ORT_OPS = ("qnn.ort_avg_pool2d", "qnn.ort_global_avg_pool2d", "qnn.ort_softmax", "qnn.lut")

_register()
