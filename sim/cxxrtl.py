"""The ``cxxrtl`` backend: the VTA RTL compiled to C++ by Yosys CXXRTL.

The top level is converted with :mod:`amaranth.back.cxxrtl` and compiled with
g++ together with the C++ harness (clock loop, DRAM model, CSR protocol) into
a shared library, cached by :mod:`vtakit.sim.rtl_build`. A whole program runs
in C++; ``vcd=PATH`` writes a waveform with CXXRTL's VCD writer.

Without a waveform, each clock cycle is one CXXRTL evaluation (a fused edge: the
evaluation that shows the cycle's outputs also clocks the registers); with one,
or with the environment variable ``VTAKIT_CXXRTL_TWO_STEP=1`` (a debugging aid),
two (clock low, then clock high), the textbook CXXRTL loop.
"""

from .compiled_device import CompiledDevice

__all__ = ["CxxrtlDevice"]


class CxxrtlDevice(CompiledDevice):
    """The VTA simulated by CXXRTL (parameters: :class:`~vtakit.sim.compiled_device.CompiledDevice`)."""

    name = "cxxrtl"
    backend = "cxxrtl"
