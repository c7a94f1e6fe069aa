"""The VTA top level: fetch, load, compute, store, their queues, the SRAMs, DRAM and CSRs.

::

              +-------+  load_cmd   +------+  l2g/g2l  +---------+  g2s/s2g  +-------+
    DRAM ---->| fetch |------------>| load |<=========>| compute |<=========>| store |---> DRAM
     (read    +-------+  compute_cmd+------+  tokens   +---------+  tokens   +-------+   (write)
      arbiter)    |------------------------------------->^ store_cmd  -------->^
                       inp/wgt SRAM: load writes, compute reads;  out SRAM: compute writes, store reads

Every module and queue is reset when a run starts (SRAM contents persist) and
held in reset while an error is latched (the design stops; the error registers
say where). DRAM reads of fetch, load and compute (uops, acc) share one read
master through :class:`~vtakit.hw.dma.DmaReadArbiter`; store is the only writer.
"""

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .dma import DmaReadArbiter, DmaWriteArbiter
from .fetch import Fetch
from .interfaces import (DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH, CsrSignature,
                         dma_read_signature, dma_write_signature)
from .load import Load
from .queues import CommandQueue, TokenQueue
from .regs import ControlRegisters
from .store import Store
from .spec import (CMD_LEVEL_FIELDS, DMA_READ_AHEAD_BEATS, PIPELINE, TOKEN_LEVEL_FIELDS,
                   TOKEN_QUEUES, Reg, Unit)

__all__ = ["VTA", "READ_PRIORITY"]

#: Read clients granted before the round robin (:class:`~vtakit.hw.dma.DmaReadArbiter`):
#: the compute module's micro-op and acc loaders (clients 2 and 3 of ``elaborate``).
READ_PRIORITY = (2, 3)


