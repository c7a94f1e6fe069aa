"""A waveform of one layer of a model run (``vtakit run ... --vcd FILE --vcd-layer N``).

Tracing a whole model would write a huge VCD, and the RTL backends only take their
``vcd=`` option when a device is opened. So the model runs untraced under a
:class:`~vtakit.runtime.recorder.LayerRecorder` that keeps the DRAM images of layer
N's kernel runs only; afterwards they are run again, in order, on a fresh device of
the same backend opened with ``vcd=FILE``. The replay starts from the exact DRAM
contents the layer saw, so its waveform is the layer's run.
"""

from __future__ import annotations

from pathlib import Path

from .device import DeviceError, open_device

__all__ = ["VCD_BACKENDS", "write_layer_vcd"]

#: Backends with a waveform writer.
VCD_BACKENDS = ("pysim", "cxxrtl", "verilator")


def write_layer_vcd(layers, index: int, backend: str, config, path) -> tuple[Path, int]:
    """Replay layer ``index`` of ``layers`` (a recorder's :class:`LayerRun` list, kept
    with ``keep_images=True`` or ``{index}``) on ``backend``, writing a VCD to ``path``.

    Returns
    -------
    tuple
        ``(path, cycles)``: the VCD written and the cycles of the replayed runs.

    Raises
    ------
    DeviceError
        If the backend has no waveform, the index is out of range, the layer ran on the
        host, or its images were not kept.
    """
    if backend not in VCD_BACKENDS:
        raise DeviceError(f"--vcd: backend {backend!r} writes no waveform; use one of "
                          + ", ".join(VCD_BACKENDS))
    if not 0 <= index < len(layers):
        raise DeviceError(f"--vcd-layer {index}: the model ran {len(layers)} layers "
                          f"(0..{len(layers) - 1})")
    layer = layers[index]
    if layer.engine != "VTA":
        vta = [run.index for run in layers if run.engine == "VTA"]
        raise DeviceError(f"--vcd-layer {index}: layer {layer.name!r} ran on the host, "
                          f"not on VTA; VTA layers are {vta}")
    if any(run.image is None for run in layer.runs):
        raise DeviceError("write_layer_vcd: the recorder did not keep the kernel images "
                          f"of layer {index} (LayerRecorder(..., keep_images={{{index}}}))")
    path = Path(path)
    cycles = 0
    with open_device(backend, config, vcd=path) as dev:
        for run in layer.runs:
            cycles += max(0, dev.run_image(run.image).cycles)
    return path, cycles
