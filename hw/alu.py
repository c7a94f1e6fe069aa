"""The VTA vector ALU: one ``BATCH * BLOCK_OUT``-lane int32 operation, combinational.

Opcodes and their semantics are those of the ALU table
(:data:`vtakit.hw.isa.ALU_OPS`): MIN and MAX are signed, ADD wraps modulo
``2**ACC_WIDTH``, SHR shifts every lane by one signed amount ``k`` taken from the
immediate (``k >= 0``: arithmetic right shift by ``k``; ``k < 0``: left shift by
``-k`` keeping the low bits). The Compute module rejects every opcode and operand
the table does not allow (:func:`alu_illegal`) before anything reaches this block,
so every input combination here is legal. A legal opcode of the table that this
block does not implement (:data:`IMPLEMENTED`) fails elaboration.
"""

from functools import reduce
from operator import or_

from amaranth.hdl import Cat, Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .isa import AluOp, AluTableError, alu_opcode_bits, alu_ops
from .spec import IMM_MAX, IMM_MIN, SHIFT_LIMIT

__all__ = ["VectorAlu", "SHIFT_BITS", "IMPLEMENTED", "alu_illegal"]

#: Width of the signed shift amount (``-SHIFT_LIMIT..SHIFT_LIMIT``).
SHIFT_BITS = SHIFT_LIMIT.bit_length() + 1

#: The opcodes the lane expression of :class:`VectorAlu` computes.
IMPLEMENTED = frozenset({AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.SHR})


def _check_implemented():
    missing = [str(e) for e in alu_ops() if e.code not in IMPLEMENTED]
    if missing:
        raise AluTableError(f"ALU opcode {', '.join(missing)} is legal in the ALU table "
                            f"(vtakit.hw.isa.ALU_OPS) but hw/alu.py has no RTL for it; "
                            f"implement it in VectorAlu or mark it base=False")


def alu_illegal(opcode, use_imm, imm):
    """The decoder rule, from the ALU table: true when an ALU instruction's ``alu_opcode``,
    ``use_imm`` and ``imm`` fields are no legal combination."""
    codes = [int(e.code) for e in alu_ops()]
    if codes == list(range(len(codes))):
        bad = opcode > codes[-1]
    else:
        bad = ~reduce(or_, [opcode == code for code in codes])
    for e in alu_ops():
        rules = []
        if not e.tensor:
            rules.append(~use_imm)
        if not e.imm:
            rules.append(use_imm)
        lo, hi = e.imm_range
        if e.imm and (lo, hi) != (IMM_MIN, IMM_MAX):
            out = [imm > hi, imm < lo]
            rules.extend(out if not e.tensor else [use_imm & reduce(or_, out)])
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
    op : In(alu_opcode_bits())
        A legal opcode of the ALU table (MIN, MAX, ADD, SHR).
    a : In(acc_elem_bits)
        Destination operand, int32 lane ``j`` in bits ``[32*(j+1)-1 : 32*j]``.
    b : In(acc_elem_bits)
        Second operand of MIN/MAX/ADD (a tensor element or the broadcast immediate).
    shift : In(signed(6))
        SHR amount ``k`` in ``-31..31`` (the same for every lane).
    result : Out(acc_elem_bits)
    """

    def __init__(self, config: VTAConfig):
        _check_implemented()
        self._config = c = config
        super().__init__({
            "op": In(alu_opcode_bits()),
            "a": In(c.acc_elem_bits),
            "b": In(c.acc_elem_bits),
            "shift": In(signed(SHIFT_BITS)),
            "result": Out(c.acc_elem_bits),
        })

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

        out = []
        for j in range(lanes):
            x, y = a[j], b[j]
            shifted = Mux(left, (x << left_amount)[:c.acc_width], (x >> right_amount)[:c.acc_width])
            lane = Mux(self.op == AluOp.SHR, shifted,
                       Mux(self.op == AluOp.ADD, (x + y)[:c.acc_width],
                           Mux((x < y) ^ (self.op == AluOp.MAX), x, y)))
            out.append(lane[:c.acc_width])
        m.d.comb += self.result.eq(Cat(out))
        return m
