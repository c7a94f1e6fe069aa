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
    python bench/costmodel.py --configs default,default+requant,tiny,tiny+requant

``NAME+EXT`` enables an ISA extension on a config (as in bench/synth.py). Prints, per
config, the worst whole-model error and the error per layer class, then both over all
configs; ``--layers`` every layer, ``--json FILE`` the rows.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np

from vtakit.compiler.build_model import compile_model
from vtakit.tools.profile import profile_model
from vtakit.hw.config import config_from_spec
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


def measure(label, mod, x, spec, cfg, backend):
    """Compile ``mod`` for ``cfg`` (labelled ``spec``), predict it and run it on ``backend``."""
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
    kinds, layers = {}, []
    for p, m in zip(predicted, measured):
        if m.engine == "VTA":
            k = kinds.setdefault(_kind(m.name), [0, 0])
            k[0] += m.cycles
            k[1] += p["cycles"]
            layers.append((m.name, int(m.cycles), int(p["cycles"])))
    rtl = sum(v[0] for v in kinds.values())
    model = sum(v[1] for v in kinds.values())
    return {"model": label, "config": spec, "rtl_cycles": rtl, "model_cycles": model,
            "error": (model - rtl) / rtl, "kinds": kinds, "layers": layers, "compile_s": compile_s,
            "predict_s": predict_s, "rtl_s": rtl_s}


def _kinds_table(rows, backend) -> list[str]:
    """The per layer class lines of ``rows`` (their cycles summed per class)."""
    kinds = {}
    for r in rows:
        for k, (a, b) in r["kinds"].items():
            s = kinds.setdefault(k, [0, 0])
            s[0] += a
            s[1] += b
    return [f"  {k:<12} {backend} {a:>12,}  model {b:>12,}  {100 * (b - a) / a:+.2f}%"
            for k, (a, b) in sorted(kinds.items())]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="verilator")
    ap.add_argument("--configs", default="default,tiny",
                    help="comma-separated presets or JSON files; NAME+EXT adds an ISA "
                         "extension, e.g. default,default+requant,tiny,tiny+requant")
    ap.add_argument("--models", help="comma-separated subset of "
                    + ",".join(["digits_cnn", *MLTK]) + " (default: all)")
    ap.add_argument("--resnet18", type=int, metavar="SIZE", help="also ResNet-18 at SIZE")
    ap.add_argument("--layers", action="store_true",
                    help="also print every VTA layer's measured and predicted cycles")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    configs = {spec: config_from_spec(spec) for spec in args.configs.split(",")}
    wanted = set(args.models.split(",")) if args.models else None
    known = {"digits_cnn", *MLTK}
    if wanted and not wanted <= known:
        ap.error(f"--models: unknown {', '.join(sorted(wanted - known))}; known: "
                 + ", ".join(["digits_cnn", *MLTK]))
    models = []
    if not wanted or "digits_cnn" in wanted:
        models.append(("digits_cnn", *load_model_input(DEMO, None)[:2]))
    for name in MLTK:
        if not wanted or name in wanted:
            mod, x, _ = load_model_input(str(DATA / f"{name}.tflite"), None)
            models.append((name, mod, x))
    if args.resnet18:
        models.append((f"resnet18_{args.resnet18}", *resnet18_model(args.resnet18)))
    rows = [measure(label, mod, x, spec, cfg, args.backend)
            for spec, cfg in configs.items() for label, mod, x in models]
    print(f"| model | config | {args.backend} cycles | model cycles | error | compile + "
          "predict (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['config']} | {r['rtl_cycles']:,} | {r['model_cycles']:,} | "
              f"{100 * r['error']:+.2f}% | {r['compile_s']:.2f} + {r['predict_s']:.3f} |")
    if args.layers:
        print("\nper layer (VTA layers):")
        for r in rows:
            for name, a, b in r["layers"]:
                print(f"  {r['model']:<22} {r['config']:<16} {name:<24} {a:>9,} {b:>9,} "
                      f"{100 * (b - a) / a:+7.2f}%")
    for spec in configs:
        mine = [r for r in rows if r["config"] == spec]
        print(f"\n{spec}: worst whole-model error "
              f"{100 * max(abs(r['error']) for r in mine):.2f}%; per layer class:")
        print("\n".join(_kinds_table(mine, args.backend)))
    if len(configs) > 1:
        print("\nper layer class (all models and configs):")
        print("\n".join(_kinds_table(rows, args.backend)))
    worst = max(abs(r["error"]) for r in rows)
    print(f"\nworst whole-model error: {100 * worst:.2f}%")
    if args.json:
        Path(args.json).write_text(json.dumps({"backend": args.backend, "rows": rows,
                                               "worst_error": worst}, indent=1) + "\n")


if __name__ == "__main__":
    main()
