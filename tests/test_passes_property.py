"""Property test: for random well-typed graphs, every pass and the pipelines leave the
interpreter's outputs unchanged (bit for bit on integer graphs), and every result
prints, parses and prints back identically."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vtakit.compiler import nn
from vtakit.compiler.ir import (Call, Constant, Function, GlobalVar, If, IRModule, Let, Op,
                                Tuple, TupleGetItem, Var, astext, check_well_formed, evaluate,
                                TensorType, parse, post_order)
from vtakit.compiler.passes import (DeadCodeElimination, EliminateCommonSubexpr, FoldConstant,
                                    FoldScaleAxis, FuseOps, InferType, InlinePrimitives,
                                    LambdaLift, PassContext, SimplifyInference, ToANormalForm,
                                    ToBasicBlockNormalForm, default_pipeline, vm_pipeline)

C, H = 4, 5
SHAPE = (1, C, H, H)

PASSES = [InferType, SimplifyInference, FoldConstant, FoldScaleAxis, EliminateCommonSubexpr,
          DeadCodeElimination, ToANormalForm, ToBasicBlockNormalForm, FuseOps, LambdaLift,
          InlinePrimitives]


def _const(rng, shape, dtype):
    if dtype == "float32":
        return nn.const(rng.normal(size=shape).astype(np.float32))
    return nn.const(rng.integers(-50, 50, shape).astype(dtype))


@st.composite
def programs(draw, dtype):
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x, y = nn.var("x", SHAPE, dtype), nn.var("y", SHAPE, dtype)
    c = nn.var("c", (), "bool")
    pool = [x, y]
    use_if = False
    lets = []
    kinds = ["binary", "unary", "conv", "bias", "folded", "dup", "let", "if", "closure",
             "global"]
    uses_global = False
    kinds += ["bn", "dropout", "scale"] if dtype == "float32" else ["shift", "requant"]
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(kinds))
        a = pool[draw(st.integers(0, len(pool) - 1))]
        b = pool[draw(st.integers(0, len(pool) - 1))]
        if kind == "binary":
            op = draw(st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]))
            e = nn.call(op, a, b)
        elif kind == "unary":
            e = nn.call(draw(st.sampled_from(["nn.relu", "negative", "abs"])), a)
        elif kind == "conv":
            k = draw(st.sampled_from([1, 3]))
            e = nn.conv2d(a, _const(rng, (C, C // 2, k, k), dtype), padding=k // 2, groups=2) \
                if draw(st.booleans()) else nn.conv2d(a, _const(rng, (C, C, k, k), dtype),
                                                      padding=k // 2)
        elif kind == "bias":
            e = nn.add(a, _const(rng, (C, 1, 1), dtype))
        elif kind == "folded":
            e = nn.add(a, nn.multiply(_const(rng, (C, 1, 1), dtype), _const(rng, (1,), dtype)))
        elif kind == "dup":
            e = nn.add(nn.relu(a), nn.relu(a))
        elif kind == "let":
            v = Var(f"v{len(lets)}")
            lets.append((v, nn.add(a, b)))
            e = v
        elif kind == "if":
            use_if = True
            shared = nn.maximum(a, b)
            e = If(c, nn.add(shared, a), nn.subtract(shared, nn.relu(b)))
        elif kind == "closure":  # a local function capturing a, called twice
            p = Var("p", TensorType(SHAPE, dtype))
            f = Function([p], nn.relu(nn.add(p, a)))
            e = nn.add(Call(f, [b]), Call(f, [nn.negative(b)]))
        elif kind == "global":  # a call of the global @helper
            uses_global = True
            e = Call(GlobalVar("helper"), [a])
        elif kind == "bn":
            e = nn.batch_norm(a, *(nn.const(rng.uniform(0.5, 1.5, C).astype(np.float32))
                                   for _ in range(4)))
        elif kind == "dropout":
            e = nn.dropout(a)
        elif kind == "scale":
            e = nn.multiply(nn.conv2d(a, _const(rng, (C, C, 1, 1), dtype)),
                            nn.const(rng.uniform(0.5, 2, (C, 1, 1)).astype(np.float32)))
        elif kind == "shift":
            e = nn.right_shift(a, nn.const(int(rng.integers(0, 4)), dtype))
        else:  # requant: conv -> shift -> clip -> cast int8 -> cast back
            acc = nn.conv2d(a, _const(rng, (C, C, 3, 3), dtype), padding=1)
            e = nn.cast(nn.cast(nn.clip(nn.right_shift(acc, nn.const(4, dtype)), -128, 127),
                                "int8"), dtype)
        pool.append(e)
    out = pool[-1]
    if draw(st.booleans()) and len(pool) > 3:
        out = nn.concatenate([out, pool[-2]], axis=1)
    # wrap the let bindings around the result (their values may only use x, y and
    # earlier nodes, which holds because they were drawn from the pool before)
    for v, val in reversed(lets):
        out = Let(v, val, out)
    params = [x, y] + ([c] if use_if else [])
    funcs = {"main": Function(params, out)}
    if uses_global:
        h = Var("h", TensorType(SHAPE, dtype))
        funcs["helper"] = Function([h], nn.add(nn.relu(h), _const(rng, (C, 1, 1), dtype)))
    u = Var("u", TensorType(SHAPE, dtype))
    funcs["unused"] = Function([u], nn.negative(u))  # RemoveUnusedFunctions drops it
    return IRModule(funcs), use_if


def _inputs(dtype, use_if, rng):
    if dtype == "float32":
        args = [rng.normal(size=SHAPE).astype(np.float32) for _ in range(2)]
    else:
        args = [rng.integers(-1000, 1000, SHAPE).astype(dtype) for _ in range(2)]
    return args + ([np.bool_(rng.integers(0, 2))] if use_if else [])


def _same(a, b, exact):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y, exact)
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    if exact:
        assert np.array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)


def _outside_primitives(mod):
    for _, func in mod.items():
        yield from post_order(func, descend=lambda n: not (type(n) is Function
                                                           and n.is_primitive()))


def _check_shape(name, out):
    """The forms other passes and the VM compiler rely on."""
    if name in ("FuseOps", "default", "default+vm"):
        stray = [n.op.name for n in _outside_primitives(out)
                 if type(n) is Call and isinstance(n.op, Op)]
        assert not stray, f"{name} left operator calls outside primitive functions: {stray}"
    if name in ("ToANormalForm", "default+vm"):
        for n in _outside_primitives(out):
            if type(n) in (Call, Tuple, TupleGetItem):
                kids = n.args if type(n) is Call else (
                    n.fields if type(n) is Tuple else (n.tuple_value,))
                assert all(type(k) in (Var, Constant, GlobalVar) for k in kids), name
            if type(n) is If:
                assert type(n.cond) in (Var, Constant), name


def _check(mod, use_if, dtype):
    check_well_formed(mod)
    rng = np.random.default_rng(0)
    inputs = [_inputs(dtype, use_if, rng) for _ in range(2 if use_if else 1)]
    refs = [evaluate(mod, *args) for args in inputs]
    exact = dtype != "float32"
    candidates = [(p().info.name, lambda m, p=p: p()(m)) for p in PASSES]
    candidates += [("default", lambda m: default_pipeline()(m)),
                   ("default+vm", lambda m: vm_pipeline()(default_pipeline()(m)))]
    with PassContext(opt_level=3, config={"ir.debug": True}):
        for name, run in candidates:
            out = run(mod)
            for args, ref in zip(inputs, refs):
                try:
                    _same(evaluate(out, *args), ref, exact or name in (
                        "InferType", "EliminateCommonSubexpr", "DeadCodeElimination",
                        "ToANormalForm", "ToBasicBlockNormalForm", "FuseOps", "LambdaLift",
                        "InlinePrimitives"))
                except AssertionError as e:
                    raise AssertionError(f"{name} changed the result of\n{astext(mod)}") from e
            _check_shape(name, out)
            text = astext(out)
            assert astext(parse(text)) == text, name


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_pass_preserves_results(dtype, data):
    mod, use_if = data.draw(programs(dtype))
    _check(mod, use_if, dtype)
