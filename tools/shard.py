"""Sharded layer-by-layer comparison of a model on several backends (``vtakit compare
MODEL.vtax --backends behavioral,verilator --workers N``).

Once the reference backend (the first one) has run the model, every VTA layer's kernel
is an independent DRAM image (inputs, weights, micro-ops and instructions, as the
reference produced them), so the kernels run in parallel on Dask workers. The reference
runs the model through the VM with a :class:`~vtakit.runtime.recorder.LayerRecorder`; as
soon as a kernel has run, its image (the DRAM before the run) goes to the cluster with a
digest of the reference's final DRAM, and a task replays it on the other backends
(:func:`vtakit.runtime.compare.run_outcomes`) and compares digests and counters, so the
reference's run overlaps the RTL runs and the reference is not run twice. A kernel whose
DRAM differs (or that faults) is replayed on the reference in the worker too, for the
report of ``vtakit compare IMAGE.npz`` (:mod:`vtakit.runtime.compare`). The first layer
(in call order) with a differing kernel is the first diverging layer; its image is saved
for ``vtakit compare IMAGE.npz``. Host layers run once, on the reference.
"""

from __future__ import annotations

import hashlib
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ..hw.errors import InputError

__all__ = ["ShardedComparison", "KernelCheck", "compare_sharded", "check_kernel",
           "format_sharded"]


@dataclass
class KernelCheck:
    """One kernel run replayed on every backend: cycles (-1 without a clock) and wall
    seconds by backend, and per non-reference backend the report of its difference
    (None: equal, or the same fault)."""

    layer: int
    run: int
    cycles: dict
    wall: dict
    reports: dict
    image: object = None        # the kernel's DramImage when a backend differs


@dataclass
class ShardedComparison:
    """What :func:`compare_sharded` found: the reference's layers (``(name, engine)`` in
    call order), every kernel check, and per differing backend ``(layer index, layer
    name, run, report, saved image path)`` of its first diverging layer."""

    backends: list
    layers: list
    checks: list
    divergences: dict = field(default_factory=dict)
    wall: dict = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return not self.divergences


def _digest(dram) -> str:
    return hashlib.blake2b(memoryview(np.ascontiguousarray(dram)), digest_size=16).hexdigest()


def _expected(dram, stats) -> tuple:
    """What a replay must reproduce: the final DRAM's digest and the compared counters."""
    from ..runtime.compare import COMPARED_COUNTERS
    return _digest(dram), {k: int(stats[k]) for k in COMPARED_COUNTERS if k in stats}


def check_kernel(image, config, backends, expected: tuple, layer: int,
                 run: int) -> KernelCheck:
    """What a worker runs: replay one kernel image on each backend but the first (a fresh
    device each) and check its final DRAM digest and compared counters against
    ``expected`` (:func:`_expected` of the reference's run). Only when one differs (or
    faults) is the reference replayed here too, for the report of ``vtakit compare
    IMAGE.npz`` (:func:`vtakit.runtime.compare.format_comparison`); the image then comes
    back in :attr:`KernelCheck.image` to be saved."""
    from ..runtime.compare import compare_outcomes, format_comparison, run_outcomes
    outcomes = run_outcomes(image, config, backends[1:])
    digest, counters = expected

    def same(o):
        return (o.fault is None and _digest(o.dram) == digest
                and all(counters[k] == v for k, v in o.counters.items() if k in counters))
    reports = dict.fromkeys(outcomes)
    differ = [n for n, o in outcomes.items() if not same(o)]
    if differ:
        reference = run_outcomes(image, config, backends[:1])[backends[0]]
        for name in differ:
            c = compare_outcomes(reference, outcomes[name])
            reports[name] = None if c.equal else format_comparison(c, image, config)
    cycles = {n: (-1 if o.record is None else int(o.record.cycles))
              for n, o in outcomes.items()}
    keep = any(r is not None for r in reports.values())
    return KernelCheck(layer, run, cycles, {n: o.wall for n, o in outcomes.items()},
                       reports, image if keep else None)


