"""cocotb 2 testbench of the VTA top level (generated Verilog, simulated by Verilator).

The DRAM model and the host CSR protocol are Python coroutines here; the DRAM
timing is the one of :class:`vtakit.sim.pysim.DramPortModel` and of the C++
harness of the fast backends (read requests accepted every cycle and served in
order, first beat ``READ_LATENCY`` cycles after the request; write requests
accepted up to :data:`~vtakit.hw.spec.WRITE_AHEAD` ahead of the burst whose beats
stream). Each test replays one golden fixture, named by the ``VTA_FIXTURES``
environment variable (``name__preset`` ids, comma-separated), and compares the
final DRAM byte for byte with the fixture's ``expected_dram``.

Run it through ``tests/cocotb/test_cocotb_vta.py`` (cocotb_tools.runner), not
by hand.
"""

import os
from collections import deque

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from vtakit.hw.config import load_config
from vtakit.hw.interfaces import Reg
from vtakit.hw.spec import WRITE_AHEAD
from vtakit.testing.fixtures import _load, first_difference, fixture_path

READ_LATENCY = 2
MAX_CYCLES = 200_000


class Dram:
    """The DRAM behind the top level's ``dram_rd``/``dram_wr`` ports."""

    def __init__(self, dut, mem: np.ndarray, bus_bytes: int):
        self.dut, self.mem, self.nb = dut, mem, bus_bytes
        self.reads = deque()   # [due cycle, byte address, beats left]
        self.writes = deque()  # [byte address, beats left] per accepted write request

    def _check(self, addr, beats, what):
        if addr % self.nb or beats == 0 or addr + beats * self.nb > len(self.mem):
            raise AssertionError(f"bad DRAM {what}: addr 0x{addr:x}, {beats} beats "
                                 f"(image of {len(self.mem)} bytes)")

    async def serve(self):
        dut, nb = self.dut, self.nb
        dut.dram_rd__req__ready.value = 1
        dut.dram_rd__data__valid.value = 0
        dut.dram_wr__req__ready.value = 1
        dut.dram_wr__data__ready.value = 0
        cycle = 0
        while True:
            # Mid-cycle: inputs and outputs of this cycle are stable; the
            # handshakes seen now are the ones the rising edge takes.
            await FallingEdge(dut.clk)
            cycle += 1
            rd_valid = bool(dut.dram_rd__data__valid.value)
            rd_beat = rd_valid and bool(dut.dram_rd__data__ready.value)
            rd_req = bool(dut.dram_rd__req__valid.value)
            rd_payload = int(dut.dram_rd__req__payload.value) if rd_req else 0
            wr_req = len(self.writes) <= WRITE_AHEAD and bool(dut.dram_wr__req__valid.value)
            wr_payload = int(dut.dram_wr__req__payload.value) if wr_req else 0
            wr_beat = bool(self.writes) and bool(dut.dram_wr__data__valid.value)
            wr_data = int(dut.dram_wr__data__payload.value) if wr_beat else 0
            await RisingEdge(dut.clk)
            # After the edge: update the model, drive the next cycle's inputs.
            if rd_beat:
                head = self.reads[0]
                head[1] += nb
                head[2] -= 1
                if head[2] == 0:
                    self.reads.popleft()
            if rd_req:
                addr, beats = rd_payload & 0xFFFFFFFF, rd_payload >> 32
                self._check(addr, beats, "read")
                self.reads.append([cycle + READ_LATENCY, addr, beats])
            if wr_beat:
                head = self.writes[0]
                a = head[0]
                self.mem[a:a + nb] = np.frombuffer(wr_data.to_bytes(nb, "little"), np.uint8)
                head[0] += nb
                head[1] -= 1
                if head[1] == 0:
                    self.writes.popleft()
            if wr_req:
                addr, beats = wr_payload & 0xFFFFFFFF, wr_payload >> 32
                self._check(addr, beats, "write")
                self.writes.append([addr, beats])
            now = bool(self.reads) and self.reads[0][0] <= cycle + 1
            dut.dram_rd__data__valid.value = int(now)
            if now:
                a = self.reads[0][1]
                dut.dram_rd__data__payload.value = int.from_bytes(self.mem[a:a + nb].tobytes(),
                                                                  "little")
            dut.dram_wr__req__ready.value = int(len(self.writes) <= WRITE_AHEAD)
            dut.dram_wr__data__ready.value = int(bool(self.writes))


async def csr_write(dut, reg, value):
    dut.csr__addr.value = int(reg)
    dut.csr__w_data.value = value
    dut.csr__w_en.value = 1
    await RisingEdge(dut.clk)
    dut.csr__w_en.value = 0


async def csr_read(dut, reg) -> int:
    dut.csr__addr.value = int(reg)
    await Timer(1, unit="ns")   # reads are combinational
    return int(dut.csr__r_data.value)


async def replay(dut, fixture_id: str):
    name, _, preset = fixture_id.rpartition("__")
    fx = _load(fixture_path(name, preset))
    config = load_config(fx.preset)
    mem = fx.image.dram.copy()
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.csr__w_en.value = 0
    dut.csr__addr.value = 0
    dut.csr__w_data.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    cocotb.start_soon(Dram(dut, mem, config.bus_bytes).serve())
    await csr_write(dut, Reg.INSN_COUNT, fx.image.insn_count)
    await csr_write(dut, Reg.INSN_ADDR, fx.image.insn_addr)
    await csr_write(dut, Reg.CTRL, 1)
    for _ in range(MAX_CYCLES):
        await FallingEdge(dut.clk)
        if dut.irq.value:
            break
    else:
        raise AssertionError(f"{fixture_id}: no done after {MAX_CYCLES} cycles")
    ctrl = await csr_read(dut, Reg.CTRL)
    assert ctrl & 0b110 == 0b010, f"{fixture_id}: CTRL=0x{ctrl:x}, error code " \
        f"{await csr_read(dut, Reg.ERROR_CODE)} at instruction {await csr_read(dut, Reg.ERROR_INSN)}"
    cycles = await csr_read(dut, Reg.CYCLES)
    diff = first_difference(mem, fx.expected)
    assert diff is None, f"fixture {fixture_id} on cocotb/verilator: {diff}"
    dut._log.info("%s: DRAM matches expected_dram, %d cycles", fixture_id, cycles)


@cocotb.test()
async def replay_fixtures(dut):
    """Every fixture of ``VTA_FIXTURES``, one after another (reset between)."""
    ids = [i for i in os.environ["VTA_FIXTURES"].split(",") if i]
    assert ids, "VTA_FIXTURES names no fixture"
    for fixture_id in ids:
        await replay(dut, fixture_id)
