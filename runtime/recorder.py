"""Per-layer records of a model run: the device runs each layer made, with its counters.

:class:`LayerRecorder` wraps an open :class:`~vtakit.runtime.device.Device` so that
every ``run`` it executes is logged (cycles, counters, wall time and, on request,
the DRAM image that was run), and serves as the VM's layer hook
(``exe.run(x, device=dev, hook=rec.hook)``): the runs logged since the previous
layer are attributed to the layer just finished. A layer without device runs
ran on the host.

The device keeps working unchanged; :meth:`LayerRecorder.close` (or leaving the
``with`` block) restores its own ``run``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..hw.spec import INSN_BYTES
from .image import DramImage

__all__ = ["DeviceRun", "LayerRun", "LayerRecorder"]


@dataclass
class DeviceRun:
    """One ``Device.run``: cycles (-1 without a clock), counters, wall seconds, and the
    DRAM image it ran (when the recorder keeps images)."""

    cycles: int
    stats: dict
    wall: float
    image: DramImage | None = None
    insns: bytes | None = None       # the instruction stream (when the recorder keeps them)


@dataclass
class LayerRun:
    """One packed call of the VM (a fused layer) and the device runs it made."""

    index: int
    name: str
    output: object = None
    runs: list = field(default_factory=list)
    wall: float = 0.0

    @property
    def engine(self) -> str:
        """``"VTA"`` when the layer ran instructions on the device, else ``"host"``."""
        return "VTA" if self.runs else "host"

    @property
    def cycles(self) -> int:
        """Sum of the runs' cycles; -1 when a run had no clock (behavioral), 0 on the host."""
        if any(r.cycles < 0 for r in self.runs):
            return -1
        return sum(r.cycles for r in self.runs)

    def counter(self, key: str) -> int:
        """Sum of one counter (e.g. ``gemm_counter``) over the runs (0 where absent)."""
        return sum(int(r.stats.get(key, 0)) for r in self.runs)


class LayerRecorder:
    """Logs a device's runs and groups them by layer through the VM hook.

    Parameters
    ----------
    device : Device
        An open device; its ``run`` is wrapped until :meth:`close`.
    keep_images : bool or collection of int
        Save the DRAM image of every run (the whole DRAM before the run, with the
        instruction range), e.g. to replay a layer's kernel later; a collection of
        layer indices keeps only those layers' images.
    keep_outputs : bool
        Keep each layer's output (a copy made by the VM).
    keep_streams : bool
        Save the instruction bytes of every run (for a cycle prediction of the stream).

    Attributes
    ----------
    layers : list of LayerRun
        One per packed call, in call order, over every run of the model since
        :meth:`clear`.
    """

    def __init__(self, device, *, keep_images=False, keep_outputs: bool = True,
                 keep_streams: bool = False):
        self.device = device
        self.keep_streams = keep_streams
        self.keep_images = keep_images
        self.keep_outputs = keep_outputs
        self.layers: list[LayerRun] = []
        self._pending: list[DeviceRun] = []
        self._mark = time.perf_counter()
        self._run = device.run
        # A run already wrapped on the instance (another recorder, a test's injector) is
        # put back on close; otherwise the class's own run shows through again.
        self._wrapped = "run" in vars(device)
        device.run = self._logged_run

    def _logged_run(self, insn_addr, insn_count):
        image = None
        keep = self.keep_images
        if keep if isinstance(keep, (bool, np.bool_)) else len(self.layers) in keep:
            dev = self.device
            image = DramImage(np.array(dev.read(0, dev.dram.size)), int(insn_addr),
                              int(insn_count), config=dev.config.to_dict())
        insns = None
        if self.keep_streams:
            insns = bytes(np.asarray(self.device.read(int(insn_addr),
                                                      int(insn_count) * INSN_BYTES)))
        start = time.perf_counter()
        result = self._run(insn_addr, insn_count)
        self._pending.append(DeviceRun(int(result.cycles), dict(result.stats),
                                       time.perf_counter() - start, image, insns))
        return result

    def hook(self, name, output) -> None:
        """The VM's layer hook: closes the current layer."""
        now = time.perf_counter()
        self.layers.append(LayerRun(len(self.layers), name,
                                    output if self.keep_outputs else None,
                                    self._pending, now - self._mark))
        self._pending = []
        self._mark = now

    def start(self) -> None:
        """Start timing a new model run (call before ``exe.run``)."""
        self._pending = []
        self._mark = time.perf_counter()

    def clear(self) -> None:
        """Forget every layer recorded so far."""
        self.layers = []
        self.start()

    @property
    def runs(self) -> list[DeviceRun]:
        """Every device run recorded, in order."""
        return [r for layer in self.layers for r in layer.runs] + self._pending

    def close(self) -> None:
        """Give the device back its own ``run``."""
        if vars(self.device).get("run") == self._logged_run:
            if self._wrapped:
                self.device.run = self._run
            else:
                del self.device.run

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
