"""Reductions over axes (Relay's ``sum``, ``mean``, ``max``, ``min``)."""

from __future__ import annotations

import numpy as np

from ..op import OpPattern, register_op
from ..types import TensorType
from ._util import is_int, norm_axis, tensor_arg

__all__: list[str] = []


def _axes(axis, ndim, exclude):
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(sorted({norm_axis(a, ndim) for a in axes}))
    if exclude:
        axes = tuple(i for i in range(ndim) if i not in axes)
    return axes


def _norm(a):
    axis = a["axis"]
    if axis is not None and not isinstance(axis, int):
        axis = tuple(int(x) for x in axis)
    return {**a, "axis": axis, "keepdims": bool(a["keepdims"]), "exclude": bool(a["exclude"])}


def _reduce_type(types, attrs):
    x = tensor_arg(types, 0)
    axes = _axes(attrs["axis"], x.ndim, attrs["exclude"])
    if attrs["keepdims"]:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return TensorType(shape, x.dtype)


def _sum(x, axis, keepdims, exclude):
    axes = _axes(axis, x.ndim, exclude)
    return np.asarray(x.sum(axis=axes, keepdims=keepdims, dtype=x.dtype))


def _mean(x, axis, keepdims, exclude):
    axes = _axes(axis, x.ndim, exclude)
    if is_int(x.dtype):
        count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        total = x.astype(np.int64).sum(axis=axes, keepdims=keepdims)
        return np.asarray(np.sign(total) * (np.abs(total) // count)).astype(x.dtype)
    return np.asarray(x.mean(axis=axes, keepdims=keepdims, dtype=np.float64)).astype(x.dtype)


def _minmax(fn):
    def compute(x, axis, keepdims, exclude):
        return np.asarray(fn(x, axis=_axes(axis, x.ndim, exclude), keepdims=keepdims))
    return compute


_ATTRS = {"axis": None, "keepdims": False, "exclude": False}
for _name, _fn in [("sum", _sum), ("mean", _mean), ("max", _minmax(np.max)),
                   ("min", _minmax(np.min))]:
    register_op(_name, attrs=_ATTRS, infer_type=_reduce_type, compute=_fn, num_inputs=1,
                pattern=OpPattern.COMM_REDUCE, normalize_attrs=_norm)
