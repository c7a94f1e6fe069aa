"""The ALU lane with ``requant2`` (``COMPUTE_OVERLAP`` and ``EXTENSIONS=requant2``): the lane
runs REQ, REQ.M and REQ.P on the compute module's REQ pipeline (``hw/compute_lane.py``,
:func:`~vtakit.hw.compute_lane.lane_req`), bit for bit against the behavioral model.

* The compute module alone (the Amaranth simulator, test_rtl_compute's bench): random
  streams of GEMMs, base ALUs and REQ instructions (runs and setups) over rows crowded
  near the start of both banks (read-after-write at every distance inside an instruction,
  between lane instructions and between the lanes), with push flags; the lane's enqueues
  are watched, so that a lane that refuses REQ fails.
* Directed programs: a REQ pass in the lane then a base ALU and a REQ reading its rows
  right after it, a REQ whose micro-ops depend on each other, setups between passes in
  the lane, a GEMM of the lane's bank right behind a REQ pass, a REQ pass reading rows a
  GEMM wrote just before.
* Whole devices on Verilator: tiles alternating banks, each with its requantize epilogue
  (REQ.M, REQ.P, the REQ pass with the bias row, a dependent pass) beside the next tile's
  GEMMs, against the behavioral model; the cycles with and without the lane are printed
  (``-s``), not asserted.
"""

import numpy as np
import pytest

from vtakit.hw.config import load_config
from vtakit.hw.isa import AluOp, MemType, Opcode, isa_for

from test_ext_requant2_rtl import random_multipliers, random_params

OVR = load_config("tiny+requant2+overlap")
ISA = isa_for(OVR)
LANES = OVR.batch * OVR.block_out
HALF = OVR.acc_depth // 2
REQ, REQ_M, REQ_P = 0, 1, 2


def test_lane_req_only_with_the_lane_and_requant2():
    from vtakit.hw.compute_lane import lane_req
    assert lane_req(OVR) and lane_req(load_config("default+requant2"))
    for name in ("tiny", "tiny+overlap", "tiny+requant2", "default+serial",
                 "default+requant2+serial", "default+requant"):
        assert not lane_req(load_config(name)), name


def _alu(op, bgn, end=None, *, iters=(1, 1), dst=(0, 0), src=(0, 0), imm=0, use_imm=0,
         **flags):
    return ISA.encode(Opcode.ALU, alu_opcode=int(op), use_imm=use_imm, imm=imm, uop_bgn=bgn,
                      uop_end=bgn + 1 if end is None else end, iter_out=iters[0],
                      iter_in=iters[1], dst_factor_out=dst[0], dst_factor_in=dst[1],
                      src_factor_out=src[0], src_factor_in=src[1], **flags)


def _gemm(bgn, end=None, *, iters=(1, 1), dst=(1, 0), src=(1, 0), wgt=(0, 0), reset=0,
          **flags):
    return ISA.encode(Opcode.GEMM, reset_reg=reset, uop_bgn=bgn,
                      uop_end=bgn + 1 if end is None else end, iter_out=iters[0],
                      iter_in=iters[1], dst_factor_out=dst[0], dst_factor_in=dst[1],
                      src_factor_out=src[0], src_factor_in=src[1], wgt_factor_out=wgt[0],
                      wgt_factor_in=wgt[1], **flags)


def _acc(rng, rows=OVR.acc_depth):
    """Accumulators, and in each bank the rows 24..27 (M, M, P, P) of a requantize."""
    acc = rng.integers(-2**22, 2**22, (rows, LANES))
    for b in (0, HALF):
        acc[b + 24:b + 26] = random_multipliers(rng, 2 * LANES).reshape(2, LANES)
        acc[b + 26:b + 28] = random_params(rng, 2 * LANES).reshape(2, LANES)
    return acc


