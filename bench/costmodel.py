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

    python bench/costmodel.py [--backend verilator] [--configs default,tiny+requant]
                              [--models keyword_spotting] [--resnet18 224]

``NAME+EXT`` enables an ISA extension on a config (as in bench/synth.py); by default
the bench runs default and tiny, each alone and with each extension. Prints, per
config, the worst whole-model error and the error per layer class, then both over all
configs; ``--layers`` every layer, ``--json FILE`` the rows.

``--save FILE`` pickles the measured rows with their kernel streams; ``--load FILE``
reads them instead of compiling and measuring again (a refit in seconds; the
executables are the ones measured then)::

    python bench/costmodel.py --configs default,tiny --save rows.pkl
    python bench/costmodel.py --load rows.pkl --fit store_insn_cycles=2:8

``--fit FIELD=LO:HI`` (repeatable) is how :data:`~vtakit.compiler.ops.cost.RTL_COST`'s
constants are fitted: every combination predicts the measured kernels again and the
best are printed by worst whole-model error. The executables stay as compiled, and the
base ISA's int32 layers are re-ranked by the model, so re-run this bench and
bench/models.py with the constants chosen::

    python bench/costmodel.py --configs default,default+requant,tiny,tiny+requant \\
        --fit dma_insn_cycles=4:9 --fit overlap_cycles=1:3 --fit dma_row_cycles=1:4
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import pickle
import re
import time
from pathlib import Path

import numpy as np

from vtakit.compiler.build_model import compile_model
from vtakit.compiler.ops.cost import RTL_COST
from vtakit.compiler.ops.perfmodel import predict_stream, program_stream
from vtakit.tools.profile import profile_model
from vtakit.hw.config import config_from_spec
from vtakit.hw.spec import EXTENSIONS
from vtakit.tools.point import DEMO, load_model_input, predict_layers

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mltk"
MLTK = ["anomaly_detection", "keyword_spotting", "image_classification", "visual_wake_words"]
#: default and tiny, each alone and with each ISA extension.
DEFAULT_CONFIGS = [base + ext for base in ("default", "default+serial", "tiny")
                   for ext in ["", *(f"+{e}" for e in EXTENSIONS)]]


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
    runs = []
    predicted = predict_layers(exe, runs=runs)
    predict_s = time.perf_counter() - t
    t = time.perf_counter()
    _, measured = profile_model(exe, [x], backend)
    rtl_s = time.perf_counter() - t
    assert [p["layer"] for p in predicted] == [m.name for m in measured]
    kernel = {prim.name: prim.meta_dict.get("kernel") for prim in exe.primitives}
    kinds, layers, streams = {}, [], {}
    runs = iter(runs)
    for p, m in zip(predicted, measured):
        if m.engine == "VTA":
            run = next(runs)
            # a chain of layers is its own class (its stream is the runtime's chained one)
            k = kinds.setdefault("chain" if len(m.layers) > 1 else _kind(m.name), [0, 0])
            k[0] += m.cycles
            k[1] += p["cycles"]
            layers.append((m.name, int(m.cycles), int(p["cycles"])))
            # a kernel alone, or the stream the runtime built (a chain, a warm start)
            key = kernel[m.name] if run.insns is None else id(run)
            if key not in streams:
                # what the event model reads: the stream, its uop staging (the ALU lane
                # of COMPUTE_OVERLAP follows the micro-ops) and the uop SRAM it starts
                # with, as predict_layers read them
                prog = exe.program(key) if run.insns is None else None
                streams[key] = ([tuple(program_stream(prog)), prog.uops] if prog is not None
                                else [tuple(run.insns), run.uops]) + [0, 0, run.sram]
            s = streams[key]
            s[2] += 1
            s[3] += int(m.cycles)
    rtl = sum(v[0] for v in kinds.values())
    model = sum(v[1] for v in kinds.values())
    return {"model": label, "config": spec, "rtl_cycles": rtl, "model_cycles": model,
            "error": (model - rtl) / rtl, "kinds": kinds, "layers": layers, "compile_s": compile_s,
            "predict_s": predict_s, "rtl_s": rtl_s, "streams": list(streams.values())}


