"""Helpers shared by the core operators' type relations and attribute normalizers."""

from __future__ import annotations

import numpy as np

from ....runtime.hostops.elemwise import is_float, is_int  # noqa: F401  (re-exported)
from ....runtime.layout import normalize_padding, pair  # noqa: F401  (pair re-exported)
from ..types import TensorType, TupleType

__all__ = ["tensor_arg", "broadcast_type", "pair", "padding4", "is_int", "is_float",
           "dtype_or_empty", "norm_axis", "tuple_of_tensors"]


def tensor_arg(types, i, what="argument"):
    """The TensorType of argument ``i`` (or a TypeError saying what it is instead)."""
    t = types[i]
    if not isinstance(t, TensorType):
        raise TypeError(f"{what} {i} must be a tensor, got {t!r}")
    return t


def broadcast_type(types, attrs=None, out_dtype=None):
    """Numpy broadcasting of two tensors of one dtype."""
    a, b = tensor_arg(types, 0), tensor_arg(types, 1)
    if a.dtype != b.dtype:
        raise TypeError(f"operands must have one dtype, got {a.dtype} and {b.dtype}")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise TypeError(f"shapes {a.shape} and {b.shape} do not broadcast") from None
    return TensorType(shape, out_dtype or a.dtype)


def padding4(p):
    """``p`` | ``(p,)`` | ``(ph, pw)`` | ``(top, left, bottom, right)`` -> 4-tuple (the
    runtime's :func:`~vtakit.runtime.layout.normalize_padding`)."""
    if not isinstance(p, (int, np.integer)) and len(tuple(p)) == 1:
        p = tuple(p)[0]
    return normalize_padding(p)


def dtype_or_empty(v):
    return "" if v in ("", None) else np.dtype(v).name


def norm_axis(axis, ndim, name="axis"):
    if not -ndim <= axis < max(ndim, 1):
        raise TypeError(f"{name} {axis} is out of range for rank {ndim}")
    return axis % ndim if ndim else 0


def tuple_of_tensors(t, what="argument 0"):
    if not isinstance(t, TupleType) or not all(isinstance(f, TensorType) for f in t.fields):
        raise TypeError(f"{what} must be a tuple of tensors, got {t!r}")
    return t.fields
