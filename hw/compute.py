"""The VTA compute module: LOAD UOP/ACC, GEMM, ALU and FINISH, in stream order.

Instruction flow: accept a command, pop the tokens its pop flags name
(``l2g`` for ``pop_prev``, ``s2g`` for ``pop_next``, both in one cycle), check
its fields, execute it, then push one token per push flag (``g2l`` for
``push_prev``, ``g2s`` for ``push_next``); a push into a full queue waits.

Micro-op pipeline (GEMM and ALU share it; it never stalls once a uop issued, except for the
``requant`` extension's hold below). W is
:func:`write_stage` (``2 +`` :func:`~vtakit.hw.gemm.gemm_latency`: 6 for BLOCK 8 and 16),
so that no stage holds more than one SRAM access, one multiplier or two adder levels::

    S0       loop counters p > q > k; read UOP[k]                   (uop SRAM, sync)
    S1       dst/src/wgt = uop idx + offset, range check; read INP/WGT
    S2..     GemmCore: operand registers, products, adder tree -> dot registers
    S{W-2}   read ACC[dst], ACC[src]                                (acc SRAM, sync)
    S{W-1}   register the acc data; match the writes it missed
    S{W}     ACC[dst] = acc + dot or ALU(acc, src|imm); OUT[dst] = low 8 bits of each lane

One uop issues per cycle for GEMM (reset and accumulate) and for ALU with an
immediate or a tensor operand (the acc SRAM has two read ports). The loop
offsets ``p*factor_out + q*factor_in`` come from incremental adders.

The extensions' late opcodes take L = :func:`~vtakit.hw.alu.late_stages` stages: the
``requant`` extension's SRDHM, RSHR and MULSHR four (operands into the registered
multipliers in S{W}, products, their sum, rounding and write in S{W+3}), the ``requant2``
extension's REQ eight (bias add in S{W} ... clamp and write in S{W+7}; ``VectorAlu``).
They issue one per cycle too; a micro-op issued ``d`` cycles after one of them reads at
the end of its S{W-2} and forwards the writes up to the end of its S{W-1}, so it sees
that late write only for ``d >= L``. Two rules keep the results those of sequential
execution:

* **hold** (:class:`RequantHazard`): a micro-op in S2 whose acc reads (dst, and src
  with a tensor operand) hit the dst of a late micro-op in S3..S{L+1}
  stops the front (the sequencer, S1 and S2; the uop SRAM read too) and bubbles go
  down S3.. until that write is in reach (at most ``L - 1`` cycles);
  independent micro-ops (a requant pass writes its own rows and reads a parameter row
  nothing in it writes) never wait;
* **gap**: after the last micro-op of a late instruction, a micro-op of a
  following base GEMM/ALU issues ``L`` cycles later at the earliest (not
  counting held cycles), so its write in S{W} never meets a late write at the acc
  port and its reads see them all; a following late instruction issues at once
  (its writes are late too, its reads are held as above). A late instruction of N
  micro-ops without hazards thus takes N + 1 cycles from accept to accept when
  overlapped (below), and the next base loop issues L - 2 cycles later than it would
  after a base one.

``requant2``'s setup micro-ops REQ.M and REQ.P (REQ with imm 1, 2) go down the late
pipeline as far as the ALU's stage 1 (S{W+1}), where they load the per-lane registers
RM / RP, so that a REQ micro-op reads them (in the same stage) exactly as the micro-ops
before it in program order left them. They write no SRAM (no ACC/OUT write, no hazard
producers, no gap after them; the gap of a REQ pass before them goes on counting), read
only their src (the hold ignores their dst) and count as ALU micro-ops. An
instruction of N uops that drains occupies the module for N + 1 + W cycles, from
accepting it to accepting the next command: one dispatch cycle (pops and field
checks), N issue cycles, and S1..S{W} of the last uop; its pushes, and the accept of
the next command, share the cycle of its last write (that write lands at the same
clock edge, so a token's consumer always sees it). A GEMM/ALU whose next command is
a GEMM/ALU with uops to run, or a LOAD UOP, takes N + 1: that command is accepted in
the cycle its last uop issues and dispatched while S1..S{W} drain (the modes travel
with the uops; a fault of a draining uop reports its own index; the draining uops
have read the uop SRAM already, and a LOAD UOP completes, and pushes, only after they
wrote). While the front is held the dispatch waits (S1 reads the live modes, and the
micro-op held there is its predecessor's).

**Pushes in the pipeline.** The push flags of such an overlapped instruction travel
with its last micro-op (S1, S2..S{W}, and the late stages of a late one) and its
tokens are pushed in the cycle that micro-op's write lands (S{W}, or S{W+L-1}): the
same edge as after a drain. The pipeline does not wait after issue, so the room is
known beforehand: this module is the only producer of g2l and g2s, and an instruction
with a push flag overlaps only if ``room_prev``/``room_next`` (registers: the queue
had room and took no token in the cycle before, and no token of this module is
travelling to it) allow it; at most one token travels per queue. Otherwise, and for
``requant2``'s setups with push flags (they write nothing and issue before a preceding
REQ pass's late writes land), the instruction drains as above. A squashed micro-op
(a fault) loses its flags: the instructions before it push, it does not. A drain's own
push (a LOAD UOP's) waits for a token still travelling to the same queue.

Accumulate hazards (a uop reading the acc entry that one of the two uops
before it writes in S{W}) are resolved by **forwarding** with zero cycles of cost: the
read at the end of S{W-2} misses the write at that edge and at the next one; both
writes are kept (address and data) and replace the
read data in S{W} where the address matches, the later one first. Results therefore
equal the sequential p > q > k order for every program (with the hold and gap rules
above for the requant micro-ops' late writes).

Errors (``error`` holds the :class:`~vtakit.hw.interfaces.ErrorCode` and the
instruction index, and the module stops until reset): illegal opcode or LOAD
memory type, illegal fields (UOP load with ``y_size != 1`` or pads,
``uop_end < uop_bgn`` or ``uop_end >`` uop depth, an ALU opcode or operand the ALU
table does not allow in the config: opcode > SHR without an extension, tensor SHR,
``|shift| > 31``, MULSHR's shift outside ``1..62``), and any SRAM range violation (LOAD range, or a dst/src/wgt
index of a uop). Field checks happen after the pops, before any work; a uop
with an out-of-range index is squashed in S1 and the fault is reported once the
uops before it (in S2..S{W}) have written, so the SRAMs hold exactly the state of
sequential execution up to the fault when the error becomes visible.

With the config key ``COMPUTE_OVERLAP`` (off by default; off, this module's Verilog is
unchanged) an ALU instruction whose footprint is known at dispatch runs in a second lane
(:mod:`~vtakit.hw.compute_lane`) beside the GEMMs after it, on an acc SRAM and an out SRAM
split into two banks by the index's top bit; a GEMM micro-op whose dst lies in a bank
with a lane instruction is held in S2 (the same front hold as the extension's). With
``requant2`` too (:func:`~vtakit.hw.compute_lane.lane_req`) the lane takes REQ, REQ.M and
REQ.P as well and runs them on this module's REQ pipeline (its ALU's inputs muxed to the
lane's L4 while the lane presents one: the two lanes never use it in the same cycle).

With the config key ``UOP_STREAM`` (off by default; off, this module's Verilog is unchanged)
a LOAD UOP without push flags whose checks passed **streams**: once the uop load engine took
its command (state LOAD_CMD) the module accepts the next command instead of waiting in
LOAD_WAIT, and ``stream_pend`` holds the range still to be written, ``[stream_wp,
stream_end)`` (``stream_wp`` follows the engine's writes, which go in address order), until
the engine's ``done``. Meanwhile, in POP:

* a GEMM/ALU with micro-ops to run dispatches only when ``[uop_bgn, uop_end)`` does not meet
  that range: the compare is registered (``clash``) and read once it is of this instruction
  (``clash_fresh``: a cycle after its accept), so a GEMM whose micro-ops arrived starts while
  the rest of the kernel streams in (S0 reads UOP[k] a cycle after its write landed at the
  earliest). An ALU-lane instruction (COMPUTE_OVERLAP) waits the same way, and its footprint
  check (which reads UOP[uop_bgn] and hands that micro-op to the lane) starts over while the
  range meets it (``fp_age``), so it reads the streamed word;
* a LOAD ACC without push flags dispatches (the acc engine runs beside the uop engine, their
  bursts share the DRAM read port; its DRAM range fault waits for the stream, as for the ALU
  lane); another LOAD UOP, FINISH, any command with push flags and any command that faults
  wait for the stream's end, so tokens keep today's order and a fault is reported only
  when the SRAMs hold the state of sequential execution up to it (a micro-op fault of a
  GEMM that ran beside the stream waits in FAULT for it too). A LOAD UOP that fails its
  checks never streams;
* a LOAD ACC, FINISH and a command that pushes at once (a NOP or an empty loop) taken while
  older micro-ops drain (the stream's accept does not wait for them) wait for the drain and
  for tokens that travel, as after LOAD_WAIT's drain.

The stream never overwrites micro-ops still to be read: the GEMM lane accepts a command only
after its last micro-op issued (S0 read it), and the ALU lane's instructions hold their one
micro-op; with the ALU lane a LOAD UOP without push flags also dispatches beside a busy lane.

FINISH pulses ``finish`` in its dispatch cycle (after its pops), then pushes
and returns to idle; the next command is accepted one cycle after the pulse at
the earliest, which gives the top level a cycle to stop feeding commands (the
module itself does not know a run ended).
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .alu import SHIFT_BITS, VectorAlu, alu_illegal, late_ops, late_stages
from .config import VTAConfig
from .gemm import GemmCore, gemm_latency
from .interfaces import (CommandSignature, ErrorCode, ErrorReport, accept_command, dep_ports,
                         dma_read_signature, report_error, token_ports)
from .isa import REQ_RUN, AluOp, MemType, Opcode, alu_opcode_bits, isa_for
from .compute_lane import AluLane, lane_req
from .compute_seq import LoopSequencer
from .load_engine import LoadEngine, lookahead_checks, padded_size
from .spec import LOOP_ITER_BITS, Unit

__all__ = ["Compute", "RequantHazard", "compute_signature", "write_stage"]


class _VPort:
    """A memory port's signals (addr, data, en) that the overlap muxes onto a bank."""

    def __init__(self, addr, data, en):
        self.addr, self.data, self.en = addr, data, en


