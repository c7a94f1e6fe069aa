"""Types of the graph IR: tensors (with optional quantization parameters), tuples, functions,
and algebraic data types.

Types are immutable values compared structurally (``==``); :func:`type_compatible`
compares shapes and dtypes only, ignoring quantization metadata.

An algebraic data type is named by a :class:`GlobalTypeVar` and used as a
:class:`TypeCall` of it on type arguments (``List[Tensor[(), int32]]``); a
:class:`TypeVar` is a type parameter of an ADT definition.  An
:class:`IncompleteType` (printed ``_``) is a type argument inference could not
fix from an expression alone (the element type of a bare ``Nil``); it is
compatible with every type, and :func:`unify` fills it in where two types meet.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Type", "QuantParams", "TensorType", "TupleType", "FuncType", "TypeVar",
           "GlobalTypeVar", "TypeCall", "IncompleteType", "type_compatible", "unify",
           "substitute_type", "scalar_type"]


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


class TypeVar(Type):
    """A type parameter of an ADT definition (``A`` in ``List[A]``); equal by name."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        object.__setattr__(self, "name", str(name))

    def __eq__(self, other):
        return isinstance(other, TypeVar) and self.name == other.name

    def __hash__(self):
        return hash(("typevar", self.name))


class GlobalTypeVar(Type):
    """The name of an algebraic data type (``List``); equal by name."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        object.__setattr__(self, "name", str(name))

    @property
    def name_hint(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, GlobalTypeVar) and self.name == other.name

    def __hash__(self):
        return hash(("globaltypevar", self.name))


class TypeCall(Type):
    """An ADT applied to type arguments: ``TypeCall(List, [int32])`` is ``List[int32]``."""

    __slots__ = ("func", "args")

    def __init__(self, func, args=()):
        if not isinstance(func, GlobalTypeVar):
            raise TypeError(f"TypeCall needs a GlobalTypeVar (an ADT name), got {func!r}")
        args = tuple(args)
        for a in args:
            if not isinstance(a, Type):
                raise TypeError(f"type arguments of {func.name} must be Types, got {a!r}")
        object.__setattr__(self, "func", func)
        object.__setattr__(self, "args", args)

    def __eq__(self, other):
        return isinstance(other, TypeCall) and self.func == other.func and self.args == other.args

    def __hash__(self):
        return hash(("typecall", self.func, self.args))


class IncompleteType(Type):
    """A type not yet known (see the module docstring); all are equal."""

    __slots__ = ()

    def __eq__(self, other):
        return isinstance(other, IncompleteType)

    def __hash__(self):
        return hash("incomplete")


def unify(a: Type, b: Type):
    """The most specific type both ``a`` and ``b`` describe (an :class:`IncompleteType`
    is filled in from the other side; tensors keep ``a``'s quantization), or None
    when they are incompatible."""
    if isinstance(a, IncompleteType):
        return b
    if isinstance(b, IncompleteType):
        return a
    if isinstance(a, TensorType):
        return a if type_compatible(a, b) else None
    if isinstance(a, (TupleType, TypeCall)):
        xs, ys = (a.fields, getattr(b, "fields", None)) if isinstance(a, TupleType) else \
            (a.args, b.args if isinstance(b, TypeCall) and b.func == a.func else None)
        if type(b) is not type(a) or ys is None or len(xs) != len(ys):
            return None
        out = [unify(x, y) for x, y in zip(xs, ys)]
        if any(t is None for t in out):
            return None
        return TupleType(out) if isinstance(a, TupleType) else TypeCall(a.func, out)
    if isinstance(a, FuncType):
        if not isinstance(b, FuncType) or len(a.arg_types) != len(b.arg_types):
            return None
        out = [unify(x, y) for x, y in zip((*a.arg_types, a.ret_type),
                                           (*b.arg_types, b.ret_type))]
        return None if any(t is None for t in out) else FuncType(out[:-1], out[-1])
    return a if a == b else None


def substitute_type(t: Type, mapping: dict) -> Type:
    """``t`` with each :class:`TypeVar` in ``mapping`` replaced by its value."""
    if isinstance(t, TypeVar):
        return mapping.get(t, t)
    if isinstance(t, TupleType):
        return TupleType([substitute_type(f, mapping) for f in t.fields])
    if isinstance(t, TypeCall):
        return TypeCall(t.func, [substitute_type(x, mapping) for x in t.args])
    if isinstance(t, FuncType):
        return FuncType([substitute_type(x, mapping) for x in t.arg_types],
                        substitute_type(t.ret_type, mapping))
    return t


def type_compatible(a: Type, b: Type) -> bool:
    """Same structure, shapes and dtypes (quantization metadata ignored; an
    :class:`IncompleteType` is compatible with anything)."""
    if isinstance(a, IncompleteType) or isinstance(b, IncompleteType):
        return True
    if isinstance(a, TypeCall):
        return (isinstance(b, TypeCall) and a.func == b.func and len(a.args) == len(b.args)
                and all(type_compatible(x, y) for x, y in zip(a.args, b.args)))
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
