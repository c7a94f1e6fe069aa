"""ResNet's residual add fused into the convolution producing its operand: the
epilogue's :class:`ResidualAdd` stage (operator library), the ``conv2d_add`` strategy
and the :class:`FuseResidualAdd` pass."""

import numpy as np
import pytest

import vtakit.compiler.quant  # noqa: F401  (registers the qnn operators)
from vtakit.compiler.codegen import compile_vm
from vtakit.compiler.codegen.vm import _bind
from vtakit.compiler.ir import (Call, Constant, Function, IRModule, TensorType, Tuple, Var,
                                evaluate, post_order)
from vtakit.compiler.ops.conv2d import plan_conv2d
from vtakit.compiler.ops.epilogue import EpilogueError, ResidualAdd
from vtakit.compiler.ops.reference import epilogue_ref, group_conv2d_ref
from vtakit.compiler.ops.roofline import plan_roofline
from vtakit.compiler.passes import FuseResidualAdd, InferType, default_pipeline, vm_pipeline
from vtakit.compiler.vta import vm_lowerer
from vtakit.hw.config import load_config
from vtakit.runtime import Runtime, launch
from vtakit.runtime.hostops.qnn import add as qnn_add
from vtakit.sim import open_device
from vtakit.compiler.nn import call as _op


# (ea, eb, k, (z_a, z_b, z_out), conv clip, add clip): shifts as add_shifts gives them
# (one of the three is 0); clips that bind
CASES = [
    (2, 0, 1, (0, -128, -128), (-128, 127), (-128, 127)),
    (0, 3, 2, (5, -3, 7), (-100, 120), (0, 100)),
    (1, 2, 0, (0, 0, -128), (-128, 127), (-128, 127)),
]


def _fused_plan(cfg, ea, eb, k, zps, clip1, clip2, c=16, o=16, hw=(6, 5), kernel=3, pad=1,
                init=False):
    rng = np.random.default_rng(ea + 3 * eb + 7 * k)
    x = rng.integers(-128, 128, (1, c) + hw).astype(np.int8)
    w = rng.integers(-128, 128, (o, c, kernel, kernel)).astype(np.int8)
    b = rng.integers(-5000, 5000, o).astype(np.int32)
    oh, ow = hw[0] + 2 * pad - kernel + 1, hw[1] + 2 * pad - kernel + 1
    r = rng.integers(-128, 128, (1, o, oh, ow)).astype(np.int8)
    plan = plan_conv2d(cfg, x.shape, w.shape, 1, pad, bias=True, shift=9, clip=clip1,
                       residual="int8", add=ResidualAdd.make(ea, eb, k, zps, clip2),
                       min_init=(b, w) if init else None)
    assert bool(plan.epilogue.init) == init     # the accumulators start from the bias
    # the reference: the conv layer's int8 output, then the host's qnn.add (rounding vta)
    y = epilogue_ref(group_conv2d_ref(x, w, 1, pad), bias=b, shift=9, clip=clip1)
    want = np.clip(qnn_add(y, r, lhs_scale=2.0 ** ea, lhs_zero_point=zps[0],
                           rhs_scale=2.0 ** eb, rhs_zero_point=zps[1], out_scale=2.0 ** k,
                           out_zero_point=zps[2], rounding="vta"), *clip2).astype(np.int8)
    return plan, plan.pack(x, w, b, r), want, y


