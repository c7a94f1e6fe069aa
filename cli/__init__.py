"""vtakit: a hardware-software co-design kit for the VTA deep-learning accelerator.

Subpackages: :mod:`vtakit.hw` (config, ISA, Amaranth RTL), :mod:`vtakit.sim`
(behavioral model and RTL simulation backends), :mod:`vtakit.runtime` (driver),
:mod:`vtakit.compiler` (operators and models), :mod:`vtakit.boards` (FPGA).
"""

__version__ = "0.1.0"
