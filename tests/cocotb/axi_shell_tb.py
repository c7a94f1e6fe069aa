"""cocotb 2 testbench of the AXI shell (``vtakit.boards.shell_verilog``, Verilator).

DRAM is a cocotbext-axi ``AxiRam`` on ``m_axi`` (with seeded random stalls on
every channel, so the bridge sees back-pressure and late responses) and the
host is an ``AxiLiteMaster`` on ``s_axil``. Each golden fixture named by
``VTA_FIXTURES`` is replayed the way a host driver runs a program on a board:
copy the image into DRAM, write INSN_COUNT / INSN_ADDR / CTRL over AXI4-Lite,
wait for ``irq``, check CTRL, and compare the whole DRAM with the fixture's
``expected_dram``. A monitor checks every burst against the AXI4 rules (at
most 256 beats, never across a 4 KiB boundary, full-width beats).

Run it through ``tests/cocotb/test_cocotb_axi_shell.py``, not by hand.
"""

import itertools
import os
import random
import sys
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam, AxiResp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vtakit.testing.fixtures import _load, first_difference, fixture_path  # noqa: E402

from vtakit.boards.shell import SHELL_STATUS  # noqa: E402
from vtakit.hw.config import load_config  # noqa: E402
from vtakit.hw.interfaces import Reg  # noqa: E402

MAX_CYCLES = 400_000


def _pauses(seed: int, rate: float):
    rng = random.Random(seed)
    return itertools.cycle([rng.random() < rate for _ in range(997)])


async def check_bursts(dut, bus_bytes: int, log: list):
    """Record every AR/AW handshake and fail on an illegal AXI4 burst."""
    while True:
        await FallingEdge(dut.clk)   # mid-cycle: the handshake the next rising edge takes
        for ch in ("ar", "aw"):
            if getattr(dut, f"m_axi_{ch}valid").value and getattr(dut, f"m_axi_{ch}ready").value:
                addr = int(getattr(dut, f"m_axi_{ch}addr").value)
                beats = int(getattr(dut, f"m_axi_{ch}len").value) + 1
                size = int(getattr(dut, f"m_axi_{ch}size").value)
                assert 1 << size == bus_bytes, f"{ch}size {size} for a {bus_bytes}-byte bus"
                assert addr % bus_bytes == 0, f"unaligned {ch}addr 0x{addr:x}"
                assert addr // 4096 == (addr + beats * bus_bytes - 1) // 4096, \
                    f"{ch} burst of {beats} beats at 0x{addr:x} crosses a 4 KiB boundary"
                log.append((ch, addr, beats))


async def replay(dut, axil: AxiLiteMaster, ram: AxiRam, fixture_id: str, bursts: list):
    name, _, preset = fixture_id.rpartition("__")
    fx = _load(fixture_path(name, preset))
    dram = fx.image.dram
    ram.write(0, dram.tobytes())
    await axil.write_dword(Reg.INSN_COUNT, fx.image.insn_count)
    await axil.write_dword(Reg.INSN_ADDR, fx.image.insn_addr)
    assert await axil.read_dword(Reg.INSN_COUNT) == fx.image.insn_count
    await axil.write_dword(Reg.CTRL, 1)
    for _ in range(MAX_CYCLES):
        await RisingEdge(dut.clk)
        if dut.irq.value:
            break
    else:
        raise AssertionError(f"{fixture_id}: no irq after {MAX_CYCLES} cycles")
    ctrl = await axil.read_dword(Reg.CTRL)
    assert ctrl & 0b111 == 0b010, (
        f"{fixture_id}: CTRL=0x{ctrl:x}, error code {await axil.read_dword(Reg.ERROR_CODE)} "
        f"at instruction {await axil.read_dword(Reg.ERROR_INSN)}")
    assert await axil.read_dword(SHELL_STATUS) == 0, f"{fixture_id}: AXI error or write pending"
    got = ram.read(0, len(dram))
    diff = first_difference(np.frombuffer(got, np.uint8), fx.expected)
    assert diff is None, f"fixture {fixture_id} through the AXI shell: {diff}"
    cycles = await axil.read_dword(Reg.CYCLES)
    dut._log.info("%s: DRAM matches expected_dram, %d cycles, %d bursts", fixture_id, cycles,
                  len(bursts))


async def register_errors(dut, axil: AxiLiteMaster):
    """Partial-word writes and reads outside the register window answer SLVERR, no effect."""
    await axil.write_dword(Reg.INSN_COUNT, 7)
    resp = await axil.write(Reg.INSN_COUNT, b"\x05\x00")
    assert resp.resp == AxiResp.SLVERR, resp
    assert await axil.read_dword(Reg.INSN_COUNT) == 7
    resp = await axil.read(0x100, 4)
    assert resp.resp == AxiResp.SLVERR, resp
    assert await axil.read_dword(SHELL_STATUS) == 0


@cocotb.test()
async def replay_fixtures(dut):
    """Register-port errors, then every fixture of ``VTA_FIXTURES`` on one reset."""
    ids = [i for i in os.environ["VTA_FIXTURES"].split(",") if i]
    assert ids, "VTA_FIXTURES names no fixture"
    config = load_config(_load(fixture_path(*ids[0].rpartition("__")[::2])).preset)
    size = max(len(_load(fixture_path(*i.rpartition("__")[::2])).image.dram) for i in ids)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=-(-size // 4096) * 4096)
    for i, channel in enumerate((ram.write_if.aw_channel, ram.write_if.w_channel,
                                 ram.write_if.b_channel, ram.read_if.ar_channel,
                                 ram.read_if.r_channel)):
        channel.set_pause_generator(_pauses(i, 0.25))
    for _ in range(4):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    bursts = []
    cocotb.start_soon(check_bursts(dut, config.bus_bytes, bursts))
    await register_errors(dut, axil)
    for fixture_id in ids:
        await replay(dut, axil, ram, fixture_id, bursts)
    assert any(beats > 1 for _, _, beats in bursts), "no multi-beat burst was exercised"
