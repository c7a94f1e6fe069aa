"""The VTA vector ALU: one ``BATCH * BLOCK_OUT``-lane int32 operation, combinational.

Opcodes and their semantics are those of the ALU table
(:data:`vtakit.hw.isa.ALU_OPS`): MIN and MAX are signed, ADD wraps modulo
``2**ACC_WIDTH``, SHR shifts every lane by one signed amount ``k`` taken from the
immediate (``k >= 0``: arithmetic right shift by ``k``; ``k < 0``: left shift by
``-k`` keeping the low bits). The Compute module rejects every opcode and operand
the table does not allow in the config (:func:`alu_illegal`) before anything reaches
this block, so every input combination here is legal. A legal opcode of the table
that this block does not implement (:data:`IMPLEMENTED`) fails elaboration.

With the ``requant`` extension (and only then: a config without it gives exactly the
HW_VER 0.0.2 ALU) each lane also has one 32x32 -> 64-bit signed multiplier, shared by
SRDHM and MULSHR, a per-lane rounding shifter for RSHR (its amount is the lane of the
tensor operand) and a 65-bit rounding shifter for MULSHR (its amount ``k`` is the
instruction's immediate). These three take two stages (:data:`REQUANT_STAGES`): the
products and RSHR's result are registered at the end of the compute pipeline's write
stage S{W}, the rounding of the products follows in S{W+1}, which writes ``late``. The
compute module issues such micro-ops every :data:`REQUANT_STAGES` cycles, so a later
micro-op always finds their result (in the SRAM or its forwarding registers); the base
opcodes stay combinational in S{W} (``result``).
"""

from functools import reduce
from operator import or_

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .isa import INT32_MAX, INT32_MIN, AluOp, AluTableError, alu_opcode_bits, alu_ops
from .spec import IMM_MAX, IMM_MIN, SHIFT_LIMIT

__all__ = ["VectorAlu", "SHIFT_BITS", "IMPLEMENTED", "REQUANT_OPS", "REQUANT_STAGES",
           "alu_illegal"]

#: Width of the signed shift amount (``-SHIFT_LIMIT..SHIFT_LIMIT``).
SHIFT_BITS = SHIFT_LIMIT.bit_length() + 1

#: The opcodes the lane expression of :class:`VectorAlu` computes.
IMPLEMENTED = frozenset({AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.SHR,
                         AluOp.SRDHM, AluOp.RSHR, AluOp.MULSHR})

#: The opcodes that need the lane multiplier (generated only when one is legal).
REQUANT_OPS = (AluOp.SRDHM, AluOp.RSHR, AluOp.MULSHR)

#: Pipeline stages of a ``REQUANT_OPS`` micro-op's result (the base opcodes take one):
#: the compute module issues these micro-ops this many cycles apart.
REQUANT_STAGES = 2


def _check_implemented(config):
    missing = [str(e) for e in alu_ops(config) if e.code not in IMPLEMENTED]
    if missing:
        raise AluTableError(f"ALU opcode {', '.join(missing)} is legal in the ALU table "
                            f"(vtakit.hw.isa.ALU_OPS) but hw/alu.py has no RTL for it; "
                            f"implement it in VectorAlu or mark it base=False")


def alu_illegal(opcode, use_imm, imm, config=None):
    """The decoder rule, from the ALU table: true when an ALU instruction's ``alu_opcode``,
    ``use_imm`` and ``imm`` fields are no legal combination in ``config`` (None: the base
    ISA)."""
    ops = alu_ops(config)
    codes = [int(e.code) for e in ops]
    if codes == list(range(len(codes))):
        bad = opcode > codes[-1]
    else:
        bad = ~reduce(or_, [opcode == code for code in codes])
    for e in ops:
        rules = []
        if not e.tensor:
            rules.append(~use_imm)
        if not e.imm:
            rules.append(use_imm)
        lo, hi = e.imm_range
        if e.imm and (lo, hi) != (IMM_MIN, IMM_MAX):
            out = [imm > hi, imm < lo]
            rules.extend(out if not e.tensor else [use_imm & reduce(or_, out)])
        if e.tensor_imm is not None:      # the immediate is a third operand of use_imm=0
            lo, hi = e.tensor_imm
            rules.append(~use_imm & ((imm > hi) | (imm < lo)))
        if rules:
            bad = bad | ((opcode == e.code) & reduce(or_, rules))
    return bad


