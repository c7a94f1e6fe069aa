"""Whole-model compile time: the MLPerf Tiny models and ResNet-50, each compiled in a fresh
process (nothing cached), with one process or with worker processes lowering the layers.

Every compile runs ``--repeat`` times, the settings alternating (so a load that changes
during the run weighs on each alike); the table gives the median wall time, the CPU time
of the compile and its workers, and the ratio of each setting's median to the first
setting's, measured in the same run. ``--pythonpath DIR`` adds a baseline: the same
compile with ``DIR`` first on the import path (an import tree of another revision:
``DIR/vtakit`` with its subpackages, e.g. made with ``git worktree`` and symlinks as
``pyproject.toml``'s ``package-dir`` maps them); ratios are then against it.
ResNet-50 is the builder model (random weights) calibrated on two random images, as
``bench/resnet50.py`` does it; calibration is not timed. Every setting must give the
same executable, byte for byte: a differing sha1 fails the run.

Usage::

    python bench/compile_models.py [--models keyword_spotting,resnet50] [--config default]
                                   [--jobs 1,2] [--repeat 3] [--pythonpath DIR] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mltk"
MODELS = ["anomaly_detection", "keyword_spotting", "image_classification",
          "visual_wake_words", "resnet50"]

# Run in a fresh interpreter: compile one model, print one JSON line.
_CHILD = r"""
import hashlib, json, resource, sys, time
import numpy as np
name, config, data = sys.argv[1:4]

def cpu():
    me, ch = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime

import vtakit
from vtakit.hw.config import load_config
if name == "resnet50":
    from vtakit.compiler import nn
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.quant.calibrate import calibrate
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32) for _ in range(2)]
    model = calibrate(nn.resnet50(image_shape=(3, 224, 224)), images)
    run = lambda: compile_model(model, load_config(config))
else:
    run = lambda: vtakit.compile(f"{data}/{name}.tflite", config=config)
t, c = time.perf_counter(), cpu()
exe = run()
print(json.dumps({"wall": time.perf_counter() - t, "cpu": cpu() - c,
                  "sha1": hashlib.sha1(exe.to_bytes()).hexdigest(),
                  "vtakit": vtakit.__file__}))
"""


def _compile(name, config, jobs, pythonpath=None) -> dict:
    env = dict(os.environ, VTAKIT_COMPILE_JOBS=str(jobs))
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(pythonpath).resolve())] + [p for p in [env.get("PYTHONPATH")] if p])
    # from a neutral directory: the checkout's root would shadow the import tree
    out = subprocess.run([sys.executable, "-c", _CHILD, name, config, str(DATA)], env=env,
                         capture_output=True, text=True, cwd=tempfile.gettempdir())
    if out.returncode:
        raise SystemExit(f"{name} (jobs {jobs}{', ' + pythonpath if pythonpath else ''}) "
                         f"failed:\n{out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if pythonpath and not got["vtakit"].startswith(str(Path(pythonpath).resolve())):
        raise SystemExit(f"--pythonpath {pythonpath}: the compile imported {got['vtakit']}")
    return got


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--config", default="default")
    ap.add_argument("--jobs", default="1,2", help="VTAKIT_COMPILE_JOBS values to compare")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pythonpath", metavar="DIR",
                    help="a baseline import tree, measured first (one process)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    settings = [(f"jobs {j}", int(j), None) for j in args.jobs.split(",") if j]
    if args.pythonpath:
        settings.insert(0, ("baseline", 1, args.pythonpath))
    rows = []
    print(f"| model | setting | wall s (median of {args.repeat}) | CPU s | x {settings[0][0]} |")
    print("|---|---|---|---|---|")
    for name in [m for m in args.models.split(",") if m]:
        runs = {label: [] for label, _, _ in settings}
        for _ in range(args.repeat):
            for label, jobs, path in settings:
                runs[label].append(_compile(name, args.config, jobs, path))
        shas = {r["sha1"] for rs in runs.values() for r in rs}
        if len(shas) != 1:
            raise SystemExit(f"{name}: the settings gave different executables: {sorted(shas)}")
        sha1 = shas.pop()
        first = statistics.median(r["wall"] for r in runs[settings[0][0]])
        for label, jobs, path in settings:
            wall = statistics.median(r["wall"] for r in runs[label])
            cpu = statistics.median(r["cpu"] for r in runs[label])
            rows.append({"model": name, "config": args.config, "setting": label,
                         "jobs": jobs, "pythonpath": path, "wall_s": wall, "cpu_s": cpu,
                         "walls": [r["wall"] for r in runs[label]], "ratio": wall / first,
                         "sha1": sha1})
            print(f"| {name} | {label} | {wall:.2f} | {cpu:.2f} | {wall / first:.2f} |",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
