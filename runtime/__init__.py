"""vtakit.runtime: the driver that turns operations into VTA instruction streams, and the
device contract it drives.

See :class:`Runtime` (buffers, 2-D DMA, micro-op kernels, dependency tokens,
binding programs, synchronize), :class:`UopKernel`, :class:`Program` (a lowered,
device-independent kernel), :class:`ProgramBuilder` (which builds one),
:mod:`vtakit.runtime.device` (the :class:`Device` interface every backend implements,
:class:`DeviceFault`, :func:`open_device`), :mod:`vtakit.runtime.dram` and
:mod:`vtakit.runtime.image`; the function registry (:func:`register_func`,
:func:`get_global_func`), runtime modules, the VM (:mod:`vtakit.runtime.vm`) and the
``.vtax`` executable (:mod:`vtakit.runtime.executable`).
"""

from ..hw.spec import Unit
from .builder import ProgramBuilder, Slot
from .device import BACKENDS, Device, DeviceError, DeviceFault, RunResult, open_device
from .dram import DRAM, PAGE_BYTES, DramError
from .driver import VTA_MAX_XFER, Buffer, DebugFlag, Runtime
from .errors import (BufferHandleError, DramRangeError, InvalidArgumentError, KernelError,
                     SramRangeError, StageError, StreamStateError, VTARuntimeError)
from .image import DramImage, ImageError, RunRecord
from .kernel import UopKernel
from .program import UOPS, Program, ProgramFormatError, Relocation
from .registry import (RegistryError, get_global_func, list_global_func_names, register_func,
                       remove_global_func)
from .module import Module, PrimitiveEntry, PrimitiveError
from .vm import VirtualMachine, VMError
from .executable import Executable, ExecutableError, load

__all__ = [
    "Runtime", "UopKernel", "Unit", "DebugFlag", "Buffer", "VTA_MAX_XFER",
    "Program", "ProgramBuilder", "Slot", "Relocation", "ProgramFormatError", "UOPS",
    "VTARuntimeError", "BufferHandleError", "DramRangeError", "InvalidArgumentError",
    "KernelError", "SramRangeError", "StageError", "StreamStateError",
    "BACKENDS", "Device", "DeviceError", "DeviceFault", "RunResult", "open_device",
    "DRAM", "PAGE_BYTES", "DramError", "DramImage", "ImageError", "RunRecord",
    "register_func", "get_global_func", "list_global_func_names", "remove_global_func",
    "RegistryError", "Module", "PrimitiveEntry", "PrimitiveError",
    "VirtualMachine", "VMError", "Executable", "ExecutableError", "load",
]
