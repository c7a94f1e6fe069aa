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