class VectorAlu(wiring.Component):
    """Lane-wise ``result = op(a, b)``.

    Parameters
    ----------
    config : VTAConfig
        Sizes every port.

    Attributes
    ----------
    op : In(alu_opcode_bits(config))
        A legal opcode of the ALU table in the config (MIN, MAX, ADD, SHR; with the
        ``requant`` extension also SRDHM, RSHR, MULSHR).
    a : In(acc_elem_bits)
        Destination operand, int32 lane ``j`` in bits ``[32*(j+1)-1 : 32*j]``.
    b : In(acc_elem_bits)
        Second operand of MIN/MAX/ADD (a tensor element or the broadcast immediate), the
        per-lane multiplier of SRDHM/MULSHR and the per-lane shift of RSHR.
    shift : In(signed(6))
        The low 6 bits of the immediate: SHR's amount ``k`` in ``-31..31``; read unsigned,
        MULSHR's ``k`` in ``1..62`` (the same for every lane).
    result : Out(acc_elem_bits)
        The base opcodes' result, combinational.
    late : Out(acc_elem_bits)
        Only with the ``requant`` extension: SRDHM/RSHR/MULSHR's result of the inputs of
        the cycle before (registered products and RSHR lanes, then the rounding).
    """

    def __init__(self, config: VTAConfig):
        _check_implemented(config)
        self._config = c = config
        ports = {
            "op": In(alu_opcode_bits(c)),
            "a": In(c.acc_elem_bits),
            "b": In(c.acc_elem_bits),
            "shift": In(signed(SHIFT_BITS)),
            "result": Out(c.acc_elem_bits),
        }
        if {e.code for e in alu_ops(c)} & set(REQUANT_OPS):
            ports["late"] = Out(c.acc_elem_bits)
        super().__init__(ports)

    def elaborate(self, platform):
        c = self._config
        m = Module()
        lanes = c.batch * c.block_out
        a = data.ArrayLayout(signed(c.acc_width), lanes)(self.a)
        b = data.ArrayLayout(signed(c.acc_width), lanes)(self.b)

        # The shift amounts are per instruction, so they are decoded once, not per lane.
        left = self.shift < 0
        right_amount = self.shift.as_unsigned()[:SHIFT_BITS - 1]
        left_amount = (-self.shift).as_unsigned()[:SHIFT_BITS - 1]

        requant = {e.code for e in alu_ops(c)} & set(REQUANT_OPS)
        if requant and requant != set(REQUANT_OPS):
            raise AluTableError(f"hw/alu.py builds SRDHM, RSHR and MULSHR together; the config "
                                f"makes only {', '.join(AluOp(o).name for o in sorted(requant))} "
                                f"legal")
        if requant:
            # the second stage's per-instruction inputs, registered with the lanes
            op_r = Signal.like(self.op)
            k = Signal(SHIFT_BITS)                # MULSHR's shift, 1..62
            m.d.sync += [op_r.eq(self.op), k.eq(self.shift.as_unsigned())]
            k_half = (Const(1, 1) << k)[1:]       # 2^(k-1)

        out, late = [], []
        for j in range(lanes):
            x, y = a[j], b[j]
            shifted = Mux(left, (x << left_amount)[:c.acc_width], (x >> right_amount)[:c.acc_width])
            lane = Mux(self.op == AluOp.SHR, shifted,
                       Mux(self.op == AluOp.ADD, (x + y)[:c.acc_width],
                           Mux((x < y) ^ (self.op == AluOp.MAX), x, y)))
            out.append(lane[:c.acc_width])
            if requant:
                late.append(self._requant_lane(m, j, x, y, op_r, k, k_half))
        m.d.comb += self.result.eq(Cat(out))
        if requant:
            m.d.comb += self.late.eq(Cat(late))
        return m

    def _requant_lane(self, m, j, x, y, op_r, k, k_half):
        """Lane ``j`` of SRDHM, RSHR and MULSHR (the ``requant`` extension) of the inputs
        of the cycle before: stage 1 registers the product and RSHR's result, stage 2
        rounds the product."""
        w = self._config.acc_width
        prod = Signal(signed(2 * w), name=f"requant_prod{j}")
        m.d.sync += prod.eq(x * y)                # the lane's one multiplier
        # SRDHM: gemmlowp's (ab + nudge) / 2^31 truncated equals floor((ab + 2^30) / 2^31)
        # for either sign of ab; only INT32_MIN * INT32_MIN leaves the int32 range.
        min_min = Signal(name=f"requant_min_min{j}")
        m.d.sync += min_min.eq((x == INT32_MIN) & (y == INT32_MIN))
        high = ((prod + (1 << 30)) >> 31)[:w]
        srdhm = Mux(min_min, INT32_MAX, high)
        # RSHR: round half away from zero = floor((x + 2^(e-1) - [x < 0]) / 2^e), e in
        # 1..31 (e > 31 acts as 31, e = 0 leaves x); e < 0 shifts left (0 past 31).
        e = Mux(y > 31, 31, y[:5])
        nudge = (Const(1, 32) << e)[1:] - (x[w - 1] & (e != 0))
        right = ((x + nudge) >> e)[:w]
        left = Mux(y < -31, 0, (x << (-y)[:5])[:w])
        rshr = Signal(w, name=f"requant_rshr{j}")
        m.d.sync += rshr.eq(Mux(y < 0, left, right))
        # MULSHR: (ab + 2^(k-1)) >> k on the exact product, low 32 bits.
        mulshr = ((prod + k_half) >> k)[:w]
        return Mux(op_r == AluOp.SRDHM, srdhm, Mux(op_r == AluOp.RSHR, rshr, mulshr))