def _empty_loop(loop):
    """A GEMM/ALU's loop fields (``isa.gemm`` layout) that run no micro-op."""
    return (loop.uop_bgn == loop.uop_end) | (loop.iter_out == 0) | (loop.iter_in == 0)


def write_stage(config: VTAConfig) -> int:
    """The micro-op pipeline stage that writes ACC and OUT (S0 issues; S2 holds the
    inp/wgt data the GEMM core's stages start from)."""
    return 2 + gemm_latency(config)


def compute_signature(config: VTAConfig) -> wiring.Signature:
    """The signature of :class:`Compute` (shared with stand-ins that tests put in its place)."""
    c = config
    # with COMPUTE_OVERLAP the out SRAM is two banks (by the index's top bit): out_wr
    # writes bank 0, out_wr1 bank 1
    ov = 1 if c.compute_overlap else 0
    out_ports = {f"out_wr{b or ''}": In(memory.WritePort.Signature(
        addr_width=c.log_out_depth - ov, shape=c.out_elem_bits)) for b in range(1 + ov)}
    return wiring.Signature({
        "cmd": In(CommandSignature),
        "uop_dma": Out(dma_read_signature(c)),
        "acc_dma": Out(dma_read_signature(c)),
        "inp_rd": In(memory.ReadPort.Signature(addr_width=c.log_inp_depth,
                                               shape=c.inp_elem_bits)),
        "wgt_rd": In(memory.ReadPort.Signature(addr_width=c.log_wgt_depth,
                                               shape=c.wgt_elem_bits)),
        **out_ports,
        **token_ports(Unit.COMPUTE),
        "finish": Out(1),
        "error": Out(ErrorReport),
        "gemm_count": Out(32),
        "alu_count": Out(32),
        "uop_count": Out(32),
    })


