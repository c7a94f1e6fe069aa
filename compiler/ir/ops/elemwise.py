"""Element-wise and broadcasting operators (computes: :mod:`vtakit.runtime.hostops.elemwise`)."""

from __future__ import annotations

import numpy as np

from ....runtime.hostops import get_hostop
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


for _name in ("add", "subtract", "multiply", "maximum", "minimum", "divide"):
    register_op(_name, infer_type=broadcast_type, compute=get_hostop(_name), num_inputs=2,
                pattern=OpPattern.BROADCAST)

for _name in ("right_shift", "left_shift"):
    register_op(_name, infer_type=_int_only(_name), compute=get_hostop(_name), num_inputs=2,
                pattern=OpPattern.BROADCAST)

for _name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    register_op(_name, infer_type=lambda t, a: broadcast_type(t, out_dtype="bool"),
                compute=get_hostop(_name), num_inputs=2, pattern=OpPattern.BROADCAST)


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


register_op("where", infer_type=_where_type, compute=get_hostop("where"),
            num_inputs=3, pattern=OpPattern.BROADCAST)

for _name in ("sigmoid", "tanh", "exp", "sqrt", "log", "rsqrt", "round", "floor", "ceil"):
    register_op(_name, infer_type=_float_only(_name), compute=get_hostop(_name), num_inputs=1,
                pattern=OpPattern.ELEMWISE)

for _name in ("negative", "abs", "copy", "nn.relu"):
    register_op(_name, infer_type=_same, compute=get_hostop(_name), num_inputs=1,
                pattern=OpPattern.ELEMWISE)

register_op("nn.leaky_relu", attrs={"alpha": 0.01}, infer_type=_float_only("nn.leaky_relu"),
            compute=get_hostop("nn.leaky_relu"), num_inputs=1, pattern=OpPattern.ELEMWISE)


def _clip_type(types, attrs):
    if attrs["a_min"] > attrs["a_max"]:
        raise TypeError(f"clip needs a_min <= a_max, got {attrs['a_min']} > {attrs['a_max']}")
    return tensor_arg(types, 0)


register_op("clip", attrs={"a_min": REQUIRED, "a_max": REQUIRED}, infer_type=_clip_type,
            compute=get_hostop("clip"), num_inputs=1, pattern=OpPattern.ELEMWISE)


def _cast_type(types, attrs):
    return TensorType(tensor_arg(types, 0).shape, attrs["dtype"])


register_op("cast", attrs={"dtype": REQUIRED}, infer_type=_cast_type, compute=get_hostop("cast"),
            num_inputs=1, pattern=OpPattern.ELEMWISE,
            normalize_attrs=lambda a: {**a, "dtype": np.dtype(a["dtype"]).name})


def _fill_type(types, attrs):
    return TensorType(attrs["shape"], attrs["dtype"])


def _fill_norm(a):
    return {**a, "shape": tuple(int(d) for d in a["shape"]), "dtype": np.dtype(a["dtype"]).name}


register_op("zeros", attrs={"shape": REQUIRED, "dtype": "float32"}, infer_type=_fill_type,
            compute=get_hostop("zeros"), num_inputs=0,
            pattern=OpPattern.ELEMWISE, normalize_attrs=_fill_norm)
register_op("ones", attrs={"shape": REQUIRED, "dtype": "float32"}, infer_type=_fill_type,
            compute=get_hostop("ones"), num_inputs=0,
            pattern=OpPattern.ELEMWISE, normalize_attrs=_fill_norm)
register_op("zeros_like", infer_type=_same, compute=get_hostop("zeros_like"), num_inputs=1,
            pattern=OpPattern.ELEMWISE)
register_op("ones_like", infer_type=_same, compute=get_hostop("ones_like"), num_inputs=1,
            pattern=OpPattern.ELEMWISE)
