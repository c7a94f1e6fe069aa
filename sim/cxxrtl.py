"""The ``cxxrtl`` backend: the VTA RTL compiled to C++ by Yosys CXXRTL.

The top level is converted with :mod:`amaranth.back.cxxrtl` and compiled with
g++ together with the C++ harness (clock loop, DRAM model, CSR protocol) into
a shared library, cached by :mod:`vtakit.sim.rtl_build`. A whole program runs
in C++; ``vcd=PATH`` writes a waveform with CXXRTL's VCD writer.
"""

from .compiled_device import CompiledDevice

__all__ = ["CxxrtlDevice"]


class CxxrtlDevice(CompiledDevice):
    """The VTA simulated by CXXRTL (parameters: :class:`~vtakit.sim.compiled_device.CompiledDevice`)."""

    name = "cxxrtl"
    backend = "cxxrtl"
