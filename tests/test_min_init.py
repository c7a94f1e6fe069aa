"""Accumulators started from the bias by one ALU MIN (``Epilogue.init``) instead of a
reset and a bias ADD: the offset arithmetic, when it applies, and the streams."""

import numpy as np
import pytest

from vtakit.compiler.ops import conv2d, plan_conv2d
from vtakit.compiler.ops import reference as R
from vtakit.compiler.ops.epilogue import (Epilogue, EpilogueError, ResidualAdd,
                                          accumulation_bound)
from vtakit.compiler.ops.perfmodel import program_prediction
from vtakit.compiler.ops.tiling import ConvTiling
from vtakit.hw.isa import AluOp
from vtakit.hw.spec import IMM_MIN
from vtakit.runtime import Runtime
from vtakit.sim import open_device


def _alu(v, passes):
    """The ALU's immediate passes on int64 values holding int32 (adds wrap, SHR by a
    negative immediate shifts left, as vta-reference section 5)."""
    for op, imm in passes:
        if op == AluOp.ADD:
            v = R.wrap32(v + imm).astype(np.int64)
        elif op == AluOp.SHR:
            v = (v >> imm) if imm >= 0 else R.wrap32(v << -imm).astype(np.int64)
        elif op == AluOp.MAX:
            v = np.maximum(v, imm)
        elif op == AluOp.MIN:
            v = np.minimum(v, imm)
    return v


def test_hand_computed_offset_and_moved_clips():
    # shift 8, clip to int8: init = 256 * 2^8; the clips see 256 less
    epi = Epilogue.make(bias=True, shift=8, clip=(-128, 127)).with_min_init(
        np.array([1000, -7, 30000]), bound=128 * 600)
    assert epi.init == 65536
    assert epi.stages()[0] == [(AluOp.SHR, 8), (AluOp.MAX, -384), (AluOp.MIN, -129)]
    assert epi.imm_passes() == [(AluOp.SHR, 8), (AluOp.MAX, -128), (AluOp.MIN, 127)]
    # the packed bias holds bias + rounding - init
    np.testing.assert_array_equal(epi.pack_bias_values(np.array([1000, -7, 30000]), 3),
                                  [1000 + 128 - 65536, -7 + 128 - 65536, 30000 + 128 - 65536])
    # a bias above init + lo - d needs m = 2: init = 512 * 2^8, the clips see 512 less
    big = Epilogue.make(bias=True, shift=8, clip=(-128, 127)).with_min_init(
        np.array([70000]), bound=0)
    assert big.init == 131072 and big.stages()[0][1] == (AluOp.MAX, -640)


@pytest.mark.parametrize("seed", range(6))
def test_min_init_is_exact_over_any_previous_result(seed):
    """MIN(prev, bias - init) with prev anywhere the last (moved) clip allows, then the
    accumulation and the moved passes: the stored low byte equals the reference."""
    rng = np.random.default_rng(seed)
    shift = int(rng.integers(3, 14))
    lo = int(rng.integers(-128, 0))
    hi = int(rng.integers(lo + 1, 128))
    add = None
    if seed % 2:
        ea, k = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        add = ResidualAdd.make(ea, int(rng.integers(0, 3)), k, (3, -5, 2), (-120, 110))
    epi0 = Epilogue.make(bias=True, shift=shift, clip=(lo, hi),
                         residual="int8" if add else None, add=add)
    bias = rng.integers(-1 << 14, 1 << 14, 16)
    bound = 1 << 20
    epi = epi0.with_min_init(bias, bound)
    assert epi.init, epi0
    s1, before, after = epi.stages()
    last = after[-2][1] if add else s1[-2][1]           # the last clip's moved lo
    prev = rng.integers(last, last + 300, (64, 16))     # anything that clip leaves
    init = np.minimum(prev, epi.pack_bias_values(bias, 16).astype(np.int64)[None])
    np.testing.assert_array_equal(init, np.broadcast_to(bias + epi.round_const - epi.init,
                                                        init.shape))
    acc = rng.integers(-bound, bound + 1, (64, 16))
    r = rng.integers(-128, 128, (64, 16))
    v = _alu(_alu(init + acc, s1), before)
    if add:
        v = v + (r << add.eb)
    got = R.wrap32(_alu(v, after)).astype(np.int8)
    want = epi0.reference(acc.T[None, :, :, None], bias, r.T[None, :, :, None] if add
                          else None)[0, :, :, 0].T
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("epi, why", [
    (Epilogue.make(bias=True, shift=0, clip=(-128, 127)), "no shift to carry the offset"),
    (Epilogue.make(bias=True, shift=8, clip=(None, 127)), "no lower clip bounds the slot"),
    (Epilogue.make(bias=True, shift=8, out_dtype=np.int32), "an int32 result is not clipped"),
    (Epilogue.make(bias=True, residual="int32", shift=8, clip=(-128, 127)),
     "an int32 residual is loaded instead of a reset"),
])
def test_min_init_does_not_apply(epi, why):
    assert epi.with_min_init(np.zeros(4), 1000) is epi, why


