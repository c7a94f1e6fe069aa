"""Tensors kept in device DRAM between VTA layers (packed layout), their DRAM planned by
liveness, and convolutions padded with a non-zero value (folded explicit padding and the
border-correction residual)."""

from pathlib import Path

import numpy as np
import pytest

import vtakit
import vtakit.compiler.vta.lower as lower_vta
import vtakit.compiler.quant  # noqa: F401
from vtakit.compiler.frontend import from_tflite
from vtakit.compiler.ir import (Call, Constant, Function, GlobalVar, IRModule, TensorType, Var,
                                evaluate, post_order)
from vtakit.compiler.vta.lower import lower_primitive
from vtakit.compiler.passes import FoldExplicitPadding
from vtakit.runtime import Runtime, launch
from vtakit.runtime.vm.bytecode import Opcode
from vtakit.sim import open_device
from vtakit.testing import model_inputs
from vtakit.compiler.nn import call as _op

DATA = Path(__file__).parent / "data" / "mltk"


def _input(mod, seed):
    return model_inputs(mod["main"].params[0].type_annotation, 1, seed)[0]


def _packed_calls(exe, func="main", all_inputs=False):
    """``(primitive name, input on the device?, output on the device?)`` per packed call,
    from the bytecode (which storage each tensor register was carved from); with
    ``all_inputs``, whether every input is."""
    alloc_storage, alloc_tensor = Opcode.ALLOC_STORAGE.value, Opcode.ALLOC_TENSOR.value
    device_reg, calls = {}, []
    for ins in exe.function(func).code:
        if ins[0] == alloc_storage:
            device_reg[ins[3]] = bool(ins[4])
        elif ins[0] == alloc_tensor:
            device_reg[ins[5]] = device_reg[ins[1]]
        elif ins[0] == Opcode.INVOKE_PACKED.value:
            args = ins[3]
            ins_on = [device_reg.get(a, False) for a in args[:-1]]
            calls.append((exe.primitives[ins[1]].name, all(ins_on) if all_inputs else ins_on[0],
                          device_reg.get(args[-1], False)))
        elif ins[0] == Opcode.RESHAPE_TENSOR.value:
            device_reg[ins[3]] = device_reg.get(ins[1], False)
        elif ins[0] in (Opcode.LOAD_CONST.value, Opcode.MOVE.value):
            device_reg[ins[-1]] = False          # a register reused for a constant
    return calls


def test_keyword_spotting_layers_chain_on_the_device(monkeypatch):
    """DS-CNN: every VTA layer whose input another VTA layer produced reads it in place
    from device DRAM; activations are packed only where they come from the host."""
    mod = from_tflite(DATA / "keyword_spotting.tflite")
    exe = vtakit.compile(DATA / "keyword_spotting.tflite", config="default")
    calls = _packed_calls(exe)
    vta = [c for c in calls if c[0].startswith("vta_")]
    assert len(vta) == 11                   # 9 convolutions, the average pool, the dense
    for prev, cur in zip(calls, calls[1:]):
        if prev[0].startswith("vta_") and cur[0].startswith("vta_"):
            assert prev[2] and cur[1], (prev, cur)
    from_host = sum(1 for c in vta if not c[1])
    assert from_host == 1       # the first convolution (the dense reads the pool's output
    reshape = [ins for ins in exe.function("main").code      # through a ReshapeTensor)
               if ins[0] == Opcode.RESHAPE_TENSOR.value]
    assert [ins[2] for ins in reshape] == [(1, 64)]
    main = exe.function("main")
    assert 0 < main.dram_bytes <= 2 * 8192  # ten 8 KB activations in two reused slots

    packs = []
    real = launch.pack_activation
    monkeypatch.setattr(launch, "pack_activation",
                        lambda x, cfg: packs.append(x.shape) or real(x, cfg))
    with exe.vm() as vm:
        for seed in range(3):
            packs.clear()     # (the layers' constants were packed by the compiler)
            x = _input(mod, seed)
            np.testing.assert_array_equal(vm.run(x), evaluate(mod, x))
    assert len(packs) == from_host


