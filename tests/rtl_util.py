"""Shared helpers for the RTL testbenches (Amaranth async testbenches).

The DRAM model itself is :class:`vtakit.sim.pysim.DramPortModel` (the pysim
backend needs it too); this module adds the small conveniences the unit tests
share: running a simulation, pushing stream transfers, collecting them, and
plain-Python references of the DMA semantics.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.sim import Simulator

from vtakit.hw.compute import compute_signature
from vtakit.hw.isa import Opcode
from vtakit.sim.pysim import DramPortModel

__all__ = ["DramPortModel", "NopCompute", "run_sim", "send", "recv", "padded_load_ref",
           "rng_bytes"]


def run_sim(dut, testbench, *, processes=(), background=(), vcd=None):
    """Simulate ``dut`` with a 1 MHz clock until ``testbench`` (one or a list) returns;
    ``background`` testbenches run alongside without keeping the simulation alive."""
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for p in processes:
        sim.add_process(p)
    for tb in background:
        sim.add_testbench(tb, background=True)
    for tb in (testbench if isinstance(testbench, (list, tuple)) else [testbench]):
        sim.add_testbench(tb)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()


async def send(ctx, port, payload, *, timeout=10_000):
    """One transfer on stream ``port`` (we drive valid/payload); returns cycles waited."""
    target = port.payload
    if isinstance(target, data.View) and isinstance(payload, int):
        target = target.as_value()   # raw bits for a struct payload
    ctx.set(target, payload)
    ctx.set(port.valid, 1)
    for n in range(timeout):
        _, _, ready = await ctx.tick().sample(port.ready)
        if ready:
            ctx.set(port.valid, 0)
            return n
    raise AssertionError(f"stream not ready within {timeout} cycles")


async def recv(ctx, port, *, timeout=10_000):
    """One transfer on stream ``port`` (we drive ready); returns the payload."""
    ctx.set(port.ready, 1)
    for _ in range(timeout):
        payload_value = port.payload
        if isinstance(payload_value, data.View):
            payload_value = payload_value.as_value()
        _, _, valid, payload = await ctx.tick().sample(port.valid, payload_value)
        if valid:
            ctx.set(port.ready, 0)
            return payload
    raise AssertionError(f"stream not valid within {timeout} cycles")


def padded_load_ref(dram, elem_bytes, *, sram_base, dram_base, x_size, y_size, x_stride,
                    y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0):
    """Reference 3.3: ``{sram index: element value}`` written by one padded LOAD."""
    out = {}
    if x_size == 0:
        return out
    x_total = x_pad_0 + x_size + x_pad_1
    a = sram_base
    for r in range(y_pad_0 + y_size + y_pad_1):
        for c in range(x_total):
            val = 0
            if y_pad_0 <= r < y_pad_0 + y_size and x_pad_0 <= c < x_pad_0 + x_size:
                e = dram_base + (r - y_pad_0) * x_stride + (c - x_pad_0)
                val = int.from_bytes(dram[e * elem_bytes:(e + 1) * elem_bytes].tobytes(), "little")
            out[a] = val
            a += 1
    return out


def store_ref(dram_size, elem_bytes, sram, cmds):
    """Reference 3.7: the DRAM bytes (a zeroed array of ``dram_size``) after the STOREs
    ``cmds`` (dicts of sram_base, dram_base, x_size, y_size, x_stride) of the OUT SRAM
    elements ``sram`` (ints, little endian)."""
    expected = np.zeros(dram_size, np.uint8)
    for f in cmds:
        for r in range(f["y_size"]):
            for c in range(f["x_size"]):
                a = (f["dram_base"] + r * f["x_stride"] + c) * elem_bytes
                expected[a:a + elem_bytes] = np.frombuffer(
                    sram[f["sram_base"] + r * f["x_size"] + c].to_bytes(elem_bytes, "little"),
                    np.uint8)
    return expected


def rng_bytes(seed, n):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


class NopCompute(wiring.Component):
    """A stand-in with the signature of :class:`vtakit.hw.compute.Compute` that honours the
    dependency flags of every compute-queue instruction, does no data work (GEMM, ALU and
    LOAD UOP/ACC are no-ops) and pulses ``finish`` for FINISH. It lets the memory system and
    the top level be tested on their own."""

    def __init__(self, config):
        super().__init__(compute_signature(config))

    def elaborate(self, platform):
        m = Module()
        insn = Signal(128)
        pop_prev, pop_next, push_prev, push_next = (insn[3 + i] for i in range(4))
        m.d.comb += [self.inp_rd.en.eq(0), self.wgt_rd.en.eq(0)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += insn.eq(self.cmd.payload.insn)
                    m.next = "POP"
            with m.State("POP"):
                ok = (~pop_prev | self.l2g.valid) & (~pop_next | self.s2g.valid)
                m.d.comb += [self.l2g.ready.eq(ok & pop_prev), self.s2g.ready.eq(ok & pop_next)]
                with m.If(ok):
                    m.next = "PUSH_PREV"
            with m.State("PUSH_PREV"):
                m.d.comb += self.g2l.valid.eq(push_prev)
                with m.If(~push_prev | self.g2l.ready):
                    m.next = "PUSH_NEXT"
            with m.State("PUSH_NEXT"):
                m.d.comb += self.g2s.valid.eq(push_next)
                with m.If(~push_next | self.g2s.ready):
                    m.d.comb += self.finish.eq(insn[:3] == Opcode.FINISH)
                    m.next = "IDLE"
        return m
