"""One-line descriptions of nodes, used in error messages."""

from __future__ import annotations

from .adt import Constructor, Match
from .expr import Call, Constant, Function, GlobalVar, If, Let, Op, Tuple, TupleGetItem, Var

__all__ = ["describe"]


def _short(e):
    if isinstance(e, Var):
        return f"%{e.name_hint}"
    if isinstance(e, GlobalVar):
        return f"@{e.name_hint}"
    if isinstance(e, Constant):
        return f"constant{tuple(e.data.shape)}:{e.data.dtype}"
    if isinstance(e, (Op, Constructor)):
        return e.name
    if isinstance(e, Call):
        return f"{_target(e.op)}(...)"
    return f"<{type(e).__name__}>"


def _target(op):
    if isinstance(op, (Op, Constructor)):
        return op.name
    if isinstance(op, Function):
        return "fn"
    return _short(op)


def describe(e) -> str:
    """e.g. ``nn.conv2d(%x, %1(...))`` or ``let %y`` or ``parameter %x``."""
    if isinstance(e, Call):
        return f"{_target(e.op)}({', '.join(_short(a) for a in e.args)})"
    if isinstance(e, Tuple):
        return f"({', '.join(_short(a) for a in e.fields)})"
    if isinstance(e, TupleGetItem):
        return f"{_short(e.tuple_value)}.{e.index}"
    if isinstance(e, Let):
        return f"let %{e.var.name_hint}"
    if isinstance(e, If):
        return f"if ({_short(e.cond)})"
    if isinstance(e, Match):
        return f"match{'' if e.complete else '?'} ({_short(e.data)})"
    if isinstance(e, Function):
        return f"fn ({', '.join(_short(p) for p in e.params)})"
    return _short(e)
