"""The compute module's streamed LOAD UOP (config key ``UOP_STREAM``, ``tiny+uopstream``):
a LOAD UOP without push flags starts its DMA and the module goes on with the commands after
it; a GEMM/ALU runs once the micro-ops it reads are written (``hw/compute.py``).

Whole devices on Verilator against the behavioral model, bit for bit (stored rows, counters,
faults), on ``tiny+uopstream`` (one compute lane) and ``tiny+overlap+uopstream`` (the ALU
lane): GEMMs right behind the LOAD UOP reading its first and its last micro-ops, an ALU-lane
instruction reading streamed micro-ops, a LOAD UOP over micro-ops an older GEMM or lane ALU
still reads, two LOAD UOPs back to back, a LOAD ACC and FINISH behind a streaming LOAD UOP,
faults behind it (a micro-op out of range, an illegal field, a LOAD UOP out of range that
never streams), push flags (a LOAD UOP that pushes is not streamed; a GEMM that pushes
right behind one). The directed kernels take fewer cycles than on the same config without
the key (so a silently disabled stream fails). Random programs (sim/fuzz_gen) on both
configs, and a compiled model on ``default+requant2+uopstream`` (slow).
"""

import numpy as np
import pytest

from vtakit.hw.config import load_config
from vtakit.hw.isa import AluOp, MemType, Opcode, isa_for

from test_rtl_overlap import ISA, Program

US = load_config("tiny+uopstream")
USOV = load_config("tiny+overlap+uopstream")
#: the same config without the key
BASE = {US: load_config("tiny"), USOV: load_config("tiny+overlap")}
HALF = US.acc_depth // 2
N = 320             # micro-ops of the streamed kernel (160 beats of the 64-bit bus)


def check(p, config, label=""):
    """``p`` on Verilator equals the behavioral model on ``config``; returns the cycles."""
    want = p.run(config, "behavioral")
    got = p.run(config, "verilator")
    assert got[3] == want[3], (label, got[3], want[3])
    assert got[0] == want[0], label
    if want[1]:
        assert got[1] == want[1], label
    if want[3] is None and p.stores:
        assert len(set(want[0])) > 4, "the stored rows should vary"
    return got[2]


def faster(p, config, label=""):
    """``p`` equals the model with the key and without it, and takes fewer cycles with it."""
    cycles = check(p, config, label)
    base = check(p, BASE[config], label)
    assert cycles < base, (label, cycles, base)
    return cycles, base


def data_loads(p):
    """ACC (every row), INP and WGT, the WGT load pushing to the compute module, whose
    empty GEMM takes the token (so the LOAD UOP after it does not hold the DRAM read port
    before the inputs are in)."""
    p.load(MemType.ACC, 0, 0, US.acc_depth)
    p.load(MemType.INP, 0, 0, 64)
    p.load(MemType.WGT, 0, 0, 16, push_next_dep=1)
    p.gemm(0, ((1, 0, 0, 0), (1, 0, 0, 0)), n_uops=0, pop_prev_dep=1)


def fill(p, n, rng, rows=HALF - 64):
    """``n`` micro-ops of random in-range indexes (a kernel's body nobody reads)."""
    for _ in range(n):
        p.uop(int(rng.integers(0, rows)), int(rng.integers(0, 64)), int(rng.integers(0, 16)))


def kernel(p, rng, *, at=0):
    """A kernel of N micro-ops at uop SRAM row ``at`` (DRAM row ``len(p.uops)``): a reset
    micro-op, a GEMM micro-op, the body, and three micro-ops at its end. Returns the
    DRAM row of its first micro-op and the SRAM rows of the five it names."""
    first = len(p.uops)
    p.uop(0)                    # reset rows 0..
    p.uop(0, 0, 0)              # accumulate rows 0.. (src, wgt advance)
    fill(p, N - 5, rng)
    p.uop(40, 3, 2)             # the last three: a GEMM, an ALU (tensor), an ALU (imm)
    p.uop(8, HALF - 8)
    p.uop(0)
    return first, [at, at + 1, at + N - 3, at + N - 2, at + N - 1]


