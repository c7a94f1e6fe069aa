"""How a convolution's tiles are ordered for the ALU lane (``COMPUTE_OVERLAP``), without a
device: the passes of a tile between the next tile's groups (``Conv2dPlan.post_beside``),
three inp/wgt slots for a fused add (``Conv2dPlan.in_slots``), and that the planner keeps
the variant the event model predicts fastest. Verilator against numpy for each variant:
``tests/test_rtl_overlap.py``."""

import itertools
import re

import numpy as np
import pytest

from vtakit.compiler.ops import plan_conv2d
from vtakit.compiler.ops.epilogue import ResidualAdd
from vtakit.hw.config import load_config
from vtakit.hw.isa import MemType, Opcode

OV = load_config("default+overlap")
DEFAULT = load_config("default+serial")


def _add_plan(config, tiling=None):
    """ResNet-50's second-stage 1x1 expansion with its fused add (e_a = 2, offset -127,
    not folded)."""
    rng = np.random.default_rng(3)
    w = rng.integers(-8, 9, (512, 128, 1, 1), dtype=np.int8)
    b = rng.integers(-3000, 3000, 512).astype(np.int32)
    return plan_conv2d(config, (1, 128, 28, 28), w.shape, bias=True, shift=9,
                       clip=(-128, 127), residual="int8", add=ResidualAdd(2, 0, -127, 1, -128, 127),
                       min_init=(b, w), tiling=tiling)


def _plain_plan(config):
    """ResNet-50's first-stage 1x1 reduction (256 -> 64 at 56x56) with a MIN init."""
    rng = np.random.default_rng(4)
    w = rng.integers(-8, 9, (64, 256, 1, 1), dtype=np.int8)
    b = rng.integers(-3000, 3000, 64).astype(np.int32)
    return plan_conv2d(config, (1, 256, 56, 56), w.shape, bias=True, shift=8,
                       clip=(-128, 127), min_init=(b, w))


def _predicted(plan, **attrs):
    for k, v in attrs.items():
        setattr(plan, k, v)
    plan._program = None
    return plan.inspect()["predicted_cycles"]


def _compute_kinds(plan) -> str:
    """The compute module's GEMMs (``G``), immediate ALU passes (``I``) and tensor ALUs
    (``T``: the MIN init) in program order."""
    out = []
    for insn in plan.program().insns:
        if insn.opcode == Opcode.GEMM:
            out.append("G")
        elif insn.opcode == Opcode.ALU:
            out.append("I" if insn.fields["use_imm"] else "T")
    return "".join(out)


