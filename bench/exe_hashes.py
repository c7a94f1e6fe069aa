"""The sha1 of every compiled executable of the reference models, to prove a refactor byte-identical.

Compiles the four MLPerf Tiny models (tests/data/mltk), ResNet-18 and ResNet-50 (builder
models, random weights, calibrated as bench/resnet18.py does it) for each config and prints the
sha1 of the executable's bytes (:meth:`~vtakit.runtime.executable.Executable.to_bytes`).
Run it before and after a change; the two lists must be equal.

Usage::

    python bench/exe_hashes.py [--configs default,tiny] [--resnet-sizes 32,224]
                               [--resnet50-sizes 224] [--json F]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np

import vtakit
from vtakit.compiler.build_model import compile_model
from vtakit.compiler.nn import resnet18, resnet50
from vtakit.compiler.quant.calibrate import calibrate
from vtakit.hw.config import load_config

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mltk"
MODELS = ["anomaly_detection", "keyword_spotting", "image_classification", "visual_wake_words"]


def _sha1(exe) -> str:
    return hashlib.sha1(exe.to_bytes()).hexdigest()


def _resnet(build, size, calibration=2):
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)
              for _ in range(calibration + 1)]
    return calibrate(build(image_shape=(3, size, size)), images[:calibration])


def hashes(configs, sizes, models=MODELS, sizes50=()):
    rows = []
    for config in configs:
        for name in models:
            t = time.perf_counter()
            exe = vtakit.compile(DATA / f"{name}.tflite", config=config)
            rows.append({"model": name, "config": config, "sha1": _sha1(exe),
                         "seconds": round(time.perf_counter() - t, 2)})
        for build, size in [(resnet18, s) for s in sizes] + [(resnet50, s) for s in sizes50]:
            t = time.perf_counter()
            exe = compile_model(_resnet(build, size), load_config(config))
            rows.append({"model": f"{build.__name__}_{size}", "config": config,
                         "sha1": _sha1(exe), "seconds": round(time.perf_counter() - t, 2)})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="default,tiny")
    ap.add_argument("--resnet-sizes", default="32,224", help="ResNet-18 image sizes")
    ap.add_argument("--resnet50-sizes", default="224", help="ResNet-50 image sizes")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.resnet_sizes.split(",") if s]
    sizes50 = [int(s) for s in args.resnet50_sizes.split(",") if s]
    models = [m for m in args.models.split(",") if m]
    rows = hashes(args.configs.split(","), sizes, models, sizes50)
    print("| model | config | sha1 | compile |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['config']} | {r['sha1']} | {r['seconds']:.1f} s |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
