"""ToANormalForm and ToBasicBlockNormalForm.

Both bind values with ``let`` in the innermost scope that encloses all their
uses (a function body, an If branch, a match clause, a nested function body), so a value
shared by both branches of an ``If`` is computed once, before the ``If``.

*A-normal form* (what the VM compiler consumes): every function body (and every
If branch) is a chain ``let %x1 = v1; ...; let %xn = vn; result`` where each
``vi`` is a call, tuple, projection, If, match or function whose operands are atoms
(Vars, GlobalVars, Constants); primitive functions are bound like other values
and their bodies left as they are (``InlinePrimitives`` moves them back to
their call sites).

*Basic block normal form*: only values used in more than one scope are
let-bound (at the lowest common ancestor scope); the rest stays dataflow.
"""

from __future__ import annotations

from ..ir.adt import Match
from ..ir.analysis import post_order
from ..ir.expr import Function, If, Let, Var
from ..ir.scopes import Scope, is_atom, lca, scope_edges
from .infra import function_pass
from .rewrite import not_primitive, rebuild

__all__ = ["ToANormalForm", "ToBasicBlockNormalForm", "to_scoped_lets"]


def _place(body):
    """(scope_of, child_scopes, crossing): placement at the LCA of uses, like
    :func:`vtakit.compiler.ir.scopes.place_nodes`, plus the nodes used outside their
    own scope, without entering primitive functions."""
    root = Scope()
    nodes = post_order(body, descend=not_primitive)
    scope_of, child_scopes, uses = {body: root}, {}, {body: 1}
    use_scopes = {body: [root]}
    for node in reversed(nodes):
        s = scope_of.get(node)
        if s is None or is_atom(node):
            continue
        if type(node) is Function and node.is_primitive():
            continue
        for c, cs in scope_edges(node, s, child_scopes):
            uses[c] = uses.get(c, 0) + 1
            use_scopes.setdefault(c, []).append(cs)
            old = scope_of.get(c)
            scope_of[c] = cs if old is None else lca(old, cs)
    crossing = {n for n, ss in use_scopes.items() if any(x is not scope_of[n] for x in ss)}
    return nodes, scope_of, child_scopes, uses, crossing


def to_scoped_lets(func: Function, bind_all: bool) -> Function:
    """Rebind ``func``'s body: every non-atomic node (``bind_all``) or only the nodes
    used across scopes gets a ``let`` in its LCA scope."""
    body = func.body
    nodes, scope_of, child_scopes, uses, crossing = _place(body)
    # a value used only by one let is bound to that let's own variable
    let_of_value = {n.value: n for n in nodes if type(n) is Let and uses.get(n.value) == 1
                    and not is_atom(n.value) and type(n.value) is not Let}
    bindings = {}           # scope -> list of (var, value)
    memo = {}               # original node -> its reference in the new program
    emitted_lets = set()
    counter = [0]

    def fresh():
        counter[0] += 1
        return Var(f"x{counter[0]}")

    def chain(scope, result):
        out = result
        for var, value in reversed(bindings.get(scope, ())):
            out = Let(var, value, out)
        return out

    def emit_let(let):
        if let in emitted_lets:
            return
        emitted_lets.add(let)
        value = memo.get(let.value, let.value)
        if let.value in let_of_value and let_of_value[let.value] is let:
            return  # the value's own binding already used this let's variable
        bindings.setdefault(scope_of[let], []).append((let.var, value))

    let_by_var = {n.var: n for n in nodes if type(n) is Let}
    for node in nodes:
        t = type(node)
        if t is Var:
            if node in let_by_var and node not in memo:
                let = let_by_var[node]
                if let.value is not None and (let.value in memo or is_atom(let.value)):
                    emit_let(let)
            continue
        if is_atom(node):
            continue
        if t is Let:
            emit_let(node)
            memo[node] = memo.get(node.body, node.body)
            continue
        if t is If:
            then_s, else_s = child_scopes[node]
            new = If(memo.get(node.cond, node.cond),
                     chain(then_s, memo.get(node.true_branch, node.true_branch)),
                     chain(else_s, memo.get(node.false_branch, node.false_branch)))
        elif t is Match:
            new = node.with_parts(memo.get(node.data, node.data),
                                  [chain(cs, memo.get(c.rhs, c.rhs))
                                   for c, cs in zip(node.clauses, child_scopes[node])])
        elif t is Function and not node.is_primitive():
            (fs,) = child_scopes[node]
            new = Function(node.params, chain(fs, memo.get(node.body, node.body)),
                           node.ret_type, node.attrs)
        elif t is Function:
            new = node
        else:
            new = rebuild(node, memo)
        if node is body:
            memo[node] = new
            continue
        if node in let_of_value:
            let = let_of_value[node]
            bindings.setdefault(scope_of[let], []).append((let.var, new))
            memo[node] = let.var
            emit_let(let)
        elif bind_all or node in crossing:
            var = fresh()
            bindings.setdefault(scope_of[node], []).append((var, new))
            memo[node] = var
        else:
            memo[node] = new
    root = scope_of[body]
    result = memo.get(body, body)
    if type(body) is Let:
        result = memo[body]
    new_body = chain(root, result)
    return Function(func.params, new_body, func.ret_type, func.attrs)


@function_pass(opt_level=1, name="ToANormalForm")
class ToANormalForm:
    """Bind every intermediate value with ``let`` (see the module docstring)."""

    def transform_function(self, func, mod, ctx):
        return to_scoped_lets(func, bind_all=True)


@function_pass(opt_level=1, name="ToBasicBlockNormalForm")
class ToBasicBlockNormalForm:
    """Bind values used in several scopes at their lowest common ancestor scope."""

    def transform_function(self, func, mod, ctx):
        return to_scoped_lets(func, bind_all=False)
