"""Algebraic data types (Relay's design): type definitions, constructors, ``match``.

::

    type List[A] {
      Cons(A, List[A]),
      Nil,
    }

    match (%l) {
      Cons(%h, %t) => add(%h, @sum(%t)),
      Nil => 0i32,
    }

A :class:`TypeData` names an ADT (a :class:`~.types.GlobalTypeVar`), its type
parameters and its :class:`Constructor` s.  A constructor is an expression:
``Call(Cons, [h, t])`` builds a value; a constructor without fields (``Nil``)
is a value by itself.  Each constructor's ``tag`` is ``1 +`` its index in its
type definition; tag 0 is reserved for tuples, which the VM represents as
ADTs of tag 0 too, so a VM result can always tell a tuple from a constructor.

A :class:`Match` tries its clauses in order; the first whose pattern matches
the value binds the pattern's variables and gives the result.  ``complete``
(the default) asserts that some clause matches every value; type inference
checks it.  ``Match(..., complete=False)`` (printed ``match?``) may fail at run
time: an error in the reference interpreter, ``Fatal`` on the VM.

Types are polymorphic in the ADT's parameters: each constructor call is
instantiated by unification with its arguments' types.  Functions stay
monomorphic (their parameters have concrete types such as
``List[Tensor[(), int32]]``).
"""

from __future__ import annotations

from .expr import Expr, Var
from .types import GlobalTypeVar, Type, TypeCall, TypeVar

__all__ = ["TypeData", "Constructor", "Pattern", "PatternWildcard", "PatternVar",
           "PatternConstructor", "PatternTuple", "Clause", "Match", "pattern_vars",
           "is_exhaustive"]


class Constructor(Expr):
    """A constructor of an algebraic data type.

    Parameters
    ----------
    name_hint : str
    inputs : sequence of Type
        The field types (may use the type parameters of its :class:`TypeData`).
    belong_to : GlobalTypeVar
        The ADT it constructs.

    Attributes
    ----------
    tag : int
        ``1 +`` its index in its type definition (set by :class:`TypeData`).
    type_data : TypeData
    """

    __slots__ = ("name_hint", "inputs", "belong_to", "tag", "type_data")

    def __init__(self, name_hint: str, inputs, belong_to: GlobalTypeVar):
        inputs = tuple(inputs)
        for t in inputs:
            if not isinstance(t, Type):
                raise TypeError(f"field types of constructor {name_hint} must be Types, "
                                f"got {t!r}")
        if not isinstance(belong_to, GlobalTypeVar):
            raise TypeError(f"constructor {name_hint} must belong to a GlobalTypeVar, got "
                            f"{belong_to!r}")
        self._init(name_hint=str(name_hint), inputs=inputs, belong_to=belong_to, tag=None,
                   type_data=None)

    @property
    def name(self):
        return self.name_hint

    def __call__(self, *args):
        """``Cons(h, t)`` is ``Call(Cons, [h, t])``."""
        from .expr import Call
        return Call(self, args)


class TypeData:
    """The definition of an algebraic data type.

    Parameters
    ----------
    header : GlobalTypeVar
        The type's name.
    type_vars : sequence of TypeVar
        Its type parameters.
    constructors : sequence of Constructor
        Each belonging to ``header``; their tags become 1, 2, ...
    """

    __slots__ = ("header", "type_vars", "constructors")

    def __init__(self, header, type_vars, constructors):
        type_vars, constructors = tuple(type_vars), tuple(constructors)
        if not isinstance(header, GlobalTypeVar):
            raise TypeError(f"a type definition is named by a GlobalTypeVar, got {header!r}")
        for v in type_vars:
            if not isinstance(v, TypeVar):
                raise TypeError(f"type parameters of {header.name} must be TypeVars, got {v!r}")
        names = set()
        for i, c in enumerate(constructors):
            if not isinstance(c, Constructor) or c.belong_to != header:
                raise TypeError(f"constructor {i} of type {header.name} must be a Constructor "
                                f"belonging to {header.name}, got {c!r}")
            if c.type_data is not None:
                raise ValueError(f"constructor {c.name_hint} already belongs to the definition "
                                 f"of {c.type_data.header.name}")
            if c.name_hint in names:
                raise ValueError(f"type {header.name} defines constructor {c.name_hint} twice")
            names.add(c.name_hint)
        for i, c in enumerate(constructors):
            object.__setattr__(c, "tag", i + 1)
            object.__setattr__(c, "type_data", self)
        object.__setattr__(self, "header", header)
        object.__setattr__(self, "type_vars", type_vars)
        object.__setattr__(self, "constructors", constructors)

    def __setattr__(self, name, value):
        raise AttributeError("TypeData is immutable")

    @property
    def type(self) -> TypeCall:
        """The type of its values, generic in its parameters (``List[A]``)."""
        return TypeCall(self.header, self.type_vars)

    def __getitem__(self, name) -> Constructor:
        for c in self.constructors:
            if c.name_hint == name:
                return c
        raise KeyError(f"type {self.header.name} has no constructor {name!r}; it has "
                       + ", ".join(c.name_hint for c in self.constructors))

    def __repr__(self):
        from .printer import type_data_text
        return type_data_text(self)


