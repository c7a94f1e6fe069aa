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
writes completed, and instructions complete (push, ``count``) in order.

Pipelining: the writer has its own FSM and its own copy of the fields it needs, so
the command FSM accepts the next instruction, pops its token, checks it and starts
its OUT SRAM reads (once the previous one's reads were all issued) while the writer
still sends the previous one's beats; the writer requests its bursts up to one ahead
of the burst whose beats it sends (request-ahead, :data:`~vtakit.hw.spec.WRITE_AHEAD`)
and takes the next instruction at the acceptance of the current one's last request
(the command FSM accepts the next command at that edge), so its first request follows
at once. A NOP or a fault waits until every earlier instruction completed (a fault is
reported as the model halts: the earlier STOREs written and counted). The writer holds
an instruction's last burst while the previous one's completion waits for room in the
s2g queue.

Timing: the range checks run two registered stages ahead, on the command at the
head of the queue (:func:`~vtakit.hw.load_engine.lookahead_checks`); the first OUT
SRAM read is issued in the cycle the token pop succeeds. A STORE of ``B`` beats
completes ``B`` cycles after the previous STORE when both move data and it was queued
in time (its bursts' requests were accepted while earlier beats streamed), and
``3 + B`` cycles after its acceptance otherwise (accept, pop + checks + first read,
the first request, beats, push), one more if it was accepted in the cycle it reached
the head of the queue (pinned by ``tests/test_rtl_dma_timing.py``).
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
        # pass) issues the instruction's first read at once if the reader is idle (the
        # previous instruction's reads all issued); the next ones follow from
        # r_addr/r_left.
        start = Signal()
        m.submodules.elems = elems = fifo.SyncFIFO(width=ebits, depth=4)
        r_addr = Signal(c.log_out_depth)
        r_left = Signal(33)
        r_idle = Signal(init=1)     # r_left == 0, as a register (it selects the read address)
        pending = Signal()          # a read issued last cycle: its data is on out_rd.data now
        issue = Signal()
        first = Signal()            # POP with the reader idle: the choice is made by registers
        m.d.comb += first.eq(in_pop & r_idle)
        rd_addr = Mux(first, insn.sram_base, r_addr)
        rd_left = Mux(first, total, r_left)
        room = elems.w_level + pending < elems.depth
        m.d.comb += [
            issue.eq(Mux(first, start, ~r_idle) & room),
            self.out_rd.en.eq(issue),
            self.out_rd.addr.eq(rd_addr),
        ]
        m.d.sync += pending.eq(issue)
        with m.If(issue):
            m.d.sync += [r_addr.eq(rd_addr + 1), r_left.eq(rd_left - 1), r_idle.eq(rd_left == 1)]
        with m.Elif(start):     # no room yet (the previous instruction's beats): read later
            m.d.sync += [r_addr.eq(insn.sram_base), r_left.eq(total), r_idle.eq(0)]

        # ------------------------------------------------------------- beat source
        # The shift register takes the oldest element: the FIFO head, or, when the FIFO
        # is empty, the element just read (bypassing the FIFO saves a cycle per start).
        # The elements of consecutive instructions follow each other in order.
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
        # Its own FSM with its own copy of the instruction's fields, so that the command
        # FSM accepts, pops and starts reading the next instruction while the writer
        # still sends this one's beats. Request-ahead: the writer's requests run up to
        # one burst ahead of its beats (the DRAM port accepts the next request while
        # the current one's beats stream), so the bursts of a STORE, and of STOREs back
        # to back, follow each other without a request cycle between them. Each accepted
        # request leaves a burst descriptor (beats, last of its instruction, push) for
        # the beats: ``cur_*`` for the burst whose beats are sent, ``nxt_*`` for the one
        # requested ahead. The writer takes the next instruction (``hand``) when idle
        # or at the acceptance of the current one's last request, and requests its first
        # burst in the next cycle.
        row_elem = Signal(DRAM_ADDR_BITS)
        rows_left = Signal(16)
        row_beats = Signal(32)
        w_row_beats = Signal(32)        # beats of each row (x_size << log_ratio)
        w_stride = Signal(16)
        w_push = Signal()
        w_addr = Signal(DRAM_ADDR_BITS)
        burst = Signal(range(MAX_BURST + 1))
        m.d.comb += burst.eq(Mux(row_beats > MAX_BURST, MAX_BURST, row_beats))
        m.d.comb += [self.dma.req.payload.addr.eq(w_addr), self.dma.req.payload.beats.eq(burst)]

        cur_left = Signal(range(MAX_BURST + 1))     # beats of the current burst to send
        cur_last = Signal()             # it is its instruction's last burst
        cur_push = Signal()
        nxt_valid = Signal()            # a burst requested ahead (then cur_left != 0)
        nxt_beats = Signal(range(MAX_BURST + 1))
        nxt_last = Signal()
        nxt_push = Signal()

        # Completion: the cycle after an instruction's last beat was accepted, push its
        # s2g token (if ``push_prev_dep``) and count it, in instruction order.
        done = Signal()                 # an instruction's last beat was accepted
        done_push = Signal()
        done_ok = Signal()
        in_push = Signal()              # the command FSM completes a NOP
        m.d.comb += [push_prev.valid.eq(Mux(in_push, insn.push_prev_dep, done & done_push)),
                     done_ok.eq(done & (~done_push | push_prev.ready))]
        with m.If(done_ok):
            m.d.sync += [done.eq(0), self.count.eq(self.count + 1)]

        # Beats: the last burst of an instruction waits while the previous instruction's
        # completion does (its token queue full), so that completions stay in order.
        final = cur_last & (cur_left == 1)
        m.d.comb += d.valid.eq((scnt != 0) & (cur_left != 0) & ~(cur_last & done & ~done_ok))
        ask = self.dma.req.valid & self.dma.req.ready
        new_last = Signal()             # the burst requested now is its instruction's last
        m.d.comb += new_last.eq((row_beats == burst) & (rows_left == 1))
        with m.If(take):
            m.d.sync += cur_left.eq(cur_left - 1)
            with m.If(final):
                m.d.sync += [done.eq(1), done_push.eq(cur_push)]
        # The current burst ends at this edge (or there is none): the next one moves up.
        with m.If((cur_left == 0) | (take & (cur_left == 1))):
            with m.If(nxt_valid):
                m.d.sync += [cur_left.eq(nxt_beats), cur_last.eq(nxt_last),
                             cur_push.eq(nxt_push), nxt_valid.eq(ask)]
            with m.Elif(ask):
                m.d.sync += [cur_left.eq(burst), cur_last.eq(new_last),
                             cur_push.eq(w_push)]
        with m.If(ask & (nxt_valid | ((cur_left != 0) & ~(take & (cur_left == 1))))):
            m.d.sync += [nxt_valid.eq(1), nxt_beats.eq(burst), nxt_last.eq(new_last),
                         nxt_push.eq(w_push)]

        hand = Signal()                 # the command FSM holds a started instruction
        w_take = Signal()               # the writer takes it from ``insn`` at this edge
        w_idle = Signal()
        all_done = Signal()             # every earlier instruction completed
        with m.FSM(name="writer") as wfsm:
            with m.State("IDLE"):
                m.d.comb += w_take.eq(hand)
                with m.If(hand):
                    m.next = "REQ"
            with m.State("REQ"):
                # At most one burst requested ahead of the one whose beats are sent.
                m.d.comb += self.dma.req.valid.eq(~nxt_valid)
                with m.If(ask):
                    m.d.sync += [row_beats.eq(row_beats - burst),
                                 w_addr.eq(w_addr + burst * c.bus_bytes)]
                    with m.If(row_beats == burst):
                        m.d.sync += rows_left.eq(rows_left - 1)
                        with m.If(rows_left == 1):
                            m.d.comb += w_take.eq(hand)
                            with m.If(~hand):
                                m.next = "IDLE"
                        with m.Else():
                            nxt = (row_elem + w_stride)[:DRAM_ADDR_BITS]
                            m.d.sync += [row_elem.eq(nxt), w_addr.eq(nxt << log_eb),
                                         row_beats.eq(w_row_beats)]
        m.d.comb += [w_idle.eq(wfsm.ongoing("IDLE") & (cur_left == 0)),
                     all_done.eq(w_idle & ~done)]
        # (after the FSM: these loads win over its updates in the cycle of the last request)
        with m.If(w_take):
            m.d.sync += [
                row_elem.eq(insn.dram_base), rows_left.eq(insn.y_size),
                w_addr.eq((insn.dram_base << log_eb)[:DRAM_ADDR_BITS]),
                row_beats.eq(insn.x_size << log_ratio), w_row_beats.eq(insn.x_size << log_ratio),
                w_stride.eq(insn.x_stride), w_push.eq(insn.push_prev_dep),
            ]

        def fail(code):
            report_error(m, self.error, code, index)

        def accept():
            accept_command(m, self.cmd, insn, index)

        f_code = Signal(ErrorCode)      # a fault found, reported once the earlier ones completed
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
                # instruction is decided without them; and the reader is idle.
                go = (checked | (insn.x_size == 0) | (insn.memory_type != MemType.OUT)
                      | (pads != 0)) & r_idle
                m.d.comb += pop_prev.ready.eq(insn.pop_prev_dep & ~no_next & go)

                def later(code):
                    m.d.sync += f_code.eq(code)
                    m.next = "FAIL"

                with m.If(no_next):
                    m.d.comb += leave.eq(1)
                    later(ErrorCode.ILLEGAL_FIELD)
                with m.Elif(go & (~insn.pop_prev_dep | pop_prev.valid)):
                    # The token is popped: act on the checks and start in this cycle.
                    m.d.comb += leave.eq(1)
                    with m.If(insn.x_size == 0):
                        m.next = "PUSH"
                    with m.Elif(insn.memory_type != MemType.OUT):
                        later(ErrorCode.ILLEGAL_MEMORY_TYPE)
                    with m.Elif(pads != 0):
                        later(ErrorCode.ILLEGAL_FIELD)
                    with m.Elif(chk["sram_oob"]):
                        later(ErrorCode.SRAM_OUT_OF_RANGE)
                    with m.Elif(chk["dram_oob"]):
                        later(ErrorCode.DRAM_OUT_OF_RANGE)
                    with m.Elif(insn.y_size == 0):      # (x_size != 0 here)
                        m.next = "PUSH"
                    with m.Else():
                        m.d.comb += [start.eq(1), hand.eq(1)]
                        m.next = "HAND"
                        with m.If(w_take):
                            accept()
            with m.State("HAND"):
                # Reading; the writer takes the instruction when it is free (the command
                # fields stay in ``insn`` until then) and the next command is accepted
                # at that edge.
                m.d.comb += [self.busy.eq(1), hand.eq(1)]
                with m.If(w_take):
                    accept()
            with m.State("PUSH"):
                # A NOP: once the earlier instructions completed, push, and take the next
                # command in the same cycle.
                m.d.comb += [self.busy.eq(1), in_push.eq(all_done)]
                with m.If(all_done & (~insn.push_prev_dep | push_prev.ready)):
                    m.d.sync += self.count.eq(self.count + 1)
                    accept()
            with m.State("FAIL"):
                m.d.comb += self.busy.eq(1)
                with m.If(all_done):
                    fail(f_code)
            with m.State("ERROR"):
                pass
        with m.If(~w_idle | done):
            m.d.comb += self.busy.eq(1)
        m.d.comb += in_pop.eq(fsm.ongoing("POP"))
        return m