def _bench_run(insns, uops, acc, *, max_cycles=40_000):
    """``insns`` (then FINISH) on the compute module (``tiny+requant2+overlap``) against
    the behavioral model's datapath; returns (the RTL run, the instructions the lane
    took: their index in ``insns``)."""
    from test_rtl_overlap import run_watching_lane
    insns = list(insns) + [ISA.encode(Opcode.FINISH)]
    r, taken = run_watching_lane(OVR, insns, uops, acc, max_cycles=max_cycles)
    # each enqueue is one of the program's instructions, in program order
    at, pos = [], 0
    for word in taken:
        pos = insns.index(word, pos)
        at.append(pos)
        pos += 1
    return r, at


def _random_program(rng, n):
    """Random GEMMs, base ALUs and REQ instructions (runs 50%, REQ.M and REQ.P 25% each) of
    one micro-op (mostly: the lane takes them) or several, over rows crowded into the first
    28 of each bank, src mostly in the dst's bank, some push flags."""
    uops = []
    for _ in range(12):
        b = int(rng.integers(0, 2)) * HALF
        src = b + int(rng.integers(0, 28)) if rng.random() < 0.85 else \
            (HALF - b) + int(rng.integers(0, 28))
        uops.append(ISA.encode_uop(b + int(rng.integers(0, 24)), src, 0))
    for _ in range(4):      # GEMM micro-ops (inp and wgt rows)
        b = int(rng.integers(0, 2)) * HALF
        uops.append(ISA.encode_uop(b + int(rng.integers(0, 24)), int(rng.integers(0, 16)),
                                   int(rng.integers(0, 16))))
    insns = []
    for _ in range(n):
        one = rng.random() < 0.75
        flags = dict(push_prev_dep=int(rng.random() < 0.1), push_next_dep=int(rng.random() < 0.1))
        iters = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        dst = (int(rng.integers(0, 3)), int(rng.integers(0, 3)))
        src = (int(rng.integers(0, 3)), int(rng.integers(0, 3)))
        kind = rng.random()
        if kind < 0.2:
            bgn = int(rng.integers(12, 16))
            insns.append(_gemm(bgn, bgn + 1 if one else int(rng.integers(bgn + 1, 17)),
                               iters=iters, dst=dst, src=src, wgt=(1, 0),
                               reset=int(rng.random() < 0.2), **flags))
            continue
        bgn = int(rng.integers(0, 12))
        end = bgn + 1 if one else int(rng.integers(bgn + 1, 13))
        if kind < 0.45:
            op = AluOp(int(rng.integers(0, 4)))
            use_imm = int(op == AluOp.SHR or rng.random() < 0.5)
            imm = int(rng.integers(-5, 6)) if op == AluOp.SHR else int(rng.integers(-999, 999))
            insns.append(_alu(op, bgn, end, iters=iters, dst=dst, src=src, imm=imm,
                              use_imm=use_imm, **flags))
        else:
            mode = int(rng.choice([REQ, REQ, REQ_M, REQ_P]))
            if mode != REQ:
                iters = (1, 1)
            insns.append(_alu(AluOp.REQ, bgn, end if mode == REQ else bgn + 1, iters=iters,
                              dst=dst, src=src, imm=mode, **flags))
    return uops, insns


def _is_req(word, mode=None):
    f = ISA.decode(word).fields
    return (ISA.decode(word).opcode == Opcode.ALU and f["alu_opcode"] == AluOp.REQ
            and (mode is None or f["imm"] == mode))


@pytest.mark.parametrize("seed", range(5))
def test_random_streams_with_req_in_the_lane_equal_the_model(seed):
    """Random streams (:func:`_random_program`): the RTL equals the model, and the lane
    took REQ runs and setups (a lane that refuses REQ, or a hold, gap or late write that
    is off by a cycle, fails)."""
    rng = np.random.default_rng([39, 7, seed])
    uops, insns = _random_program(rng, 80)
    r, taken = _bench_run(insns, uops, _acc(rng))
    reqs = [insns[i] for i in taken if _is_req(insns[i])]
    assert any(_is_req(w, REQ) for w in reqs) and any(not _is_req(w, REQ) for w in reqs), \
        (seed, len(taken))
    assert r.alu_count > 100


