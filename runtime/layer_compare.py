"""Layer-by-layer comparison of one model run on several backends (``vtakit compare M.vtax``).

Every backend runs the executable through the VM with a
:class:`~vtakit.runtime.recorder.LayerRecorder` as its layer hook; the outputs of
the layers are compared in call order against the first backend (the reference), by
:func:`vtakit.runtime.compare.first_difference` (the comparison ``vtakit compare`` and
the fuzzer use). The first layer whose output differs is reported with its first
differing element
and both values, and the DRAM image of that layer's kernel as the reference backend
ran it (the whole DRAM before the run: inputs, weights, micro-ops and instructions)
is saved, so ``vtakit compare IMAGE.npz --backends ...`` replays that one kernel.

The reference backend keeps the image of every kernel run until the comparison is
over (memory grows with the model's number of VTA layers times the DRAM in use).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..hw.errors import InputError, VtakitError
from .compare import first_difference
from .device import open_device
from .recorder import LayerRecorder

__all__ = ["LayerDivergence", "LayerComparison", "LayerPathError", "compare_layers", "format_comparison"]


class LayerPathError(VtakitError, RuntimeError):
    """Two backends ran different sequences of layers (a data-dependent branch went
    another way), so their layers cannot be compared one by one."""


@dataclass
class LayerDivergence:
    """The first layer whose output differs between ``reference`` and ``backend``."""

    reference: str
    backend: str
    index: int                 # position of the layer in call order
    name: str                  # the primitive's name
    element: tuple             # index of the first differing element
    expected: object           # the reference's value there
    actual: object
    count: int                 # number of differing elements in the layer's output
    size: int
    engine: str                # "VTA" or "host" (on the reference)
    image: Path | None = None  # the saved kernel image (VTA layers)


@dataclass
class LayerComparison:
    """What :func:`compare_layers` found."""

    backends: list
    layers: dict               # backend -> list of LayerRun
    divergences: list          # one LayerDivergence per backend that differs

    @property
    def equal(self) -> bool:
        return not self.divergences


def _outputs(value):
    return value if isinstance(value, tuple) else (value,)


def compare_layers(exe, inputs, backends, *, devices=None, save_dir=None,
                   stem: str = "layer") -> LayerComparison:
    """Run ``exe`` on each backend and compare every layer's output with the first one's.

    Parameters
    ----------
    exe : Executable
    inputs : dict, sequence or array
        As :meth:`Executable.run` takes them.
    backends : list of str
        Two or more backend names; the first is the reference.
    devices : dict of str -> Device, optional
        Open devices to use for some of the names (e.g. an instrumented one in tests);
        the others are opened and closed here.
    save_dir : path, optional
        Where the diverging layer's kernel image is written (default: the current
        directory); ``None`` for the image paths means nothing was saved.
    stem : str
        File name prefix of the saved images (``<stem>.<backend>.layer<N>.npz``).

    Returns
    -------
    LayerComparison
    """
    if len(backends) < 2:
        raise InputError(f"compare needs two or more backends, got {list(backends)}")
    devices = dict(devices or {})
    layers = {}
    for i, name in enumerate(backends):
        dev = devices.get(name)
        owned = dev is None
        if owned:
            dev = open_device(name, exe.config)
        try:
            with LayerRecorder(dev, keep_images=i == 0) as rec:
                exe.run(inputs, device=dev, hook=rec.hook)
            layers[name] = rec.layers
        finally:
            if owned:
                dev.close()
    ref_name = backends[0]
    ref = layers[ref_name]
    divergences = []
    for name in backends[1:]:
        got = layers[name]
        div = None
        for k, (a, b) in enumerate(zip(ref, got)):
            if a.name != b.name:
                raise LayerPathError(f"{name} called {b.name} as layer {k}, {ref_name} called "
                                   f"{a.name}: the runs took different paths")
            for j, (x, y) in enumerate(zip(_outputs(a.output), _outputs(b.output))):
                d = first_difference(x, y)
                if d is not None:
                    element = (j, *d.index) if isinstance(a.output, tuple) else d.index
                    div = LayerDivergence(ref_name, name, k, a.name, element, d.expected,
                                          d.actual, d.count, d.size, a.engine)
                    break
            if div is not None:
                break
        if div is None and len(ref) != len(got):
            raise LayerPathError(f"{name} ran {len(got)} layers, {ref_name} {len(ref)}")
        if div is not None:
            run = ref[div.index].runs[0] if ref[div.index].runs else None
            if run is not None and run.image is not None:
                out = Path(save_dir or ".")
                out.mkdir(parents=True, exist_ok=True)
                div.image = run.image.save(out / f"{stem}.{name}.layer{div.index}.npz")
            divergences.append(div)
    return LayerComparison(list(backends), layers, divergences)


def format_comparison(c: LayerComparison) -> str:
    """The report: per backend the layer count and cycles, then equal or the divergence."""
    lines = []
    for name in c.backends:
        runs = [r for layer in c.layers[name] for r in layer.runs]
        cyc = ("n/a" if not runs or any(r.cycles < 0 for r in runs)
               else f"{sum(r.cycles for r in runs):,}")
        lines.append(f"{name}: {len(c.layers[name])} layers "
                     f"({sum(bool(layer.runs) for layer in c.layers[name])} on VTA), "
                     f"cycles {cyc}")
    ref = c.backends[0]
    differing = {d.backend: d for d in c.divergences}
    for name in c.backends[1:]:
        d = differing.get(name)
        if d is None:
            lines.append(f"{ref} vs {name}: every layer's output is equal")
            continue
        lines.append(f"{ref} vs {name}: DIFFER: first diverging layer #{d.index} {d.name} "
                     f"({d.engine}): element {list(d.element)}: {ref} {d.expected}, "
                     f"{name} {d.actual} ({d.count} of {d.size} elements differ)")
        if d.image is not None:
            lines.append(f"  kernel saved as a DRAM image: {d.image} (replay: vtakit compare "
                         f"{d.image} --backends {ref},{name})")
    return "\n".join(lines)
