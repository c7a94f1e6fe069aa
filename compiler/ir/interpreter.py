"""The reference interpreter: evaluates any program with numpy.

It is the compiler's executable specification: every transformation and every
compiled result is checked against it.  Values are numpy arrays, tuples of
values, :class:`Closure` objects and :class:`ConstructorValue` s (ADT values;
:func:`values_equal` compares them with the VM's ``ADT`` results).  Shared
sub-expressions are evaluated once per function invocation; ``If`` and ``match``
evaluate only the branch or clause taken, so recursion terminates.
"""

from __future__ import annotations

import numpy as np

from .adt import Constructor, Match, PatternConstructor, PatternTuple, PatternVar
from .analysis import deep_recursion, free_vars
from .describe import describe
from .errors import EvaluationError
from .expr import (Call, Constant, Function, GlobalVar, If, IRModule, Let, Op, Tuple,
                   TupleGetItem, Var)
from .types import TensorType

__all__ = ["evaluate", "Closure", "ConstructorValue", "values_equal"]


class Closure:
    """A function value: a Function and the variables it captured."""

    __slots__ = ("func", "env")

    def __init__(self, func, env):
        self.func = func
        self.env = env

    def __repr__(self):
        return f"Closure({describe(self.func)})"


class ConstructorValue:
    """A value of an algebraic data type: its constructor and field values.

    ``tag`` and ``fields`` are what the VM's ``ADT`` object has, so
    :func:`values_equal` can compare the two.
    """

    __slots__ = ("constructor", "fields")

    def __init__(self, constructor, fields):
        self.constructor = constructor
        self.fields = tuple(fields)

    @property
    def tag(self) -> int:
        return self.constructor.tag

    def __repr__(self):
        if not self.fields:
            return self.constructor.name_hint
        return f"{self.constructor.name_hint}({', '.join(map(repr, self.fields))})"