class RequantHazard(wiring.Component):
    """The ``requant`` extension's hold: the micro-op in S2 reads an acc entry that a
    requant micro-op ahead of it writes too late for that read and its forwarding.

    A micro-op in S2 in cycle T is in S{W} in cycle T + W - 2 (no stage after S2 ever
    waits) and sees every acc write that lands at a clock edge up to the end of cycle
    T + W - 3 (its read at the end of S{W-2} sees the older ones, its forwarding the
    two after it). A requant micro-op in S{k} in cycle T writes at the end of cycle
    T + W + N - 1 - k (N = :func:`~vtakit.hw.alu.late_stages`: 4 with ``requant``, 8
    with ``requant2``): out of reach for k < N + 2, i.e. in S3..S{N+1} (``N - 1``
    producers, nearest first). While ``hold`` is high the compute module keeps the
    micro-op in S2 (and S1, S0) and sends bubbles on, so each cycle of it moves the
    producers a stage further; the hold ends once none of them hits (after at most
    ``N - 1`` cycles). With ``requant2`` the setup micro-ops REQ.M and REQ.P read only
    their src (``dst_en`` low) and are no producers (they write no SRAM).

    Timing: every input is a pipeline register (S2's dst/src were registered at the end
    of S1, the producers' are S3.. registers), so ``hold`` is a few equality compares
    and an OR from registers to the enables of the front; nothing of it is on the S1
    path (uop SRAM -> index add -> range compare -> ``bad_seen``).

    Parameters
    ----------
    config : VTAConfig

    Attributes
    ----------
    valid : In(1)
        S2 holds a micro-op.
    dst, src : In(log_acc_depth)
        Its acc indexes (``src`` is read only with ``src_en``: an ALU with a tensor operand).
    src_en : In(1)
    dst_en : In(1)
        Only with ``requant2``: ``dst`` is read (low for REQ.M and REQ.P).
    prod_valid : In(N - 1)
        Stage S{3+i} holds a late micro-op that writes.
    prod_dst : In(ArrayLayout(log_acc_depth, N - 1))
        Its dst.
    hold : Out(1)
    """

    def __init__(self, config: VTAConfig):
        a_w = config.log_acc_depth
        self._n = n = late_stages(config) - 1
        self._setup = AluOp.REQ in late_ops(config)
        super().__init__({
            "valid": In(1), "dst": In(a_w), "src": In(a_w), "src_en": In(1),
            **({"dst_en": In(1)} if self._setup else {}),
            "prod_valid": In(n), "prod_dst": In(data.ArrayLayout(a_w, n)),
            "hold": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        dst_hit = ((lambda i: self.dst_en & (self.prod_dst[i] == self.dst)) if self._setup
                   else (lambda i: self.prod_dst[i] == self.dst))
        hits = [self.prod_valid[i] & (dst_hit(i)
                                      | (self.src_en & (self.prod_dst[i] == self.src)))
                for i in range(self._n)]
        m.d.comb += self.hold.eq(self.valid & Cat(hits).any())
        return m


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
        #: The pipeline stage that writes ACC and OUT (S0 issues the micro-op).
        self.write_stage = write_stage(c)
        #: Forward the writes an acc read misses (False only for the formal tier's mutation).
        self.forwarding = True
        self.uop_mem = memory.Memory(shape=c.uop_elem_bits, depth=c.uop_depth, init=[])
        #: ``COMPUTE_OVERLAP``: an ALU lane beside the GEMM lane (:mod:`.compute_lane`)
        self.overlap = bool(c.compute_overlap)
        #: ``UOP_STREAM``: a LOAD UOP without push flags streams beside the commands after it
        self.uop_stream = bool(c.uop_stream)
        #: With the overlap, a test's probe: elaborate also drives ``main_idle_now`` (the
        #: definition of the register ``main_idle``, which it sets as ``main_idle_reg``)
        self.probe_main_idle = False
        #: With the overlap, a test's probe: elaborate sets ``lane_enq`` and ``lane_enq_insn``
        #: (the ALU lane's enqueue strobe and instruction; no logic added)
        self.probe_lane = False
        if self.overlap:
            #: The acc SRAM's two banks (index top bit 0 and 1), with the overlap.
            self.acc_banks = [memory.Memory(shape=c.acc_elem_bits, depth=c.acc_depth // 2,
                                            init=[]) for _ in range(2)]
        else:
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
        ov = self.overlap
        us = self.uop_stream

        # ------------------------------------------------------------ memories
        m.submodules.uop_mem = self.uop_mem
        uop_wr = self.uop_mem.write_port()
        uop_rd = self.uop_mem.read_port()
        if ov:
            # the GEMM lane's acc and out ports, muxed onto the banks at the end
            def vport(name, addr_w, bits):
                return _VPort(Signal(addr_w, name=f"{name}_addr"),
                              Signal(bits, name=f"{name}_data"), Signal(name=f"{name}_en"))
            acc_wr = vport("acc_wr", c.log_acc_depth, c.acc_elem_bits)
            acc_rd_dst = vport("acc_rd_dst", c.log_acc_depth, c.acc_elem_bits)
            acc_rd_src = vport("acc_rd_src", c.log_acc_depth, c.acc_elem_bits)
            out_main = vport("out_main", c.log_acc_depth, c.out_elem_bits)
        else:
            m.submodules.acc_mem = self.acc_mem
            acc_wr = self.acc_mem.write_port()
            # Not transparent: the pipeline forwards the writes a read misses (see S{W}).
            acc_rd_dst = self.acc_mem.read_port()
            acc_rd_src = self.acc_mem.read_port()
            out_main = self.out_wr

        m.submodules.uop_load = uop_load = LoadEngine(
            c, elem_bits=c.uop_elem_bits, addr_width=c.log_uop_depth, payload_early=True)
        m.submodules.acc_load = acc_load = LoadEngine(
            c, elem_bits=c.acc_elem_bits, addr_width=c.log_acc_depth, payload_early=True)
        wiring.connect(m, uop_load.dma, wiring.flipped(self.uop_dma))
        wiring.connect(m, acc_load.dma, wiring.flipped(self.acc_dma))
        m.d.comb += [
            uop_wr.addr.eq(uop_load.sram.addr),
            uop_wr.data.eq(uop_load.sram.data),
            uop_wr.en.eq(uop_load.sram.en),
        ]
        if us:
            # ``UOP_STREAM``: the range ``[stream_wp, stream_end)`` of a streamed LOAD UOP
            # still to be written (``stream_pend``); the engine writes in address order
            stream_pend = Signal()
            stream_wp = Signal(range(c.uop_depth + 1))
            stream_end = Signal(range(c.uop_depth + 1))
            with m.If(uop_load.sram.en):
                m.d.sync += stream_wp.eq(uop_load.sram.addr + 1)
            with m.If(uop_load.done):
                m.d.sync += stream_pend.eq(0)

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
        loop_insn = is_gemm | is_alu
        imm = alu_f.imm

        bad_opcode = ~(is_load | loop_insn | is_finish)
        bad_memtype = is_load & ~is_nop & ~load_uop & ~load_acc
        bad_field = (
            (load_uop & ((mem.y_size != 1) | (pads != 0)))
            | (loop_insn & ((loop.uop_end < loop.uop_bgn) | (loop.uop_end > c.uop_depth)))
            | (is_alu & alu_illegal(alu_f.alu_opcode, alu_f.use_imm, imm, c)))
        # The LOAD UOP/ACC SRAM range checks, two registered stages ahead of the dispatch
        # cycle (``lookahead_checks``, as in the load module): a multiply and a compare
        # there were the worst path of the design.
        in_pop = Signal()
        leave = Signal()        # POP decides this cycle

        def stage1(i):
            return {"x_size": i.x_size,
                    **dict(zip(("x_total", "y_total"), padded_size(i))),
                    "uop_room": c.uop_depth - i.sram_base,
                    "acc_room": c.acc_depth - i.sram_base,
                    **({"acc_base": i.sram_base} if ov else {})}

        def stage2(r):
            return {"uop_oob": r["x_size"] > r["uop_room"],
                    "acc_oob": r["x_total"] * r["y_total"] > r["acc_room"],
                    # the overlap's LOAD ACC beside the ALU lane: its bank, and whether
                    # it stays in it
                    **({"acc_bank": r["acc_base"] >= c.acc_depth // 2,
                        "acc_size": r["x_total"] * r["y_total"],
                        "acc_half_room": c.acc_depth // 2 - r["acc_base"]}
                       if ov else {})}

        chk, checked = lookahead_checks(m, c, self.cmd, in_pop, leave, stage1, stage2)
        if ov:
            # Whether the LOAD ACC stays in its bank: a third registered step (the multiply,
            # an add and a compare in one cycle were the design's worst path). ``acc_fit``
            # is the accepted instruction's once ``fit_valid``: its stage-2 registers were
            # already held in POP a cycle before. Only a LOAD ACC beside the ALU lane waits
            # for it.
            acc_fit, fit_valid = Signal(), Signal()
            m.d.sync += [acc_fit.eq(chk["acc_bank"] | (chk["acc_size"] <= chk["acc_half_room"])),
                         fit_valid.eq(in_pop & checked & ~leave)]
        bad_range = (load_uop & chk["uop_oob"]) | (load_acc & chk["acc_oob"])
        empty_loop = _empty_loop(loop)
        if us:
            # The accepted instruction's micro-ops meet the streamed range (``clash_now``),
            # registered (``clash``): POP reads it once it is of this instruction
            # (``clash_fresh``: no accept in the cycle before). The range only shrinks, so
            # a stale clash only waits a cycle longer.
            clash_now = (stream_pend & (loop.uop_bgn < stream_end)
                         & (loop.uop_end > stream_wp))
            clash = Signal()
            clash_fresh = Signal()
            m.d.sync += [clash.eq(clash_now),
                         clash_fresh.eq(~(self.cmd.valid & self.cmd.ready))]
        if ov:
            # The ALU lane's footprint check (see compute_lane): the rows of an ALU with
            # one micro-op, computed from the instruction in two registered steps after
            # it was accepted (``fp_age`` 2: ``fp_ok``/``fp_bank`` are its).
            uop_fp = self.uop_mem.read_port()
            m.d.comb += uop_fp.addr.eq(loop.uop_bgn)
            fuop = isa.uop.layout()(uop_fp.data)
            fp_age = Signal(range(3))
            with m.If(self.cmd.valid & self.cmd.ready):
                m.d.sync += fp_age.eq(0)
            with m.Elif(fp_age != 2):
                m.d.sync += fp_age.eq(fp_age + 1)
            if us:
                # ``UOP_STREAM``: the footprint check reads UOP[uop_bgn] again once the
                # stream wrote it (two steps after the clash ends, as after an accept)
                with m.If(clash_now):
                    m.d.sync += fp_age.eq(0)
            it_out = Signal(LOOP_ITER_BITS)
            it_in = Signal(LOOP_ITER_BITS)
            m.d.comb += [it_out.eq(loop.iter_out - 1), it_in.eq(loop.iter_in - 1)]
            # the spans (last row - first row) in the first step, so that the second
            # adds one of them to the uop SRAM's data (one adder after the SRAM read)
            spans = {}
            for key, f_out, f_in in (("d", loop.dst_factor_out, loop.dst_factor_in),
                                     ("s", alu_f.src_factor_out, alu_f.src_factor_in)):
                span = it_out * f_out + it_in * f_in
                spans[key] = Signal(len(span), name=f"fp_{key}span")
                m.d.sync += spans[key].eq(span)
            fp_bank = Signal()
            fp_ok = Signal()
            top = c.log_acc_depth - 1
            bank = fuop.dst_idx[top]

            def in_bank(x):
                return (x >> top) == bank

            def span_stays(idx, key):
                # ``idx + span`` stays in the bank of ``idx`` (non-negative): the span has
                # no bit at or above the bank's and the low bits do not carry into it
                # (one short carry chain after the uop SRAM's data, not an add and a compare)
                return ~spans[key][top:].any() & ~(idx[:top] + spans[key][:top])[top]
            # (with ``requant2`` the lane runs REQ too: lane_req; ``requant``'s stay here)
            base_op = (~Cat(alu_f.alu_opcode == op for op in late_ops(c)).any()
                       if late_ops(c) and not lane_req(c) else 1)
            m.d.sync += [
                fp_bank.eq(bank),
                fp_ok.eq(is_alu & base_op & ~bad_field
                         & (loop.uop_end == loop.uop_bgn + 1)
                         & (loop.iter_out != 0) & (loop.iter_in != 0)
                         & span_stays(fuop.dst_idx, "d")
                         & (alu_f.use_imm | (in_bank(fuop.src_idx)
                                             & span_stays(fuop.src_idx, "s")))),
            ]

        # Per-instruction modes, latched at dispatch; S2 and S3 use copies that travel
        # with the uops (an overlapped dispatch latches the next ones while they drain).
        mode_gemm = Signal()
        mode_reset = Signal()
        alu_op = Signal(alu_opcode_bits(c))
        # An ALU micro-op of an extension's late opcodes (SRDHM, RSHR, MULSHR; REQ) writes
        # its result L - 1 stages after S{W} (L = late_stages(c); ``VectorAlu.late``): a
        # later micro-op that reads it too early is held (``RequantHazard``), and a base
        # micro-op issues L cycles after the last of them (``gap``).
        has_late = hasattr(alu, "late")
        mode_late = Signal()
        # ``requant2``'s setup micro-ops (REQ.M, REQ.P) go down the late pipeline too
        # (they load the ALU's RM/RP in its stage 1) but write no SRAM: no hazard
        # producers, no gap after them, no dst read for the hold
        has_setup = AluOp.REQ in late_ops(c)
        if has_setup:
            mode_setup = Signal()
            req_setup = imm[:2] != REQ_RUN      # REQ's legal immediates are 0..2
        use_imm = Signal()
        imm_word = Signal(signed(c.acc_width))
        shift = Signal(signed(SHIFT_BITS))
        push_prev = Signal()
        push_next = Signal()

        # ------------------------------------------------------ loop sequencer
        a_w = c.log_acc_depth
        m.submodules.seq = seq = LoopSequencer(c)
        issue = Signal()
        issue_last = Signal()
        # ``hold``: the front (S0..S2) waits for a requant micro-op's write (RequantHazard)
        hold = Signal()
        if ov:
            m.submodules.lane = lane = AluLane(c)
            if self.probe_lane:
                self.lane_enq, self.lane_enq_insn = lane.enq, lane.enq_insn
        # cycles before a base micro-op may issue after the last micro-op of a requant
        # instruction (L - 1, not counting held cycles; a late one need not
        # wait); without the extension ``gap`` stays 0, in the one-bit form of the base
        # ISA's Verilog
        stages = late_stages(c) if has_late else 2
        gap = Signal(range(stages))
        if has_late:
            with m.If(issue & issue_last & mode_late):
                m.d.sync += gap.eq(stages - 1)
            with m.Elif((gap != 0) & ~hold):
                m.d.sync += gap.eq(gap - 1)
            no_gap = ((gap == 0) | mode_late) & ~hold
            if has_setup:
                no_gap = ((gap == 0) | mode_late | mode_setup) & ~hold
        else:
            with m.If(issue & mode_late):
                m.d.sync += gap.eq(stages - 1)
            with m.Elif(gap != 0):
                m.d.sync += gap.eq(gap - 1)
            no_gap = ~gap
            if ov:      # the ALU lane's hold stops the issue too
                no_gap = ~gap & ~hold
        dst_off, src_off, wgt_off = seq.dst_off, seq.src_off, seq.wgt_off
        m.d.comb += [
            seq.insn.eq(insn), seq.gemm.eq(mode_gemm), seq.issue.eq(issue),
            uop_rd.addr.eq(seq.k),
            issue_last.eq(seq.last),
        ]

        # ----------------------------------------------------------- S1: index
        s1_valid = Signal()
        s1_dst_off = Signal.like(dst_off)
        s1_src_off = Signal.like(src_off)
        s1_wgt_off = Signal.like(wgt_off)
        # S0..S2 advance unless held (only the extension holds: the uop SRAM's data, the
        # S1 offsets and valid, the S2 registers keep the micro-ops that wait)

        def front(stmts):
            if has_late or ov:
                with m.If(~hold):
                    m.d.sync += stmts
            else:
                m.d.sync += stmts

        if has_late or ov:
            m.d.comb += uop_rd.en.eq(~hold)
        front([s1_dst_off.eq(dst_off), s1_src_off.eq(src_off), s1_wgt_off.eq(wgt_off)])
        # The push flags of an overlapped instruction travel with its last micro-op
        # (``tail_prev``/``tail_next``: set in the cycle it issues, see ``overlap``).
        tail_prev = Signal()
        tail_next = Signal()
        s1_push_prev = Signal()
        s1_push_next = Signal()
        front([s1_push_prev.eq(tail_prev), s1_push_next.eq(tail_next)])
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
        if ov:
            # ``COMPUTE_OVERLAP``: the same check with less logic after the uop SRAM's
            # (unregistered) data: an index ``idx + off`` (the offsets never wrap:
            # compute_seq) is at or above a depth ``2**n`` iff the offset alone is
            # (``s1_*_high``, registered with the offsets from S0's registers), or the
            # index alone is, or the low ``n`` bits carry out of their sum
            highs = {}
            for key, off, n in (("dst", dst_off, c.log_acc_depth),
                                ("inp", src_off, c.log_inp_depth),
                                ("asrc", src_off, c.log_acc_depth),
                                ("wgt", wgt_off, c.log_wgt_depth)):
                highs[key] = Signal(name=f"s1_{key}_high")
                front([highs[key].eq((off >> n) != 0)])

            def beyond(key, idx, s1_off, n, depth):
                assert depth == 1 << n, (key, depth)
                return (highs[key] | ((idx >> n) != 0)
                        | (idx[:n] + s1_off[:n])[n])
            m.d.comb += s1_bad.eq(s1_valid & (
                beyond("dst", uop.dst_idx, s1_dst_off, c.log_acc_depth, c.acc_depth)
                | (reads_operands
                   & (beyond("inp", uop.src_idx, s1_src_off, c.log_inp_depth, c.inp_depth)
                      | beyond("wgt", uop.wgt_idx, s1_wgt_off, c.log_wgt_depth,
                               c.wgt_depth)))
                | (~mode_gemm & ~use_imm
                   & beyond("asrc", uop.src_idx, s1_src_off, c.log_acc_depth,
                            c.acc_depth))))
        else:
            m.d.comb += s1_bad.eq(s1_valid & (
                (dst >= c.acc_depth)
                | (reads_operands & ((src >= c.inp_depth) | (wgt >= c.wgt_depth)))
                | (~mode_gemm & ~use_imm & (src >= c.acc_depth))))
        operands_en = s1_valid & reads_operands
        if ov:
            # a held GEMM micro-op in S2 keeps its inp/wgt data (the GEMM core loads it
            # again each held cycle): S1 reads only when the front moves
            operands_en = operands_en & ~hold
        m.d.comb += [
            self.inp_rd.addr.eq(src),
            self.inp_rd.en.eq(operands_en),
            self.wgt_rd.addr.eq(wgt),
            self.wgt_rd.en.eq(operands_en),
            gemm.inp.eq(self.inp_rd.data),
            gemm.wgt.eq(self.wgt_rd.data),
        ]

        # ------------------------------------------- S2..S{W}: GEMM/ALU pipeline
        # The micro-op and its modes travel S2 -> S{W}; the GEMM core's stages run beside
        # them (its operands are the S2 SRAM data); the acc SRAM is read at S{W-2} and its
        # data registered in S{W-1}; S{W} writes ACC[dst] and OUT[dst].
        W = self.write_stage
        R = W - 2
        # A micro-op out of range in S1 sets ``bad_seen`` (sticky: a fault stops the module
        # until reset); the control acts on that register a cycle later, so the uop SRAM ->
        # index add -> compare path ends at a register. Every micro-op in S1 from then on
        # dies (the sequencer may issue one more before the control sees the fault).
        bad_seen = Signal()
        if ov:
            # ``COMPUTE_OVERLAP``: the range check ends at two registers next to it (the
            # uop SRAM -> add -> compare path into ``s2_valid`` and ``bad_seen``, which fan
            # out to the lane's bank hold and the control, was the worst path): ``s2_bad``
            # squashes S2's micro-op (its valid is ``s2_live & ~s2_bad``), ``bad_now`` is
            # the check of the cycle before, ``bad_seen`` its sticky OR (the same values).
            s2_live = Signal()
            s2_live_gemm = Signal()     # s2_live & s2_gemm, for the bank hold
            s2_bad = Signal()
            bad_now = Signal()
            bad_past = Signal()
            m.d.sync += bad_now.eq(s1_bad)
            with m.If(bad_now):
                m.d.sync += bad_past.eq(1)
            m.d.comb += bad_seen.eq(bad_past | bad_now)
        st = {}
        for s in range(2, W + 1):
            st[s] = dict(valid=Signal(name=f"s{s}_valid"), dst=Signal(a_w, name=f"s{s}_dst"),
                         src=Signal(a_w, name=f"s{s}_src"), gemm=Signal(name=f"s{s}_gemm"),
                         reads=Signal(name=f"s{s}_reads"), late=Signal(name=f"s{s}_late"),
                         alu_op=Signal(alu_opcode_bits(c), name=f"s{s}_alu_op"),
                         use_imm=Signal(name=f"s{s}_use_imm"),
                         imm=Signal(signed(c.acc_width), name=f"s{s}_imm"),
                         shift=Signal(signed(SHIFT_BITS), name=f"s{s}_shift"),
                         push_prev=Signal(name=f"s{s}_push_prev"),
                         push_next=Signal(name=f"s{s}_push_next"))
            if has_setup:
                st[s]["setup"] = Signal(name=f"s{s}_setup")
        # S1 uses the live modes: an overlapped dispatch latches new ones at the end of
        # the cycle its predecessor's last micro-op is in S1.
        if ov:
            m.d.comb += st[2]["valid"].eq(s2_live & ~s2_bad)
            s2_valid_next = [s2_live.eq(s1_valid & ~bad_seen), s2_bad.eq(s1_bad),
                             s2_live_gemm.eq(s1_valid & ~bad_seen & mode_gemm)]
        else:
            with m.If(s1_bad):
                m.d.sync += bad_seen.eq(1)
            s2_valid_next = [st[2]["valid"].eq(s1_valid & ~s1_bad & ~bad_seen)]
        front([
            s1_valid.eq(issue),
            *s2_valid_next,
            st[2]["dst"].eq(dst), st[2]["src"].eq(src),
            st[2]["gemm"].eq(mode_gemm), st[2]["reads"].eq(reads_operands),
            st[2]["late"].eq(mode_late),
            st[2]["alu_op"].eq(alu_op), st[2]["use_imm"].eq(use_imm),
            st[2]["imm"].eq(imm_word), st[2]["shift"].eq(shift),
            # a squashed micro-op (a fault) pushes nothing: its flags go on, its valid
            # bit does not, and a token lands only with a valid micro-op (the S1 check
            # stays out of the flags' path)
            st[2]["push_prev"].eq(s1_push_prev & ~bad_seen),
            st[2]["push_next"].eq(s1_push_next & ~bad_seen),
            *([st[2]["setup"].eq(mode_setup)] if has_setup else []),
        ])
        for s in range(3, W + 1):
            m.d.sync += [st[s][key].eq(st[s - 1][key]) for key in st[s]]
        if has_late or ov:     # a held micro-op stays in S2: a bubble goes on
            m.d.sync += [st[3][key].eq(st[2][key] & ~hold)
                         for key in ("valid", "push_prev", "push_next")]
        sw = st[W]
        # Dot products only on cycles with a GEMM uop in S2 (the compiled simulators
        # then skip the products on every other cycle).
        m.d.comb += [
            acc_rd_dst.addr.eq(st[R]["dst"]),
            acc_rd_src.addr.eq(st[R]["src"]),
            acc_rd_dst.en.eq(st[R]["valid"]),
            acc_rd_src.en.eq(st[R]["valid"] & ~st[R]["gemm"] & ~st[R]["use_imm"]),
            gemm.en.eq(st[2]["valid"] & st[2]["reads"]),
        ]

        # Forwarding: the acc read of a micro-op (at the end of S{W-2}) misses the write
        # at that same edge (the micro-op two ahead) and the one after it (the micro-op
        # one ahead): both are kept (address and data) and replace the read where the
        # address matches, the later one first. The match is computed a stage early.
        acc_wr_data = Signal(c.acc_elem_bits)
        acc_wr_addr = Signal(a_w)
        acc_wr_en = Signal()
        w1_data = Signal(c.acc_elem_bits)
        w2_data = Signal(c.acc_elem_bits)
        w1_addr = Signal(a_w)
        w1_en = Signal()
        m.d.sync += [w1_data.eq(acc_wr_data), w1_addr.eq(acc_wr_addr), w1_en.eq(acc_wr_en),
                     w2_data.eq(w1_data)]
        sr = st[W - 1]

        def forwarded(port, addr, name):
            # hit1: the write of this cycle (S{W}'s micro-op, or a LOAD ACC beat); hit2:
            # the write of the cycle before (w1), which becomes w2 next cycle
            hit1, hit2 = Signal(name=f"{name}_hit1"), Signal(name=f"{name}_hit2")
            if self.forwarding:
                m.d.sync += [hit1.eq(acc_wr_en & (acc_wr_addr == addr)),
                             hit2.eq(w1_en & (w1_addr == addr))]
            read = Signal(c.acc_elem_bits, name=f"{name}_read")
            with m.If(sr["valid"]):
                m.d.sync += read.eq(port.data)
            value = Signal(c.acc_elem_bits, name=f"{name}_fwd")
            m.d.comb += value.eq(Mux(hit1, w1_data, Mux(hit2, w2_data, read)))
            return value

        acc_dst = forwarded(acc_rd_dst, sr["dst"], "acc_dst")
        acc_src = forwarded(acc_rd_src, sr["src"], "acc_src")

        # ---------------------------------------------------- S{W}: write back
        if ov and lane_req(c):
            # the ALU lane's REQ micro-ops use this ALU's REQ pipeline (and its RM / RP):
            # never in a cycle with a micro-op of this lane's ALU (the lane takes an
            # instruction only when this pipeline is empty, and this lane runs an ALU
            # only once the lane has drained), so its inputs are simply muxed
            m.d.comb += [
                gemm.acc.eq(acc_dst),
                alu.op.eq(sw["alu_op"]),
                alu.a.eq(Mux(lane.late_en, lane.late_a, acc_dst)),
                alu.shift.eq(Mux(lane.late_en, lane.late_shift, sw["shift"])),
                alu.b.eq(Mux(lane.late_en, lane.late_b,
                             Mux(sw["use_imm"], Cat([sw["imm"]] * lanes), acc_src))),
                lane.late_data.eq(alu.late),
            ]
        else:
            m.d.comb += [
                gemm.acc.eq(acc_dst),
                alu.op.eq(sw["alu_op"]),
                alu.a.eq(acc_dst),
                alu.shift.eq(sw["shift"]),
            ]
            with m.If(sw["use_imm"]):
                m.d.comb += alu.b.eq(Cat([sw["imm"]] * lanes))
            with m.Else():
                m.d.comb += alu.b.eq(acc_src)

        # Only written when S{W} holds a uop: idle cycles skip the lane sums.
        sw_reset = sw["gemm"] & ~sw["reads"]
        result = Signal(c.acc_elem_bits)
        with m.If(sw["valid"]):
            with m.If(sw["gemm"]):
                with m.If(~sw_reset):
                    m.d.comb += result.eq(gemm.result)
            with m.Else():
                m.d.comb += result.eq(alu.result)

        # S{W+1}..S{W+N-1} (N = late_stages(c)): a late micro-op travels on (the ALU's
        # stages); the last writes it (N apart from any other write).
        if has_setup and ov and lane_req(c):
            m.d.comb += alu.late_en.eq((sw["valid"] & (sw["late"] | sw["setup"])) | lane.late_en)
        elif has_setup:
            m.d.comb += alu.late_en.eq(sw["valid"] & (sw["late"] | sw["setup"]))
        elif has_late:
            m.d.comb += alu.late_en.eq(sw["valid"] & sw["late"])
        late_valid = Signal()
        late_dst = Signal(a_w)
        late_push_prev = Signal()
        late_push_next = Signal()
        late_pending = []       # S{W+1}.. before the write stage
        prev_valid, prev_dst = sw["valid"] & sw["late"], sw["dst"]
        prev_pp = sw["push_prev"] & sw["valid"] & sw["late"]
        prev_pn = sw["push_next"] & sw["valid"] & sw["late"]
        producers = [(st[s]["valid"] & st[s]["late"], st[s]["dst"]) for s in range(3, W + 1)]
        for s in range(1, stages - 1):
            v, d = Signal(name=f"late{s}_valid"), Signal(a_w, name=f"late{s}_dst")
            pp, pn = Signal(name=f"late{s}_push_prev"), Signal(name=f"late{s}_push_next")
            m.d.sync += [v.eq(prev_valid), d.eq(prev_dst), pp.eq(prev_pp), pn.eq(prev_pn)]
            late_pending.append(v)
            producers.append((v, d))
            prev_valid, prev_dst, prev_pp, prev_pn = v, d, pp, pn
        m.d.sync += [late_valid.eq(prev_valid), late_dst.eq(prev_dst),
                     late_push_prev.eq(prev_pp), late_push_next.eq(prev_pn)]
        if has_late:
            # the late micro-ops in S3..S{N+1} against S2's reads
            m.submodules.hazard = hazard = RequantHazard(c)
            s2 = st[2]
            m.d.comb += [
                hazard.valid.eq(s2["valid"]), hazard.dst.eq(s2["dst"]),
                hazard.src.eq(s2["src"]), hazard.src_en.eq(~s2["gemm"] & ~s2["use_imm"]),
            ]
            if not ov:
                m.d.comb += hold.eq(hazard.hold)
            if has_setup:
                m.d.comb += hazard.dst_en.eq(~s2["setup"])
            for i, (v, d) in enumerate(producers[:stages - 1]):
                m.d.comb += [hazard.prod_valid[i].eq(v), hazard.prod_dst[i].eq(d)]
        if ov:
            # A GEMM lane micro-op whose dst lies in a bank with an instruction of the
            # ALU lane waits in S2 until they retired (they are older: the lane takes an
            # instruction only when this pipeline is empty).
            lane_hold = (s2_live_gemm & ~s2_bad
                         & lane.busy_bank.bit_select(st[2]["dst"][a_w - 1], 1))
            m.d.comb += hold.eq((hazard.hold | lane_hold) if has_late else lane_hold)
        write_now = sw["valid"] & ~sw["late"]
        if has_setup:       # REQ.M and REQ.P write no SRAM
            write_now = write_now & ~sw["setup"]
        wr_dst = Signal(a_w)
        with m.If(late_valid):
            m.d.comb += [wr_dst.eq(late_dst), result.eq(alu.late if has_late else 0)]
        with m.Else():
            m.d.comb += wr_dst.eq(sw["dst"])
        with m.If(write_now | late_valid):
            m.d.comb += [acc_wr_addr.eq(wr_dst), acc_wr_data.eq(result), acc_wr_en.eq(1)]
        with m.Else():
            m.d.comb += [
                acc_wr_addr.eq(acc_load.sram.addr),
                acc_wr_data.eq(acc_load.sram.data),
                acc_wr_en.eq(acc_load.sram.en),
            ]
        m.d.comb += [acc_wr.addr.eq(acc_wr_addr), acc_wr.data.eq(acc_wr_data),
                     acc_wr.en.eq(acc_wr_en)]
        m.d.comb += [
            out_main.addr.eq(wr_dst),
            out_main.data.eq(Cat(result.word_select(j, c.acc_width)[:c.out_width]
                                 for j in range(lanes))),
            out_main.en.eq((write_now & ~sw_reset) | late_valid),
        ]
        with m.If(sw["valid"] & sw["gemm"] & ~sw_reset):
            m.d.sync += self.gemm_count.eq(self.gemm_count + 1)
        if ov:      # both lanes may write in a cycle
            main_alu = sw["valid"] & ~sw["gemm"]
            # (with lane_req a REQ writes late and REQ.M / REQ.P never: the lane's L4)
            lane_uop = lane.count if lane_req(c) else lane.wr_en
            m.d.sync += [self.alu_count.eq(self.alu_count + main_alu + lane_uop),
                         self.uop_count.eq(self.uop_count + sw["valid"] + lane_uop)]
        else:
            with m.If(sw["valid"] & ~sw["gemm"]):
                m.d.sync += self.alu_count.eq(self.alu_count + 1)
            with m.If(sw["valid"]):
                m.d.sync += self.uop_count.eq(self.uop_count + 1)
        # Micro-ops that write after this cycle (S1..S{W-1}, and a requant one in
        # S{W}..S{W+L-2}):
        # the drain is over when none is left.
        late_next = sw["valid"] & sw["late"]
        for v in late_pending:
            late_next = late_next | v
        in_flight = s1_valid | Cat(st[s]["valid"] for s in range(2, W)).any() | late_next

        # ------------------------------------------------------------- control
        # the index of the instruction whose micro-op is in S1 (an overlapped dispatch
        # has already taken the next one's)
        s1_index = Signal(32)
        m.d.sync += s1_index.eq(index)

        def fail(code, at=index):
            report_error(m, self.error, code, at)

        # A micro-op out of range is squashed in S1 while the micro-ops before it are
        # still in S2..S{W}: the fault is reported once they wrote (state FAULT), so the
        # SRAMs hold the sequential state up to the fault whenever the host sees it.
        # ``fault_index`` follows S1's instruction until the fault is seen.
        fault_index = Signal(32)
        with m.If(~bad_seen):
            m.d.sync += fault_index.eq(s1_index)
        older_in_flight = Cat(st[s]["valid"] for s in range(2, W)).any() | late_next

        # Overlap: the last micro-op of a GEMM/ALU issues, and the next command is a
        # GEMM/ALU with micro-ops to run or a LOAD UOP: take it in the same cycle, so its
        # dispatch follows at once while S1..S{W} drain (the modes travel with the
        # micro-ops; acc reads forward from the writes in flight as within an
        # instruction; the micro-ops in flight have read the uop SRAM, so a LOAD UOP may
        # overwrite it, and it completes only after the drain). Anything else waits for
        # the drain: LOAD ACC shares the acc write port, FINISH ends the run.
        #
        # An instruction with push flags overlaps too: its flags travel with its last
        # micro-op (``tail_*``) and the token is pushed in the cycle that micro-op's write
        # lands (``land_*``: S{W}, or S{W+L-1} of a late one), the same edge rule as a
        # drain. The pipeline never waits after issue, so the room is guaranteed in
        # advance: ``room_*`` (a register) says the queue has room for a token and no
        # pushed token of this module is travelling to it (``travel_*``: at most one per
        # queue); this module is the only producer of g2l and g2s, so the room holds
        # until the landing. ``requant2``'s REQ.M/REQ.P write nothing and issue before
        # a preceding REQ pass's late writes land: with pushes they drain.
        land_prev = Signal()
        land_next = Signal()
        m.d.comb += [
            land_prev.eq((sw["push_prev"] & sw["valid"] & ~sw["late"]) | late_push_prev),
            land_next.eq((sw["push_next"] & sw["valid"] & ~sw["late"]) | late_push_next),
        ]
        travel_prev = Signal()
        travel_next = Signal()
        room_prev = Signal()
        room_next = Signal()
        with m.If(tail_prev):
            m.d.sync += travel_prev.eq(1)
        with m.Elif(land_prev):
            m.d.sync += travel_prev.eq(0)
        with m.If(tail_next):
            m.d.sync += travel_next.eq(1)
        with m.Elif(land_next):
            m.d.sync += travel_next.eq(0)
        # the queue keeps room next cycle if it has some now and nothing pushes it now
        # (a pop only makes room); registered: no token queue's ready in the accept path
        m.d.sync += [
            room_prev.eq(push_prev_q.ready & ~push_prev_q.valid & ~travel_prev & ~tail_prev),
            room_next.eq(push_next_q.ready & ~push_next_q.valid & ~travel_next & ~tail_next),
        ]
        nxt_hdr = isa.finish.layout()(self.cmd.payload.insn)
        nxt_loop = isa.gemm.layout()(self.cmd.payload.insn)
        nxt_mem = isa.mem.layout()(self.cmd.payload.insn)
        pushes_ok = (~push_prev | room_prev) & (~push_next | room_next)
        if has_setup:
            pushes_ok = pushes_ok & ~(mode_setup & (push_prev | push_next))
        if ov:      # pushes in program order: the ALU lane's (older) ones first
            pushes_ok = pushes_ok & ~(lane.busy & (push_prev | push_next))
        overlap = Signal()
        m.d.comb += overlap.eq(
            pushes_ok & self.cmd.valid
            & ((((nxt_hdr.opcode == Opcode.GEMM) | (nxt_hdr.opcode == Opcode.ALU))
                & ~_empty_loop(nxt_loop))
               | ((nxt_hdr.opcode == Opcode.LOAD) & (nxt_mem.memory_type == MemType.UOP)
                  & (nxt_mem.x_size != 0))))
        # a drain's push waits for a travelling token to the same queue (it lands first)
        drained = (~in_flight & ~(travel_prev & push_prev) & ~(travel_next & push_next))
        if ov:      # pushes in program order: the ALU lane's (older) ones first
            drained = drained & ~(lane.busy & (push_prev | push_next))

        if ov or us:
            # ``main_idle`` (the GEMM pipeline is empty and none of its tokens travels: the
            # ALU lane may take an instruction) is a register, its value of the next cycle
            # from this cycle's stages (it was an OR over every stage's valid in the
            # dispatch's path into the command queue): a micro-op in flight next cycle issues
            # now, or is in S1..S{W-2} now (a held one stays, the others move on), or is a
            # late one in S{W-1}..; a token travels on unless it lands now (one that
            # starts now travels with a micro-op issued now)
            main_idle = Signal(init=1)
            next_flight = (issue | s1_valid
                           | Cat(st[s]["valid"] for s in range(2, W - 1)).any()
                           | (st[W - 1]["valid"] & st[W - 1]["late"])
                           | (sw["valid"] & sw["late"]) | Cat(late_pending[:-1]).any())
            m.d.sync += main_idle.eq(~next_flight & ~(travel_prev & ~land_prev)
                                     & ~(travel_next & ~land_next))
            if self.probe_main_idle:
                self.main_idle_reg, self.main_idle_now = main_idle, Signal()
                m.d.comb += self.main_idle_now.eq(~in_flight & ~travel_prev & ~travel_next)

        def accept():
            accept_command(m, self.cmd, insn, index)

        done_prev = Signal()
        done_next = Signal()
        if ov:
            m.d.comb += [push_prev_q.valid.eq(done_prev | land_prev | lane.push_prev),
                         push_next_q.valid.eq(done_next | land_next | lane.push_next),
                         lane.push_prev_ready.eq(push_prev_q.ready),
                         lane.push_next_ready.eq(push_next_q.ready)]
        else:
            m.d.comb += [push_prev_q.valid.eq(done_prev | land_prev),
                         push_next_q.valid.eq(done_next | land_next)]

        def complete(prev, nxt, *, then_accept=True):
            # The work is done (its last SRAM write lands at this clock edge, so a
            # consumer of the token sees it): push, and take the next command in
            # the same cycle if nothing has to wait for room in a token queue.
            m.d.comb += [done_prev.eq(prev), done_next.eq(nxt)]
            m.d.sync += [push_prev.eq(prev & ~push_prev_q.ready),
                         push_next.eq(nxt & ~push_next_q.ready)]
            with m.If((~prev | push_prev_q.ready) & (~nxt | push_next_q.ready)):
                if then_accept:
                    accept()
                else:
                    m.next = "IDLE"
            with m.Else():
                m.next = "PUSH"

        # The engines' payload is ``insn`` in every state (no FSM decision in its path),
        # so it is there a cycle before LOAD_CMD raises cmd.valid (``payload_early``).
        m.d.comb += [uop_load.cmd.payload.eq(insn), acc_load.cmd.payload.eq(insn)]
        with m.FSM() as fsm:
            with m.State("IDLE"):
                accept()

            with m.State("POP"):
                # The range checks of a LOAD UOP/ACC are ready (``checked``: a command
                # accepted in the cycle it reached the queue's head waits one cycle).
                tokens_ok = (((~hdr.pop_prev_dep | pop_prev.valid)
                              & (~hdr.pop_next_dep | pop_next.valid))
                             & (checked | ~(load_uop | load_acc)))
                # Right after an overlapped accept the predecessor's last micro-op is in
                # S1 and its range check is not known until the next cycle: a command
                # that would report an error of its own waits that cycle (the older
                # fault must win); any other one dispatches (if the fault shows next
                # cycle, its pops are lost and nothing else of it happens: reset required).
                bad_cmd = bad_opcode | bad_memtype | bad_field | bad_range
                go = tokens_ok & ~(s1_valid & bad_cmd)
                if has_late or ov:  # S1 may hold the predecessor's micro-op (live modes)
                    go = go & ~hold
                if us:
                    # ``UOP_STREAM``: while a LOAD UOP streams, a GEMM/ALU waits until the
                    # micro-ops it reads are written; another LOAD UOP, FINISH, anything
                    # with push flags and a command that faults wait for the stream's end
                    # (a LOAD ACC without them runs beside it: the acc engine). Accepted
                    # while older micro-ops drain, a LOAD ACC (the acc write port), FINISH,
                    # and a command that pushes at once wait for the drain and for the
                    # tokens that travel (``main_idle``, a register).
                    pushes = hdr.push_prev_dep | hdr.push_next_dep
                    direct = is_nop | is_finish | (loop_insn & empty_loop)
                    go = go & ~(stream_pend & (load_uop | is_finish | pushes | bad_cmd))
                    go = go & ~(stream_pend & loop_insn & ~empty_loop & (clash | ~clash_fresh))
                    go = go & ~((load_acc | (direct & (pushes | is_finish))) & ~main_idle)
                if ov:
                    # An ALU waits for its footprint check; one that passes it goes to the
                    # ALU lane once this pipeline is empty (every older instruction has
                    # written and pushed). While the lane is busy only GEMMs and LOAD ACCs
                    # of the other bank without push flags dispatch here; anything else
                    # (and a command that faults) waits for the lane to drain.
                    lane_alu = is_alu & fp_ok
                    load_acc_ok = (load_acc & fit_valid & acc_fit
                                   & ~hdr.push_prev_dep & ~hdr.push_next_dep
                                   & ~lane.busy_bank.bit_select(chk["acc_bank"], 1))
                    beside = ((is_gemm & ~empty_loop) | load_acc_ok) & ~bad_cmd
                    if us:
                        # a streamed LOAD UOP too: the lane's instructions hold their
                        # micro-op, the lane reads no uop SRAM
                        beside = beside | (load_uop & ~hdr.push_prev_dep
                                           & ~hdr.push_next_dep & ~bad_cmd)
                    go = (go & ~(is_alu & (fp_age != 2))
                          & Mux(lane_alu, main_idle & ~lane.full, ~lane.busy | beside))
                m.d.comb += [
                    pop_prev.ready.eq(go & hdr.pop_prev_dep & ~bad_seen),
                    pop_next.ready.eq(go & hdr.pop_next_dep & ~bad_seen),
                ]
                with m.If(bad_seen):    # the overlapped predecessor's last micro-op
                    m.d.comb += leave.eq(1)
                    m.next = "FAULT"
                with m.Elif(go):
                    m.d.comb += leave.eq(1)
                    # Dispatch: check the fields, latch the modes, start the work.
                    m.d.sync += [
                        push_prev.eq(hdr.push_prev_dep),
                        push_next.eq(hdr.push_next_dep),
                        mode_gemm.eq(is_gemm),
                        mode_reset.eq(loop.reset_reg),
                        alu_op.eq(alu_f.alu_opcode),
                        mode_late.eq(is_alu & Cat(alu_f.alu_opcode == op
                                                  for op in late_ops(c)).any()
                                     if has_late and not has_setup else
                                     is_alu & (alu_f.alu_opcode == AluOp.REQ)
                                     & ~req_setup if has_setup else 0),
                        *([mode_setup.eq(is_alu & (alu_f.alu_opcode == AluOp.REQ)
                                         & req_setup)] if has_setup else []),
                        use_imm.eq(alu_f.use_imm),
                        imm_word.eq(imm),
                        shift.eq(imm[:SHIFT_BITS]),
                    ]
                    m.d.comb += seq.start.eq(1)
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
                    if ov:
                        with m.Elif(lane_alu):
                            m.d.comb += lane.enq.eq(1)
                            accept()
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
                # (an overlapped LOAD UOP whose predecessor faulted in S1 never starts)
                m.d.comb += [
                    uop_load.cmd.valid.eq(load_uop & ~bad_seen),
                    acc_load.cmd.valid.eq(load_acc & ~bad_seen),
                ]
                with m.If(bad_seen):
                    m.next = "FAULT"
                with m.Else():
                    with m.If(Mux(load_uop, uop_load.cmd.ready, acc_load.cmd.ready)):
                        if us:
                            # ``UOP_STREAM``: a LOAD UOP without push flags streams; the
                            # next command is taken at once
                            with m.If(load_uop & ~push_prev & ~push_next):
                                m.d.sync += [stream_pend.eq(1), stream_wp.eq(mem.sram_base),
                                             stream_end.eq(mem.sram_base + mem.x_size)]
                                accept()
                            with m.Else():
                                m.next = "LOAD_WAIT"
                        else:
                            m.next = "LOAD_WAIT"
                    oob = Mux(load_uop, uop_load.dram_oob, acc_load.dram_oob)
                    if ov:      # the older instructions in the ALU lane finish first
                        oob = oob & ~lane.busy
                    if us:      # and a streamed LOAD UOP (a LOAD ACC runs beside it)
                        oob = oob & ~stream_pend
                    with m.If(oob):
                        fail(ErrorCode.DRAM_OUT_OF_RANGE)   # the engine refuses it

            with m.State("LOAD_WAIT"):
                with m.If(Mux(load_uop, uop_load.done, acc_load.done)):
                    with m.If(~drained):
                        # an overlapped LOAD UOP completes after the micro-ops before it
                        m.next = "DRAIN"
                    with m.Else():
                        complete(push_prev, push_next)

            with m.State("RUN"):
                # Issue does not wait for the range check of the micro-op in S1 (that
                # would put the uop SRAM, an adder and a compare before the loop
                # counters): a micro-op issued in the cycle of a fault dies in S1.
                # Nor does an overlapped accept (the S1 check into the command queue's
                # read was the worst path): a command taken in the cycle of a fault is
                # never dispatched, the module stops in FAULT. (With the extension
                # ``no_gap`` is also low while the front is held.)
                m.d.comb += issue.eq(no_gap)
                with m.If(no_gap & issue_last):
                    with m.If(overlap):
                        m.d.comb += [self.cmd.ready.eq(1),
                                     tail_prev.eq(push_prev), tail_next.eq(push_next)]
                        m.d.sync += [insn.eq(self.cmd.payload.insn),
                                     index.eq(self.cmd.payload.index)]
                        m.next = "POP"
                    with m.Else():
                        m.next = "DRAIN"
                with m.If(bad_seen):    # (after: its m.next wins)
                    m.next = "FAULT"

            with m.State("DRAIN"):
                with m.If(bad_seen):
                    m.next = "FAULT"
                with m.Elif(drained):
                    # Only the last write (S{W}, or S{W+L-1} of a late micro-op) may
                    # still be pending: it lands at this edge.
                    complete(push_prev, push_next)

            with m.State("PUSH"):
                complete(push_prev, push_next)

            with m.State("FAULT"):
                # Only the last write may still be pending: it lands at the edge of the report.
                quiet = ~older_in_flight & ~lane.busy if ov else ~older_in_flight
                if us:      # and a streamed LOAD UOP (older) has written
                    quiet = quiet & ~stream_pend
                with m.If(quiet):
                    fail(ErrorCode.SRAM_OUT_OF_RANGE, fault_index)

            with m.State("ERROR"):
                pass
        m.d.comb += in_pop.eq(fsm.ongoing("POP"))
        if ov:
            self._lane_ports(m, lane, acc_wr=acc_wr, acc_rd_dst=acc_rd_dst,
                             acc_rd_src=acc_rd_src, out_main=out_main)
            m.d.comb += [lane.enq_insn.eq(insn), lane.enq_uop.eq(uop_fp.data),
                         lane.enq_bank.eq(fp_bank),
                         lane.enq_push_prev.eq(hdr.push_prev_dep),
                         lane.enq_push_next.eq(hdr.push_next_dep)]
        return m

    def _lane_ports(self, m, lane, *, acc_wr, acc_rd_dst, acc_rd_src, out_main):
        """``COMPUTE_OVERLAP``: each acc/out bank's ports
        muxed between the two lanes (never both in a cycle: see :mod:`.compute_lane`)."""
        c = self._config
        top = c.log_acc_depth - 1
        rd_data = {}
        for b, bank in enumerate(self.acc_banks):
            m.submodules[f"acc_bank{b}"] = bank
            wr = bank.write_port()
            lane_w = lane.wr_en & (lane.wr_addr[top] == b)
            m.d.comb += [
                wr.addr.eq(Mux(lane_w, lane.wr_addr[:top], acc_wr.addr[:top])),
                wr.data.eq(Mux(lane_w, lane.wr_data, acc_wr.data)),
                wr.en.eq(lane_w | (acc_wr.en & (acc_wr.addr[top] == b))),
            ]
            out = self.out_wr1 if b else self.out_wr
            m.d.comb += [
                out.addr.eq(Mux(lane_w, lane.wr_addr[:top], out_main.addr[:top])),
                out.data.eq(Mux(lane_w, lane.out_data, out_main.data)),
                out.en.eq(lane_w | (out_main.en & (out_main.addr[top] == b))),
            ]
            for name, main_p, l_addr, l_en in (
                    ("dst", acc_rd_dst, lane.rd_dst_addr, lane.rd_dst_en),
                    ("src", acc_rd_src, lane.rd_src_addr, lane.rd_src_en)):
                rd = bank.read_port()
                lane_r = l_en & (l_addr[top] == b)
                m.d.comb += [
                    rd.addr.eq(Mux(lane_r, l_addr[:top], main_p.addr[:top])),
                    rd.en.eq(lane_r | (main_p.en & (main_p.addr[top] == b))),
                ]
                rd_data[name, b] = rd.data
        # each reader takes the data of the bank it read (registered with the read)
        for name, main_p, l_addr, l_en, l_data in (
                ("dst", acc_rd_dst, lane.rd_dst_addr, lane.rd_dst_en, lane.rd_dst_data),
                ("src", acc_rd_src, lane.rd_src_addr, lane.rd_src_en, lane.rd_src_data)):
            sel_main = Signal(name=f"acc_{name}_bank")
            sel_lane = Signal(name=f"lane_{name}_bank")
            with m.If(main_p.en):
                m.d.sync += sel_main.eq(main_p.addr[top])
            with m.If(l_en):
                m.d.sync += sel_lane.eq(l_addr[top])
            m.d.comb += [
                main_p.data.eq(Mux(sel_main, rd_data[name, 1], rd_data[name, 0])),
                l_data.eq(Mux(sel_lane, rd_data[name, 1], rd_data[name, 0])),
            ]
