"""vtakit.sim: the behavioral model and the RTL simulation backends.

Each backend implements the device contract of :mod:`vtakit.runtime.device`; the
contract's names are re-exported here for convenience (``from vtakit.sim import
open_device, DramImage``).
"""

from ..runtime.device import BACKENDS, Device, DeviceError, DeviceFault, RunResult, open_device
from ..runtime.dram import DRAM, PAGE_BYTES, DramError
from ..runtime.image import DramImage, ImageError, RunRecord

__all__ = ["BACKENDS", "Device", "DeviceError", "DeviceFault", "RunResult", "open_device",
           "DRAM", "PAGE_BYTES", "DramError", "DramImage", "ImageError", "RunRecord"]
