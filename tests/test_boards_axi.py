"""DramToAxi4 in Amaranth's simulator: AXI4 burst rules and write-then-read ordering.

The VTA side issues long bursts across 4 KiB boundaries; a Python AXI4
subordinate (a byte-addressed memory with a slow write response) records every
burst. The bursts must be legal (<= 256 beats, within one 4 KiB page), cover
the request exactly, move the right data, and a read issued after a write's
last beat must not be issued on AXI before that write's response.
"""

from collections import deque

import pytest
from amaranth.sim import Simulator

from vtakit.boards.axi_dram import DramToAxi4
from vtakit.hw.config import load_config

CONFIG = load_config("tiny")
NB = CONFIG.bus_bytes
B_DELAY = 6


def _word(addr):
    return int.from_bytes(bytes((addr + i) * 7 & 0xFF for i in range(NB)), "little")


def _run(reads, writes):
    """Issue ``writes`` (addr, beats) then ``reads`` (addr, beats); return the AXI log."""
    dut = DramToAxi4(CONFIG)
    log = {"ar": [], "aw": [], "b_cycle": [], "ar_cycle": [], "rdata": [], "mem": {}}

    async def tb(ctx):
        axi = dut.axi
        ctx.set(axi.arready, 1)
        ctx.set(axi.awready, 1)
        ctx.set(axi.wready, 1)
        ctx.set(dut.dram_rd.data.ready, 1)
        rd_reqs, wr_reqs = deque(reads), deque(writes)
        wr_data = deque()
        r_beats, b_due, w_addr = deque(), deque(), deque()
        cur_w = None
        for cycle in range(6000):
            # VTA side: one write at a time first, then the reads.
            ctx.set(dut.dram_wr.req.valid, bool(wr_reqs))
            if wr_reqs:
                ctx.set(dut.dram_wr.req.payload, {"addr": wr_reqs[0][0], "beats": wr_reqs[0][1]})
            ctx.set(dut.dram_wr.data.valid, bool(wr_data))
            if wr_data:
                ctx.set(dut.dram_wr.data.payload, wr_data[0])
            issue_reads = not wr_reqs and not wr_data
            ctx.set(dut.dram_rd.req.valid, issue_reads and bool(rd_reqs))
            if rd_reqs:
                ctx.set(dut.dram_rd.req.payload, {"addr": rd_reqs[0][0], "beats": rd_reqs[0][1]})
            # AXI subordinate outputs for this cycle.
            ctx.set(axi.rvalid, bool(r_beats))
            if r_beats:
                ctx.set(axi.rdata, _word(r_beats[0]))
            ctx.set(axi.bvalid, bool(b_due) and b_due[0] <= cycle)
            # Sample the handshakes the coming edge takes.
            if ctx.get(dut.dram_wr.req.valid) and ctx.get(dut.dram_wr.req.ready):
                a, n = wr_reqs.popleft()
                wr_data.extend(_word(a + i * NB) for i in range(n))
            if ctx.get(dut.dram_wr.data.valid) and ctx.get(dut.dram_wr.data.ready):
                wr_data.popleft()
            if ctx.get(dut.dram_rd.req.valid) and ctx.get(dut.dram_rd.req.ready):
                rd_reqs.popleft()
            if ctx.get(axi.arvalid):
                a, n = ctx.get(axi.araddr), ctx.get(axi.arlen) + 1
                log["ar"].append((a, n))
                log["ar_cycle"].append(cycle)
                r_beats.extend(a + i * NB for i in range(n))
            if ctx.get(axi.rvalid) and ctx.get(axi.rready):
                log["rdata"].append(ctx.get(axi.rdata))
                r_beats.popleft()
            if ctx.get(axi.awvalid):
                a, n = ctx.get(axi.awaddr), ctx.get(axi.awlen) + 1
                log["aw"].append((a, n))
                w_addr.append([a, n])
            if ctx.get(axi.wvalid):
                cur_w = w_addr[0]
                log["mem"][cur_w[0]] = ctx.get(axi.wdata)
                assert ctx.get(axi.wlast) == (cur_w[1] == 1), "wlast on the wrong beat"
                cur_w[0] += NB
                cur_w[1] -= 1
                if cur_w[1] == 0:
                    w_addr.popleft()
                    b_due.append(cycle + B_DELAY)
            if ctx.get(axi.bvalid):
                b_due.popleft()
                log["b_cycle"].append(cycle)
            await ctx.tick()
            if not (rd_reqs or wr_reqs or wr_data or r_beats or b_due) \
                    and len(log["rdata"]) == sum(n for _, n in reads):
                break
        log["write_pending_end"] = ctx.get(dut.write_pending)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    return log


def _legal(bursts):
    for a, n in bursts:
        assert 1 <= n <= 256 and a % NB == 0, (hex(a), n)
        assert a // 4096 == (a + n * NB - 1) // 4096, f"burst at 0x{a:x} of {n} beats crosses 4 KiB"


@pytest.mark.parametrize("addr,beats", [(0xFF8, 600), (0x2000, 256), (0x1F00, 3)])
def test_read_bursts_are_legal_and_exact(addr, beats):
    log = _run([(addr, beats)], [])
    _legal(log["ar"])
    assert log["ar"][0][0] == addr and sum(n for _, n in log["ar"]) == beats
    assert [a + n * NB for a, n in log["ar"][:-1]] == [a for a, _ in log["ar"][1:]]
    assert log["rdata"] == [_word(addr + i * NB) for i in range(beats)]


def test_first_split_of_a_4k_crossing_read():
    log = _run([(0xFF8, 600)], [])
    assert log["ar"] == [(0xFF8, 1), (0x1000, 256), (0x1800, 256), (0x2000, 87)]


def test_write_bursts_then_read_waits_for_the_response():
    log = _run([(0x0, 4)], [(0x7F0, 300)])
    _legal(log["aw"])
    assert log["aw"] == [(0x7F0, 256), (0xFF0, 2), (0x1000, 42)]
    assert log["mem"] == {0x7F0 + i * NB: _word(0x7F0 + i * NB) for i in range(300)}
    assert log["ar_cycle"][0] > log["b_cycle"][-1], "read issued before the write was acknowledged"
    assert log["write_pending_end"] == 0