def _directed(case):
    """(uops, insns, the indexes the lane must take) of one directed program (all in
    bank 1 unless said: rows HALF + ...)."""
    h = HALF
    u = [ISA.encode_uop(h + 24, h + 24, 0), ISA.encode_uop(h + 26, h + 26, 0),  # 0, 1: M, P
         ISA.encode_uop(h, h + 20, 0),           # 2: REQ row h (+1 per iteration), bias h+20
         ISA.encode_uop(h + 3, h, 0),            # 3: reads row h (written by the pass)
         ISA.encode_uop(h + 4, 0, 2),            # 4: a GEMM into row h+4 (inp 0, wgt 2)
         ISA.encode_uop(h + 25, h + 25, 0),      # 5: the second M row
         ISA.encode_uop(h + 27, h + 27, 0),      # 6: the second P row
         ISA.encode_uop(h + 5, h + 5, 0),        # 7: row h+5 (src itself)
         ISA.encode_uop(h + 4, h + 20, 0)]       # 8: row h+4 (the GEMM's), bias h+20
    setup = [_alu(AluOp.REQ, 0, imm=REQ_M), _alu(AluOp.REQ, 1, imm=REQ_P)]
    run = _alu(AluOp.REQ, 2, iters=(2, 4), dst=(4, 1), imm=REQ)
    tail = _gemm(4, iters=(8, 1), dst=(1, 0), src=(1, 0), wgt=(0, 0))   # GEMMs of bank 1
    if case == "base_reads_req_row":      # the lane's ADD reads row h right after the pass
        insns = setup + [run, _alu(AluOp.ADD, 3), tail]
    elif case == "req_reads_req_row":     # a REQ (bias: row h) right after the pass
        insns = setup + [run, _alu(AluOp.REQ, 3, imm=REQ), tail]
    elif case == "dependent_uops":        # one REQ over row h+5, four times (dst factor 0)
        insns = setup + [_alu(AluOp.REQ, 7, iters=(2, 2), imm=REQ), tail]
    elif case == "setups_between_passes":
        insns = setup + [run, _alu(AluOp.REQ, 5, imm=REQ_M), _alu(AluOp.REQ, 6, imm=REQ_P),
                         _alu(AluOp.REQ, 3, iters=(1, 3), dst=(0, 1), src=(0, 1), imm=REQ),
                         _alu(AluOp.REQ, 1, imm=REQ_P), run, tail]
    elif case == "gemm_right_behind":     # a GEMM into the pass's rows waits for its late writes
        insns = setup + [run, _gemm(2, iters=(4, 1), src=(1, 0)), tail]
    elif case == "req_after_gemm":        # the pass reads row h+4, which a GEMM just wrote
        insns = [tail] + setup + [_alu(AluOp.REQ, 8, iters=(1, 3), dst=(0, 1), src=(0, 1)),
                                  _alu(AluOp.REQ, 3, imm=REQ), tail]
    elif case == "push_flags":            # pushes from lane REQs and setups, in order
        insns = setup[:1] + [_alu(AluOp.REQ, 1, imm=REQ_P, push_next_dep=1),
                             _alu(AluOp.REQ, 2, iters=(2, 4), dst=(4, 1), push_prev_dep=1),
                             tail, _alu(AluOp.ADD, 3, push_next_dep=1), tail]
    else:
        raise AssertionError(case)
    want = [i for i, w in enumerate(insns) if ISA.decode(w).opcode == Opcode.ALU]
    return u, insns, want


@pytest.mark.parametrize("case", ["base_reads_req_row", "req_reads_req_row", "dependent_uops",
                                  "setups_between_passes", "gemm_right_behind",
                                  "req_after_gemm", "push_flags"])
