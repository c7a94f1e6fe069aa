"""The control/status register block (register map: :class:`~vtakit.hw.interfaces.Reg`).

Run protocol: the host writes INSN_COUNT and INSN_ADDR, then 1 to CTRL. A
start while busy is ignored. The block then pulses ``clear`` (the top resets
every module and queue with it, SRAM contents stay) and one cycle later
``start`` (fetch begins). CTRL reads bit0 busy, bit1 done, bit2 error.

* done: compute finished FINISH and no DRAM transfer is outstanding;
* error: the first :class:`~vtakit.hw.interfaces.ErrorReport` raised by any
  module is latched into ERROR_CODE / ERROR_MODULE / ERROR_INSN, CTRL shows
  done and error, and ``halt`` stays high (the top holds the modules in reset,
  so the design stops).

CYCLES counts the cycles of the run; the counter registers copy the module
counters while the run is live, so they keep their final values afterwards.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .interfaces import CsrSignature, ErrorReport, Reg, Unit

__all__ = ["ControlRegisters"]


class ControlRegisters(wiring.Component):
    """The CSR block.

    Attributes
    ----------
    bus : In(CsrSignature)
        Host side.
    clear, start : Out(1)
        One-cycle pulses beginning a run (``start`` one cycle after ``clear``).
    halt : Out(1)
        High while an error is latched.
    insn_addr, insn_count : Out(32)
    finish : In(1)
        Pulse from compute when FINISH completed.
    dma_busy : In(1)
        DRAM transfers outstanding (done waits for them).
    errors : In(ErrorReport) array, indexed by :class:`~vtakit.hw.spec.Unit`
    load_count, gemm_count, alu_count, store_count, uop_count : In(32)
    unit_busy : In(4)
        Bit ``u``: :class:`~vtakit.hw.spec.Unit` ``u`` holds an instruction (UNIT_STATE).
    token_levels : In(32) array of 2, cmd_levels : In(32)
        Queue levels packed as :data:`~vtakit.hw.spec.TOKEN_LEVEL_FIELDS` and
        :data:`~vtakit.hw.spec.CMD_LEVEL_FIELDS` say (TOKEN_LEVELS_0/1, CMD_LEVELS).
    irq : Out(1)
        High while done or error is set.
    """

    def __init__(self):
        super().__init__({
            "bus": In(CsrSignature),
            "clear": Out(1),
            "start": Out(1),
            "halt": Out(1),
            "insn_addr": Out(32),
            "insn_count": Out(32),
            "finish": In(1),
            "dma_busy": In(1),
            "errors": In(ErrorReport).array(len(Unit)),
            "load_count": In(32),
            "gemm_count": In(32),
            "alu_count": In(32),
            "store_count": In(32),
            "uop_count": In(32),
            "unit_busy": In(len(Unit)),
            "token_levels": In(32).array(2),
            "cmd_levels": In(32),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        busy, done, error, finished = Signal(), Signal(), Signal(), Signal()
        cycles = Signal(32)
        err_code, err_insn, err_module = Signal(4), Signal(32), Signal(2)
        counts = {Reg.LOAD_COUNT: self.load_count, Reg.GEMM_COUNT: self.gemm_count,
                  Reg.ALU_COUNT: self.alu_count, Reg.STORE_COUNT: self.store_count,
                  Reg.UOP_COUNT: self.uop_count}
        shadows = {reg: Signal(32, name=reg.name.lower()) for reg in counts}

        bus = self.bus
        regs = {
            Reg.CTRL: busy | (done << 1) | (error << 2),
            Reg.CYCLES: cycles,
            Reg.INSN_COUNT: self.insn_count,
            Reg.INSN_ADDR: self.insn_addr,
            Reg.ERROR_CODE: err_code,
            Reg.ERROR_INSN: err_insn,
            Reg.ERROR_MODULE: err_module,
            **shadows,
            Reg.UNIT_STATE: self.unit_busy,
            Reg.TOKEN_LEVELS_0: self.token_levels[0],
            Reg.TOKEN_LEVELS_1: self.token_levels[1],
            Reg.CMD_LEVELS: self.cmd_levels,
        }
        with m.Switch(bus.addr):
            for reg, value in regs.items():
                with m.Case(int(reg)):
                    m.d.comb += bus.r_data.eq(value)

        m.d.sync += self.start.eq(self.clear)
        m.d.comb += [self.halt.eq(error), self.irq.eq(done | error)]
        with m.If(bus.w_en):
            with m.Switch(bus.addr):
                with m.Case(Reg.INSN_COUNT):
                    m.d.sync += self.insn_count.eq(bus.w_data)
                with m.Case(Reg.INSN_ADDR):
                    m.d.sync += self.insn_addr.eq(bus.w_data)
                with m.Case(Reg.CTRL):
                    with m.If(bus.w_data[0] & ~busy):
                        m.d.comb += self.clear.eq(1)

        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
            for reg, src in counts.items():
                m.d.sync += shadows[reg].eq(src)
            with m.If(self.finish):
                m.d.sync += finished.eq(1)
            with m.If((finished | self.finish) & ~self.dma_busy):
                m.d.sync += [busy.eq(0), done.eq(1)]
            # The first error wins; on a tie the lowest module number.
            for unit in reversed(Unit):
                rep = self.errors[unit]
                with m.If(rep.valid):
                    m.d.sync += [err_code.eq(rep.code), err_insn.eq(rep.index),
                                 err_module.eq(unit)]
            with m.If(sum(self.errors[u].valid for u in Unit) != 0):
                m.d.sync += [busy.eq(0), done.eq(1), error.eq(1)]

        with m.If(self.clear):
            m.d.sync += [busy.eq(1), done.eq(0), error.eq(0), finished.eq(0), cycles.eq(0),
                         err_code.eq(0), err_insn.eq(0), err_module.eq(0)]
            m.d.sync += [s.eq(0) for s in shadows.values()]
        return m
