"""The compiler half of the ISA extension ``"requant2"``: bias, TFLite's exact requantize,
zero point and clip in one ALU REQ pass per output vector (per output-channel block of a
tile: REQ.M and REQ.P load the per-lane registers from two int32 rows, then one REQ
over the block), checked against the numpy TFLite arithmetic of
:mod:`vtakit.compiler.quant.fixed_point` (itself checked against LiteRT) and, for the
four MLPerf Tiny models, against LiteRT's reference kernels."""

from pathlib import Path

import numpy as np
import pytest

from vtakit.compiler.ops.conv2d import plan_conv2d
from vtakit.compiler.ops.cost.events import program_stream
from vtakit.compiler.ops.dense import plan_dense
from vtakit.compiler.ops.epilogue import (REQ_LOAD_M, REQ_LOAD_P, REQ_PASS, EpilogueError,
                                          Requant2)
from vtakit.compiler.ops.reference import group_conv2d_ref
from vtakit.compiler.quant import fixed_point as fp
from vtakit.hw.config import load_config
from vtakit.hw.isa import AluOp, Opcode
from vtakit.runtime import Runtime
from vtakit.sim import open_device

from litert_check import assert_equals_litert, compile_whole_on_vta

DATA = Path(__file__).parent / "data" / "mltk"
TINY_RQ2 = load_config("tiny").replace(extensions=("requant2",))
MLPERF_TINY = ["anomaly_detection", "keyword_spotting", "image_classification",
               "visual_wake_words"]


def _tflite(acc, scale, zp, single, clip=(-128, 127)):
    """TFLite's requantize (axis 1), clip to int8."""
    y = fp.requantize_tflite(acc, scale, zp, axis=1, single_rounding=single)
    return np.clip(y.astype(np.int64), *clip).astype(np.int8)


def _requant2(scale, zp, channels, single, clip=(-128, 127)):
    m, s = fp.quantize_multiplier(np.broadcast_to(scale, (channels,)), single_rounding=single)
    return Requant2.make(m, s, zp, clip, single_rounding=single)


def test_requant2_rows_pack_the_parameter_words():
    """Requant2.make's rows: the Q31 multipliers, then P words (hw.fixedpoint's
    pack_requant_word) holding each channel's exponent, the rounding, the zero point and
    the clip; single rounding saturates the exponent at 30 as TFLite does."""
    from vtakit.hw.fixedpoint import unpack_requant_word
    m, s = np.array([1 << 30, 3 << 29, 0, (1 << 31) - 1]), np.array([2, -31, 0, 31])
    rq, rows = Requant2.make(m, s, [-128, 127, 0, -3], (-5, 6), single_rounding=False)
    assert rq.single is False and rows.dtype == np.int32 and rows.shape == (2, 4)
    np.testing.assert_array_equal(rows[0], m)
    f = unpack_requant_word(rows[1])
    np.testing.assert_array_equal(f["s"], s)
    np.testing.assert_array_equal(f["single"], 0)
    np.testing.assert_array_equal(f["zp"], [-128, 127, 0, -3])
    np.testing.assert_array_equal(f["lo"], -5)
    np.testing.assert_array_equal(f["hi"], 6)
    rq, rows = Requant2.make(m, [31, -31, 0, 5], 7, single_rounding=True)
    f = unpack_requant_word(rows[1])
    assert rq.single and (f["single"] == 1).all()
    np.testing.assert_array_equal(f["s"], [30, -31, 0, 5])
    np.testing.assert_array_equal([f["zp"], f["lo"], f["hi"]], [[7] * 4, [-128] * 4, [127] * 4])


