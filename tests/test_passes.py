"""Graph passes: the classic Relay examples, pass context behaviours, the VM-facing forms."""

import numpy as np
import pytest

from vtakit.compiler import nn
from vtakit.compiler.ir import (Call, Constant, FuncType, Function, GlobalVar, If, IRModule,
                                Let, Op, TensorType, Var, astext, check_well_formed,
                                evaluate, parse, post_order)
from vtakit.compiler.passes import (DeadCodeElimination, DumpIR, EliminateCommonSubexpr,
                                    FoldConstant, FoldScaleAxis, FuseOps, InferType,
                                    InlinePrimitives, LambdaLift, PassContext,
                                    PassTimingInstrument, RemoveUnusedFunctions, Sequential,
                                    SimplifyInference, ToBasicBlockNormalForm,
                                    default_pipeline, function_pass, get_pass, list_passes,
                                    module_pass, vm_pipeline)


def op_names(mod_or_expr):
    root = mod_or_expr["main"] if isinstance(mod_or_expr, IRModule) else mod_or_expr
    return [n.op.name for n in post_order(root) if type(n) is Call and isinstance(n.op, Op)]


def roundtrip(mod):
    text = astext(mod)
    assert astext(parse(text)) == text
    return mod


def conv_bn_relu_module(seed=0):
    rng = np.random.default_rng(seed)
    x = nn.var("x", (1, 3, 8, 8))
    w = nn.const(rng.normal(size=(4, 3, 3, 3)).astype(np.float32))
    bn = [nn.const(rng.uniform(0.5, 1.5, 4).astype(np.float32)) for _ in range(4)]
    return nn.module(nn.relu(nn.batch_norm(nn.conv2d(x, w, padding=1), *bn)))


def test_conv_bn_relu_batch_norm_disappears():
    mod = conv_bn_relu_module()
    x = np.random.default_rng(1).normal(size=(1, 3, 8, 8)).astype(np.float32)
    ref = evaluate(mod, x)
    seq = Sequential([InferType(), SimplifyInference(), FoldConstant(), FoldScaleAxis(),
                      FoldConstant()])
    with PassContext(opt_level=3):
        out = seq(mod)
    assert op_names(out) == ["nn.conv2d", "add", "nn.relu"]
    np.testing.assert_allclose(evaluate(out, x), ref, rtol=1e-5, atol=1e-5)
    # the scale lives in the weights now: one constant (C, 1, 1) shift remains
    add = [n for n in post_order(out["main"]) if type(n) is Call and n.op.name == "add"][0]
    assert add.args[1].data.shape == (4, 1, 1)
    roundtrip(out)


def test_remove_unused_functions_with_mutual_recursion():
    n = nn.var("n", (), "int32")
    zero, one = nn.const(0, "int32"), nn.const(1, "int32")
    i32 = TensorType((), "int32")

    def countdown(other):
        m = Var("m", i32)
        return Function([m], If(nn.greater(m, zero), Call(GlobalVar(other),
                                                          [nn.subtract(m, one)]), m), i32)

    mod = IRModule({"main": Function([n], Call(GlobalVar("even"), [n])),
                    "even": countdown("odd"), "odd": countdown("even"),
                    "ping": countdown("pong"), "pong": countdown("ping"),
                    "unused": Function([Var("z", i32)], zero)})
    out = RemoveUnusedFunctions()(mod)
    assert list(out) == ["main", "even", "odd"]
    assert int(evaluate(out, np.int32(7))) == 0
    assert list(RemoveUnusedFunctions(entry_functions=["ping"])(mod)) == ["ping", "pong"]
    roundtrip(out)


def test_basic_block_normal_form_hoists_to_lowest_common_ancestor():
    x = nn.var("x", (2,))
    c = nn.var("c", (), "bool")
    shared = nn.exp(x)  # used in both branches
    only_then = nn.sqrt(x)
    body = If(c, nn.add(shared, only_then), nn.multiply(shared, shared))
    mod = IRModule({"main": Function([x, c], body)})
    out = ToBasicBlockNormalForm()(mod)
    main = out["main"]
    # the shared value is bound once, before the If, the branch-local one stays in its branch
    assert type(main.body) is Let and main.body.value.op.name == "exp"
    inner_if = main.body.body
    assert type(inner_if) is If
    assert "sqrt" in op_names(inner_if.true_branch) and "exp" not in op_names(inner_if)
    check_well_formed(out)
    xv = np.array([1.0, 4.0], np.float32)
    for cv in (True, False):
        assert np.array_equal(evaluate(out, xv, np.bool_(cv)), evaluate(mod, xv, np.bool_(cv)))
    assert astext(out).count("exp(") == 1
    roundtrip(out)


