"""The VTA compute module: LOAD UOP/ACC, GEMM, ALU and FINISH, in stream order.

Instruction flow: accept a command, pop the tokens its pop flags name
(``l2g`` for ``pop_prev``, ``s2g`` for ``pop_next``, both in one cycle), check
its fields, execute it, then push one token per push flag (``g2l`` for
``push_prev``, ``g2s`` for ``push_next``); a push into a full queue waits.

Micro-op pipeline (GEMM and ALU share it; it never stalls once a uop issued)::

    S0  loop counters p > q > k; read UOP[k]                       (uop SRAM, sync)
    S1  dst/src/wgt = uop idx + offset, range check; read INP/WGT   (inp/wgt SRAM, sync)
    S2  dot products -> register (GemmCore); read ACC[dst], ACC[src] (acc SRAM, sync)
    S3  ACC[dst] = result; OUT[dst] = low 8 bits of each lane       (acc/out write)

One uop issues per cycle for GEMM (reset and accumulate) and for ALU with an
immediate or a tensor operand (the acc SRAM has two read ports). The loop
offsets ``p*factor_out + q*factor_in`` come from incremental adders. An
instruction of N uops occupies the module for N + 4 cycles, from accepting it
to accepting the next command: one dispatch cycle (pops and field checks), N
issue cycles, and S1..S3 of the last uop; its pushes, and the accept of the
next command, share the cycle of its last write (that write lands at the same
clock edge, so a token's consumer always sees it). A GEMM/ALU without push flags
whose next command is a GEMM/ALU with uops to run takes N + 1: that command is
accepted in the cycle its last uop issues and dispatched while S1..S3 drain (the
modes travel with the uops; a fault of a draining uop reports its own index).

Accumulate hazards (a uop reading the acc entry that one of the two uops
before it writes) are resolved by **forwarding** with zero cycles of cost:
both acc read ports are transparent to the acc write port, so a read issued
in S2 in the same cycle as the S3 write of the same entry returns the new
value, and a read one cycle later sees the updated memory. Results therefore
equal the sequential p > q > k order for every program.

Errors (``error`` holds the :class:`~vtakit.hw.interfaces.ErrorCode` and the
instruction index, and the module stops until reset): illegal opcode or LOAD
memory type, illegal fields (UOP load with ``y_size != 1`` or pads,
``uop_end < uop_bgn`` or ``uop_end >`` uop depth, an ALU opcode or operand the ALU
table does not allow in the config: opcode > SHR without an extension, tensor SHR,
``|shift| > 31``, MULSHR's shift outside ``1..62``), and any SRAM range violation (LOAD range, or a dst/src/wgt
index of a uop). Field checks happen after the pops, before any work; a uop
with an out-of-range index is squashed in S1, after the uops before it
completed, so the SRAMs hold exactly the state of sequential execution up to
the fault.

FINISH pulses ``finish`` in its dispatch cycle (after its pops), then pushes
and returns to idle; the next command is accepted one cycle after the pulse at
the earliest, which gives the top level a cycle to stop feeding commands (the
module itself does not know a run ended).
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from .alu import SHIFT_BITS, VectorAlu, alu_illegal
from .config import VTAConfig
from .gemm import GemmCore
from .interfaces import (CommandSignature, ErrorCode, ErrorReport, accept_command, dep_ports,
                         dma_read_signature, report_error, token_ports)
from .isa import MemType, Opcode, alu_opcode_bits, isa_for
from .load_engine import LoadEngine
from .spec import LOOP_ITER_BITS, Unit

__all__ = ["Compute", "compute_signature"]


def _empty_loop(loop):
    """A GEMM/ALU's loop fields (``isa.gemm`` layout) that run no micro-op."""
    return (loop.uop_bgn == loop.uop_end) | (loop.iter_out == 0) | (loop.iter_in == 0)