def first_and_last(config, seed=1):
    """A streamed kernel: GEMMs reading its first micro-ops right behind the LOAD UOP,
    then a GEMM and ALUs reading its last ones."""
    rng = np.random.default_rng(seed)
    p = Program(seed)
    d, (r, g, last_g, last_a, last_e) = kernel(p, rng)
    data_loads(p)
    p.load(MemType.UOP, 0, d, N)
    p.gemm(r, ((48, 1, 0, 0), (1, 0, 0, 0)), reset=True)
    p.gemm(g, ((48, 1, 1, 0), (4, 0, 1, 1)))
    p.gemm(last_g, ((8, 1, 1, 0), (1, 0, 0, 0)))
    p.alu(AluOp.ADD, last_a, ((1, 0, 0), (48, 1, 0)))
    p.alu(AluOp.SHR, last_e, ((1, 0, 0), (48, 1, 0)), imm=3, push_next_dep=1)
    p.store(0, 48, pop_prev_dep=1, push_prev_dep=1)
    p.finish(pop_next_dep=1)
    return p


@pytest.mark.parametrize("config", [US, USOV], ids=["tiny", "overlap"])
def test_gemms_read_the_first_and_last_streamed_micro_ops(config, capsys):
    cycles, base = faster(first_and_last(config), config, "first_and_last")
    with capsys.disabled():
        print(f"\n  first/last kernel: {BASE[config].name} {base} cycles, "
              f"+uopstream {cycles} cycles")


def test_lane_alus_read_streamed_micro_ops():
    """ALU-lane instructions (one micro-op, rows in one bank) right behind the LOAD UOP,
    reading its first and its last micro-ops, beside GEMMs of the other bank."""
    rng = np.random.default_rng(3)
    p = Program(3)
    first = len(p.uops)
    p.uop(0, HALF - 8)          # lane: ADD bias row into rows 0..
    p.uop(HALF)                 # GEMM reset of bank 1
    p.uop(HALF, 0, 0)
    fill(p, N - 5, rng)
    p.uop(0)                    # lane: SHR of rows 0..
    p.uop(HALF + 40, 5, 3)      # GEMM into bank 1
    data_loads(p)
    p.load(MemType.UOP, 0, first, N)
    p.alu(AluOp.ADD, 0, ((1, 0, 0), (40, 1, 0)))
    p.gemm(1, ((40, 1, 0, 0), (1, 0, 0, 0)), reset=True)
    p.gemm(2, ((40, 1, 1, 0), (4, 0, 1, 1)))
    p.alu(AluOp.SHR, N - 2, ((1, 0, 0), (40, 1, 0)), imm=2)
    p.gemm(N - 1, ((8, 1, 1, 0), (1, 0, 0, 0)))
    p.alu(AluOp.MAX, N - 2, ((1, 0, 0), (40, 1, 0)), imm=0, push_next_dep=1)
    p.store(0, 40, pop_prev_dep=1)
    p.store(HALF, 48, push_prev_dep=1)
    p.finish(pop_next_dep=1)
    faster(p, USOV, "lane")


@pytest.mark.parametrize("config", [US, USOV], ids=["tiny", "overlap"])
def test_load_uop_over_micro_ops_an_older_instruction_still_reads(config):
    """A long multi-micro-op GEMM over rows 0..9, then a LOAD UOP rewriting those rows
    (issued while its last micro-ops drain), then a GEMM reading the new ones; with the
    lane, a long lane ALU whose micro-op row the next LOAD UOP rewrites while it runs."""
    p = Program(4)
    old = [p.uop(i * 3, i, i) for i in range(10)]
    new = [p.uop(100 + i, 20 + i, 8 + i % 5) for i in range(10)]
    e_old, e_new = p.uop(HALF + 2), p.uop(HALF + 100)
    data_loads(p)
    p.load(MemType.UOP, 0, old[0], 10)
    p.load(MemType.UOP, 20, e_old, 1)
    p.gemm(0, ((8, 30, 1, 0), (2, 1, 0, 1)), n_uops=10)
    p.load(MemType.UOP, 0, new[0], 10)
    p.gemm(0, ((4, 10, 0, 1), (1, 0, 0, 0)), n_uops=10)
    p.alu(AluOp.SHR, 20, ((4, 40, 0), (40, 1, 0)), imm=1)      # bank 1: the lane's
    p.load(MemType.UOP, 20, e_new, 1)
    p.alu(AluOp.ADD, 20, ((1, 0, 0), (8, 1, 0)), imm=5)
    p.gemm(0, ((2, 10, 1, 0), (1, 0, 0, 0)), n_uops=10, push_next_dep=1)
    p.store(0, 140, pop_prev_dep=1)
    p.store(HALF, 170, push_prev_dep=1)
    p.finish(pop_next_dep=1)
    check(p, config, "war")