def test_cse_with_skip_callback():
    x = nn.var("x", (1, 4))
    a1, a2 = nn.relu(x), nn.relu(x)
    c1, c2 = nn.cast(x, "int32"), nn.cast(x, "int32")
    mod = nn.module(nn.concatenate([nn.add(a1, a2), nn.cast(nn.add(c1, c2), "float32")], 1))
    out = EliminateCommonSubexpr()(mod)
    assert op_names(out).count("nn.relu") == 1 and op_names(out).count("cast") == 2
    skip = EliminateCommonSubexpr(fskip=lambda call: call.op.name == "cast")(mod)
    assert op_names(skip).count("nn.relu") == 1 and op_names(skip).count("cast") == 3
    xv = np.arange(4, dtype=np.float32).reshape(1, 4)
    assert np.array_equal(evaluate(out, xv), evaluate(mod, xv))
    roundtrip(skip)


def test_dead_code_elimination():
    x = nn.var("x", (2,))
    dead, live = Var("dead"), Var("live")
    body = Let(dead, nn.exp(x), Let(live, nn.relu(x), nn.add(live, x)))
    out = DeadCodeElimination()(roundtrip(IRModule({"main": Function([x], body)})))
    assert op_names(roundtrip(out)) == ["nn.relu", "add"]


def test_fold_constant_and_simplify_dropout():
    x = nn.var("x", (2,))
    k = nn.add(nn.const(np.ones(2, np.float32)), nn.const(np.ones(2, np.float32)))
    mod = nn.module(nn.dropout(nn.multiply(x, k)))
    out = FoldConstant()(SimplifyInference()(roundtrip(mod)))
    assert op_names(roundtrip(out)) == ["multiply"]


def test_fuse_ops_fuses_int8_conv_epilogue_into_one_primitive():
    rng = np.random.default_rng(3)
    x = nn.var("x", (1, 8, 6, 6), "int8")
    res = nn.var("res", (1, 16, 6, 6), "int32")
    w = nn.const(rng.integers(-128, 128, (16, 8, 3, 3), dtype=np.int8))
    b = nn.const(rng.integers(-999, 999, (16, 1, 1), dtype=np.int32))
    acc = nn.add(nn.add(nn.conv2d(x, w, padding=1, out_dtype="int32"), b), res)
    y = nn.relu(nn.cast(nn.clip(nn.right_shift(acc, nn.const(8, "int32")), -128, 127), "int8"))
    mod = nn.module(nn.max_pool2d(y, 2), [x, res])
    out = FuseOps()(mod)
    main = out["main"]
    prims = sorted((n for n in post_order(main) if type(n) is Function and n.is_primitive()),
                   key=lambda f: -len(f.params))
    assert len(prims) == 2
    assert op_names(prims[0].body) == ["nn.conv2d", "add", "add", "right_shift", "clip", "cast",
                                       "nn.relu"]
    assert [p.type_annotation.shape for p in prims[0].params] == [(1, 8, 6, 6), (16, 8, 3, 3),
                                                                  (16, 1, 1), (1, 16, 6, 6)]
    assert op_names(prims[1].body) == ["nn.max_pool2d"]
    xv = rng.integers(-128, 128, (1, 8, 6, 6), dtype=np.int8)
    rv = rng.integers(-5000, 5000, (1, 16, 6, 6), dtype=np.int32)
    assert np.array_equal(evaluate(out, xv, rv), evaluate(mod, xv, rv))
    with PassContext(opt_level=0):
        unfused = FuseOps()(mod)
    assert sum(1 for n in post_order(unfused["main"]) if type(n) is Function
               and n.is_primitive()) == 8
    roundtrip(out)


