"""The well-formedness checker: each Var bound once, no free variables in global
functions, every global and constructor defined, and the types consistent."""

from __future__ import annotations

from .adt import Constructor, Match, PatternConstructor, pattern_vars
from .analysis import binders, children, post_order
from .describe import describe
from .errors import WellFormedError
from .expr import Call, Function, GlobalVar, IRModule, Let, Var
from .type_infer import infer_types

__all__ = ["check_well_formed"]


def _check_function(name, func, mod):
    bound = {}
    nodes = post_order(func)
    for node in nodes:
        for v in binders(node):
            if v in bound:
                raise WellFormedError(f"in @{name}: variable %{v.name_hint} is bound twice "
                                      f"({bound[v]} and {describe(node)})")
            bound[v] = describe(node)
    for node in nodes:
        if type(node) is Var and node not in bound:
            raise WellFormedError(f"in @{name}: variable %{node.name_hint} is free (not a "
                                  f"parameter nor let-bound)")
        if type(node) is GlobalVar and mod is not None and node.name_hint not in mod:
            raise WellFormedError(f"in @{name}: call to undefined global @{node.name_hint}")
        if mod is not None:
            for c in _constructors_used(node):
                td = mod.type_definitions.get(c.belong_to.name)
                if td is None or c not in td.constructors:
                    raise WellFormedError(f"in @{name}: constructor {c.name_hint} of type "
                                          f"{c.belong_to.name} is not defined in the module "
                                          "(add its TypeData with add_type_data)")
    _check_scopes(name, func)


def _check_scopes(name, func):
    """Every variable use lies inside the scope of its binding."""
    # walk with an explicit stack of (node, vars in scope)
    seen = set()
    stack = [(func, frozenset())]
    while stack:
        node, scope = stack.pop()
        key = (node, scope)
        if key in seen:
            continue
        seen.add(key)
        t = type(node)
        if t is Var:
            if node not in scope:
                raise WellFormedError(f"in @{name}: variable %{node.name_hint} is used outside "
                                      f"the scope that binds it")
        elif t is Function:
            stack.append((node.body, scope | set(node.params)))
        elif t is Let:
            stack.append((node.value, scope | {node.var}))  # recursive closures see themselves
            stack.append((node.body, scope | {node.var}))
        elif t is Match:
            stack.append((node.data, scope))
            stack.extend((c.rhs, scope | set(pattern_vars(c.lhs))) for c in node.clauses)
        else:
            stack.extend((c, scope) for c in children(node))


def _constructors_used(node):
    """Constructors a node calls, is, or matches on."""
    if type(node) is Constructor:
        return [node]
    if type(node) is Call and type(node.op) is Constructor:
        return [node.op]
    if type(node) is Match:
        out, stack = [], [c.lhs for c in node.clauses]
        while stack:
            p = stack.pop()
            if type(p) is PatternConstructor:
                out.append(p.constructor)
            stack.extend(getattr(p, "patterns", ()))
        return out
    return []


def check_well_formed(mod_or_expr, check_types=True):
    """Raise :class:`WellFormedError` (or ``TypeInferenceError``) on malformed IR."""
    if isinstance(mod_or_expr, IRModule):
        for gv, func in mod_or_expr.items():
            _check_function(gv.name_hint, func, mod_or_expr)
    else:
        _check_function("<expr>", mod_or_expr if isinstance(mod_or_expr, Function)
                        else Function([], mod_or_expr), None)
    if check_types:
        infer_types(mod_or_expr)
    return mod_or_expr
