"""The RTL of the ``requant2`` extension (issue 39): REQ's lane pipeline in hw/alu.py and
its micro-ops in hw/compute.py.

* The ALU block (Amaranth simulation) against an independent reference of the spec's
  ``rq`` (written here from the gemmlowp/TFLite formulas of test_ext_requant_isa), setup
  and REQ micro-ops one per cycle, every ``s`` in both modes, ``lo > hi``, INT32_MIN.
* The compute module alone (test_rtl_compute's bench: Python models around it) against
  the behavioral model's datapath bit for bit (ACC, every OUT entry, the counters, the
  fault): exact cycle counts of the pipeline rule (independent micro-ops one per cycle;
  a micro-op whose acc reads hit the dst of a REQ issued ``d < N`` cycles before waits
  ``N - d``, N = ``late_stages``; REQ.M/REQ.P read only their src and write nothing),
  dependences at every distance, setups between runs, base instructions around REQ
  passes, faults part way, random programs on tiny+requant2 and 4x8+requant2.
* Whole-device runs on Verilator and CXXRTL against the behavioral model.
"""

import numpy as np
import pytest

from vtakit.hw.config import load_config
from vtakit.hw.isa import AluOp, MemType, Opcode, isa_for

from test_ext_requant_isa import _ref_mulshr, _ref_rshr, _ref_srdhm, _wrap, random_late_program

TINY = load_config("tiny")
RQ2 = TINY.replace(extensions=("requant2",))
I32_MIN, I32_MAX = -2**31, 2**31 - 1
REQ, REQ_M, REQ_P = 0, 1, 2         # REQ's immediate: run, load RM, load RP


# ------------------------------------------------------ the reference, from the spec text