@pytest.mark.parametrize("single", [False, True])
def test_requantize_word_of_packed_rows_equals_tflite(single):
    """The ALU table's lane function on the M and P rows Requant2.make packs equals
    TFLite's requantize, clip included, for per-channel scales from 2^-31 to 2^8 (left
    shifts, large right shifts) and every zero point and clip kind."""
    from vtakit.hw.fixedpoint import requantize_word
    rng = np.random.default_rng(5 + single)
    c = 64
    scale = rng.uniform(0.5, 1, c) * 2.0 ** rng.integers(-31, 9, c)
    scale[:3] = (0.0, 2.0 ** -35, 1.0)                   # zero and flushed multipliers
    for zp, clip in ((-128, (-128, 127)), (5, (0, 127)), (-17, (-40, 90))):
        rq, rows = _requant2(scale, zp, c, single, clip)
        assert rq.single == single and rows.shape == (2, c) and rows.dtype == np.int32
        x = np.concatenate([rng.integers(-(1 << 31), 1 << 31, (300, c)),
                            rng.integers(-5000, 5000, (300, c)),
                            [np.full(c, -(1 << 31)), np.full(c, (1 << 31) - 1)]])
        got = requantize_word(x, rows[0], rows[1])
        np.testing.assert_array_equal(got, _tflite(x, scale, zp, single, clip))


def test_requant2_cannot_do_falls_back_with_reason():
    """An exponent outside REQ's 6 bits (a scale of 2^40) or a zero point outside int8:
    the lowering keeps the base ISA's int32 result and host requantize, and says why."""
    from vtakit.compiler.ir import Constant
    from vtakit.compiler.vta.conv import _exact_requant, conv_spec
    from vtakit.compiler.vta.registry import VTALayer
    big = {"rounding": "tflite", "scale": np.array([1e-3, 2.0 ** 40]), "zero_point": 0}
    why = _exact_requant(big, 2, TINY_RQ2, "conv2d")
    assert isinstance(why, str) and "shift=41 does not fit" in why, why
    with pytest.raises(EpilogueError, match="zero_point=300"):
        Requant2.make([1 << 30], [-3], 300, single_rounding=False)
    with pytest.raises(EpilogueError, match="clip"):
        Requant2.make([1 << 30], [-3], 0, (-200, 127), single_rounding=False)
    w = Constant(np.ones((2, 16, 1, 1), np.int8))
    layer = VTALayer("conv2d", None, None, {
        "weight": w, "bias": None, "strides": (1, 1), "padding": (0, 0, 0, 0),
        "pad_value": 0, "groups": 1, "dilation": (1, 1), "requantize": big,
        "clip": (-128, 127), "out_dtype": "int8"})
    spec = conv_spec(layer, (1, 16, 4, 4), (2, 16, 1, 1), TINY_RQ2)
    assert spec.where == "vta+host" and spec.post is not None
    assert "shift=41 does not fit" in spec.why, spec.why
    ok = conv_spec(layer.__class__("conv2d", None, None, dict(
        layer.attrs, requantize=dict(big, scale=np.array([1e-3, 2e-3])))),
        (1, 16, 4, 4), (2, 16, 1, 1), TINY_RQ2)
    assert ok.where == "vta" and "'requant2'" in ok.why and ok.post is None


def test_requant2_needs_the_extension():
    rq, _ = _requant2(0.01, 0, 16, False)
    with pytest.raises(EpilogueError, match=r"\(add \"requant2\"\)"):
        plan_conv2d(load_config("tiny"), (1, 16, 4, 4), (16, 16, 3, 3), bias=True,
                    requant=rq)
    with pytest.raises(EpilogueError, match="no clip"):
        plan_conv2d(TINY_RQ2, (1, 16, 4, 4), (16, 16, 3, 3), bias=True, requant=rq,
                    clip=(-128, 127))


def _req_counts(plan):
    """(REQ passes per output vector, {mode: instructions}, ALU opcodes other than REQ)
    of the plan's program."""
    vectors = np.zeros(plan.operands["out"].shape[:-2], np.int64).size
    counts, execs, other = {}, 0, set()
    for insn in program_stream(plan.program()):
        f = insn.fields
        if insn.opcode != Opcode.ALU:
            continue
        if f["alu_opcode"] != AluOp.REQ:
            other.add(AluOp(f["alu_opcode"]).name)
            continue
        counts[f["imm"]] = counts.get(f["imm"], 0) + 1
        if f["imm"] == REQ_PASS:
            execs += f["iter_out"] * f["iter_in"] * (f["uop_end"] - f["uop_bgn"])
    return execs / vectors, counts, other


