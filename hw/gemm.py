"""The VTA GEMM core: one ``BATCH x BLOCK_IN`` by ``BLOCK_OUT x BLOCK_IN`` tile product per cycle.

A pipeline of :attr:`GemmCore.latency` register stages from the operands to the dot
products, so that no stage holds more than a multiplier or two adder levels:

1. the operands are registered (on the ECP5 inside the ``MULT18X18D``: its input
   registers);
2. each product is registered (the DSP's output register; on 7-series Yosys packs
   these two stages into the DSP48's A/B and M/P registers);
3. the adder tree of each output lane, registered after every two levels
   (``ceil(log2(BLOCK_IN) / 2)`` stages; the last one is the dot register).

``result = acc + dot`` (modulo ``2**ACC_WIDTH`` per lane) is combinational: the compute
module presents the accumulator operand in the cycle the dot products are shown and
writes the sum back at the end of it.

Which multipliers are hard DSPs is a matter of the platform (the ``platform`` argument
of ``elaborate``), never of the config: a platform with ``family == "ecp5"`` gets
``MULT18X18D`` instances with their registers set (Yosys does not use them, and nextpnr
times a DSP without them as one long combinational path); a platform with an integer
``dsp_budget`` gets that many products as DSPs and the rest as LUT multipliers (a
shift-and-add array Yosys does not map to DSPs), so a GEMM with more MACs than the part
has DSPs still fits. Without a platform (simulation, Verilog export) every product is a
plain ``*`` with the same registers: the simulators see the same cycle behavior and no
vendor cell.

Shaped for fast compiled simulation (CXXRTL, Verilator): every register stage is
loaded only in cycles with a GEMM micro-op in it (``en`` and its delayed copies), so the
simulators evaluate the products only then.
"""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig

__all__ = ["GemmCore", "Multiplier", "TREE_LEVELS_PER_STAGE", "gemm_latency"]

#: Adder levels between two registers of the reduction tree.
TREE_LEVELS_PER_STAGE = 2

#: Operand width of the ECP5 multiplier cell.
_ECP5_MULT_BITS = 18


