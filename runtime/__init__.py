"""vtakit.runtime: the driver that turns operations into VTA instruction streams.

See :class:`Runtime` (buffers, 2-D DMA, micro-op kernels, dependency tokens,
binding programs, synchronize), :class:`UopKernel`, :class:`Program` (a lowered,
device-independent kernel) and :class:`ProgramBuilder` (which builds one).
"""

from .builder import ProgramBuilder, Slot
from .deps import Stage
from .driver import VTA_MAX_XFER, Buffer, DebugFlag, Runtime
from .errors import (BufferHandleError, DramRangeError, InvalidArgumentError, KernelError,
                     SramRangeError, StageError, StreamStateError, VTARuntimeError)
from .kernel import UopKernel
from .program import UOPS, Program, ProgramFormatError, Relocation

__all__ = [
    "Runtime", "UopKernel", "Stage", "DebugFlag", "Buffer", "VTA_MAX_XFER",
    "Program", "ProgramBuilder", "Slot", "Relocation", "ProgramFormatError", "UOPS",
    "VTARuntimeError", "BufferHandleError", "DramRangeError", "InvalidArgumentError",
    "KernelError", "SramRangeError", "StageError", "StreamStateError",
]
