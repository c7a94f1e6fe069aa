"""vtakit.hw: the VTA configuration, the ISA field table and the Amaranth RTL."""

import hashlib as _hashlib
from pathlib import Path as _Path

from .config import PRESETS, ConfigError, VTAConfig, load_config
from .isa import DEP_FLAGS, ISA, AluOp, Insn, IsaError, MemType, Opcode, isa_for


def _source_digests() -> dict:
    return {p.name: _hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(_Path(__file__).parent.glob("*.py"))}


#: SHA-256 of every ``hw/*.py`` file as this process imported the package. RTL build
#: caches key on these (not on the files as they are later) so that a process whose
#: imported RTL is older than the files on disk never files a build under the new key.
SOURCE_DIGESTS = _source_digests()

__all__ = ["SOURCE_DIGESTS", "PRESETS", "ConfigError", "VTAConfig", "load_config",
           "DEP_FLAGS", "ISA", "AluOp", "Insn", "IsaError", "MemType", "Opcode", "isa_for"]
