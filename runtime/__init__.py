"""vtakit.runtime: the driver that turns operations into VTA instruction streams, and the
device contract it drives.

See :class:`Runtime` (buffers, 2-D DMA, micro-op kernels, dependency tokens,
synchronize), :class:`UopKernel`, and :mod:`vtakit.runtime.device` (the
:class:`Device` interface every backend implements, :class:`DeviceFault`,
:func:`open_device`), :mod:`vtakit.runtime.dram` and :mod:`vtakit.runtime.image`.
"""

from ..hw.spec import Unit
from .deps import Stage
from .device import BACKENDS, Device, DeviceError, DeviceFault, RunResult, open_device
from .dram import DRAM, PAGE_BYTES, DramError
from .driver import VTA_MAX_XFER, Buffer, DebugFlag, Runtime
from .errors import (BufferHandleError, DramRangeError, InvalidArgumentError, KernelError,
                     SramRangeError, StageError, StreamStateError, VTARuntimeError)
from .image import DramImage, ImageError, RunRecord
from .kernel import UopKernel

__all__ = [
    "Runtime", "UopKernel", "Unit", "Stage", "DebugFlag", "Buffer", "VTA_MAX_XFER",
    "VTARuntimeError", "BufferHandleError", "DramRangeError", "InvalidArgumentError",
    "KernelError", "SramRangeError", "StageError", "StreamStateError",
    "BACKENDS", "Device", "DeviceError", "DeviceFault", "RunResult", "open_device",
    "DRAM", "PAGE_BYTES", "DramError", "DramImage", "ImageError", "RunRecord",
]