@pytest.mark.parametrize("config", [US, USOV], ids=["tiny", "overlap"])
def test_two_load_uops_back_to_back(config):
    """Two streamed LOAD UOPs one behind the other into disjoint rows, then into the same
    rows (the second wins), GEMMs reading both."""
    rng = np.random.default_rng(5)
    p = Program(5)
    a, (r, g, *_) = kernel(p, rng)
    b = len(p.uops)
    p.uop(60, 7, 3)
    fill(p, 50, rng)
    p.uop(70, 2, 9)
    c = p.uop(90, 1, 1)
    data_loads(p)
    p.load(MemType.UOP, 0, a, N)
    p.load(MemType.UOP, N, b, 52)
    p.gemm(N + 51, ((4, 1, 1, 0), (1, 0, 0, 0)))
    p.gemm(r, ((48, 1, 0, 0), (1, 0, 0, 0)), reset=True)
    p.gemm(N, ((4, 1, 1, 0), (1, 0, 0, 0)))
    p.load(MemType.UOP, N, c, 1)
    p.load(MemType.UOP, N, b, 1)
    p.gemm(g, ((48, 1, 1, 0), (2, 0, 1, 1)))
    p.gemm(N, ((4, 1, 1, 0), (2, 0, 1, 1)), push_next_dep=1)
    p.store(0, 100, pop_prev_dep=1, push_prev_dep=1)
    p.finish(pop_next_dep=1)
    check(p, config, "back_to_back")


@pytest.mark.parametrize("config", [US, USOV], ids=["tiny", "overlap"])
def test_load_acc_and_finish_behind_a_streaming_load_uop(config):
    """A LOAD ACC right behind a streaming LOAD UOP (it runs beside it), a GEMM reading a
    micro-op of the stream and the rows the LOAD ACC wrote; a LOAD UOP the program ends
    with, FINISH right behind it."""
    rng = np.random.default_rng(6)
    p = Program(6)
    a, (r, g, last_g, last_a, _) = kernel(p, rng)
    data_loads(p)
    p.load(MemType.UOP, 0, a, N)
    p.load(MemType.ACC, 0, 7, 60)
    p.gemm(last_g, ((8, 1, 1, 0), (1, 0, 0, 0)))
    p.alu(AluOp.ADD, last_a, ((1, 0, 0), (48, 1, 0)), push_next_dep=1)
    p.store(0, 60, pop_prev_dep=1, push_prev_dep=1)
    p.load(MemType.UOP, 0, a, N)
    p.finish(pop_next_dep=1)
    check(p, config, "acc_finish")


