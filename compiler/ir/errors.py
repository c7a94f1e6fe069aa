"""The errors raised by the graph IR: one exception family, each naming the node at fault."""

from __future__ import annotations

from ...hw.errors import VtakitError

__all__ = ["IRError", "TypeInferenceError", "WellFormedError", "ParseError", "OpError",
           "EvaluationError"]


class IRError(VtakitError):
    """Base class of every error about a graph-IR program."""


class TypeInferenceError(IRError):
    """A node whose operand types do not fit (wrong shape, dtype, arity, missing annotation)."""


class WellFormedError(IRError):
    """A structural defect: a variable bound twice, a free variable, an unknown global."""


class OpError(IRError):
    """An unknown operator, an unknown or ill-typed attribute, a second registration."""


class ParseError(IRError):
    """Text that is not a valid program; the message gives line and column."""


class EvaluationError(IRError):
    """The reference interpreter met a value it cannot use (e.g. an unbound global)."""
