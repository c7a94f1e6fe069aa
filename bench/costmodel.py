"""The whole-model cost model (``vtakit sweep --engine model``) against the RTL's cycles.

For each model: compile it, predict every layer call with the sweep's model engine
(:func:`vtakit.tools.point.predict_layers`: each kernel bound as the VM binds it, the
event model :func:`~vtakit.compiler.ops.perfmodel.predict_stream` with its default,
RTL-calibrated costs, nothing simulated), then run it on an RTL backend through the
VM (:func:`~vtakit.tools.profile.profile_model`, measured cycles per layer). Prints
the error per model and per layer class (the kernel kind: conv2d, dense, add, pools),
and how long a model-engine point takes (compile + prediction).

Models: the demo CNN (calibrated as ``vtakit demo``), the four MLPerf Tiny int8 models
of tests/data/mltk, and with ``--resnet18 SIZE`` the builder ResNet-18 (random weights,
calibrated on two random images, as bench/resnet18.py).

Usage::

    python bench/costmodel.py [--backend verilator] [--configs default,tiny] [--resnet18 224]
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np

from vtakit.compiler.build_model import compile_model
from vtakit.tools.profile import profile_model
from vtakit.hw.config import load_config
from vtakit.tools.point import DEMO, load_model_input, predict_layers

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mltk"
MLTK = ["anomaly_detection", "keyword_spotting", "image_classification", "visual_wake_words"]


def resnet18_model(size):
    """ResNet-18 (builder, random weights) calibrated on two random images, and a third
    image as its input."""
    from vtakit.compiler.nn import resnet18
    from vtakit.compiler.quant.calibrate import calibrate
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32) for _ in range(3)]
    return calibrate(resnet18(image_shape=(3, size, size)), images[:2]), images[2]


def _kind(layer: str) -> str:
    return re.sub(r"^vta_|_\d+$", "", layer)


def measure(label, mod, x, config, backend):
    cfg = load_config(config)
    t = time.perf_counter()
    exe = compile_model(mod, cfg)
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    predicted = predict_layers(exe)
    predict_s = time.perf_counter() - t
    t = time.perf_counter()
    _, measured = profile_model(exe, [x], backend)
    rtl_s = time.perf_counter() - t
    assert [p["layer"] for p in predicted] == [m.name for m in measured]
    kinds = {}
    for p, m in zip(predicted, measured):
        if m.engine == "VTA":
            k = kinds.setdefault(_kind(m.name), [0, 0])
            k[0] += m.cycles
            k[1] += p["cycles"]
    rtl = sum(v[0] for v in kinds.values())
    model = sum(v[1] for v in kinds.values())
    return {"model": label, "config": config, "rtl_cycles": rtl, "model_cycles": model,
            "error": (model - rtl) / rtl, "kinds": kinds, "compile_s": compile_s,
            "predict_s": predict_s, "rtl_s": rtl_s}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="verilator")
    ap.add_argument("--configs", default="default,tiny")
    ap.add_argument("--resnet18", type=int, metavar="SIZE", help="also ResNet-18 at SIZE")
    args = ap.parse_args(argv)
    models = [("digits_cnn", *load_model_input(DEMO, None)[:2])]
    for name in MLTK:
        mod, x, _ = load_model_input(str(DATA / f"{name}.tflite"), None)
        models.append((name, mod, x))
    if args.resnet18:
        models.append((f"resnet18_{args.resnet18}", *resnet18_model(args.resnet18)))
    rows = [measure(label, mod, x, c, args.backend)
            for c in args.configs.split(",") for label, mod, x in models]
    print(f"| model | config | {args.backend} cycles | model cycles | error | compile + "
          "predict (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['config']} | {r['rtl_cycles']:,} | {r['model_cycles']:,} | "
              f"{100 * r['error']:+.2f}% | {r['compile_s']:.2f} + {r['predict_s']:.3f} |")
    kinds = {}
    for r in rows:
        for k, (a, b) in r["kinds"].items():
            s = kinds.setdefault(k, [0, 0])
            s[0] += a
            s[1] += b
    print("\nper layer class (all models and configs):")
    for k, (a, b) in sorted(kinds.items()):
        print(f"  {k:<12} {args.backend} {a:>12,}  model {b:>12,}  {100 * (b - a) / a:+.2f}%")
    worst = max(abs(r["error"]) for r in rows)
    print(f"\nworst whole-model error: {100 * worst:.2f}%")


if __name__ == "__main__":
    main()
