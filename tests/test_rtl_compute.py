"""RTL tests of the compute module: GEMM core, vector ALU and the Compute sequencer.

Every result is checked bit for bit against the small numpy reference below,
which follows the pinned semantics (p > q > k order, int32 wrap-around, OUT =
low 8 bits of each lane) and knows nothing of the RTL; random GEMM/ALU streams
are also checked against the behavioral model's datapath. Compute runs with
Python models around it: a DRAM behind both DMA ports, sync-read inp/wgt SRAMs,
an out SRAM write capture, and token queues whose fill level a test schedules.
Cycle counts check the throughput (one uop per cycle; see pipeline_overhead).
"""

from dataclasses import dataclass, field

import numpy as np
from alu_check import wrap32
import pytest
from amaranth.hdl import Elaboratable, Fragment
from amaranth.sim import Simulator

from vtakit.hw.alu import VectorAlu
from vtakit.hw.compute import Compute, write_stage
from vtakit.hw.config import VTAConfig, load_config
from vtakit.hw.gemm import GemmCore, Multiplier
from vtakit.hw.interfaces import ErrorCode
from vtakit.hw.isa import AluOp, MemType, Opcode, isa_for
from vtakit.sim.pysim import DramPortModel

TINY = VTAConfig.preset("tiny")


# ------------------------------------------------------------------ helpers

def pack(values, bits) -> int:
    """Lanes (any int array, lane 0 first) to one little-endian integer."""
    word = 0
    for i, v in enumerate(np.asarray(values).ravel()):
        word |= (int(v) & ((1 << bits) - 1)) << (bits * i)
    return word


def unpack(word, bits, lanes) -> np.ndarray:
    """One integer to ``lanes`` signed lanes of ``bits`` bits (int64)."""
    out = np.empty(lanes, dtype=np.int64)
    for i in range(lanes):
        v = (word >> (bits * i)) & ((1 << bits) - 1)
        out[i] = v - (1 << bits) if v >> (bits - 1) else v
    return out


def simulate(dut, testbench, *processes):
    sim = Simulator(dut)
    sim.add_clock(1e-6, if_exists=True)  # the ALU has no clock domain
    for process in processes:
        sim.add_process(process)
    sim.add_testbench(testbench)
    sim.run()


# ---------------------------------------------------------------- GEMM core

@pytest.mark.parametrize("kind", ["dsp", "lut"])
def test_multiplier_matches_python(kind):
    """Both kinds of product (a ``*`` for a DSP, the shift-and-add array for LUTs) equal
    Python's signed product, for every corner of the int8 range, after two stages."""
    dut = Multiplier(8, 8, kind)
    values = [-128, -127, -1, 0, 1, 2, 63, 127, -64, 85, -86]
    pairs = [(a, b) for a in values for b in values]

    async def testbench(ctx):
        for a, b in pairs:
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.en, 1)
            await ctx.tick()
            ctx.set(dut.en, 0)
            ctx.set(dut.a, 0)
            ctx.set(dut.en_product, 1)
            await ctx.tick()
            ctx.set(dut.en_product, 0)
            assert ctx.get(dut.p) == a * b, (a, b)

    simulate(dut, testbench)


@pytest.mark.parametrize("widths", [(3, 5), (5, 3), (4, 7)])
def test_lut_multiplier_every_product_of_odd_shapes(widths):
    """The LUT multiplier's adder tree with an odd number of rows at some level (5 and 7
    partial products) and a > b, a < b: every signed pair equals Python's product."""
    wa, wb = widths
    dut = Multiplier(wa, wb, "lut")
    pairs = [(a, b) for a in range(-2 ** (wa - 1), 2 ** (wa - 1))
             for b in range(-2 ** (wb - 1), 2 ** (wb - 1))]

    async def testbench(ctx):
        ctx.set(dut.en, 1)
        ctx.set(dut.en_product, 1)
        # Pipelined: the operands of one cycle are the product two cycles later.
        for k in range(len(pairs) + 1):
            if k < len(pairs):
                ctx.set(dut.a, pairs[k][0])
                ctx.set(dut.b, pairs[k][1])
            await ctx.tick()
            if k >= 1:
                a, b = pairs[k - 1]
                assert ctx.get(dut.p) == a * b, (a, b)

    simulate(dut, testbench)


class _Budget:
    """A platform that builds only ``dsp_budget`` GEMM products as DSPs."""
    family = None

    def __init__(self, n):
        self.dsp_budget = n


class _OnPlatform(Elaboratable):
    def __init__(self, dut, platform):
        self.dut, self.platform = dut, platform

    def elaborate(self, platform):
        return Fragment.get(self.dut, self.platform)


@pytest.mark.parametrize("preset,budget", [("tiny", None), ("4x8", None), ("tiny", 37)])
def test_gemm_core_matches_numpy(preset, budget):
    """Through the pipeline, with all products as DSPs or (a budget of 37) the rest in
    LUT multipliers."""
    cfg = VTAConfig.preset(preset)
    dut = GemmCore(cfg)
    rng = np.random.default_rng(1)
    cases = []
    for n in range(6):
        inp = rng.integers(-128, 128, (cfg.batch, cfg.block_in))
        wgt = rng.integers(-128, 128, (cfg.block_out, cfg.block_in))
        acc = rng.integers(-2**31, 2**31, (cfg.batch, cfg.block_out))
        if n == 0:   # extreme operands: every product is +2**14
            inp[:] = -128
            wgt[:] = -128
        if n == 1:   # accumulate across the int32 boundary in both directions
            acc[:] = 2**31 - 1
            acc[0, 0] = -2**31
            inp[:] = 127
            wgt[:] = 127
            wgt[0, :] = -128
        cases.append((inp, wgt, acc))

    async def testbench(ctx):
        for inp, wgt, acc in cases:
            ctx.set(dut.inp, pack(inp, 8))
            ctx.set(dut.wgt, pack(wgt, 8))
            ctx.set(dut.en, 1)
            await ctx.tick()
            # the product must come through the registered stages, which hold it while
            # no new operands enter
            ctx.set(dut.inp, 0)
            ctx.set(dut.en, 0)
            await ctx.tick().repeat(dut.latency)
            ctx.set(dut.acc, pack(acc, 32))
            expected = wrap32(acc + inp @ wgt.T)
            got = unpack(ctx.get(dut.result), 32, cfg.batch * cfg.block_out)
            np.testing.assert_array_equal(got, expected.ravel())

    simulate(dut if budget is None else _OnPlatform(dut, _Budget(budget)), testbench)
    assert dut.dsp_products == (budget or cfg.batch * cfg.block_out * cfg.block_in)


# ---------------------------------------------------------------------- ALU

def alu_reference(op, a, b, shift):
    a = np.asarray(a, dtype=np.int64)
    if op == AluOp.MIN:
        return np.minimum(a, b)
    if op == AluOp.MAX:
        return np.maximum(a, b)
    if op == AluOp.ADD:
        return wrap32(a + b)
    if shift >= 0:
        return a >> shift
    return wrap32((a << -shift) & 0xFFFFFFFF)


