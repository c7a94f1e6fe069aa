"""Stage S0 of the compute module's micro-op pipeline: the loop sequencer of GEMM and ALU.

A GEMM or ALU instruction runs its micro-ops ``uop_bgn .. uop_end - 1`` (index ``k``)
inside two loops, ``p < iter_out`` and ``q < iter_in`` (``p > q > k``), and adds to
each micro-op's dst/src/wgt index the offset ``p * factor_out + q * factor_in`` of that
operand. The offsets come from incremental adders (a base per ``p`` and a running
offset per ``q``), never from a multiplier.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .isa import isa_for
from .spec import LOOP_ITER_BITS

__all__ = ["LoopSequencer"]


class LoopSequencer(wiring.Component):
    """The ``p > q > k`` loop of the instruction in ``insn``.

    Parameters
    ----------
    config : VTAConfig

    Attributes
    ----------
    insn : In(insn_bits)
        The instruction (its GEMM/ALU loop fields).
    gemm : In(1)
        The instruction is a GEMM (its src factors are inp-index wide; an ALU's are
        acc-index wide).
    start : In(1)
        Restart at the loop's first micro-op (the instruction's dispatch).
    issue : In(1)
        The micro-op ``k`` issues this cycle: step to the next one.
    k : Out(log_uop_depth + 1)
        The micro-op to issue (the uop SRAM's read address).
    last : Out(1)
        ``k`` is the loop's last micro-op (at ``p = iter_out - 1``, ``q = iter_in - 1``).
    dst_off, src_off, wgt_off : Out(...)
        The operand offsets of the micro-op ``k`` (wide enough not to wrap:
        ``p*f_out + q*f_in < 2**(index width + LOOP_ITER_BITS + 2)``).
    """

    def __init__(self, config: VTAConfig):
        self._config = c = config
        extra = LOOP_ITER_BITS + 2
        # the uop's src field: an inp index for GEMM, an acc index for ALU
        src_w = max(c.log_acc_depth, c.log_inp_depth)
        super().__init__({
            "insn": In(c.insn_bits),
            "gemm": In(1),
            "start": In(1),
            "issue": In(1),
            "k": Out(c.log_uop_depth + 1),
            "last": Out(1),
            "dst_off": Out(c.log_acc_depth + extra),
            "src_off": Out(src_w + extra),
            "wgt_off": Out(c.log_wgt_depth + extra),
        })

    def elaborate(self, platform):
        c = self._config
        isa = isa_for(c)
        m = Module()
        loop = isa.gemm.layout()(self.insn)    # GEMM and ALU share the loop fields
        alu_f = isa.alu.layout()(self.insn)
        k, dst_off, src_off, wgt_off = self.k, self.dst_off, self.src_off, self.wgt_off
        q = Signal(LOOP_ITER_BITS)
        p = Signal(LOOP_ITER_BITS)
        dst_pbase = Signal.like(dst_off)
        src_pbase = Signal.like(src_off)
        wgt_pbase = Signal.like(wgt_off)

        k_last = k + 1 == loop.uop_end
        q_last = q + 1 == loop.iter_in
        p_last = p + 1 == loop.iter_out
        m.d.comb += self.last.eq(k_last & q_last & p_last)
        # Source factors: GEMM's are inp-index wide, ALU's acc-index wide.
        src_f_out = Signal(len(src_off))
        src_f_in = Signal(len(src_off))
        with m.If(self.gemm):
            m.d.comb += [src_f_out.eq(loop.src_factor_out), src_f_in.eq(loop.src_factor_in)]
        with m.Else():
            m.d.comb += [src_f_out.eq(alu_f.src_factor_out), src_f_in.eq(alu_f.src_factor_in)]

        with m.If(self.start):
            m.d.sync += [k.eq(loop.uop_bgn), q.eq(0), p.eq(0),
                         dst_pbase.eq(0), dst_off.eq(0), src_pbase.eq(0), src_off.eq(0),
                         wgt_pbase.eq(0), wgt_off.eq(0)]
        with m.Elif(self.issue):
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
        return m
