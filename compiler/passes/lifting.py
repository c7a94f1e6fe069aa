"""LambdaLift and InlinePrimitives (the last steps before the VM compiler).

After ``LambdaLift`` no global function contains a non-primitive function
literal: each local function becomes a global.  One without free variables
becomes ``def @<outer>_lifted_<k>(params) { body }`` and its uses the GlobalVar;
one that captures free variables becomes a global *closure maker*
``def @<outer>_lifted_<k>(%free...) -> fn(...) { fn (params, Closure=1) { body } }``
and its uses ``@<outer>_lifted_<k>(%free...)`` (a call that makes the closure).
A let-bound recursive function refers to itself the same way.

``InlinePrimitives`` puts let-bound primitive functions back at their call sites
(``let %f = fn (..., Primitive=1) {...}; %f(%x)`` -> ``(fn (...) {...})(%x)``) and
drops the binding when nothing else uses it.
"""

from __future__ import annotations

from ..ir import infer_types
from ..ir.analysis import free_vars, post_order
from ..ir.expr import Call, Function, GlobalVar, Let, Var
from ..ir.types import FuncType
from .infra import function_pass, module_pass
from .rewrite import not_primitive, substitute, transform, vars_used

__all__ = ["LambdaLift", "InlinePrimitives"]


@module_pass(opt_level=0, name="LambdaLift")
class LambdaLift:
    """Lift local (non-primitive) functions to global functions (see the module doc)."""

    def transform_module(self, mod, ctx):
        infer_types(mod)
        out = {}
        for gv, func in mod.items():
            if func.is_primitive():
                out[gv] = func
                continue
            lifted = {}
            new = self.lift(gv.name_hint, func, lifted, mod)
            out[gv] = new
            out.update(lifted)
        if all(out.get(gv) is f for gv, f in mod.items()) and len(out) == len(mod):
            return mod
        new_mod = type(mod)(type_definitions=mod.type_definitions.values())
        for gv, f in out.items():
            new_mod[gv] = f
        return new_mod

    def lift(self, outer, func, lifted, mod):
        names = set(mod) | {gv.name_hint for gv in lifted}
        letrec = {n.value: n.var for n in post_order(func.body, descend=not_primitive)
                  if type(n) is Let and type(n.value) is Function}

        def post(old, new):
            if type(new) is not Function or new.is_primitive():
                return new
            k = len(lifted)
            while f"{outer}_lifted_{k}" in names:
                k += 1
            name = f"{outer}_lifted_{k}"
            names.add(name)
            gv = GlobalVar(name)
            self_var = letrec.get(old)
            free = [v for v in free_vars(new) if v is not self_var]
            ret = new.ret_type or old.body.checked_type
            inner_type = FuncType([p.type_annotation for p in new.params], ret)
            if not free:
                body = new.body if self_var is None else substitute(new.body, {self_var: gv})
                lifted[gv] = Function(new.params, body, ret, new.attrs)
                return gv
            fresh = [Var(v.name_hint, v.checked_type) for v in free]
            mapping = dict(zip(free, fresh))
            if self_var is not None:
                mapping[self_var] = Call(gv, fresh)
            body = substitute(new.body, mapping)
            inner = Function(new.params, body, ret, {**new.attrs, "Closure": 1})
            lifted[gv] = Function(fresh, inner, inner_type)
            return Call(gv, free)

        body = transform(func.body, post, descend=not_primitive)
        return func if body is func.body else Function(func.params, body, func.ret_type,
                                                       func.attrs)


@function_pass(opt_level=1, name="InlinePrimitives")
class InlinePrimitives:
    """Call let-bound primitive functions directly (see the module docstring)."""

    def transform_function(self, func, mod, ctx):
        prims = {n.var: n.value for n in post_order(func, descend=not_primitive)
                 if type(n) is Let and type(n.value) is Function and n.value.is_primitive()}
        if not prims:
            return func

        def call_post(old, new):
            if type(new) is Call and type(new.op) is Var and new.op in prims:
                return Call(prims[new.op], new.args)
            return new

        func = transform(func, call_post, descend=not_primitive)
        used = vars_used(func)

        def drop_post(old, new):
            if type(new) is Let and new.var in prims and new.var not in used:
                return new.body
            return new

        return transform(func, drop_post, descend=not_primitive)