def test_alu_every_opcode():
    cfg = TINY
    lanes = cfg.batch * cfg.block_out
    dut = VectorAlu(cfg)
    rng = np.random.default_rng(2)
    edge = np.array([-2**31, 2**31 - 1, -1, 0, 1, 12345, -12345, 2**30], dtype=np.int64)
    cases = []
    for op in (AluOp.MIN, AluOp.MAX, AluOp.ADD):
        for _ in range(3):
            cases.append((op, rng.integers(-2**31, 2**31, lanes), rng.integers(-2**31, 2**31, lanes), 0))
        cases.append((op, edge[:lanes], edge[::-1][:lanes], 0))
        cases.append((op, edge[:lanes], edge[:lanes], 0))
    for shift in (0, 1, 5, 31, -1, -4, -31, 17, -17):
        cases.append((AluOp.SHR, edge[:lanes], np.zeros(lanes), shift))
        cases.append((AluOp.SHR, rng.integers(-2**31, 2**31, lanes), np.zeros(lanes), shift))

    async def testbench(ctx):
        for op, a, b, shift in cases:
            ctx.set(dut.op, op)
            ctx.set(dut.a, pack(a, 32))
            ctx.set(dut.b, pack(b, 32))
            ctx.set(dut.shift, shift)
            got = unpack(ctx.get(dut.result), 32, lanes)
            np.testing.assert_array_equal(got, alu_reference(op, a, b, shift),
                                          err_msg=f"{op!r} shift={shift}")

    simulate(dut, testbench)


# ------------------------------------------------------------- numpy reference

@dataclass
class RefState:
    """Reference compute state: uop words, acc (int64 lanes), out (int8 lanes)."""

    cfg: VTAConfig
    uop: np.ndarray
    acc: np.ndarray
    out: np.ndarray
    inp: np.ndarray
    wgt: np.ndarray
    out_written: set = field(default_factory=set)

    @classmethod
    def empty(cls, cfg, inp, wgt):
        lanes = cfg.batch * cfg.block_out
        return cls(cfg, np.zeros(cfg.uop_depth, np.int64), np.zeros((cfg.acc_depth, lanes), np.int64),
                   np.zeros((cfg.acc_depth, lanes), np.int64), inp, wgt)

    @staticmethod
    def check(index, depth):
        if index >= depth:
            raise IndexError(f"SRAM index {index} >= depth {depth}")

    def loop(self, f):
        uops = [isa_for(self.cfg).decode_uop(int(w)) for w in self.uop[f.uop_bgn:f.uop_end]]
        for p in range(f.iter_out):
            for q in range(f.iter_in):
                for u in uops:
                    yield p, q, u

    def execute(self, word, dram=b""):
        """Run one instruction word; returns False once it ran FINISH."""
        cfg = self.cfg
        f = isa_for(cfg).decode(word)
        if f.opcode == Opcode.FINISH:
            return False
        if f.opcode == Opcode.LOAD and f.x_size:
            if f.memory_type == MemType.UOP:
                for n in range(f.x_size):
                    addr = 4 * (f.dram_base + n)
                    self.uop[f.sram_base + n] = int.from_bytes(dram[addr:addr + 4], "little")
            else:   # ACC, padded 2-D
                eb = cfg.acc_elem_bytes
                x_total = f.x_pad_0 + f.x_size + f.x_pad_1
                row = f.sram_base
                rows = [None] * f.y_pad_0 + list(range(f.y_size)) + [None] * f.y_pad_1
                for r in rows:
                    for x in range(x_total):
                        val = np.zeros(self.acc.shape[1], np.int64)
                        if r is not None and f.x_pad_0 <= x < f.x_pad_0 + f.x_size:
                            addr = eb * (f.dram_base + r * f.x_stride + x - f.x_pad_0)
                            val = np.frombuffer(dram[addr:addr + eb], "<i4").astype(np.int64)
                        self.acc[row] = val
                        row += 1
        elif f.opcode == Opcode.GEMM:
            for p, q, u in self.loop(f):
                a = u.dst_idx + p * f.dst_factor_out + q * f.dst_factor_in
                self.check(a, cfg.acc_depth)
                if f.reset_reg:
                    self.acc[a] = 0
                    continue
                x = u.src_idx + p * f.src_factor_out + q * f.src_factor_in
                w = u.wgt_idx + p * f.wgt_factor_out + q * f.wgt_factor_in
                self.check(x, cfg.inp_depth)
                self.check(w, cfg.wgt_depth)
                prod = (self.inp[x].reshape(cfg.batch, cfg.block_in)
                        @ self.wgt[w].reshape(cfg.block_out, cfg.block_in).T)
                self.acc[a] = wrap32(self.acc[a] + prod.ravel())
                self.out[a] = wrap8(self.acc[a])
                self.out_written.add(a)
        elif f.opcode == Opcode.ALU:
            for p, q, u in self.loop(f):
                d = u.dst_idx + p * f.dst_factor_out + q * f.dst_factor_in
                s = u.src_idx + p * f.src_factor_out + q * f.src_factor_in
                self.check(d, cfg.acc_depth)
                if not f.use_imm:
                    self.check(s, cfg.acc_depth)
                b = np.full(self.acc.shape[1], f.imm) if f.use_imm else self.acc[s]
                self.acc[d] = alu_reference(f.alu_opcode, self.acc[d], b, f.imm)
                self.out[d] = wrap8(self.acc[d])
                self.out_written.add(d)
        return True


def wrap8(x):
    return ((np.asarray(x, dtype=np.int64) + 128) % 256) - 128


# ----------------------------------------------------------- compute bench

@dataclass
class TokenPort:
    """A token queue end seen by the testbench: tokens available (source) or room
    left (sink), changed by the testbench at given cycles, and a log of transfers."""

    level: int = 0
    schedule: dict = field(default_factory=dict)   # cycle -> new level
    log: list = field(default_factory=list)        # cycles of the transfers


@dataclass
class RunResult:
    cycles: int
    finish: list
    error: tuple
    acc: np.ndarray
    out: dict           # index -> (cycle of the last write, int8 lanes)
    out_log: list       # (cycle, index)
    gemm_count: int
    alu_count: int
    tokens: dict
    accepted: list      # cycle each command was accepted


