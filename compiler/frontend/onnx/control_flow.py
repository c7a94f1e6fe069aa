"""Control flow: ``If`` (an IR ``If``, or one branch when the condition is constant) and
``Loop`` (a recursive global function ``@loop_N``)."""

from __future__ import annotations

import numpy as np

from ...ir import Call, Constant, Function, GlobalVar, If, TensorType, Tuple, TupleGetItem, \
    TupleType, Var
from .importer import _Scope
from .registry import OnnxImportError, _call, _converter, _graph_result, _scalar_bool, _Val, \
    _where

__all__: list[str] = []


@_converter("If")
def _if(ctx, node, ins, a):
    cond = ins[0]
    saved = ctx.scope
    if cond.const is not None:  # decided at compile time: import one branch inline
        branch = a["then_branch"] if bool(cond.const.reshape(-1)[0]) else a["else_branch"]
        outs = ctx.convert_graph(branch, _Scope(saved))
        ctx.scope = saved
        return outs
    then_outs = ctx.convert_graph(a["then_branch"], _Scope(saved))
    else_outs = ctx.convert_graph(a["else_branch"], _Scope(saved))
    ctx.scope = saved
    res = If(_scalar_bool(ctx, cond), _graph_result(ctx, then_outs),
             _graph_result(ctx, else_outs))
    if len(node.output) == 1:
        return [ctx.out(res)]
    return [ctx.out(TupleGetItem(res, i)) for i in range(len(node.output))]


@_converter("Loop")
def _loop(ctx, node, ins, a):
    body = a["body"]
    trip, cond0 = ins[0], ins[1] if len(ins) > 1 else None
    carried = ins[2:]
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan:
        raise OnnxImportError(f"{_where(node)}: scan outputs are not supported (only "
                              f"loop-carried values)")
    saved = ctx.scope
    i_var = Var("iter", TensorType((), "int64"))
    c_var = Var("cond", TensorType((), "bool"))
    m_var = Var("max_trip", TensorType((), "int64"))
    v_types = [ctx.type_of(v) for v in carried]
    v_vars = [Var(f"v{k}", t) for k, t in enumerate(v_types)]
    scope = _Scope(saved, capture=True)
    names = [i.name for i in body.input]
    scope[names[0]] = _Val(i_var, shape=(), dtype="int64")
    scope[names[1]] = _Val(c_var, shape=(), dtype="bool")
    for n, v, t in zip(names[2:], v_vars, v_types):
        scope[n] = _Val(v, shape=t.shape, dtype=t.dtype)
    outs = ctx.convert_graph(body, scope)
    ctx.scope = saved
    gv = GlobalVar(f"loop_{ctx.n_loops}")
    ctx.n_loops += 1
    cap_vars = [v for v, _ in scope.captures.values()]
    cap_exprs = [e for _, e in scope.captures.values()]
    next_i = _call("add", i_var, Constant(np.int64(1)))
    cond_out = _scalar_bool(ctx, outs[0])
    v_out = [ctx.value_expr(o) for o in outs[1:]]
    recur = Call(gv, [next_i, cond_out, m_var] + v_out + cap_vars)
    done = Tuple(list(v_vars))
    go = If(_call("less", i_var, m_var), recur, done)
    body_expr = If(c_var, go, done)
    ret = TupleType(v_types)
    ctx.mod[gv] = Function([i_var, c_var, m_var] + v_vars + cap_vars, body_expr, ret_type=ret)
    m0 = (Constant(np.int64(2**62)) if trip is None else
          _call("reshape", _call("cast", ctx.value_expr(trip), dtype="int64"), newshape=()))
    c0 = Constant(np.bool_(True)) if cond0 is None else _scalar_bool(ctx, cond0)
    res = Call(gv, [Constant(np.int64(0)), c0, m0] + [ctx.value_expr(v) for v in carried]
               + cap_exprs)
    return [ctx.out(TupleGetItem(res, k), shape=t.shape, dtype=t.dtype)
            for k, t in enumerate(v_types)]