def test_min_init_refuses_sums_that_would_leave_int32():
    epi = Epilogue.make(bias=True, shift=8, clip=(-128, 127))
    assert epi.with_min_init(np.zeros(4), (1 << 31) - 1000) is epi
    assert epi.with_min_init(np.zeros(4), 1 << 24).init == 65536


def test_clip_immediates_stay_in_range():
    # shift 12 with a fused add that shifts right by 6 more: the first clip moves by
    # 256 * 2^6 = 16384 less the add's rounding 32 the init carries (Epilogue.fold) and
    # fits a 16-bit immediate; by 7 more it would not
    def fused(k):
        add = ResidualAdd.make(0, 0, k, (0, 0, 0), (-128, 127))
        return Epilogue.make(bias=True, shift=12, clip=(-128, 127), residual="int8",
                             add=add)
    epi = fused(6).with_min_init(np.zeros(4), 1 << 10)
    assert epi.fold and epi.init == (16384 - 32) << 12
    assert epi.stages()[0][1] == (AluOp.MAX, -128 - 16384 + 32)
    assert epi.stages()[2] == [(AluOp.SHR, 6), (AluOp.MAX, -128 - 256), (AluOp.MIN, 127 - 256)]
    assert fused(7).with_min_init(np.zeros(4), 1 << 10).init == 0
    assert min(imm for g in epi.stages() for op, imm in g if op == AluOp.MAX) >= IMM_MIN


def test_pack_rejects_a_bias_the_offset_cannot_hold():
    w = np.ones((16, 16, 1, 1), np.int8)
    plan = plan_conv2d(open_device("behavioral", "tiny").config, (1, 16, 4, 4), w.shape,
                       bias=True, shift=8, clip=(-128, 127),
                       min_init=(np.zeros(16, np.int64), w))
    assert plan.epilogue.init == 65536
    with pytest.raises(EpilogueError, match="init offset 65536"):
        plan.pack(np.zeros((1, 16, 4, 4), np.int8), w, np.full(16, 70000, np.int32))


def test_streams_drop_the_resets_and_bias_adds():
    """Every tile but the first of each acc slot starts with the MIN alone: GEMM resets
    drop by that many, ALU instructions stay (the MIN replaces the bias ADD)."""
    cfg = open_device("behavioral", "tiny").config
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, (40, 24, 3, 3)).astype(np.int8)
    bias = rng.integers(-5000, 5000, 40)
    tiling = ConvTiling(1, 1, 2, 4, 1, "co_outer", 2)
    kw = dict(bias=True, shift=9, clip=(-128, 127), tiling=tiling)
    base = plan_conv2d(cfg, (1, 24, 9, 7), w.shape, 1, 1, **kw)
    fast = plan_conv2d(cfg, (1, 24, 9, 7), w.shape, 1, 1, min_init=(bias, w), **kw)
    tiles = len(list(fast.tiles()))
    a, b = base.inspect(), fast.inspect()
    assert fast.epilogue.init and not base.epilogue.init and tiles > 4
    assert a["by_opcode"]["GEMM"] - b["by_opcode"]["GEMM"] == tiles - 2
    assert a["by_opcode"]["ALU"] == b["by_opcode"]["ALU"]
    # the layer is load-bound on this config: the compute module does less (each dropped
    # reset: its 3 to 8 micro-ops and a cycle of dispatch), the whole kernel about the same
    busy = [program_prediction(plan.program())[0].busy["compute"] for plan in (base, fast)]
    assert busy[1] < busy[0] - (tiles - 2) * 6
    assert fast.estimate.cycles < base.estimate.cycles


