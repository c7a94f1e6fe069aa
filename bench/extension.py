"""What the ISA extensions ``"requant"`` and ``"requant2"`` (exact TFLite requantization on
the ALU: six passes per output vector, or one REQ pass) buy.

For the four MLPerf Tiny int8 models (tests/data/mltk), compiled for a config without
an extension and with each of ``--extensions`` (default ``none,requant,requant2``; the
first is the baseline of the ratios), one inference on the RTL (Verilator; ``--engine
behavioral`` for a quick run without a clock), checked bit for bit against LiteRT's
reference kernels (``BUILTIN_REF``):

* ``cycles``: the device cycles of the layers that ran on VTA (sum over layers), and
  per variant its ratio to the baseline's (``x``);
* ``DRAM B``: the bytes their loads and stores moved (from the streams that ran);
* ``host rq``: host requantize steps (conv/dense layers whose int32 result the host
  requantizes: ``"vta+host"``); ``host steps`` counts every layer with a host part
  (rounding divisions of average pools, host primitives such as TFLite's ADD);
* ``wall s``: wall time of the inference on the engine after a warm-up run (simulator,
  packing and host steps together).

With ``--synth`` it also synthesizes every variant (``vtakit synth``'s
:func:`vtakit.boards.synth_config`): ``tiny`` on ecp5-85k with place and route (LUT, FF,
DSP, Fmax; tens of minutes) and ``default`` on xilinx-7 with Yosys only (cell counts);
``--synth yosys`` skips the place and route.

Usage::

    python bench/extension.py [--engine verilator|behavioral] [--config default]
                              [--extensions none,requant,requant2]
                              [--models a,b] [--json FILE] [--synth [pnr|yosys]]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import vtakit
from vtakit.tools.profile import profile_model
from vtakit.hw.config import load_config
from vtakit.sim import open_device
from vtakit.testing import model_inputs

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mltk"
MODELS = ["anomaly_detection", "keyword_spotting", "image_classification", "visual_wake_words"]
#: The variants compared by default: the base ISA, then each requantize extension.
VARIANTS = ("none", "requant", "requant2")


def with_extension(config, ext: str | None):
    """``config`` with the requantize extension ``ext`` (``None`` or ``"none"``: the base
    ISA) instead of whichever it had (every other key kept)."""
    cfg = load_config(config)
    keep = set(cfg.extensions) - set(VARIANTS)
    if ext not in (None, "none"):
        keep.add(ext)
    return cfg.replace(extensions=tuple(sorted(keep)))


def litert_reference(path, x):
    """LiteRT's output with the reference kernels (``BUILTIN_REF``)."""
    import ai_edge_litert.interpreter as litert
    it = litert.Interpreter(model_path=str(path),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    (i,), (o,) = it.get_input_details(), it.get_output_details()
    it.set_tensor(i["index"], x)
    it.invoke()
    return it.get_tensor(o["index"])


def measure(name, config, engine) -> dict:
    path = DATA / f"{name}.tflite"
    report = []
    t = time.perf_counter()
    exe = vtakit.compile(path, config=config, report=report)
    compile_s = time.perf_counter() - t
    x = model_inputs(exe_input_type(path), 1, 0)[0]
    ref = litert_reference(path, x)
    exe.run([x])                  # warm-up on the behavioral model (imports, tile searches)
    open_device(engine, config).close()        # an RTL build happens here, not below
    t = time.perf_counter()
    y, rows = profile_model(exe, [x], engine, roofline=False)
    wall = time.perf_counter() - t
    got = np.asarray(y[exe.output_names[0]])
    if not np.array_equal(got, ref):
        raise SystemExit(f"{name} on {config.name} ({engine}): output differs from LiteRT "
                         "BUILTIN_REF")
    vta = [r for r in rows if r.engine == "VTA"]
    cycles = sum(r.cycles for r in vta) if vta and all(r.cycles > 0 for r in vta) else -1
    return {"model": name, "config": config.name, "engine": engine,
            "cycles": cycles, "predicted_cycles": sum(r.predicted_cycles for r in vta),
            "dram_bytes": sum(r.dram_bytes for r in vta),
            # the fetch unit's modelled intervals: one per instruction that ran
            "instructions": sum(len(r.units.get("fetch", ())) for r in vta),
            "host_requantize_steps": sum(r.where == "vta+host" and r.kind in ("conv2d", "dense")
                                         for r in report),
            "host_steps": sum(r.where != "vta" for r in report),
            "vta_layers": sum(r.where != "host" for r in report),
            "wall_s": wall, "compile_s": compile_s, "equals_litert": True}


def exe_input_type(path):
    from vtakit.compiler.frontend import from_tflite
    return from_tflite(path)["main"].params[0].type_annotation


def _cycles(r) -> int:
    return r["cycles"] if r["cycles"] > 0 else r["predicted_cycles"]


def format_rows(results, variants=VARIANTS) -> str:
    """One line per model: per variant (the first is the baseline) cycles and their
    ratio to the baseline's, DRAM bytes and ratio, host requantize steps, host steps,
    instructions and wall time."""
    tag = lambda v: "base" if v == "none" else v        # noqa: E731
    cols = []          # (header, [cell per row])
    for key, name, fmt in (("cycles", "cyc", "{:,}"), ("dram_bytes", "DRAM", "{:,}")):
        for k, v in enumerate(variants):
            get = _cycles if key == "cycles" else (lambda r, key=key: r[key])
            cols.append((f"{name} {tag(v)}", [fmt.format(get(row[k])) for row in results]))
            if k:
                cols.append(("x", [f"{get(row[k]) / get(row[0]):.2f}" for row in results]))
    for key, name, fmt in (("host_requantize_steps", "rq", "{}"), ("host_steps", "host", "{}"),
                           ("instructions", "insn", "{:,}"), ("wall_s", "wall", "{:.2f}")):
        for k, v in enumerate(variants):
            cols.append((f"{name} {tag(v)}", [fmt.format(row[k][key]) for row in results]))
    widths = [max(len(h), *(len(c) for c in cells)) for h, cells in cols]
    lines = [f"{'model':<20} " + " ".join(f"{h:>{w}}" for (h, _), w in zip(cols, widths))]
    for i, row in enumerate(results):
        lines.append(f"{row[0]['model']:<20} " + " ".join(
            f"{cells[i]:>{w}}" for (_, cells), w in zip(cols, widths)))
    if results and results[0][0]["cycles"] <= 0:
        lines.append("(no clock on this engine: cycles are the event model's prediction)")
    lines.append("(x: ratio to the first variant; rq: conv/dense layers requantized on the "
                 "host; host: layers with a host part; insn: VTA instructions of one "
                 "inference)")
    return "\n".join(lines)


def synth(mode, variants=VARIANTS) -> list:
    """Synthesis reports of tiny on ecp5-85k (placed and routed unless ``mode`` is
    ``"yosys"``) and default on xilinx-7 (Yosys), each for every variant."""
    from vtakit.boards import format_table, synth_config
    runs = [("tiny", "ecp5-85k", mode == "pnr"), ("default", "xilinx-7", False)]
    reports = []
    for preset, target, pnr in runs:
        for v in variants:
            cfg = with_extension(preset, v)
            t = time.monotonic()
            reports.append(synth_config(cfg, target, place_and_route=pnr))
            print(f"synth {cfg.name} on {target}: {time.monotonic() - t:.0f} s",
                  file=sys.stderr)
    print(format_table(reports))
    return reports


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", default="verilator",
                   help="device backend: verilator (cycles), behavioral (quick, no clock), ...")
    p.add_argument("--config", default="default", help="base config (preset or JSON)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--extensions", default=",".join(VARIANTS),
                   help="variants to compare, the first the baseline of the ratios: "
                        "'none' (base ISA) or an extension name")
    p.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    p.add_argument("--synth", nargs="?", const="pnr", choices=("pnr", "yosys"),
                   help="also synthesize tiny (ecp5-85k) and default (xilinx-7) for every "
                        "variant; 'yosys': no place and route")
    args = p.parse_args(argv)
    variants = tuple(v.strip() for v in args.extensions.split(","))
    from vtakit.hw.spec import EXTENSIONS
    bad = [v for v in variants if v != "none" and v not in EXTENSIONS]
    if bad or not variants:
        p.error(f"--extensions {args.extensions}: unknown {bad}; use 'none' or one of "
                f"{sorted(EXTENSIONS)}")
    configs = [with_extension(args.config, v) for v in variants]
    results = []
    for name in args.models.split(","):
        pair = []
        for cfg in configs:
            t = time.monotonic()
            pair.append(measure(name, cfg, args.engine))
            print(f"{name} on {cfg.name} ({args.engine}): {time.monotonic() - t:.0f} s",
                  file=sys.stderr)
        results.append(tuple(pair))
        if args.json:
            Path(args.json).write_text(json.dumps({"models": [r for p_ in results for r in p_]},
                                                  indent=1))
    print(format_rows(results, variants))
    out = {"models": [r for pair in results for r in pair]}
    if args.synth:
        out["synth"] = [r.to_dict() for r in synth(args.synth, variants)]
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(json.dumps(out["models"]))


if __name__ == "__main__":
    main()
