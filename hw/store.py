"""The store module: STORE from the OUT SRAM to DRAM (reference 3.7).

Per instruction: ``pop_next_dep`` or ``push_next_dep`` set is ILLEGAL_FIELD (the
store module has no next stage; checked first, also for NOPs); pop a g2s token
if ``pop_prev_dep``; ``x_size == 0`` is a
sync-only NOP; otherwise the memory type must be OUT (else ILLEGAL_MEMORY_TYPE),
every pad 0 (else ILLEGAL_FIELD) and ``sram_base + x_size*y_size <= depth``
(else SRAM_OUT_OF_RANGE) and, if ``y_size > 0``, every DRAM byte written below
``2**32`` (else DRAM_OUT_OF_RANGE: ``dram_base`` is an element address, so the
byte address of the last row's end, computed at full width, can pass the 32-bit
byte address space; nothing is written then). The ``x_size*y_size`` source elements are contiguous
in the OUT SRAM; a reader streams them through a small FIFO (bypassed while it
is empty) while a writer sends each DRAM row as bursts of at most
:data:`~vtakit.hw.load_engine.MAX_BURST` beats. The s2g token (``push_prev_dep``)
is pushed after the last beat of the instruction was accepted, i.e. after its
writes completed.

Timing: the range checks run two registered stages ahead, on the command at the
head of the queue (:func:`~vtakit.hw.load_engine.lookahead_checks`); the first OUT
SRAM read is issued in the cycle the token pop succeeds; the next command is accepted
in the cycle of the push. So a STORE of ``B`` beats in ``n`` bursts takes
``3 + B + (n - 1)`` cycles from its acceptance to the next one's, one more if it was
accepted in the cycle it reached the head of the queue (pinned by
``tests/test_rtl_dma_timing.py``).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .interfaces import (DRAM_ADDR_BITS, CommandSignature, ErrorCode, ErrorReport,
                         accept_command, dep_ports, dma_write_signature, report_error,
                         token_ports)
from .isa import MemType, isa_for
from .load_engine import MAX_BURST, lookahead_checks
from .spec import Unit

__all__ = ["Store"]


class Store(wiring.Component):
    """The store module.

    Attributes
    ----------
    cmd : In(CommandSignature)
    dma : Out(dma_write_signature(config))
    out_rd : In(memory.ReadPort.Signature(...))
        Read port of the OUT SRAM (synchronous).
    g2s : In(TokenSignature)
        Token source for ``pop_prev_dep``.
    s2g : Out(TokenSignature)
        Token sink for ``push_prev_dep``.
    error : Out(ErrorReport)
    count : Out(32)
        Instructions completed.
    busy : Out(1)
    """

    def __init__(self, config: VTAConfig):
        self._config = config
        c = config
        super().__init__({
            "cmd": In(CommandSignature),
            "dma": Out(dma_write_signature(c)),
            "out_rd": In(memory.ReadPort.Signature(addr_width=c.log_out_depth,
                                                   shape=c.out_elem_bits)),
            **token_ports(Unit.STORE),
            "error": Out(ErrorReport),
            "count": Out(32),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        dep = dep_ports(self, Unit.STORE)     # token port of each dependency flag
        pop_prev = dep["pop_prev_dep"]
        push_prev = dep["push_prev_dep"]
        m = Module()
        c = self._config
        bus, ebits = c.bus_width, c.out_elem_bits
        ratio = c.out_axi_ratio
        log_ratio = ratio.bit_length() - 1
        log_eb = (ebits // 8).bit_length() - 1

        insn = Signal(isa_for(c).mem.layout())
        index = Signal(32)

        # The range checks, two registered stages ahead (``lookahead_checks``), from the
        # command at the head of the queue.
        in_pop = Signal()
        leave = Signal()        # POP decides this cycle

        def stage1(i):
            # SRAM: base + x_size*y_size <= depth; DRAM: one past the last element,
            # dram_base + (y_size-1)*x_stride + x_size, <= limit (full width), compared
            # as products against the room left.
            return {"x_size": i.x_size, "y_size": i.y_size,
                    "y_less": (i.y_size - 1)[:16], "x_stride": i.x_stride,
                    "room": c.out_depth - i.sram_base,
                    "droom": ((1 << DRAM_ADDR_BITS) >> log_eb) - i.dram_base - i.x_size}

        def stage2(r):
            moves = (r["x_size"] != 0) & (r["y_size"] != 0)
            total = r["x_size"] * r["y_size"]
            return {"total": total, "sram_oob": total > r["room"],
                    "dram_oob": moves & (r["y_less"] * r["x_stride"] > r["droom"])}

        chk, checked = lookahead_checks(m, c, self.cmd, in_pop, leave, stage1, stage2)
        total = chk["total"]        # x_size * y_size elements (valid in POP with ``checked``)

        # ------------------------------------------------------------- SRAM reader
        # ``start`` (combinational, in the cycle the token pop succeeds and the checks
        # pass) issues the first read at once; the next ones follow from r_addr/r_left.
        start = Signal()
        m.submodules.elems = elems = fifo.SyncFIFO(width=ebits, depth=4)
        r_addr = Signal(c.log_out_depth)
        r_left = Signal(33)
        pending = Signal()          # a read issued last cycle: its data is on out_rd.data now
        issue = Signal()
        # (in POP the reader is idle, r_left == 0: the choice is made by the state register)
        rd_addr = Mux(in_pop, insn.sram_base, r_addr)
        rd_left = Mux(in_pop, total, r_left)
        m.d.comb += [
            issue.eq(Mux(in_pop, start, r_left != 0) & (elems.w_level + pending < elems.depth)),
            self.out_rd.en.eq(issue),
            self.out_rd.addr.eq(rd_addr),
        ]
        m.d.sync += pending.eq(issue)
        with m.If(issue):
            m.d.sync += [r_addr.eq(rd_addr + 1), r_left.eq(rd_left - 1)]

        # ------------------------------------------------------------- beat source
        # The shift register takes the oldest element: the FIFO head, or, when the FIFO
        # is empty, the element just read (bypassing the FIFO saves a cycle per start).
        sreg = Signal(ebits)
        scnt = Signal(range(ratio + 1))
        d = self.dma.data
        take = d.valid & d.ready
        after = Signal.like(scnt)
        from_fifo = Signal()
        bypass = Signal()
        m.d.comb += [
            d.payload.eq(sreg[:bus]), after.eq(scnt - take),
            from_fifo.eq((after == 0) & elems.r_rdy),
            bypass.eq((after == 0) & ~elems.r_rdy & pending),
            elems.r_en.eq(from_fifo),
            elems.w_en.eq(pending & ~bypass),
            elems.w_data.eq(self.out_rd.data),
        ]
        m.d.sync += scnt.eq(after)
        with m.If(take):
            m.d.sync += sreg.eq(sreg >> bus)
        with m.If(from_fifo | bypass):
            m.d.sync += [sreg.eq(Mux(from_fifo, elems.r_data, self.out_rd.data)),
                         scnt.eq(ratio)]

        # ------------------------------------------------------------- DRAM writer
        row_elem = Signal(DRAM_ADDR_BITS)
        rows_left = Signal(16)
        row_beats = Signal(32)
        w_addr = Signal(DRAM_ADDR_BITS)
        burst = Signal(range(MAX_BURST + 1))
        beats_left = Signal(range(MAX_BURST + 1))
        m.d.comb += burst.eq(Mux(row_beats > MAX_BURST, MAX_BURST, row_beats))
        m.d.comb += [self.dma.req.payload.addr.eq(w_addr), self.dma.req.payload.beats.eq(burst)]

        def fail(code):
            report_error(m, self.error, code, index)

        def accept():
            accept_command(m, self.cmd, insn, index)

        with m.FSM() as fsm:
            with m.State("IDLE"):
                accept()
            with m.State("POP"):
                m.d.comb += self.busy.eq(1)
                # No next stage: its flags are illegal on any STORE, NOPs included,
                # and are refused before popping (as the model does).
                no_next = insn.pop_next_dep | insn.push_next_dep
                pads = insn.x_pad_0 | insn.x_pad_1 | insn.y_pad_0 | insn.y_pad_1
                # The range checks of this instruction are ready (``checked``), or the
                # instruction is decided without them.
                go = (checked | (insn.x_size == 0) | (insn.memory_type != MemType.OUT)
                      | (pads != 0))
                m.d.comb += pop_prev.ready.eq(insn.pop_prev_dep & ~no_next & go)
                with m.If(no_next):
                    m.d.comb += leave.eq(1)
                    fail(ErrorCode.ILLEGAL_FIELD)
                with m.Elif(go & (~insn.pop_prev_dep | pop_prev.valid)):
                    # The token is popped: act on the checks and start in this cycle.
                    m.d.comb += leave.eq(1)
                    with m.If(insn.x_size == 0):
                        m.next = "PUSH"
                    with m.Elif(insn.memory_type != MemType.OUT):
                        fail(ErrorCode.ILLEGAL_MEMORY_TYPE)
                    with m.Elif(pads != 0):
                        fail(ErrorCode.ILLEGAL_FIELD)
                    with m.Elif(chk["sram_oob"]):
                        fail(ErrorCode.SRAM_OUT_OF_RANGE)
                    with m.Elif(chk["dram_oob"]):
                        fail(ErrorCode.DRAM_OUT_OF_RANGE)
                    with m.Elif(insn.y_size == 0):      # (x_size != 0 here)
                        m.next = "PUSH"
                    with m.Else():
                        m.d.comb += start.eq(1)
                        m.d.sync += [
                            row_elem.eq(insn.dram_base), rows_left.eq(insn.y_size),
                            w_addr.eq((insn.dram_base << log_eb)[:DRAM_ADDR_BITS]),
                            row_beats.eq(insn.x_size << log_ratio),
                        ]
                        m.next = "REQ"
            with m.State("REQ"):
                m.d.comb += [self.busy.eq(1), self.dma.req.valid.eq(1)]
                with m.If(self.dma.req.ready):
                    m.d.sync += [beats_left.eq(burst), row_beats.eq(row_beats - burst),
                                 w_addr.eq(w_addr + burst * c.bus_bytes)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.busy.eq(1), d.valid.eq(scnt != 0)]
                with m.If(take):
                    m.d.sync += beats_left.eq(beats_left - 1)
                    with m.If(beats_left == 1):
                        m.next = "REQ"
                        with m.If(row_beats == 0):
                            m.d.sync += rows_left.eq(rows_left - 1)
                            with m.If(rows_left == 1):
                                m.next = "PUSH"
                            with m.Else():
                                nxt = (row_elem + insn.x_stride)[:DRAM_ADDR_BITS]
                                m.d.sync += [row_elem.eq(nxt), w_addr.eq(nxt << log_eb),
                                             row_beats.eq(insn.x_size << log_ratio)]
            with m.State("PUSH"):
                # The last beat was accepted at the previous clock edge: push, and take
                # the next command in the same cycle.
                m.d.comb += [self.busy.eq(1), push_prev.valid.eq(insn.push_prev_dep)]
                with m.If(~insn.push_prev_dep | push_prev.ready):
                    m.d.sync += self.count.eq(self.count + 1)
                    accept()
            with m.State("ERROR"):
                pass
        m.d.comb += in_pop.eq(fsm.ongoing("POP"))
        return m
