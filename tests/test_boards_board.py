"""The board design's UART host link in Amaranth's simulator, and the board build.

A Python UART host (4 clock cycles per bit) speaks the link protocol of
:mod:`vtakit.boards.link` to :class:`~vtakit.boards.board_top.BoardTop`: identification,
bulk DRAM writes and reads with CRC, register access, a garbled frame answered BAD_CRC,
a retried register write not executed twice; then (slow) a golden fixture end to end.
"""

import struct

import numpy as np
import pytest
from amaranth.sim import Simulator

from vtakit.testing.fixtures import _load, fixture_path
from vtakit.boards.board_top import BoardTop
from vtakit.boards.link import (INFO_WORDS, SYNC, BridgeReg, Control, Op, Space, Status,
                                crc32, frame, info_words)
from vtakit.hw.config import load_config
from vtakit.hw.interfaces import Reg

DIV = 4
SIZE = 64 * 1024


class UartHost:
    def __init__(self, ctx, top, received):
        self.ctx, self.top, self.received = ctx, top, received
        self.seq = 0

    async def send(self, data):
        for byte in data:
            for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                self.ctx.set(self.top.uart_rx, bit)
                await self.ctx.tick().repeat(DIV)

    async def recv(self, n, timeout=200_000):
        out = []
        for _ in range(timeout):
            while self.received and len(out) < n:
                out.append(self.received.pop(0))
            if len(out) == n:
                return bytes(out)
            await self.ctx.tick()
        raise AssertionError(f"no reply from the board (got {bytes(out).hex()})")

    async def command(self, op, space, addr, count=1, data=b"", seq=None, raw=None):
        self.seq = (self.seq + 1) & 0xFF if seq is None else seq
        await self.send(raw if raw is not None else frame(op, space, self.seq, addr, count, data))
        head = await self.recv(3)
        n = 4 * count if op == Op.READ and head[1] == Status.OK else 0
        rest = await self.recv(n + 4)
        assert head[0] == SYNC and struct.unpack("<I", rest[n:])[0] == crc32(head[1:] + rest[:n])
        return head[1], head[2], rest[:n]


def _simulate(testbench, config="tiny"):
    top = BoardTop(load_config(config), dram_size=SIZE, clk_hz=25_000_000, cycles_per_bit=DIV)
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


def test_link_protocol_over_uart():
    seen = {}
    data = bytes(range(1, 33))

    async def bench(host):
        seen["info"] = await host.command(Op.READ, Space.INFO, 0, INFO_WORDS)
        seen["write"] = await host.command(Op.WRITE, Space.DRAM, 0x100, 8, data)
        seen["read"] = await host.command(Op.READ, Space.DRAM, 0x100, 8)
        seen["top"] = await host.command(Op.WRITE, Space.DRAM, SIZE - 4, 1, b"\x0d\xf0\xfe\xca")
        seen["top_read"] = await host.command(Op.READ, Space.DRAM, SIZE - 8, 2)
        seen["range"] = await host.command(Op.READ, Space.DRAM, SIZE - 4, 2)
        seen["reg"] = await host.command(Op.WRITE, Space.CSR, Reg.INSN_COUNT, 1,
                                         struct.pack("<I", 0x1234_5678))
        # The same seq again: acknowledged, not executed (a retry of a lost reply).
        seen["again"] = await host.command(Op.WRITE, Space.CSR, Reg.INSN_COUNT, 1,
                                           struct.pack("<I", 0x9999), seq=host.seq)
        seen["reg_read"] = await host.command(Op.READ, Space.CSR, Reg.INSN_COUNT, 1)
        bad = bytearray(frame(Op.WRITE, Space.DRAM, 77, 0x200, 1, b"\x01\x02\x03\x04"))
        bad[14] ^= 0x10                              # a data byte flipped
        seen["bad"] = await host.command(Op.WRITE, Space.DRAM, 0x200, 1, seq=77, raw=bytes(bad))
        seen["last"] = await host.command(Op.READ, Space.BRIDGE, 4 * BridgeReg.LAST_SEQ, 1)
        seen["zero"] = await host.command(Op.WRITE, Space.BRIDGE, 0, 1,
                                          struct.pack("<I", Control.ZERO_DRAM))
        seen["zeroed"] = await host.command(Op.READ, Space.DRAM, 0x100, 2)
    _simulate(bench)
    expected_info = info_words(load_config("tiny"), SIZE, 25_000_000, 3_000_000)
    assert seen["info"][0] == Status.OK
    assert list(struct.unpack(f"<{INFO_WORDS}I", seen["info"][2])) == expected_info
    assert seen["write"][:2] == (Status.OK, 2) and seen["read"] == (Status.OK, 3, data)
    assert seen["top_read"][2] == b"\0\0\0\0\x0d\xf0\xfe\xca"
    assert seen["range"][0] == Status.OUT_OF_RANGE
    assert seen["reg"][0] == seen["again"][0] == Status.OK
    assert seen["reg_read"][2] == struct.pack("<I", 0x1234_5678)
    assert seen["bad"][:2] == (Status.BAD_CRC, 77)
    assert seen["last"][2] == struct.pack("<I", 7)     # the bad write was not executed
    assert seen["zero"][0] == Status.OK and seen["zeroed"][2] == bytes(8)


@pytest.mark.slow
def test_fixture_runs_through_the_uart_bridge():
    fx = _load(fixture_path("alu_add_imm", "tiny"))
    dram = fx.image.dram.view("<u4")
    expected = fx.expected.view("<u4")
    got = {}

    async def bench(host):
        for i in np.flatnonzero(dram):
            await host.command(Op.WRITE, Space.DRAM, 4 * int(i), 1, dram[i].tobytes())
        for reg, value in ((Reg.INSN_COUNT, fx.image.insn_count),
                           (Reg.INSN_ADDR, fx.image.insn_addr), (Reg.CTRL, 1)):
            await host.command(Op.WRITE, Space.CSR, reg, 1, struct.pack("<I", value))
        for _ in range(200):
            ctrl = struct.unpack("<I", (await host.command(Op.READ, Space.CSR, Reg.CTRL))[2])[0]
            if ctrl & 0b010:
                break
        got["ctrl"] = ctrl
        lo, hi = struct.unpack("<2I", (await host.command(Op.READ, Space.BRIDGE, 0, 2))[2])
        got["range"] = (lo, hi)
        for i in np.flatnonzero(expected != dram):
            got[int(i)] = struct.unpack("<I", (await host.command(Op.READ, Space.DRAM,
                                                                  4 * int(i)))[2])[0]
    _simulate(bench)
    assert got.pop("ctrl") & 0b111 == 0b010
    changed = np.flatnonzero(expected != dram)
    lo, hi = got.pop("range")
    assert len(changed) > 0 and lo <= 4 * changed[0] and 4 * changed[-1] < hi
    assert got == {int(i): int(expected[i]) for i in changed}