class Pattern:
    """Base class of match patterns (immutable)."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")


class PatternWildcard(Pattern):
    """``_``: matches anything, binds nothing."""

    __slots__ = ()


class PatternVar(Pattern):
    """``%x``: matches anything and binds it to ``var``."""

    __slots__ = ("var",)

    def __init__(self, var):
        if not isinstance(var, Var):
            raise TypeError(f"PatternVar binds a Var, got {var!r}")
        object.__setattr__(self, "var", var)


class PatternConstructor(Pattern):
    """``Cons(p1, p2)``: a value built by ``constructor`` whose fields match ``patterns``."""

    __slots__ = ("constructor", "patterns")

    def __init__(self, constructor, patterns=()):
        patterns = _patterns(patterns)
        if not isinstance(constructor, Constructor):
            raise TypeError(f"PatternConstructor needs a Constructor, got {constructor!r}")
        if len(patterns) != len(constructor.inputs):
            raise ValueError(f"pattern {constructor.name_hint}(...) has {len(patterns)} "
                             f"sub-pattern(s); the constructor has {len(constructor.inputs)} "
                             "field(s)")
        object.__setattr__(self, "constructor", constructor)
        object.__setattr__(self, "patterns", patterns)


class PatternTuple(Pattern):
    """``(p1, p2)``: a tuple whose fields match ``patterns``."""

    __slots__ = ("patterns",)

    def __init__(self, patterns):
        object.__setattr__(self, "patterns", _patterns(patterns))


def _patterns(patterns):
    patterns = tuple(patterns)
    for p in patterns:
        if not isinstance(p, Pattern):
            raise TypeError(f"sub-patterns must be Patterns, got {p!r}")
    return patterns


def pattern_vars(pattern) -> list:
    """The Vars a pattern binds, left to right."""
    if isinstance(pattern, PatternVar):
        return [pattern.var]
    return [v for p in getattr(pattern, "patterns", ()) for v in pattern_vars(p)]


class Clause:
    """``pattern => rhs``: one arm of a :class:`Match`."""

    __slots__ = ("lhs", "rhs")

    def __init__(self, lhs, rhs):
        if not isinstance(lhs, Pattern):
            raise TypeError(f"a clause's left side must be a Pattern, got {lhs!r}")
        if not isinstance(rhs, Expr):
            raise TypeError(f"a clause's right side must be an Expr, got {rhs!r}")
        object.__setattr__(self, "lhs", lhs)
        object.__setattr__(self, "rhs", rhs)

    def __setattr__(self, name, value):
        raise AttributeError("Clause is immutable")

    @property
    def pattern(self):
        return self.lhs


class Match(Expr):
    """``match (data) { pattern => rhs, ... }`` (see the module docstring).

    Parameters
    ----------
    data : Expr
    clauses : sequence of Clause
    complete : bool
        True asserts that the clauses cover every value (checked by type inference).
    """

    __slots__ = ("data", "clauses", "complete")

    def __init__(self, data, clauses, complete=True):
        clauses = tuple(clauses)
        if not isinstance(data, Expr):
            raise TypeError(f"match needs an Expr to inspect, got {data!r}")
        if not clauses:
            raise ValueError("a match needs at least one clause")
        for c in clauses:
            if not isinstance(c, Clause):
                raise TypeError(f"match clauses must be Clauses, got {c!r}")
        self._init(data=data, clauses=clauses, complete=bool(complete))

    def with_parts(self, data, rhss) -> "Match":
        """This match on ``data`` with the clauses' right sides replaced (self if unchanged)."""
        if data is self.data and all(a is c.rhs for a, c in zip(rhss, self.clauses)):
            return self
        return Match(data, [Clause(c.lhs, r) for c, r in zip(self.clauses, rhss)],
                     self.complete)


def is_exhaustive(patterns) -> bool:
    """True when every (well-typed) value matches at least one of ``patterns``."""
    return _covers([[p] for p in patterns])


def _covers(rows):
    """Whether the rows (lists of patterns, one column per value) cover every value
    vector (Maranget's usefulness of an all-wildcard row, specialised per constructor)."""
    if not rows:
        return False
    if not rows[0]:
        return True
    heads = [r[0] for r in rows]
    tuples = [p for p in heads if type(p) is PatternTuple]
    if tuples:
        return _covers(_specialize(rows, None, len(tuples[0].patterns)))
    seen = {p.constructor for p in heads if type(p) is PatternConstructor}
    if seen:
        every = next(iter(seen)).type_data.constructors
        if len(seen) == len(every):
            return all(_covers(_specialize(rows, c, len(c.inputs))) for c in every)
    return _covers([r[1:] for r in rows if type(r[0]) in (PatternWildcard, PatternVar)])


def _specialize(rows, constructor, arity):
    """The rows that match ``constructor`` (None: a tuple) with its fields as columns."""
    out = []
    for r in rows:
        head = r[0]
        if type(head) in (PatternWildcard, PatternVar):
            out.append([PatternWildcard()] * arity + r[1:])
        elif type(head) is PatternTuple or head.constructor is constructor:
            out.append(list(head.patterns) + r[1:])
    return out
