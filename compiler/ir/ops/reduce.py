"""Reductions over axes (Relay's ``sum``, ``mean``, ``max``, ``min``)."""

from __future__ import annotations

from ....runtime.hostops import get_hostop
from ....runtime.hostops.reduce import reduce_axes
from ..op import OpPattern, register_op
from ..types import TensorType
from ._util import tensor_arg

__all__: list[str] = []


def _norm(a):
    axis = a["axis"]
    if axis is not None and not isinstance(axis, int):
        axis = tuple(int(x) for x in axis)
    return {**a, "axis": axis, "keepdims": bool(a["keepdims"]), "exclude": bool(a["exclude"])}


def _reduce_type(types, attrs):
    x = tensor_arg(types, 0)
    axes = reduce_axes(attrs["axis"], x.ndim, attrs["exclude"])
    if attrs["keepdims"]:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return TensorType(shape, x.dtype)


_ATTRS = {"axis": None, "keepdims": False, "exclude": False}
for _name in ("sum", "mean", "max", "min"):
    register_op(_name, attrs=_ATTRS, infer_type=_reduce_type, compute=get_hostop(_name),
                num_inputs=1,
                pattern=OpPattern.COMM_REDUCE, normalize_attrs=_norm)
