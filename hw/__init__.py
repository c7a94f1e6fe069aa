"""vtakit.hw: the rule table (:mod:`~vtakit.hw.spec`), the VTA configuration, the ISA field
tables and the Amaranth RTL (imported on use: ``vtakit.hw.top``)."""

from .config import PRESETS, ConfigError, VTAConfig, load_config
from .errors import VtakitError
from .isa import DEP_FLAGS, ISA, AluOp, Insn, IsaError, MemType, Opcode, isa_for
from .spec import ErrorCode, Unit

__all__ = ["PRESETS", "ConfigError", "VTAConfig", "load_config", "DEP_FLAGS", "ISA", "AluOp",
           "Insn", "IsaError", "MemType", "Opcode", "isa_for", "ErrorCode", "Unit", "VtakitError"]
