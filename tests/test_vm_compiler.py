"""The VM compiler: IR programs give the reference interpreter's results on the VM."""

import math

import numpy as np
import pytest

from vtakit.compiler import nn
from vtakit.compiler.codegen import LoweredPrimitive, compile_vm
from vtakit.compiler.passes import default_pipeline, vm_pipeline
from vtakit.compiler.ir import (Call, Function, GlobalVar, If, IRModule, Let, TensorType, Tuple,
                                TupleGetItem, Var, evaluate)
from vtakit.hw import VTAConfig
from vtakit.runtime import (Executable, Program, get_global_func, register_func,
                            remove_global_func)
from vtakit.runtime.vm import Opcode
from vtakit.compiler.nn import call as op

I64 = TensorType((), "int64")
KERNEL = Program(VTAConfig.preset("default"), [], slots={"x": 64}, name="sq").to_bytes()


def c64(v):
    return nn.const(np.array(v, np.int64))


def factorial_module():
    n = Var("n", I64)
    fact = GlobalVar("fact")
    body = If(op("equal", n, c64(0)), c64(1),
              op("multiply", n, Call(fact, [op("subtract", n, c64(1))])))
    x = Var("x", I64)
    return IRModule({"main": Function([x], Call(fact, [x])),
                     "fact": Function([n], body, ret_type=I64)})


def countdown_module():
    """countdown(n, acc) = n == 0 ? acc : countdown(n - 1, acc + n): a self tail call."""
    n, acc = Var("n", I64), Var("acc", I64)
    cd = GlobalVar("countdown")
    body = If(op("equal", n, c64(0)), acc,
              Call(cd, [op("subtract", n, c64(1)), op("add", acc, n)]))
    x = Var("x", I64)
    return IRModule({"main": Function([x], Call(cd, [x, c64(0)])),
                     "countdown": Function([n, acc], body, ret_type=I64)})


def roundtrip(exe):
    return Executable.from_bytes(exe.to_bytes())


@pytest.mark.parametrize("n", [0, 1, 6, 10])
def test_recursive_factorial_matches_evaluate(n):
    mod = factorial_module()
    x = np.array(n, np.int64)
    want = evaluate(mod, x)
    got = roundtrip(compile_vm(mod)).run([x])
    assert got.dtype == want.dtype and int(got) == int(want) == math.factorial(n)


def test_tail_call_becomes_a_jump():
    mod = countdown_module()
    exe = compile_vm(mod)
    code = exe.function("countdown").code
    ops = [ins[0] for ins in code]
    assert Opcode.INVOKE.value not in ops and Opcode.GOTO.value in ops
    assert int(exe.run([np.array(10, np.int64)])) == int(evaluate(mod, np.array(10, np.int64)))
    # deep enough that a recursive implementation would need 20000 frames
    assert int(exe.run([np.array(20000, np.int64)])) == 20000 * 20001 // 2
    # after the standard pipelines too (A-normal form binds the call: let %x = f(..); %x)
    exe = compile_vm(vm_pipeline()(default_pipeline()(mod)))
    ops = [ins[0] for ins in exe.function("countdown").code]
    assert Opcode.INVOKE.value not in ops and Opcode.GOTO.value in ops
    assert int(exe.run([np.array(20000, np.int64)])) == 20000 * 20001 // 2


def test_mutual_tail_calls_reuse_the_frame():
    """is_even(n) = n == 0 ? 1 : is_odd(n - 1); is_odd(n) = n == 0 ? 0 : is_even(n - 1):
    tail calls to another global become TailInvoke, so 200,001 calls deep needs no
    stack (the VM's call stack is checked at its largest)."""
    n, m = Var("n", I64), Var("m", I64)
    even, odd = GlobalVar("is_even"), GlobalVar("is_odd")
    x = Var("x", I64)
    mod = IRModule({
        "main": Function([x], Call(even, [x])),
        "is_even": Function([n], If(op("equal", n, c64(0)), c64(1),
                                    Call(odd, [op("subtract", n, c64(1))])), ret_type=I64),
        "is_odd": Function([m], If(op("equal", m, c64(0)), c64(0),
                                   Call(even, [op("subtract", m, c64(1))])), ret_type=I64)})
    exe = roundtrip(compile_vm(mod))
    for name in ("main", "is_even", "is_odd"):
        ops = [ins[0] for ins in exe.function(name).code]
        assert Opcode.TAIL_INVOKE.value in ops and Opcode.INVOKE.value not in ops
    assert "tail_invoke is_odd(" in exe.disasm()
    for v in (0, 7, 10):
        assert int(exe.run([np.array(v, np.int64)])) == int(evaluate(mod, np.array(v, np.int64)))
    assert int(exe.run([np.array(200001, np.int64)])) == 0


