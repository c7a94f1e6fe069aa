"""vtakit.hw: the VTA configuration, the ISA field table and the Amaranth RTL."""

from .config import PRESETS, ConfigError, VTAConfig, load_config
from .isa import DEP_FLAGS, ISA, AluOp, Insn, IsaError, MemType, Opcode, isa_for

__all__ = ["PRESETS", "ConfigError", "VTAConfig", "load_config",
           "DEP_FLAGS", "ISA", "AluOp", "Insn", "IsaError", "MemType", "Opcode", "isa_for"]
