"""Fetch: reads the instruction stream from DRAM and dispatches it (reference 3.1).

Instructions are read in bursts into a small buffer; a burst is requested only
when the buffer has room for all of it, so fetch always accepts its DRAM beats
at once and never blocks the shared DRAM return channel while a command queue
is full. Each instruction is then routed, tagged with its index in the stream:

* STORE -> store queue;
* LOAD of INP or WGT -> load queue;
* any other LOAD, GEMM, ALU, FINISH -> compute queue;
* opcodes 5..7 -> error ILLEGAL_OPCODE (fetch stops).

After dispatching FINISH, fetch requests nothing more and drops the rest of
the stream (instructions after FINISH are never executed).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .interfaces import (DRAM_ADDR_BITS, CommandSignature, ErrorCode, ErrorReport,
                         dma_read_signature)
from .isa import MemType, Opcode, isa_for
from .spec import INSN_BITS, OPCODE_BITS, PIPELINE, dispatch_unit

__all__ = ["Fetch"]


class Fetch(wiring.Component):
    """Instruction fetch and dispatch.

    Parameters
    ----------
    config : VTAConfig
    buffer_depth : int
        Instructions buffered between DRAM and dispatch (power of two >= 2).

    Attributes
    ----------
    start : In(1)
        One-cycle pulse: begin fetching ``insn_count`` instructions at ``insn_addr``.
    insn_addr, insn_count : In(32)
    dma : Out(dma_read_signature(config))
    load_cmd, compute_cmd, store_cmd : Out(CommandSignature)
    error : Out(ErrorReport)
        Held valid after an illegal opcode.
    busy : Out(1)
        High from ``start`` until every requested instruction was dispatched or dropped.
    """

    def __init__(self, config: VTAConfig, *, buffer_depth: int = 8):
        self._config = config
        self._depth = buffer_depth
        super().__init__({
            "start": In(1),
            "insn_addr": In(DRAM_ADDR_BITS),
            "insn_count": In(32),
            "dma": Out(dma_read_signature(config)),
            **{f"{unit}_cmd": Out(CommandSignature) for unit in PIPELINE},
            "error": Out(ErrorReport),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, depth = self._config, self._depth
        bus = cfg.bus_width
        bpi = INSN_BITS // bus                      # beats per instruction
        m.submodules.buf = buf = fifo.SyncFIFOBuffered(width=INSN_BITS, depth=depth)

        running = Signal()
        stopped = Signal()      # FINISH dispatched or error: request nothing more
        failed = Signal()
        finished = Signal()
        left = Signal(32)
        addr = Signal(DRAM_ADDR_BITS)
        credits = Signal(range(depth + 1), init=depth)

        # ---------------------------------------------------------------- requests
        n = Signal(range(depth + 1))
        m.d.comb += n.eq(Mux(left < credits, left, credits))
        enough = Signal()
        m.d.comb += enough.eq((n != 0) & ((n == left) | (n >= depth // 2)))
        req = self.dma.req
        m.d.comb += [req.valid.eq(running & ~stopped & enough),
                     req.payload.addr.eq(addr),
                     req.payload.beats.eq(n * bpi)]
        fired = req.valid & req.ready
        popped = buf.r_en & buf.r_rdy
        m.d.sync += credits.eq(credits + popped - Mux(fired, n, 0))
        with m.If(fired):
            m.d.sync += [left.eq(left - n), addr.eq(addr + n * cfg.insn_bytes)]

        # ---------------------------------------------------------------- assembly
        d = self.dma.data
        if bpi == 1:
            m.d.comb += [buf.w_data.eq(d.payload), buf.w_en.eq(d.valid), d.ready.eq(buf.w_rdy)]
        else:
            part = Signal(INSN_BITS - bus)
            cnt = Signal(range(bpi))
            last = cnt == bpi - 1
            m.d.comb += [buf.w_data.eq(Cat(part, d.payload)), buf.w_en.eq(d.valid & last),
                         d.ready.eq(~last | buf.w_rdy)]
            with m.If(d.valid & d.ready):
                m.d.sync += cnt.eq(Mux(last, 0, cnt + 1))
                if bpi > 2:
                    m.d.sync += part.eq(Cat(part[bus:], d.payload))
                else:
                    m.d.sync += part.eq(d.payload)
            with m.If(self.start):
                m.d.sync += cnt.eq(0)

        # ---------------------------------------------------------------- dispatch
        insn = buf.r_data
        opcode = insn[:OPCODE_BITS]
        mem = data.View(isa_for(cfg).mem.layout(), insn)
        index = Signal(32)
        to = {unit: Signal(name=f"to_{unit}") for unit in PIPELINE}
        illegal = Signal()
        # Routing by dispatch_unit: per opcode, the unit of each memory type (a type
        # without an enum member routes as dispatch_unit(opcode, None)).
        with m.Switch(opcode):
            for op in Opcode:
                with m.Case(op):
                    other = dispatch_unit(op, None)
                    special = [t for t in MemType if dispatch_unit(op, t) != other]
                    for unit in PIPELINE:
                        hits = [mem.memory_type == t for t in special
                                if dispatch_unit(op, t) == unit]
                        if unit == other:
                            hit = (~Cat(*(mem.memory_type == t for t in special)).any()
                                   if special else 1)
                        elif hits:
                            hit = Cat(*hits).any()
                        else:
                            continue
                        m.d.comb += to[unit].eq(hit)
            with m.Default():
                m.d.comb += illegal.eq(1)

        outs = tuple((getattr(self, f"{unit}_cmd"), to[unit]) for unit in PIPELINE)
        live = buf.r_rdy & ~finished & ~failed
        for port, sel in outs:
            m.d.comb += [port.payload.insn.eq(insn), port.payload.index.eq(index),
                         port.valid.eq(live & sel)]
        with m.If(live):
            with m.If(illegal):
                m.d.sync += [failed.eq(1), stopped.eq(1), self.error.valid.eq(1),
                             self.error.code.eq(ErrorCode.ILLEGAL_OPCODE),
                             self.error.index.eq(index)]
            with m.Else():
                m.d.comb += buf.r_en.eq(sum(p.ready & s for p, s in outs) != 0)
        with m.Elif(finished):
            m.d.comb += buf.r_en.eq(1)          # drop what was fetched after FINISH
        with m.If(popped):
            m.d.sync += index.eq(index + 1)
            with m.If(~finished & (opcode == Opcode.FINISH)):
                m.d.sync += [finished.eq(1), stopped.eq(1)]

        m.d.comb += self.busy.eq(running)
        with m.If(running & ~failed & (stopped | (left == 0)) & (credits == depth) & ~fired):
            m.d.sync += running.eq(0)
        with m.If(self.start):
            m.d.sync += [running.eq(1), stopped.eq(0), finished.eq(0), failed.eq(0),
                         left.eq(self.insn_count), addr.eq(self.insn_addr), index.eq(0),
                         credits.eq(depth), self.error.valid.eq(0)]
        return m