def _fault_program(kind):
    rng = np.random.default_rng(7)
    p = Program(7)
    a, (r, g, last_g, last_a, last_e) = kernel(p, rng)
    data_loads(p)
    p.load(MemType.UOP, 0, a, N)
    p.gemm(r, ((40, 1, 0, 0), (1, 0, 0, 0)), reset=True)
    if kind == "uop_out_of_range":      # its 13th micro-op writes past the acc SRAM
        p.gemm(last_g, ((20, US.acc_depth // 12 - 3, 1, 0), (1, 0, 0, 0)))
    elif kind == "illegal_field":       # uop_end past the uop SRAM
        p.words.append(ISA.encode(Opcode.ALU, alu_opcode=int(AluOp.ADD), use_imm=1, imm=1,
                                  uop_bgn=0, uop_end=US.uop_depth + 1, iter_out=1,
                                  iter_in=1))
    elif kind == "load_uop_out_of_range":   # never streams: the range check fails first
        p.load(MemType.UOP, US.uop_depth - 4, a, 8)
    p.alu(AluOp.SHR, last_e, ((1, 0, 0), (40, 1, 0)), imm=1, push_next_dep=1)
    p.store(0, 40, pop_prev_dep=1, push_prev_dep=1)
    p.finish(pop_next_dep=1)
    return p


@pytest.mark.parametrize("kind", ["uop_out_of_range", "illegal_field",
                                  "load_uop_out_of_range"])
def test_faults_behind_a_streaming_load_uop(kind):
    """The error shows once the streamed micro-ops are written (the model's state)."""
    p = _fault_program(kind)
    assert p.run(US, "behavioral")[3] is not None
    check(p, US, kind)


@pytest.mark.parametrize("config", [US, USOV], ids=["tiny", "overlap"])
def test_push_flags_around_a_load_uop(config):
    """A LOAD UOP with a push flag (not streamed: it pushes when its micro-ops are
    written), then a GEMM with a push flag right behind a streamed LOAD UOP."""
    rng = np.random.default_rng(8)
    p = Program(8)
    a, (r, g, last_g, last_a, last_e) = kernel(p, rng)
    b = len(p.uops)
    p.uop(200, 9, 4)
    fill(p, 40, rng)
    data_loads(p)
    p.load(MemType.UOP, 0, a, N)
    p.gemm(r, ((48, 1, 0, 0), (1, 0, 0, 0)), reset=True)
    p.gemm(g, ((48, 1, 1, 0), (4, 0, 1, 1)))
    p.alu(AluOp.SHR, last_e, ((1, 0, 0), (48, 1, 0)), imm=2, push_next_dep=1)
    p.store(0, 48, pop_prev_dep=1, push_prev_dep=1)
    # waits for the store (its rows are read), pushes to it when its micro-ops are in
    p.load(MemType.UOP, N, b, 41, pop_next_dep=1, push_next_dep=1)
    p.store(0, 48, pop_prev_dep=1)
    p.load(MemType.UOP, 0, a, N)
    p.gemm(N, ((8, 1, 1, 0), (1, 0, 0, 0)), push_next_dep=1)
    p.store(200, 8, pop_prev_dep=1, push_prev_dep=1)
    p.finish(pop_next_dep=1)
    check(p, config, "push")


def _random_stream(seed, cfg):
    """Random LOAD UOPs (mostly without push flags, of up to 60 micro-ops over rows
    0..79, so the loops' ranges meet the streamed ones at every offset), LOAD ACCs, and
    GEMM/ALU loops over those rows, with push flags; the DRAM image they read."""
    from test_rtl_compute import dram_image
    isa = isa_for(cfg)
    rng = np.random.default_rng(seed)
    lanes = cfg.batch * cfg.block_out
    uops = [isa.encode_uop(int(rng.integers(0, 2)) * HALF + int(rng.integers(0, 24)),
                           int(rng.integers(0, 16)), int(rng.integers(0, 16)))
            for _ in range(200)]
    bias = rng.integers(-2**20, 2**20, (64, lanes))
    dram = dram_image(cfg, uops=uops, acc_rows=bias, acc_base=256)
    insns = []
    for _ in range(30):
        r = rng.random()
        flags = dict(push_prev_dep=int(rng.random() < 0.1), push_next_dep=int(rng.random() < 0.1))
        if r < 0.25:
            n = int(rng.integers(1, 61))
            at = int(rng.integers(0, 80 - n + 1)) if n < 80 else 0
            insns.append(isa.encode(Opcode.LOAD, memory_type=MemType.UOP, sram_base=at,
                                    dram_base=int(rng.integers(0, 200 - n)), y_size=1,
                                    x_size=n, x_stride=n,
                                    **(flags if rng.random() < 0.2 else {})))
        elif r < 0.32:
            n = int(rng.integers(1, 16))
            insns.append(isa.encode(Opcode.LOAD, memory_type=MemType.ACC,
                                    sram_base=int(rng.integers(0, 2)) * HALF
                                    + int(rng.integers(0, 40)),
                                    dram_base=256 + int(rng.integers(0, 48)), y_size=1,
                                    x_size=n, x_stride=n, **flags))
        else:
            bgn = int(rng.integers(0, 80))
            loop = dict(uop_bgn=bgn, uop_end=min(80, bgn + int(rng.integers(1, 5))),
                        iter_out=int(rng.integers(1, 4)), iter_in=int(rng.integers(1, 4)),
                        dst_factor_out=int(rng.integers(0, 9)),
                        dst_factor_in=int(rng.integers(0, 4)),
                        src_factor_out=int(rng.integers(0, 9)),
                        src_factor_in=int(rng.integers(0, 4)), **flags)
            if rng.random() < 0.5:
                insns.append(isa.encode(Opcode.GEMM, reset_reg=int(rng.random() < 0.15),
                                        wgt_factor_out=int(rng.integers(0, 9)),
                                        wgt_factor_in=int(rng.integers(0, 4)), **loop))
            else:
                op = AluOp(int(rng.integers(0, 4)))
                imm = (int(rng.integers(-8, 9)) if op == AluOp.SHR
                       else int(rng.integers(-999, 999)))
                insns.append(isa.encode(Opcode.ALU, alu_opcode=op, use_imm=int(
                    op == AluOp.SHR or rng.random() < 0.5), imm=imm, **loop))
    insns.append(isa.encode(Opcode.FINISH))
    return insns, dram


@pytest.mark.parametrize("config", [US, USOV], ids=["tiny", "overlap"])
@pytest.mark.parametrize("seed,latency", [(1, 1), (2, 6)])
def test_random_streams_on_the_compute_module(config, seed, latency):
    """The compute module alone (the Amaranth simulator, test_rtl_compute's bench): random
    streams of LOAD UOPs, LOAD ACCs and loops reading the streamed rows equal the
    reference, and take fewer cycles than without the key; ``main_idle`` (which a LOAD
    ACC, FINISH and a pushing NOP behind a stream wait on) equals its definition."""
    from test_rtl_compute import ComputeBench, check_against_reference
    insns, dram = _random_stream(seed, config)
    cycles = {}
    for cfg in (config, BASE[config]):
        bench = ComputeBench(cfg, dram=dram)
        bench.dut.probe_main_idle = True
        seen = []

        async def watch(ctx, dut=bench.dut, seen=seen):
            async for _, _, reg, now, err in ctx.tick().sample(
                    dut.main_idle_reg, dut.main_idle_now, dut.error.valid):
                assert err or reg == now
                seen.append(now)

        r = bench.run(insns, max_cycles=20_000, dram_latency=latency,
                      watch=[watch] if cfg.uop_stream or cfg.compute_overlap else [])
        ref = bench.reference(insns)
        assert r.error == (0, 0, 0) and len(r.finish) == 1, r.error
        check_against_reference(bench, r, ref)
        cycles[cfg.uop_stream] = r.cycles
    assert cycles[1] < cycles[0], cycles


@pytest.mark.parametrize("latency", [1, 2, 3, 4])
def test_load_acc_behind_a_stream_waits_for_the_older_writes(latency):
    """GEMM, a streamed LOAD UOP taken as its last micro-op issues, then a LOAD ACC (or a
    FINISH) right behind: the LOAD ACC writes the GEMM's rows after the GEMM's writes
    landed (the acc write port is the GEMM lane's while micro-ops drain), FINISH pulses
    in the cycle of the last one at the earliest (it lands at that edge); the Amaranth
    simulator, at DRAM latencies that could meet them."""
    from test_rtl_compute import ComputeBench, check_against_reference, dram_image
    isa = isa_for(US)
    rng = np.random.default_rng(latency)
    uops = [isa.encode_uop(i, i, i) for i in range(8)]
    dram = dram_image(US, uops=uops, uop_base=0,
                      acc_rows=rng.integers(-2**20, 2**20, (16, US.block_out)), acc_base=64)
    gemm = isa.encode(Opcode.GEMM, uop_bgn=0, uop_end=8, iter_out=1, iter_in=1)
    load_uop = isa.encode(Opcode.LOAD, memory_type=MemType.UOP, sram_base=0, dram_base=0,
                          y_size=1, x_size=8, x_stride=8)
    load_acc = isa.encode(Opcode.LOAD, memory_type=MemType.ACC, sram_base=0, dram_base=64,
                          y_size=1, x_size=8, x_stride=8)
    one_uop = isa.encode(Opcode.LOAD, memory_type=MemType.UOP, sram_base=7, dram_base=7,
                         y_size=1, x_size=1, x_stride=1)     # its stream ends early
    finish = isa.encode(Opcode.FINISH)
    for insns in ([load_uop, gemm, load_uop, load_acc, finish],
                  [load_uop, gemm, one_uop, load_acc, finish],
                  [load_uop, gemm, load_uop, finish], [load_uop, gemm, one_uop, finish]):
        bench = ComputeBench(US, dram=dram)
        r = bench.run(insns, dram_latency=latency)
        assert r.error == (0, 0, 0) and len(r.finish) == 1
        check_against_reference(bench, r, bench.reference(insns))
        assert max(c for c, _ in r.out_log) <= r.finish[0], (r.out_log, r.finish)


@pytest.mark.parametrize("name,count", [
    ("tiny+uopstream", 15), ("tiny+overlap+uopstream", 15),
    pytest.param("tiny+uopstream", 150, marks=pytest.mark.slow),
    pytest.param("tiny+overlap+uopstream", 150, marks=pytest.mark.slow),
    pytest.param("tiny+requant2+overlap+uopstream", 150, marks=pytest.mark.slow),
    pytest.param("tiny+requant+uopstream", 150, marks=pytest.mark.slow),
])
def test_fuzz_campaign_finds_no_difference(tmp_path, name, count):
    """Random legal programs (sim/fuzz_gen: LOAD UOPs and the loops reading them, faults,
    tokens): Verilator equals the model (the slow campaigns are the ones the key was
    checked with, seed 31)."""
    from vtakit.sim.fuzz import fuzz
    config = load_config(name)
    report = fuzz(config, ["behavioral", "verilator"], count, 21 if count < 100 else 31,
                  out_dir=tmp_path, progress=False)
    assert report.programs == count and report.instructions > 10 * count
    assert not report.mismatches, report.mismatches[0].description


@pytest.mark.slow
def test_compiled_model_on_default_requant2_uopstream_equals_the_model(capsys):
    """anomaly_detection compiled for ``default+requant2+uopstream`` (the same instruction
    stream as for ``default+requant2``): Verilator equals the behavioral model, in no more
    cycles than without the key (35,110 against 35,112)."""
    from pathlib import Path

    import vtakit
    from vtakit.compiler.frontend import from_tflite
    from vtakit.testing import model_inputs
    from vtakit.tools.profile import profile_model
    path = Path(__file__).parent / "data" / "mltk" / "anomaly_detection.tflite"
    x = model_inputs(from_tflite(path)["main"].params[0].type_annotation)[0]
    cycles = {}
    for name in ("default+requant2+uopstream", "default+requant2"):
        exe = vtakit.compile(path, config=name)
        want = exe.run_named([x])
        got, rows = profile_model(exe, [x], "verilator")
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=name)
        cycles[name] = sum(r.cycles for r in rows if r.engine == "VTA")
    with capsys.disabled():
        print(f"\n  anomaly_detection: {cycles}")
    # (the model gains 2 cycles: its layers start with a LOAD ACC behind the LOAD UOP)
    assert cycles["default+requant2+uopstream"] <= cycles["default+requant2"]
