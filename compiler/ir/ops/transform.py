"""Shape-changing (injective) operators."""

from __future__ import annotations

import numpy as np

from ..op import REQUIRED, OpPattern, register_op
from ..types import TensorType
from ._util import norm_axis, tensor_arg, tuple_of_tensors

__all__: list[str] = []


def _reshape_shape(shape, newshape):
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


def _reshape_type(types, attrs):
    x = tensor_arg(types, 0)
    return TensorType(_reshape_shape(x.shape, attrs["newshape"]), x.dtype)


register_op("reshape", attrs={"newshape": REQUIRED}, infer_type=_reshape_type, num_inputs=1,
            compute=lambda x, newshape: x.reshape(_reshape_shape(x.shape, newshape)),
            pattern=OpPattern.INJECTIVE,
            normalize_attrs=lambda a: {"newshape": tuple(int(d) for d in a["newshape"])})


def _transpose_type(types, attrs):
    x = tensor_arg(types, 0)
    axes = attrs["axes"]
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    if sorted(a % max(x.ndim, 1) for a in axes) != list(range(x.ndim)):
        raise TypeError(f"transpose axes {axes} are not a permutation of rank {x.ndim}")
    return TensorType(tuple(x.shape[a] for a in axes), x.dtype)


register_op("transpose", attrs={"axes": None}, infer_type=_transpose_type, num_inputs=1,
            compute=lambda x, axes: np.ascontiguousarray(np.transpose(x, axes)),
            pattern=OpPattern.INJECTIVE)


def _concat_type(types, attrs):
    fields = tuple_of_tensors(types[0], "concatenate's argument")
    if not fields:
        raise TypeError("concatenate needs at least one tensor")
    first = fields[0]
    axis = norm_axis(attrs["axis"], first.ndim)
    for f in fields[1:]:
        same = f.ndim == first.ndim and all(a == b for i, (a, b) in
                                            enumerate(zip(f.shape, first.shape)) if i != axis)
        if not same or f.dtype != first.dtype:
            raise TypeError(f"concatenate along axis {axis}: {f.shape} {f.dtype} does not "
                            f"match {first.shape} {first.dtype}")
    shape = list(first.shape)
    shape[axis] = sum(f.shape[axis] for f in fields)
    return TensorType(shape, first.dtype)


register_op("concatenate", attrs={"axis": 0}, infer_type=_concat_type, num_inputs=1,
            compute=lambda tup, axis: np.concatenate(tup, axis=axis),
            pattern=OpPattern.INJECTIVE)


def _squeeze_axes(x_shape, axis):
    if axis is None:
        return tuple(i for i, d in enumerate(x_shape) if d == 1)
    return tuple(sorted(norm_axis(a, len(x_shape)) for a in axis))


def _squeeze_type(types, attrs):
    x = tensor_arg(types, 0)
    axes = _squeeze_axes(x.shape, attrs["axis"])
    for a in axes:
        if x.shape[a] != 1:
            raise TypeError(f"squeeze axis {a} has size {x.shape[a]}, not 1")
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


register_op("squeeze", attrs={"axis": None}, infer_type=_squeeze_type, num_inputs=1,
            compute=lambda x, axis: x.reshape(
                tuple(d for i, d in enumerate(x.shape) if i not in _squeeze_axes(x.shape, axis))),
            pattern=OpPattern.INJECTIVE)


def _expand_shape(shape, axis, num):
    ndim = len(shape)
    if not -ndim - 1 <= axis <= ndim:
        raise TypeError(f"expand_dims axis {axis} is out of range for rank {ndim}")
    axis = axis % (ndim + 1)
    return shape[:axis] + (1,) * num + shape[axis:]


def _expand_type(types, attrs):
    x = tensor_arg(types, 0)
    return TensorType(_expand_shape(x.shape, attrs["axis"], attrs["num_newaxis"]), x.dtype)


register_op("expand_dims", attrs={"axis": REQUIRED, "num_newaxis": 1},
            infer_type=_expand_type, num_inputs=1,
            compute=lambda x, axis, num_newaxis: x.reshape(
                _expand_shape(x.shape, axis, num_newaxis)),
            pattern=OpPattern.BROADCAST)