def parse_fit(items) -> dict:
    """``--fit KEY=LO:HI`` (integers, both included) or ``KEY=V`` -> {field: values}."""
    fields = {f.name for f in dataclasses.fields(RTL_COST)}
    grid = {}
    for item in items:
        key, sep, value = item.partition("=")
        lo, _, hi = value.partition(":")
        if not sep or key not in fields or not lo.lstrip("-").isdigit() or (
                hi and not hi.lstrip("-").isdigit()):
            raise SystemExit(f"--fit {item!r}: expected FIELD=LO:HI or FIELD=V, FIELD one of "
                             + ", ".join(sorted(fields)))
        grid[key] = list(range(int(lo), int(hi or lo) + 1))
    return grid


def fit(rows, grid, top=10) -> list[str]:
    """The event model's constants refitted on the measured layers of ``rows``: every
    combination of ``grid`` (EventCost fields -> values) predicts every kernel stream
    again; lines of the best ``top`` by worst whole-model error (and RTL_COST's). The
    executables stay as compiled: a refit moves the int32 layers' re-ranked tilings,
    so re-measure the chosen constants (and bench/models.py) before keeping them."""
    configs = {r["config"]: config_from_spec(r["config"]) for r in rows}
    # a kernel's stream bound alone, or a chain's stream as the runtime builds it, each
    # with its uop staging: [instructions, uops, calls, measured cycles, initial uop SRAM]
    kernels = [(r["config"], r["streams"]) for r in rows]

    def worst(cost):
        errors = {}
        for config, streams in kernels:
            model = sum(n * predict_stream(insns, configs[config], cost, uops=uops,
                                           sram=sram).cycles
                        for insns, uops, n, _, sram in streams)
            rtl = sum(rtl for _, _, _, rtl, _ in streams)
            errors[config] = max(errors.get(config, 0), abs(model - rtl) / rtl)
        return max(errors.values()), errors

    keys = list(grid)
    scored = []
    for values in itertools.product(*grid.values()):
        cost = dataclasses.replace(RTL_COST, **dict(zip(keys, values)))
        scored.append((*worst(cost), dict(zip(keys, values))))
    scored.sort(key=lambda s: s[0])

    def line(w, errors, what):
        return (f"  {100 * w:5.2f}%  {what}  ("
                + ", ".join(f"{c} {100 * e:.2f}%" for c, e in errors.items()) + ")")
    out = [line(w, e, v) for w, e, v in scored[:top]]
    return out + [line(*worst(RTL_COST), "RTL_COST as it is")]


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
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                    help="comma-separated presets or JSON files; NAME+EXT adds an ISA "
                         "extension (default: default, default+serial and tiny, each alone and with each "
                         "extension: " + ",".join(DEFAULT_CONFIGS) + ")")
    ap.add_argument("--models", help="comma-separated subset of "
                    + ",".join(["digits_cnn", *MLTK]) + " (default: all)")
    ap.add_argument("--resnet18", type=int, metavar="SIZE", help="also ResNet-18 at SIZE")
    ap.add_argument("--layers", action="store_true",
                    help="also print every VTA layer's measured and predicted cycles")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--fit", action="append", metavar="FIELD=LO:HI",
                    help="refit RTL_COST's FIELD (an EventCost field) over LO..HI on the "
                         "measured layers (repeat for a grid); prints the best fits")
    ap.add_argument("--save", metavar="FILE",
                    help="also pickle the rows with their kernel streams (for --load)")
    ap.add_argument("--load", metavar="FILE",
                    help="the rows --save wrote, instead of compiling and measuring "
                         "(--configs, --models and --resnet18 then select nothing)")
    args = ap.parse_args(argv)
    grid = parse_fit(args.fit) if args.fit else None
    if args.load:
        saved = pickle.loads(Path(args.load).read_bytes())
        args.backend, rows = saved["backend"], saved["rows"]
        configs = {r["config"]: None for r in rows}
        return report(args, grid, configs, rows)
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
    if args.save:
        Path(args.save).write_bytes(pickle.dumps({"backend": args.backend, "rows": rows}))
    return report(args, grid, configs, rows)


def report(args, grid, configs, rows):
    """Print the tables of ``rows`` (and the refit of ``grid``); write ``--json``."""
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
    if args.fit:
        print("\nrefit (worst whole-model error; executables as compiled):")
        print("\n".join(fit(rows, grid)))
    if args.json:
        rows = [{k: v for k, v in r.items() if k != "streams"} for r in rows]
        Path(args.json).write_text(json.dumps({"backend": args.backend, "rows": rows,
                                               "worst_error": worst}, indent=1) + "\n")


if __name__ == "__main__":
    main()
