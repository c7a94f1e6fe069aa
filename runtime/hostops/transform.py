"""Computes of the shape-changing (injective) operators, and the shape rules they share
with the IR's type inference."""

from __future__ import annotations

import numpy as np

from . import hostop

__all__ = ["reshape_shape", "squeeze_axes", "expand_shape"]


def reshape_shape(shape, newshape) -> tuple:
    """Relay's reshape codes: 0 copies the input dim, -1 is inferred."""
    out = []
    for i, d in enumerate(newshape):
        if d == 0:
            if i >= len(shape):
                raise TypeError(f"reshape code 0 at position {i} has no input dim to copy")
            out.append(shape[i])
        elif d == -1 or d > 0:
            out.append(d)
        else:
            raise TypeError(f"reshape dims must be positive, 0 or -1, got {d}")
    size = int(np.prod(shape, dtype=np.int64))
    if out.count(-1) > 1:
        raise TypeError(f"reshape newshape {newshape} has more than one -1")
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if rest == 0 or size % rest:
            raise TypeError(f"cannot reshape {shape} to {newshape}")
        out[out.index(-1)] = size // rest
    if int(np.prod(out, dtype=np.int64)) != size:
        raise TypeError(f"cannot reshape {shape} ({size} elements) to {tuple(out)}")
    return tuple(out)


def squeeze_axes(x_shape, axis) -> tuple:
    """The axes a squeeze removes (all size-1 axes when ``axis`` is None)."""
    if axis is None:
        return tuple(i for i, d in enumerate(x_shape) if d == 1)
    ndim = len(x_shape)
    for a in axis:
        if not -ndim <= a < max(ndim, 1):
            raise TypeError(f"axis {a} is out of range for rank {ndim}")
    return tuple(sorted(a % ndim if ndim else 0 for a in axis))


def expand_shape(shape, axis, num) -> tuple:
    ndim = len(shape)
    if not -ndim - 1 <= axis <= ndim:
        raise TypeError(f"expand_dims axis {axis} is out of range for rank {ndim}")
    axis = axis % (ndim + 1)
    return tuple(shape[:axis]) + (1,) * num + tuple(shape[axis:])


hostop("reshape", lambda x, newshape: x.reshape(reshape_shape(x.shape, newshape)))
hostop("transpose", lambda x, axes: np.ascontiguousarray(np.transpose(x, axes)))
hostop("concatenate", lambda tup, axis: np.concatenate(tup, axis=axis))
hostop("squeeze", lambda x, axis: x.reshape(
    tuple(d for i, d in enumerate(x.shape) if i not in squeeze_axes(x.shape, axis))))
hostop("expand_dims", lambda x, axis, num_newaxis: x.reshape(
    expand_shape(x.shape, axis, num_newaxis)))