class VTA(wiring.Component):
    """The whole accelerator.

    Parameters
    ----------
    config : VTAConfig
    token_depth : int
        Capacity of each dependency-token queue.
    cmd_depth : int
        Depth of each command queue.
    compute : wiring.Component, optional
        A component with the signature of :class:`vtakit.hw.compute.Compute`
        (default: ``Compute(config)``); tests substitute simpler ones.

    Attributes
    ----------
    csr : In(CsrSignature)
    dram_rd : Out(dma_read_signature(config))
    dram_wr : Out(dma_write_signature(config))
    irq : Out(1)
        High while done or error is set.
    fetch, load, compute, store, regs, tokens, commands
        The submodules (``tokens``/``commands``: dicts of queues by name), for
        simulators that report module state.
    """

    def __init__(self, config: VTAConfig, *, token_depth: int = DEFAULT_TOKEN_DEPTH,
                 cmd_depth: int = DEFAULT_CMD_DEPTH, compute=None):
        self.config = config
        if compute is None:
            from .compute import Compute
            compute = Compute(config)
        self.fetch = Fetch(config)
        self.load = Load(config)
        self.compute = compute
        self.store = Store(config)
        self.regs = ControlRegisters()
        self.tokens = {name: TokenQueue(token_depth) for name in TOKEN_QUEUES}
        self.commands = {str(unit): CommandQueue(cmd_depth) for unit in PIPELINE}
        self.rd_arbiter = DmaReadArbiter(config, 4, max_beats=DMA_READ_AHEAD_BEATS,
                                         priority=READ_PRIORITY)
        self.wr_arbiter = DmaWriteArbiter(config, 1)
        super().__init__({
            "csr": In(CsrSignature),
            "dram_rd": Out(dma_read_signature(config)),
            "dram_wr": Out(dma_write_signature(config)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.config
        regs = self.regs
        m.submodules.regs = regs
        wiring.connect(m, wiring.flipped(self.csr), regs.bus)
        m.d.comb += self.irq.eq(regs.irq)

        # Everything but the CSRs and the SRAMs restarts with each run and stops on an error.
        def resettable(name, block):
            m.submodules[name] = ResetInserter(regs.clear | regs.halt)(block)

        fetch, load, compute, store = self.fetch, self.load, self.compute, self.store
        for name in ("fetch", "load", "compute", "store", "rd_arbiter", "wr_arbiter"):
            resettable(name, getattr(self, name))
        for name, q in self.tokens.items():
            resettable(f"tokens_{name}", q)
        for name, q in self.commands.items():
            resettable(f"cmd_{name}", q)

        m.d.comb += [fetch.start.eq(regs.start), fetch.insn_addr.eq(regs.insn_addr),
                     fetch.insn_count.eq(regs.insn_count)]
        units = {Unit.FETCH: fetch, Unit.LOAD: load, Unit.COMPUTE: compute, Unit.STORE: store}
        for unit in PIPELINE:
            wiring.connect(m, getattr(fetch, f"{unit}_cmd"), self.commands[str(unit)].push)
            wiring.connect(m, self.commands[str(unit)].pop, units[unit].cmd)

        for name, (producer, consumer) in TOKEN_QUEUES.items():
            wiring.connect(m, getattr(units[producer], name), self.tokens[name].push)
            wiring.connect(m, self.tokens[name].pop, getattr(units[consumer], name))

        # SRAMs (synchronous read ports; tokens order every access across units).
        m.submodules.inp_sram = inp = memory.Memory(shape=c.inp_elem_bits, depth=c.inp_depth, init=[])
        m.submodules.wgt_sram = wgt = memory.Memory(shape=c.wgt_elem_bits, depth=c.wgt_depth, init=[])
        if c.compute_overlap:
            # two out banks by the index's top bit (the compute module writes both in a
            # cycle with its ALU lane); store reads either
            outs = [memory.Memory(shape=c.out_elem_bits, depth=c.out_depth // 2, init=[])
                    for _ in range(2)]
            m.submodules.out_sram0, m.submodules.out_sram1 = outs
            self.srams = {"inp": inp, "wgt": wgt, "out0": outs[0], "out1": outs[1]}
        else:
            m.submodules.out_sram = out = memory.Memory(shape=c.out_elem_bits, depth=c.out_depth, init=[])
            self.srams = {"inp": inp, "wgt": wgt, "out": out}
        wiring.connect(m, load.inp_wr, inp.write_port())
        wiring.connect(m, load.wgt_wr, wgt.write_port())
        wiring.connect(m, compute.inp_rd, inp.read_port())
        wiring.connect(m, compute.wgt_rd, wgt.read_port())
        if c.compute_overlap:
            top = c.log_out_depth - 1
            wiring.connect(m, compute.out_wr, outs[0].write_port())
            wiring.connect(m, compute.out_wr1, outs[1].write_port())
            reads = [o.read_port() for o in outs]
            sel = Signal()
            with m.If(store.out_rd.en):
                m.d.sync += sel.eq(store.out_rd.addr[top])
            m.d.comb += [*(r.addr.eq(store.out_rd.addr[:top]) for r in reads),
                         *(r.en.eq(store.out_rd.en) for r in reads),
                         store.out_rd.data.eq(Mux(sel, reads[1].data, reads[0].data))]
        else:
            wiring.connect(m, compute.out_wr, out.write_port())
            wiring.connect(m, store.out_rd, out.read_port())

        # DRAM.
        rd, wr = self.rd_arbiter, self.wr_arbiter
        for i, client in enumerate((fetch.dma, load.dma, compute.uop_dma, compute.acc_dma)):
            wiring.connect(m, client, rd.clients[i])
        wiring.connect(m, store.dma, wr.clients[0])
        wiring.connect(m, rd.master, wiring.flipped(self.dram_rd))
        wiring.connect(m, wr.master, wiring.flipped(self.dram_wr))

        # Status.
        m.d.comb += [
            regs.finish.eq(compute.finish),
            regs.dma_busy.eq(rd.busy | wr.busy),
            *(regs.errors[unit].eq(units[unit].error) for unit in Unit),
            regs.load_count.eq(load.count),
            regs.store_count.eq(store.count),
            regs.gemm_count.eq(compute.gemm_count),
            regs.alu_count.eq(compute.alu_count),
            regs.uop_count.eq(compute.uop_count),
            # Debug registers: a unit "holds an instruction" (compute: its command port
            # is not ready), and the queue levels, saturated to their fields.
            regs.unit_busy.eq(Cat({Unit.FETCH: fetch.busy, Unit.LOAD: load.busy,
                                   Unit.COMPUTE: ~compute.cmd.ready, Unit.STORE: store.busy}[u]
                                  for u in Unit)),
        ]
        # Each level word is driven by one Cat, not field by field: CXXRTL then inlines it
        # into its case of the CSR read mux and evaluates it only while that CSR is read.
        words = {Reg.TOKEN_LEVELS_0: regs.token_levels[0], Reg.TOKEN_LEVELS_1: regs.token_levels[1],
                 Reg.CMD_LEVELS: regs.cmd_levels}
        fields = [(self.tokens[name].level, field) for name, field in TOKEN_LEVEL_FIELDS.items()]
        fields += [(self.commands[str(unit)].level, field)
                   for unit, field in CMD_LEVEL_FIELDS.items()]
        parts = {reg: [] for reg in words}   # (lsb, value, width) per word
        for level, (reg, lsb, width) in fields:
            top = (1 << width) - 1
            value = Mux(level > top, top, level)[:width] if len(level) > width else level
            parts[reg].append((lsb, value, width))
        for reg, word in words.items():
            pos, cat = 0, []
            for lsb, value, width in sorted(parts[reg], key=lambda part: part[0]):
                cat += [Const(0, lsb - pos), value, Const(0, width - len(value))]
                pos = lsb + width
            m.d.comb += word.eq(Cat(cat))
        return m
