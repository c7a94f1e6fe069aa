"""The VTA GEMM core: one ``BATCH x BLOCK_IN`` by ``BLOCK_OUT x BLOCK_IN`` tile product per cycle.

The core is a two-step pipeline that matches the Compute module's micro-op
pipeline: in a cycle with ``en`` high it takes an input element and a weight
element and registers the ``BATCH * BLOCK_OUT`` dot products; in the next cycle
it adds them to the accumulator element presented then and shows the sum
(modulo ``2**ACC_WIDTH`` per lane) combinationally. Each output lane is a
plain sum of ``BLOCK_IN`` signed products, which synthesis maps onto DSPs.

Shaped for fast compiled simulation (CXXRTL, Verilator): every output lane has
its own dot register, each just wide enough for a sum of ``BLOCK_IN`` products,
loaded only when ``en`` is high. The simulators then evaluate the products only
in cycles that issue a GEMM uop, and on narrow native words, instead of
recomputing one wide register every cycle. The weight element is read as
``BLOCK_OUT`` rows of ``BLOCK_IN`` lanes, so each lane reads only its own row.
"""

from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig

__all__ = ["GemmCore"]


class GemmCore(wiring.Component):
    """Tile product with one register stage, plus accumulate.

    ``result[b, o] = acc[b, o] + sum_i inp[b, i] * wgt[o, i]`` (two's complement,
    wrapping to ``ACC_WIDTH`` bits), where ``inp`` and ``wgt`` are the values
    presented in the last cycle with ``en`` high, before the current one.

    Parameters
    ----------
    config : VTAConfig
        Sizes every port.

    Attributes
    ----------
    en : In(1), init 1
        Load the dot registers from ``inp``/``wgt`` at this clock edge; when low
        they hold (drive it with "a GEMM uop is in this stage" so idle cycles
        cost the simulators nothing). Undriven it is always high.
    inp : In(inp_elem_bits)
        Input element, lane ``b*BLOCK_IN + i`` in bits ``[8*(idx+1)-1 : 8*idx]``.
    wgt : In(wgt_elem_bits)
        Weight element, lane ``o*BLOCK_IN + i`` (the tile is stored out x in).
    acc : In(acc_elem_bits)
        Accumulator element, lane ``b*BLOCK_OUT + o``; sampled combinationally.
    result : Out(acc_elem_bits)
        ``acc`` plus the registered dot products.
    dot : Out(ArrayLayout(signed(dot_bits), BATCH*BLOCK_OUT))
        The registered dot products (exposed for tests and tracing).
    """

    def __init__(self, config: VTAConfig):
        self._config = c = config
        # A sum of BLOCK_IN products of two signed values needs inp+wgt bits
        # plus log2(BLOCK_IN) for the carries; capped at the accumulator width.
        self.dot_bits = min(c.inp_width + c.wgt_width + c.log_block_in, c.acc_width)
        super().__init__({
            "en": In(1, init=1),
            "inp": In(c.inp_elem_bits),
            "wgt": In(c.wgt_elem_bits),
            "acc": In(c.acc_elem_bits),
            "result": Out(c.acc_elem_bits),
            "dot": Out(data.ArrayLayout(signed(self.dot_bits), c.batch * c.block_out)),
        })

    def elaborate(self, platform):
        c = self._config
        m = Module()
        inp = data.ArrayLayout(data.ArrayLayout(signed(c.inp_width), c.block_in),
                               c.batch)(self.inp)
        wgt = data.ArrayLayout(data.ArrayLayout(signed(c.wgt_width), c.block_in),
                               c.block_out)(self.wgt)
        acc = data.ArrayLayout(signed(c.acc_width), c.batch * c.block_out)(self.acc)

        sums = []
        for b in range(c.batch):
            for o in range(c.block_out):
                lane = b * c.block_out + o
                # One register per lane: the simulators see BATCH*BLOCK_OUT narrow
                # enabled flops rather than one wide word recomputed every cycle.
                dot = Signal(signed(self.dot_bits), name=f"dot_{lane}")
                with m.If(self.en):
                    m.d.sync += dot.eq(sum(inp[b][i] * wgt[o][i] for i in range(c.block_in)))
                m.d.comb += self.dot[lane].eq(dot)
                sums.append((acc[lane] + dot)[:c.acc_width])
        m.d.comb += self.result.eq(Cat(sums))
        return m