@pytest.mark.parametrize("groups,single,pad,hw,uniform", [
    (1, False, 1, (6, 5), False), (32, False, 1, (6, 5), False), (1, True, 1, (6, 5), False),
    (1, False, 0, (17, 15), False), (1, False, 1, (17, 15), True)])
def test_conv_req_pass_equals_tflite(groups, single, pad, hw, uniform):
    """Conv (several output-channel blocks per tile), depthwise and single rounding on
    the behavioral model equal TFLite's arithmetic; the epilogue is REQ alone, one pass
    per output vector, one REQ.M and REQ.P per REQ pass."""
    rng = np.random.default_rng(groups + 2 * single + pad)
    c, o = 32, 40 if groups == 1 else 32
    x = rng.integers(-128, 128, (1, c) + hw, dtype=np.int8)
    w = rng.integers(-128, 128, (o, c // groups, 3, 3), dtype=np.int8)
    bias = rng.integers(-5000, 5000, o).astype(np.int32)
    scale = rng.uniform(1, 2, o) * 2.0 ** rng.integers(-14, -6, o)
    scale[3] = 3.7                      # a left shift (double rounding)
    if uniform:                         # one scale: rows of one block, loaded once
        scale = 0.0021
    zp, clip = -3, (-128, 100)
    rq, rows = _requant2(scale, zp, o, single, clip)
    plan = plan_conv2d(TINY_RQ2, x.shape, w.shape, 1, pad, groups=groups, bias=True,
                       requant=rq)
    out, _ = plan.run(Runtime(open_device("behavioral", TINY_RQ2)),
                      plan.pack(x, w, bias, requant=rows))
    acc = fp.wrap_int32(group_conv2d_ref(x, w, 1, pad, groups).astype(np.int64)
                        + bias[:, None, None])
    np.testing.assert_array_equal(plan.unpack(out), _tflite(acc, scale, zp, single, clip))
    per_vector, counts, other = _req_counts(plan)
    assert per_vector == 1 and not other, (per_vector, other)
    # a setup pair per REQ pass at most (none where the registers hold the block)
    assert counts[REQ_LOAD_M] == counts[REQ_LOAD_P] and counts[REQ_PASS] >= counts[REQ_LOAD_M]
    assert counts[REQ_LOAD_M] >= (1 if uniform else plan.problem.ob)
    assert rq.uniform == uniform and (counts[REQ_LOAD_M] == 1 or not uniform)


@pytest.mark.parametrize("per_channel", [True, False])
def test_dense_req_single_rounding_equals_tflite(per_channel):
    """Dense (FULLY_CONNECTED's single rounding), per-channel scales (MULSHR could not)
    or one scale (uniform rows: one block of M and P, loaded once, one REQ per tile)."""
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (3, 72), dtype=np.int8)
    w = rng.integers(-128, 128, (52, 72), dtype=np.int8)
    bias = rng.integers(-1 << 14, 1 << 14, 52).astype(np.int32)
    scale = rng.uniform(0.0005, 0.003, 52) if per_channel else 0.00123
    rq, rows = _requant2(scale, 7, 52, True)
    assert rq.uniform == (not per_channel)
    plan = plan_dense(TINY_RQ2, x.shape, w.shape, bias=True, requant=rq)
    assert plan.operands["requant"].shape[1] == (plan.problem.ob if per_channel else 1)
    out, _ = plan.run(Runtime(open_device("behavioral", TINY_RQ2)),
                      plan.pack(x, w, bias, requant=rows))
    acc = fp.wrap_int32(x.astype(np.int64) @ w.T.astype(np.int64) + bias)
    np.testing.assert_array_equal(plan.unpack(out), _tflite(acc, scale, 7, True))
    per_vector, counts, other = _req_counts(plan)
    assert per_vector == 1 and not other
    if not per_channel:
        assert counts[REQ_LOAD_M] == counts[REQ_LOAD_P] == 1


def _whole_on_vta_equals_litert(name, config, n):
    """Every conv/dense layer runs whole on VTA with REQ (no host requantize), and the
    compiled model equals LiteRT's reference kernels bit for bit on ``n`` inputs."""
    path = DATA / f"{name}.tflite"
    exe, _ = compile_whole_on_vta(path, config, ("conv2d", "dense"), "requant2")
    assert_equals_litert(exe, path, n)


@pytest.mark.parametrize("preset", ["default", "tiny"])
@pytest.mark.parametrize("name", MLPERF_TINY)
def test_mlperf_tiny_whole_on_vta_equals_litert(name, preset):
    _whole_on_vta_equals_litert(name, load_config(preset).replace(extensions=("requant2",)),
                                1)


def test_event_model_req_late_writes():
    """The event model charges a REQ pass's late writes (REQ_STAGES - 1 cycles) where the
    RTL waits for them: when it drains, one less before a base GEMM/ALU, none before the
    next block's setup (REQ.M reads another row)."""
    import dataclasses

    from vtakit.compiler.ops.cost import RTL_COST
    from vtakit.compiler.ops.cost.events import _overlaps, _req_late, predict_stream
    from vtakit.compiler.ops.cost.params import REQ_STAGES
    from vtakit.hw.spec import Unit, dispatch_unit
    rq, _ = _requant2(np.linspace(1e-3, 2e-3, 40), 0, 40, False)
    plan = plan_conv2d(TINY_RQ2, (1, 16, 9, 9), (40, 16, 3, 3), 1, 1, bias=True, requant=rq)
    insns = program_stream(plan.program())
    queue = [i for i in insns if dispatch_unit(i.opcode, i.fields.get("memory_type"))
             == Unit.COMPUTE]
    late = _req_late(queue, _overlaps(queue), REQ_STAGES - 1)
    passes = [k for k, i in enumerate(queue) if i.opcode == Opcode.ALU
              and i.fields["alu_opcode"] == AluOp.REQ and i.fields["imm"] == REQ_PASS]
    assert passes and set(late) <= set(passes)
    for k in passes:
        nxt = queue[k + 1]
        if nxt.opcode == Opcode.ALU and nxt.fields["alu_opcode"] == AluOp.REQ:
            assert k not in late
        elif nxt.opcode == Opcode.GEMM and not any(queue[k].fields[f] for f in (
                "push_prev_dep", "push_next_dep")):
            assert late[k] == REQ_STAGES - 2
    assert any(v == REQ_STAGES - 1 for v in late.values())      # a drain before a store
    without = dataclasses.replace(RTL_COST, req_late_cycles=0)
    assert predict_stream(insns, TINY_RQ2).cycles > predict_stream(insns, TINY_RQ2,
                                                                   without).cycles


@pytest.mark.slow
def test_req_kernels_on_verilator_equal_behavioral():
    """A per-channel conv (several blocks per tile, setups skipped between tiles) and a
    per-tensor dense (uniform rows) on tiny + requant2: the Verilator RTL and the
    behavioral model both equal TFLite's arithmetic bit for bit."""
    rng = np.random.default_rng(13)
    x = rng.integers(-128, 128, (1, 16, 9, 7), dtype=np.int8)
    w = rng.integers(-128, 128, (40, 16, 3, 3), dtype=np.int8)
    bias = rng.integers(-3000, 3000, 40).astype(np.int32)
    scale = rng.uniform(1, 2, 40) * 2.0 ** rng.integers(-14, -7, 40)
    scale[0] = 2.5                                   # a left shift
    rq, rows = _requant2(scale, 5, 40, False, (-100, 120))
    plan = plan_conv2d(TINY_RQ2, x.shape, w.shape, 1, 1, bias=True, requant=rq)
    acc = fp.wrap_int32(group_conv2d_ref(x, w, 1, 1).astype(np.int64) + bias[:, None, None])
    want = _tflite(acc, scale, 5, False, (-100, 120))
    xd, wd = x.reshape(1, -1)[:, :72], w.reshape(40, -1)[:, :72]
    drq, drows = _requant2(0.0007, -9, 40, True)
    dplan = plan_dense(TINY_RQ2, xd.shape, wd.shape, bias=True, requant=drq)
    dwant = _tflite(fp.wrap_int32(xd.astype(np.int64) @ wd.T.astype(np.int64) + bias),
                    0.0007, -9, True)
    for backend in ("behavioral", "verilator"):
        dev = open_device(backend, TINY_RQ2)
        try:
            rt = Runtime(dev)
            out, _ = plan.run(rt, plan.pack(x, w, bias, requant=rows))
            dout, _ = dplan.run(rt, dplan.pack(xd, wd, bias, requant=drows))
        finally:
            dev.close()
        np.testing.assert_array_equal(plan.unpack(out), want, err_msg=backend)
        np.testing.assert_array_equal(dplan.unpack(dout), dwant, err_msg=backend)


@pytest.mark.slow
@pytest.mark.parametrize("per_channel", [False, True])
def test_streamed_dense_req_on_verilator(per_channel):
    """The streamed dense schedule with REQ (uniform rows: one REQ.M/REQ.P for all tiles)
    on default + requant2: Verilator and behavioral equal TFLite's single rounding."""
    cfg = load_config("default+serial").replace(extensions=("requant2",))
    rng = np.random.default_rng(17)
    x = rng.integers(-128, 128, (1, 128), dtype=np.int8)
    w = rng.integers(-128, 128, (72, 128), dtype=np.int8)
    bias = rng.integers(-1 << 14, 1 << 14, 72).astype(np.int32)
    scale = rng.uniform(0.0005, 0.003, 72) if per_channel else 0.0009
    rq, rows = _requant2(scale, -128, 72, True)
    plan = plan_dense(cfg, x.shape, w.shape, bias=True, requant=rq, stream=(3, 1, 1))
    want = _tflite(fp.wrap_int32(x.astype(np.int64) @ w.T.astype(np.int64) + bias), scale,
                   -128, True)
    for backend in ("behavioral", "verilator"):
        dev = open_device(backend, cfg)
        try:
            out, _ = plan.run(Runtime(dev), plan.pack(x, w, bias, requant=rows))
        finally:
            dev.close()
        np.testing.assert_array_equal(plan.unpack(out), want, err_msg=backend)


@pytest.mark.parametrize("groups,hw,stride,uniform", [
    (1, (6, 5), 1, False), (32, (7, 6), 1, False), (32, (9, 8), 2, False),
    (1, (6, 5), 1, True)])
def test_padded_conv_border_folded_into_req_rows(groups, hw, stride, uniform):
    """A convolution padded with a non-zero value (TFLite's input zero point): each
    border rectangle's REQ pass reads its own bias + correction row, so no ALU ADD
    remains, one REQ execution per output vector, and the result equals TFLite's
    arithmetic on the input padded with that value."""
    _padded_conv_case(groups, hw, stride, uniform, "behavioral")


@pytest.mark.slow
@pytest.mark.parametrize("groups", [1, 32])
def test_padded_conv_border_folded_on_verilator(groups):
    """The folded border kernels (several REQ passes per block, each with its own src
    row) on the Verilator RTL equal TFLite's arithmetic bit for bit."""
    _padded_conv_case(groups, (7, 6), 1, False, "verilator")


@pytest.mark.parametrize("groups,hw,stride", [(1, (6, 5), 1), (32, (7, 6), 1),
                                               (32, (9, 8), 2), (1, (5, 7), 2)])
def test_padded_conv_border_rows_on_chip(groups, hw, stride):
    """The border rows computed on VTA (Conv2dPlan.onchip_border: the rows start as the
    bias, GEMMs of an input vector of the pad value with the weight taps in the padding
    add the correction; no LOAD of border rows) equal TFLite's arithmetic on the input
    padded with that value."""
    _padded_conv_case(groups, hw, stride, False, "behavioral", onchip=True)


@pytest.mark.slow
@pytest.mark.parametrize("groups", [1, 32])
def test_padded_conv_border_rows_on_chip_on_verilator(groups):
    """The on-chip border rows' kernels (reset, bias ADD, correction GEMMs reading one
    inp entry) on the Verilator RTL equal TFLite's arithmetic bit for bit."""
    _padded_conv_case(groups, (7, 6), 1, False, "verilator", onchip=True)


@pytest.mark.parametrize("groups,hw,stride", [(1, (6, 5), 1), (32, (7, 6), 1),
                                               (32, (9, 8), 2), (32, (3, 3), 1),
                                               (1, (5, 7), 2)])
def test_padded_conv_border_direct(groups, hw, stride):
    """The border correction added straight to the border accumulators
    (Conv2dPlan.direct_border: GEMMs of the pad value's input vector with the weight
    taps in the padding, no rows, one REQ pass per block) equals TFLite's arithmetic on
    the input padded with that value."""
    _padded_conv_case(groups, hw, stride, False, "behavioral", onchip="direct")


@pytest.mark.slow
@pytest.mark.parametrize("groups", [1, 32])
def test_padded_conv_border_direct_on_verilator(groups):
    """The direct border GEMMs on the Verilator RTL equal TFLite's arithmetic bit for
    bit."""
    _padded_conv_case(groups, (5, 4), 1, False, "verilator", onchip="direct")


def test_border_taps_and_uops():
    """border_taps lists, per border rectangle, the taps in the padding: with the
    weights' tap sums, they give compiler.vta.conv.border_correction; border_uops orders
    a block's GEMM micro-ops so that no row is written by one of the two before."""
    from vtakit.compiler.ops.conv2d import border_cells, border_taps, border_uops
    from vtakit.compiler.vta.conv import border_correction
    rng = np.random.default_rng(3)
    for (h, w), k, s in [((6, 5), 3, 1), ((9, 8), 3, 2), ((7, 7), 5, 1)]:
        wt = rng.integers(-128, 128, (16, 16, k, k), dtype=np.int8)
        p = k // 2
        plan = plan_conv2d(TINY_RQ2, (1, 16, h, w), wt.shape, s, p, bias=True,
                           requant=_requant2(0.002, 0, 16, False)[0], border=True,
                           pad_value=-7)
        cells = border_cells(h, w, k, k, (s, s), (p, p, p, p), plan.oh, plan.ow)
        taps = border_taps(cells, h, w, k, k, (s, s), (p, p, p, p))
        corr = border_correction(plan, wt, -7)
        wsum = wt.astype(np.int64).sum(axis=1).reshape(16, -1)
        for (r0, r1, c0, c1), ts in zip(plan.border_cases, taps):
            np.testing.assert_array_equal(corr[0, :, r0, c0], -7 * wsum[:, ts].sum(axis=1))
        for tci in (1, 2):
            uops = border_uops(taps, tci)
            assert sorted(uops) == sorted((c, t, ci) for c, ts in enumerate(taps)
                                          for t in ts for ci in range(tci))
            assert all(u[0] not in (a[0], b[0]) for a, b, u in zip(uops, uops[1:], uops[2:]))
            assert all(a[0] != b[0] for a, b in zip(uops, uops[1:]))


def _padded_conv_case(groups, hw, stride, uniform, backend, onchip=False):
    from vtakit.compiler.vta.conv import border_correction
    rng = np.random.default_rng(7 + groups + stride)
    c, o, pv = 32, 40 if groups == 1 else 32, -17
    x = rng.integers(-128, 128, (1, c) + hw, dtype=np.int8)
    w = rng.integers(-128, 128, (o, c // groups, 3, 3), dtype=np.int8)
    bias = rng.integers(-5000, 5000, o).astype(np.int32)
    scale = 0.0021 if uniform else rng.uniform(1, 2, o) * 2.0 ** rng.integers(-14, -6, o)
    zp, clip = 5, (-128, 127)
    rq, rows = _requant2(scale, zp, o, False, clip)
    plan = plan_conv2d(TINY_RQ2, x.shape, w.shape, stride, 1, groups=groups, bias=True,
                       requant=rq, border=True, pad_value=pv if onchip else None)
    direct = onchip == "direct"
    if onchip:     # whichever the event model picked
        plan.rows_on_chip, plan.border_mode = not direct, "direct" if direct else "rows"
        plan._program = None
    assert plan.folded_border != direct and len(plan.border_cases) >= 5
    assert plan.onchip_border == (onchip is True) and plan.direct_border == direct
    loads = [i for i in program_stream(plan.program())
             if i.opcode == Opcode.LOAD and i.memory_type == 3]       # LOAD ACC
    # the shared rows (bias, requantize rows and, loaded, border rows): one operand, one
    # LOAD ACC (Conv2dPlan.merged_rows)
    merged = ("bias", "requant") if onchip else ("bias", "requant", "border")
    assert plan.merged_rows == merged and len(loads) == 1, (plan.merged_rows, len(loads))
    assert "rows" in plan.operands and not set(merged) & set(plan.operands)
    packed = plan.pack(x, w, bias, requant=rows, border=border_correction(plan, w, pv))
    assert "rows" in packed and not set(merged) & set(packed)
    dev = open_device(backend, TINY_RQ2)
    try:
        out, _ = plan.run(Runtime(dev), packed)
    finally:
        dev.close()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=pv)
    acc = fp.wrap_int32(group_conv2d_ref(xp, w, stride, 0, groups).astype(np.int64)
                        + bias[:, None, None])
    np.testing.assert_array_equal(plan.unpack(out), _tflite(acc, scale, zp, False, clip))
    per_vector, counts, other = _req_counts(plan)
    # on chip: one ALU ADD puts the bias into every border row
    assert per_vector == 1 and other == ({"ADD"} if onchip is True else set()), (
        per_vector, other)
    if direct:                                 # one REQ pass per block of a tile
        assert counts[REQ_PASS] == sum(t[3] for t in plan.tiles()), counts
    else:                                              # several REQ passes per block
        assert counts[REQ_PASS] > counts[REQ_LOAD_M]


def test_kws_pointwise_picks_the_tiling_verilator_runs_fastest():
    """keyword spotting's pointwise convolutions (64 -> 64 on 25x5, per-channel REQ) on
    default + requant2: the event model, with fetch feeding the command queues (the
    REQ.M / REQ.P setups of four output blocks per tile are fetch-bound) and the phase
    of the load module's bursts, ranks 9-row tiles with the last one halved first, the
    tiling Verilator runs fastest (3,907 cycles; the 7-row tiles the model chose before,
    3,994)."""
    from vtakit.compiler.ops.cost.geometry import ConvTiling
    from vtakit.compiler.ops.perfmodel import program_prediction
    cfg = load_config("default+serial").replace(extensions=("requant2",))
    rng = np.random.default_rng(0)
    rq, _ = _requant2(rng.uniform(0.5, 1, 64) * 2.0 ** -10, -3, 64, False)
    plan = plan_conv2d(cfg, (1, 64, 25, 5), (64, 64, 1, 1), 1, 0, bias=True, requant=rq)
    assert plan.tiling == ConvTiling(1, 4, 9, 5, 2, "co_outer", 2) and plan.split_last
    best = program_prediction(plan.program())[0].cycles
    other = plan_conv2d(cfg, (1, 64, 25, 5), (64, 64, 1, 1), 1, 0, bias=True, requant=rq,
                        tiling=ConvTiling(1, 4, 7, 5, 2, "co_outer", 2))
    for split in (False, True):
        other.split_last = split
        other._program = None
        assert program_prediction(other.program())[0].cycles > best
