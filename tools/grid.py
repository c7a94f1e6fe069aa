"""The points of a sweep: configs (presets, JSON files, a grid over config keys) x models.

A grid setting is ``KEY=v1,v2,...`` with a ``vta_config.json`` key (``LOG_BLOCK``,
``LOG_ACC_BUFF_SIZE``, ...), ``EXTENSIONS`` (values: ``none``, an extension name, or
names joined by ``+``: ``EXTENSIONS=none,requant``) or one of the optional
micro-architecture keys a preset may leave out (``COMPUTE_OVERLAP=0,1``,
``UOP_STREAM=0,1``); every base config is combined with
every combination of the settings. A combination the config loader rejects is *skipped*: it is returned
with the loader's one-line error instead of becoming a point.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

from .point import DEMO, PointSpec
from ..hw.errors import InputError

__all__ = ["parse_grid", "expand_configs", "model_specs", "make_points"]


def parse_grid(settings) -> dict:
    """``["LOG_BLOCK=3,4", "LOG_BATCH=0,1"]`` (or a dict) -> ``{"LOG_BLOCK": [3, 4], ...}``;
    integer values become ints. Raises ValueError for a setting without ``=`` or values."""
    if isinstance(settings, dict):
        return {str(k): list(v) if isinstance(v, (list, tuple)) else [v]
                for k, v in settings.items()}
    out = {}
    for s in settings or ():
        key, sep, values = str(s).partition("=")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key.strip() or not vals:
            raise InputError(f"grid setting {s!r}: expected KEY=v1,v2,... (e.g. LOG_BLOCK=3,4)")
        out[key.strip()] = [int(v) if v.lstrip("-").isdigit() else v for v in vals]
    return out


def _base(spec):
    """``(label, config dict)`` of a preset name, a JSON path or a VTAConfig."""
    from ..hw.config import VTAConfig, load_config
    if isinstance(spec, VTAConfig):
        return spec.name, spec.to_dict()
    cfg = load_config(spec)
    label = Path(spec).stem if os.path.isfile(str(spec)) else str(spec)
    return label, cfg.to_dict()


def expand_configs(configs, grid=None):
    """``(configs, skipped)``: ``configs`` a list of ``(label, config JSON)`` (sorted keys),
    ``skipped`` a list of ``(label, error)`` for the combinations the loader rejects. A
    base config that does not load raises (that is the user's typo, not a grid cell)."""
    from ..hw.config import EXTENSIONS_KEY, OVERLAP_KEY, UOP_STREAM_KEY, ConfigError, VTAConfig
    optional = (EXTENSIONS_KEY, OVERLAP_KEY, UOP_STREAM_KEY)
    grid = parse_grid(grid)
    keys = list(grid)
    out, skipped = [], []
    for spec in configs:
        label, base = _base(spec)
        for values in itertools.product(*(grid[k] for k in keys)):
            changes = dict(zip(keys, values))
            name = label + "".join(f"/{k}={v}" for k, v in changes.items())
            if EXTENSIONS_KEY in changes:
                v = str(changes[EXTENSIONS_KEY])
                changes[EXTENSIONS_KEY] = [] if v == "none" else v.split("+")
            unknown = [k for k in changes if k not in base and k not in optional]
            try:
                if unknown:
                    raise ConfigError(f"unknown config key(s) {', '.join(unknown)}; keys are "
                                      + ", ".join([*base, *(k for k in optional
                                                            if k not in base)]))
                cfg = VTAConfig.from_dict({**base, **changes}, source=name)
            except ConfigError as e:
                skipped.append((name, str(e).splitlines()[0]))
                continue
            out.append((name, json.dumps(cfg.to_dict(), sort_keys=True)))
    return out, skipped


def model_specs(models) -> list[tuple[str, str]]:
    """``(label, path)`` of each model: the file stem (numbered ``stem#1``, ``stem#2`` when
    two files share one), or :data:`~.point.DEMO` for the shipped demo CNN (the default).
    A missing file raises FileNotFoundError naming it."""
    out = []
    for m in models or (DEMO,):
        m = str(m)
        if m == DEMO:
            out.append((DEMO, DEMO))
            continue
        path = Path(m)
        if not path.is_file():
            raise FileNotFoundError(f"model {m}: no such file (a .tflite or .onnx model, or "
                                    f"{DEMO!r} for the shipped digits CNN)")
        out.append((path.stem, str(path.resolve())))
    labels = [label for label, _ in out]
    for k, (label, path) in enumerate(out):     # two files with one stem: number them
        if labels.count(label) > 1:
            out[k] = (f"{label}#{labels[:k + 1].count(label)}", path)
    return out


def make_points(configs, models=None, *, grid=None, engine="model", calibrate=None,
                synth=None, host="measured"):
    """``(points, skipped)``: one :class:`~.point.PointSpec` per (config, model), sorted by
    config label then model label (the table's row order)."""
    cfgs, skipped = expand_configs(configs, grid)
    specs = model_specs(models)
    cal = None if calibrate is None else str(Path(calibrate).resolve())
    points = [PointSpec(label, cj, mlabel, mpath, engine,
                        None if mpath == DEMO else cal, synth, host)
              for label, cj in cfgs for mlabel, mpath in specs]
    points = sorted({p.key: p for p in points}.values(), key=lambda p: p.key)
    return points, skipped