class ComputeBench:
    """Compute plus Python models of everything around it.

    ``inp``/``wgt`` are the SRAM contents (int8 arrays, one row per element),
    ``dram`` the bytes behind both DMA ports; ``uop``/``acc`` optionally preload
    the internal SRAMs (else they start at zero).
    """

    def __init__(self, cfg, *, inp=None, wgt=None, dram=b""):
        from vtakit.hw.compute import Compute
        self.cfg = cfg
        rng = np.random.default_rng(7)
        self.inp = rng.integers(-128, 128, (cfg.inp_depth, cfg.batch * cfg.block_in)) \
            if inp is None else inp
        self.wgt = rng.integers(-128, 128, (cfg.wgt_depth, cfg.block_out * cfg.block_in)) \
            if wgt is None else wgt
        self.dram = bytes(dram)
        self.dut = Compute(cfg)

    def reference(self, insns, *, uop=None, acc=None):
        ref = RefState.empty(self.cfg, self.inp, self.wgt)
        if uop is not None:
            ref.uop[:len(uop)] = uop
        if acc is not None:
            ref.acc[:len(acc)] = acc
        ref.fault = None
        for n, word in enumerate(insns):
            try:
                if not ref.execute(word, self.dram):
                    break
            except IndexError:   # state stays as sequential execution left it
                ref.fault = n
                break
        return ref

    def run(self, insns, *, uop=None, acc=None, tokens=None, max_cycles=5000,
            dram_latency=1, watch=()):
        cfg, dut = self.cfg, self.dut
        lanes = cfg.batch * cfg.block_out
        # Sources start empty, sinks with room to spare, unless the test says otherwise.
        tokens = {name: TokenPort(**{"level": 0 if name in ("l2g", "s2g") else 10**6,
                                     **(tokens or {}).get(name, {})})
                  for name in ("l2g", "s2g", "g2l", "g2s")}
        out, out_log, finish, accepted = {}, [], [], []
        dram = np.frombuffer(self.dram, np.uint8)
        inp_words = [pack(r, 8) for r in self.inp]
        wgt_words = [pack(r, 8) for r in self.wgt]
        # Every process counts clock edges itself (1 = the first edge), so the cycle
        # numbers in the logs compare exactly, whatever order processes wake up in.

        def read_model(port, words):
            async def process(ctx):
                async for _, _, addr, en in ctx.tick().sample(port.addr, port.en):
                    if en:
                        ctx.set(port.data, words[addr])
            return process

        # with COMPUTE_OVERLAP the acc and out SRAMs are two banks (index top bit)
        half = cfg.acc_depth // 2

        def acc_row(n):
            if dut.overlap:
                return dut.acc_banks[n // half].data[n % half]
            return dut.acc_mem.data[n]

        def out_model(port, base):
            async def process(ctx):
                cycle = 0
                async for _, _, addr, data, en in ctx.tick().sample(port.addr, port.data,
                                                                   port.en):
                    cycle += 1
                    if en:
                        out[base + addr] = (cycle, unpack(data, 8, lanes))
                        out_log.append((cycle, base + addr))
            return process
        out_models = ([out_model(dut.out_wr, 0), out_model(dut.out_wr1, half)] if dut.overlap
                      else [out_model(dut.out_wr, 0)])

        def token_model(name, port, source):
            tp = tokens[name]
            async def process(ctx):
                cycle = 0
                ctx.set(port.valid if source else port.ready, tp.level > 0)
                async for _, _, valid, ready in ctx.tick().sample(port.valid, port.ready):
                    cycle += 1
                    if valid and ready:
                        tp.level -= 1
                        tp.log.append(cycle)
                    tp.level = tp.schedule.get(cycle, tp.level)
                    ctx.set(port.valid if source else port.ready, tp.level > 0)
            return process

        async def commands(ctx):
            cycle = 0
            for n, word in enumerate(insns):
                ctx.set(dut.cmd.valid, 1)
                ctx.set(dut.cmd.payload.insn, word)
                ctx.set(dut.cmd.payload.index, n)
                while True:
                    _, _, ready = await ctx.tick().sample(dut.cmd.ready)
                    cycle += 1
                    if ready:
                        accepted.append(cycle)
                        break
            ctx.set(dut.cmd.valid, 0)

        result = {}

        async def testbench(ctx):
            for n, w in enumerate(uop if uop is not None else []):
                ctx.set(dut.uop_mem.data[n], int(w))
            for n, row in enumerate(acc if acc is not None else []):
                ctx.set(acc_row(n), pack(row, 32))
            for cycle in range(1, max_cycles + 1):
                _, _, fin, err = await ctx.tick().sample(dut.finish, dut.error.valid)
                if fin:
                    finish.append(cycle)
                    break
                if err:
                    break
            result["cycles"] = cycle
            for _ in range(4):   # let pushes after FINISH settle
                await ctx.tick()
            result["error"] = (ctx.get(dut.error.valid), ctx.get(dut.error.code),
                               ctx.get(dut.error.index))
            result["acc"] = np.array([unpack(ctx.get(acc_row(n)), 32, lanes)
                                      for n in range(cfg.acc_depth)])
            result["gemm_count"] = ctx.get(dut.gemm_count)
            result["alu_count"] = ctx.get(dut.alu_count)

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        for proc in (read_model(dut.inp_rd, inp_words), read_model(dut.wgt_rd, wgt_words),
                     *out_models, token_model("l2g", dut.l2g, True),
                     token_model("s2g", dut.s2g, True), token_model("g2l", dut.g2l, False),
                     token_model("g2s", dut.g2s, False), 
                     DramPortModel(dram, cfg.bus_bytes, read_latency=dram_latency).process(
                         dut.uop_dma, None),
                     DramPortModel(dram, cfg.bus_bytes, read_latency=dram_latency).process(
                         dut.acc_dma, None),
                     commands, *watch):
            sim.add_process(proc)
        sim.add_testbench(testbench)
        sim.run()
        return RunResult(finish=finish, tokens=tokens, out=out,
                         out_log=out_log, accepted=accepted, **result)


# ------------------------------------------------------------ compute tests

def check_against_reference(bench, result, ref):
    """ACC bit for bit, and OUT: the same entries written, with the same lanes."""
    np.testing.assert_array_equal(result.acc, ref.acc)
    assert set(result.out) == ref.out_written
    for index, (_, lanes) in result.out.items():
        np.testing.assert_array_equal(lanes, ref.out[index], err_msg=f"OUT[{index}]")


def dram_image(cfg, *, uops=(), uop_base=0, acc_rows=(), acc_base=0, size=1 << 14):
    """DRAM bytes with ``uops`` at uop element ``uop_base`` and int32 ``acc_rows`` at
    acc element ``acc_base``."""
    image = bytearray(size)
    for n, w in enumerate(uops):
        image[4 * (uop_base + n):4 * (uop_base + n + 1)] = int(w).to_bytes(4, "little")
    eb = cfg.acc_elem_bytes
    for n, row in enumerate(acc_rows):
        image[eb * (acc_base + n):eb * (acc_base + n + 1)] = \
            np.asarray(row, dtype="<i4").tobytes()
    return bytes(image)


@pytest.mark.parametrize("dram_latency", [1, 6])
def test_compute_loads_then_two_loop_gemm(dram_latency):
    """LOAD UOP (unaligned), padded LOAD ACC, a reset GEMM, then a multi-uop
    two-loop GEMM accumulating on top of the loaded biases."""
    cfg = TINY
    isa = isa_for(cfg)
    rng = np.random.default_rng(11)
    lanes = cfg.batch * cfg.block_out
    uops = [isa.encode_uop(d, s, w) for d, s, w in [(0, 0, 0), (1, 1, 2), (2, 3, 1), (3, 2, 5)]]
    bias = rng.integers(-2**31, 2**31, (6, lanes))
    dram = dram_image(cfg, uops=uops, uop_base=3, acc_rows=bias, acc_base=5)
    bench = ComputeBench(cfg, dram=dram)
    insns = [
        isa.encode(Opcode.LOAD, memory_type=MemType.UOP, sram_base=10, dram_base=3,
                   y_size=1, x_size=4, x_stride=4),
        # 2 rows of 3 biases, padded to 4 rows x 5 elements at acc 40..59
        isa.encode(Opcode.LOAD, memory_type=MemType.ACC, sram_base=40, dram_base=5,
                   y_size=2, x_size=3, x_stride=3, y_pad_0=1, y_pad_1=1, x_pad_0=1, x_pad_1=1),
        isa.encode(Opcode.GEMM, reset_reg=1, uop_bgn=10, uop_end=14, iter_out=2, iter_in=3,
                   dst_factor_out=12, dst_factor_in=4),
        isa.encode(Opcode.GEMM, uop_bgn=10, uop_end=14, iter_out=3, iter_in=5,
                   dst_factor_out=20, dst_factor_in=4, src_factor_out=9, src_factor_in=2,
                   wgt_factor_out=11, wgt_factor_in=7),
        isa.encode(Opcode.FINISH),
    ]
    result = bench.run(insns, dram_latency=dram_latency)
    ref = bench.reference(insns)
    assert result.error == (0, 0, 0)
    assert len(result.finish) == 1
    assert result.gemm_count == 4 * 3 * 5
    check_against_reference(bench, result, ref)
    assert ref.acc[40:60].any() and ref.acc[0:8].any()   # the test touched what it meant to


@pytest.mark.parametrize("dram_latency", [1, 6])
def test_compute_overlaps_a_uop_load(dram_latency):
    """A LOAD UOP right after a GEMM without pushes is taken in the cycle the GEMM's
    last micro-op issues, and overwrites the micro-ops that GEMM ran while they drain;
    the next GEMM runs the new ones, and a LOAD UOP that pushes waits for the drain."""
    cfg = TINY
    isa = isa_for(cfg)
    rng = np.random.default_rng(12)
    old = [isa.encode_uop(d, s, w) for d, s, w in [(0, 0, 0), (1, 1, 2), (2, 3, 1)]]
    new = [isa.encode_uop(d, s, w) for d, s, w in [(3, 2, 4), (0, 5, 3), (1, 4, 6)]]
    bias = rng.integers(-2**20, 2**20, (8, cfg.batch * cfg.block_out))
    dram = dram_image(cfg, uops=old + new, uop_base=1, acc_rows=bias, acc_base=8)
    bench = ComputeBench(cfg, dram=dram)
    loop = dict(uop_bgn=0, uop_end=3, iter_out=2, iter_in=2, dst_factor_out=4,
                dst_factor_in=1, src_factor_out=3, src_factor_in=1, wgt_factor_out=2,
                wgt_factor_in=1)

    def load_uops(base, **flags):
        return isa.encode(Opcode.LOAD, memory_type=MemType.UOP, dram_base=base, y_size=1,
                          x_size=3, x_stride=3, **flags)

    insns = [
        load_uops(1),
        isa.encode(Opcode.LOAD, memory_type=MemType.ACC, dram_base=8, y_size=1, x_size=8,
                   x_stride=8),
        isa.encode(Opcode.GEMM, **loop),
        load_uops(4),                                   # overlapped: no pushes before it
        isa.encode(Opcode.GEMM, **loop),
        load_uops(1, push_next_dep=1),                  # overlapped, pushes after the drain
        isa.encode(Opcode.GEMM, **loop),
        isa.encode(Opcode.FINISH),
    ]
    r = bench.run(insns, dram_latency=dram_latency)
    ref = bench.reference(insns)
    assert r.error == (0, 0, 0) and r.gemm_count == 3 * 12
    check_against_reference(bench, r, ref)
    gaps = np.diff(r.accepted).tolist()
    assert gaps[2] == gaps[4] == 1 + 12, gaps        # dispatch + 12 issues, then the LOAD
    # the pushing LOAD's token follows the last write of the GEMM before it
    (push,) = r.tokens["g2s"].log
    assert push >= r.accepted[5] + write_stage(cfg) - 1, (push, r.accepted)


def test_compute_back_to_back_accumulate_hazards():
    """Uops that accumulate into the entry written by the previous one or two uops
    (distance 1 and 2, and across the q/p loop boundaries) lose no update."""
    cfg = TINY
    isa = isa_for(cfg)
    uops = [isa.encode_uop(d, s, w) for d, s, w in
            [(0, 0, 0), (0, 1, 1), (0, 2, 2),        # distance 1
             (1, 3, 3), (2, 4, 4), (1, 5, 5), (2, 6, 6),   # distance 2
             (3, 7, 7)]]
    bench = ComputeBench(cfg)
    insns = [
        # every (p, q) iteration hits the same entries again: dst factors are 0
        isa.encode(Opcode.GEMM, uop_bgn=0, uop_end=8, iter_out=3, iter_in=4,
                   src_factor_out=8, src_factor_in=1, wgt_factor_out=3, wgt_factor_in=5),
        # a single-uop loop accumulating into one entry every cycle
        isa.encode(Opcode.GEMM, uop_bgn=7, uop_end=8, iter_out=2, iter_in=9,
                   src_factor_out=1, src_factor_in=3, wgt_factor_in=1),
        isa.encode(Opcode.FINISH),
    ]
    acc = np.random.default_rng(3).integers(-2**31, 2**31, (4, cfg.batch * cfg.block_out))
    result = bench.run(insns, uop=uops, acc=acc)
    ref = bench.reference(insns, uop=uops, acc=acc)
    assert result.error == (0, 0, 0)
    check_against_reference(bench, result, ref)


def test_compute_alu_ops_and_reductions():
    """Every ALU opcode with immediates (incl. left shifts and shift 31) and with
    tensor operands, and reductions whose source is the entry just written."""
    cfg = TINY
    isa = isa_for(cfg)
    lanes = cfg.batch * cfg.block_out
    rng = np.random.default_rng(5)
    acc = rng.integers(-2**31, 2**31, (40, lanes))
    acc[1] = [2**31 - 1, -2**31, -1, 0, 1, 7, -7, 2**30][:lanes]
    # uop 0: dst 0..; uop 1: dst n, src n+16; uop 2: reduction dst 32 <- src 33
    uops = [isa.encode_uop(0, 0), isa.encode_uop(0, 16), isa.encode_uop(32, 33)]

    def alu(op, *, imm=0, use_imm=1, bgn=0, end=1, **loop):
        loop = {"iter_out": 1, "iter_in": 16, "dst_factor_in": 1, **loop}
        return isa.encode(Opcode.ALU, alu_opcode=op, use_imm=use_imm, imm=imm,
                          uop_bgn=bgn, uop_end=end, **loop)

    insns = [
        alu(AluOp.ADD, imm=-12345, iter_in=4),
        alu(AluOp.SHR, imm=-4, iter_in=3),
        alu(AluOp.SHR, imm=31, iter_out=2, iter_in=2, dst_factor_out=5),
        alu(AluOp.SHR, imm=3, iter_in=8),
        alu(AluOp.SHR, imm=-31, iter_in=2, dst_factor_in=9),
        alu(AluOp.MAX, imm=-100, iter_in=12),
        alu(AluOp.MIN, imm=77, iter_in=12),
        alu(AluOp.MIN, use_imm=0, bgn=1, end=2, iter_in=8, src_factor_in=1),
        alu(AluOp.MAX, use_imm=0, bgn=1, end=2, iter_in=8, src_factor_in=1),
        alu(AluOp.ADD, use_imm=0, bgn=1, end=2, iter_in=16, src_factor_in=1),
        # reductions: ACC[32] op= ACC[33+q] and ACC[32] += ACC[32] (source = the entry
        # the previous uop wrote), all back to back
        alu(AluOp.ADD, use_imm=0, bgn=2, end=3, iter_in=6, dst_factor_in=0, src_factor_in=1),
        alu(AluOp.MAX, use_imm=0, bgn=2, end=3, iter_in=6, dst_factor_in=0, src_factor_in=1),
        alu(AluOp.ADD, use_imm=0, iter_out=3, iter_in=2, dst_factor_in=0),  # ACC[0] += ACC[0]
        isa.encode(Opcode.FINISH),
    ]
    bench = ComputeBench(cfg)
    result = bench.run(insns, uop=uops, acc=acc)
    ref = bench.reference(insns, uop=uops, acc=acc)
    assert result.error == (0, 0, 0)
    assert result.alu_count == 4 + 3 + 4 + 8 + 2 + 12 + 12 + 8 + 8 + 16 + 6 + 6 + 6
    check_against_reference(bench, result, ref)


def test_compute_tokens_order_and_finish():
    """Pops happen before an instruction's first write, pushes after its last one,
    a missing token or a full queue stalls, and FINISH pulses once at the end."""
    cfg = TINY
    isa = isa_for(cfg)
    uops = [isa.encode_uop(d, s, w) for d, s, w in [(0, 0, 0), (1, 1, 1), (2, 2, 2)]]
    insns = [
        isa.encode(Opcode.GEMM, pop_prev_dep=1, push_next_dep=1, uop_bgn=0, uop_end=3,
                   iter_out=1, iter_in=4, dst_factor_in=3, src_factor_in=1, wgt_factor_in=2),
        isa.encode(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1, push_prev_dep=1),
        isa.encode(Opcode.ALU, pop_prev_dep=1, pop_next_dep=1, push_prev_dep=1,
                   push_next_dep=1, alu_opcode=AluOp.ADD, use_imm=1, imm=3, uop_bgn=0,
                   uop_end=3, iter_out=1, iter_in=2, dst_factor_in=3),
        # sync-only LOADs of any memory type are NOPs, even illegal ones
        isa.encode(Opcode.LOAD, memory_type=5, sram_base=7, dram_base=1, y_size=3),
        isa.encode(Opcode.FINISH),
        isa.encode(Opcode.ALU, alu_opcode=AluOp.ADD, use_imm=1, imm=1, uop_bgn=0, uop_end=1,
                   iter_out=1, iter_in=1),
    ]
    tokens = {"l2g": {"schedule": {30: 1, 100: 1}},
              "s2g": {"schedule": {80: 1, 90: 1}},
              "g2s": {"level": 1, "schedule": {150: 5}}}
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops, tokens=tokens)
    assert r.error == (0, 0, 0)
    l2g, s2g, g2l, g2s = (r.tokens[n].log for n in ("l2g", "s2g", "g2l", "g2s"))
    assert len(l2g) == 2 and len(s2g) == 2 and len(g2l) == 2 and len(g2s) == 2
    gemm_writes = [c for c, _ in r.out_log[:12]]
    alu_writes = [c for c, _ in r.out_log[12:]]
    assert len(r.out_log) == 12 + 6
    # A push shares the clock edge of the last write at the earliest (the consumer
    # sees the token one cycle later, after the write landed).
    assert 30 < l2g[0] < gemm_writes[0] and gemm_writes[-1] <= g2s[0]
    assert 80 < s2g[0] <= g2l[0] < 100       # the NOP: pop s2g, then push g2l
    assert l2g[1] == s2g[1] > 100            # both pops of the ALU in one cycle
    assert l2g[1] < alu_writes[0] and alu_writes[-1] <= min(g2l[1], g2s[1])
    assert g2s[1] > 150                      # g2s was full until cycle 150
    assert r.finish == [r.finish[0]] and r.finish[0] > g2s[1]
    # Compute does not run ahead of FINISH (fetch stops dispatching after it).
    assert len(r.accepted) < 6 or r.accepted[5] > r.finish[0]
    check_against_reference(bench, r, bench.reference(insns, uop=uops))


