"""Structural equality of expressions and modules (alpha-equivalence on bound variables)."""

from __future__ import annotations

import numpy as np

from .adt import (Constructor, Match, PatternConstructor, PatternTuple, PatternVar,
                  PatternWildcard)
from .analysis import deep_recursion
from .expr import (Call, Constant, Function, GlobalVar, If, IRModule, Let, Op, Tuple,
                   TupleGetItem, Var)

__all__ = ["structural_equal", "assert_structural_equal"]


def _attr_equal(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return type(a) is type(b) and a == b


def _attrs_equal(a, b):
    return a.keys() == b.keys() and all(_attr_equal(a[k], b[k]) for k in a)


class _Equal:
    def __init__(self, map_free_vars):
        self.map_free_vars = map_free_vars
        self.vars = {}      # lhs var -> rhs var
        self.memo = {}      # (id(lhs), id(rhs)) -> bool

    def bind(self, a, b):
        if a.type_annotation != b.type_annotation:
            return False
        self.vars[a] = b
        return True

    def eq(self, a, b):
        if a is b and not isinstance(a, (Function, Let)):
            return True
        key = (id(a), id(b))
        if key in self.memo:
            return self.memo[key]
        r = self._eq(a, b)
        self.memo[key] = r
        return r

    def _eq(self, a, b):
        if type(a) is not type(b):
            return False
        t = type(a)
        if t is Var:
            if a in self.vars:
                return self.vars[a] is b
            if self.map_free_vars and a.type_annotation == b.type_annotation \
                    and b not in self.vars.values():
                self.vars[a] = b
                return True
            return a is b
        if t is Constant:
            return (a.data.dtype == b.data.dtype and a.data.shape == b.data.shape
                    and a.data.tobytes() == b.data.tobytes())
        if t is Op:
            return a.name == b.name
        if t is Constructor:
            return (a.name_hint == b.name_hint and a.tag == b.tag and a.belong_to == b.belong_to
                    and a.inputs == b.inputs)
        if t is GlobalVar:
            return a.name_hint == b.name_hint
        if t is Call:
            return (len(a.args) == len(b.args) and self.eq(a.op, b.op)
                    and _attrs_equal(a.attrs, b.attrs)
                    and all(self.eq(x, y) for x, y in zip(a.args, b.args)))
        if t is Tuple:
            return len(a.fields) == len(b.fields) and all(
                self.eq(x, y) for x, y in zip(a.fields, b.fields))
        if t is TupleGetItem:
            return a.index == b.index and self.eq(a.tuple_value, b.tuple_value)
        if t is Let:
            while type(a) is Let and type(b) is Let:
                if not (self.bind(a.var, b.var) and self.eq(a.value, b.value)):
                    return False
                a, b = a.body, b.body
            return self.eq(a, b)
        if t is If:
            return (self.eq(a.cond, b.cond) and self.eq(a.true_branch, b.true_branch)
                    and self.eq(a.false_branch, b.false_branch))
        if t is Function:
            return (len(a.params) == len(b.params) and a.ret_type == b.ret_type
                    and _attrs_equal(a.attrs, b.attrs)
                    and all(self.bind(x, y) for x, y in zip(a.params, b.params))
                    and self.eq(a.body, b.body))
        if t is Match:
            return (a.complete == b.complete and len(a.clauses) == len(b.clauses)
                    and self.eq(a.data, b.data)
                    and all(self.pattern_eq(x.lhs, y.lhs) and self.eq(x.rhs, y.rhs)
                            for x, y in zip(a.clauses, b.clauses)))
        return False

    def pattern_eq(self, a, b):
        if type(a) is not type(b):
            return False
        if type(a) is PatternWildcard:
            return True
        if type(a) is PatternVar:
            return self.bind(a.var, b.var)
        if type(a) is PatternConstructor and not self.eq(a.constructor, b.constructor):
            return False
        assert type(a) in (PatternConstructor, PatternTuple), type(a)
        return len(a.patterns) == len(b.patterns) and all(
            self.pattern_eq(x, y) for x, y in zip(a.patterns, b.patterns))


def _type_data_equal(a, b):
    return (a.header == b.header and a.type_vars == b.type_vars
            and len(a.constructors) == len(b.constructors)
            and all(_Equal(False).eq(x, y) for x, y in zip(a.constructors, b.constructors)))


def structural_equal(a, b, map_free_vars=False) -> bool:
    """True when ``a`` and ``b`` compute the same thing the same way.

    Bound variables (parameters, let variables) are compared up to renaming;
    free variables must be the same objects unless ``map_free_vars``.  Sharing
    (DAG versus tree) is not compared, only values.  Modules are equal when
    they define the same global names with equal functions and the same algebraic
    data types.
    """
    with deep_recursion():
        if isinstance(a, IRModule) or isinstance(b, IRModule):
            if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
                return False
            if sorted(a) != sorted(b):
                return False
            ta, tb = a.type_definitions, b.type_definitions
            if sorted(ta) != sorted(tb) or not all(_type_data_equal(ta[n], tb[n]) for n in ta):
                return False
            return all(_Equal(map_free_vars).eq(a[n], b[n]) for n in a)
        return _Equal(map_free_vars).eq(a, b)


def assert_structural_equal(a, b, map_free_vars=False):
    """Raise AssertionError showing both programs' text when they differ."""
    if not structural_equal(a, b, map_free_vars):
        from .printer import astext
        raise AssertionError(f"programs differ:\n--- first\n{astext(a)}\n--- second\n"
                             f"{astext(b)}")