@pytest.mark.parametrize("init", [False, True], ids=["reset", "min_init"])
@pytest.mark.parametrize("ea,eb,k,zps,clip1,clip2", CASES)
def test_fused_epilogue_equals_the_layer_then_the_add(ea, eb, k, zps, clip1, clip2, init):
    with open_device("behavioral", "tiny") as dev:
        plan, packed, want, y = _fused_plan(dev.config, ea, eb, k, zps, clip1, clip2,
                                            init=init)
        out, _ = plan.run(Runtime(dev), packed)
    got = plan.unpack(out)
    np.testing.assert_array_equal(got, want)
    # the clips bind: the conv's and the add's
    assert (y == clip1[0]).any() and (y == clip1[1]).any()
    assert (got == clip2[0]).any() and (got == clip2[1]).any()
    # the roofline counts the add's emitted passes (its offset rides on the MIN start when
    # folded) and its identity micro-op per output vector
    plain = plan_conv2d(dev.config, plan.x_shape, plan.w_shape, 1, 1, bias=True, shift=9,
                        clip=clip1)
    vectors = plan.oh * plan.ow * -(-plan.w_shape[0] // dev.config.block)
    rf, rp = plan_roofline(plan), plan_roofline(plain)
    assert rf.mac - rp.mac == vectors
    epi = plan.epilogue
    emitted = sum(map(len, epi.stages()[1:]))
    assert emitted == epi.add.passes - bool(epi.fold and epi.add.offset)
    assert rf.alu - rp.alu == vectors * emitted
    assert plan.epilogue.add.passes == bool(ea) + bool(plan.epilogue.add.offset) + bool(k) + 2


def test_fused_epilogue_verilator_equals_behavioral():
    outs = []
    for backend in ("behavioral", "verilator"):
        with open_device(backend, "tiny") as dev:
            for case, init in zip(CASES[:2], (False, True)):
                plan, packed, want, _ = _fused_plan(dev.config, *case, c=8, o=16, hw=(4, 5),
                                                    init=init)
                out, _ = plan.run(Runtime(dev), packed)
                outs.append(plan.unpack(out))
                np.testing.assert_array_equal(outs[-1], want)
                assert (want == case[5][0]).any() and (want == case[5][1]).any()
    for a, b in zip(outs[:2], outs[2:]):
        np.testing.assert_array_equal(a, b)


def test_residual_add_stage_rejects_what_vta_cannot_hold():
    with pytest.raises(EpilogueError, match="e_b <= 6"):
        ResidualAdd.make(0, 7, 1)
    with pytest.raises(EpilogueError, match="16-bit"):
        ResidualAdd.make(8, 0, 0, (-128, 0, 0))     # offset 128 << 8
    with pytest.raises(EpilogueError, match="int32"):
        ResidualAdd.make(24, 0, 0)


def _conv_layer(x, rng, c, o, zp=0, pad_value=0.0, scale=2.0 ** -9):
    w = rng.integers(-60, 60, (o, c, 3, 3)).astype(np.int8)
    b = rng.integers(-3000, 3000, o).astype(np.int32)
    y = _op("nn.conv2d", x, Constant(w), strides=(1, 1), padding=(1, 1, 1, 1),
            pad_value=pad_value, out_dtype="int32")
    y = _op("nn.bias_add", y, Constant(b), axis=1)
    y = _op("qnn.requantize", y, scale=scale, zero_point=zp, rounding="vta")
    return _op("cast", _op("clip", y, a_min=-128, a_max=127), dtype="int8")


def _block(side, scales=(0.25, 0.0625, 0.125), zps=(0, -128, -128), rounding="vta",
           share=False, c=16):
    """main(x): s = conv(x); y = conv(s); add(y, s) (``side`` 1: add(s, y)); ``share``:
    also return y (it then feeds two users)."""
    rng = np.random.default_rng(5 + side)
    x = Var("x", TensorType((1, c, 6, 6), "int8"))
    s = _conv_layer(x, rng, c, c, zp=-128)
    y = _conv_layer(s, rng, c, c, pad_value=-128.0)
    a, bb = (y, s) if side == 0 else (s, y)
    za, zb = (zps[0], zps[1]) if side == 0 else (zps[1], zps[0])
    sa, sb = (scales[0], scales[1]) if side == 0 else (scales[1], scales[0])
    add = _op("qnn.add", a, bb, lhs_scale=sa, lhs_zero_point=za, rhs_scale=sb,
              rhs_zero_point=zb, out_scale=scales[2], out_zero_point=zps[2], rounding=rounding)
    out = _op("cast", _op("clip", add, a_min=-128, a_max=127), dtype="int8")
    body = _op("concatenate", Tuple([out, y]), axis=1) if share else out
    mod = IRModule({"main": Function([x], body)})
    return mod, rng.integers(-128, 128, (1, c, 6, 6)).astype(np.int8)


def _adds(mod):
    """The qnn.add primitives left on their own, and the primitives holding a conv2d and
    a qnn.add."""
    alone = fused = 0
    for n in post_order(mod["main"]):
        if type(n) is Function and n.is_primitive():
            ops = {m.op.name for m in post_order(n.body) if type(m) is Call
                   and hasattr(m.op, "name")}
            alone += ops >= {"qnn.add"} and "nn.conv2d" not in ops
            fused += ops >= {"qnn.add", "nn.conv2d"}
    return alone, fused


@pytest.mark.parametrize("side,scales,zps", [
    (0, (0.25, 0.0625, 0.125), (0, -128, -128)),     # e_a = 2, e_b = 0, k = 1
    (1, (0.25, 0.0625, 0.125), (0, -128, -128)),     # the convolution on the right
    (0, (0.125, 0.5, 0.25), (3, -128, -128)),        # e_b = 2
])
def test_fused_block_compiles_to_one_vta_layer_and_matches_the_interpreter(
        side, scales, zps, monkeypatch):
    mod, x = _block(side, scales, zps)
    fused = vm_pipeline()(default_pipeline()(mod))
    assert _adds(fused) == (0, 1)
    cfg = load_config("default")
    report = []
    exe = compile_vm(fused, config=cfg, lowerer=vm_lowerer(cfg, report))
    assert [(r.kind, r.where) for r in report] == [("conv2d", "vta"), ("conv2d_add", "vta")]
    assert "residual add fused" in report[1].why
    packs = []
    real = launch.pack_activation
    monkeypatch.setattr(launch, "pack_activation",
                        lambda a, c: packs.append(a.shape) or real(a, c))
    with exe.vm() as vm:
        got = vm.run(x)
    np.testing.assert_array_equal(got, evaluate(mod, x))
    # only the first layer's input comes from the host: the shortcut (the first layer's
    # output) is read in place from device DRAM by the fused layer
    assert packs == [x.shape]


def test_fused_primitive_reads_device_tensors_in_place(monkeypatch):
    """The merged primitive's layer run directly: input and shortcut as DeviceTensors,
    neither packed on the host; equal to the interpreter."""
    from vtakit.compiler.vta import lower as lower_mod
    from vtakit.compiler.vta import lower_layer, match_layer
    from vtakit.runtime.layout import pack_activation
    from vtakit.runtime.vm.objects import DeviceStorage
    mod, _ = _block(0)
    fused = InferType()(FuseResidualAdd()(default_pipeline()(mod)))
    prim = [n for n in post_order(fused["main"]) if type(n) is Function and n.is_primitive()
            and "qnn.add" in str(n.body)][0]
    call = [n for n in post_order(fused["main"]) if type(n) is Call and n.op is prim][0]
    consts = {i: a for i, a in enumerate(call.args) if isinstance(a, Constant)}
    func = _bind(prim, consts)
    assert len(func.params) == 2
    rng = np.random.default_rng(9)
    xs = [rng.integers(-128, 128, tuple(p.checked_type.shape)).astype(np.int8)
          for p in func.params]
    with open_device("behavioral", "default") as dev:
        rt = Runtime(dev)
        dts = []
        for a in xs:
            packed = pack_activation(a, rt.config)
            dt = DeviceStorage(rt, packed.nbytes).tensor(0, a.shape, np.int8)
            dt.write_packed(packed)
            dts.append(dt)
        monkeypatch.setattr(lower_mod, "pack_activation",
                            lambda *a: pytest.fail("an input was packed on the host"))
        records = []
        layer = match_layer(func.body)
        assert layer.data is func.params[0] and layer.attrs["other"] is func.params[1]
        got = lower_layer(layer, records=records)(rt, dts[0], {func.params[1]: dts[1]})
    assert [r.kind for r in records] == ["conv2d_add"] and records[0].where == "vta"
    np.testing.assert_array_equal(got, evaluate(func, *xs))


@pytest.mark.parametrize("what", ["shared", "tflite", "offset"])
def test_pass_leaves_what_it_cannot_fuse(what):
    """The convolution's output used elsewhere, a TFLite add, an offset past an ALU
    immediate: the add stays a primitive of its own (and the graph runs as before)."""
    kw = {"shared": dict(share=True), "tflite": dict(rounding="tflite"),
          "offset": dict(scales=(2.0 ** 8, 1.0, 2.0 ** 8), zps=(-128, 0, 0))}[what]
    mod, x = _block(0, **kw)
    fused = vm_pipeline()(default_pipeline()(mod))
    assert _adds(fused) == (1, 0)
    exe = compile_vm(fused, config="default", lowerer=vm_lowerer(load_config("default")))
    with exe.vm() as vm:
        np.testing.assert_array_equal(vm.run(x), evaluate(mod, x))