def compute_signature(config: VTAConfig) -> wiring.Signature:
    """The signature of :class:`Compute` (shared with stand-ins that tests put in its place)."""
    c = config
    return wiring.Signature({
        "cmd": In(CommandSignature),
        "uop_dma": Out(dma_read_signature(c)),
        "acc_dma": Out(dma_read_signature(c)),
        "inp_rd": In(memory.ReadPort.Signature(addr_width=c.log_inp_depth,
                                               shape=c.inp_elem_bits)),
        "wgt_rd": In(memory.ReadPort.Signature(addr_width=c.log_wgt_depth,
                                               shape=c.wgt_elem_bits)),
        "out_wr": In(memory.WritePort.Signature(addr_width=c.log_out_depth,
                                                shape=c.out_elem_bits)),
        **token_ports(Unit.COMPUTE),
        "finish": Out(1),
        "error": Out(ErrorReport),
        "gemm_count": Out(32),
        "alu_count": Out(32),
        "uop_count": Out(32),
    })


class Compute(wiring.Component):
    """The compute module (see the module docstring for the pipeline).

    Parameters
    ----------
    config : VTAConfig

    Attributes
    ----------
    cmd : In(CommandSignature)
        GEMM, ALU, FINISH and LOAD UOP/ACC (and compute NOPs) from fetch.
    uop_dma, acc_dma : Out(dma_read_signature)
        DRAM read ports of the UOP and ACC loads.
    inp_rd, wgt_rd : In(ReadPort.Signature)
        Read ports of the inp and wgt SRAMs (this module drives addr/en).
    out_wr : In(WritePort.Signature)
        Write port of the out SRAM.
    l2g, s2g : In(TokenSignature)
        Token sources popped by ``pop_prev`` and ``pop_next``.
    g2l, g2s : Out(TokenSignature)
        Token sinks pushed by ``push_prev`` and ``push_next``.
    finish : Out(1)
        One-cycle pulse when a FINISH executes.
    error : Out(ErrorReport)
        Sticky fault report.
    gemm_count, alu_count, uop_count : Out(32)
        Executed non-reset GEMM micro-ops and ALU micro-ops.
    uop_mem, acc_mem : Memory
        The micro-op and accumulator SRAMs (contents persist across runs).
    """

    def __init__(self, config: VTAConfig):
        self._config = c = config
        super().__init__(compute_signature(c))
        self.uop_mem = memory.Memory(shape=c.uop_elem_bits, depth=c.uop_depth, init=[])
        self.acc_mem = memory.Memory(shape=c.acc_elem_bits, depth=c.acc_depth, init=[])

    def elaborate(self, platform):
        dep = dep_ports(self, Unit.COMPUTE)     # token port of each dependency flag
        pop_prev = dep["pop_prev_dep"]
        pop_next = dep["pop_next_dep"]
        push_prev_q = dep["push_prev_dep"]
        push_next_q = dep["push_next_dep"]
        c = self._config
        isa = isa_for(c)
        m = Module()
        lanes = c.batch * c.block_out

        # ------------------------------------------------------------ memories
        m.submodules.uop_mem = self.uop_mem
        m.submodules.acc_mem = self.acc_mem
        uop_wr = self.uop_mem.write_port()
        uop_rd = self.uop_mem.read_port()
        acc_wr = self.acc_mem.write_port()
        acc_rd_dst = self.acc_mem.read_port(transparent_for=(acc_wr,))
        acc_rd_src = self.acc_mem.read_port(transparent_for=(acc_wr,))

        m.submodules.uop_load = uop_load = LoadEngine(
            c, elem_bits=c.uop_elem_bits, addr_width=c.log_uop_depth)
        m.submodules.acc_load = acc_load = LoadEngine(
            c, elem_bits=c.acc_elem_bits, addr_width=c.log_acc_depth)
        wiring.connect(m, uop_load.dma, wiring.flipped(self.uop_dma))
        wiring.connect(m, acc_load.dma, wiring.flipped(self.acc_dma))
        m.d.comb += [
            uop_wr.addr.eq(uop_load.sram.addr),
            uop_wr.data.eq(uop_load.sram.data),
            uop_wr.en.eq(uop_load.sram.en),
        ]

        m.submodules.gemm = gemm = GemmCore(c)
        m.submodules.alu = alu = VectorAlu(c)

        # --------------------------------------------------------- instruction
        insn = Signal(c.insn_bits)
        index = Signal(32)
        hdr = isa.finish.layout()(insn)
        mem = isa.mem.layout()(insn)
        loop = isa.gemm.layout()(insn)    # GEMM and ALU share the loop fields
        alu_f = isa.alu.layout()(insn)

        is_load = hdr.opcode == Opcode.LOAD
        is_gemm = hdr.opcode == Opcode.GEMM
        is_alu = hdr.opcode == Opcode.ALU
        is_finish = hdr.opcode == Opcode.FINISH
        is_nop = is_load & (mem.x_size == 0)
        load_uop = is_load & ~is_nop & (mem.memory_type == MemType.UOP)
        load_acc = is_load & ~is_nop & (mem.memory_type == MemType.ACC)
        pads = Cat(mem.y_pad_0, mem.y_pad_1, mem.x_pad_0, mem.x_pad_1)
        x_total = mem.x_pad_0 + mem.x_size + mem.x_pad_1
        y_total = mem.y_pad_0 + mem.y_size + mem.y_pad_1
        loop_insn = is_gemm | is_alu
        imm = alu_f.imm

        bad_opcode = ~(is_load | loop_insn | is_finish)
        bad_memtype = is_load & ~is_nop & ~load_uop & ~load_acc
        bad_field = (
            (load_uop & ((mem.y_size != 1) | (pads != 0)))
            | (loop_insn & ((loop.uop_end < loop.uop_bgn) | (loop.uop_end > c.uop_depth)))
            | (is_alu & alu_illegal(alu_f.alu_opcode, alu_f.use_imm, imm, c)))
        bad_range = (
            (load_uop & (mem.sram_base + mem.x_size > c.uop_depth))
            | (load_acc & (mem.sram_base + x_total * y_total > c.acc_depth)))
        empty_loop = _empty_loop(loop)

        # Per-instruction modes, latched at dispatch; S2 and S3 use copies that travel
        # with the uops (an overlapped dispatch latches the next ones while they drain).
        mode_gemm = Signal()
        mode_reset = Signal()
        alu_op = Signal(alu_opcode_bits(c))
        use_imm = Signal()
        imm_word = Signal(signed(c.acc_width))
        shift = Signal(signed(SHIFT_BITS))
        push_prev = Signal()
        push_next = Signal()
        # Copies of the modes that travel with the micro-ops in S2 and S3: the next
        # instruction may be dispatched while the last micro-ops of one without pushes
        # are still in S1..S3 (see ``overlap`` below).
        s2_gemm, s2_reads = Signal(), Signal()
        s3_gemm, s3_reset, s3_alu_op = Signal(), Signal(), Signal(alu_opcode_bits(c))
        s3_use_imm, s3_imm, s3_shift = Signal(), Signal(signed(c.acc_width)), Signal(
            signed(SHIFT_BITS))

        # ------------------------------------------------------ loop sequencer
        a_w, i_w, w_w = c.log_acc_depth, c.log_inp_depth, c.log_wgt_depth
        s_w = max(a_w, i_w)   # the uop's src field (inp index for GEMM, acc index for ALU)
        extra = LOOP_ITER_BITS + 2   # p*f_out + q*f_in + idx < 2**(w + 16)
        k = Signal(c.log_uop_depth + 1)
        q = Signal(LOOP_ITER_BITS)
        p = Signal(LOOP_ITER_BITS)
        dst_pbase, dst_off = Signal(a_w + extra), Signal(a_w + extra)
        src_pbase, src_off = Signal(s_w + extra), Signal(s_w + extra)
        wgt_pbase, wgt_off = Signal(w_w + extra), Signal(w_w + extra)
        issue = Signal()
        issue_last = Signal()

        k_last = k + 1 == loop.uop_end
        q_last = q + 1 == loop.iter_in
        p_last = p + 1 == loop.iter_out
        m.d.comb += [
            uop_rd.addr.eq(k),
            issue_last.eq(k_last & q_last & p_last),
        ]
        # Source factors: GEMM's are inp-index wide, ALU's acc-index wide.
        src_fo, src_fi = loop.src_factor_out, loop.src_factor_in
        src_fo_alu, src_fi_alu = alu_f.src_factor_out, alu_f.src_factor_in
        src_f_out = Signal(s_w)
        src_f_in = Signal(s_w)
        with m.If(mode_gemm):
            m.d.comb += [src_f_out.eq(src_fo), src_f_in.eq(src_fi)]
        with m.Else():
            m.d.comb += [src_f_out.eq(src_fo_alu), src_f_in.eq(src_fi_alu)]

        with m.If(issue):
            with m.If(k_last):
                m.d.sync += k.eq(loop.uop_bgn)
                with m.If(q_last):
                    m.d.sync += [
                        q.eq(0), p.eq(p + 1),
                        dst_pbase.eq(dst_pbase + loop.dst_factor_out),
                        dst_off.eq(dst_pbase + loop.dst_factor_out),
                        src_pbase.eq(src_pbase + src_f_out),
                        src_off.eq(src_pbase + src_f_out),
                        wgt_pbase.eq(wgt_pbase + loop.wgt_factor_out),
                        wgt_off.eq(wgt_pbase + loop.wgt_factor_out),
                    ]
                with m.Else():
                    m.d.sync += [
                        q.eq(q + 1),
                        dst_off.eq(dst_off + loop.dst_factor_in),
                        src_off.eq(src_off + src_f_in),
                        wgt_off.eq(wgt_off + loop.wgt_factor_in),
                    ]
            with m.Else():
                m.d.sync += k.eq(k + 1)

        # ----------------------------------------------------------- S1: index
        s1_valid = Signal()
        s1_dst_off = Signal.like(dst_off)
        s1_src_off = Signal.like(src_off)
        s1_wgt_off = Signal.like(wgt_off)
        m.d.sync += [
            s1_dst_off.eq(dst_off), s1_src_off.eq(src_off), s1_wgt_off.eq(wgt_off),
        ]
        uop = isa.uop.layout()(uop_rd.data)
        dst = Signal.like(dst_off)
        src = Signal.like(src_off)
        wgt = Signal.like(wgt_off)
        m.d.comb += [
            dst.eq(uop.dst_idx + s1_dst_off),
            src.eq(uop.src_idx + s1_src_off),
            wgt.eq(uop.wgt_idx + s1_wgt_off),
        ]
        reads_operands = mode_gemm & ~mode_reset
        s1_bad = Signal()
        m.d.comb += s1_bad.eq(s1_valid & (
            (dst >= c.acc_depth)
            | (reads_operands & ((src >= c.inp_depth) | (wgt >= c.wgt_depth)))
            | (~mode_gemm & ~use_imm & (src >= c.acc_depth))))
        m.d.comb += [
            self.inp_rd.addr.eq(src),
            self.inp_rd.en.eq(s1_valid & reads_operands),
            self.wgt_rd.addr.eq(wgt),
            self.wgt_rd.en.eq(s1_valid & reads_operands),
            gemm.inp.eq(self.inp_rd.data),
            gemm.wgt.eq(self.wgt_rd.data),
        ]

        # ------------------------------------------------------ S2: acc reads
        s2_valid = Signal()
        s2_dst = Signal(a_w)
        s2_src = Signal(a_w)
        m.d.sync += [
            s1_valid.eq(issue),
            s2_valid.eq(s1_valid & ~s1_bad),
            s2_dst.eq(dst),
            s2_src.eq(src),
            # S1 uses the live modes: an overlapped dispatch latches new ones at the end
            # of the cycle its predecessor's last micro-op is in S1
            s2_gemm.eq(mode_gemm), s2_reads.eq(reads_operands),
            s3_gemm.eq(s2_gemm), s3_reset.eq(s2_gemm & ~s2_reads),
        ]
        m.d.comb += [
            acc_rd_dst.addr.eq(s2_dst),
            acc_rd_src.addr.eq(s2_src),
            # Dot products only on cycles with a GEMM uop in S2 (the compiled
            # simulators then skip the products on every other cycle).
            gemm.en.eq(s2_valid & s2_reads),
        ]

        # ---------------------------------------------------- S3: write back
        s3_valid = Signal()
        s3_dst = Signal(a_w)
        m.d.sync += [s3_valid.eq(s2_valid), s3_dst.eq(s2_dst)]
        # the ALU operands of the micro-op entering S3 (each S2 cycle copies the live
        # ones, which an overlapped dispatch changes only once its predecessor's last
        # micro-op has left S1)
        s2_alu_op, s2_use_imm = Signal.like(alu_op), Signal()
        s2_imm, s2_shift = Signal.like(imm_word), Signal.like(shift)
        m.d.sync += [s2_alu_op.eq(alu_op), s2_use_imm.eq(use_imm), s2_imm.eq(imm_word),
                     s2_shift.eq(shift), s3_alu_op.eq(s2_alu_op), s3_use_imm.eq(s2_use_imm),
                     s3_imm.eq(s2_imm), s3_shift.eq(s2_shift)]
        m.d.comb += [
            gemm.acc.eq(acc_rd_dst.data),
            alu.op.eq(s3_alu_op),
            alu.a.eq(acc_rd_dst.data),
            alu.shift.eq(s3_shift),
        ]
        with m.If(s3_use_imm):
            m.d.comb += alu.b.eq(Cat([s3_imm] * lanes))
        with m.Else():
            m.d.comb += alu.b.eq(acc_rd_src.data)

        # Only written when S3 holds a uop: idle cycles skip the lane sums.
        result = Signal(c.acc_elem_bits)
        with m.If(s3_valid):
            with m.If(s3_gemm):
                with m.If(~s3_reset):
                    m.d.comb += result.eq(gemm.result)
            with m.Else():
                m.d.comb += result.eq(alu.result)

        with m.If(s3_valid):
            m.d.comb += [acc_wr.addr.eq(s3_dst), acc_wr.data.eq(result), acc_wr.en.eq(1)]
        with m.Else():
            m.d.comb += [
                acc_wr.addr.eq(acc_load.sram.addr),
                acc_wr.data.eq(acc_load.sram.data),
                acc_wr.en.eq(acc_load.sram.en),
            ]
        m.d.comb += [
            self.out_wr.addr.eq(s3_dst),
            self.out_wr.data.eq(Cat(result.word_select(j, c.acc_width)[:c.out_width]
                                    for j in range(lanes))),
            self.out_wr.en.eq(s3_valid & ~(s3_gemm & s3_reset)),
        ]
        with m.If(s3_valid & s3_gemm & ~s3_reset):
            m.d.sync += self.gemm_count.eq(self.gemm_count + 1)
        with m.If(s3_valid & ~s3_gemm):
            m.d.sync += self.alu_count.eq(self.alu_count + 1)
        with m.If(s3_valid):
            m.d.sync += self.uop_count.eq(self.uop_count + 1)

        # ------------------------------------------------------------- control
        # the index of the instruction whose micro-op is in S1 (an overlapped dispatch
        # has already taken the next one's)
        s1_index = Signal(32)
        m.d.sync += s1_index.eq(index)

        def fail(code, at=index):
            report_error(m, self.error, code, at)

        # Overlap: the last micro-op of a GEMM/ALU without pushes issues, and the next
        # command is a GEMM/ALU with micro-ops to run: take it in the same cycle, so its
        # dispatch and first issue follow at once while S1..S3 drain (the modes travel
        # with the micro-ops; acc reads forward from the writes in flight as within an
        # instruction). Anything else waits for the drain: a push must follow the last
        # write, LOAD ACC shares the acc write port, FINISH ends the run.
        nxt_hdr = isa.finish.layout()(self.cmd.payload.insn)
        nxt_loop = isa.gemm.layout()(self.cmd.payload.insn)
        overlap = Signal()
        m.d.comb += overlap.eq(
            ~push_prev & ~push_next & self.cmd.valid
            & ((nxt_hdr.opcode == Opcode.GEMM) | (nxt_hdr.opcode == Opcode.ALU))
            & ~_empty_loop(nxt_loop))

        def accept():
            accept_command(m, self.cmd, insn, index)

        def complete(prev, nxt, *, then_accept=True):
            # The work is done (its last SRAM write lands at this clock edge, so a
            # consumer of the token sees it): push, and take the next command in
            # the same cycle if nothing has to wait for room in a token queue.
            m.d.comb += [push_prev_q.valid.eq(prev), push_next_q.valid.eq(nxt)]
            m.d.sync += [push_prev.eq(prev & ~push_prev_q.ready),
                         push_next.eq(nxt & ~push_next_q.ready)]
            with m.If((~prev | push_prev_q.ready) & (~nxt | push_next_q.ready)):
                if then_accept:
                    accept()
                else:
                    m.next = "IDLE"
            with m.Else():
                m.next = "PUSH"

        with m.FSM():
            with m.State("IDLE"):
                accept()

            with m.State("POP"):
                tokens_ok = ((~hdr.pop_prev_dep | pop_prev.valid)
                             & (~hdr.pop_next_dep | pop_next.valid))
                m.d.comb += [
                    pop_prev.ready.eq(tokens_ok & hdr.pop_prev_dep & ~s1_bad),
                    pop_next.ready.eq(tokens_ok & hdr.pop_next_dep & ~s1_bad),
                ]
                with m.If(s1_bad):      # the overlapped predecessor's last micro-op
                    fail(ErrorCode.SRAM_OUT_OF_RANGE, s1_index)
                with m.Elif(tokens_ok):
                    # Dispatch: check the fields, latch the modes, start the work.
                    m.d.sync += [
                        push_prev.eq(hdr.push_prev_dep),
                        push_next.eq(hdr.push_next_dep),
                        mode_gemm.eq(is_gemm),
                        mode_reset.eq(loop.reset_reg),
                        alu_op.eq(alu_f.alu_opcode),
                        use_imm.eq(alu_f.use_imm),
                        imm_word.eq(imm),
                        shift.eq(imm[:SHIFT_BITS]),
                        k.eq(loop.uop_bgn), q.eq(0), p.eq(0),
                        dst_pbase.eq(0), dst_off.eq(0),
                        src_pbase.eq(0), src_off.eq(0),
                        wgt_pbase.eq(0), wgt_off.eq(0),
                    ]
                    with m.If(bad_opcode):
                        fail(ErrorCode.ILLEGAL_OPCODE)
                    with m.Elif(bad_memtype):
                        fail(ErrorCode.ILLEGAL_MEMORY_TYPE)
                    with m.Elif(bad_field):
                        fail(ErrorCode.ILLEGAL_FIELD)
                    with m.Elif(bad_range):
                        fail(ErrorCode.SRAM_OUT_OF_RANGE)
                    with m.Elif(load_uop | load_acc):
                        m.next = "LOAD_CMD"
                    with m.Elif(loop_insn & ~empty_loop):
                        m.next = "RUN"
                    with m.Elif(is_finish):
                        # Not taking a command in the cycle of the pulse gives the
                        # top level a cycle to stop feeding commands.
                        m.d.comb += self.finish.eq(1)
                        complete(hdr.push_prev_dep, hdr.push_next_dep, then_accept=False)
                    with m.Else():
                        # A sync-only NOP, or a loop with nothing to do.
                        complete(hdr.push_prev_dep, hdr.push_next_dep)

            with m.State("LOAD_CMD"):
                m.d.comb += [
                    uop_load.cmd.payload.eq(insn),
                    acc_load.cmd.payload.eq(insn),
                    uop_load.cmd.valid.eq(load_uop),
                    acc_load.cmd.valid.eq(load_acc),
                ]
                with m.If(Mux(load_uop, uop_load.cmd.ready, acc_load.cmd.ready)):
                    m.next = "LOAD_WAIT"
                with m.If(Mux(load_uop, uop_load.dram_oob, acc_load.dram_oob)):
                    fail(ErrorCode.DRAM_OUT_OF_RANGE)   # the engine refuses it

            with m.State("LOAD_WAIT"):
                with m.If(Mux(load_uop, uop_load.done, acc_load.done)):
                    complete(push_prev, push_next)

            with m.State("RUN"):
                with m.If(s1_bad):
                    fail(ErrorCode.SRAM_OUT_OF_RANGE, s1_index)
                with m.Else():
                    m.d.comb += issue.eq(1)
                    with m.If(issue_last):
                        with m.If(overlap):
                            m.d.comb += self.cmd.ready.eq(1)
                            m.d.sync += [insn.eq(self.cmd.payload.insn),
                                         index.eq(self.cmd.payload.index)]
                            m.next = "POP"
                        with m.Else():
                            m.next = "DRAIN"

            with m.State("DRAIN"):
                with m.If(s1_bad):
                    fail(ErrorCode.SRAM_OUT_OF_RANGE, s1_index)
                with m.Elif(~s1_valid & ~s2_valid):
                    # Only S3 may still be busy: its write lands at this edge.
                    complete(push_prev, push_next)

            with m.State("PUSH"):
                complete(push_prev, push_next)

            with m.State("ERROR"):
                pass

        return m
