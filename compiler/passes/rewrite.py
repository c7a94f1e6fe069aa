"""Graph rewriting helpers shared by the passes (iterative post-order, memoized)."""

from __future__ import annotations

from ..ir.adt import Clause, Match, PatternConstructor, PatternTuple, PatternVar
from ..ir.analysis import post_order
from ..ir.expr import Call, Function, If, Let, Op, Tuple, TupleGetItem, Var

__all__ = ["rebuild", "transform", "substitute", "user_counts", "vars_used"]


def rebuild(node, memo):
    """``node`` with each child replaced by ``memo[child]`` (the node itself if unchanged)."""
    m = memo.get
    t = type(node)
    if t is Call:
        op = node.op if isinstance(node.op, Op) else m(node.op, node.op)
        args = tuple(m(a, a) for a in node.args)
        if op is node.op and all(x is y for x, y in zip(args, node.args)):
            return node
        return Call(op, args, node.attrs if isinstance(op, Op) else None)
    if t is Tuple:
        fields = tuple(m(f, f) for f in node.fields)
        return node if all(x is y for x, y in zip(fields, node.fields)) else Tuple(fields)
    if t is TupleGetItem:
        v = m(node.tuple_value, node.tuple_value)
        return node if v is node.tuple_value else TupleGetItem(v, node.index)
    if t is Let:
        var, value, body = m(node.var, node.var), m(node.value, node.value), m(node.body, node.body)
        if var is node.var and value is node.value and body is node.body:
            return node
        return Let(var, value, body)
    if t is If:
        c, a, b = (m(x, x) for x in (node.cond, node.true_branch, node.false_branch))
        if c is node.cond and a is node.true_branch and b is node.false_branch:
            return node
        return If(c, a, b)
    if t is Function:
        params = tuple(m(p, p) for p in node.params)
        body = m(node.body, node.body)
        if body is node.body and all(x is y for x, y in zip(params, node.params)):
            return node
        return Function(params, body, node.ret_type, node.attrs)
    if t is Match:
        lhss = [_rename_pattern(c.lhs, m) for c in node.clauses]
        if any(a is not c.lhs for a, c in zip(lhss, node.clauses)):
            return Match(m(node.data, node.data),
                         [Clause(a, m(c.rhs, c.rhs)) for a, c in zip(lhss, node.clauses)],
                         node.complete)
        return node.with_parts(m(node.data, node.data), [m(c.rhs, c.rhs) for c in node.clauses])
    return node


def _rename_pattern(p, m):
    """``p`` with its variables replaced as ``m`` says (``p`` itself if none is)."""
    t = type(p)
    if t is PatternVar:
        v = m(p.var, p.var)
        return p if v is p.var else PatternVar(v)
    if t not in (PatternConstructor, PatternTuple):
        return p
    subs = [_rename_pattern(q, m) for q in p.patterns]
    if all(a is b for a, b in zip(subs, p.patterns)):
        return p
    return PatternConstructor(p.constructor, subs) if t is PatternConstructor else \
        PatternTuple(subs)


def transform(expr, post=None, memo=None, descend=None):
    """Rebuild ``expr`` bottom-up; ``post(original, rebuilt) -> replacement`` for each node.

    ``descend(node)`` False keeps a node's sub-graph untouched (e.g. primitive functions).
    """
    memo = {} if memo is None else memo
    for node in post_order(expr, visited=memo.keys(), descend=descend):
        if descend is not None and not descend(node):
            new = node
        else:
            new = rebuild(node, memo)
        if post is not None:
            new = post(node, new)
        memo[node] = new
    return memo.get(expr, expr)


def substitute(expr, mapping):
    """``expr`` with Vars replaced as ``mapping`` says (binders included)."""
    return transform(expr, memo=dict(mapping))


def user_counts(expr, descend=None):
    """How many parent edges reach each node (binding positions excluded)."""
    from ..ir.analysis import children
    counts = {}
    for node in post_order(expr, descend=descend):
        if descend is not None and not descend(node):
            continue
        for c in children(node):
            counts[c] = counts.get(c, 0) + 1
    return counts


def vars_used(expr):
    """The set of Vars referenced (not merely bound) in ``expr``."""
    return {n for n in post_order(expr) if type(n) is Var}


def not_primitive(node):
    """``descend`` predicate: leave primitive functions' bodies alone."""
    return not (type(node) is Function and node.is_primitive())