def test_directed_dependences_in_the_lane_equal_the_model(case):
    uops, insns, want = _directed(case)
    rng = np.random.default_rng(3)
    _, taken = _bench_run(insns, uops, _acc(rng))
    assert taken == want, (case, taken, want)


# ------------------------------------------------------------ whole devices: Verilator

def _tiles_program(p, tiles, rows):
    """Tiles alternating banks: GEMM reset and accumulate, then the requantize epilogue
    in the tile's bank (REQ.M, REQ.P, the REQ pass with the bias row, a REQ.P and a second
    REQ over the pass's first rows, pushing to store), each beside the next tile's GEMMs."""
    from test_rtl_overlap import tile
    for t in range(tiles):
        base = (t % 2) * HALF + 32 + (t // 2 % 2) * 64     # (rows 20..27: the parameters)
        bank = base - base % HALF
        tile(p, base, rows, 0, pop_load=t == 0, epilogue=False)
        m_ = p.uop(base, bank + 24 + t % 2)
        p_ = p.uop(base, bank + 26 + t % 2)
        run = p.uop(base, bank + 20 + t % 4)
        p.words += [_alu(AluOp.REQ, m_, imm=REQ_M), _alu(AluOp.REQ, p_, imm=REQ_P),
                    _alu(AluOp.REQ, run, iters=(1, rows), dst=(0, 1), imm=REQ),
                    _alu(AluOp.REQ, p.uop(base, bank + 27 - t % 2), imm=REQ_P),
                    _alu(AluOp.REQ, p.uop(base + 1, base), iters=(1, 3), dst=(0, 1),
                         src=(0, 1), imm=REQ, push_next_dep=1)]
    return [((t % 2) * HALF + 32 + (t // 2 % 2) * 64, rows) for t in range(tiles)]


def test_requantize_epilogues_beside_the_gemms_on_verilator(capsys):
    from test_rtl_overlap import Program, prologue
    p, body = Program(1), Program(1)
    from test_ext_requant2_rtl import param_word
    rng = np.random.default_rng(11)
    acc = _acc(rng)
    for b in (0, HALF):     # biases, M and P rows that spread the outputs over int8
        acc[b + 20:b + 24] = rng.integers(-2**8, 2**8, (4, LANES))
        acc[b + 24:b + 26] = rng.integers(1 << 30, 1 << 31, (2, LANES))
        acc[b + 26:b + 28] = [[param_word(int(rng.integers(-3, 1)), 0, int(rng.integers(-9, 9)))
                               for _ in range(LANES)] for _ in range(2)]
    body.acc = p.acc = acc.astype(np.int32)
    stores = _tiles_program(body, 4, 40)
    p.uops = body.uops
    prologue(p)
    p.words += body.words
    for t, (base, n) in enumerate(stores):
        p.store(base, n, pop_prev_dep=1, push_prev_dep=int(t == len(stores) - 1))
    p.finish(pop_next_dep=1)
    want = p.run(OVR, "behavioral")
    got = p.run(OVR, "verilator")
    assert want[3] is None and got[3] is None
    assert got[0] == want[0] and got[1] == want[1]
    assert len(set(want[0])) > 50
    serial = p.run(load_config("tiny+requant2"), "verilator")
    assert serial[0] == want[0]
    with capsys.disabled():
        print(f"\n  requantize epilogues: tiny+requant2 {serial[2]} cycles, "
              f"tiny+requant2+overlap {got[2]} cycles")


# ------------------------------------------- the compiler: rows in both banks (bank_rows)

def _padded_conv(bank_rows, lane_zero, backend):
    """A padded 3x3 convolution with the border folded into REQ rows (shared rows) on
    ``tiny+requant2+overlap``, :attr:`~vtakit.compiler.ops.conv2d.Conv2dPlan.bank_rows`
    and :attr:`~vtakit.compiler.ops.conv2d.Conv2dPlan.lane_zero` set or not (its output
    == TFLite's arithmetic); returns the REQ instructions' lane kinds and the number of
    GEMM resets."""
    from dataclasses import replace
    from vtakit.compiler.ops.conv2d import plan_conv2d
    from vtakit.compiler.ops.cost.events import _is_req, _lane_plan, program_stream
    from vtakit.compiler.ops.reference import group_conv2d_ref
    from vtakit.compiler.quant import fixed_point as fp
    from vtakit.compiler.vta.conv import border_correction
    from vtakit.hw.spec import Unit, dispatch_unit
    from vtakit.runtime import Runtime
    from vtakit.sim import open_device
    from test_requant2_compile import _requant2, _tflite
    rng = np.random.default_rng(9)
    c, o, hw = 32, 32, (10, 10)
    x = rng.integers(-128, 128, (1, c) + hw, dtype=np.int8)
    w = rng.integers(-128, 128, (o, c, 3, 3), dtype=np.int8)
    bias = rng.integers(-5000, 5000, o).astype(np.int32)
    scale = rng.uniform(1, 2, o) * 2.0 ** rng.integers(-14, -6, o)
    rq, rows = _requant2(scale, 5, o, False)
    plan = plan_conv2d(OVR, x.shape, w.shape, 1, 1, bias=True, requant=rq, border=True)
    plan.lane_zero, plan.out_slots, plan._program = False, None, None
    assert plan.folded_border and plan._bank_rows_fit()
    plan.bank_rows, plan.bank_copy = bank_rows, False     # (bank_copy: a GEMM reset)
    if lane_zero:
        plan.lane_zero, plan.out_slots = True, 4
        plan._set_tiling(replace(plan.tiling, th=min(plan.tiling.th, 3)), None, plan.estimate)
        assert plan.tiling.footprint(plan.problem, OVR)["acc"] <= (HALF - 44) // 2
    prog = plan.program()
    queue = [i for i in program_stream(prog)
             if dispatch_unit(i.opcode, i.fields.get("memory_type")) is Unit.COMPUTE]
    kinds = [k for i, (k, _) in zip(queue, _lane_plan(queue, OVR, prog.uops)) if _is_req(i)]
    resets = sum(1 for i in queue if i.opcode == Opcode.GEMM and i.fields["reset_reg"])
    packed = plan.pack(x, w, bias, requant=rows, border=border_correction(plan, w, -17))
    dev = open_device(backend, OVR)
    try:
        out, _ = plan.run(Runtime(dev), packed)
    finally:
        dev.close()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-17)
    acc = fp.wrap_int32(group_conv2d_ref(xp, w, 1, 0, 1).astype(np.int64) + bias[:, None, None])
    np.testing.assert_array_equal(plan.unpack(out), _tflite(acc, scale, 5, False))
    return kinds, resets


@pytest.mark.parametrize("backend", ["behavioral", "verilator"])
def test_bank_rows_put_every_req_in_the_lane(backend):
    """With the rows in both banks every REQ (runs and setups) goes to the lane; with one
    copy (the top of bank 1) the REQs of the tiles in bank 0 stay in the GEMM lane. Both
    equal TFLite's arithmetic."""
    (on, _), (off, _) = _padded_conv(True, False, backend), _padded_conv(False, False, backend)
    assert set(on) == {"lane"} and len(on) > 10, on
    assert "alu" in off and "lane" in off, off


@pytest.mark.parametrize("backend", ["behavioral", "verilator"])
def test_lane_zero_replaces_the_gemm_resets(backend):
    """With :attr:`~vtakit.compiler.ops.conv2d.Conv2dPlan.lane_zero` (four slots, two per
    bank under the rows) no GEMM reset is left (the lane zeroes each tile two tiles
    ahead), every REQ goes to the lane, and the output equals TFLite's arithmetic."""
    (zero, resets), (_, before) = (_padded_conv(True, True, backend),
                                   _padded_conv(True, False, backend))
    assert set(zero) == {"lane"} and resets == 0 and before > 0, (zero, resets, before)
