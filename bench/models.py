"""The MLPerf Tiny int8 models (tests/data/mltk) compiled for VTA: a table per model.

Columns: compile time (``vtakit.compile``), behavioral wall time of one inference
through the VM, RTL cycles of the VTA layers (sum over layers, Verilator), GEMM
utilization (MACs / (cycles x BATCH x BLOCK_IN x BLOCK_OUT)), DRAM traffic of the
VTA layers (their loads and stores), the executable's planned peak DRAM and what a
behavioral run allocated at most (instruction and micro-op buffers included), and
how many fused layers run on VTA against the host primitives. The RTL run is the
compiled executable itself (tensors kept on the device between layers), profiled per
layer (:func:`vtakit.tools.profile.profile_model`). Every run is checked bit for
bit against the IR interpreter. The roofline column sums the layers' rooflines
(:mod:`vtakit.compiler.ops.roofline`: the fewest cycles the config allows each layer) and
``x roofline`` is the RTL cycles over it (the event model's predicted cycles stand in
without an RTL backend, e.g. ``--backend behavioral``).

Latency per inference (:mod:`vtakit.tools.latency`): VTA us = the RTL cycles at the
config's Fmax on a target (``--target``: the cached ``vtakit synth`` report of that config
on that target; or ``--fmax MHZ``), host us = every host step of the profiled run (host
primitives and the host steps inside VTA layers: pack, upload, download, requantize,
unpack), measured on this machine after a warm-up run, or estimated for an embedded host
(``--host cortex-a9``); latency = their sum.

Usage::

    python bench/models.py [--backend verilator] [--config default] [--models a,b]
                           [--fmax MHZ | --target T] [--host measured|cortex-a9|F.json]
                           [--json F]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import vtakit
from vtakit.compiler.frontend import from_tflite
from vtakit.compiler.ir import evaluate
from vtakit.tools.latency import fmax_mhz, load_host
from vtakit.tools.profile import latency_totals, profile_model
from vtakit.hw.config import load_config
from vtakit.sim import open_device
from vtakit.testing import model_inputs

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mltk"
MODELS = ["anomaly_detection", "keyword_spotting", "image_classification", "visual_wake_words"]


def _input(mod):
    return model_inputs(mod["main"].params[0].type_annotation)[0]


def measure(name, config, backend, fmax=None, host=None):
    path = DATA / f"{name}.tflite"
    t = time.perf_counter()
    report = []
    exe = vtakit.compile(path, config=config, report=report)
    compile_s = time.perf_counter() - t
    mod = from_tflite(path)
    x = _input(mod)
    ref = np.asarray(evaluate(mod, x))
    exe.run([x])                                   # warm-up (tiling searches, device)
    dev = open_device("behavioral", config)
    t = time.perf_counter()
    out = exe.run_named([x], device=dev)
    wall = time.perf_counter() - t
    dram_used = dev.dram.peak_allocated
    dev.close()
    assert np.array_equal(out[exe.output_names[0]], ref), f"{name}: VM != interpreter"
    y, rows = profile_model(exe, [x], backend)
    assert np.array_equal(y[exe.output_names[0]], ref), f"{name}: {backend} != interpreter"
    cfg = load_config(config)
    peak = cfg.batch * cfg.block_in * cfg.block_out
    vta = [r for r in rows if r.engine == "VTA"]
    cycles = sum(r.cycles for r in vta) if vta and all(r.cycles > 0 for r in vta) else -1
    macs = sum(r.macs for r in vta)
    lat = latency_totals(rows, fmax, host)
    return {"fmax_mhz": fmax, "vta_us": lat["vta_us"], "host_us": lat["host_us"],
            "latency_us": lat["total_us"],
            "host_steps": sum(len(r.host_spans) for r in rows),"model": name, "compile_s": compile_s, "behavioral_wall_s": wall,
            "rtl_cycles": cycles, "macs": macs,
            "predicted_cycles": sum(r.predicted_cycles for r in vta),
            "roofline_cycles": sum(r.roofline.cycles for r in vta if r.roofline is not None),
            "gemm_utilization": macs / (cycles * peak) if cycles > 0 else None,
            "dram_bytes": sum(r.dram_bytes for r in vta),
            "peak_dram_bytes": exe.peak_dram_bytes, "dram_allocated_bytes": dram_used,
            "vta_layers": sum(r.where != "host" for r in report),
            "host_primitives": sum(r.where == "host" for r in report)}


def _us(v):
    return "-" if v is None else f"{v:,.0f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="verilator", help="RTL backend for the cycle column")
    ap.add_argument("--config", default="default")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--fmax", type=float, metavar="MHZ", help="VTA's clock for the latency")
    ap.add_argument("--target", metavar="FPGA",
                    help="the clock of the cached `vtakit synth` report of the config on it")
    ap.add_argument("--host", default="measured",
                    help="host us: measured (default), or a host cost table (cortex-a9, F.json)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    fmax, source = fmax_mhz(args.config, args.target, args.fmax)
    host = load_host(args.host)
    rows = [measure(m, args.config, args.backend, fmax, host) for m in args.models.split(",")]
    print("| model | compile | behavioral wall | RTL cycles | predicted | roofline | "
          "x roofline | GEMM util. | DRAM traffic | peak DRAM planned (used) | "
          "VTA layers + host primitives | VTA us | host us | latency us |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        util = "-" if r["gemm_utilization"] is None else f"{100 * r['gemm_utilization']:.1f}%"
        cyc = "-" if r["rtl_cycles"] < 0 else f"{r['rtl_cycles']:,}"
        basis = r["rtl_cycles"] if r["rtl_cycles"] > 0 else r["predicted_cycles"]
        roof = r["roofline_cycles"]
        ratio = f"{basis / roof:.2f}" if roof else "-"
        print(f"| {r['model']} | {r['compile_s']:.2f} s | {r['behavioral_wall_s']:.2f} s | "
              f"{cyc} | {r['predicted_cycles']:,} | {roof:,} | {ratio} | {util} | "
              f"{r['dram_bytes'] / 1e6:.2f} MB | "
              f"{r['peak_dram_bytes'] / 1e6:.2f} MB ({r['dram_allocated_bytes'] / 1e6:.2f}) | "
              f"{r['vta_layers']} + {r['host_primitives']} | {_us(r['vta_us'])} | "
              f"{_us(r['host_us'])} | {_us(r['latency_us'])} |")
    clock = "no clock (--fmax or --target)" if fmax is None else f"{fmax:g} MHz ({source})"
    where = "measured on this machine" if host is None else f"estimated for {host.name}"
    print(f"\nVTA us: {args.backend} cycles at {clock}; host us: {where}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
