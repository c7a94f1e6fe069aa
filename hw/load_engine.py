"""One padded 2-D LOAD (reference 3.3) from DRAM into an SRAM write port.

The engine has two decoupled halves, so DRAM bursts stream at one beat per
cycle while padding is inserted on the SRAM side:

* the *request* half walks the DRAM rows and issues bursts of at most
  :data:`MAX_BURST` beats (a row of ``x_size`` elements is contiguous in DRAM),
  the first one in the cycle the command is accepted;
* the *write* half walks the padded destination rectangle row-major
  (``y_total`` rows of ``x_total`` elements), writing a zero element at each
  padding position (one per cycle) and an assembled DRAM element at each data
  position (as soon as its last beat arrived).

Elements at least as wide as the bus (INP, WGT, ACC) are assembled from
``elem_bits / bus_width`` beats, first beat in the low bits. Elements narrower
than the bus (UOP: 32 bits on a 64/128-bit bus) are copied ``x_size`` at a time
from byte address ``dram_base * elem_bytes``, which need not be bus aligned;
``y_size``, ``x_stride`` and the pads are not used for them (the caller checks
that they are 1 and 0, as the semantics require). The caller also checks the
SRAM range; SRAM addresses here simply wrap at ``2**addr_width``.

DRAM byte addresses must not wrap: ``dram_base`` is an *element* address, so a
transfer can reach past the 32-bit byte address space. :attr:`LoadEngine.dram_oob`
flags such an instruction from its fields alone (its last byte, at
``(dram_base + (y_size-1)*x_stride + x_size) * elem_bytes - 1``, is at or beyond
``2**32``); the engine refuses it (``cmd.ready`` stays low, nothing is read) and
the owner reports DRAM_OUT_OF_RANGE.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .interfaces import DRAM_ADDR_BITS, dma_read_signature
from .isa import isa_for

__all__ = ["LoadEngine", "MAX_BURST", "lookahead_checks"]

#: Longest DRAM burst an engine issues (the AXI4 limit, so boards can pass bursts through).
MAX_BURST = 256


def padded_size(i):
    """``(x_total, y_total)`` of a LOAD instruction view: its destination rectangle with
    the pads (the extent an SRAM range check multiplies)."""
    return i.x_pad_0 + i.x_size + i.x_pad_1, i.y_pad_0 + i.y_size + i.y_pad_1


def lookahead_checks(m, config, cmd, in_pop, leave, stage1, stage2):
    """Compute a LOAD/STORE module's range checks in two registered stages, ahead of the
    cycle that acts on them (so no multiplier or wide compare sits in that cycle).

    The first stage works on the command at the head of the queue ``cmd`` (an
    ``In(CommandSignature)``, whose payload stays while it waits), every cycle; the
    second stage on the first stage's registers, and it holds its result in the
    module's ``"POP"`` state (``in_pop``) until the module acts on it (``leave``).
    ``stage1`` maps an instruction view to named expressions, ``stage2`` maps those
    registers to the named check results.

    Returns the stage-2 registers and ``valid``, meaningful in ``"POP"``: they are the
    checks of the instruction accepted. A command that waited a cycle at the head of
    the queue (the usual case: it was queued while the previous one ran) is checked
    when the module enters ``"POP"``; one accepted in the cycle it arrived is checked
    a cycle later.
    """
    def regs(exprs, stage):
        return {k: Signal(Value.cast(v).shape(), name=f"chk{stage}_{k}") for k, v in exprs.items()}
    e1 = stage1(data.View(isa_for(config).mem.layout(), cmd.payload.insn))
    s1 = regs(e1, 1)
    m.d.sync += [s1[k].eq(v) for k, v in e1.items()]
    e2 = stage2(s1)
    s2 = regs(e2, 2)
    # s1 holds the data of the command now at the head (waited) or just accepted (taken).
    waited, taken, valid = Signal(), Signal(), Signal()
    m.d.sync += [waited.eq(cmd.valid & ~cmd.ready), taken.eq(cmd.valid & cmd.ready)]
    hold = in_pop & valid & ~leave
    with m.If(~hold):
        m.d.sync += [s2[k].eq(v) for k, v in e2.items()]
    # Outside POP (and when leaving it) ``valid`` says s2 holds the checks of the command
    # at the head, which becomes the accepted instruction of the next POP.
    m.d.sync += valid.eq(Mux(in_pop & ~leave, valid | taken, waited))
    return s2, valid


def _log2(n):
    assert n > 0 and n & (n - 1) == 0, n
    return n.bit_length() - 1


class LoadEngine(wiring.Component):
    """Executes one LOAD instruction at a time into an SRAM write port.

    Parameters
    ----------
    config : VTAConfig
        Gives the bus width and the instruction layout.
    elem_bits : int
        SRAM element width: a power-of-two multiple of the bus width, or a
        power of two narrower than it (micro-ops).
    addr_width : int
        SRAM address width.
    dram_check : bool
        Build :attr:`dram_oob` and refuse such an instruction. ``False``: the owner
        checks the DRAM range before handing the instruction over (out of the cycle of
        acceptance), and ``dram_oob`` is 0.
    payload_early : bool
        The owner drives ``cmd.payload`` a cycle before it raises ``cmd.valid`` (and
        holds it while ``cmd.valid``), so the registered DRAM check is ready when
        ``cmd.valid`` rises and the instruction is accepted at once.

    Attributes
    ----------
    cmd : In(stream.Signature(mem layout))
        The LOAD instruction; ``ready`` while the engine is idle (with ``dram_check``:
        and the instruction has been offered since the last cycle and is in range).
    dma : Out(dma_read_signature(config))
        DRAM read port.
    sram : In(memory.WritePort.Signature(addr_width=addr_width, shape=elem_bits))
        The engine drives ``en``, ``addr`` and ``data``.
    dram_oob : Out(1)
        The instruction offered on ``cmd`` moves data and some byte of it lies at or
        beyond ``2**32``: high from the second cycle ``cmd.valid`` is held (the check is
        registered). The engine never accepts such an instruction; its owner
        reports DRAM_OUT_OF_RANGE. Always 0 without ``dram_check``.
    done : Out(1)
        One-cycle pulse after the last SRAM write of the instruction was issued
        (also for an instruction with nothing to write).
    last : Out(1)
        High in the cycle the last SRAM write of the instruction is issued (so it lands
        at this clock edge; ``done`` follows in the next cycle). Never high for an
        instruction with nothing to write.
    busy : Out(1)
        High from the accepted command until ``done``.
    """

    def __init__(self, config: VTAConfig, *, elem_bits: int, addr_width: int,
                 dram_check: bool = True, payload_early: bool = False):
        self._config = config
        self._dram_check = dram_check
        self._payload_early = payload_early
        self._elem_bits = elem_bits
        self._addr_width = addr_width
        bus = config.bus_width
        if not (elem_bits % bus == 0 or bus % elem_bits == 0) or elem_bits & (elem_bits - 1):
            raise ValueError(f"LoadEngine: element width {elem_bits} must be a power of two "
                             f"that divides or is a multiple of the {bus}-bit bus")
        super().__init__({
            "cmd": In(stream.Signature(isa_for(config).mem.layout())),
            "dma": Out(dma_read_signature(config)),
            "sram": In(memory.WritePort.Signature(addr_width=addr_width, shape=elem_bits)),
            "dram_oob": Out(1),
            "done": Out(1),
            "last": Out(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        bus, ebits = cfg.bus_width, self._elem_bits
        bus_bytes = cfg.bus_bytes
        log_eb = _log2(ebits // 8)
        wide = ebits >= bus
        insn = self.cmd.payload

        # ---------------------------------------------------------------- acceptance
        req_busy = Signal()
        w_active = Signal()
        w_addr = Signal(self._addr_width)
        done = Signal()
        m.d.sync += done.eq(0)
        m.d.comb += [self.done.eq(done), self.busy.eq(w_active | req_busy)]
        # One past the last element read, at full width (up to 34 bits), must not pass
        # the end of the byte address space, element 2**32 / elem_bytes:
        # ``dram_base + (y_size-1)*x_stride + x_size <= limit``, i.e.
        # ``y_size*x_stride <= limit - dram_base - x_size + x_stride`` (the multiply beside
        # the adds), registered while ``cmd.valid`` is held: the instruction is accepted a
        # cycle after it is offered, and no multiply is in the accept path.
        if wide:
            moves = (insn.x_size != 0) & (insn.y_size != 0)
        else:
            moves = insn.x_size != 0
        if self._dram_check:
            limit = (1 << DRAM_ADDR_BITS) >> log_eb
            oob = Signal()
            if wide:
                room = limit - insn.dram_base - insn.x_size + insn.x_stride
                m.d.sync += oob.eq(moves & (insn.y_size * insn.x_stride > room))
            else:
                m.d.sync += oob.eq(moves & (insn.dram_base + insn.x_size > limit))
            held = Signal()     # cmd.valid held since the last cycle (the same payload)
            if self._payload_early:
                m.d.comb += held.eq(1)
            else:
                m.d.sync += held.eq(self.cmd.valid & ~(self.cmd.ready & self.cmd.valid))
            m.d.comb += self.dram_oob.eq(held & oob)
            m.d.comb += self.cmd.ready.eq(~w_active & ~req_busy & held & ~oob)
        else:
            m.d.comb += self.cmd.ready.eq(~w_active & ~req_busy)
        accept = Signal()
        m.d.comb += accept.eq(self.cmd.valid & self.cmd.ready)

        # ---------------------------------------------------------------- request half
        # The request state of the accepted instruction (``first``: its first request,
        # issued in the cycle it is accepted) or of the one in progress (registers). An
        # idle request half issues nothing but the first request, so the choice is made
        # by ``req_busy`` (a register), not by ``accept``.
        req_addr = Signal(DRAM_ADDR_BITS)     # byte address of the next burst (bus aligned)
        row_beats = Signal(32)                # beats left in the current DRAM row
        rows_left = Signal(16)
        row_elem = Signal(DRAM_ADDR_BITS)     # element address of the current row
        x_size = Signal(16)
        x_stride = Signal(16)
        log_ratio = _log2(ebits // bus) if wide else 0
        first_addr = Signal(DRAM_ADDR_BITS)
        first_beats = Signal(32)
        first_rows = Signal(16)
        if wide:
            m.d.comb += [first_addr.eq((insn.dram_base << log_eb)[:DRAM_ADDR_BITS]),
                         first_beats.eq(insn.x_size << log_ratio), first_rows.eq(insn.y_size)]
        else:
            per_beat = bus // ebits
            total = Signal(17)
            m.d.comb += [
                total.eq(insn.dram_base[:_log2(per_beat)] + insn.x_size),
                first_addr.eq((insn.dram_base << log_eb)[:DRAM_ADDR_BITS]
                              & ~Const(bus_bytes - 1, DRAM_ADDR_BITS)),
                first_beats.eq((total + per_beat - 1) >> _log2(per_beat)),
                first_rows.eq(1),
            ]
        cur_addr, cur_beats, cur_rows = (Signal.like(v) for v in (req_addr, row_beats, rows_left))
        cur_elem, cur_x, cur_stride = (Signal.like(v) for v in (row_elem, x_size, x_stride))
        m.d.comb += [
            cur_addr.eq(Mux(req_busy, req_addr, first_addr)),
            cur_beats.eq(Mux(req_busy, row_beats, first_beats)),
            cur_rows.eq(Mux(req_busy, rows_left, first_rows)),
            cur_elem.eq(Mux(req_busy, row_elem, insn.dram_base)),
            cur_x.eq(Mux(req_busy, x_size, insn.x_size)),
            cur_stride.eq(Mux(req_busy, x_stride, insn.x_stride)),
        ]
        burst = Signal(range(MAX_BURST + 1))
        m.d.comb += burst.eq(Mux(cur_beats > MAX_BURST, MAX_BURST, cur_beats))
        m.d.comb += [
            self.dma.req.valid.eq(req_busy | accept & moves),
            self.dma.req.payload.addr.eq(cur_addr),
            self.dma.req.payload.beats.eq(burst),
        ]
        with m.If(accept):
            m.d.sync += [x_size.eq(insn.x_size), x_stride.eq(insn.x_stride),
                         row_elem.eq(insn.dram_base), req_busy.eq(moves), rows_left.eq(first_rows),
                         req_addr.eq(first_addr), row_beats.eq(first_beats)]
        # (after the acceptance: a request issued in the cycle of acceptance updates the state)
        with m.If(self.dma.req.valid & self.dma.req.ready):
            m.d.sync += [row_beats.eq(cur_beats - burst), req_addr.eq(cur_addr + burst * bus_bytes)]
            with m.If(cur_beats == burst):           # last burst of this row
                m.d.sync += rows_left.eq(cur_rows - 1)
                with m.If(cur_rows == 1):
                    m.d.sync += req_busy.eq(0)
                with m.Else():
                    nxt = (cur_elem + cur_stride)[:DRAM_ADDR_BITS]
                    m.d.sync += [row_elem.eq(nxt), req_addr.eq(nxt << log_eb),
                                 row_beats.eq(cur_x << log_ratio)]

        # ---------------------------------------------------------------- write half
        if wide:
            self._wide_writer(m, insn, accept, w_active, w_addr, done)
        else:
            self._narrow_writer(m, insn, accept, w_active, w_addr, done)
        return m

    def _wide_writer(self, m, insn, accept, w_active, w_addr, done):
        """Padded rectangle walk; elements assembled from ``ratio`` beats."""
        bus, ebits = self._config.bus_width, self._elem_bits
        ratio = ebits // bus
        y_total, x_total = Signal(17), Signal(17)
        row_lo, row_hi, col_lo, col_hi = (Signal(17) for _ in range(4))
        row, col = Signal(17), Signal(17)
        buf = Signal(ebits)
        full = Signal()
        bcnt = Signal(range(ratio)) if ratio > 1 else None

        # Where the walk is, as registered flags (computed a write ahead from the
        # counters): the last column / row, inside the data rectangle's columns / rows. So
        # ``last`` -- which the owner's acceptance of its next command follows in the same
        # cycle -- has no compare of the counters in its path.
        col_end, row_end, col_in, row_in = Signal(), Signal(), Signal(), Signal()
        is_data = row_in & col_in
        write = Signal()
        m.d.comb += write.eq(w_active & (~is_data | full))
        take = w_active & is_data & full
        m.d.comb += [
            self.sram.en.eq(write),
            self.sram.addr.eq(w_addr),
            self.sram.data.eq(Mux(is_data, buf, 0)),
            self.dma.data.ready.eq(w_active & (~full | take)),
        ]

        beat = self.dma.data.valid & self.dma.data.ready
        with m.If(take):
            m.d.sync += full.eq(0)
        with m.If(beat):
            if ratio == 1:
                m.d.sync += [buf.eq(self.dma.data.payload), full.eq(1)]
            else:
                # The first beat holds the low bits: shift new beats in at the top.
                m.d.sync += [buf.eq(Cat(buf[bus:], self.dma.data.payload)), bcnt.eq(bcnt + 1)]
                with m.If(bcnt == ratio - 1):
                    m.d.sync += [full.eq(1), bcnt.eq(0)]

        def at(v, lo, hi):
            return (v >= lo) & (v < hi)

        with m.If(write):
            col_next = Mux(col_end, 0, col + 1)[:len(col)]
            m.d.sync += [w_addr.eq(w_addr + 1), col.eq(col_next),
                         col_end.eq(col_next == x_total - 1), col_in.eq(at(col_next, col_lo, col_hi))]
            with m.If(col_end):
                row_next = (row + 1)[:len(row)]
                m.d.sync += [row.eq(row_next), row_end.eq(row_next == y_total - 1),
                             row_in.eq(at(row_next, row_lo, row_hi))]
                with m.If(row_end):
                    m.d.comb += self.last.eq(1)
                    m.d.sync += [w_active.eq(0), done.eq(1)]

        with m.If(accept):
            xt = insn.x_pad_0 + insn.x_size + insn.x_pad_1
            yt = insn.y_pad_0 + insn.y_size + insn.y_pad_1
            nothing = (insn.x_size == 0) | (yt == 0)
            m.d.sync += [
                x_total.eq(xt), y_total.eq(yt), row.eq(0), col.eq(0),
                row_lo.eq(insn.y_pad_0), row_hi.eq(insn.y_pad_0 + insn.y_size),
                col_lo.eq(insn.x_pad_0), col_hi.eq(insn.x_pad_0 + insn.x_size),
                w_addr.eq(insn.sram_base), full.eq(0),
                w_active.eq(~nothing), done.eq(nothing),
                col_end.eq(xt == 1), row_end.eq(yt == 1),
                col_in.eq((insn.x_pad_0 == 0) & (insn.x_size != 0)),
                row_in.eq((insn.y_pad_0 == 0) & (insn.y_size != 0)),
            ]
            if bcnt is not None:
                m.d.sync += bcnt.eq(0)

    def _narrow_writer(self, m, insn, accept, w_active, w_addr, done):
        """``x_size`` consecutive elements, several per beat, first beat partly skipped."""
        bus, ebits = self._config.bus_width, self._elem_bits
        per_beat = bus // ebits
        beat_reg = Signal(bus)
        have = Signal()
        lane = Signal(range(per_beat))
        first = Signal()
        skip = Signal(range(per_beat))
        left = Signal(16)

        write = Signal()
        m.d.comb += write.eq(w_active & have)
        release = write & ((lane == per_beat - 1) | (left == 1))
        m.d.comb += [
            self.sram.en.eq(write),
            self.sram.addr.eq(w_addr),
            self.sram.data.eq(beat_reg.word_select(lane, ebits)),
            self.dma.data.ready.eq(w_active & (~have | release) & ~(write & (left == 1))),
        ]
        with m.If(write):
            m.d.sync += [w_addr.eq(w_addr + 1), lane.eq(lane + 1), left.eq(left - 1)]
            with m.If(left == 1):
                m.d.comb += self.last.eq(1)
                m.d.sync += [w_active.eq(0), done.eq(1)]
        with m.If(release):
            m.d.sync += have.eq(0)
        with m.If(self.dma.data.valid & self.dma.data.ready):
            m.d.sync += [beat_reg.eq(self.dma.data.payload), have.eq(1), first.eq(0),
                         lane.eq(Mux(first, skip, 0))]

        with m.If(accept):
            nothing = insn.x_size == 0
            m.d.sync += [
                left.eq(insn.x_size), w_addr.eq(insn.sram_base), have.eq(0), first.eq(1),
                skip.eq(insn.dram_base[:_log2(per_beat)]),
                w_active.eq(~nothing), done.eq(nothing),
            ]