def values_equal(a, b) -> bool:
    """Whether two program results are equal: arrays by dtype, shape and contents, tuples
    field by field, ADT values (anything with ``tag`` and ``fields``: a
    :class:`ConstructorValue` or the VM's ``ADT``) by tag and fields."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(values_equal(x, y) for x, y in zip(a, b)))
    if hasattr(a, "tag") or hasattr(b, "tag"):
        return (hasattr(a, "tag") and hasattr(b, "tag") and a.tag == b.tag
                and values_equal(tuple(a.fields), tuple(b.fields)))
    if isinstance(a, Closure) or isinstance(b, Closure):
        return a is b
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


def _match(pattern, value, env) -> bool:
    """Whether ``value`` matches ``pattern``, binding its variables into ``env``."""
    t = type(pattern)
    if t is PatternVar:
        env[pattern.var] = value
        return True
    if t is PatternConstructor:
        if value.constructor is not pattern.constructor:
            return False
    elif t is not PatternTuple:
        return True  # a wildcard
    return all(_match(p, v, env) for p, v in zip(pattern.patterns, value.fields
                                                  if t is PatternConstructor else value))


class _Interpreter:
    def __init__(self, mod):
        self.mod = mod

    def call_function(self, func, args, env):
        if len(args) != len(func.params):
            raise EvaluationError(f"{describe(func)} takes {len(func.params)} argument(s), "
                                  f"got {len(args)}")
        frame = dict(env)
        frame.update(zip(func.params, args))
        return self.eval(func.body, frame, {})

    def eval(self, expr, env, memo):
        # let chains are walked in a loop: ANF programs nest thousands deep
        while type(expr) is Let:
            if expr in memo:
                return memo[expr]
            env[expr.var] = self.eval(expr.value, env, memo)
            expr = expr.body
        if expr in memo:
            return memo[expr]
        value = self._eval(expr, env, memo)
        memo[expr] = value
        return value

    def _eval(self, expr, env, memo):
        t = type(expr)
        if t is Var:
            try:
                return env[expr]
            except KeyError:
                raise EvaluationError(f"variable %{expr.name_hint} is unbound") from None
        if t is Constant:
            return expr.data
        if t is Call:
            args = [self.eval(a, env, memo) for a in expr.args]
            op = expr.op
            if isinstance(op, Op):
                out = op.compute(*args, **expr.attrs)
                return tuple(out) if isinstance(out, (tuple, list)) else np.asarray(out)
            if isinstance(op, Constructor):
                return ConstructorValue(op, args)
            target = self.eval(op, env, memo)
            if not isinstance(target, Closure):
                raise EvaluationError(f"{describe(expr)}: calling a non-function")
            return self.call_function(target.func, args, target.env)
        if t is Tuple:
            return tuple(self.eval(f, env, memo) for f in expr.fields)
        if t is TupleGetItem:
            return self.eval(expr.tuple_value, env, memo)[expr.index]
        if t is If:
            cond = self.eval(expr.cond, env, memo)
            branch = expr.true_branch if bool(np.asarray(cond).item()) else expr.false_branch
            return self.eval(branch, env, memo)
        if t is Match:
            value = self.eval(expr.data, env, memo)
            for clause in expr.clauses:
                if _match(clause.lhs, value, env):
                    return self.eval(clause.rhs, env, memo)
            raise EvaluationError(f"{describe(expr)}: no clause matches the value {value!r} "
                                  "(add a clause for it)")
        if t is Constructor:
            if expr.inputs:
                raise EvaluationError(f"constructor {expr.name_hint} used as a value: call it "
                                      f"with its {len(expr.inputs)} field(s)")
            return ConstructorValue(expr, ())
        if t is Function:
            return Closure(expr, env)
        if t is GlobalVar:
            if self.mod is None or expr.name_hint not in self.mod:
                raise EvaluationError(f"global function @{expr.name_hint} is not defined")
            return Closure(self.mod[expr.name_hint], {})
        raise EvaluationError(f"cannot evaluate {describe(expr)}")


def _coerce_arg(param, value):
    ann = param.type_annotation
    if isinstance(ann, TensorType):
        arr = np.asarray(value)
        if arr.shape != ann.shape or arr.dtype.name != ann.dtype:
            if arr.shape == ann.shape and np.can_cast(arr.dtype, ann.dtype, "same_kind") \
                    and not isinstance(value, np.ndarray):
                return arr.astype(ann.dtype)
            raise EvaluationError(f"argument %{param.name_hint}: expected "
                                  f"{ann.shape} {ann.dtype}, got {arr.shape} {arr.dtype}")
        return arr
    return value


def evaluate(mod_or_expr, *args, mod=None, **named):
    """Run a program with the reference interpreter.

    Parameters
    ----------
    mod_or_expr : IRModule | Function | Expr
        A module (its ``main`` is called), a function (called) or an expression
        (evaluated with its free variables bound by name from ``named``).
    *args, **named
        Arguments by position, or by parameter name.
    mod : IRModule, optional
        The module global functions are looked up in when evaluating a bare expression.

    Returns
    -------
    numpy.ndarray or tuple
    """
    with deep_recursion():
        if isinstance(mod_or_expr, IRModule):
            mod = mod_or_expr
            func = mod["main"]
        elif isinstance(mod_or_expr, Function):
            func = mod_or_expr
        else:
            interp = _Interpreter(mod)
            env = {}
            for v in free_vars(mod_or_expr):
                if v.name_hint not in named:
                    raise EvaluationError(f"no value given for free variable %{v.name_hint}")
                env[v] = _coerce_arg(v, named.pop(v.name_hint))
            if args or named:
                raise EvaluationError(f"unused arguments: {len(args)} positional, "
                                      f"{sorted(named)}")
            return interp.eval(mod_or_expr, env, {})
        params = func.params
        values = list(args)
        if len(values) > len(params):
            raise EvaluationError(f"{describe(func)} takes {len(params)} argument(s), got "
                                  f"{len(values)}")
        for p in params[len(values):]:
            if p.name_hint not in named:
                raise EvaluationError(f"no value given for parameter %{p.name_hint}")
            values.append(named.pop(p.name_hint))
        if named:
            raise EvaluationError(f"unknown argument name(s) {sorted(named)}; parameters are "
                                  f"{[p.name_hint for p in params]}")
        values = [_coerce_arg(p, v) for p, v in zip(params, values)]
        return _Interpreter(mod).call_function(func, values, {})
