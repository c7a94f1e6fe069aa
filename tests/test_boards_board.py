"""The board design's UART host link in Amaranth's simulator, and the board build.

A Python UART host (4 clock cycles per bit) writes and reads VTA registers and
on-chip DRAM words through :class:`~vtakit.boards.board_top.BoardTop`, then
runs a golden fixture end to end: copy the program's non-zero words in, start,
poll CTRL, read back every word the fixture expects to differ from zero.
"""

import struct

import numpy as np
import pytest
from amaranth.sim import Simulator

from vtakit.testing.fixtures import _load, fixture_path
from vtakit.boards.board_top import (CMD_DRAM_READ, CMD_DRAM_WRITE, CMD_REG_READ, CMD_REG_WRITE,
                                     BoardTop)
from vtakit.hw.config import load_config
from vtakit.hw.interfaces import Reg

DIV = 4


class UartHost:
    def __init__(self, ctx, top, received):
        self.ctx, self.top, self.received = ctx, top, received

    async def send(self, byte):
        for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
            self.ctx.set(self.top.uart_rx, bit)
            await self.ctx.tick().repeat(DIV)

    async def recv(self, timeout=100_000):
        for _ in range(timeout):
            if self.received:
                return self.received.pop(0)
            await self.ctx.tick()
        raise AssertionError("no reply from the board")

    async def command(self, cmd, addr, data=None, reply=4):
        for b in bytes([cmd]) + struct.pack("<I", addr) + (b"" if data is None else struct.pack("<I", data)):
            await self.send(b)
        return int.from_bytes(bytes([await self.recv() for _ in range(reply)]), "little")


def _simulate(testbench, config="tiny"):
    top = BoardTop(load_config(config), dram_size=64 * 1024, clk_hz=4, baud=1)
    sim = Simulator(top)
    sim.add_clock(1e-6)

    received = []

    async def monitor(ctx):
        """Decode every byte the board sends on ``uart_tx``."""
        while True:
            while ctx.get(top.uart_tx):
                await ctx.tick()
            await ctx.tick().repeat(DIV // 2)     # middle of the start bit
            value = 0
            for i in range(8):
                await ctx.tick().repeat(DIV)
                value |= ctx.get(top.uart_tx) << i
            await ctx.tick().repeat(DIV)
            assert ctx.get(top.uart_tx) == 1, "missing stop bit"
            received.append(value)

    async def tb(ctx):
        ctx.set(top.uart_rx, 1)
        await ctx.tick().repeat(4)
        await testbench(UartHost(ctx, top, received))
    sim.add_testbench(monitor, background=True)
    sim.add_testbench(tb)
    sim.run()


def test_registers_and_dram_words_over_uart():
    seen = {}

    async def bench(host):
        assert await host.command(CMD_REG_WRITE, Reg.INSN_COUNT, 0x1234_5678, reply=1) == CMD_REG_WRITE
        seen["count"] = await host.command(CMD_REG_READ, Reg.INSN_COUNT)
        for addr, word in ((0x100, 0xDEAD_BEEF), (0x104, 0x0102_0304), (0xFFFC, 0xCAFE_F00D)):
            assert await host.command(CMD_DRAM_WRITE, addr, word, reply=1) == CMD_DRAM_WRITE
        seen["words"] = [await host.command(CMD_DRAM_READ, a) for a in (0x100, 0x104, 0xFFFC, 0x108)]
    _simulate(bench)
    assert seen == {"count": 0x1234_5678, "words": [0xDEAD_BEEF, 0x0102_0304, 0xCAFE_F00D, 0]}


@pytest.mark.slow
def test_fixture_runs_through_the_uart_bridge():
    fx = _load(fixture_path("alu_add_imm", "tiny"))
    dram = fx.image.dram.view("<u4")
    expected = fx.expected.view("<u4")
    got = {}

    async def bench(host):
        for i in np.flatnonzero(dram):
            await host.command(CMD_DRAM_WRITE, 4 * int(i), int(dram[i]), reply=1)
        await host.command(CMD_REG_WRITE, Reg.INSN_COUNT, fx.image.insn_count, reply=1)
        await host.command(CMD_REG_WRITE, Reg.INSN_ADDR, fx.image.insn_addr, reply=1)
        await host.command(CMD_REG_WRITE, Reg.CTRL, 1, reply=1)
        for _ in range(200):
            ctrl = await host.command(CMD_REG_READ, Reg.CTRL)
            if ctrl & 0b010:
                break
        got["ctrl"] = ctrl
        for i in np.flatnonzero(expected != dram):
            got[int(i)] = await host.command(CMD_DRAM_READ, 4 * int(i))
    _simulate(bench)
    assert got.pop("ctrl") & 0b111 == 0b010
    changed = np.flatnonzero(expected != dram)
    assert len(changed) > 0
    assert got == {int(i): int(expected[i]) for i in changed}
