"""The compute module's ALU lane (config key ``COMPUTE_OVERLAP``: 1): ALU instructions that run
beside the GEMMs after them.

With the key set, the compute module (:class:`~vtakit.hw.compute.Compute`) hands an ALU
instruction to this lane instead of its own pipeline when the instruction's whole
footprint is known at dispatch and lies in one acc **bank** (the acc SRAM and the out
SRAM are split in two by the index's top bit, each bank one write and two read ports):

* one micro-op (``uop_end - uop_bgn == 1``), both loops non-empty, a base opcode or, with
  the ``requant2`` extension (:func:`lane_req`), REQ in any mode (REQ, REQ.M, REQ.P; the
  ``requant`` extension's late opcodes run in the GEMM lane, after this lane drained);
* its dst rows ``[dst, dst + (iter_out-1)*dst_factor_out + (iter_in-1)*dst_factor_in]``
  and, with a tensor operand, its src rows likewise, all in the bank of ``dst`` (so no
  micro-op of it can fault: the compute module knows it before dispatching it).

The lane queues up to :data:`LANE_DEPTH` (16) such instructions, in order, and runs their
micro-ops one per cycle on its own pipeline (two read ports and the write port of the
bank, a :class:`~vtakit.hw.alu.VectorAlu`; the one micro-op comes with the instruction)::

    L0  loop counters; the micro-op from the running instruction's entry
    L1  dst/src = uop idx + offset
    L2  read ACC[dst], ACC[src]          (the bank's ports)
    L3  register the data; match the lane's own writes it missed (forwarding)
    L4  ACC[dst] = ALU(acc, src|imm); OUT[dst] = its low bits

An instruction starts a cycle after the previous one's last micro-op issued (forwarding
resolves the back-to-back dependences, as in the GEMM lane); it retires when its last
write lands, and then pushes its tokens (a cycle later). An instruction with a push flag
is the last to start until it retired, so the lane's tokens go out in program order.

With ``requant2`` (:func:`lane_req`) the lane runs REQ on the compute module's REQ pipeline
(its VectorAlu's eight late stages and the one ``RM`` / ``RP``; the lane's own VectorAlu has
the base opcodes only, so no multiplier is added): L4 presents a REQ, REQ.M or REQ.P
micro-op there (``late_en``, ``late_a``, ``late_b``, ``late_shift``; the compute module muxes
them onto its ALU), it travels L5..L11 beside it, and a REQ writes ``late_data`` in L11
(REQ.M / REQ.P load ``RM`` / ``RP`` in the ALU's stage 1 and write nothing). The two lanes
never use that pipeline in the same cycle: the lane takes an instruction only when the GEMM
pipeline (late stages included) is empty, and the GEMM lane runs an ALU only once this lane
has drained, so ``RM`` / ``RP`` see the setups and REQs in program order. Three rules, as in
the GEMM lane (:class:`~vtakit.hw.compute.RequantHazard`, the ``gap``):

* **hold**: a micro-op in L2 whose acc reads (dst unless REQ.M / REQ.P; src with a tensor
  operand) hit the dst of a REQ in L3..L9 (a write it would neither read nor forward)
  stops L0..L2 (bubbles go down L3) until that write is in reach (at most 7 cycles);
* **gap**: a base micro-op issues 8 cycles after the last micro-op of a REQ / REQ.M /
  REQ.P instruction (not counting held cycles), so that its L4 write never meets a late
  write at the bank's port;
* **retire in order**: a base instruction retires at its last L4 write, a REQ / REQ.M /
  REQ.P instruction when its last micro-op leaves L11 (the gap keeps the order).

The compute module keeps everything else exact by construction: it gives the lane an
instruction only when its own pipeline is empty and no token of its own travels (every
older instruction has written and pushed), so all instructions in the lane are older
than anything the GEMM lane runs meanwhile; it holds a micro-op of the GEMM lane whose
dst lies in a bank with a queued or running lane instruction (``busy_bank``) until that
bank's instructions retired; it dispatches nothing but GEMMs and LOAD ACCs of the other
bank while the lane is busy, and a GEMM lane instruction with a push flag pushes only
once the lane is empty. So each bank has one user at a time (its ports are muxed, never
shared in a cycle), and every read sees the writes of all older instructions.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from .alu import SHIFT_BITS, VectorAlu, late_ops, late_stages
from .compute_seq import LoopSequencer
from .config import VTAConfig
from .isa import REQ_RUN, AluOp, alu_opcode_bits, isa_for

__all__ = ["AluLane", "LANE_DEPTH", "lane_req"]

#: ALU instructions the lane holds (queued or running): a tile's epilogue (up to nine
#: passes with a fused residual add) and the next tile's start, queued before that
#: tile's GEMMs dispatch.
LANE_DEPTH = 16


def lane_req(config) -> bool:
    """The lane also runs ``requant2``'s REQ (and its setups REQ.M / REQ.P): a config with
    ``COMPUTE_OVERLAP`` and the extension. Its late stages are the compute module's (one
    REQ pipeline, one ``RM`` / ``RP``: the two lanes never use it in the same cycle)."""
    return bool(config.compute_overlap) and AluOp.REQ in late_ops(config)


class AluLane(wiring.Component):
    """A queue of ALU instructions and the pipeline that runs them (module docstring).

    Parameters
    ----------
    config : VTAConfig

    Attributes
    ----------
    enq : In(1)
        Take ``enq_insn`` (an ALU instruction the compute module checked), of acc bank
        ``enq_bank``, with its push flags; only while ``full`` is low.
    full, busy : Out(1)
        No room for another instruction; some instruction is queued, running or pushing.
    busy_bank : Out(2)
        The banks of the instructions in the lane.
    enq_uop : In(uop_elem_bits)
        The instruction's one micro-op (``UOP[uop_bgn]``, which the compute module read for
        the footprint check): it is queued with the instruction, so the lane needs no port
        of the uop SRAM (nothing writes it while the lane holds an instruction).
    rd_dst_addr, rd_src_addr : Out(log_acc_depth); rd_dst_en, rd_src_en : Out(1)
    rd_dst_data, rd_src_data : In(acc_elem_bits)
        Reads of the acc SRAM (data the cycle after).
    wr_addr : Out(log_acc_depth); wr_data : Out(acc_elem_bits); wr_en : Out(1)
        The acc write (and the out write of ``out_data`` at the same index).
    out_data : Out(out_elem_bits)
    push_prev, push_next : Out(1); push_prev_ready, push_next_ready : In(1)
        The tokens of a retiring instruction (valid/ready).
    """

    def __init__(self, config: VTAConfig):
        self._config = c = config
        a_w = c.log_acc_depth
        super().__init__({
            "enq": In(1), "enq_insn": In(c.insn_bits), "enq_bank": In(1),
            "enq_push_prev": In(1), "enq_push_next": In(1),
            "full": Out(1), "busy": Out(1), "busy_bank": Out(2),
            "enq_uop": In(c.uop_elem_bits),
            "rd_dst_addr": Out(a_w), "rd_dst_en": Out(1), "rd_dst_data": In(c.acc_elem_bits),
            "rd_src_addr": Out(a_w), "rd_src_en": Out(1), "rd_src_data": In(c.acc_elem_bits),
            "wr_addr": Out(a_w), "wr_data": Out(c.acc_elem_bits), "wr_en": Out(1),
            "out_data": Out(c.out_elem_bits),
            "push_prev": Out(1), "push_next": Out(1),
            "push_prev_ready": In(1), "push_next_ready": In(1),
            **({"late_en": Out(1), "late_a": Out(c.acc_elem_bits),
                "late_b": Out(c.acc_elem_bits), "late_shift": Out(signed(SHIFT_BITS)),
                "late_data": In(c.acc_elem_bits), "count": Out(1)} if lane_req(c) else {}),
        })

    def elaborate(self, platform):
        c = self._config
        isa = isa_for(c)
        m = Module()
        a_w = c.log_acc_depth
        lanes = c.batch * c.block_out
        D = LANE_DEPTH
        # ``requant2`` (lane_req): REQ micro-ops go down the compute module's late stages
        # from L4 (its VectorAlu's REQ pipeline, ``late_*``) and write in L{4+L-1}; REQ.M
        # and REQ.P go down them too (they load RM / RP in the ALU's stage 1) and write
        # nothing. As in the GEMM lane, a micro-op whose reads hit a REQ's write still out
        # of reach waits in L2 (``hold``: L0..L2 stop, a bubble goes down L3), and a base
        # micro-op issues L cycles after the last of a REQ/REQ.M/REQ.P instruction
        # (``gap``), so that writes never meet at the port and instructions retire in order.
        req = lane_req(c)
        hold = Signal()

        # ------------------------------------------------------------ the queue
        e_valid = Signal(D)
        e_bank = Signal(D)
        e_pp = Signal(D)
        e_pn = Signal(D)
        # the instructions: a small memory (distributed RAM), written at the tail, read
        # (asynchronously) at the one after the next to start
        # (each entry: the instruction and its micro-op)
        entry_bits = c.insn_bits + c.uop_elem_bits
        enq_entry = Cat(self.enq_insn, self.enq_uop)
        m.submodules.insns = insns = memory.Memory(shape=entry_bits, depth=D, init=[])
        insn_wr = insns.write_port()
        insn_rd = insns.read_port(domain="comb")
        wp = Signal(range(D))       # next free slot
        ip = Signal(range(D))       # next to start
        ip1 = Signal(range(D), init=1)  # the slot after ip
        rp = Signal(range(D))       # oldest (next to retire)
        # ``busy_bank`` is a register (it holds the GEMM lane's front, and ``busy`` gates
        # the control's pushes and dispatches): the OR over the slots that stay valid
        # (all but the one retiring) and the one enqueued, i.e. the banks of ``e_valid``'s
        # next value
        retire = Signal()
        stay = Signal(D)
        bank_busy = Signal(2)
        m.d.comb += stay.eq(e_valid & ~Cat(retire & (rp == i) for i in range(D)))
        m.d.sync += bank_busy.eq(Cat((stay & ~e_bank).any() | (self.enq & ~self.enq_bank),
                                     (stay & e_bank).any() | (self.enq & self.enq_bank)))
        # ``full`` is a register too (it gates the dispatch of a lane instruction): the
        # slots fill at ``wp`` and retire at ``rp`` in order, so the lane is full when the
        # slot at ``wp`` is valid, i.e. next cycle the slot after ``wp`` stays valid (an
        # enqueue), or the lane was full and nothing retires
        wp1 = Signal(range(D), init=1)  # the slot after wp
        full = Signal()
        m.d.sync += full.eq(Mux(self.enq, stay.bit_select(wp1, 1), full & ~retire))
        m.d.comb += [
            self.full.eq(full),
            self.busy_bank.eq(bank_busy),
            self.busy.eq(bank_busy.any()),
        ]
        with m.If(self.enq):
            m.d.sync += [wp.eq(wp1), wp1.eq(Mux(wp1 == D - 1, 0, wp1 + 1))]
            for i in range(D):
                with m.If(wp == i):
                    m.d.sync += [e_valid[i].eq(1), e_bank[i].eq(self.enq_bank),
                                 e_pp[i].eq(self.enq_push_prev), e_pn[i].eq(self.enq_push_next)]

        # ------------------------------------------------------------ L0: issue
        # The start decision reads registers only (it drives the sequencer and ~250
        # enables): ``waiting`` counts the queued instructions not started yet (the slots
        # ip .. wp), ``head_ready`` is ``waiting != 0``, ``head_insn`` holds the slot ip,
        # ``push_wait`` an instruction with a push flag started and not retired (it is the
        # last to start until it retired, so the lane's tokens go out in program order).
        m.submodules.seq = seq = LoopSequencer(c)
        running = Signal()
        cur_insn = Signal(entry_bits)
        head_insn = Signal(entry_bits)
        waiting = Signal(range(D + 1))
        head_ready = Signal()
        push_wait = Signal()
        start = Signal()
        m.d.comb += start.eq(~running & head_ready & ~push_wait)
        issue = running
        alu_cur = isa.alu.layout()(cur_insn[:c.insn_bits])
        if req:
            L = late_stages(c)
            cur_late = alu_cur.alu_opcode == AluOp.REQ     # REQ, REQ.M or REQ.P
            gap = Signal(range(L))
            issue = Signal()
            m.d.comb += issue.eq(running & ~hold & ((gap == 0) | cur_late))
            with m.If(issue & seq.last & cur_late):
                m.d.sync += gap.eq(L - 1)
            with m.Elif((gap != 0) & ~hold):
                m.d.sync += gap.eq(gap - 1)
        m.d.comb += [insn_wr.addr.eq(wp), insn_wr.data.eq(enq_entry),
                     insn_wr.en.eq(self.enq), insn_rd.addr.eq(ip1)]
        with m.If(self.enq & ~start):
            m.d.sync += [waiting.eq(waiting + 1), head_ready.eq(1)]
        with m.Elif(start & ~self.enq):
            m.d.sync += [waiting.eq(waiting - 1), head_ready.eq(waiting != 1)]
        # the slot ip changes only when an enqueue fills it (it was free: no room
        # otherwise) or when its instruction starts (the head moves to ip1)
        with m.If(start):
            m.d.sync += head_insn.eq(Mux(self.enq & (wp == ip1), enq_entry, insn_rd.data))
        with m.Elif(self.enq & (wp == ip)):
            m.d.sync += head_insn.eq(enq_entry)
        # the sequencer reads the head while idle (it only loads then, at start) and the
        # running instruction otherwise: the select is a register
        m.d.comb += [seq.insn.eq(Mux(running, cur_insn, head_insn)[:c.insn_bits]),
                     seq.gemm.eq(0), seq.start.eq(start), seq.issue.eq(issue)]
        with m.If(~running):
            m.d.sync += cur_insn.eq(head_insn)
        with m.If(start):
            m.d.sync += [running.eq(1), ip.eq(ip1), ip1.eq(Mux(ip1 == D - 1, 0, ip1 + 1))]
            with m.If(e_pp.bit_select(ip, 1) | e_pn.bit_select(ip, 1)):
                m.d.sync += push_wait.eq(1)
        with m.Elif(issue & seq.last):
            m.d.sync += running.eq(0)

        def stage(name):
            return dict(valid=Signal(name=f"{name}_valid"), dst=Signal(a_w, name=f"{name}_dst"),
                        src=Signal(a_w, name=f"{name}_src"),
                        op=Signal(alu_opcode_bits(c), name=f"{name}_op"),
                        use_imm=Signal(name=f"{name}_use_imm"),
                        imm=Signal(signed(c.acc_width), name=f"{name}_imm"),
                        shift=Signal(signed(SHIFT_BITS), name=f"{name}_shift"),
                        last=Signal(name=f"{name}_last"),
                        **({"late": Signal(name=f"{name}_late"),
                            "setup": Signal(name=f"{name}_setup")} if req else {}))

        # ------------------------------------------------------------ L1: index
        l1 = stage("lane1")
        l1_dst_off = Signal.like(seq.dst_off)
        l1_src_off = Signal.like(seq.src_off)
        l1_uop = Signal(c.uop_elem_bits)
        l1_next = [
            l1_uop.eq(cur_insn[c.insn_bits:]),
            l1["valid"].eq(issue), l1["last"].eq(issue & seq.last),
            l1_dst_off.eq(seq.dst_off), l1_src_off.eq(seq.src_off),
            l1["op"].eq(alu_cur.alu_opcode), l1["use_imm"].eq(alu_cur.use_imm),
            l1["imm"].eq(alu_cur.imm), l1["shift"].eq(alu_cur.imm[:SHIFT_BITS]),
        ]
        if req:     # L0..L2 wait while held
            run_mode = alu_cur.imm[:2] == REQ_RUN
            with m.If(~hold):
                m.d.sync += [*l1_next, l1["late"].eq(cur_late & run_mode),
                             l1["setup"].eq(cur_late & ~run_mode)]
        else:
            m.d.sync += l1_next
        uop = isa.uop.layout()(l1_uop)
        # in range by the dispatch's footprint check: the low bits are the index
        m.d.comb += [l1["dst"].eq(uop.dst_idx + l1_dst_off), l1["src"].eq(uop.src_idx + l1_src_off)]

        # ------------------------------------------------------- L2..L4
        st = {1: l1}
        for s in (2, 3, 4):
            st[s] = stage(f"lane{s}")
            if req and s == 2:
                with m.If(~hold):
                    m.d.sync += [st[s][k].eq(st[s - 1][k]) for k in st[s]]
            else:
                m.d.sync += [st[s][k].eq(st[s - 1][k]) for k in st[s]]
        l2, l3, l4 = st[2], st[3], st[4]
        self._l2 = l2
        if req:     # a held micro-op stays in L2: a bubble goes on
            m.d.sync += [l3[k].eq(l2[k] & ~hold) for k in ("valid", "last")]
        m.d.comb += [
            self.rd_dst_addr.eq(l2["dst"]), self.rd_dst_en.eq(l2["valid"]),
            self.rd_src_addr.eq(l2["src"]), self.rd_src_en.eq(l2["valid"] & ~l2["use_imm"]),
        ]
        # forwarding of the lane's own two writes a read misses (as in the GEMM lane)
        w1_data = Signal(c.acc_elem_bits)
        w2_data = Signal(c.acc_elem_bits)
        w1_addr = Signal(a_w)
        w1_en = Signal()
        m.d.sync += [w1_data.eq(self.wr_data), w1_addr.eq(self.wr_addr), w1_en.eq(self.wr_en),
                     w2_data.eq(w1_data)]

        def forwarded(data, addr, name):
            hit1, hit2 = Signal(name=f"{name}_hit1"), Signal(name=f"{name}_hit2")
            m.d.sync += [hit1.eq(self.wr_en & (self.wr_addr == addr)),
                         hit2.eq(w1_en & (w1_addr == addr))]
            read = Signal(c.acc_elem_bits, name=f"{name}_read")
            with m.If(l3["valid"]):
                m.d.sync += read.eq(data)
            value = Signal(c.acc_elem_bits, name=f"{name}_fwd")
            m.d.comb += value.eq(Mux(hit1, w1_data, Mux(hit2, w2_data, read)))
            return value

        acc_dst = forwarded(self.rd_dst_data, l3["dst"], "lane_dst")
        acc_src = forwarded(self.rd_src_data, l3["src"], "lane_src")

        m.submodules.alu = alu = VectorAlu(c, late=not req)
        m.d.comb += [alu.op.eq(l4["op"]), alu.a.eq(acc_dst), alu.shift.eq(l4["shift"]),
                     alu.b.eq(Mux(l4["use_imm"], Cat([l4["imm"]] * lanes), acc_src))]
        result = Signal(c.acc_elem_bits)
        with m.If(l4["valid"]):
            m.d.comb += result.eq(alu.result)
        if req:
            last_done = self._late_stages(m, l3, l4, acc_dst, alu.b, result, hold)
        else:
            m.d.comb += [
                self.wr_addr.eq(l4["dst"]), self.wr_data.eq(result), self.wr_en.eq(l4["valid"]),
                self.out_data.eq(Cat(result.word_select(j, c.acc_width)[:c.out_width]
                                     for j in range(lanes))),
            ]
            last_done = l4["valid"] & l4["last"]

        # ------------------------------------------------------------ retire, push
        # the last write lands at the end of L4 (of a REQ: its late stage; REQ.M / REQ.P
        # leave that stage too); the tokens follow a cycle later
        pend_pp = Signal()
        pend_pn = Signal()
        pushing = Signal()
        with m.If(last_done):
            with m.If(e_pp.bit_select(rp, 1) | e_pn.bit_select(rp, 1)):
                m.d.sync += [pushing.eq(1), pend_pp.eq(e_pp.bit_select(rp, 1)),
                             pend_pn.eq(e_pn.bit_select(rp, 1))]
            with m.Else():
                m.d.comb += retire.eq(1)
        m.d.comb += [self.push_prev.eq(pushing & pend_pp), self.push_next.eq(pushing & pend_pn)]
        left_pp = pend_pp & ~self.push_prev_ready
        left_pn = pend_pn & ~self.push_next_ready
        with m.If(pushing):
            m.d.sync += [pend_pp.eq(left_pp), pend_pn.eq(left_pn)]
            with m.If(~left_pp & ~left_pn):
                m.d.sync += [pushing.eq(0), push_wait.eq(0)]
                m.d.comb += retire.eq(1)
        with m.If(retire):
            m.d.sync += rp.eq(Mux(rp == D - 1, 0, rp + 1))
            for i in range(D):
                with m.If(rp == i):
                    m.d.sync += e_valid[i].eq(0)
        return m

    def _late_stages(self, m, l3, l4, acc_dst, operand_b, result, hold):
        """``requant2`` (:func:`lane_req`): L4 hands REQ / REQ.M / REQ.P micro-ops to the
        compute module's REQ pipeline (``late_*``), they travel L5..L{L+3} beside it and
        a REQ writes ``late_data`` in L{L+3}; the write port takes that or L4's base
        result (the gap keeps them apart). Drives ``hold`` (the micro-op in L2 reads a
        REQ's dst still out of reach: :class:`~vtakit.hw.compute.RequantHazard`, its
        producers L3..L{L+1}) and returns the retire strobe of an instruction's last
        micro-op (base: L4; REQ and its setups: L{L+3}, in order by the gap)."""
        from .compute import RequantHazard     # (compute imports this module)
        c = self._config
        a_w = c.log_acc_depth
        lanes = c.batch * c.block_out
        L = late_stages(c)
        late_any = l4["late"] | l4["setup"]
        m.d.comb += [self.late_en.eq(l4["valid"] & late_any), self.late_a.eq(acc_dst),
                     self.late_b.eq(operand_b), self.late_shift.eq(l4["shift"]),
                     self.count.eq(l4["valid"])]
        # L5..L{L+3}: valid (any late micro-op), write (a REQ), dst, last
        prev = (l4["valid"] & late_any, l4["valid"] & l4["late"], l4["dst"], l4["last"])
        chain = []
        for s in range(1, L):
            v, w = Signal(name=f"lane_late{s}_valid"), Signal(name=f"lane_late{s}_write")
            d, la = Signal(a_w, name=f"lane_late{s}_dst"), Signal(name=f"lane_late{s}_last")
            m.d.sync += [v.eq(prev[0]), w.eq(prev[1]), d.eq(prev[2]), la.eq(prev[3])]
            chain.append((v, w, d, la))
            prev = (v, w, d, la)
        lw_valid, lw_write, lw_dst, lw_last = chain[-1]
        base_wr = l4["valid"] & ~late_any
        data = Signal(c.acc_elem_bits)
        m.d.comb += [
            data.eq(Mux(lw_write, self.late_data, result)),
            self.wr_addr.eq(Mux(lw_write, lw_dst, l4["dst"])), self.wr_data.eq(data),
            self.wr_en.eq(base_wr | lw_write),
            self.out_data.eq(Cat(data.word_select(j, c.acc_width)[:c.out_width]
                                 for j in range(lanes))),
        ]
        m.submodules.hazard = hazard = RequantHazard(c)
        producers = [(l3["valid"] & l3["late"], l3["dst"]), (l4["valid"] & l4["late"], l4["dst"]),
                     *((v & w, d) for v, w, d, _ in chain)]
        l2 = self._l2
        m.d.comb += [hazard.valid.eq(l2["valid"]), hazard.dst.eq(l2["dst"]),
                     hazard.src.eq(l2["src"]), hazard.src_en.eq(~l2["use_imm"]),
                     hazard.dst_en.eq(~l2["setup"]), hold.eq(hazard.hold)]
        for i, (v, d) in enumerate(producers[:L - 1]):
            m.d.comb += [hazard.prod_valid[i].eq(v), hazard.prod_dst[i].eq(d)]
        return (base_wr & l4["last"]) | (lw_valid & lw_last)
