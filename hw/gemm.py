"""The VTA GEMM core: one ``BATCH x BLOCK_IN`` by ``BLOCK_OUT x BLOCK_IN`` tile product per cycle.

The core is a two-step pipeline that matches the Compute module's micro-op
pipeline: in cycle *t* it takes an input element and a weight element and
registers the ``BATCH * BLOCK_OUT`` dot products (one wide register, each lane
just wide enough for a sum of ``BLOCK_IN`` signed products); in cycle *t+1* it
adds them to the accumulator element presented then and shows the sum
(modulo ``2**ACC_WIDTH`` per lane) combinationally. Each output lane is a
plain sum of ``BLOCK_IN`` signed products, which synthesis maps onto DSPs and
which CXXRTL/Verilator simulate as straight-line arithmetic.
"""

from amaranth.hdl import Cat, Module, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig

__all__ = ["GemmCore"]


class GemmCore(wiring.Component):
    """Tile product with one register stage, plus accumulate.

    ``result[b, o] = acc[b, o] + sum_i inp[b, i] * wgt[o, i]`` (two's complement,
    wrapping to ``ACC_WIDTH`` bits), where ``inp`` and ``wgt`` are the values
    presented one cycle before ``acc``.

    Parameters
    ----------
    config : VTAConfig
        Sizes every port.

    Attributes
    ----------
    inp : In(inp_elem_bits)
        Input element, lane ``b*BLOCK_IN + i`` in bits ``[8*(idx+1)-1 : 8*idx]``.
    wgt : In(wgt_elem_bits)
        Weight element, lane ``o*BLOCK_IN + i`` (the tile is stored out x in).
    acc : In(acc_elem_bits)
        Accumulator element, lane ``b*BLOCK_OUT + o``; sampled combinationally.
    result : Out(acc_elem_bits)
        ``acc`` plus the dot products of the ``inp``/``wgt`` of the previous cycle.
    dot : Out(ArrayLayout(signed(dot_bits), BATCH*BLOCK_OUT))
        The registered dot products (exposed for tests and tracing).
    """

    def __init__(self, config: VTAConfig):
        self._config = c = config
        # A sum of BLOCK_IN products of two signed values needs inp+wgt bits
        # plus log2(BLOCK_IN) for the carries; capped at the accumulator width.
        self.dot_bits = min(c.inp_width + c.wgt_width + c.log_block_in, c.acc_width)
        super().__init__({
            "inp": In(c.inp_elem_bits),
            "wgt": In(c.wgt_elem_bits),
            "acc": In(c.acc_elem_bits),
            "result": Out(c.acc_elem_bits),
            "dot": Out(data.ArrayLayout(signed(self.dot_bits), c.batch * c.block_out)),
        })

    def elaborate(self, platform):
        c = self._config
        m = Module()
        inp = data.ArrayLayout(signed(c.inp_width), c.batch * c.block_in)(self.inp)
        wgt = data.ArrayLayout(signed(c.wgt_width), c.block_out * c.block_in)(self.wgt)
        acc = data.ArrayLayout(signed(c.acc_width), c.batch * c.block_out)(self.acc)

        for b in range(c.batch):
            for o in range(c.block_out):
                lane = b * c.block_out + o
                products = [inp[b * c.block_in + i] * wgt[o * c.block_in + i]
                            for i in range(c.block_in)]
                m.d.sync += self.dot[lane].eq(sum(products))

        m.d.comb += self.result.eq(Cat(
            (acc[lane] + self.dot[lane])[:c.acc_width] for lane in range(c.batch * c.block_out)))
        return m