def pipeline_overhead(cfg):
    """Cycles an instruction with N uops takes beyond N, from its accept to the accept
    of the next command: dispatch, then the stages after S0 up to the write stage (the
    push and the next accept share the cycle of its last write)."""
    return 1 + write_stage(cfg)


@pytest.mark.parametrize("preset,kind", [("tiny", "gemm"), ("tiny", "gemm_reset"),
                                         ("tiny", "alu_imm"), ("tiny", "alu_tensor"),
                                         ("default+serial", "gemm")])
def test_compute_throughput_one_uop_per_cycle(preset, kind):
    """A 256-uop loop takes uops + a fixed pipeline/control overhead cycles (one compute
    lane: ``default+serial``; the ALU lane's timing is tests/test_rtl_overlap.py's)."""
    cfg = load_config(preset)
    isa = isa_for(cfg)
    uops = [isa.encode_uop(d, (3 * d) % 16, (5 * d) % 32) for d in range(16)]
    loop = dict(uop_bgn=0, uop_end=16, iter_out=4, iter_in=4, dst_factor_out=1,
                dst_factor_in=17, src_factor_out=2, src_factor_in=1)
    insn = {
        "gemm": isa.encode(Opcode.GEMM, wgt_factor_out=3, wgt_factor_in=1, **loop),
        "gemm_reset": isa.encode(Opcode.GEMM, reset_reg=1, **loop),
        "alu_imm": isa.encode(Opcode.ALU, alu_opcode=AluOp.ADD, use_imm=1, imm=-9, **loop),
        "alu_tensor": isa.encode(Opcode.ALU, alu_opcode=AluOp.MAX, **loop),
    }[kind]
    insns = [insn, isa.encode(Opcode.FINISH)]
    acc = np.random.default_rng(9).integers(-2**31, 2**31, (128, cfg.batch * cfg.block_out))
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops, acc=acc)
    n_uops = 16 * 4 * 4
    cycles = r.accepted[1] - r.accepted[0]
    print(f"\n{preset} {kind}: {n_uops} uops in {cycles} cycles = {n_uops / cycles:.3f} uops/cycle "
          f"(overhead {cycles - n_uops} cycles per instruction)")
    assert cycles <= n_uops + pipeline_overhead(cfg)
    check_against_reference(bench, r, bench.reference(insns, uop=uops, acc=acc))


