"""The operator registry: each op declares its attributes, type inference, numpy compute
and fusion pattern (Relay's ``TOpPattern``)."""

from __future__ import annotations

import enum

import numpy as np

from ...runtime.hostops import get_hostop, hostop
from .errors import OpError
from .expr import Op

__all__ = ["OpPattern", "register_op", "get_op", "list_ops", "REQUIRED", "check_attrs",
           "normalize_attr_value"]


class OpPattern(enum.IntEnum):
    """Fusion patterns, ordered as in Relay (a larger value fuses less)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


class _Required:
    def __repr__(self):
        return "REQUIRED"


#: Default of an attribute that every call must give.
REQUIRED = _Required()

_REGISTRY: dict[str, Op] = {}


def register_op(name: str, *, attrs=None, infer_type, compute, pattern=OpPattern.OPAQUE,
                num_inputs=None, normalize_attrs=None, description="", override=False) -> Op:
    """Register an operator.

    Parameters
    ----------
    name : str
        e.g. ``"nn.conv2d"`` or ``"qnn.requantize"``.
    attrs : dict of str -> default
        The declared attributes; :data:`REQUIRED` marks one without a default.
    infer_type : callable
        ``infer_type(arg_types: list[Type], attrs: dict) -> Type``; raise
        ``TypeError`` or ``ValueError`` with a message saying what was expected.
    compute : callable
        ``compute(*np_arrays, **attrs) -> np.ndarray | tuple`` (exact in the
        integer dtypes). Compiled models call it by name from the runtime's registry
        (``vtakit.runtime.hostops``): the core operators take it from there; any
        other is registered there too (an executable using it then runs only in a
        process that registered it).
    pattern : OpPattern
    num_inputs : int, optional
        The arity (checked when a call is built); None for any.
    normalize_attrs : callable, optional
        ``normalize_attrs(attrs) -> attrs`` to canonicalize values (e.g. padding).
    override : bool
        Replace an existing registration (otherwise a second one is an error).
    """
    if name in _REGISTRY and not override:
        raise OpError(f"operator {name!r} is already registered (pass override=True to "
                      f"replace it)")
    if compute is not None and get_hostop(name, allow_missing=True) is not compute:
        hostop(name, compute, override=override)
    op = Op(name, dict(attrs or {}), infer_type, compute, OpPattern(pattern), num_inputs,
            normalize_attrs, description)
    _REGISTRY[name] = op
    return op


def get_op(name: str) -> Op:
    """The registered operator ``name``."""
    from . import ops  # noqa: F401  (registers the core operators on first use)
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise OpError(f"unknown operator {name!r}{hint}") from None


def list_ops() -> list[str]:
    """Names of every registered operator."""
    from . import ops  # noqa: F401
    return sorted(_REGISTRY)


def normalize_attr_value(v):
    """Attribute values are hashable, printable Python values: lists become tuples,
    numpy scalars become Python numbers, dtypes become their names."""
    if isinstance(v, (list, tuple)):
        return tuple(normalize_attr_value(x) for x in v)
    if isinstance(v, np.ndarray):
        return normalize_attr_value(v.tolist())
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if v is None or isinstance(v, (int, float, str)):
        return v
    raise OpError(f"attribute value {v!r} is not an int, float, str, bool, None or a tuple "
                  f"of those")


def check_attrs(op: Op, attrs: dict, nargs: int) -> dict:
    """The call's attributes completed with defaults; unknown or missing ones are errors."""
    if op.num_inputs is not None and nargs != op.num_inputs:
        raise OpError(f"{op.name} takes {op.num_inputs} argument(s), got {nargs}")
    unknown = [k for k in attrs if k not in op.attrs]
    if unknown:
        known = ", ".join(op.attrs) or "none"
        raise OpError(f"{op.name} has no attribute {unknown[0]!r} (its attributes: {known})")
    full = {}
    for key, default in op.attrs.items():
        if key in attrs:
            full[key] = normalize_attr_value(attrs[key])
        elif default is REQUIRED:
            raise OpError(f"{op.name} needs attribute {key!r}")
        else:
            full[key] = default
    if op.normalize_attrs is not None:
        try:
            full = dict(op.normalize_attrs(full))
        except (TypeError, ValueError) as e:
            raise OpError(f"{op.name}: {e}") from None
    return full
