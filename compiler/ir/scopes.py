"""Scope placement: the lowest common ancestor scope of every use of each node.

Scopes are a function's body, each branch of an ``If``, each clause of a
``Match`` and the body of each nested function.  A node used in several scopes
belongs to the innermost scope enclosing all its uses (Relay's
``ToBasicBlockNormalForm`` rule); the printer uses the same placement so that
its text is always well scoped.
"""

from __future__ import annotations

from .analysis import post_order
from .adt import Constructor, Match
from .expr import Constant, Function, GlobalVar, If, Op, Var

__all__ = ["Scope", "place_nodes", "scope_edges", "is_atom"]


class Scope:
    """A node of the scope tree."""

    __slots__ = ("parent", "depth", "owner", "kind")

    def __init__(self, parent=None, owner=None, kind="root"):
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.owner = owner  # the If, Match or Function that opened it
        self.kind = kind    # "root", "then", "else", "fn", "clause"

    def __repr__(self):
        return f"Scope({self.kind}, depth={self.depth})"


def lca(a, b):
    while a.depth > b.depth:
        a = a.parent
    while b.depth > a.depth:
        b = b.parent
    while a is not b:
        a, b = a.parent, b.parent
    return a


def is_atom(e) -> bool:
    """Leaves printed inline and never placed (vars, globals, ops, constants, constructors)."""
    return isinstance(e, (Var, GlobalVar, Op, Constant, Constructor))


def scope_edges(node, s, child_scopes):
    """``(child, scope)`` pairs of a node placed in scope ``s``: the scopes its If
    branches, match clauses or function body open (recorded in ``child_scopes``), ``s``
    for its other children."""
    t = type(node)
    if t is If:
        then_s, else_s = Scope(s, node, "then"), Scope(s, node, "else")
        child_scopes[node] = (then_s, else_s)
        return ((node.cond, s), (node.true_branch, then_s), (node.false_branch, else_s))
    if t is Match:
        clause_scopes = tuple(Scope(s, node, "clause") for _ in node.clauses)
        child_scopes[node] = clause_scopes
        return ((node.data, s),) + tuple((c.rhs, cs) for c, cs in zip(node.clauses,
                                                                       clause_scopes))
    if t is Function:
        fs = Scope(s, node, "fn")
        child_scopes[node] = (fs,)
        return ((node.body, fs),)
    from .analysis import children
    return tuple((c, s) for c in children(node))


def place_nodes(body, root=None):
    """Place every non-atomic node reachable from ``body`` (a scope's result).

    Returns
    -------
    root : Scope
    scope_of : dict node -> Scope
        Where each node is bound.
    child_scopes : dict (If | Match | Function) -> tuple of Scope
        The scopes an If's branches (then, else), a match's clauses or a function's
        body open.
    uses : dict node -> int
        How many parent edges reach each node (the scope result counts once).
    """
    root = root or Scope()
    nodes = post_order(body)
    scope_of = {body: root}
    child_scopes = {}
    uses = {body: 1}
    for node in reversed(nodes):  # parents before children
        s = scope_of.get(node)
        if s is None:  # only reachable through atoms; cannot happen for non-atoms
            continue
        if is_atom(node):
            continue
        for c, cs in scope_edges(node, s, child_scopes):
            uses[c] = uses.get(c, 0) + 1
            old = scope_of.get(c)
            scope_of[c] = cs if old is None else lca(old, cs)
    return root, scope_of, child_scopes, uses