def test_compute_overlaps_loops():
    """The next GEMM/ALU is taken in the cycle the last micro-op of one issues (N + 1
    cycles from accept to accept: only its dispatch cycle), with or without pushes (the
    queue has room), while one with a FINISH next, or an empty loop next wait for the
    drain (N + 1 + the write stage). Results stay
    those of sequential execution across the overlaps, with read-after-write at
    distance 1 and 2 between instructions: a GEMM then an ALU MAX reading the rows it
    just wrote, an immediate SHR of the same rows, a GEMM accumulating onto them."""
    cfg = VTAConfig.preset("tiny")
    isa = isa_for(cfg)
    # uops 0..3: (dst, src, wgt) rows 0..3; uops 4..7: ALU (dst 4+i, src i)
    uops = [isa.encode_uop(d, d, d) for d in range(4)] + \
        [isa.encode_uop(4 + d, d, 0) for d in range(4)]
    gemm = dict(uop_bgn=0, uop_end=4, iter_out=1, iter_in=1)
    alu = dict(uop_bgn=4, uop_end=8, iter_out=1, iter_in=1)
    insns = [
        isa.encode(Opcode.GEMM, **gemm),                                   # rows 0..3
        isa.encode(Opcode.ALU, alu_opcode=AluOp.MAX, **alu),               # 4+i max= i
        isa.encode(Opcode.ALU, alu_opcode=AluOp.SHR, use_imm=1, imm=3,
                   uop_bgn=0, uop_end=4, iter_out=1, iter_in=1),           # rows 0..3
        isa.encode(Opcode.GEMM, push_next_dep=1, **gemm),                  # a push: overlaps
        isa.encode(Opcode.GEMM, **gemm),
        isa.encode(Opcode.GEMM, uop_bgn=0, uop_end=0, iter_out=1, iter_in=1),   # empty
        isa.encode(Opcode.ALU, alu_opcode=AluOp.ADD, use_imm=1, imm=5, **alu),
        isa.encode(Opcode.FINISH),
    ]
    acc = np.random.default_rng(3).integers(-2**20, 2**20, (16, cfg.batch * cfg.block_out))
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops, acc=acc)
    gaps = np.diff(r.accepted).tolist()
    drain = pipeline_overhead(cfg)
    assert gaps == [4 + 1, 4 + 1, 4 + 1, 4 + 1, 4 + drain, 1, 4 + drain], gaps
    check_against_reference(bench, r, bench.reference(insns, uop=uops, acc=acc))


