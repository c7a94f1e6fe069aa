"""Element-wise and broadcasting operators."""

from __future__ import annotations

import numpy as np

from ..op import REQUIRED, OpPattern, register_op
from ..types import TensorType
from ._util import broadcast_type, is_float, is_int, tensor_arg

__all__: list[str] = []


def _same(types, attrs):
    return tensor_arg(types, 0)


def _float_only(name):
    def infer(types, attrs):
        t = tensor_arg(types, 0)
        if not is_float(t.dtype):
            raise TypeError(f"{name} needs a float tensor, got {t.dtype}")
        return t
    return infer


def _int_only(name):
    def infer(types, attrs):
        t = broadcast_type(types)
        if not is_int(t.dtype):
            raise TypeError(f"{name} needs integer tensors, got {t.dtype}")
        return t
    return infer


def _keep(fn):
    """Wrap a numpy ufunc so the result keeps the first input's dtype (no promotion)."""
    def compute(*xs, **attrs):
        return np.asarray(fn(*xs)).astype(xs[0].dtype, copy=False)
    return compute


def _truncdiv(a, b):
    if is_int(a.dtype):
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        q = np.abs(a64) // np.abs(b64)
        return (np.sign(a64) * np.sign(b64) * q).astype(np.result_type(a, b))
    return a / b


for _name, _fn in [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                   ("maximum", np.maximum), ("minimum", np.minimum),
                   ("divide", _truncdiv)]:
    register_op(_name, infer_type=broadcast_type, compute=_keep(_fn), num_inputs=2,
                pattern=OpPattern.BROADCAST)


def _shift(fn):
    def compute(a, b):
        # shift counts beyond the width saturate like arithmetic shifts do in hardware
        bits = np.dtype(a.dtype).itemsize * 8
        return fn(a.astype(np.int64), np.clip(b.astype(np.int64), 0, bits)).astype(a.dtype)
    return compute


register_op("right_shift", infer_type=_int_only("right_shift"), compute=_shift(np.right_shift),
            num_inputs=2, pattern=OpPattern.BROADCAST)
register_op("left_shift", infer_type=_int_only("left_shift"), compute=_shift(np.left_shift),
            num_inputs=2, pattern=OpPattern.BROADCAST)


def _compare(fn):
    def compute(a, b):
        return fn(a, b)
    return compute


for _name, _fn in [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                   ("less_equal", np.less_equal), ("greater", np.greater),
                   ("greater_equal", np.greater_equal)]:
    register_op(_name, infer_type=lambda t, a: broadcast_type(t, out_dtype="bool"),
                compute=_compare(_fn), num_inputs=2, pattern=OpPattern.BROADCAST)


def _where_type(types, attrs):
    c = tensor_arg(types, 0)
    t = broadcast_type(types[1:])
    if c.dtype != "bool":
        raise TypeError(f"where's condition must be bool, got {c.dtype}")
    try:
        shape = np.broadcast_shapes(c.shape, t.shape)
    except ValueError:
        raise TypeError(f"condition shape {c.shape} does not broadcast with {t.shape}") from None
    return TensorType(shape, t.dtype)


register_op("where", infer_type=_where_type, compute=lambda c, a, b: np.where(c, a, b),
            num_inputs=3, pattern=OpPattern.BROADCAST)

for _name, _fn in [("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("tanh", np.tanh),
                   ("exp", np.exp), ("sqrt", np.sqrt), ("log", np.log),
                   ("rsqrt", lambda x: 1 / np.sqrt(x)), ("round", np.round),
                   ("floor", np.floor), ("ceil", np.ceil)]:
    register_op(_name, infer_type=_float_only(_name), compute=_keep(_fn), num_inputs=1,
                pattern=OpPattern.ELEMWISE)

for _name, _fn in [("negative", np.negative), ("abs", np.abs), ("copy", np.copy)]:
    register_op(_name, infer_type=_same, compute=_keep(_fn), num_inputs=1,
                pattern=OpPattern.ELEMWISE)

register_op("nn.relu", infer_type=_same, num_inputs=1, pattern=OpPattern.ELEMWISE,
            compute=lambda x: np.maximum(x, x.dtype.type(0)))


def _leaky(x, alpha):
    return np.where(x > 0, x, x * x.dtype.type(alpha)).astype(x.dtype)


register_op("nn.leaky_relu", attrs={"alpha": 0.01}, infer_type=_float_only("nn.leaky_relu"),
            compute=_leaky, num_inputs=1, pattern=OpPattern.ELEMWISE)


def _clip_bounds(dtype, a_min, a_max):
    if is_int(dtype):
        info = np.iinfo(dtype)
        lo = int(np.clip(np.ceil(a_min), info.min, info.max))
        hi = int(np.clip(np.floor(a_max), info.min, info.max))
        return np.dtype(dtype).type(lo), np.dtype(dtype).type(hi)
    return np.dtype(dtype).type(a_min), np.dtype(dtype).type(a_max)


def _clip(x, a_min, a_max):
    lo, hi = _clip_bounds(x.dtype, a_min, a_max)
    return np.minimum(np.maximum(x, lo), hi)


def _clip_type(types, attrs):
    if attrs["a_min"] > attrs["a_max"]:
        raise TypeError(f"clip needs a_min <= a_max, got {attrs['a_min']} > {attrs['a_max']}")
    return tensor_arg(types, 0)


register_op("clip", attrs={"a_min": REQUIRED, "a_max": REQUIRED}, infer_type=_clip_type,
            compute=_clip, num_inputs=1, pattern=OpPattern.ELEMWISE)


def _cast_type(types, attrs):
    return TensorType(tensor_arg(types, 0).shape, attrs["dtype"])


def _cast(x, dtype):
    # float -> int casts truncate toward zero (C semantics); out-of-range wraps
    if is_float(x.dtype) and is_int(dtype):
        return np.trunc(x).astype(np.int64).astype(dtype)
    return x.astype(dtype)


register_op("cast", attrs={"dtype": REQUIRED}, infer_type=_cast_type, compute=_cast,
            num_inputs=1, pattern=OpPattern.ELEMWISE,
            normalize_attrs=lambda a: {**a, "dtype": np.dtype(a["dtype"]).name})


def _fill_type(types, attrs):
    return TensorType(attrs["shape"], attrs["dtype"])


def _fill_norm(a):
    return {**a, "shape": tuple(int(d) for d in a["shape"]), "dtype": np.dtype(a["dtype"]).name}


register_op("zeros", attrs={"shape": REQUIRED, "dtype": "float32"}, infer_type=_fill_type,
            compute=lambda shape, dtype: np.zeros(shape, dtype), num_inputs=0,
            pattern=OpPattern.ELEMWISE, normalize_attrs=_fill_norm)
register_op("ones", attrs={"shape": REQUIRED, "dtype": "float32"}, infer_type=_fill_type,
            compute=lambda shape, dtype: np.ones(shape, dtype), num_inputs=0,
            pattern=OpPattern.ELEMWISE, normalize_attrs=_fill_norm)
register_op("zeros_like", infer_type=_same, compute=lambda x: np.zeros_like(x), num_inputs=1,
            pattern=OpPattern.ELEMWISE)
register_op("ones_like", infer_type=_same, compute=lambda x: np.ones_like(x), num_inputs=1,
            pattern=OpPattern.ELEMWISE)
