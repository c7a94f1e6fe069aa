"""Model files to executables: frontend -> passes -> VM compiler with VTA layers.

``compile_model("m.tflite", config="default")`` returns an
:class:`~vtakit.runtime.executable.Executable` whose quantized layers run on VTA
(:func:`vtakit.compiler.vta.vm_lowerer`) and everything else on the host.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..hw.errors import VtakitError

__all__ = ["compile_model", "load_model", "format_report", "ModelError"]


class ModelError(VtakitError, ValueError):
    """A model file vtakit cannot read (unknown format)."""


def load_model(path):
    """The IRModule of a model file (``.tflite``; ``.onnx`` when the ONNX frontend exists)."""
    suffix = Path(os.fspath(path)).suffix.lower()
    if suffix == ".tflite":
        from .frontend.tflite import from_tflite
        return from_tflite(path)
    if suffix == ".onnx":
        try:
            from .frontend.onnx import from_onnx
        except ImportError:
            raise ModelError(f"{path}: the ONNX frontend is not available in this build") \
                from None
        return from_onnx(path)
    raise ModelError(f"{path}: unknown model format {suffix or '(no suffix)'!r}; expected "
                     ".tflite or .onnx")


def load_samples(samples) -> np.ndarray:
    """Calibration samples: an array, or the path of a ``.npy`` file holding one."""
    if isinstance(samples, (str, os.PathLike)):
        path = Path(samples)
        try:
            samples = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise ModelError(f"{path}: no such file (calibration samples, a .npy array of "
                             "shape (N, *input shape))") from None
        except (OSError, ValueError) as e:
            raise ModelError(f"{path}: not a .npy array ({e}); calibration samples are an "
                             "array of shape (N, *input shape) saved with numpy.save") from None
    return np.asarray(samples)


def compile_model(path, config="default", *, calibrate=None, report: list | None = None,
                  calibrate_options: dict | None = None, notes: list | None = None):
    """Compile a model file (or an IRModule) for ``config`` (preset name, JSON path or
    VTAConfig).

    ``calibrate``: representative inputs of a float model (an array of shape
    ``(N, *input shape)``, the model's batch dimension included, or a ``.npy`` path);
    the model is then quantized to int8 (:func:`~vtakit.compiler.quant.calibrate.calibrate`)
    before compiling, with ``calibrate_options`` (e.g. ``{"method": "entropy"}`` or
    ``{"asymmetric": False}``) passed to it. Pre-quantized models (TFLite int8, ONNX QDQ)
    need none.
    ``report``, when given, receives one :class:`~vtakit.compiler.vta.LayerRecord`
    per fused layer the VTA lowering examined; ``notes``, when given, the frontend's
    remarks on the import (an opset conversion, the onnxruntime CPU class followed).
    """
    from ..hw.config import load_config
    from .codegen import compile_vm
    from .vta import vm_lowerer
    from .passes import default_pipeline, vm_pipeline
    cfg = load_config(config)
    mod = load_model(path) if not hasattr(path, "functions") else path
    if notes is not None and "main" in mod:
        notes.extend(mod["main"].attrs.get("import_notes", ()))
    if calibrate is not None:
        from .quant.calibrate import calibrate as _calibrate
        mod = _calibrate(mod, load_samples(calibrate), **(calibrate_options or {}))
    from .vta.target import VTA
    mod = vm_pipeline(VTA.passes)(default_pipeline()(mod))
    return compile_vm(mod, config=cfg, lowerer=vm_lowerer(cfg, report))


def format_report(records) -> str:
    """One line per layer: kind, input shape, where it runs and why, predicted cycles
    (the event model, :meth:`~vtakit.compiler.ops.plan.OpPlan.predicted`), the layer's
    roofline (:mod:`~vtakit.compiler.ops.cost.roofline`: binding bound, cycles, predicted /
    roofline),
    DRAM bytes, tiling. The columns are as wide as their longest entry; a reason given
    for several layers is printed once, as a footnote ``[n]`` below the table. When some
    layer has a roofline, a total line sums the VTA layers."""
    counts = {}
    for r in records:
        counts[r.why] = counts.get(r.why, 0) + 1
    notes = {why: i + 1 for i, why in enumerate(w for w, n in counts.items() if n > 1)}

    def roof(r):
        rl = getattr(r, "roofline", None)
        if rl is None:
            return ("", "", "")
        return (rl.kind, f"{rl.cycles:,}",
                f"{r.predicted_cycles / rl.cycles:.2f}x" if rl.cycles else "-")
    rows = [(str(i), r.kind, str(r.shape), r.where, f"{r.predicted_cycles:,.0f}", *roof(r),
             f"{r.dram_bytes:,}", (f"[{notes[r.why]}]" if r.why in notes else r.why)
             + (f"; {r.tiling}" if r.tiling else "")) for i, r in enumerate(records)]
    roofed = [r for r in records if getattr(r, "roofline", None) is not None]
    if roofed:
        pred, rl = sum(r.predicted_cycles for r in roofed), sum(r.roofline.cycles for r in roofed)
        rows.append(("", "total", "", f"{len(roofed)} VTA", f"{pred:,.0f}", "", f"{rl:,}",
                     f"{pred / rl:.2f}x" if rl else "-",
                     f"{sum(r.dram_bytes for r in roofed):,}", ""))
    head = ("#", "layer", "input", "where", "pred. cycles", "bound", "roofline", "pred/roof",
            "DRAM B", "why / tiling")
    width = [max(len(c) for c in col) for col in zip(head, *rows)]
    right = (True, False, False, False, True, False, True, True, True)
    def line(cells):
        out = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, width, right)]
        return (" ".join(out) + "  " + cells[-1]).rstrip()
    lines = [line(head)] + [line(r) for r in rows]
    lines += [f"[{n}] {why}" for why, n in notes.items()]
    return "\n".join(lines)