def _gemm_rows(isa, n, *, bgn=0, **flags):
    """A GEMM of ``n`` micro-ops (``uop_bgn`` ``bgn``), one loop iteration."""
    return isa.encode(Opcode.GEMM, uop_bgn=bgn, uop_end=bgn + n, iter_out=1, iter_in=1,
                      **flags)


def test_compute_push_travels_with_the_last_write():
    """A GEMM/ALU with push flags overlaps the next GEMM/ALU like one without (N + 1 from
    accept to accept) and pushes its token in the cycle its last write lands (its
    consumer sees the data): a GEMM pushing g2s, an ALU reading the rows it wrote and
    pushing g2l, a GEMM without pushes, a GEMM pushing g2s again, FINISH."""
    cfg = TINY
    isa = isa_for(cfg)
    uops = [isa.encode_uop(d, d, d) for d in range(4)] + \
        [isa.encode_uop(4 + d, d, 0) for d in range(4)]
    insns = [
        _gemm_rows(isa, 4, push_next_dep=1),
        isa.encode(Opcode.ALU, alu_opcode=AluOp.MAX, uop_bgn=4, uop_end=8, iter_out=1,
                   iter_in=1, push_prev_dep=1),
        _gemm_rows(isa, 4),
        _gemm_rows(isa, 4, push_next_dep=1),
        isa.encode(Opcode.FINISH),
    ]
    acc = np.random.default_rng(11).integers(-2**20, 2**20, (16, cfg.batch * cfg.block_out))
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops, acc=acc)
    assert np.diff(r.accepted).tolist() == [5, 5, 5, 4 + pipeline_overhead(cfg)]
    writes = [c for c, _ in r.out_log]
    assert len(writes) == 16
    assert r.tokens["g2s"].log == [writes[3], writes[15]]
    assert r.tokens["g2l"].log == [writes[7]]
    check_against_reference(bench, r, bench.reference(insns, uop=uops, acc=acc))


def test_compute_one_push_travels_per_queue():
    """Short loops pushing the same queue back to back: a token still travelling to it
    (and the cycle after it landed) makes the next pushing loop drain instead of
    overlapping; every token still comes with its loop's write."""
    cfg = TINY
    isa = isa_for(cfg)
    uops = [isa.encode_uop(d, d, d) for d in range(4)]
    insns = [_gemm_rows(isa, 1, bgn=d, push_next_dep=1) for d in range(4)] + \
        [isa.encode(Opcode.FINISH)]
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops)
    drain = pipeline_overhead(cfg)
    assert np.diff(r.accepted).tolist() == [2, 1 + drain, 2, 1 + drain]
    assert r.tokens["g2s"].log == [c for c, _ in r.out_log]
    check_against_reference(bench, r, bench.reference(insns, uop=uops))


@pytest.mark.parametrize("queue", ["push_next_dep", "push_prev_dep"])
def test_compute_pushing_loop_then_a_pushing_uop_load(queue):
    """A GEMM with a push flag overlaps a LOAD UOP that pushes the same queue (the GEMM's
    token travels with its last micro-op); the LOAD UOP's short DMA is done before that
    write lands, and its own token follows the GEMM's by a cycle at least, after it."""
    cfg = TINY
    isa = isa_for(cfg)
    uops = [isa.encode_uop(d, d, d) for d in range(4)]
    dram = dram_image(cfg, uops=uops)
    insns = [_gemm_rows(isa, 4, **{queue: 1}),
             isa.encode(Opcode.LOAD, memory_type=MemType.UOP, dram_base=0, y_size=1,
                        x_size=1, x_stride=1, **{queue: 1}),
             _gemm_rows(isa, 4), isa.encode(Opcode.FINISH)]
    bench = ComputeBench(cfg, dram=dram)
    r = bench.run(insns, uop=uops)
    name = "g2s" if queue == "push_next_dep" else "g2l"
    writes = [c for c, _ in r.out_log]
    log = r.tokens[name].log
    assert r.accepted[1] - r.accepted[0] == 5
    assert len(log) == 2 and log[0] == writes[3] and log[1] > log[0]
    check_against_reference(bench, r, bench.reference(insns, uop=uops))


@pytest.mark.parametrize("room", [0, 1])
def test_compute_push_into_a_full_queue_drains(room):
    """g2s has room for ``room`` tokens until cycle 90: a pushing loop overlaps only
    while its token has room (the first with room 1); the one without room drains and
    waits for it; no token is lost or early."""
    cfg = TINY
    isa = isa_for(cfg)
    uops = [isa.encode_uop(d, d, d) for d in range(8)]
    insns = [_gemm_rows(isa, 8, push_next_dep=1), _gemm_rows(isa, 8, push_next_dep=1),
             _gemm_rows(isa, 8), isa.encode(Opcode.FINISH)]
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops, tokens={"g2s": {"level": room, "schedule": {90: 5}}})
    writes = [c for c, _ in r.out_log]
    g2s = r.tokens["g2s"].log
    assert len(g2s) == 2 and g2s[1] > 90
    if room:
        assert g2s[0] == writes[7] and r.accepted[1] - r.accepted[0] == 9
    else:
        assert g2s[0] > 90 and r.accepted[1] > 90
    assert g2s[0] >= writes[7] and g2s[1] >= writes[15]
    check_against_reference(bench, r, bench.reference(insns, uop=uops))