def compare_sharded(exe, inputs, backends, *, workers=None, scheduler=None, client=None,
                    save_dir=None, stem: str = "layer", progress=None) -> ShardedComparison:
    """Compare ``exe`` on ``backends`` kernel by kernel on a Dask cluster (see the module
    docstring); ``workers``/``scheduler``/``client`` as :func:`vtakit.sweep`."""
    from distributed import as_completed

    from ..runtime.device import open_device
    from ..runtime.recorder import LayerRecorder
    from .cluster import open_client
    backends = list(backends)
    if len(backends) < 2:
        raise InputError(f"compare needs two or more backends, got {backends}")
    config = exe.config.to_dict()
    start = time.perf_counter()
    with open_client(workers, scheduler, client) as c:
        futures, ref_cycles = [], {}
        with open_device(backends[0], exe.config) as dev, \
                LayerRecorder(dev, keep_images=True, keep_outputs=False) as rec:
            logged = dev.run

            def run(insn_addr, insn_count):
                result = logged(insn_addr, insn_count)
                r = rec.runs[-1]
                key = (len(rec.layers), len(rec.runs) - sum(len(x.runs) for x in rec.layers)
                       - 1)
                ref_cycles[key] = r.cycles
                expected = _expected(dev.dram.data[:len(r.image.dram)], r.stats)
                with warnings.catch_warnings():     # the image is the task's data
                    warnings.simplefilter("ignore", UserWarning)
                    futures.append(c.submit(check_kernel, r.image, config, backends, expected,
                                            *key, pure=False, retries=1))
                r.image = None                      # the cluster holds it now
                return result
            dev.run = run
            try:
                exe.run(inputs, device=dev, hook=rec.hook)
            finally:
                dev.run = logged
        reference_s = time.perf_counter() - start
        checks = []
        bar = _bar(len(futures), progress)
        for fut in as_completed(futures):
            k = fut.result()
            k.cycles = {backends[0]: ref_cycles[k.layer, k.run], **k.cycles}
            checks.append(k)
            bar.update(1)
        bar.close()
    checks.sort(key=lambda k: (k.layer, k.run))
    layers = [(layer.name, layer.engine) for layer in rec.layers]
    divergences = {}
    for k in checks:
        for name, report in k.reports.items():
            if report is not None and name not in divergences:
                path = Path(save_dir or ".")
                path.mkdir(parents=True, exist_ok=True)
                saved = k.image.save(path / f"{stem}.{name}.layer{k.layer}.npz")
                divergences[name] = (k.layer, layers[k.layer][0], k.run, report, saved)
    return ShardedComparison(backends, layers, checks, divergences,
                             {"reference": reference_s, "total": time.perf_counter() - start})


def _bar(total, progress):
    from ..runtime.progress import bar, is_terminal
    return bar(total=total, desc="kernels", unit="kernel",
               enable=is_terminal() if progress is None else progress)


def format_sharded(c: ShardedComparison) -> str:
    """The report: per backend the kernels and cycles, then equal or the first diverging
    layer with the DRAM difference of its kernel."""
    vta = sum(engine == "VTA" for _, engine in c.layers)
    lines = []
    for name in c.backends:
        cyc = [k.cycles[name] for k in c.checks]
        total = "n/a" if not cyc or any(x < 0 for x in cyc) else f"{sum(cyc):,}"
        lines.append(f"{name}: {len(c.layers)} layers ({vta} on VTA, {len(c.checks)} kernel "
                     f"runs replayed on the workers), cycles {total}")
    ref = c.backends[0]
    for name in c.backends[1:]:
        d = c.divergences.get(name)
        if d is None:
            lines.append(f"{ref} vs {name}: every VTA kernel's final DRAM is equal")
            continue
        index, layer, run, report, saved = d
        lines.append(f"{ref} vs {name}: DIFFER: first diverging layer #{index} {layer} (VTA), "
                     f"kernel run {run}:")
        lines += ["  " + line for line in report.splitlines()]
        lines.append(f"  kernel saved as a DRAM image: {saved} (replay: vtakit compare {saved} "
                     f"--backends {ref},{name})")
    lines.append(f"wall: reference {c.wall['reference']:.2f} s, total {c.wall['total']:.2f} s")
    return "\n".join(lines)