def test_tail_call_of_a_closure():
    """A closure called in tail position (TailInvokeClosure) gives the interpreter's result."""
    x, y = Var("x", I64), Var("y", I64)
    f = Var("f")
    mod = IRModule({"main": Function([x], Let(f, Function([y], op("add", y, x)),
                                                  Call(f, [op("multiply", x, c64(3))])))})
    exe = roundtrip(compile_vm(mod))
    assert Opcode.TAIL_INVOKE_CLOSURE.value in [ins[0] for ins in exe.function("main").code]
    assert int(exe.run([np.array(5, np.int64)])) == 20


def test_closures_capture_free_variables():
    x = Var("x", TensorType((3,), "float32"))
    y = Var("y", TensorType((3,), "float32"))
    k = Var("k", TensorType((3,), "float32"))
    f = Var("f")
    lam = Function([y], op("add", op("multiply", y, k), x))
    body = Let(k, op("add", x, nn.const(np.float32(1))),
               Let(f, lam, Tuple([Call(f, [x]), Call(f, [k])])))
    mod = IRModule({"main": Function([x], body)})
    a = np.array([1, 2, 3], np.float32)
    want = evaluate(mod, a)
    got = roundtrip(compile_vm(mod)).run([a])
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_adts_tuples_nested_and_projected():
    x = Var("x", TensorType((2, 2), "int32"))
    t = Tuple([x, Tuple([op("add", x, x), op("multiply", x, x)])])
    body = Tuple([TupleGetItem(TupleGetItem(t, 1), 0), t])
    mod = IRModule({"main": Function([x], body)})
    a = np.arange(4, dtype=np.int32).reshape(2, 2)
    want = evaluate(mod, a)
    got = compile_vm(mod).run([a])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1][1][1], want[1][1][1])


def test_if_in_non_tail_position():
    x = Var("x", TensorType((4,), "float32"))
    cond = op("greater", op("sum", x, axis=None, keepdims=False), nn.const(np.float32(0)))
    body = op("multiply", If(cond, op("exp", x), op("negative", x) if False else
                             op("subtract", nn.const(np.float32(0)), x)), nn.const(np.float32(2)))
    mod = IRModule({"main": Function([x], body)})
    exe = compile_vm(mod)
    for a in (np.array([1, 2, -1, 0.5], np.float32), np.array([-3, 1, 0, 0], np.float32)):
        np.testing.assert_allclose(exe.run([a]), evaluate(mod, a), rtol=1e-6)


def small_cnn():
    rng = np.random.default_rng(0)
    x = nn.var("x", (1, 3, 16, 16))
    w1 = nn.const(rng.standard_normal((8, 3, 3, 3)).astype("float32"))
    w2 = nn.const(rng.standard_normal((8, 8, 3, 3)).astype("float32"))
    y = nn.relu(nn.conv2d(x, w1, padding=1))
    y = nn.relu(nn.conv2d(y, w2, padding=1))
    y = nn.max_pool2d(y, pool_size=2, strides=2)
    y = nn.relu(nn.conv2d(y, w2, padding=1))
    y = nn.global_avg_pool2d(y)
    return nn.module(nn.batch_flatten(y))


def test_cnn_matches_evaluate_and_plans_memory():
    mod = small_cnn()
    a = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype("float32")
    exe = roundtrip(compile_vm(mod))
    np.testing.assert_allclose(exe.run({"x": a}), evaluate(mod, a), rtol=1e-5, atol=1e-5)
    main = exe.function("main")
    assert 0 < main.arena_bytes < main.naive_bytes         # buffers reused across layers
    # the arena plus the escaping output (1x8 float32, its own storage)
    assert exe.peak_host_bytes == main.arena_bytes + 32 < main.naive_bytes
    assert exe.peak_dram_bytes == 0 and main.dram_bytes == 0       # no VTA kernel: no DRAM
    assert exe.inputs == [{"name": "x", "shape": [1, 3, 16, 16], "dtype": "float32"}]
    assert exe.outputs[0]["shape"] == [1, 8]


def test_registers_are_reused():
    mod = small_cnn()
    exe = compile_vm(mod)
    main = exe.function("main")
    written = {ins[-1] for ins in main.code if ins[0] in (Opcode.ALLOC_TENSOR.value,
                                                            Opcode.LOAD_CONST.value)}
    assert main.num_regs < len(written) + 1 or main.num_regs <= 6