def test_fuse_ops_stops_at_values_used_twice_by_different_anchors():
    x = nn.var("x", (1, 4, 4, 4))
    w = nn.const(np.ones((4, 4, 1, 1), np.float32))
    a = nn.relu(nn.conv2d(x, w))
    mod = nn.module(nn.add(nn.conv2d(a, w), a))  # a feeds a conv and the residual add
    out = roundtrip(FuseOps()(mod))
    prims = [n for n in post_order(out["main"]) if type(n) is Function and n.is_primitive()]
    assert sorted(op_names(p.body) for p in prims) == [["nn.conv2d", "add"],
                                                       ["nn.conv2d", "nn.relu"]]


def test_vm_lowering_shapes():
    """After FuseOps + ToANormalForm + InlinePrimitives + LambdaLift: ANF, primitive
    functions at call sites, no local closures left in any global."""
    x = nn.var("x", (2,))
    y = Var("y", TensorType((2,)))
    f = Var("f")
    body = Let(f, Function([y], nn.relu(nn.multiply(y, x))),
               nn.add(Call(f, [x]), Call(f, [nn.exp(x)])))
    mod = IRModule({"main": Function([x], body)})
    with PassContext(opt_level=3):
        out = vm_pipeline()(FuseOps()(mod))
    assert sorted(out) == ["main", "main_lifted_0"]
    for gv, func in out.items():
        for node in post_order(func, descend=lambda n: not (type(n) is Function
                                                            and n.is_primitive())):
            if type(node) is Function and node is not func:
                assert node.is_primitive() or node.attrs.get("Closure") == 1
            if type(node) is Call:
                assert type(node.op) in (Function, GlobalVar, Var)
                assert all(type(a) in (Var, Constant, GlobalVar) for a in node.args)
    xv = np.array([-1.0, 2.0], np.float32)
    assert np.array_equal(evaluate(out, xv), evaluate(mod, xv))
    roundtrip(out)


def test_lambda_lift_recursive_let_closure():
    i32 = TensorType((), "int32")
    n, k = Var("n", i32), Var("k", i32)
    f = Var("f", FuncType([i32], i32))
    step = nn.var("step", (), "int32")
    rec = Function([k], If(nn.greater(k, nn.const(0, "int32")),
                           nn.add(step, Call(f, [nn.subtract(k, nn.const(1, "int32"))])),
                           nn.const(0, "int32")), i32)
    mod = IRModule({"main": Function([n, step], Let(f, rec, Call(f, [n])))})
    out = LambdaLift()(mod)
    check_well_formed(out)
    assert int(evaluate(out, np.int32(4), np.int32(3))) == 12
    roundtrip(out)


def test_inline_primitives():
    x = nn.var("x", (2,))
    p = Var("p0", TensorType((2,)))
    prim = Function([p], nn.relu(p), attrs={"Primitive": 1})
    fv = Var("f")
    mod = IRModule({"main": Function([x], Let(fv, prim, Call(fv, [x])))})
    out = InlinePrimitives()(roundtrip(mod))
    assert type(out["main"].body) is Call and out["main"].body.op is prim
    roundtrip(out)


def test_pass_context_disabled_required_and_timing(tmp_path):
    mod = conv_bn_relu_module()
    timing = PassTimingInstrument()
    seq = Sequential([InferType(), SimplifyInference(), FoldConstant(), FoldScaleAxis()])
    with PassContext(opt_level=2, disabled=["FoldConstant"], instruments=[timing]):
        out = seq(mod)
    # FoldConstant disabled, FoldScaleAxis (level 3) skipped at opt_level 2
    assert [n for n, _ in timing.timings] == ["InferType", "SimplifyInference"]
    assert "sqrt" in op_names(out)
    timing2 = PassTimingInstrument()
    with PassContext(opt_level=1, required=["FoldScaleAxis", "FoldConstant"],
                     instruments=[timing2, DumpIR(tmp_path / "dump")]):
        out2 = seq(mod)
    names = [n for n, _ in timing2.timings]
    assert names == ["InferType", "SimplifyInference", "FoldConstant", "FoldScaleAxis"]
    assert all(t >= 0 for _, t in timing2.timings)
    table = timing2.render()
    assert all(n in table for n in names) and "total" in table
    dumps = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert dumps == ["000_InferType.txt", "001_SimplifyInference.txt", "002_FoldConstant.txt",
                     "003_FoldScaleAxis.txt"]
    assert "nn.batch_norm" not in (tmp_path / "dump" / dumps[-1]).read_text()
    assert op_names(out2) == ["nn.conv2d", "add", "nn.relu"]
    with pytest.raises(ValueError, match="both required and disabled"):
        PassContext(required=["FuseOps"], disabled=["FuseOps"])