def _sx(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def ref_rq(x: int, m: int, p: int) -> int:
    """The spec's ``rq(x, M, P)`` with Python integers."""
    s, single = _sx(p, 6), (p >> 6) & 1
    zp, lo, hi = _sx(p >> 8, 8), _sx(p >> 16, 8), _sx(p >> 24, 8)
    if single:
        q = _ref_mulshr(x, m, min(max(31 - s, 1), 62))
    else:
        q = _ref_rshr(_ref_srdhm(_ref_rshr(x, -max(s, 0)), m), max(-s, 0))
    return min(max(_wrap(q + zp), lo), hi)


def param_word(s, single=0, zp=0, lo=-128, hi=127) -> int:
    """An RP word (int32): s in bits 5..0, single in bit 6, zp, lo, hi in the bytes above."""
    return _wrap((s & 63) | (single << 6) | ((zp & 255) << 8) | ((lo & 255) << 16)
                 | ((hi & 255) << 24))


def random_params(rng, n) -> np.ndarray:
    """RP words: every s in both modes, mostly a sane clamp, some lo > hi and raw words."""
    s = rng.integers(-32, 32, n)
    single = rng.integers(0, 2, n)
    zp = rng.integers(-128, 128, n)
    lo, hi = rng.integers(-128, 0, n), rng.integers(0, 128, n)
    swap = rng.random(n) < 0.15
    lo[swap], hi[swap] = hi[swap], lo[swap]
    words = np.array([param_word(*v) for v in zip(s, single, zp, lo, hi)], np.int64)
    raw = rng.random(n) < 0.15
    words[raw] = rng.integers(I32_MIN, I32_MAX + 1, int(raw.sum()))
    return words


def random_multipliers(rng, n) -> np.ndarray:
    """RM words: TFLite's [2^30, 2^31) multipliers, raw int32, INT32_MIN, small ones."""
    m = rng.integers(1 << 30, 1 << 31, n)
    kind = rng.random(n)
    m[kind < 0.2] = rng.integers(I32_MIN, I32_MAX + 1, int((kind < 0.2).sum()))
    m[(kind >= 0.2) & (kind < 0.3)] = I32_MIN
    m[(kind >= 0.3) & (kind < 0.35)] = rng.integers(-5, 6, int(((kind >= 0.3) & (kind < 0.35)).sum()))
    return m


def test_reference_agrees_with_requantize_word():
    """The reference above is the spec's rq: hw.fixedpoint.requantize_word (the ALU
    table's lane function) agrees on every s, both modes and random words."""
    from vtakit.hw.fixedpoint import requantize_word
    rng = np.random.default_rng(1)
    n = 3000
    x = rng.integers(I32_MIN, I32_MAX + 1, n)
    x[::3] = rng.integers(-2**20, 2**20, len(x[::3]))
    x[:64] = I32_MIN
    m, p = random_multipliers(rng, n), random_params(rng, n)
    p[:128] = [param_word(s, single) for s in range(-32, 32) for single in (0, 1)]
    got = np.asarray(requantize_word(x.astype(np.int32), m.astype(np.int32),
                                     p.astype(np.int32)))
    assert got.tolist() == [ref_rq(int(a), int(b), int(c)) for a, b, c in zip(x, m, p)]


# ------------------------------------------------------------------ the RTL ALU block

def test_rtl_req_lanes_match_the_reference():
    """VectorAlu of tiny+requant2: REQ.M, REQ.P and REQ micro-ops one per cycle (each REQ
    uses the registers as the micro-ops before it left them), the result ``late_stages - 1``
    cycles after its inputs; the bias add wraps; every s in both modes, lo > hi,
    INT32_MIN operands and multipliers (SRDHM's saturation); the base opcodes still work."""
    from amaranth.sim import Simulator
    from vtakit.hw.alu import REQ_STAGES, VectorAlu, late_stages
    lanes = RQ2.batch * RQ2.block_out
    n_late = late_stages(RQ2)
    assert n_late == REQ_STAGES == 8
    assert late_stages(TINY) == 1 and late_stages(TINY.replace(extensions=("requant",))) == 4
    dut = VectorAlu(RQ2)
    rng = np.random.default_rng(39)
    every_s = [param_word(s, single, zp=int(rng.integers(-128, 128)))
               for single in (0, 1) for s in range(-32, 32)]
    prog = []           # (sub-op, a, b)
    for t in range(160):
        m = random_multipliers(rng, lanes)
        p = random_params(rng, lanes)
        if t < len(every_s) // lanes:
            p = np.array(every_s[t * lanes:(t + 1) * lanes])
        prog += [(REQ_M, rng.integers(I32_MIN, I32_MAX + 1, lanes), m),
                 (REQ_P, rng.integers(I32_MIN, I32_MAX + 1, lanes), p)]
        for _ in range(int(rng.integers(0, 4))):
            a = rng.integers(-2**22, 2**22, lanes)
            b = rng.integers(-2**12, 2**12, lanes)
            if t % 4 == 0:          # the bias add wraps
                a, b = rng.integers(I32_MIN, I32_MAX + 1, (2, lanes))
            if t % 9 == 0:          # x = INT32_MIN (with M = INT32_MIN: saturation)
                a[:3], b[:3] = I32_MIN, 0
            prog.append((REQ, a, b))
        if t % 5 == 0:              # a setup between two runs
            prog.append((REQ_M, rng.integers(I32_MIN, I32_MAX + 1, lanes),
                         random_multipliers(rng, lanes)))
            prog.append((REQ, rng.integers(-2**22, 2**22, lanes), np.zeros(lanes, np.int64)))
    rm, rp, want = [0] * lanes, [0] * lanes, []
    for kind, a, b in prog:
        if kind == REQ_M:
            rm = [int(v) for v in b]
        elif kind == REQ_P:
            rp = [int(v) for v in b]
        else:
            want.append([ref_rq(_wrap(int(x) + int(y)), rm[j], rp[j])
                         for j, (x, y) in enumerate(zip(a, b))])
    assert len({v for row in want for v in row}) > 100

    def pack(values):
        return sum((int(v) & 0xFFFFFFFF) << (32 * i) for i, v in enumerate(values))

    got = []

    async def testbench(ctx):
        ctx.set(dut.op, AluOp.REQ)
        due = {}
        for cycle in range(len(prog) + n_late):
            if cycle < len(prog):
                kind, a, b = prog[cycle]
                ctx.set(dut.a, pack(a))
                ctx.set(dut.b, pack(b))
                ctx.set(dut.shift, kind)
                ctx.set(dut.late_en, 1)
                if kind == REQ:
                    due[cycle + n_late - 1] = True
            else:
                ctx.set(dut.late_en, 0)
            if due.pop(cycle, False):
                word = ctx.get(dut.late)
                got.append([_wrap((word >> (32 * i)) & 0xFFFFFFFF) for i in range(lanes)])
            await ctx.tick()
        # the base opcodes are unchanged
        a = rng.integers(I32_MIN, I32_MAX + 1, lanes)
        b = rng.integers(I32_MIN, I32_MAX + 1, lanes)
        for op, fn in ((AluOp.ADD, lambda x, y: _wrap(x + y)), (AluOp.MAX, max)):
            ctx.set(dut.op, op)
            ctx.set(dut.a, pack(a))
            ctx.set(dut.b, pack(b))
            word = ctx.get(dut.result)
            assert [_wrap((word >> (32 * i)) & 0xFFFFFFFF) for i in range(lanes)] == \
                [fn(int(x), int(y)) for x, y in zip(a, b)]

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    assert len(got) == len(want)
    for n, (g, w) in enumerate(zip(got, want)):
        assert g == w, n


def test_verilog_has_the_req_lanes_only_with_requant2():
    from vtakit.hw.alu import VectorAlu
    from vtakit.hw.verilog import convert
    base = convert(VectorAlu(TINY), name="alu")
    rq = convert(VectorAlu(TINY.replace(extensions=("requant",))), name="alu")
    rq2 = convert(VectorAlu(RQ2), name="alu")
    assert "req_rm" not in base and "req_rm" not in rq and "req_rm7" in rq2
    assert "requant_prod" not in rq2
    assert rq2 == convert(VectorAlu(RQ2), name="alu")        # deterministic


# ------------------------------------------ the compute module against the behavioral model

B, M_ROW, P_ROW = 40, 41, 42    # bias, multiplier and parameter rows (nothing writes them)


def _run(insns, uops, acc, config=RQ2):
    """``insns`` (then FINISH) on the compute module and on the behavioral model's
    datapath; assert equal ACC, OUT, counters and fault; return the RTL run and the
    fault's instruction index or None."""
    from test_rtl_compute import ComputeBench, check_against_model
    insns = list(insns) + [isa_for(config).encode(Opcode.FINISH)]
    bench = ComputeBench(config)
    r = bench.run(insns, uop=uops, acc=acc, max_cycles=4000)
    fault = check_against_model(config, bench, r, insns, uops, acc)
    return r, None if fault is None else fault[0]


def _acc(rows=64, seed=5, config=RQ2):
    """Moderate accumulators (outputs spread over int8), small biases, and the M and P
    rows of a TFLite-like requantize (double rounding, s in -12..1) in lanes."""
    lanes = config.batch * config.block_out
    rng = np.random.default_rng(seed)
    acc = rng.integers(-2**21, 2**21, (rows, lanes))
    acc[B] = rng.integers(-2**10, 2**10, lanes)
    acc[M_ROW] = rng.integers(1 << 30, 1 << 31, lanes)
    acc[P_ROW] = [param_word(int(s), 0, int(zp)) for s, zp in
                  zip(rng.integers(-12, 2, lanes), rng.integers(-20, 20, lanes))]
    return acc


def _alu(op, bgn, end, *, iters=(1, 1), dst=(0, 0), src=(0, 0), imm=0, config=RQ2):
    return isa_for(config).encode(
        Opcode.ALU, alu_opcode=op, use_imm=int(op != AluOp.REQ and imm != 0), imm=imm,
        uop_bgn=bgn, uop_end=end, iter_out=iters[0], iter_in=iters[1],
        dst_factor_out=dst[0], dst_factor_in=dst[1], src_factor_out=src[0],
        src_factor_in=src[1])


def _setup(at):
    """REQ.M (uop ``at``: src M_ROW) and REQ.P (uop ``at + 1``: src P_ROW)."""
    return [_alu(AluOp.REQ, at, at + 1, imm=REQ_M), _alu(AluOp.REQ, at + 1, at + 2, imm=REQ_P)]


def _setup_uops(isa, dst=0):
    return [isa.encode_uop(dst, M_ROW, 0), isa.encode_uop(dst, P_ROW, 0)]


def _stages():
    from vtakit.hw.alu import late_stages
    from vtakit.hw.compute import write_stage
    return late_stages(RQ2), write_stage(RQ2)


def test_independent_req_uops_issue_one_per_cycle():
    """REQ.M and REQ.P (one micro-op each), a 16-micro-op pass (two loop iterations of 8
    rows, one bias row), a base ADD loop, another pass: each setup takes 2 cycles from
    accept to accept, the pass N + 1, the ADD loop after it issues N - 2 cycles later than
    after a base loop, the last pass drains its late writes (16 + 1 + W + N - 1)."""
    isa = isa_for(RQ2)
    n, w = _stages()
    uops = _setup_uops(isa) + [isa.encode_uop(d, B, 0) for d in range(8)]
    run = _alu(AluOp.REQ, 2, 10, iters=(2, 1), dst=(8, 0))
    add = _alu(AluOp.ADD, 2, 10, imm=-5)
    r, _ = _run(_setup(0) + [run, add, run], uops, _acc())
    assert np.diff(r.accepted).tolist() == [2, 2, 16 + 1, 8 + 1 + n - 2, 16 + 1 + w + n - 1]


def _pushing(word, flag="push_next_dep"):
    """``word`` with a push flag set."""
    isa = isa_for(RQ2)
    insn = isa.decode(word)
    return isa.encode(insn.opcode, **{**{k: v for k, v in insn.fields.items() if k != "opcode"},
                                      flag: 1})


@pytest.mark.parametrize("after", ["add", "req"])
def test_req_pass_with_a_push_overlaps_and_pushes_with_its_late_write(after):
    """A REQ pass with push flags overlaps the next loop (a base ADD over its rows: the
    gap; another pass) like one without, and pushes when its last late write lands
    (S{W+L-1}); setups with push flags drain (they write nothing and would run ahead of
    the pass's late writes), and push once those landed."""
    isa = isa_for(RQ2)
    n, w = _stages()
    uops = _setup_uops(isa) + [isa.encode_uop(d, B, 0) for d in range(8)]
    run = _alu(AluOp.REQ, 2, 10)
    nxt = _alu(AluOp.ADD, 2, 10, imm=-5) if after == "add" else run
    setup = _setup(0)
    insns = [setup[0], setup[1], _pushing(run), nxt,
             _pushing(setup[0], "push_prev_dep"), setup[1], run]
    r, _ = _run(insns, uops, _acc())
    gaps = np.diff(r.accepted).tolist()
    assert gaps[2] == 8 + 1                  # the pushing pass overlaps
    writes = [c for c, _ in r.out_log]
    assert len(writes) == 24
    assert r.tokens["g2s"].log == [writes[7]]
    # the pushing REQ.M after the second loop drains: its token follows that loop's last
    # (late, for a pass) write, and the accept of the next command shares its cycle
    assert r.tokens["g2l"].log == [r.accepted[5]] and r.accepted[5] >= writes[15]
    assert gaps[4] > 2


@pytest.mark.parametrize("via", ["dst", "src"])
@pytest.mark.parametrize("distance", [1, 2, 3, 5, 7, 8, 9])
def test_dependent_req_uops_wait_for_the_late_write(via, distance):
    """Micro-op ``distance`` of a 10-micro-op REQ pass reads row 0, which micro-op 0
    wrote (as its ``a``: dst, or as its bias: src): the pass takes N - distance cycles
    more than an independent one (none from N on)."""
    isa = isa_for(RQ2)
    n, w = _stages()
    pairs = [(d + 1, B) for d in range(10)]
    pairs[0] = (0, B)
    pairs[distance] = (0, B) if via == "dst" else (distance + 1, 0)
    uops = _setup_uops(isa) + [isa.encode_uop(d, s, 0) for d, s in pairs]
    r, _ = _run(_setup(0) + [_alu(AluOp.REQ, 2, 12)], uops, _acc())
    wait = max(0, n - distance)
    assert r.accepted[3] - r.accepted[2] == 10 + 1 + w + n - 1 + wait


def test_a_chain_of_dependent_req_uops():
    """Each micro-op reads the row the one before it wrote (dst and src alternately), two
    loop iterations: every one waits N - 1 cycles."""
    isa = isa_for(RQ2)
    n, w = _stages()
    uops = _setup_uops(isa) + [isa.encode_uop(0, B, 0), isa.encode_uop(0, B, 0),
                               isa.encode_uop(1, 0, 0), isa.encode_uop(1, 1, 0)]
    run = _alu(AluOp.REQ, 2, 6, iters=(2, 1), dst=(1, 0), src=(1, 0))
    r, _ = _run(_setup(0) + [run], uops, _acc())
    assert r.accepted[3] - r.accepted[2] == 8 + 1 + w + n - 1 + 7 * (n - 1)


@pytest.mark.parametrize("reads", ["src", "dst"])
@pytest.mark.parametrize("setup", [REQ_M, REQ_P])
def test_setup_reading_a_late_row_waits_only_for_its_src(reads, setup):
    """A REQ pass writes rows 0..3; a REQ.M/REQ.P right after it loads its register from
    row 3 (src: held until the late write is in reach, N - 2 cycles: its micro-op issues
    2 cycles after the pass's last) or only names row 3 as its dst (no wait: a setup reads
    no dst and writes nothing); then a pass uses the loaded register."""
    isa = isa_for(RQ2)
    n, w = _stages()

    def cycles(dependent):
        row = 3 if dependent else 9
        pair = (row, B) if reads == "dst" else (9, row)
        uops = _setup_uops(isa) + [isa.encode_uop(d, B, 0) for d in range(4)] + [
            isa.encode_uop(*pair, 0), isa.encode_uop(12, B, 0)]
        acc = _acc()
        if setup == REQ_P:     # a P word from a REQ result: small, so any word is fine
            acc[9] = param_word(-3, 0, zp=5)
        insns = _setup(0) + [_alu(AluOp.REQ, 2, 6), _alu(AluOp.REQ, 6, 7, imm=setup),
                             _alu(AluOp.REQ, 7, 8), _alu(AluOp.ADD, 7, 8, imm=1)]
        r, _ = _run(insns, uops, acc)
        return r.cycles

    assert cycles(True) - cycles(False) == (n - 2 if reads == "src" else 0)


def test_setups_between_runs_act_in_program_order():
    """Runs with a REQ.M / REQ.P between them, dispatched while the run before drains and
    issued right after it: each run uses the registers as loaded before it; two setups of
    one kind in one instruction: the later wins."""
    isa = isa_for(RQ2)
    acc = _acc(seed=8)
    rng = np.random.default_rng(8)
    lanes = RQ2.batch * RQ2.block_out
    acc[50] = random_multipliers(rng, lanes)
    acc[51] = random_params(rng, lanes)
    acc[52] = [param_word(int(s), 1, int(z)) for s, z in
               zip(rng.integers(-20, 2, lanes), rng.integers(-9, 9, lanes))]
    uops = _setup_uops(isa) + [
        isa.encode_uop(0, B, 0), isa.encode_uop(1, B, 0),      # 2, 3: a run
        isa.encode_uop(7, 50, 0),                              # 4: REQ.M from row 50
        isa.encode_uop(7, 51, 0), isa.encode_uop(7, 52, 0),    # 5, 6: two REQ.P
        isa.encode_uop(2, B, 0), isa.encode_uop(3, 0, 0),      # 7, 8: a run (8 reads row 0)
    ]
    insns = _setup(0) + [
        _alu(AluOp.REQ, 2, 4), _alu(AluOp.REQ, 4, 5, imm=REQ_M), _alu(AluOp.REQ, 7, 9),
        _alu(AluOp.REQ, 5, 7, imm=REQ_P), _alu(AluOp.REQ, 2, 4), _alu(AluOp.REQ, 7, 9),
    ]
    r, _ = _run(insns, uops, acc)
    assert r.alu_count == 2 + 2 + 1 + 2 + 2 + 2 + 2


@pytest.mark.parametrize("after", ["gemm", "gemm_reset", "alu_tensor", "alu_imm", "req_dst",
                                   "req_src", "req_m_src"])
def test_req_pass_then_a_dependent_instruction(after):
    """The instruction right after a REQ pass (dispatched while the pass drains) reads
    the row its last micro-op wrote: a GEMM accumulating onto it (or resetting it), a base
    ALU reading it as src or dst, another REQ pass reading it as dst or src, a REQ.M
    loading it; then a base pass over the rows and a REQ pass over them again."""
    isa = isa_for(RQ2)
    uops = _setup_uops(isa) + [isa.encode_uop(d, B, 0) for d in range(4)] + [
        isa.encode_uop(3, 2, 5),       # 6: dst 3 (GEMM: inp 2, wgt 5)
        isa.encode_uop(9, 3, 0),       # 7: dst 9, src 3
    ]
    nxt = {
        "gemm": isa.encode(Opcode.GEMM, uop_bgn=6, uop_end=7, iter_out=1, iter_in=1),
        "gemm_reset": isa.encode(Opcode.GEMM, reset_reg=1, uop_bgn=6, uop_end=7,
                                 iter_out=1, iter_in=1),
        "alu_tensor": _alu(AluOp.ADD, 7, 8),
        "alu_imm": _alu(AluOp.SHR, 6, 7, imm=3),
        "req_dst": _alu(AluOp.REQ, 6, 7),
        "req_src": _alu(AluOp.REQ, 7, 8),
        "req_m_src": _alu(AluOp.REQ, 7, 8, imm=REQ_M),
    }[after]
    _run(_setup(0) + [_alu(AluOp.REQ, 2, 6), nxt, _alu(AluOp.MAX, 2, 6, imm=-7),
                      _alu(AluOp.REQ, 2, 6)], uops, _acc())


def test_base_ops_then_req_forward_without_waiting():
    """Base ALU and GEMM micro-ops right before a REQ pass write the rows it reads (dst
    and bias): forwarding, no hold (the pass takes its independent time)."""
    isa = isa_for(RQ2)
    n, w = _stages()
    uops = _setup_uops(isa) + [isa.encode_uop(d, B, 0) for d in range(4)] + [
        isa.encode_uop(0, 1, 0), isa.encode_uop(B, 2, 0)]
    insns = _setup(0) + [isa.encode(Opcode.GEMM, uop_bgn=2, uop_end=6, iter_out=1, iter_in=1),
                         _alu(AluOp.ADD, 6, 8), _alu(AluOp.REQ, 2, 6)]
    r, _ = _run(insns, uops, _acc())
    assert r.accepted[5] - r.accepted[4] == 4 + 1 + w + n - 1


@pytest.mark.parametrize("case", ["run", "dependent", "setup_src", "last_held"])
def test_fault_inside_a_req_pass(case):
    """A loop iteration's index is out of range: the fault names the instruction, and ACC
    and OUT hold exactly what the micro-ops before it wrote (their late writes too), also
    when the micro-op before the faulting one is held for its own hazard, for a REQ.M
    whose src is out of range, and when the faulting micro-op is the pass's last, held
    in S1 behind it while the next command waits for its dispatch."""
    isa = isa_for(RQ2)
    half = RQ2.acc_depth // 2
    if case == "last_held":     # iteration 1's third micro-op (dst half + 4 + half - 1)
        uops = [isa.encode_uop(0, B, 0), isa.encode_uop(0, B, 0),
                isa.encode_uop(half + 4, B, 0)]
        insn = _alu(AluOp.REQ, 0, 3, iters=(2, 1), dst=(half - 1, 0))
    elif case == "setup_src":   # iteration 2's REQ.M reads src 2 * half
        uops = [isa.encode_uop(0, M_ROW, 0), isa.encode_uop(1, 0, 0)]
        insn = _alu(AluOp.REQ, 0, 2, iters=(3, 1), src=(half, 0), imm=REQ_M)
    else:                       # iteration 2's first micro-op (dst 2 * half)
        uops = [isa.encode_uop(0, B, 0), isa.encode_uop(0 if case == "dependent" else 1, B, 0)]
        insn = _alu(AluOp.REQ, 0, 2, iters=(3, 1), dst=(half, 0))
    uops = uops + _setup_uops(isa)
    k = len(uops) - 2
    insns = _setup(k) + [_alu(AluOp.ADD, 0, 2, imm=3), insn, _alu(AluOp.ADD, 0, 2, imm=9),
                         _alu(AluOp.REQ, 0, 1)]
    lanes = RQ2.batch * RQ2.block_out
    acc = np.zeros((RQ2.acc_depth, lanes), np.int64)
    acc[:64] = _acc()
    acc[half - 1:half + 6] = _acc(seed=6)[:7]
    _, fault = _run(insns, uops, acc)
    assert fault == 3


def _random_program(rng, n_insns, config=RQ2):
    """Random GEMM, base ALU and REQ instructions (runs, REQ.M, REQ.P) over 8 uops whose
    rows crowd into 0..7 (read-after-write at every distance, within and across
    instructions; setups loading from rows that runs and base ops write)."""
    return random_late_program(
        rng, n_insns, config, lambda rng: (AluOp.REQ, int(rng.choice([REQ, REQ, REQ_M, REQ_P]))),
        gemm=0.15, base=0.4, src_rows=12)


def _random_acc(rng, config=RQ2, rows=16):
    lanes = config.batch * config.block_out
    acc = rng.integers(-2**20, 2**20, (rows, lanes))
    acc[8:10] = random_multipliers(rng, 2 * lanes).reshape(2, lanes)
    acc[10:12] = random_params(rng, 2 * lanes).reshape(2, lanes)
    acc[:, ::5] = rng.integers(I32_MIN, I32_MAX + 1, (rows, len(acc[0, ::5])))
    return acc


@pytest.mark.parametrize("seed", range(6))
def test_random_req_programs_match_the_behavioral_model(seed):
    rng = np.random.default_rng([39, seed])
    uops, insns = _random_program(rng, 20)
    _run(insns, uops, _random_acc(rng))


def test_random_req_program_on_4x8():
    """BATCH 4 (32 lanes, a 16-beat acc element): the same kind of program."""
    config = load_config("4x8").replace(extensions=("requant2",))
    rng = np.random.default_rng([39, 100])
    uops, insns = _random_program(rng, 12, config)
    _run(insns, uops, _random_acc(rng, config), config)


# ------------------------------------------------- whole devices: Verilator and CXXRTL

def _device_run(backend):
    """On a device: LOAD ACC; REQ.M, REQ.P; a REQ pass with read-after-write at distances
    1, 2, 3, 7, 8, 9 (as dst and as bias), a base ADD right after it reading its last row, a REQ.P
    from a row written by a REQ (a new zero point and clamp), a second pass over rows the
    first wrote, then a STORE of every row right after the last pass."""
    from vtakit.runtime import Runtime, Unit
    from vtakit.runtime.kernel import UopKernel
    from vtakit.sim import open_device
    lanes = RQ2.batch * RQ2.block_out
    rng = np.random.default_rng(12)
    rows, b, m, p, p2 = 28, 24, 25, 26, 27
    acc = rng.integers(-2**22, 2**22, (rows, lanes)).astype(np.int32)
    acc[b] = rng.integers(-2**12, 2**12, lanes)
    acc[m] = random_multipliers(rng, lanes)
    acc[p] = [param_word(int(s), int(single), int(z)) for s, single, z in
              zip(rng.integers(-14, 3, lanes), rng.integers(0, 2, lanes),
                  rng.integers(-30, 30, lanes))]
    acc[p2] = random_params(rng, lanes)
    fill = [(d, b) for d in range(8)]                   # independent micro-ops
    pairs = ([(0, b), (0, b)]                           # distance 1, dst
             + [(1, b), (2, b), (2, 1)]                 # distance 2, src
             + [(3, b), (4, b), (5, b), (3, b)]         # distance 3, dst
             + [(6, b)] + fill[:6] + [(6, b)]           # distance 7, dst
             + [(13, b)] + fill[:7] + [(21, 13)]        # distance 8, src
             + [(22, b)] + fill + [(22, b)])            # distance 9, dst
    with open_device(backend, RQ2) as dev:
        rt = Runtime(dev)
        buf, out = rt.alloc(acc.nbytes), rt.alloc(rows * lanes)
        rt.upload(buf, acc)
        rt.load_2d(MemType.ACC, 0, buf, 0, rows, 1, rows)
        rt.push_alu(UopKernel.alu(AluOp.REQ, [(0, m)], imm=REQ_M))
        rt.push_alu(UopKernel.alu(AluOp.REQ, [(0, p)], imm=REQ_P))
        rt.push_alu(UopKernel.alu(AluOp.REQ, pairs, imm=REQ))
        rt.push_alu(UopKernel.alu(AluOp.ADD, [(23, 22)]))
        rt.push_alu(UopKernel.alu(AluOp.REQ, [(0, p2)], imm=REQ_P))
        rt.push_alu(UopKernel.alu(AluOp.REQ, [(d, b) for d in range(24)], imm=REQ))
        rt.dep_push(Unit.COMPUTE, Unit.STORE)
        rt.dep_pop(Unit.COMPUTE, Unit.STORE)
        rt.store_2d(0, out, 0, rows, 1, rows)
        stats = rt.synchronize().stats
        return rt.download(out, "int8", (rows, lanes)), stats


# CXXRTL: slow (its own cold build of this config, about 5 min of CI); Verilator runs
# the same design in the fast tier
@pytest.mark.parametrize("backend", ["verilator", pytest.param("cxxrtl", marks=pytest.mark.slow)])
def test_req_program_on_the_rtl_equals_the_behavioral_model(backend):
    want, want_stats = _device_run("behavioral")
    got, stats = _device_run(backend)
    np.testing.assert_array_equal(got, want)
    assert stats["alu_counter"] == want_stats["alu_counter"] == 1 + 1 + 36 + 1 + 1 + 24
    assert len(np.unique(want)) > 20
