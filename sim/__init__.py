"""vtakit.sim: the behavioral model and the RTL simulation backends behind one Device interface."""

from .device import BACKENDS, Device, DeviceError, RunResult, open_device
from .dram import DRAM, PAGE_BYTES, DramError
from .image import DramImage, ImageError, RunRecord

__all__ = ["BACKENDS", "Device", "DeviceError", "RunResult", "open_device",
           "DRAM", "PAGE_BYTES", "DramError", "DramImage", "ImageError", "RunRecord"]