def test_save_load_save_of_compiled_model_is_byte_identical(tmp_path):
    exe = compile_vm(small_cnn())
    data = exe.to_bytes()
    assert compile_vm(small_cnn()).to_bytes() == data     # same model -> same bytes
    back = Executable.load(exe.save(tmp_path / "cnn.vtax"))
    assert back.to_bytes() == data


def test_hook_receives_every_layer():
    mod = small_cnn()
    a = np.ones((1, 3, 16, 16), np.float32)
    seen = []
    compile_vm(mod).run([a], hook=lambda name, out: seen.append((name, out)))
    names = [n for n, _ in seen]
    # every packed call; the flatten before the dense layer is a ReshapeTensor, no layer
    assert names[0].startswith("fused_nn_conv2d") and len(names) == 8
    assert not any("flatten" in n or "reshape" in n for n in names)
    want = evaluate(mod, a)         # (the model's last op, a flatten, is a view of it)
    np.testing.assert_allclose(seen[-1][1].reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    # the first layer's output is the conv reference
    x = nn.var("x", (1, 3, 16, 16))
    first = mod["main"].body
    while not (isinstance(first, Call) and first.op.name == "nn.conv2d"
               and isinstance(first.args[0], Var)):
        first = first.args[0]
    np.testing.assert_allclose(seen[0][1], evaluate(Function([first.args[0]], first), a),
                               rtol=1e-5, atol=1e-5)
    del x


def test_registered_function_overrides_a_host_op():
    x = Var("x", TensorType((3,), "float32"))
    mod = IRModule({"main": Function([x], op("exp", op("nn.relu", x)))})
    exe = compile_vm(mod)
    names = [p.name for p in exe.primitives]
    assert names == ["fused_nn_relu", "fused_exp"]
    a = np.array([-1, 0, 2], np.float32)
    register_func("fused_exp", lambda v: v + np.float32(100))
    try:
        np.testing.assert_array_equal(exe.run([a]), [100, 100, 102])
    finally:
        remove_global_func("fused_exp")
    np.testing.assert_allclose(exe.run([a]), np.exp([0, 0, 2]).astype(np.float32))


def test_fused_primitive_functions_and_the_lowerer_hook():
    """FuseOps' shape: main calls Primitive functions; a lowerer claims some of them."""
    x = Var("x", TensorType((4,), "int32"))
    p = Var("p", TensorType((4,), "int32"))
    fused = Function([p], op("nn.relu", op("add", p, nn.const(np.int32(3)))),
                     attrs={"Primitive": 1})
    q = Var("q", TensorType((4,), "int32"))
    fused2 = Function([q], op("multiply", q, q), attrs={"Primitive": 1})
    mod = IRModule({"main": Function([x], Call(fused2, [Call(fused, [x])]))})
    a = np.array([-5, -1, 0, 2], np.int32)
    want = evaluate(mod, a)
    np.testing.assert_array_equal(compile_vm(mod).run([a]), want)

    calls = []

    def lowerer(func):
        calls.append(func)
        if func.body.op.name == "multiply":
            return LoweredPrimitive("vmtest_vta", {"shift": 0}, [("k_square", KERNEL)],
                                    [np.array([1, 1, 1, 1], np.int32)], name="vta_square")
        return None

    def factory(entry, ctx):
        meta = entry.meta_dict
        ones = ctx.constants[meta["constants"][0]]
        assert ctx.kernel("k_square") == KERNEL and ctx.program("k_square").name == "sq"

        def run(v, out):
            out[...] = v * v * ones
        return run

    exe = roundtrip(compile_vm(mod, lowerer=lowerer))
    assert len(calls) == 2
    assert [(p.name, p.kind) for p in exe.primitives] == [("fused_add_nn_relu", "host"),
                                                          ("vta_square", "vmtest_vta")]
    assert exe.kernels == [("k_square", KERNEL)]
    register_func("vtakit.vm.primitive.vmtest_vta", factory)
    try:
        np.testing.assert_array_equal(exe.run([a]), want)
    finally:
        remove_global_func("vtakit.vm.primitive.vmtest_vta")


def test_anf_let_chain():
    x = Var("x", TensorType((2,), "float32"))
    body, prev = None, x
    vs = []
    for i in range(300):
        v = Var(f"v{i}")
        vs.append((v, op("add", prev, nn.const(np.float32(1)))))
        prev = v
    body = prev
    for v, val in reversed(vs):
        body = Let(v, val, body)
    mod = IRModule({"main": Function([x], body)})
    exe = compile_vm(mod)
    main = exe.function("main")
    assert main.num_regs <= 6 and main.arena_bytes <= 2 * 64
    np.testing.assert_array_equal(exe.run([np.zeros(2, np.float32)]), [300, 300])


def test_builtin_primitive_kinds_are_found_by_name():
    """The built-in kinds come from a table of names, not from registrations on import."""
    from vtakit.compiler.codegen import host
    from vtakit.runtime import vta_layer
    from vtakit.runtime.module import PRIMITIVE_KINDS, primitive_factory
    assert sorted(PRIMITIVE_KINDS) == ["host", "vta_layer"]
    assert primitive_factory("host") is host.host_factory
    assert primitive_factory("vta_layer") is vta_layer.vta_layer_factory
    assert primitive_factory("nokind") is None
    assert get_global_func("vtakit.vm.primitive.host", allow_missing=True) is None


def test_a_callable_lowerer_registers_nothing_globally():
    """A lowerer's process-local function stays with its executable."""
    from vtakit.runtime.registry import list_global_func_names
    x = Var("x", TensorType((2,), "int32"))
    fused = Function([x], op("negative", x), attrs={"Primitive": 1})
    y = Var("y", TensorType((2,), "int32"))
    mod = IRModule({"main": Function([y], Call(fused, [y]))})
    before = set(list_global_func_names())
    exe = compile_vm(mod, lowerer=lambda f: (lambda v: -2 * np.asarray(v)))
    assert set(list_global_func_names()) == before
    np.testing.assert_array_equal(exe.run([np.array([1, -3], np.int32)]), [-2, 6])


def test_after_the_standard_pipelines():
    """The IR shapes FuseOps, ToANormalForm, InlinePrimitives and LambdaLift produce."""
    from vtakit.compiler.passes import default_pipeline, vm_pipeline
    rng = np.random.default_rng(0)
    cases = [(factorial_module, [np.array(6, np.int64)]),
             (countdown_module, [np.array(50, np.int64)]),
             (small_cnn, [rng.standard_normal((1, 3, 16, 16)).astype("float32")])]
    for make, args in cases:
        want = evaluate(make(), *args)
        exe = roundtrip(compile_vm(vm_pipeline()(default_pipeline()(make()))))
        np.testing.assert_allclose(exe.run(args), want, rtol=1e-5, atol=1e-5)
    assert any(p.name == "fused_nn_conv2d_nn_relu" for p in exe.primitives)

    x = Var("x", TensorType((3,), "float32"))
    y = Var("y", TensorType((3,), "float32"))
    k, f = Var("k", TensorType((3,), "float32")), Var("f")
    lam = Function([y], op("add", op("multiply", y, k), x))
    body = Let(k, op("add", x, nn.const(np.float32(1))),
               Let(f, lam, Tuple([Call(f, [x]), Call(f, [k])])))
    mod = IRModule({"main": Function([x], body)})
    a = np.array([1, 2, 3], np.float32)
    want = evaluate(mod, a)
    exe = roundtrip(compile_vm(vm_pipeline()(default_pipeline()(mod))))
    assert "main_lifted_0" in [fn.name for fn in exe.functions]     # LambdaLift's closure maker
    for g, w in zip(exe.run([a]), want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", range(8))
def test_random_dataflow_graphs_with_shared_arena(seed):
    """Random DAGs (values used far from where they are made, in both If branches and in
    tuples) check that arena sharing and register reuse never clobber a live value."""
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((5,), "float32"))
    nodes = [x]
    ops = ["add", "multiply", "subtract", "maximum", "minimum"]
    for i in range(rng.integers(10, 40)):
        a, b = (nodes[j] for j in rng.integers(0, len(nodes), 2))
        if rng.random() < 0.1:
            cond = op("greater", op("sum", a, axis=None, keepdims=False),
                      nn.const(np.float32(0)))
            nodes.append(If(cond, op("add", a, b), op("subtract", b, nodes[-1])))
        else:
            nodes.append(op(ops[rng.integers(len(ops))], a, b))
    picks = [nodes[j] for j in rng.integers(1, len(nodes), 3)]
    mod = IRModule({"main": Function([x], Tuple([nodes[-1], *picks]))})
    a = rng.uniform(-1, 1, 5).astype(np.float32)
    want = evaluate(mod, a)
    exe = roundtrip(compile_vm(mod))
    for g, w in zip(exe.run([a]), want):
        np.testing.assert_array_equal(g, w)
    main = exe.function("main")
    assert main.arena_bytes <= main.naive_bytes
    from vtakit.compiler.passes import default_pipeline, vm_pipeline
    fused = roundtrip(compile_vm(vm_pipeline()(default_pipeline()(mod))))
    for g, w in zip(fused.run([a]), want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