def test_device_dram_planned_and_released():
    """The anomaly-detection autoencoder (10 dense layers): its DRAM arena reuses bytes
    across layers, a run stays within the executable's planned peak (plus the runtime's
    instruction and micro-op buffers) and closing the VM frees every buffer it made, also
    on a device the caller keeps."""
    mod = from_tflite(DATA / "anomaly_detection.tflite")
    exe = vtakit.compile(DATA / "anomaly_detection.tflite", config="default")
    main = exe.function("main")
    calls = _packed_calls(exe)
    on_device = sum(1 for c in calls if c[2])
    assert on_device >= 8
    assert 0 < main.dram_bytes < on_device * 4096       # pages shared by liveness
    dev = open_device("behavioral", "default")
    before = dev.dram.allocated
    with exe.vm(device=dev) as vm:
        x = _input(mod, 0)
        np.testing.assert_array_equal(vm.run(x), evaluate(mod, x))
        rt = vm.context.runtime
        streams = sum(-(-b.nbytes // 4096) * 4096 for b in (rt._insn_buf, rt._uop_buf) if b)
        assert dev.dram.peak_allocated - before <= exe.peak_dram_bytes + streams
        np.testing.assert_array_equal(vm.run(x), evaluate(mod, x))   # weights stay resident
    assert dev.dram.allocated == before     # weights, arena and stream buffers all freed
    for _ in range(3):                      # many runs on a caller's device: nothing grows
        np.testing.assert_array_equal(exe.run([x], device=dev), evaluate(mod, x))
    assert dev.dram.allocated == before
    dev.close()


def test_hook_sees_device_tensors_unpacked():
    """A layer hook receives host arrays in the model's layout even for tensors that stay
    on the device: the average pool recomputed from the hook's view of its (device)
    input equals what the pool kernel computed from the packed bytes in place."""
    mod = from_tflite(DATA / "keyword_spotting.tflite")
    exe = vtakit.compile(DATA / "keyword_spotting.tflite", config="default")
    seen = []
    x = _input(mod, 3)
    exe.run([x], hook=lambda name, out: seen.append((name, out)))
    assert all(isinstance(v, np.ndarray) for _, v in seen)
    names = [n for n, _ in seen]
    pool = names.index("vta_avg_pool2d")
    assert names[pool - 1].startswith("vta_conv2d")
    assert seen[pool - 1][1].shape == (1, 64, 25, 5) and seen[pool - 1][1].dtype == np.int8
    pool_layer = next(lower_vta.match_layer(e) for e in post_order(mod["main"].body)
                      if lower_vta.match_layer(e) is not None
                      and lower_vta.match_layer(e).kind == "avg_pool2d")
    x = Var("x", TensorType((1, 64, 25, 5), "int8"))
    fn = Function([x], lower_vta._replace_input(pool_layer, x))
    np.testing.assert_array_equal(evaluate(fn, seen[pool - 1][1]), seen[pool][1])


# ----------------------------------------------------------------- padding value

def _conv(x_shape, w_shape, groups, strides, padding, pad_value, rounding, scale):
    rng = np.random.default_rng(7)
    x = Var("x", TensorType(x_shape, "int8"))
    w = rng.integers(-30, 30, w_shape).astype(np.int8)
    b = rng.integers(-900, 900, w_shape[0]).astype(np.int32)
    y = _op("nn.conv2d", x, Constant(w), strides=strides, padding=padding, groups=groups,
            pad_value=pad_value, out_dtype="int32")
    y = _op("nn.bias_add", y, Constant(b), axis=1)
    y = _op("qnn.requantize", y, scale=scale, zero_point=-7, rounding=rounding,
            axis=None if np.isscalar(scale) else 1)
    y = _op("cast", _op("clip", y, a_min=-128, a_max=127), dtype="int8")
    return Function([x], y), rng.integers(-128, 128, x_shape).astype(np.int8)


@pytest.mark.parametrize("x_shape,w_shape,groups,strides,padding,pad_value,rounding,scale", [
    ((1, 16, 9, 7), (32, 16, 3, 3), 1, (1, 1), (1, 1, 1, 1), -128.0, "vta", 2.0 ** -9),
    ((1, 16, 10, 10), (16, 1, 3, 3), 16, (2, 2), (0, 0, 1, 1), -128.0, "tflite",
     tuple(np.linspace(2e-3, 9e-3, 16))),                               # depthwise, TF SAME
    ((1, 8, 6, 6), (24, 8, 5, 3), 1, (1, 2), (2, 1, 2, 0), 37.0, "onnx", 0.003),
])
def test_nonzero_pad_value_conv_on_vta(x_shape, w_shape, groups, strides, padding, pad_value,
                                       rounding, scale):
    """VTA's loads pad with zeros; the border correction residual makes any pad value
    exact (vs. the IR interpreter, which pads with the value)."""
    fn, x = _conv(x_shape, w_shape, groups, strides, padding, pad_value, rounding, scale)
    records = []
    got = lower_primitive(fn, records=records)(Runtime(open_device("behavioral", "default")), x)
    np.testing.assert_array_equal(got, evaluate(fn, x))
    # the border correction, or (a thin input) the host's fold inserting the pad value
    assert records[0].where in ("vta", "vta+host") and (
        "border" in records[0].why or "folded on the host" in records[0].why)


def test_fold_explicit_padding():
    rng = np.random.default_rng(0)
    x = Var("x", TensorType((1, 4, 6, 6), "int8"))
    w = Constant(rng.integers(-9, 9, (8, 4, 3, 3)).astype(np.int8))
    p = _op("nn.pad", x, pad_width=((0, 0), (0, 0), (1, 2), (0, 1)), pad_value=-3.0)
    folded = FoldExplicitPadding()(IRModule({"main": Function(
        [x], _op("nn.conv2d", p, w, padding=(1, 0, 0, 0), pad_value=-3.0,
                 out_dtype="int32"))}))
    conv = folded["main"].body
    assert conv.args[0] is folded["main"].params[0]
    assert conv.attrs["padding"] == (2, 0, 2, 1) and conv.attrs["pad_value"] == -3.0
    v = rng.integers(-128, 128, (1, 4, 6, 6)).astype(np.int8)
    ref = evaluate(Function([x], _op("nn.conv2d", p, w, padding=(1, 0, 0, 0), pad_value=-3.0,
                                     out_dtype="int32")), v)
    np.testing.assert_array_equal(evaluate(folded, v), ref)
    # a value the input dtype cannot hold is folded as nn.pad writes it (-1 -> 255)
    u = Var("u", TensorType((1, 1, 3, 3), "uint8"))
    pu = _op("nn.pad", u, pad_width=((0, 0), (0, 0), (1, 1), (1, 1)), pad_value=-1.0)
    fu = Function([u], _op("nn.conv2d", pu, Constant(np.ones((1, 1, 3, 3), np.int8)),
                           out_dtype="int32"))
    mu = FoldExplicitPadding()(IRModule({"main": fu}))
    assert mu["main"].body.attrs["pad_value"] == 255.0
    ten = np.full((1, 1, 3, 3), 10, np.uint8)
    np.testing.assert_array_equal(evaluate(mu, ten), evaluate(fu, ten))
    # kept: a pad over channels, or a convolution padding with another value
    for pw, own in ((((0, 0), (1, 0), (1, 1), (1, 1)), 0.0), (((0, 0), (0, 0), (1, 1), (1, 1)), 5.0)):
        p2 = _op("nn.pad", x, pad_width=pw, pad_value=-3.0)
        c = w if pw[1] == (0, 0) else Constant(np.zeros((8, 5, 3, 3), np.int8))
        m = FoldExplicitPadding()(IRModule({"main": Function(
            [x], _op("nn.conv2d", p2, c, padding=1, pad_value=own, out_dtype="int32"))}))
        assert m["main"].body.args[0].op.name == "nn.pad"


# ----------------------------------------------------------------- adds

@pytest.mark.parametrize("scales,zps", [
    ((2.0 ** -4, 2.0 ** -5, 2.0 ** -4), (0, 0, 0)),
    ((2.0 ** -3, 2.0 ** -3, 2.0 ** -2), (5, -9, 3)),
    ((2.0 ** -7, 2.0 ** -2, 2.0 ** -6), (0, 0, -1)),
])
def test_qnn_add_vta_rounding_is_exact_shift_and_add(scales, zps):
    """``rounding="vta"``: ``(s_a (a - z_a) + s_b (b - z_b)) / s_out`` rounded half up,
    computed here in exact rationals."""
    from fractions import Fraction
    from vtakit.compiler.quant.ops import add
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-128, 128, 200) for _ in range(2))
    got = add(a, b, lhs_scale=scales[0], lhs_zero_point=zps[0], rhs_scale=scales[1],
              rhs_zero_point=zps[1], out_scale=scales[2], out_zero_point=zps[2], rounding="vta")
    sa, sb, so = (Fraction(s) for s in scales)
    want = [((sa * (int(x) - zps[0]) + sb * (int(y) - zps[1])) / so + Fraction(1, 2)).__floor__()
             + zps[2] for x, y in zip(a, b)]
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="power-of-two scales; rhs_scale is 0.3"):
        add(a, b, lhs_scale=0.25, rhs_scale=0.3, out_scale=0.5, rounding="vta")


