"""Shared helpers for the RTL testbenches (Amaranth async testbenches).

The DRAM model itself is :class:`vtakit.sim.pysim.DramPortModel` (the pysim
backend needs it too); this module adds the small conveniences the unit tests
share: running a simulation, pushing stream transfers, collecting them, and
plain-Python references of the DMA semantics.
"""

from __future__ import annotations

import numpy as np
from amaranth.lib import data
from amaranth.sim import Simulator

from vtakit.sim.pysim import DramPortModel

__all__ = ["DramPortModel", "run_sim", "send", "recv", "padded_load_ref", "rng_bytes"]


def run_sim(dut, testbench, *, processes=(), vcd=None):
    """Simulate ``dut`` with a 1 MHz clock until ``testbench`` returns."""
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for p in processes:
        sim.add_process(p)
    sim.add_testbench(testbench)
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


def rng_bytes(seed, n):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
