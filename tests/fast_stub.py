"""A small stand-in for the VTA top with exactly its top-level signature.

It lets the fast-backend flow (harness, build cache, devices, compare, cocotb,
benchmark) be tested without the full accelerator. Started through the CSR
like the VTA (INSN_COUNT, INSN_ADDR, CTRL bit 0), it fetches 16-byte words
from DRAM with the read master and executes a private encoding:

* bits [31:0] source byte address, [63:32] destination byte address (both bus
  aligned), [71:64] number of bus beats (1..``MAX_BEATS``), [127:124] opcode.
* opcode 0 (``COPY``): read the beats with one burst, then write them with
  one burst; counts in LOAD_COUNT.
* opcode 1 (``FINISH``): set done (CTRL bit 1).
* opcode 2 (``FAIL``): latch ERROR_CODE = bits [67:64], ERROR_INSN = the word's
  index, ERROR_MODULE = COMPUTE, and show done + error.

Running out of words without FINISH also sets done. CYCLES counts while busy.
:func:`stub_copy`, :func:`stub_finish` and :func:`stub_fail` encode words and
:func:`stub_reference` computes the expected DRAM in numpy.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
import numpy as np

from vtakit.hw.config import load_config
from vtakit.hw.interfaces import (DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH, CsrSignature, Reg, Unit,
                                  dma_read_signature, dma_write_signature)

__all__ = ["StubTop", "MAX_BEATS", "stub_copy", "stub_finish", "stub_fail", "stub_reference",
           "stub_design"]

MAX_BEATS = 8
OP_COPY, OP_FINISH, OP_FAIL = 0, 1, 2


def stub_copy(src: int, dst: int, beats: int) -> int:
    return src | dst << 32 | beats << 64 | OP_COPY << 124


def stub_finish() -> int:
    return OP_FINISH << 124


def stub_fail(code: int) -> int:
    return code << 64 | OP_FAIL << 124


def stub_reference(dram: np.ndarray, words, bus_bytes: int) -> np.ndarray:
    """Expected DRAM after running ``words`` (the numpy model of the stub)."""
    out = dram.copy()
    for w in words:
        op = w >> 124
        if op == OP_FINISH:
            break
        if op == OP_COPY:
            src, dst, n = w & 0xFFFFFFFF, (w >> 32) & 0xFFFFFFFF, ((w >> 64) & 0xFF) * bus_bytes
            out[dst:dst + n] = out[src:src + n].copy()
    return out


class StubTop(wiring.Component):
    """A DMA copier with the VTA top-level signature (see the module docstring)."""

    def __init__(self, config, *, token_depth=DEFAULT_TOKEN_DEPTH, cmd_depth=DEFAULT_CMD_DEPTH):
        self.config = load_config(config)
        super().__init__({
            "csr": In(CsrSignature),
            "dram_rd": Out(dma_read_signature(self.config)),
            "dram_wr": Out(dma_write_signature(self.config)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bw = self.config.bus_width
        insn_beats = 128 // bw
        busy, done, error = Signal(), Signal(), Signal()
        cycles, count, addr, idx = Signal(32), Signal(32), Signal(32), Signal(32)
        err_code, err_insn, copies = Signal(32), Signal(32), Signal(32)
        word = Signal(128)
        buf = Signal(bw * MAX_BEATS)
        beat = Signal(range(MAX_BEATS + 1))
        src, dst, nbeats = word[0:32], word[32:64], word[64:72]

        regs = {Reg.CTRL: Cat(busy, done, error), Reg.CYCLES: cycles, Reg.INSN_COUNT: count,
                Reg.INSN_ADDR: addr, Reg.ERROR_CODE: err_code, Reg.ERROR_INSN: err_insn,
                Reg.ERROR_MODULE: _masked(error, Unit.COMPUTE), Reg.LOAD_COUNT: copies}
        with m.Switch(self.csr.addr):
            for reg, value in regs.items():
                with m.Case(int(reg)):
                    m.d.comb += self.csr.r_data.eq(value)
        m.d.comb += self.irq.eq(done | error)
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)

        start = self.csr.w_en & (self.csr.addr == Reg.CTRL) & self.csr.w_data[0]
        rd, wr = self.dram_rd, self.dram_wr
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.csr.w_en & (self.csr.addr == Reg.INSN_COUNT)):
                    m.d.sync += count.eq(self.csr.w_data)
                with m.If(self.csr.w_en & (self.csr.addr == Reg.INSN_ADDR)):
                    m.d.sync += addr.eq(self.csr.w_data)
                with m.If(start):
                    m.d.sync += [busy.eq(1), done.eq(0), error.eq(0), cycles.eq(0), idx.eq(0),
                                 copies.eq(0), err_code.eq(0), err_insn.eq(0)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                with m.If(idx == count):
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += [rd.req.valid.eq(1), rd.req.payload.addr.eq(addr + idx * 16),
                                 rd.req.payload.beats.eq(insn_beats)]
                    with m.If(rd.req.ready):
                        m.d.sync += beat.eq(0)
                        m.next = "FETCH_DATA"
            with m.State("FETCH_DATA"):
                m.d.comb += rd.data.ready.eq(1)
                with m.If(rd.data.valid):
                    m.d.sync += [word.eq(Cat(word[bw:], rd.data.payload)), beat.eq(beat + 1)]
                    with m.If(beat == insn_beats - 1):
                        m.next = "EXEC"
            with m.State("EXEC"):
                with m.Switch(word[124:128]):
                    with m.Case(OP_COPY):
                        m.next = "READ"
                    with m.Case(OP_FAIL):
                        m.d.sync += [busy.eq(0), done.eq(1), error.eq(1),
                                     err_code.eq(word[64:68]), err_insn.eq(idx)]
                        m.next = "IDLE"
                    with m.Default():
                        m.d.sync += [busy.eq(0), done.eq(1)]
                        m.next = "IDLE"
            with m.State("READ"):
                m.d.comb += [rd.req.valid.eq(1), rd.req.payload.addr.eq(src),
                             rd.req.payload.beats.eq(nbeats)]
                with m.If(rd.req.ready):
                    m.d.sync += beat.eq(0)
                    m.next = "READ_DATA"
            with m.State("READ_DATA"):
                m.d.comb += rd.data.ready.eq(1)
                with m.If(rd.data.valid):
                    m.d.sync += [buf.word_select(beat, bw).eq(rd.data.payload), beat.eq(beat + 1)]
                    with m.If(beat + 1 == nbeats):
                        m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += [wr.req.valid.eq(1), wr.req.payload.addr.eq(dst),
                             wr.req.payload.beats.eq(nbeats)]
                with m.If(wr.req.ready):
                    m.d.sync += beat.eq(0)
                    m.next = "WRITE_DATA"
            with m.State("WRITE_DATA"):
                m.d.comb += [wr.data.valid.eq(1), wr.data.payload.eq(buf.word_select(beat, bw))]
                with m.If(wr.data.ready):
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(beat + 1 == nbeats):
                        m.d.sync += [idx.eq(idx + 1), copies.eq(copies + 1)]
                        m.next = "FETCH"
        return m


def _masked(cond, value):
    """``value`` while ``cond`` is high, else 0 (ERROR_MODULE reads 0 without an error)."""
    return cond.replicate(32) & Const(int(value), 32)


def stub_design():
    """The stub as a :class:`vtakit.sim.rtl_build.Design` (sources: this file)."""
    from vtakit.sim.rtl_build import Design
    return Design("stub", StubTop, sources=(__file__,))