@pytest.mark.parametrize("shape,scales,zps", [
    ((1, 24, 5, 7), (2.0 ** -4, 2.0 ** -5, 2.0 ** -4), (0, 0, 0)),
    ((2, 40), (2.0 ** -3, 2.0 ** -6, 2.0 ** -2), (4, -3, 7)),
])
def test_add_layer_on_vta(shape, scales, zps):
    rng = np.random.default_rng(5)
    x, y = Var("x", TensorType(shape, "int8")), Var("y", TensorType(shape, "int8"))
    e = _op("qnn.add", x, y, lhs_scale=scales[0], lhs_zero_point=zps[0], rhs_scale=scales[1],
            rhs_zero_point=zps[1], out_scale=scales[2], out_zero_point=zps[2], rounding="vta")
    fn = Function([x, y], _op("cast", _op("clip", e, a_min=-100, a_max=127), dtype="int8"))
    a, b = (rng.integers(-128, 128, shape).astype(np.int8) for _ in range(2))
    records = []
    layer = lower_vta.match_layer(fn.body)
    assert layer is not None and layer.kind == "add" and layer.data is x
    f = lower_vta.lower_layer(layer, records=records)
    got = f(Runtime(open_device("behavioral", "default")), a, {y: b})
    np.testing.assert_array_equal(got, evaluate(fn, a, b))
    assert [r.where for r in records] == ["vta"]