def test_pass_registry_and_decorators():
    passes = list_passes()
    for name, level in [("InferType", 0), ("FoldConstant", 2), ("FuseOps", 0),
                        ("EliminateCommonSubexpr", 3), ("FoldScaleAxis", 3),
                        ("ToANormalForm", 1), ("LambdaLift", 0)]:
        assert passes[name] == level
    assert get_pass("FuseOps")().info.name == "FuseOps"

    @module_pass(opt_level=4, name="AddGlobal")
    def add_global(mod, ctx):
        return mod.with_functions({"extra": Function([], nn.const(1.0))})

    @function_pass(opt_level=0)
    def double_relu(func, mod, ctx):
        return Function(func.params, nn.relu(func.body), func.ret_type, func.attrs)

    mod = nn.module(nn.var("x", (1,)))
    assert list(Sequential([add_global])(mod)) == ["main"]          # level 4 > 2: skipped
    assert list(add_global(mod)) == ["main", "extra"]               # called directly: runs
    assert op_names(double_relu(mod)) == ["nn.relu"]
    with pytest.raises(KeyError, match="no pass named 'Nope'"):
        get_pass("Nope")


def test_debug_mode_checks_well_formedness_after_each_pass():
    @function_pass(opt_level=0, name="Breaker")
    def breaker(func, mod, ctx):
        return Function(func.params, nn.add(func.body, Var("ghost", TensorType((1,)))))

    mod = nn.module(nn.var("x", (1,)))
    breaker(mod)  # not checked outside debug mode
    with PassContext(config={"ir.debug": True}):
        with pytest.raises(Exception, match="variable %ghost is free"):
            breaker(mod)


def test_default_pipeline_on_resnet18_small():
    mod = nn.resnet18(image_shape=(3, 32, 32), num_classes=10)
    x = np.random.default_rng(0).normal(size=(1, 3, 32, 32)).astype(np.float32)
    ref = evaluate(mod, x)
    with PassContext(opt_level=3):
        out = vm_pipeline()(default_pipeline()(mod))
    check_well_formed(roundtrip(out))
    np.testing.assert_allclose(evaluate(out, x), ref, rtol=1e-4, atol=1e-6)
    names = op_names(out)
    assert "nn.batch_norm" not in names and "multiply" not in names
    prims = [n for n in post_order(out["main"]) if type(n) is Function and n.is_primitive()]
    convs = [p for p in prims if "nn.conv2d" in op_names(p.body)]
    assert len(convs) == 20 and all(op_names(p.body).count("nn.conv2d") == 1 for p in convs)
    assert sum(op_names(p.body) == ["nn.conv2d", "add", "add", "nn.relu"] for p in convs) == 8


def test_fuse_ops_puts_tuples_inside_concatenate():
    x = nn.var("x", (1, 2, 4, 4))
    w = nn.const(np.ones((2, 2, 1, 1), np.float32))
    a, b = nn.relu(nn.conv2d(x, w)), nn.exp(x)
    mod = nn.module(nn.relu(nn.concatenate([a, b], axis=1)))
    out = roundtrip(FuseOps()(mod))
    prims = [n for n in post_order(out["main"]) if type(n) is Function and n.is_primitive()]
    concat = [p for p in prims if "concatenate" in op_names(p.body)]
    assert len(concat) == 1
    assert [type(p.type_annotation).__name__ for p in concat[0].params] == ["TensorType"] * 2
    assert op_names(concat[0].body) == ["exp", "concatenate", "nn.relu"]
    xv = np.random.default_rng(0).normal(size=(1, 2, 4, 4)).astype(np.float32)
    assert np.array_equal(evaluate(out, xv), evaluate(mod, xv))
