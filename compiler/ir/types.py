"""Types of the graph IR: tensors (with optional quantization parameters), tuples, functions.

Types are immutable values compared structurally (``==``); :func:`type_compatible`
compares shapes and dtypes only, ignoring quantization metadata.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Type", "QuantParams", "TensorType", "TupleType", "FuncType", "type_compatible",
           "scalar_type"]


def _freeze_param(value, dtype):
    """A scalar stays a Python number; a sequence becomes a read-only 1-D array."""
    if np.ndim(value) == 0:
        return float(value) if dtype is np.float32 else int(value)
    arr = np.array(value, dtype=dtype).reshape(-1)
    arr.flags.writeable = False
    return arr


class QuantParams:
    """Affine quantization parameters ``real = scale * (q - zero_point)``.

    Parameters
    ----------
    scale : float or 1-D array of float32
        Per-tensor scale, or per-channel scales along ``axis``.
    zero_point : int or 1-D array of int
        Per-tensor or per-channel zero point.
    axis : int, optional
        The channel axis of per-channel parameters (``None`` for per-tensor).
    """

    __slots__ = ("scale", "zero_point", "axis")

    def __init__(self, scale, zero_point=0, axis=None):
        object.__setattr__(self, "scale", _freeze_param(scale, np.float32))
        object.__setattr__(self, "zero_point", _freeze_param(zero_point, np.int64))
        object.__setattr__(self, "axis", None if axis is None else int(axis))
        per_channel = np.ndim(self.scale) or np.ndim(self.zero_point)
        if per_channel and self.axis is None:
            raise ValueError(f"per-channel quantization parameters need an axis, got "
                             f"scale={scale!r}, zero_point={zero_point!r}, axis=None")

    def __setattr__(self, name, value):
        raise AttributeError("QuantParams is immutable")

    def _key(self):
        def k(v):
            return ("a", tuple(v.tolist())) if isinstance(v, np.ndarray) else ("s", v)
        return (k(self.scale), k(self.zero_point), self.axis)

    def __eq__(self, other):
        return isinstance(other, QuantParams) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        def r(v):
            return repr(v.tolist()) if isinstance(v, np.ndarray) else repr(v)
        axis = "" if self.axis is None else f", axis={self.axis}"
        return f"QuantParams(scale={r(self.scale)}, zero_point={r(self.zero_point)}{axis})"


class Type:
    """Base class of IR types (immutable, structural equality)."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __repr__(self):
        from .printer import type_text
        return type_text(self)


class TensorType(Type):
    """A tensor of static ``shape`` and ``dtype`` (numpy dtype name), optionally quantized.

    Parameters
    ----------
    shape : tuple of int
    dtype : str
        ``"float32"``, ``"int8"``, ``"int32"``, ``"bool"``, ...
    quant : QuantParams, optional
        What the integers mean (for quantized tensors).
    """

    __slots__ = ("shape", "dtype", "quant")

    def __init__(self, shape, dtype="float32", quant=None):
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"tensor shape must be non-negative, got {shape}")
        dtype = np.dtype(dtype).name
        if quant is not None and not isinstance(quant, QuantParams):
            raise TypeError(f"quant must be a QuantParams, got {type(quant).__name__}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "quant", quant)

    @property
    def ndim(self):
        return len(self.shape)

    def with_quant(self, quant):
        """This type with other quantization parameters."""
        return TensorType(self.shape, self.dtype, quant)

    def __eq__(self, other):
        return (isinstance(other, TensorType) and self.shape == other.shape
                and self.dtype == other.dtype and self.quant == other.quant)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.quant))


class TupleType(Type):
    """The type of a tuple: one type per field."""

    __slots__ = ("fields",)

    def __init__(self, fields):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Type):
                raise TypeError(f"tuple field types must be Types, got {f!r}")
        object.__setattr__(self, "fields", fields)

    def __eq__(self, other):
        return isinstance(other, TupleType) and self.fields == other.fields

    def __hash__(self):
        return hash(("tuple", self.fields))


class FuncType(Type):
    """The type of a function: argument types and return type."""

    __slots__ = ("arg_types", "ret_type")

    def __init__(self, arg_types, ret_type):
        object.__setattr__(self, "arg_types", tuple(arg_types))
        object.__setattr__(self, "ret_type", ret_type)

    def __eq__(self, other):
        return (isinstance(other, FuncType) and self.arg_types == other.arg_types
                and self.ret_type == other.ret_type)

    def __hash__(self):
        return hash(("fn", self.arg_types, self.ret_type))


def type_compatible(a: Type, b: Type) -> bool:
    """Same structure, shapes and dtypes (quantization metadata ignored)."""
    if isinstance(a, TensorType):
        return isinstance(b, TensorType) and a.shape == b.shape and a.dtype == b.dtype
    if isinstance(a, TupleType):
        return (isinstance(b, TupleType) and len(a.fields) == len(b.fields)
                and all(type_compatible(x, y) for x, y in zip(a.fields, b.fields)))
    if isinstance(a, FuncType):
        return (isinstance(b, FuncType) and len(a.arg_types) == len(b.arg_types)
                and all(type_compatible(x, y) for x, y in zip(a.arg_types, b.arg_types))
                and type_compatible(a.ret_type, b.ret_type))
    return a == b


def scalar_type(dtype: str) -> TensorType:
    """A rank-0 tensor type."""
    return TensorType((), dtype)