def gemm_latency(config: VTAConfig) -> int:
    """Register stages of :class:`GemmCore` from its operands to its dot products: the
    operand and product registers, then one per :data:`TREE_LEVELS_PER_STAGE` adder
    levels of the ``BLOCK_IN``-input reduction."""
    return 2 + -(-config.log_block_in // TREE_LEVELS_PER_STAGE)


def _platform_family(platform):
    return getattr(platform, "family", None)


def _adder_tree(m, terms):
    """The sum of ``terms`` as a balanced tree of two-input adds, each sum a kept signal.

    ``keep`` stops Yosys's ``alumacc`` from merging the adds into one multi-operand
    ``$macc``, which it maps to a full-adder array in LUTs (an 8x8 product: about
    320 LUT4 on the ECP5); kept, each add is a carry chain (64 LUT4 + 36 ``CCU2C``;
    on 7-series 101 LUTs instead of 131), fewer cells and shorter wires to route.
    """
    while len(terms) > 1:
        pairs = []
        for j in range(0, len(terms) - 1, 2):
            total = terms[j] + terms[j + 1]
            kept = Signal(total.shape(), name=f"sum_{len(terms)}_{j // 2}", attrs={"keep": 1})
            m.d.comb += kept.eq(total)
            pairs.append(kept)
        terms = pairs + terms[len(terms) - len(terms) % 2:]
    return terms[0]


class Multiplier(wiring.Component):
    """A signed multiplier with registered operands and a registered product (latency 2).

    Parameters
    ----------
    a_width, b_width : int
        Signed operand widths; the product is ``a_width + b_width`` bits.
    kind : str
        ``"dsp"`` (a hard multiplier where the platform has one: an ECP5 ``MULT18X18D``
        with its input and output registers, elsewhere ``*`` that Yosys maps to a DSP) or
        ``"lut"`` (a shift-and-add array in logic).

    Attributes
    ----------
    en : In(1)
        Load the operand registers (cycle 0).
    en_product : In(1)
        Load the product register (cycle 1; ``en`` delayed by the caller's pipeline).
    a, b : In(signed)
    p : Out(signed(a_width + b_width))
        ``a * b`` of the operands presented two loads before.
    """

    def __init__(self, a_width, b_width, kind="dsp"):
        if kind not in ("dsp", "lut"):
            raise ValueError(f"multiplier kind {kind!r}: 'dsp' or 'lut'")
        self.kind = kind
        self._wa, self._wb = a_width, b_width
        super().__init__({
            "en": In(1), "en_product": In(1),
            "a": In(signed(a_width)), "b": In(signed(b_width)),
            "p": Out(signed(a_width + b_width)),
        })

    def elaborate(self, platform):
        m = Module()
        wp = self._wa + self._wb
        if (self.kind == "dsp" and _platform_family(platform) == "ecp5"
                and max(self._wa, self._wb) <= _ECP5_MULT_BITS):
            # Registers inside the cell; CE always on (only the lanes' later registers are
            # gated: a product nobody reads is harmless).
            n = _ECP5_MULT_BITS
            a = Signal(signed(n))
            b = Signal(signed(n))
            p = Signal(2 * n)
            m.d.comb += [a.eq(self.a), b.eq(self.b)]
            ports = {f"i_A{i}": a[i] for i in range(n)}
            ports.update({f"i_B{i}": b[i] for i in range(n)})
            ports.update({f"i_C{i}": Const(0, 1) for i in range(n)})
            ports.update({f"o_P{i}": p[i] for i in range(2 * n)})
            m.submodules.dsp = Instance(
                "MULT18X18D",
                p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_OUTPUT_CLK="CLK0",
                p_GSR="DISABLED",
                i_CLK0=ClockSignal("sync"), i_CE0=Const(1, 1), i_RST0=Const(0, 1),
                i_SIGNEDA=Const(1, 1), i_SIGNEDB=Const(1, 1),
                i_SOURCEA=Const(0, 1), i_SOURCEB=Const(0, 1),
                **ports)
            m.d.comb += self.p.eq(p[:wp].as_signed())
            return m
        a = Signal(signed(self._wa))
        b = Signal(signed(self._wb))
        with m.If(self.en):
            m.d.sync += [a.eq(self.a), b.eq(self.b)]
        if self.kind == "dsp":
            product = a * b
        else:
            # Two's complement shift-and-add: the sign bit of b weighs -2**(wb-1).
            terms = [Mux(b[j], a, 0).as_signed() << j for j in range(self._wb - 1)]
            terms.append(-(Mux(b[-1], a, 0).as_signed() << (self._wb - 1)))
            product = _adder_tree(m, terms)
        with m.If(self.en_product):
            m.d.sync += self.p.eq(product)
        return m


class GemmCore(wiring.Component):
    """Pipelined tile product, plus accumulate.

    ``result[b, o] = acc[b, o] + sum_i inp[b, i] * wgt[o, i]`` (two's complement,
    wrapping to ``ACC_WIDTH`` bits), where ``inp`` and ``wgt`` are the operands
    presented with ``en`` high :attr:`latency` cycles before (the products of one
    presentation travel through the stages together; ``en`` must be high for each
    operand pair that is to reach ``dot``).

    Parameters
    ----------
    config : VTAConfig
        Sizes every port.

    Attributes
    ----------
    latency : int
        Register stages from ``inp``/``wgt`` to ``dot``.
    dsp_products : int
        Products built as hard multipliers on the platform of the last elaboration
        (``BATCH * BLOCK_OUT * BLOCK_IN`` without a DSP budget).
    en : In(1), init 1
        A GEMM micro-op presents its operands this cycle (the stages load only when
        the micro-op reaches them). Undriven it is always high.
    inp : In(inp_elem_bits)
        Input element, lane ``b*BLOCK_IN + i`` in bits ``[8*(idx+1)-1 : 8*idx]``.
    wgt : In(wgt_elem_bits)
        Weight element, lane ``o*BLOCK_IN + i`` (the tile is stored out x in).
    acc : In(acc_elem_bits)
        Accumulator element, lane ``b*BLOCK_OUT + o``; sampled combinationally.
    result : Out(acc_elem_bits)
        ``acc`` plus the dot products.
    dot : Out(ArrayLayout(signed(dot_bits), BATCH*BLOCK_OUT))
        The registered dot products (exposed for tests and tracing).
    """

    def __init__(self, config: VTAConfig):
        self._config = c = config
        # A sum of BLOCK_IN products of two signed values needs inp+wgt bits
        # plus log2(BLOCK_IN) for the carries; capped at the accumulator width.
        self.dot_bits = min(c.inp_width + c.wgt_width + c.log_block_in, c.acc_width)
        self.latency = gemm_latency(c)
        self.dsp_products = c.batch * c.block_out * c.block_in
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

        # en delayed through the stages: valid[s] loads the registers at the end of stage s.
        valid = [self.en]
        for s in range(1, self.latency):
            v = Signal(name=f"valid_{s}")
            m.d.sync += v.eq(valid[-1])
            valid.append(v)

        total = c.batch * c.block_out * c.block_in
        budget = getattr(platform, "dsp_budget", None)
        self.dsp_products = total if budget is None else max(0, min(total, int(budget)))

        sums = []
        n = 0
        for b in range(c.batch):
            for o in range(c.block_out):
                lane = b * c.block_out + o
                vals = []
                for i in range(c.block_in):
                    mul = Multiplier(c.inp_width, c.wgt_width,
                                     "dsp" if n < self.dsp_products else "lut")
                    n += 1
                    m.submodules[f"mul_{lane}_{i}"] = mul
                    m.d.comb += [mul.a.eq(inp[b][i]), mul.b.eq(wgt[o][i]),
                                 mul.en.eq(valid[0]), mul.en_product.eq(valid[1])]
                    vals.append(mul.p)
                stage, level = 2, 0
                while len(vals) > 1:
                    vals = [vals[j] + vals[j + 1] if j + 1 < len(vals) else vals[j]
                            for j in range(0, len(vals), 2)]
                    level += 1
                    if level % TREE_LEVELS_PER_STAGE == 0 or len(vals) == 1:
                        regs = []
                        for j, v in enumerate(vals):
                            r = Signal(signed(min(len(v), self.dot_bits)),
                                       name=f"tree_{lane}_{stage}_{j}")
                            with m.If(valid[stage]):
                                m.d.sync += r.eq(v)
                            regs.append(r)
                        vals, stage = regs, stage + 1
                # One register per lane: the simulators see BATCH*BLOCK_OUT narrow
                # enabled flops rather than one wide word recomputed every cycle.
                dot = vals[0]
                m.d.comb += self.dot[lane].eq(dot)
                sums.append((acc[lane] + self.dot[lane])[:c.acc_width])
        m.d.comb += self.result.eq(Cat(sums))
        return m