@pytest.mark.parametrize("backend", ["behavioral", "verilator"])
def test_conv2d_with_min_init_matches_the_reference(backend):
    """Edge tiles of every size in both slots, a bias near the offset's limit: bit for
    bit on the behavioral model and the RTL."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (2, 24, 9, 7)).astype(np.int8)
    w = rng.integers(-128, 128, (40, 24, 3, 3)).astype(np.int8)
    epi = Epilogue.make(bias=True, shift=9, relu=True, clip=(-128, 127))
    bias = rng.integers(-5000, 5000, 40)
    init = epi.with_min_init(bias, accumulation_bound(w)).init
    bias[3] = init - 256 - epi.round_const          # the largest bias the offset allows
    with open_device(backend, "tiny") as dev:
        y = conv2d(Runtime(dev), x, w, 1, 1, bias=bias.astype(np.int32), shift=9,
                   relu=True, clip=(-128, 127), tiling=ConvTiling(1, 1, 2, 4, 1,
                                                                  "sp_outer", 2))
    want = R.epilogue_ref(R.conv2d_ref(x, w, 1, 1), bias=bias, shift=9, relu=True,
                          clip=(-128, 127))
    np.testing.assert_array_equal(y, want)
    assert (want == 0).any() and (want == 127).any()


@pytest.mark.parametrize("seed", range(12))
def test_folded_add_offset_is_exact_at_the_extremes(seed):
    """Epilogue.fold: the fused add's offset carried by the init instead of an ADD pass.
    The emitted passes (no ADD left) over accumulators at and near the bound's ends,
    residuals at int8's ends and previous results at the last moved clip's lo store what
    the reference stores; an offset 2^e_a does not divide is not folded."""
    rng = np.random.default_rng(100 + seed)
    ea, eb, k = seed % 3, int(rng.integers(0, 3)), int(rng.integers(0, 4))
    shift = int(rng.integers(3, 12))
    zps = tuple(int(z) for z in rng.integers(-6, 7, 3))
    add = ResidualAdd.make(ea, eb, k, zps, (-128, 127) if seed % 4 else (-100, 90))
    epi0 = Epilogue.make(bias=True, shift=shift, clip=(-128, 127), residual="int8", add=add)
    bias = rng.integers(-1 << 12, 1 << 12, 16)
    bound = 1 << 18
    epi = epi0.with_min_init(bias, bound)
    assert epi.init
    ops = [op for g in epi.stages() for op, _ in g]
    foldable = add.offset != 0 and add.offset % (1 << ea) == 0
    assert epi.fold == foldable, (add, epi)
    assert (AluOp.ADD in ops) == (add.offset != 0 and not foldable)
    s1, before, after = epi.stages()
    last = after[-2][1]
    edge = np.array([-bound, -bound + 1, -1, 0, 1, bound - 1, bound])
    acc = np.concatenate([edge, rng.integers(-bound, bound + 1, 57)])[:, None] + np.zeros(
        (1, 16), np.int64)
    r = np.where(rng.random((64, 16)) < 0.5, -128, 127)
    prev = np.full((64, 16), last)
    init = np.minimum(prev, epi.pack_bias_values(bias, 16).astype(np.int64)[None])
    v = _alu(_alu(init + acc, s1), before) + (r << add.eb)
    got = R.wrap32(_alu(v, after)).astype(np.int8)
    want = epi0.reference(acc.T[None, :, :, None], bias, r.T[None, :, :, None])
    np.testing.assert_array_equal(got, want[0, :, :, 0].T)


def test_resnet50_add_folds():
    # ResNet-50's projection blocks: e_a = 1, offset -128 (zero points only): the ADD goes
    epi = Epilogue.make(bias=True, shift=7, clip=(-128, 127), residual="int8",
                        add=ResidualAdd(1, 1, -128, 0, -128, 127)).with_min_init(
        np.arange(-3000, 3000), 128 * 64 * 3)
    assert epi.fold and epi.init == (256 * 1 + 128) // 2 << 7
    assert [len(g) for g in epi.stages()] == [3, 1, 2]
    # e_a = 2 with the rounding 1 in its offset -127: kept
    epi = Epilogue.make(bias=True, shift=7, clip=(-128, 127), residual="int8",
                        add=ResidualAdd(2, 0, -127, 1, -128, 127)).with_min_init(
        np.arange(-3000, 3000), 128 * 64 * 3)
    assert epi.init and not epi.fold and epi.stages()[2][0] == (AluOp.ADD, -127)
