"""The load module: LOAD INP / LOAD WGT into the input and weight SRAMs.

Per instruction (reference 3.2, 3.3): ``pop_prev_dep`` or ``push_prev_dep`` set is
ILLEGAL_FIELD (the load module has no previous stage; checked first, also for
NOPs); pop a g2l token if ``pop_next_dep``; a
LOAD with ``x_size == 0`` is a sync-only NOP; otherwise check the memory type
(INP or WGT), the SRAM range ``sram_base + x_total*y_total <= depth`` and the
DRAM range (every byte read below ``2**32``, else DRAM_OUT_OF_RANGE), run
the padded 2-D load on the :class:`~vtakit.hw.load_engine.LoadEngine` of that
buffer, then push an l2g token if ``push_next_dep``. A failed check reports an
:class:`~vtakit.hw.interfaces.ErrorReport` with the instruction's stream index
and the module stops (nothing is written).

Timing: the range checks (a multiply and a compare each) run two registered stages
ahead, on the command at the head of the queue
(:func:`~vtakit.hw.load_engine.lookahead_checks`), so the cycle the token pop succeeds
only acts on their results: the engine takes the instruction and issues its first DRAM
request then. The push and the acceptance of the next command happen in the cycle of
the last SRAM write (:attr:`~vtakit.hw.load_engine.LoadEngine.last`). So an unpadded
LOAD of ``B`` beats takes ``2 + B`` cycles from its acceptance to the next one's with a
1-cycle DRAM read latency, one more if it was accepted in the cycle it reached the
head of the queue (its checks are not ready yet; pinned by
``tests/test_rtl_dma_timing.py``).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .interfaces import (DRAM_ADDR_BITS, CommandSignature, ErrorCode, ErrorReport,
                         accept_command, dep_ports, dma_read_signature, report_error, token_ports)
from .isa import MemType, isa_for
from .load_engine import LoadEngine, lookahead_checks, padded_size
from .spec import Unit

__all__ = ["Load", "mux_dma_read"]


def mux_dma_read(m, port, clients, sel):
    """Drive read port ``port`` from ``clients[sel]`` (the others see no handshakes)."""
    for i, c in enumerate(clients):
        with m.If(sel == i):
            m.d.comb += [port.req.valid.eq(c.req.valid), port.req.payload.eq(c.req.payload),
                         c.req.ready.eq(port.req.ready), c.data.valid.eq(port.data.valid),
                         port.data.ready.eq(c.data.ready)]
        m.d.comb += c.data.payload.eq(port.data.payload)


class Load(wiring.Component):
    """The load module.

    Attributes
    ----------
    cmd : In(CommandSignature)
        LOAD INP/WGT instructions from fetch.
    dma : Out(dma_read_signature(config))
    inp_wr, wgt_wr : In(memory.WritePort.Signature(...))
        Write ports of the input and weight SRAMs.
    g2l : In(TokenSignature)
        Token source for ``pop_next_dep``.
    l2g : Out(TokenSignature)
        Token sink for ``push_next_dep``.
    error : Out(ErrorReport)
        Held valid after a fault.
    count : Out(32)
        Instructions completed.
    busy : Out(1)
        High while an instruction is in progress.
    """

    def __init__(self, config: VTAConfig):
        self._config = config
        c = config
        super().__init__({
            "cmd": In(CommandSignature),
            "dma": Out(dma_read_signature(c)),
            "inp_wr": In(memory.WritePort.Signature(addr_width=c.log_inp_depth,
                                                    shape=c.inp_elem_bits)),
            "wgt_wr": In(memory.WritePort.Signature(addr_width=c.log_wgt_depth,
                                                    shape=c.wgt_elem_bits)),
            **token_ports(Unit.LOAD),
            "error": Out(ErrorReport),
            "count": Out(32),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        dep = dep_ports(self, Unit.LOAD)     # token port of each dependency flag
        pop_next = dep["pop_next_dep"]
        push_next = dep["push_next_dep"]
        m = Module()
        c = self._config
        engines = [LoadEngine(c, elem_bits=c.inp_elem_bits, addr_width=c.log_inp_depth,
                              dram_check=False),
                   LoadEngine(c, elem_bits=c.wgt_elem_bits, addr_width=c.log_wgt_depth,
                              dram_check=False)]
        m.submodules.inp_engine, m.submodules.wgt_engine = engines
        wiring.connect(m, engines[0].sram, wiring.flipped(self.inp_wr))
        wiring.connect(m, engines[1].sram, wiring.flipped(self.wgt_wr))
        sel = Signal()          # 0: INP engine, 1: WGT engine (of the instruction in progress)
        sel_now = Signal()      # the same, already in the cycle an engine takes it
        m.d.comb += sel_now.eq(sel)
        mux_dma_read(m, self.dma, [e.dma for e in engines], sel_now)

        insn = Signal(isa_for(c).mem.layout())
        index = Signal(32)
        for e in engines:
            m.d.comb += e.cmd.payload.eq(insn)

        # The range checks, two registered stages ahead (``lookahead_checks``), from the
        # command at the head of the queue.
        in_pop = Signal()
        leave = Signal()        # POP decides this cycle
        limit = {e: (1 << DRAM_ADDR_BITS) // (bits // 8)
                 for e, bits in ((0, c.inp_elem_bits), (1, c.wgt_elem_bits))}
        depth = {0: c.inp_depth, 1: c.wgt_depth}

        def stage1(i):
            # SRAM: base + x_total*y_total <= depth; DRAM: one past the last element,
            # dram_base + (y_size-1)*x_stride + x_size, <= limit (compared as products
            # against the room left, so the second stage is a multiply and a compare).
            return {
                **dict(zip(("x_total", "y_total"), padded_size(i))),
                "y_less": (i.y_size - 1)[:16], "x_stride": i.x_stride,
                "moves": (i.x_size != 0) & (i.y_size != 0),
                **{f"room{e}": depth[e] - i.sram_base for e in (0, 1)},
                **{f"droom{e}": limit[e] - i.dram_base - i.x_size for e in (0, 1)},
            }

        def stage2(r):
            extent = r["x_total"] * r["y_total"]
            reach = r["y_less"] * r["x_stride"]
            return {**{f"sram_oob{e}": extent > r[f"room{e}"] for e in (0, 1)},
                    **{f"dram_oob{e}": r["moves"] & (reach > r[f"droom{e}"]) for e in (0, 1)}}

        chk, checked = lookahead_checks(m, c, self.cmd, in_pop, leave, stage1, stage2)

        def fail(code):
            report_error(m, self.error, code, index)

        def accept():
            accept_command(m, self.cmd, insn, index)

        def complete():
            # Push (the last SRAM write lands at this clock edge at the latest, so the
            # consumer of the token sees it) and take the next command in the same
            # cycle; wait in PUSH while the token queue is full.
            m.d.comb += push_next.valid.eq(insn.push_next_dep)
            with m.If(~insn.push_next_dep | push_next.ready):
                m.d.sync += self.count.eq(self.count + 1)
                accept()
            with m.Else():
                m.next = "PUSH"

        def start(wgt):
            # Hand the instruction to its engine (idle here, the previous one is done).
            m.d.sync += sel.eq(wgt)
            m.d.comb += sel_now.eq(wgt)
            for i, e in enumerate(engines):
                m.d.comb += e.cmd.valid.eq(wgt == i)
            with m.If(Mux(wgt, engines[1].cmd.ready, engines[0].cmd.ready)):
                m.next = "WAIT"
            with m.Else():
                m.next = "START"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                accept()
            with m.State("POP"):
                m.d.comb += self.busy.eq(1)
                # No previous stage: its flags are illegal on any LOAD here, NOPs
                # included, and are refused before popping (as the model does).
                no_prev = insn.pop_prev_dep | insn.push_prev_dep
                is_inp = insn.memory_type == MemType.INP
                is_wgt = insn.memory_type == MemType.WGT
                # The range checks of this instruction are ready (``checked``), or the
                # instruction is decided without them.
                go = checked | (insn.x_size == 0) | (~is_inp & ~is_wgt)
                m.d.comb += pop_next.ready.eq(insn.pop_next_dep & ~no_prev & go)
                with m.If(no_prev):
                    m.d.comb += leave.eq(1)
                    fail(ErrorCode.ILLEGAL_FIELD)
                with m.Elif(go & (~insn.pop_next_dep | pop_next.valid)):
                    # The token is popped: act on the checks and start in this cycle.
                    m.d.comb += leave.eq(1)
                    with m.If(insn.x_size == 0):
                        m.next = "PUSH"
                    with m.Elif(~is_inp & ~is_wgt):
                        fail(ErrorCode.ILLEGAL_MEMORY_TYPE)
                    with m.Elif(is_inp & chk["sram_oob0"] | is_wgt & chk["sram_oob1"]):
                        fail(ErrorCode.SRAM_OUT_OF_RANGE)
                    with m.Elif(is_inp & chk["dram_oob0"] | is_wgt & chk["dram_oob1"]):
                        fail(ErrorCode.DRAM_OUT_OF_RANGE)
                    with m.Else():
                        start(is_wgt)
            with m.State("START"):
                m.d.comb += self.busy.eq(1)
                start(sel)
            with m.State("WAIT"):
                m.d.comb += self.busy.eq(1)
                # The last SRAM write lands at this clock edge (``last``), or the
                # instruction had nothing to write (``done`` alone).
                with m.If(engines[0].last | engines[1].last | engines[0].done | engines[1].done):
                    complete()
            with m.State("PUSH"):
                m.d.comb += self.busy.eq(1)
                complete()
            with m.State("ERROR"):
                pass
        m.d.comb += in_pop.eq(fsm.ongoing("POP"))
        return m
