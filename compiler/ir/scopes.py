"""Scope placement: the lowest common ancestor scope of every use of each node.

Scopes are a function's body, each branch of an ``If`` and the body of each
nested function.  A node used in several scopes belongs to the innermost scope
enclosing all its uses (Relay's ``ToBasicBlockNormalForm`` rule); the printer
uses the same placement so that its text is always well scoped.
"""

from __future__ import annotations

from .analysis import post_order
from .expr import Constant, Function, GlobalVar, If, Op, Var

__all__ = ["Scope", "place_nodes", "is_atom"]


class Scope:
    """A node of the scope tree."""

    __slots__ = ("parent", "depth", "owner", "kind")

    def __init__(self, parent=None, owner=None, kind="root"):
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.owner = owner  # the If or Function that opened it
        self.kind = kind    # "root", "then", "else", "fn"

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
    """Leaves printed inline and never placed (vars, globals, ops, constants)."""
    return isinstance(e, (Var, GlobalVar, Op, Constant))


def place_nodes(body, root=None):
    """Place every non-atomic node reachable from ``body`` (a scope's result).

    Returns
    -------
    root : Scope
    scope_of : dict node -> Scope
        Where each node is bound.
    child_scopes : dict (If | Function) -> tuple of Scope
        The scopes an If's branches (then, else) or a function's body open.
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
        t = type(node)
        if t is If:
            then_s, else_s = Scope(s, node, "then"), Scope(s, node, "else")
            child_scopes[node] = (then_s, else_s)
            edges = ((node.cond, s), (node.true_branch, then_s), (node.false_branch, else_s))
        elif t is Function:
            fs = Scope(s, node, "fn")
            child_scopes[node] = (fs,)
            edges = ((node.body, fs),)
        else:
            from .analysis import children
            edges = tuple((c, s) for c in children(node))
        for c, cs in edges:
            uses[c] = uses.get(c, 0) + 1
            old = scope_of.get(c)
            scope_of[c] = cs if old is None else lca(old, cs)
    return root, scope_of, child_scopes, uses