def test_calibrated_residual_cnn_runs_whole_on_the_device():
    """The shipped digits CNN (conv, residual add, pools, dense), calibrated: every layer
    from the first convolution to the average pool is a VTA kernel, the residual add
    included (fused into the convolution feeding it: FuseResidualAdd), and each reads
    its inputs (the add's shortcut included) where the previous ones left them."""
    import importlib.resources as resources
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.models import load_digits_split
    x_train, _, x_test, _ = load_digits_split()
    path = resources.files("vtakit.compiler.models") / "digits_cnn.onnx"
    report = []
    exe = compile_model(str(path), "default", calibrate=x_train[:64, None], report=report)
    calls = _packed_calls(exe, all_inputs=True)
    names = [c[0] for c in calls]
    # the average pool (its own output scale) is window sums as an all-ones depthwise
    # conv, the last layer before the dense one
    first, pool = names.index("vta_conv2d"), names.index("vta_dense") - 1
    assert names[pool].startswith("vta_conv2d")
    assert "vta_conv2d_add" in names[first:pool] and "vta_add" not in names
    assert all(n.startswith("vta_") for n in names[first:pool + 1])
    assert all(c[1] for c in calls[first + 1:pool + 1])        # inputs on the device
    assert all(c[2] for c in calls[first:pool])                # outputs on the device
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path))
    agree = [np.argmax(exe.run([x_test[i:i + 1]]))
             == np.argmax(sess.run(None, {sess.get_inputs()[0].name: x_test[i:i + 1]})[0])
             for i in range(40)]
    assert np.mean(agree) >= 0.95


@pytest.mark.parametrize("pool,strides,padding,rounding", [
    ((3, 3), (2, 2), (1, 1, 1, 1), "tflite"),       # TFLite SAME: the padding not counted
    ((2, 3), (1, 2), (0, 1, 1, 1), "tflite"),
    ((3, 3), (1, 1), (1, 1, 1, 1), "vta"),          # counted, as VTA's pools do
])
def test_padded_average_pool_on_vta(pool, strides, padding, rounding):
    rng = np.random.default_rng(11)
    x = Var("x", TensorType((1, 20, 7, 9), "int8"))
    e = _op("qnn.avg_pool2d", x, pool_size=pool, strides=strides, padding=padding,
            rounding=rounding)
    fn = Function([x], _op("cast", _op("clip", e, a_min=-128, a_max=127), dtype="int8"))
    v = rng.integers(-128, 128, (1, 20, 7, 9)).astype(np.int8)
    records = []
    got = lower_primitive(fn, records=records)(Runtime(open_device("behavioral", "default")), v)
    np.testing.assert_array_equal(got, evaluate(fn, v))
    assert [r.where for r in records] == ["vta+host"]


# ----------------------------------------------------------------- review cases