def test_fused_add_takes_three_slots_and_the_fastest_order():
    """With the lane, the fused add's plan has three inp/wgt slots (the residual group in
    one of its own), a tiling whose group and residual fit a third of the inp SRAM, its
    loads in all three slots; this layer (nine ALU passes per output, nine GEMM micro-ops)
    also four acc slots, its stores from all four. Predicted faster than the plan of
    before (two slots, the searched tiling) and than three slots with two acc slots in
    either order."""
    plan = _add_plan(OV)
    assert plan.in_slots == 3 and plan.out_slots == 4
    fp = plan.tiling.footprint(plan.problem, OV)
    assert fp["inp"] <= OV.inp_depth // 3 and fp["wgt"] <= OV.wgt_depth // 3
    assert fp["acc"] <= OV.acc_depth // 4
    insns = plan.program().insns
    bases = {i.fields["sram_base"] for i in insns
             if i.opcode == Opcode.LOAD and i.fields["memory_type"] == MemType.INP}
    assert {b // (OV.inp_depth // 3) for b in bases} == {0, 1, 2}
    stores = {i.fields["sram_base"] for i in insns if i.opcode == Opcode.STORE}
    assert {b // (OV.acc_depth // 4) for b in stores} == {0, 1, 2, 3}
    chosen = plan.inspect()["predicted_cycles"]
    searched = _add_plan(DEFAULT).tiling

    def variant(in_slots, three, order):
        q = _add_plan(OV)
        q.in_slots, q.out_slots = None, None
        q._set_tiling(searched, None, q.estimate)
        if three:
            q.in_slots = in_slots
            q._set_tiling(q._three_slot_tiling(), None, q.estimate)
        return _predicted(q, add_order=order, post_beside=False)

    assert variant(None, False, "pre") > chosen
    assert min(variant(3, True, o) for o in ("pre", "split")) > chosen


def test_without_the_lane_nothing_changes():
    """On ``default`` the plans keep two slots and the order of before."""
    for plan in (_add_plan(DEFAULT), _plain_plan(DEFAULT)):
        assert plan.in_slots is None and plan.out_slots is None and not plan.post_beside
        assert plan.add_order == "pre"


def test_plain_epilogue_passes_go_between_the_next_groups():
    """A 1x1 layer whose group of GEMMs is shorter than its epilogue: the planner keeps
    ``post_beside`` (predicted faster), and its stream has a tile's immediate passes
    between two GEMM groups of the next tile, where without it they come as one run
    before them."""
    plan = _plain_plan(OV)
    assert plan.post_beside
    beside = plan.inspect()["predicted_cycles"]
    kinds_beside = _compute_kinds(plan)
    assert _predicted(plan, post_beside=False) > beside
    kinds = _compute_kinds(plan)
    passes = len(plan.epilogue.stages()[0])
    # without: every run of immediate passes is the whole epilogue
    assert {len(m) for m in re.findall(r"I+", kinds)} == {passes}
    # with: some run is shorter, and sits between two GEMMs
    runs = {len(m) for m in re.findall(r"(?<=G)I+(?=G)", kinds_beside)}
    assert runs and min(runs) < passes
    assert sorted(kinds_beside) == sorted(kinds)


@pytest.mark.parametrize("stage", [0, 2])
def test_emit_stage_slices_the_passes(stage):
    """``Epilogue.emit_stage`` with a slice queues exactly those passes of the stage."""
    plan = _add_plan(OV)
    epi = plan.epilogue
    got = []

    class Stream:
        def push_alu(self, kernel):
            got.append((kernel.alu_op, kernel.imm))

    from vtakit.compiler.ops.loops import Dim
    dims = [Dim("p", 4, 1)]
    epi.emit_stage(Stream(), 0, dims, stage, slice(1, None))
    assert got == [(op, imm) for op, imm in epi.stages()[stage][1:]]


def _int32_plan(config, **kw):
    """A 3x3 convolution with an int32 result in three byte planes (the MLPerf Tiny
    models' layers on ``default``: the requantize runs on the host)."""
    return plan_conv2d(config, (1, 16, 14, 14), (32, 16, 3, 3), 1, 1, bias=True,
                       out_dtype="int32", result_bytes=3, **kw)


def _plane_shift_lanes(plan) -> list:
    """How each plane shift (ALU SHR 8) meets the ALU lane, in program order
    (the event model's ``("lane", bank)`` when the lane runs it)."""
    from vtakit.compiler.ops.cost.events import _lane_plan, program_stream
    from vtakit.hw.spec import Unit, dispatch_unit
    prog = plan.program()
    queue = [i for i in program_stream(prog)
             if dispatch_unit(i.opcode, i.fields.get("memory_type")) == Unit.COMPUTE]
    kinds = _lane_plan(queue, OV, prog.uops)
    return [k for i, k in zip(queue, kinds)
            if i.opcode == Opcode.ALU and i.fields["use_imm"] and i.fields["imm"] == 8]


def test_int32_plane_slots_take_the_banks_the_model_prefers():
    """``Conv2dPlan.plane_banks`` on ``default+overlap``: chosen (predicted faster than
    five slots one after another), every plane shift lies in one acc bank, its slot's
    (the pattern's), and tiles rotate through the slots; on ``default`` it stays off."""
    plan = _int32_plan(OV)
    banks = plan.plane_banks
    assert banks is not None and set(banks) == {0, 1}
    chosen = plan.inspect()["predicted_cycles"]
    shifts = _plane_shift_lanes(plan)
    # every shift runs in the lane, in both banks; as many per bank as the pattern says
    assert shifts and {k for k, _ in shifts} == {"lane"}
    per_bank = [sum(1 for _, b in shifts if b == bank) for bank in (0, 1)]
    assert per_bank[0] and per_bank[1]
    assert abs(per_bank[0] / len(shifts) - banks.count(0) / len(banks)) < 0.2
    assert _predicted(plan, plane_banks=None) > chosen
    assert _int32_plan(DEFAULT).plane_banks is None


def test_int32_plane_slots_equal_numpy_on_the_model():
    """The int32 result with each bank pattern (and skew) tried equals numpy on the
    behavioral model."""
    from vtakit.compiler.ops import reference as R
    from vtakit.runtime import Runtime
    from vtakit.runtime.device import open_device
    rng = np.random.default_rng(9)
    x = rng.integers(-128, 128, (1, 16, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    b = rng.integers(-2 ** 20, 2 ** 20, 32).astype(np.int32)
    want = R.conv2d_ref(x, w, 1, 1) + b[None, :, None, None]
    plan = _int32_plan(OV)
    tries = ([(None, 1)] + [(b, 1) for b in plan.PLANE_BANKS] + [(plan.SKEWED_BANKS[3], 2)]
             + [((0, 1), 0)])
    for banks, skew in tries:
        with open_device("behavioral", OV) as dev:
            rt = Runtime(dev)
            plan = _int32_plan(OV)
            plan.plane_banks, plan.plane_skew, plan._program = banks, skew, None
            got = plan.unpack(plan.run(rt, plan.pack(x, w, b))[0])
        np.testing.assert_array_equal(got, want, err_msg=f"{banks} skew {skew}")


def test_int32_skewed_plane_shifts_sit_in_the_other_bank():
    """``plane_skew`` 2 with slots alternating banks: every plane shift runs in the lane,
    and in the other bank than the GEMMs that follow it (the next tile's)."""
    from vtakit.compiler.ops.cost.events import _lane_plan, program_stream
    from vtakit.hw.spec import Unit, dispatch_unit
    plan = _int32_plan(OV)
    plan.plane_banks, plan.plane_skew, plan._program = plan.SKEWED_BANKS[3], 2, None
    prog = plan.program()
    queue = [i for i in program_stream(prog)
             if dispatch_unit(i.opcode, i.fields.get("memory_type")) == Unit.COMPUTE]
    kinds = _lane_plan(queue, OV, prog.uops)
    shifts = 0
    for n, (insn, kind) in enumerate(zip(queue, kinds)):
        if insn.opcode == Opcode.ALU and insn.fields["use_imm"] and insn.fields["imm"] == 8:
            assert kind[0] == "lane"
            shifts += 1
            nxt = next((k for k in kinds[n + 1:] if k[0] == "gemm"), None)
            if nxt is not None:
                assert kind[1] not in nxt[1]
    assert shifts == 2 * len(list(plan.tiles()))


def _resets(plan) -> tuple:
    """``(GEMM resets, zeroing ALU passes)`` in the plan's program: GEMMs with the reset
    flag, and the SHR 31 / MAX 0 pairs of ``Epilogue.emit_zero``."""
    insns = plan.program().insns
    resets = sum(1 for i in insns if i.opcode == Opcode.GEMM and i.fields["reset_reg"])
    zeros = sum(1 for i in insns if i.opcode == Opcode.ALU and i.fields["use_imm"]
                and i.fields["alu_opcode"] == 3 and i.fields["imm"] == 31)
    return resets, zeros


def test_int32_alu_reset_zeroes_a_step_ahead_and_equals_numpy():
    """``Conv2dPlan.alu_reset`` (an int32 result without a bias tile, on
    ``default+overlap``): no GEMM reset, one zeroing pair per tile, each a step ahead of
    its tile's GEMMs; more tiles than slots (a slot's old planes zeroed), equal to numpy
    on the behavioral model for every bank pattern the lead fits; refused where the
    pattern has no spare slot."""
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.tokens import PlanePipeline
    from vtakit.runtime import Runtime
    from vtakit.runtime.device import open_device
    rng = np.random.default_rng(10)
    x = rng.integers(-128, 128, (1, 16, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    want = R.conv2d_ref(x, w, 1, 1)

    def plan_of():
        return plan_conv2d(OV, x.shape, w.shape, 1, 1, out_dtype="int32", result_bytes=3)

    plan = plan_of()
    assert plan._zero_ok()
    tries = [(b, 1) for b in plan.PLANE_BANKS] + [(plan.SKEWED_BANKS[3], 2), ((0, 1) * 4, 2),
                                                  ((0, 1) * 3, 1), ((0, 1), 0)]
    ran = 0
    for banks, skew in tries:
        plan = plan_of()
        plan.plane_banks, plan.plane_skew, plan.alu_reset, plan._program = banks, skew, True, None
        if len(banks) < PlanePipeline.min_slots(3, skew, lead=True):
            with pytest.raises(ValueError, match="lead"):
                plan.program()
            continue
        n = len(list(plan.tiles()))
        assert n > len(banks)
        assert _resets(plan) == (0, n)
        with open_device("behavioral", OV) as dev:
            got = plan.unpack(plan.run(Runtime(dev), plan.pack(x, w))[0])
        np.testing.assert_array_equal(got, want, err_msg=f"{banks} skew {skew}")
        ran += 1
    assert ran >= 2


def test_int32_alu_reset_only_where_the_model_prefers_it():
    """The planner keeps ``alu_reset`` only when predicted faster (image
    classification's 16 -> 16 3x3 at 32x32, int32 without a bias tile: the GEMM lane
    loses its reset micro-ops); never with a bias tile, nor on ``default``."""
    shape, wshape = (1, 16, 32, 32), (16, 16, 3, 3)
    plan = plan_conv2d(OV, shape, wshape, 1, 1, out_dtype="int32", result_bytes=3)
    assert plan.alu_reset and _resets(plan)[0] == 0
    chosen = plan.inspect()["predicted_cycles"]
    assert _predicted(plan, alu_reset=False, plane_banks=plan.SKEWED_BANKS[3]) > chosen
    assert not plan_conv2d(DEFAULT, shape, wshape, 1, 1, out_dtype="int32",
                           result_bytes=3).alu_reset
    biased = plan_conv2d(OV, shape, wshape, 1, 1, bias=True, out_dtype="int32",
                         result_bytes=3)
    assert not biased.alu_reset and not biased._zero_ok()


def test_requantize_epilogue_keeps_the_serial_order_where_faster():
    """A requantize epilogue (requant2's REQ, which the lane runs too: lane_req, so the
    plan's other choices follow the lane and differ from the one-lane config's): on a 1x1
    layer where the event model predicts the early start slower, the plan takes
    ``serial_order``, the lane takes its REQ instructions, and its output equals TFLite's
    requantize on the behavioral model."""
    from vtakit.compiler.ops.cost.events import _is_req, _lane_plan
    from vtakit.hw.spec import Unit, dispatch_unit
    from test_requant2_compile import _requant2, _tflite

    from vtakit.compiler.ops.reference import group_conv2d_ref
    from vtakit.compiler.quant import fixed_point as fp
    from vtakit.runtime import Runtime
    from vtakit.sim import open_device

    rng = np.random.default_rng(21)
    x = rng.integers(-128, 128, (1, 64, 25, 25), dtype=np.int8)
    w = rng.integers(-128, 128, (64, 64, 1, 1), dtype=np.int8)
    bias = rng.integers(-3000, 3000, 64).astype(np.int32)
    scale = np.linspace(1e-3, 2e-3, 64)
    rq, rows = _requant2(scale, 3, 64, False)
    cfg = load_config("default+requant2+overlap")
    plan = plan_conv2d(cfg, x.shape, w.shape, 1, 0, bias=True, requant=rq)
    assert plan.serial_order
    serial = _predicted(plan)
    assert _predicted(plan, serial_order=False) > serial
    plan.serial_order, plan._program = True, None
    prog = plan.program()
    queue = [i for i in prog.insns
             if dispatch_unit(i.opcode, i.fields.get("memory_type")) is Unit.COMPUTE]
    kinds = {k for i, (k, _) in zip(queue, _lane_plan(queue, cfg, prog.uops)) if _is_req(i)}
    assert kinds == {"lane"}, kinds
    acc = fp.wrap_int32(group_conv2d_ref(x, w, 1, 0).astype(np.int64)
                        + bias[:, None, None])
    dev = open_device("behavioral", cfg)
    try:
        out, _ = plan.run(Runtime(dev), plan.pack(x, w, bias, requant=rows))
    finally:
        dev.close()
    assert np.array_equal(plan.unpack(out), _tflite(acc, scale, 3, False))


def test_int32_plane_shifts_amid_the_next_gemms_equal_numpy():
    """``plane_skew`` ``MID`` (:data:`vtakit.compiler.ops.tokens.MID`): plane k of tile
    t - (2k - 1) shifted amid tile t's GEMMs (between its GEMM kernels), in the other
    acc bank, so the lane runs it beside them; equal to numpy on the behavioral model
    with and without ``alu_reset``, as is ``EARLY`` (the shifts of planes 2 and up before
    tile t's GEMMs, also in the lane); the planner keeps EARLY for keyword spotting's
    depthwise layer (predicted faster than MID and every other pattern)."""
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.cost.events import _lane_plan, program_stream
    from vtakit.compiler.ops.tokens import EARLY, MID
    from vtakit.hw.spec import Unit, dispatch_unit
    from vtakit.runtime import Runtime
    from vtakit.runtime.device import open_device
    rng = np.random.default_rng(12)
    x = rng.integers(-128, 128, (1, 16, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    want = R.conv2d_ref(x, w, 1, 1)
    for zero, skew in itertools.product((False, True), (MID, EARLY)):
        plan = plan_conv2d(OV, x.shape, w.shape, 1, 1, out_dtype="int32", result_bytes=3)
        plan.plane_banks, plan.plane_skew, plan.alu_reset, plan._program = (
            (0, 1) * 3, skew, zero, None)
        prog = plan.program()
        queue = [i for i in program_stream(prog)
                 if dispatch_unit(i.opcode, i.fields.get("memory_type")) == Unit.COMPUTE]
        kinds = _lane_plan(queue, OV, prog.uops)
        amid = ahead = 0
        for n, (insn, kind) in enumerate(zip(queue, kinds)):
            if insn.opcode == Opcode.ALU and insn.fields["use_imm"] and insn.fields["imm"] == 8:
                assert kind[0] == "lane"
                before = next(k for k in reversed(kinds[:n]) if k[0] == "gemm")
                after = next((k for k in kinds[n + 1:] if k[0] == "gemm"), None)
                if after is not None and after[1] == before[1]:     # amid a tile's GEMMs
                    assert kind[1] not in before[1]
                    amid += 1
                elif after is not None and kind[1] not in after[1]:
                    ahead += 1      # before the next tile's GEMMs, beside them
        n = len(list(plan.tiles()))
        assert amid + ahead >= n - 1
        # EARLY: every plane 2 shift of a step with GEMMs right before them (tile t - 3's)
        assert ahead == (n - 3 if skew == EARLY else 0)
        with open_device("behavioral", OV) as dev:
            got = plan.unpack(plan.run(Runtime(dev), plan.pack(x, w))[0])
        np.testing.assert_array_equal(got, want, err_msg=f"alu_reset {zero} skew {skew}")
    dw = plan_conv2d(OV, (1, 64, 25, 5), (64, 1, 3, 3), 1, 1, groups=64, out_dtype="int32",
                     result_bytes=3)
    assert dw.plane_skew == EARLY
    chosen = dw.inspect()["predicted_cycles"]
    assert _predicted(dw, plane_skew=MID) > chosen
    assert _predicted(dw, plane_skew=1) > chosen


def test_row_pieces_loads_resident_weights_by_kernel_row():
    """``Conv2dPlan.row_pieces`` (resident weights of a full 3x3 convolution): the first
    group loads them one kernel row at a time (``tco x ib`` LOADs of ``kw`` elements
    each), equal to numpy on the behavioral model; kept for image classification's
    16 -> 16 3x3 layer (the first GEMMs wait for a third of the weights), on both
    configs."""
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.cost.geometry import ConvTiling
    from vtakit.runtime import Runtime
    from vtakit.runtime.device import open_device
    rng = np.random.default_rng(13)
    x = rng.integers(-128, 128, (1, 32, 8, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)
    want = R.conv2d_ref(x, w, 1, 1)
    for config in (OV, DEFAULT):
        plan = plan_conv2d(config, x.shape, w.shape, 1, 1, out_dtype="int32",
                           result_bytes=3, tiling=ConvTiling(1, 1, 4, 8, 2, "sp_outer", 2,
                                                             resident=True))
        assert plan.tiling.resident and plan._row_pieces_apply()
        for on in (False, True):
            plan.row_pieces, plan._program = on, None
            wloads = [i for i in plan.program().insns if i.opcode == Opcode.LOAD
                      and i.fields["memory_type"] == MemType.WGT]
            kw = [i.fields["x_size"] for i in wloads]
            if on:
                assert kw[:3 * plan.tiling.tco * 2] == [3] * (3 * plan.tiling.tco * 2)
            else:
                assert 3 not in kw
            with open_device("behavioral", config) as dev:
                got = plan.unpack(plan.run(Runtime(dev), plan.pack(x, w))[0])
            np.testing.assert_array_equal(got, want, err_msg=f"{config.name} {on}")
        ic = plan_conv2d(config, (1, 16, 32, 32), (16, 16, 3, 3), 1, 1, out_dtype="int32",
                         result_bytes=3)
        assert ic.row_pieces
        chosen = ic.inspect()["predicted_cycles"]
        assert _predicted(ic, row_pieces=False) > chosen


def _run_int32(plan, x, w, config, groups=1):
    from vtakit.runtime import Runtime
    from vtakit.runtime.device import open_device
    with open_device("behavioral", config) as dev:
        return plan.unpack(plan.run(Runtime(dev), plan.pack(x, w))[0])


def test_depthwise_plane_shifts_between_kernel_halves_equal_numpy():
    """Keyword spotting's depthwise layer (``EARLY``, a ``MID`` schedule): each tile's
    longest run of rows is two GEMM kernels with the plane 1 shift between them (more
    GEMM instructions than the same plan with skew 1), and the result equals numpy on
    the behavioral model."""
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.tokens import EARLY
    rng = np.random.default_rng(14)
    x = rng.integers(-128, 128, (1, 64, 25, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (64, 1, 3, 3), dtype=np.int8)
    plan = plan_conv2d(OV, x.shape, w.shape, 1, 1, groups=64, out_dtype="int32",
                       result_bytes=3)
    assert plan.plane_skew == EARLY

    def gemms(p):
        return sum(1 for i in p.program().insns if i.opcode == Opcode.GEMM)
    with_mid = gemms(plan)
    np.testing.assert_array_equal(_run_int32(plan, x, w, OV), R.group_conv2d_ref(x, w, 1, 1, 64))
    plan.plane_skew, plan.plane_banks, plan._program = 1, (0, 1) * 3, None
    assert with_mid > gemms(plan)


def test_split_first_and_row_loads_on_a_store_bound_1x1():
    """Keyword spotting's 1x1 layer (int32, store-bound): the planner keeps
    ``split_first`` (the first output position's tiles one output block each) and
    ``row_loads`` (one INP LOAD of all input blocks per group: whole rows, no padding),
    each predicted faster than without; both equal numpy on the behavioral model, on
    ``default`` and ``default+serial``."""
    from vtakit.compiler.ops import reference as R
    rng = np.random.default_rng(15)
    x = rng.integers(-128, 128, (1, 64, 25, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (64, 64, 1, 1), dtype=np.int8)
    want = R.conv2d_ref(x, w, 1, 0)
    plan = plan_conv2d(OV, x.shape, w.shape, 1, 0, out_dtype="int32", result_bytes=3)
    assert plan.split_first and plan.row_loads and plan.tiling.tco > 1
    tiles = list(plan.tiles())
    first = [t for t in tiles if t[4:] == tiles[0][4:]]
    assert [t[3] for t in first] == [1] * plan.problem.ob
    inp = [i for i in plan.program().insns
           if i.opcode == Opcode.LOAD and i.fields["memory_type"] == MemType.INP]
    assert all(i.fields["y_size"] == plan.problem.ib for i in inp)
    chosen = plan.inspect()["predicted_cycles"]
    assert _predicted(plan, row_loads=False) > chosen
    plan.row_loads = True
    for config in (OV, DEFAULT):
        for split, rows in ((False, False), (True, False), (True, True)):
            p = plan_conv2d(config, x.shape, w.shape, 1, 0, out_dtype="int32",
                            result_bytes=3, tiling=plan.tiling)
            p.split_first, p.row_loads, p._program = split, rows, None
            np.testing.assert_array_equal(_run_int32(p, x, w, config), want,
                                          err_msg=f"{config.name} {split} {rows}")


def test_resident_weights_ahead_of_the_slot_token():
    """``Conv2dPlan.weights_ahead`` (resident weights): visual wake words' 64-channel
    depthwise layer at 12x12 keeps it (predicted faster than without: the next block's
    weights no longer wait for an inp slot they do not use); each output block's weight
    LOAD carries no pop of the compute module's token; equal to numpy on the behavioral
    model both ways."""
    from vtakit.compiler.ops import reference as R
    rng = np.random.default_rng(16)
    x = rng.integers(-128, 128, (1, 64, 12, 12), dtype=np.int8)
    w = rng.integers(-128, 128, (64, 1, 3, 3), dtype=np.int8)
    plan = plan_conv2d(OV, x.shape, w.shape, 1, 1, groups=64, out_dtype="int32",
                       result_bytes=3)
    assert plan.tiling.resident and plan.weights_ahead
    chosen = plan.inspect()["predicted_cycles"]
    loads = [i for i in plan.program().insns if i.opcode == Opcode.LOAD
             and i.fields["memory_type"] == MemType.WGT]
    assert len(loads) > plan.problem.kh and not any(i.fields["pop_next_dep"] for i in loads)
    want = R.group_conv2d_ref(x, w, 1, 1, 64)
    np.testing.assert_array_equal(_run_int32(plan, x, w, OV), want)
    assert _predicted(plan, weights_ahead=False) > chosen
    np.testing.assert_array_equal(_run_int32(plan, x, w, OV), want)


def test_runner_up_tiling_with_its_own_choices_on_a_depthwise_layer(monkeypatch):
    """``Conv2dPlan.RUNNERS_UP`` (int32 depthwise, COMPUTE_OVERLAP): keyword spotting's
    depthwise layer takes the re-ranking's next best tiling (th 9, not th 13) once that
    tiling's own flags and plane slots are searched, predicted faster than the plan the
    re-ranking alone picks; it equals numpy on the behavioral model, and planning the
    same layer again gives the same plan and program."""
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.conv2d import Conv2dPlan
    rng = np.random.default_rng(17)
    x = rng.integers(-128, 128, (1, 64, 25, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (64, 1, 3, 3), dtype=np.int8)

    def plan():
        return plan_conv2d(OV, x.shape, w.shape, 1, 1, groups=64, out_dtype="int32",
                           result_bytes=3)
    chosen = plan()
    with monkeypatch.context() as m:
        m.setattr(Conv2dPlan, "RUNNERS_UP", 0)
        reranked = plan()
    assert chosen.tiling != reranked.tiling
    assert (chosen.inspect()["predicted_cycles"]
            < reranked.inspect()["predicted_cycles"])
    np.testing.assert_array_equal(_run_int32(chosen, x, w, OV),
                                  R.group_conv2d_ref(x, w, 1, 1, 64))
    again = plan()       # the memoized pick: the same tiling, choices and program
    assert again.tiling == chosen.tiling and again.split_last == chosen.split_last
    assert again.program().insns == chosen.program().insns


def test_int32_plane_shifts_spread_amid_the_next_gemms_equal_numpy():
    """``plane_skew`` ``SPREAD`` (:data:`vtakit.compiler.ops.tokens.SPREAD`): every plane
    k > 0 of tile t - 1 shifted amid tile t's GEMMs, each after its share of them (a
    GEMM between any two shifts until the last tile's GEMMs are done), so the kernel
    ends with the last tile's planes alone; the planner keeps it for image
    classification's 64 -> 64 3x3 layer at 8x8 (predicted faster than ``MID`` and skew
    1), and it equals numpy on the behavioral model with and without ``alu_reset``."""
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.tokens import MID, SPREAD
    rng = np.random.default_rng(16)
    x = rng.integers(-128, 128, (1, 64, 8, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (64, 64, 3, 3), dtype=np.int8)
    want = R.conv2d_ref(x, w, 1, 1)
    plan = plan_conv2d(OV, x.shape, w.shape, 1, 1, out_dtype="int32", result_bytes=3)
    assert plan.plane_skew == SPREAD and plan.plane_banks == (0, 1) * 2
    chosen = plan.inspect()["predicted_cycles"]
    for zero in (True, False):
        plan.alu_reset, plan._program = zero, None
        insns = plan.program().insns
        kinds = "".join("G" if i.opcode == Opcode.GEMM else "S" if i.opcode == Opcode.STORE
                        else "H" if (i.opcode == Opcode.ALU and i.fields["use_imm"]
                                     and i.fields["imm"] == 8) else "" for i in insns)
        body, _, tail = kinds.rpartition("G")
        assert "HH" not in re.sub("S", "", body)     # a GEMM between two shifts
        assert tail.count("S") == plan.epilogue.planes   # the last tile's planes alone
        np.testing.assert_array_equal(_run_int32(plan, x, w, OV), want,
                                      err_msg=f"alu_reset {zero}")
    plan.alu_reset = True
    assert _predicted(plan, plane_skew=MID, plane_banks=(0, 1) * 3) > chosen
    assert _predicted(plan, plane_skew=1, plane_banks=(0, 0, 1, 1)) > chosen


def test_head_rows_splits_the_first_position_equal_numpy():
    """``Conv2dPlan.head_rows``: the tiles of the first output position each in two, their
    first ``head_rows`` rows first (the first GEMMs wait for fewer input rows, the
    store starts sooner); the planner keeps 1 for visual wake words' 16 -> 32 1x1 layer
    at 24x24 (predicted faster than without), and each split equals numpy on the
    behavioral model."""
    from vtakit.compiler.ops import reference as R
    rng = np.random.default_rng(17)
    x = rng.integers(-128, 128, (1, 16, 24, 24), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 1, 1), dtype=np.int8)
    want = R.conv2d_ref(x, w, 1, 0)
    plan = plan_conv2d(OV, x.shape, w.shape, 1, 0, out_dtype="int32", result_bytes=3)
    assert plan.head_rows == 1
    chosen = plan.inspect()["predicted_cycles"]
    assert _predicted(plan, head_rows=None) > chosen
    uniform = list(plan.tiles())
    for rows in (1, 2):
        plan.head_rows, plan._program = rows, None
        tiles = list(plan.tiles())
        k = next(i for i, t in enumerate(uniform) if t[4:] != uniform[0][4:])
        assert tiles[:k] == [t[:5] + (rows,) + t[6:] for t in uniform[:k]]
        assert tiles[k:2 * k] == [t[:4] + (rows, t[5] - rows) + t[6:] for t in uniform[:k]]
        assert tiles[2 * k:] == uniform[k:]
        np.testing.assert_array_equal(_run_int32(plan, x, w, OV), want,
                                      err_msg=f"head_rows {rows}")
