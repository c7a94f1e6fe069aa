"""An I/O harness that lets a wide design be placed and routed on a small package.

The VTA top level has about 300 port bits, more than an iCE40 package's pins,
and a report should measure the design, not its pads. :class:`IOHarness`
feeds every input of the wrapped component from a shift register (one serial
input pin) and folds every output into an XOR shift chain (one serial output
pin), so nothing is optimized away, every port is registered (Fmax is the
core's register-to-register speed) and the top level has four pins: ``clk``,
``rst``, ``sin``, ``sout``. Its cost, one flip-flop per port bit and one LUT
per output bit, is reported with the results (:attr:`IOHarness.cost`).
"""

from amaranth.hdl import Elaboratable, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

__all__ = ["IOHarness"]


class IOHarness(Elaboratable):
    """Wrap ``component`` behind two serial pins.

    Parameters
    ----------
    component : wiring.Component
        Any component of the ``sync`` domain.

    Attributes
    ----------
    sin : Signal(1)
        Serial input (top-level input port).
    sout : Signal(1)
        Serial output (top-level output port).
    in_bits, out_bits : int
        Port bits of ``component`` fed from / folded into the chains.
    """

    def __init__(self, component: wiring.Component):
        self.component = component
        self.sin = Signal()
        self.sout = Signal()
        self._ins, self._outs = [], []
        for _path, member, value in component.signature.flatten(component):
            (self._outs if member.flow == Out else self._ins).append(Value.cast(value))
        self.in_bits = sum(len(v) for v in self._ins)
        self.out_bits = sum(len(v) for v in self._outs)

    @property
    def cost(self) -> dict:
        """Resources the harness adds: ``{"ff": ..., "lut": ...}`` (approximate)."""
        return {"ff": self.in_bits + self.out_bits, "lut": self.out_bits}

    def ports(self) -> list:
        """The top-level ports for ``amaranth.back.rtlil.convert``."""
        return [self.sin, self.sout]

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.component
        chain_in = Signal(max(1, self.in_bits))
        m.d.sync += chain_in.eq((chain_in << 1) | self.sin)
        pos = 0
        for value in self._ins:
            m.d.comb += value.eq(chain_in[pos:pos + len(value)])
            pos += len(value)
        chain_out = Signal(max(1, self.out_bits))
        flat_out = Signal(max(1, self.out_bits))
        pos = 0
        for value in self._outs:
            m.d.comb += flat_out[pos:pos + len(value)].eq(value)
            pos += len(value)
        m.d.sync += chain_out.eq((chain_out << 1)[:len(chain_out)] ^ flat_out)
        m.d.comb += self.sout.eq(chain_out[-1])
        return m
