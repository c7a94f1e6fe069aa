"""Shape-changing (injective) operators."""

from __future__ import annotations

from ....runtime.hostops import get_hostop
from ....runtime.hostops.transform import expand_shape, reshape_shape, squeeze_axes
from ..op import REQUIRED, OpPattern, register_op
from ..types import TensorType
from ._util import norm_axis, tensor_arg, tuple_of_tensors

__all__: list[str] = []


def _reshape_type(types, attrs):
    x = tensor_arg(types, 0)
    return TensorType(reshape_shape(x.shape, attrs["newshape"]), x.dtype)


register_op("reshape", attrs={"newshape": REQUIRED}, infer_type=_reshape_type, num_inputs=1,
            compute=get_hostop("reshape"),
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
            compute=get_hostop("transpose"),
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
            compute=get_hostop("concatenate"),
            pattern=OpPattern.INJECTIVE)


def _squeeze_type(types, attrs):
    x = tensor_arg(types, 0)
    axes = squeeze_axes(x.shape, attrs["axis"])
    for a in axes:
        if x.shape[a] != 1:
            raise TypeError(f"squeeze axis {a} has size {x.shape[a]}, not 1")
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


register_op("squeeze", attrs={"axis": None}, infer_type=_squeeze_type, num_inputs=1,
            compute=get_hostop("squeeze"),
            pattern=OpPattern.INJECTIVE)


def _expand_type(types, attrs):
    x = tensor_arg(types, 0)
    return TensorType(expand_shape(x.shape, attrs["axis"], attrs["num_newaxis"]), x.dtype)


register_op("expand_dims", attrs={"axis": REQUIRED, "num_newaxis": 1},
            infer_type=_expand_type, num_inputs=1,
            compute=get_hostop("expand_dims"),
            pattern=OpPattern.BROADCAST)
