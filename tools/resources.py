"""FPGA resources of a config for a sweep's ``--synth TARGET``: Yosys cell counts
(:func:`vtakit.boards.synth_config`, no place-and-route), cached on disk per config and
target under the build cache (``$VTAKIT_CACHE`` or ``~/.cache/vtakit``, folder ``synth``)
so a config is synthesized once across sweeps, models and workers."""

from __future__ import annotations

import fcntl
import hashlib
import json
import time

__all__ = ["synth_resources"]


def synth_resources(config_json: str, target: str) -> dict:
    """``{lut, ff, dsp, bram, wall_synth_s}`` of the VTA of ``config_json`` on ``target``
    (``wall_synth_s`` is 0.0 when the counts came from the cache)."""
    from ..boards.synth import synth_config
    from ..hw.config import VTAConfig
    from ..runtime.image import write_atomic
    from ..sim.rtl_build import cache_root
    cfg = VTAConfig.from_dict(json.loads(config_json))
    key = hashlib.sha256(f"{target}\n{config_json}".encode()).hexdigest()[:16]
    folder = cache_root() / "synth"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{target}-{cfg.name}-{key}.json"
    with open(folder / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # one synthesis per key at a time
        if path.exists():
            return {**json.loads(path.read_text()), "wall_synth_s": 0.0}
        t = time.perf_counter()
        report = synth_config(cfg, target, place_and_route=False, suggest=False)
        counts = {k: int(report.resources.get(k, 0)) for k in ("lut", "ff", "dsp", "bram")}
        write_atomic(path, lambda f: f.write(json.dumps(counts).encode()))
        return {**counts, "wall_synth_s": time.perf_counter() - t}