@pytest.mark.parametrize("last", [False, True])
def test_compute_fault_after_an_overlapped_push(last):
    """The loop after a pushing one (overlapped) faults on a micro-op index: the token of
    the loop before it is pushed and the fault names the faulting loop; when the pushing
    loop's own last micro-op faults, no token is pushed."""
    cfg = TINY
    isa = isa_for(cfg)
    uops = [isa.encode_uop(d, d, d) for d in range(4)] + [isa.encode_uop(cfg.acc_depth - 1, 0, 0)]
    bad = isa.encode(Opcode.GEMM, uop_bgn=3, uop_end=5, iter_out=1, iter_in=2,
                     dst_factor_in=1)        # the second iteration's dst 0 + acc_depth
    insns = ([_gemm_rows(isa, 4, push_next_dep=1), bad] if not last else
             [_gemm_rows(isa, 4), isa.encode(Opcode.GEMM, uop_bgn=3, uop_end=5, iter_out=1,
                                             iter_in=2, dst_factor_in=1, push_next_dep=1)])
    insns += [_gemm_rows(isa, 4, push_next_dep=1), isa.encode(Opcode.FINISH)]
    acc = np.random.default_rng(12).integers(-2**20, 2**20, (16, cfg.batch * cfg.block_out))
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops, acc=acc, max_cycles=400)
    assert r.error == (1, ErrorCode.SRAM_OUT_OF_RANGE, 1)
    ref = bench.reference(insns, uop=uops, acc=acc)
    assert ref.fault == 1
    check_against_reference(bench, r, ref)
    writes = [c for c, _ in r.out_log]
    assert r.tokens["g2s"].log == ([] if last else [writes[3]])
    assert check_against_model(cfg, bench, r, insns, uops, acc) == (1, ErrorCode.SRAM_OUT_OF_RANGE)


