"""Graph traversals and variable analyses (iterative, so deep graphs do not hit the
recursion limit)."""

from __future__ import annotations

import contextlib
import sys

from .adt import Constructor, Match, pattern_vars
from .expr import Call, Constant, Function, GlobalVar, If, Let, Op, Tuple, TupleGetItem, Var

__all__ = ["children", "binders", "post_order", "free_vars", "bound_vars", "global_vars_used",
           "deep_recursion", "count_nodes", "is_op"]


def is_op(expr, name) -> bool:
    """Whether ``expr`` is a call of the operator ``name``."""
    return type(expr) is Call and isinstance(expr.op, Op) and expr.op.name == name


def children(expr) -> tuple:
    """The sub-expressions of ``expr`` in evaluation order (binding Vars excluded; an
    operator or constructor called is not a sub-expression)."""
    t = type(expr)
    if t is Call:
        return expr.args if isinstance(expr.op, (Op, Constructor)) else (expr.op,) + expr.args
    if t is Tuple:
        return expr.fields
    if t is TupleGetItem:
        return (expr.tuple_value,)
    if t is Let:
        return (expr.value, expr.body)
    if t is If:
        return (expr.cond, expr.true_branch, expr.false_branch)
    if t is Function:
        return (expr.body,)
    if t is Match:
        return (expr.data,) + tuple(c.rhs for c in expr.clauses)
    return ()


def binders(expr) -> tuple:
    """The Vars ``expr`` itself binds: parameters, a let variable, pattern variables."""
    t = type(expr)
    if t is Function:
        return expr.params
    if t is Let:
        return (expr.var,)
    if t is Match:
        return tuple(v for c in expr.clauses for v in pattern_vars(c.lhs))
    return ()


def post_order(expr, visited=None, descend=None) -> list:
    """Every node reachable from ``expr``, each once, children before parents.

    Parameters
    ----------
    visited : set or dict, optional
        Nodes to treat as already seen (they and their sub-graphs are not listed).
    descend : callable, optional
        ``descend(node) -> bool``; False lists the node but not its children.
    """
    seen = set() if visited is None else set(visited)
    out = []
    stack = [(expr, False)]
    while stack:
        node, done = stack.pop()
        if done:
            out.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        if descend is None or descend(node):
            for c in reversed(children(node)):
                if c not in seen:
                    stack.append((c, False))
    return out


def bound_vars(expr) -> list:
    """Vars bound inside ``expr`` (function parameters, let and pattern variables)."""
    return [v for node in post_order(expr) for v in binders(node)]


def free_vars(expr) -> list:
    """Vars used in ``expr`` but not bound in it, in order of first use."""
    nodes = post_order(expr)
    bound = {v for node in nodes for v in binders(node)}
    return [n for n in nodes if type(n) is Var and n not in bound]


def global_vars_used(expr) -> list:
    """GlobalVars referenced in ``expr``, by first use."""
    out, names = [], set()
    for node in post_order(expr):
        if type(node) is GlobalVar and node.name_hint not in names:
            names.add(node.name_hint)
            out.append(node)
    return out


def count_nodes(expr) -> int:
    """How many distinct non-leaf nodes ``expr`` has (a size measure for tests and benches)."""
    return sum(1 for n in post_order(expr)
               if not isinstance(n, (Var, Constant, Op, GlobalVar, Constructor)))


@contextlib.contextmanager
def deep_recursion(limit=100_000):
    """Raise the recursion limit for the recursive walks (interpreter, equality, passes)."""
    old = sys.getrecursionlimit()
    if old < limit:
        sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        if old < limit:
            sys.setrecursionlimit(old)
