"""The VTA vector ALU: one ``BATCH * BLOCK_OUT``-lane int32 operation, combinational.

Opcodes follow the pinned semantics (``vtakit.hw.isa.AluOp``): MIN and MAX are
signed, ADD wraps modulo ``2**ACC_WIDTH``, SHR shifts every lane by one signed
amount ``k`` taken from the immediate (``k >= 0``: arithmetic right shift by
``k``; ``k < 0``: left shift by ``-k`` keeping the low bits). The Compute module
rejects illegal opcodes, tensor-operand SHR and ``|k| > 31`` before anything
reaches this block, so every input combination here is legal.
"""

from amaranth.hdl import Cat, Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .isa import AluOp
from .spec import SHIFT_LIMIT

__all__ = ["VectorAlu", "SHIFT_BITS"]

#: Width of the signed shift amount (``-SHIFT_LIMIT..SHIFT_LIMIT``).
SHIFT_BITS = SHIFT_LIMIT.bit_length() + 1


class VectorAlu(wiring.Component):
    """Lane-wise ``result = op(a, b)``.

    Parameters
    ----------
    config : VTAConfig
        Sizes every port.

    Attributes
    ----------
    op : In(2)
        An :class:`~vtakit.hw.isa.AluOp` (MIN, MAX, ADD, SHR).
    a : In(acc_elem_bits)
        Destination operand, int32 lane ``j`` in bits ``[32*(j+1)-1 : 32*j]``.
    b : In(acc_elem_bits)
        Second operand of MIN/MAX/ADD (a tensor element or the broadcast immediate).
    shift : In(signed(6))
        SHR amount ``k`` in ``-31..31`` (the same for every lane).
    result : Out(acc_elem_bits)
    """

    def __init__(self, config: VTAConfig):
        self._config = c = config
        super().__init__({
            "op": In(2),
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
