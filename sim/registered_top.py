"""The top level as the Verilator build simulates it: every input port registered.

Verilator re-evaluates, on *every* ``eval()``, all combinational logic that depends on
a top-level input (its ``ico`` region), and that logic is duplicated in the clocked
region as well. On the VTA almost everything depends on an input: ``rst`` and the
CSR write strobe (``clear``) reach every register's next-state logic, the DRAM read
data and handshakes reach the load engines, the arbiter and store. The harness
evaluates twice per cycle (clock low with the new inputs, clock high), so about
two thirds of the design was computed three times per cycle.

:class:`RegisteredInputs` wraps a top level (the VTA's top-level signature plus
``rst``) so that no combinational logic depends on a top-level input:

* the DRAM inputs (``dram_rd.req.ready``, ``dram_rd.data.*``, ``dram_wr.*.ready``)
  are registered on ``clk``: the harness drives the inputs of cycle N+1 before the
  clock edge that ends cycle N (it can: its DRAM model is a function of its own
  state, updated from the handshakes it sampled in cycle N), so the design sees
  the same values in the same cycles;
* ``rst`` and the CSR inputs are registered on a separate clock, ``host_clk``, that the
  harness pulses whenever it drives them (``VtaSim::set_rst``/``set_csr`` of
  ``harness/verilator_adapter.cc``): the design sees them at once, as before, without
  a ``clk`` edge, so CSR reads and writes keep their timing and cost nothing per cycle.

Outputs are connected through unchanged. Cycle counts and results are those of the
bare top (``tests/test_fast_backends.py`` compares the backends cycle for cycle).
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["RegisteredInputs"]


class RegisteredInputs(wiring.Component):
    """``inner`` (a component with the VTA's top-level signature, in domain ``sync``)
    behind input registers; ports: ``inner``'s, ``rst`` (the reset of ``sync``) and
    the clocks ``clk`` and ``host_clk``."""

    def __init__(self, inner: wiring.Component):
        self.inner = inner
        super().__init__({**dict(inner.signature.members),
                          "clk": In(1), "rst": In(1), "host_clk": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        m.domains.host = host = ClockDomain("host", reset_less=True)
        m.domains.sync = sync = ClockDomain("sync")
        m.d.comb += [sync.clk.eq(self.clk), host.clk.eq(self.host_clk)]
        m.d.host += sync.rst.eq(self.rst)
        outer = {path: value for path, _, value in self.signature.flatten(self)}
        for path, member, value in inner.signature.flatten(inner):
            if member.flow == wiring.Out:
                m.d.comb += outer[path].eq(value)
            else:
                reg = Signal.like(value, name="in__" + "__".join(map(str, path)), reset_less=True)
                m.d["host" if path[0] == "csr" else "sync"] += reg.eq(outer[path])
                m.d.comb += value.eq(reg)
        return m
