"""FPGA resources (and Fmax) of a config for a sweep's ``--synth TARGET``, cached on disk
per config and target under the build cache (``$VTAKIT_CACHE`` or ``~/.cache/vtakit``) so a
config is synthesized once across sweeps, models and workers.

A target nextpnr places and routes (ECP5, iCE40) gives its counts and achieved Fmax
(:func:`vtakit.tools.latency.synth_fmax`, the cache ``vtakit run --profile --target``
reads too); the others (``xilinx-7``) Yosys cell counts only (folder ``synth``), no Fmax,
keyed by the config, the ``hw/`` sources and the target's flow (its Yosys script and cell
table), so an edit to the RTL or to the flow is synthesized again rather than served stale."""

from __future__ import annotations

import fcntl
import hashlib
import json
import time

__all__ = ["synth_resources"]

_COUNTS = ("lut", "ff", "dsp", "bram")


def synth_resources(config_json: str, target: str) -> dict:
    """``{lut, ff, dsp, bram, fmax_mhz, fmax_source, wall_synth_s}`` of the VTA of
    ``config_json`` on ``target`` (``fmax_mhz`` None where nothing places and routes;
    ``wall_synth_s`` is 0.0 when the figures came from the cache)."""
    from ..boards.synth import synth_config
    from ..boards.targets import get_target
    from ..hw.config import VTAConfig
    from ..runtime.image import write_atomic
    from ..sim.rtl_build import cache_root
    cfg = VTAConfig.from_dict(json.loads(config_json))
    if get_target(target).pnr is not None:
        from .latency import synth_fmax
        report, seconds = synth_fmax(cfg, target)
        return {**{k: int(report.resources.get(k, 0)) for k in _COUNTS},
                "fmax_mhz": report.fmax_mhz,
                "fmax_source": f"synth {target} (nextpnr)" if report.fmax_mhz else None,
                "wall_synth_s": seconds}
    from .latency import rtl_digest
    flow = repr(get_target(target))             # the Yosys script and how cells are counted
    key = hashlib.sha256(f"{target}\n{config_json}\n{rtl_digest()}\n{flow}".encode()).hexdigest()[:16]
    folder = cache_root() / "synth"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{target}-{cfg.name}-{key}.json"
    none = {"fmax_mhz": None, "fmax_source": None}
    with open(folder / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # one synthesis per key at a time
        if path.exists():
            return {**json.loads(path.read_text()), **none, "wall_synth_s": 0.0}
        t = time.perf_counter()
        report = synth_config(cfg, target, place_and_route=False, suggest=False)
        counts = {k: int(report.resources.get(k, 0)) for k in _COUNTS}
        write_atomic(path, lambda f: f.write(json.dumps(counts).encode()))
        return {**counts, **none, "wall_synth_s": time.perf_counter() - t}
