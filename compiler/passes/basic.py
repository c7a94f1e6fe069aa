"""InferType, RemoveUnusedFunctions, DeadCodeElimination, EliminateCommonSubexpr,
FoldConstant."""

from __future__ import annotations

import numpy as np

from ..ir import infer_types
from ..ir.analysis import global_vars_used
from ..ir.expr import Call, Constant, Let, Op, Tuple, TupleGetItem
from .infra import function_pass, module_pass
from .rewrite import not_primitive, transform, vars_used

__all__ = ["InferType", "RemoveUnusedFunctions", "DeadCodeElimination",
           "EliminateCommonSubexpr", "FoldConstant"]


@module_pass(opt_level=0, name="InferType")
class InferType:
    """Fill ``checked_type`` on every node (the module is returned as is)."""

    def transform_module(self, mod, ctx):
        return infer_types(mod)


@module_pass(opt_level=1, name="RemoveUnusedFunctions")
class RemoveUnusedFunctions:
    """Drop global functions not reachable from the entry functions (recursion handled:
    a cycle of globals nobody reachable calls is dropped)."""

    def __init__(self, entry_functions=("main",)):
        self.entries = tuple(entry_functions)

    def transform_module(self, mod, ctx):
        keep, todo = set(), [n for n in self.entries if n in mod]
        while todo:
            name = todo.pop()
            if name in keep:
                continue
            keep.add(name)
            todo.extend(gv.name_hint for gv in global_vars_used(mod[name])
                        if gv.name_hint in mod)
        out = type(mod)(type_definitions=mod.type_definitions.values())
        for gv, f in mod.items():
            if gv.name_hint in keep:
                out[gv] = f
        return out


@function_pass(opt_level=1, name="DeadCodeElimination")
class DeadCodeElimination:
    """Remove let bindings whose variable is never used (the IR is pure)."""

    def transform_function(self, func, mod, ctx):
        while True:
            used = vars_used(func)

            def post(old, new):
                if type(new) is Let and new.var not in used:
                    return new.body
                return new

            out = transform(func, post, descend=not_primitive)
            if out is func:
                return func
            func = out


@function_pass(opt_level=3, name="EliminateCommonSubexpr")
class EliminateCommonSubexpr:
    """Merge calls of one operator on the same arguments with equal attributes.

    Parameters
    ----------
    fskip : callable, optional
        ``fskip(call) -> bool``: True keeps that call as it is (never merged).
    """

    def __init__(self, fskip=None):
        self.fskip = fskip

    def transform_function(self, func, mod, ctx):
        table = {}
        fskip = self.fskip

        def post(old, new):
            t = type(new)
            if t is Call and isinstance(new.op, Op):
                if fskip is not None and fskip(new):
                    return new
                key = ("call", new.op.name, tuple(map(id, new.args)),
                       tuple(sorted(new.attrs.items())))
            elif t is TupleGetItem:
                key = ("get", id(new.tuple_value), new.index)
            else:
                return new
            try:
                hit = table.get(key)
            except TypeError:  # an unhashable attribute value: leave the call alone
                return new
            if hit is not None:
                return hit
            table[key] = new
            return new

        return transform(func, post, descend=not_primitive)


# ops whose results must not be folded (none among the core ops; others may add theirs)
FOLD_SKIP: set[str] = set()


def _const_value(e):
    if type(e) is Constant:
        return e.data
    if type(e) is Tuple and all(type(f) is Constant for f in e.fields):
        return tuple(f.data for f in e.fields)
    return None


def _to_expr(value):
    if isinstance(value, tuple):
        return Tuple([_to_expr(v) for v in value])
    return Constant(np.asarray(value))


@function_pass(opt_level=2, name="FoldConstant")
class FoldConstant:
    """Evaluate (with the ops' reference computes) every call whose inputs are all
    constants, project constant tuples, and inline let-bound constants."""

    def transform_function(self, func, mod, ctx):
        def post(old, new):
            t = type(new)
            if t is Call and isinstance(new.op, Op) and new.op.name not in FOLD_SKIP:
                values = [_const_value(a) for a in new.args]
                if all(v is not None for v in values):
                    out = new.op.compute(*values, **new.attrs)
                    return _to_expr(tuple(out) if isinstance(out, (tuple, list))
                                    else np.asarray(out))
            elif t is TupleGetItem and type(new.tuple_value) is Tuple:
                return new.tuple_value.fields[new.index]
            elif t is Let and type(new.value) is Constant:
                return transform(new.body, memo={new.var: new.value})
            return new

        return transform(func, post, descend=not_primitive)

