"""RTL tests of the compute module: GEMM core, vector ALU and the Compute sequencer.

Every result is checked bit for bit against the small numpy reference below,
which follows the pinned semantics (p > q > k order, int32 wrap-around, OUT =
low 8 bits of each lane) and knows nothing of the RTL.
"""

from dataclasses import dataclass, field

import numpy as np
import pytest
from amaranth.sim import Simulator

from vtakit.hw.alu import VectorAlu
from vtakit.hw.config import VTAConfig
from vtakit.hw.gemm import GemmCore
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


def wrap32(x):
    return ((np.asarray(x, dtype=np.int64) + 2**31) % 2**32) - 2**31


def simulate(dut, testbench, *processes):
    sim = Simulator(dut)
    sim.add_clock(1e-6, if_exists=True)  # the ALU has no clock domain
    for process in processes:
        sim.add_process(process)
    sim.add_testbench(testbench)
    sim.run()


# ---------------------------------------------------------------- GEMM core

@pytest.mark.parametrize("preset", ["tiny", "4x8"])
def test_gemm_core_matches_numpy(preset):
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
            await ctx.tick()
            ctx.set(dut.inp, 0)   # the product must come from the registered stage
            ctx.set(dut.acc, pack(acc, 32))
            expected = wrap32(acc + inp @ wgt.T)
            got = unpack(ctx.get(dut.result), 32, cfg.batch * cfg.block_out)
            np.testing.assert_array_equal(got, expected.ravel())

    simulate(dut, testbench)


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
                if f.reset_reg:
                    self.acc[a] = 0
                    continue
                x = u.src_idx + p * f.src_factor_out + q * f.src_factor_in
                w = u.wgt_idx + p * f.wgt_factor_out + q * f.wgt_factor_in
                prod = (self.inp[x].reshape(cfg.batch, cfg.block_in)
                        @ self.wgt[w].reshape(cfg.block_out, cfg.block_in).T)
                self.acc[a] = wrap32(self.acc[a] + prod.ravel())
                self.out[a] = wrap8(self.acc[a])
                self.out_written.add(a)
        elif f.opcode == Opcode.ALU:
            for p, q, u in self.loop(f):
                d = u.dst_idx + p * f.dst_factor_out + q * f.dst_factor_in
                s = u.src_idx + p * f.src_factor_out + q * f.src_factor_in
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
        for word in insns:
            if not ref.execute(word, self.dram):
                break
        return ref

    def run(self, insns, *, uop=None, acc=None, tokens=None, max_cycles=5000,
            dram_latency=1):
        cfg, dut = self.cfg, self.dut
        lanes = cfg.batch * cfg.block_out
        # Sources start empty, sinks with room to spare, unless the test says otherwise.
        tokens = {name: TokenPort(**{"level": 0 if name in ("l2g", "s2g") else 10**6,
                                     **(tokens or {}).get(name, {})})
                  for name in ("l2g", "s2g", "g2l", "g2s")}
        state = {"cycle": 0, "done": False}
        out, out_log, finish, accepted = {}, [], [], []
        dram = np.frombuffer(self.dram, np.uint8)
        inp_words = [pack(r, 8) for r in self.inp]
        wgt_words = [pack(r, 8) for r in self.wgt]

        async def clock(ctx):
            async for _ in ctx.tick():
                state["cycle"] += 1

        def read_model(port, words):
            async def process(ctx):
                async for _, _, addr, en in ctx.tick().sample(port.addr, port.en):
                    if en:
                        ctx.set(port.data, words[addr])
            return process

        async def out_model(ctx):
            port = dut.out_wr
            async for _, _, addr, data, en in ctx.tick().sample(port.addr, port.data, port.en):
                if en:
                    out[addr] = (state["cycle"], unpack(data, 8, lanes))
                    out_log.append((state["cycle"], addr))

        def token_model(name, port, source):
            tp = tokens[name]
            async def process(ctx):
                ctx.set(port.valid if source else port.ready, tp.level > 0)
                async for _, _, valid, ready in ctx.tick().sample(port.valid, port.ready):
                    if valid and ready:
                        tp.level -= 1
                        tp.log.append(state["cycle"])
                    tp.level = tp.schedule.get(state["cycle"] + 1, tp.level)
                    ctx.set(port.valid if source else port.ready, tp.level > 0)
            return process

        async def commands(ctx):
            for n, word in enumerate(insns):
                ctx.set(dut.cmd.valid, 1)
                ctx.set(dut.cmd.payload.insn, word)
                ctx.set(dut.cmd.payload.index, n)
                await ctx.tick().until(dut.cmd.ready)
                accepted.append(state["cycle"])
            ctx.set(dut.cmd.valid, 0)

        result = {}

        async def testbench(ctx):
            for n, w in enumerate(uop if uop is not None else []):
                ctx.set(dut.uop_mem.data[n], int(w))
            for n, row in enumerate(acc if acc is not None else []):
                ctx.set(dut.acc_mem.data[n], pack(row, 32))
            while state["cycle"] < max_cycles:
                _, _, fin, err = await ctx.tick().sample(dut.finish, dut.error.valid)
                if fin:
                    finish.append(state["cycle"])
                    break
                if err:
                    break
            for _ in range(4):   # let pushes after FINISH settle
                await ctx.tick()
            result["error"] = (ctx.get(dut.error.valid), ctx.get(dut.error.code),
                               ctx.get(dut.error.index))
            result["acc"] = np.array([unpack(ctx.get(dut.acc_mem.data[n]), 32, lanes)
                                      for n in range(cfg.acc_depth)])
            result["gemm_count"] = ctx.get(dut.gemm_count)
            result["alu_count"] = ctx.get(dut.alu_count)

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        for proc in (clock, read_model(dut.inp_rd, inp_words), read_model(dut.wgt_rd, wgt_words),
                     out_model, token_model("l2g", dut.l2g, True),
                     token_model("s2g", dut.s2g, True), token_model("g2l", dut.g2l, False),
                     token_model("g2s", dut.g2s, False), 
                     DramPortModel(dram, cfg.bus_bytes, read_latency=dram_latency).process(
                         dut.uop_dma, None),
                     DramPortModel(dram, cfg.bus_bytes, read_latency=dram_latency).process(
                         dut.acc_dma, None),
                     commands):
            sim.add_process(proc)
        sim.add_testbench(testbench)
        sim.run()
        return RunResult(cycles=state["cycle"], finish=finish, tokens=tokens, out=out,
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


def test_compute_loads_then_two_loop_gemm():
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
    result = bench.run(insns)
    ref = bench.reference(insns)
    assert result.error == (0, 0, 0)
    assert len(result.finish) == 1
    assert result.gemm_count == 4 * 3 * 5
    check_against_reference(bench, result, ref)
    assert ref.acc[40:60].any() and ref.acc[0:8].any()   # the test touched what it meant to
