"""vtakit.runtime: the driver that turns operations into VTA instruction streams.

See :class:`Runtime` (buffers, 2-D DMA, micro-op kernels, dependency tokens,
synchronize) and :class:`UopKernel`.
"""

from .deps import Stage
from .driver import VTA_MAX_XFER, Buffer, DebugFlag, Runtime
from .errors import (BufferHandleError, DramRangeError, InvalidArgumentError, KernelError,
                     SramRangeError, StageError, StreamStateError, VTARuntimeError)
from .kernel import UopKernel

__all__ = [
    "Runtime", "UopKernel", "Stage", "DebugFlag", "Buffer", "VTA_MAX_XFER",
    "VTARuntimeError", "BufferHandleError", "DramRangeError", "InvalidArgumentError",
    "KernelError", "SramRangeError", "StageError", "StreamStateError",
]