def _error_cases(cfg):
    isa = isa_for(cfg)
    E = ErrorCode

    def alu(**f):
        return isa.encode(Opcode.ALU, **{"uop_bgn": 0, "uop_end": 4, "iter_out": 1,
                                         "iter_in": 1, "use_imm": 1, **f})

    def gemm(**f):
        return isa.encode(Opcode.GEMM, **{"uop_bgn": 0, "uop_end": 4, "iter_out": 1,
                                          "iter_in": 1, **f})

    def load(**f):
        return isa.encode(Opcode.LOAD, **{"y_size": 1, "x_size": 1, "x_stride": 1, **f})

    return {
        "alu_opcode_mul": (alu(alu_opcode=4), E.ILLEGAL_FIELD),
        "alu_opcode_7": (alu(alu_opcode=7, uop_end=0), E.ILLEGAL_FIELD),   # even if empty
        "alu_tensor_shr": (alu(alu_opcode=AluOp.SHR, use_imm=0), E.ILLEGAL_FIELD),
        "alu_shift_32": (alu(alu_opcode=AluOp.SHR, imm=32), E.ILLEGAL_FIELD),
        "alu_shift_-32": (alu(alu_opcode=AluOp.SHR, imm=-32), E.ILLEGAL_FIELD),
        "uop_end_before_bgn": (gemm(uop_bgn=5, uop_end=4), E.ILLEGAL_FIELD),
        "uop_end_past_depth": (gemm(uop_end=cfg.uop_depth + 1), E.ILLEGAL_FIELD),
        "load_uop_y_size": (load(memory_type=MemType.UOP, y_size=2), E.ILLEGAL_FIELD),
        "load_uop_pad": (load(memory_type=MemType.UOP, x_pad_1=1), E.ILLEGAL_FIELD),
        "load_uop_range": (load(memory_type=MemType.UOP, sram_base=cfg.uop_depth - 4,
                                x_size=5), E.SRAM_OUT_OF_RANGE),
        "load_acc_range": (load(memory_type=MemType.ACC, sram_base=cfg.acc_depth - 11,
                                x_size=2, y_size=2, x_pad_1=1, y_pad_0=2), E.SRAM_OUT_OF_RANGE),
        "load_out": (load(memory_type=MemType.OUT), E.ILLEGAL_MEMORY_TYPE),
        "load_mem7": (load(memory_type=7), E.ILLEGAL_MEMORY_TYPE),
        "store": (isa.encode(Opcode.STORE, memory_type=MemType.OUT, y_size=1, x_size=1),
                  E.ILLEGAL_OPCODE),
        "opcode_6": (6, E.ILLEGAL_OPCODE),
        # index range errors in the middle of a loop (uop dst 0..3, src 0..3, wgt 0..3)
        "gemm_dst": (gemm(iter_out=3, dst_factor_out=(cfg.acc_depth - 2) // 2),
                     E.SRAM_OUT_OF_RANGE),
        "gemm_reset_dst": (gemm(reset_reg=1, iter_in=3, dst_factor_in=cfg.acc_depth // 2 - 1),
                           E.SRAM_OUT_OF_RANGE),
        "gemm_src": (gemm(iter_out=2, iter_in=3, src_factor_in=cfg.inp_depth // 2 - 1),
                     E.SRAM_OUT_OF_RANGE),
        "gemm_wgt": (gemm(iter_out=4, wgt_factor_out=cfg.wgt_depth // 3), E.SRAM_OUT_OF_RANGE),
        "alu_src": (alu(alu_opcode=AluOp.ADD, use_imm=0, iter_in=3,
                        src_factor_in=cfg.acc_depth // 2 - 1), E.SRAM_OUT_OF_RANGE),
    }


OVERLAP = load_config("tiny+overlap")


@pytest.mark.parametrize("cfg,case", [pytest.param(TINY, case, id=case)
                                      for case in _error_cases(TINY)] + [
    # COMPUTE_OVERLAP registers the S1 range check (``s2_bad`` squashes S2's micro-op)
    pytest.param(OVERLAP, case, id=f"overlap-{case}")
    for case in ("gemm_dst", "gemm_reset_dst", "gemm_src", "gemm_wgt", "alu_src")])
def test_compute_errors_stop_cleanly(cfg, case):
    """A faulting instruction reports (code, index), runs nothing after it, and
    leaves the SRAMs as sequential execution left them before the fault."""
    isa = isa_for(cfg)
    bad, code = _error_cases(cfg)[case]
    uops = [isa.encode_uop(d, d, d) for d in range(4)]
    acc = np.random.default_rng(4).integers(-2**31, 2**31, (16, cfg.batch * cfg.block_out))
    insns = [
        isa.encode(Opcode.ALU, alu_opcode=AluOp.ADD, use_imm=1, imm=5, uop_bgn=0, uop_end=4,
                   iter_out=1, iter_in=1, push_next_dep=1),
        bad,
        isa.encode(Opcode.ALU, alu_opcode=AluOp.ADD, use_imm=1, imm=5, uop_bgn=0, uop_end=4,
                   iter_out=1, iter_in=2),
        isa.encode(Opcode.FINISH),
    ]
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops, acc=acc, max_cycles=400)
    assert r.error == (1, code, 1)
    assert r.finish == []
    ref = bench.reference(insns if code == ErrorCode.SRAM_OUT_OF_RANGE and "load" not in case
                          else insns[:1], uop=uops, acc=acc)
    if code == ErrorCode.SRAM_OUT_OF_RANGE and "load" not in case:
        assert ref.fault == 1    # the reference faults on the same instruction
    check_against_reference(bench, r, ref)
    assert r.tokens["g2s"].log and not r.tokens["g2l"].log
    if isinstance(bad, int) and bad & 7 in (Opcode.GEMM, Opcode.ALU):
        assert check_against_model(cfg, bench, r, insns[:2], uops, acc) == (1, code)


def check_against_model(cfg, bench, r, insns, uops, acc):
    """Run ``insns`` (up to a FINISH) on the behavioral model's datapath, from the SRAMs
    ``bench`` ran with, and assert that the RTL run ``r`` ended as the model did: its ACC,
    OUT and micro-op counters, and the same fault (code and instruction index) or none.
    Return the model's fault as ``(instruction index, code)``, or None."""
    from vtakit.sim.datapath import Counters, Fault, SRAMs
    isa = isa_for(cfg)
    lanes = cfg.batch * cfg.block_out
    model = SRAMs(cfg)
    model.inp[:] = bench.inp.reshape(model.inp.shape)
    model.wgt[:] = bench.wgt.reshape(model.wgt.shape)
    model.acc[:len(acc)] = acc.reshape((len(acc),) + model.acc.shape[1:])
    model.uop[:len(uops)] = uops
    counters, fault = Counters(), None
    for n, word in enumerate(insns):
        insn = isa.decode(word)
        if insn.opcode == Opcode.FINISH:
            break
        try:
            (model.gemm if insn.opcode == Opcode.GEMM else model.alu)(insn, counters)
        except Fault as f:
            fault = (n, f.code)
            break
    if fault is None:
        assert r.error == (0, 0, 0) and len(r.finish) == 1, r.error
    else:
        assert r.error == (1, fault[1], fault[0]) and r.finish == [], (r.error, fault)
    assert (r.gemm_count, r.alu_count) == (counters["gemm_counter"], counters["alu_counter"])
    np.testing.assert_array_equal(r.acc, model.acc.reshape(cfg.acc_depth, lanes))
    model_out = model.out.reshape(cfg.out_depth, lanes)
    for index in range(cfg.out_depth):
        got = r.out[index][1] if index in r.out else np.zeros(lanes)
        np.testing.assert_array_equal(got, model_out[index], err_msg=f"OUT[{index}]")
    return fault


def test_compute_empty_loops_still_sync():
    """uop_bgn == uop_end or a zero iteration count does nothing but honours the flags."""
    cfg = TINY
    isa = isa_for(cfg)
    insns = [
        isa.encode(Opcode.GEMM, pop_prev_dep=1, push_next_dep=1, uop_bgn=3, uop_end=3,
                   iter_out=2, iter_in=2, dst_factor_in=1),
        isa.encode(Opcode.GEMM, reset_reg=1, pop_next_dep=1, push_prev_dep=1, uop_bgn=0,
                   uop_end=2, iter_out=0, iter_in=2),
        isa.encode(Opcode.ALU, alu_opcode=AluOp.SHR, use_imm=1, imm=0, push_prev_dep=1,
                   uop_bgn=0, uop_end=2, iter_out=3, iter_in=0),
        isa.encode(Opcode.FINISH),
    ]
    acc = np.random.default_rng(6).integers(-2**31, 2**31, (4, cfg.batch * cfg.block_out))
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=[isa.encode_uop(n) for n in range(4)], acc=acc,
                  tokens={"l2g": {"level": 1}, "s2g": {"level": 1}})
    assert r.error == (0, 0, 0) and len(r.finish) == 1
    assert [len(r.tokens[n].log) for n in ("l2g", "s2g", "g2l", "g2s")] == [1, 1, 2, 1]
    assert r.out_log == [] and r.gemm_count == 0 and r.alu_count == 0
    np.testing.assert_array_equal(r.acc[:4], acc)


def test_compute_4x8_gemm_and_requantize():
    """BATCH 4: LOAD UOP, LOAD ACC (16-beat elements), GEMM, then the requantize
    chain ADD/SHR/MAX/MIN with immediates, against the numpy reference."""
    cfg = VTAConfig.preset("4x8")
    isa = isa_for(cfg)
    rng = np.random.default_rng(8)
    lanes = cfg.batch * cfg.block_out
    uops = [isa.encode_uop(d, s, w) for d, s, w in [(0, 0, 0), (1, 2, 1), (2, 1, 3)]]
    bias = rng.integers(-2**20, 2**20, (12, lanes))
    dram = dram_image(cfg, uops=uops, uop_base=1, acc_rows=bias, acc_base=2)
    bench = ComputeBench(cfg, dram=dram)
    loop = dict(uop_bgn=0, uop_end=3, iter_out=2, iter_in=2, dst_factor_out=6, dst_factor_in=3)

    def alu(op, imm):
        return isa.encode(Opcode.ALU, alu_opcode=op, use_imm=1, imm=imm, **loop)

    insns = [
        isa.encode(Opcode.LOAD, memory_type=MemType.UOP, dram_base=1, y_size=1, x_size=3,
                   x_stride=3),
        isa.encode(Opcode.LOAD, memory_type=MemType.ACC, dram_base=2, y_size=1, x_size=12,
                   x_stride=12),
        isa.encode(Opcode.GEMM, src_factor_out=4, src_factor_in=1, wgt_factor_out=5,
                   wgt_factor_in=2, **loop),
        alu(AluOp.ADD, 1 << 7), alu(AluOp.SHR, 8), alu(AluOp.MAX, -127), alu(AluOp.MIN, 127),
        isa.encode(Opcode.FINISH),
    ]
    r = bench.run(insns)
    ref = bench.reference(insns)
    assert r.error == (0, 0, 0) and len(r.finish) == 1
    assert r.gemm_count == 12 and r.alu_count == 48
    check_against_reference(bench, r, ref)
    assert np.abs(ref.acc[:12]).max() == 127    # the clip did clip something


def random_program(cfg, rng, n_insns):
    """Random legal GEMM/ALU instructions over 16 random uops, every index in range."""
    isa = isa_for(cfg)
    uops = [isa.encode_uop(int(rng.integers(0, 32)), int(rng.integers(0, 16)),
                           int(rng.integers(0, 16))) for _ in range(16)]
    insns = []
    for _ in range(n_insns):
        bgn = int(rng.integers(0, 16))
        loop = dict(uop_bgn=bgn, uop_end=int(rng.integers(bgn, 17)),
                    iter_out=int(rng.integers(0, 4)), iter_in=int(rng.integers(0, 4)),
                    dst_factor_out=int(rng.integers(0, 9)), dst_factor_in=int(rng.integers(0, 9)),
                    src_factor_out=int(rng.integers(0, 9)), src_factor_in=int(rng.integers(0, 9)))
        if rng.random() < 0.5:
            insns.append(isa.encode(Opcode.GEMM, reset_reg=int(rng.random() < 0.15),
                                    wgt_factor_out=int(rng.integers(0, 9)),
                                    wgt_factor_in=int(rng.integers(0, 9)), **loop))
        else:
            op = AluOp(int(rng.integers(0, 4)))
            use_imm = 1 if op == AluOp.SHR else int(rng.integers(0, 2))
            imm = int(rng.integers(-31, 32)) if op == AluOp.SHR else int(rng.integers(-2**15, 2**15))
            insns.append(isa.encode(Opcode.ALU, alu_opcode=op, use_imm=use_imm, imm=imm, **loop))
    return uops, insns + [isa.encode(Opcode.FINISH)]


@pytest.mark.parametrize("preset,seed", [("tiny", 0), ("tiny", 1), ("4x8", 2),
                                         ("default+serial", 3)])
def test_compute_random_programs_match_behavioral_model(preset, seed):
    """Random GEMM/ALU streams, RTL against the behavioral model's datapath."""
    cfg = load_config(preset)
    rng = np.random.default_rng(seed)
    uops, insns = random_program(cfg, rng, 40)
    acc = rng.integers(-2**31, 2**31, (80, cfg.batch * cfg.block_out))
    bench = ComputeBench(cfg)
    r = bench.run(insns, uop=uops, acc=acc, max_cycles=20_000)
    assert check_against_model(cfg, bench, r, insns, uops, acc) is None