def _qconv(x, cin, cout, seed, k=1, padding=0):
    rng = np.random.default_rng(seed)
    y = _op("nn.conv2d", x, Constant(rng.integers(-30, 30, (cout, cin, k, k)).astype(np.int8)),
            padding=padding, out_dtype="int32")
    y = _op("nn.bias_add", y, Constant(rng.integers(-900, 900, cout).astype(np.int32)), axis=1)
    y = _op("qnn.requantize", y, scale=2.0 ** -9, zero_point=-7, rounding="vta")
    return _op("cast", _op("clip", y, a_min=-128, a_max=127), dtype="int8")


def _qadd(a, b, clip=(-128, 127), dtype="int8", out_scale=2.0 ** -4):
    e = _op("qnn.add", a, b, lhs_scale=2.0 ** -4, rhs_scale=2.0 ** -5, out_scale=out_scale,
            rounding="vta")
    return _op("cast", _op("clip", e, a_min=clip[0], a_max=clip[1]), dtype=dtype)


def _compiled_equals_interpreter(mod, *xs):
    from vtakit.compiler.build_model import compile_model
    exe = compile_model(mod, "default")
    np.testing.assert_array_equal(np.asarray(exe.run(list(xs))), np.asarray(evaluate(mod, *xs)))
    return exe


def test_adds_fused_together_and_wide_adds():
    """Two adds in one fused primitive (the second's operand is a call: no VTA add), and an
    add whose result is wider than int8 (no int8 store): both exact, on the host."""
    rng = np.random.default_rng(0)
    x, y = Var("x", TensorType((1, 16, 4, 4), "int8")), Var("y", TensorType((1, 16, 4, 4), "int8"))
    v, w = (rng.integers(-128, 128, (1, 16, 4, 4)).astype(np.int8) for _ in range(2))
    _compiled_equals_interpreter(IRModule({"main": Function([x], _qadd(x, _qadd(x, x)))}), v)
    wide = _qadd(x, y, clip=(-1000, 1000), dtype="int16", out_scale=2.0 ** -6)
    _compiled_equals_interpreter(IRModule({"main": Function([x, y], wide)}), v, w)


def test_device_tensors_only_in_the_uncalled_entry(tmp_path):
    """A global called from main keeps its tensors on the host (its frames could nest),
    so the planned peak DRAM bounds what a run allocates."""
    s = (1, 16, 32, 32)
    x, xf = Var("x", TensorType(s, "int8")), Var("xf", TensorType(s, "int8"))
    f = GlobalVar("f")
    mod = IRModule({"main": Function([x], _qconv(_qconv(Call(f, [_qconv(x, 16, 16, 1)]),
                                                         16, 16, 2), 16, 16, 3)),
                    "f": Function([xf], _qconv(_qconv(xf, 16, 16, 4), 16, 16, 5))})
    exe = _compiled_equals_interpreter(mod, np.ones(s, np.int8))
    assert exe.function("main").dram_bytes > 0 and exe.function("f").dram_bytes == 0
    dev = open_device("behavioral", "default")
    with exe.vm(device=dev) as vm:
        vm.run(np.ones(s, np.int8))
        rt = vm.context.runtime
        streams = sum(-(-b.nbytes // 4096) * 4096 for b in (rt._insn_buf, rt._uop_buf) if b)
    assert dev.dram.peak_allocated <= exe.peak_dram_bytes + streams
    dev.close()


@pytest.mark.parametrize("victim", ["fused_nn_softmax", "vta_conv2d_2"])
def test_a_failing_run_frees_its_device_tensors(victim):
    """A packed call raising in the middle of a run (a host op, or a VTA kernel whose
    arguments are device tensors): the VMError keeps no device tensor (and so no device
    DRAM) alive."""
    from vtakit.runtime.vm import VMError
    mod = from_tflite(DATA / "keyword_spotting.tflite")
    exe = vtakit.compile(DATA / "keyword_spotting.tflite", config="default")
    dev = open_device("behavioral", "default")
    with exe.vm(device=dev) as vm:
        vm.run(_input(mod, 0))
        idle = dev.dram.allocated                   # weights resident, no activations

        def boom(*args):
            raise RuntimeError("injected")
        name = next(p.name for p in exe.primitives if p.name.startswith(victim))
        vm._packed[[p.name for p in exe.primitives].index(name)] = boom
        with pytest.raises(VMError, match="injected") as info:
            vm.run(_input(mod, 0))
        assert dev.dram.allocated == idle and info.value is not None
    dev.close()
