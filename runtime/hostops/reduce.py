"""Computes of the reductions over axes (Relay's ``sum``, ``mean``, ``max``, ``min``)."""

from __future__ import annotations

import numpy as np

from . import hostop
from .elemwise import is_int

__all__ = ["reduce_axes"]


def reduce_axes(axis, ndim, exclude) -> tuple:
    """The reduced axes (sorted, non-negative) of a reduction over ``axis`` of a rank
    ``ndim`` tensor (``exclude``: all the others)."""
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        for a in axes:
            if not -ndim <= a < max(ndim, 1):
                raise TypeError(f"axis {a} is out of range for rank {ndim}")
        axes = tuple(sorted({a % ndim if ndim else 0 for a in axes}))
    if exclude:
        axes = tuple(i for i in range(ndim) if i not in axes)
    return axes


@hostop("sum")
def _sum(x, axis, keepdims, exclude):
    axes = reduce_axes(axis, x.ndim, exclude)
    return np.asarray(x.sum(axis=axes, keepdims=keepdims, dtype=x.dtype))


@hostop("mean")
def _mean(x, axis, keepdims, exclude):
    axes = reduce_axes(axis, x.ndim, exclude)
    if is_int(x.dtype):
        count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        total = x.astype(np.int64).sum(axis=axes, keepdims=keepdims)
        return np.asarray(np.sign(total) * (np.abs(total) // count)).astype(x.dtype)
    return np.asarray(x.mean(axis=axes, keepdims=keepdims, dtype=np.float64)).astype(x.dtype)


def _minmax(fn):
    def compute(x, axis, keepdims, exclude):
        return np.asarray(fn(x, axis=reduce_axes(axis, x.ndim, exclude), keepdims=keepdims))
    return compute


hostop("max", _minmax(np.max))
hostop("min", _minmax(np.min))
