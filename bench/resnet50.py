"""ResNet-50 end to end on VTA: builder model (random weights), calibrated, compiled, run.

Builds ResNet-50 v1 with :func:`vtakit.compiler.nn.resnet50` (random weights, batch
norm folded by the calibration), calibrates it to int8 with power-of-two scales on
random images, compiles it for the config and runs one image on the behavioral model
and on an RTL backend through the VM, profiled per layer
(:func:`vtakit.tools.profile.profile_model`). Prints compile time (wall, and the CPU time of
this process and of the worker processes that lowered its layers, ``VTAKIT_COMPILE_JOBS``:
on a shared machine the CPU time is the fair figure), behavioral wall
time, RTL wall time and cycles, GEMM utilization, the summed per-layer rooflines (the
fewest cycles the config allows these layers, :mod:`vtakit.compiler.ops.roofline`)
and checks that both backends give the same output bit for bit, then the per-layer
table (measured cycles, event-model prediction, roofline and its binding bound).

``--model resnet18`` gives the same report, with the per-layer table, for ResNet-18
(``bench/resnet18.py`` is the short one).

Usage::

    python bench/resnet50.py [--backend verilator] [--config default] [--size 224]
                             [--model resnet50] [--no-layers] [--json F]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from vtakit.compiler import nn
from vtakit.compiler.build_model import compile_model
from vtakit.compiler.quant.calibrate import calibrate
from vtakit.hw.config import load_config
from vtakit.runtime.device import open_device
from vtakit.tools.demo import model_macs
from vtakit.tools.profile import format_profile, profile_model

MODELS = {"resnet50": ("ResNet-50", nn.resnet50), "resnet18": ("ResNet-18", nn.resnet18)}


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its ended children (the compile's workers,
    ``VTAKIT_COMPILE_JOBS``)."""
    me, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                    resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def measure(config="default", backend="verilator", size=224, calibration=2, model="resnet50"):
    """Build, calibrate, compile and run ``model``; a dict of the figures and the
    per-layer profile rows of the ``backend`` run (``"layers"``)."""
    cfg = load_config(config)
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)
              for _ in range(calibration + 1)]
    t = time.perf_counter()
    q = calibrate(MODELS[model][1](image_shape=(3, size, size)), images[:calibration])
    calibrate_s = time.perf_counter() - t
    report = []
    t, cpu = time.perf_counter(), _cpu_seconds()
    exe = compile_model(q, cfg, report=report)
    compile_s, compile_cpu_s = time.perf_counter() - t, _cpu_seconds() - cpu
    x = images[-1]
    with open_device("behavioral", cfg) as dev:
        exe.run(np.zeros_like(x), device=dev)        # warm-up (tiling, device open)
        t = time.perf_counter()
        ref = np.asarray(exe.run(x, device=dev))
        behavioral_s = time.perf_counter() - t
    t = time.perf_counter()
    y, rows = profile_model(exe, [x], backend)
    rtl_s = time.perf_counter() - t
    out = np.asarray(y[exe.output_names[0]])
    vta = [r for r in rows if r.engine == "VTA"]
    cyc = sum(r.cycles for r in vta) if vta and all(r.cycles > 0 for r in vta) else -1
    macs = model_macs(q)
    peak = cfg.batch * cfg.block_in * cfg.block_out
    roof = sum(r.roofline.cycles for r in report if r.roofline is not None)
    return {"model": model, "config": cfg.name, "backend": backend, "image": size,
            "calibrate_s": calibrate_s, "compile_s": compile_s, "compile_cpu_s": compile_cpu_s,
            "behavioral_wall_s": behavioral_s, "rtl_wall_s": rtl_s,
            "rtl_cycles": cyc, "predicted_cycles": sum(r.predicted_cycles for r in vta),
            "macs": macs,
            "gemm_utilization": macs / (cyc * peak) if cyc > 0 else None,
            "roofline_cycles": roof, "roofline_utilization": macs / (roof * peak),
            "vta_layers": sum(r.where != "host" for r in report),
            "host_primitives": sum(r.where == "host" for r in report),
            "behavioral_equals_rtl": bool(np.array_equal(ref, out)),
            "layers": rows}


def _row_json(r):
    d = {k: v for k, v in asdict(r).items() if k not in ("units", "roofline")}
    d["roofline"] = None if r.roofline is None else {**asdict(r.roofline),
                                                     "cycles": r.roofline.cycles,
                                                     "kind": r.roofline.kind}
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="verilator")
    ap.add_argument("--config", default="default")
    ap.add_argument("--size", type=int, default=224, help="image height and width")
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    ap.add_argument("--no-layers", action="store_true", help="leave out the per-layer table")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    r = measure(args.config, args.backend, args.size, model=args.model)
    util = "-" if r["gemm_utilization"] is None else f"{100 * r['gemm_utilization']:.1f}%"
    print(f"{MODELS[args.model][0]} {r['image']}x{r['image']} on {r['config']}: "
          f"{r['vta_layers']} layers on VTA + {r['host_primitives']} host primitives")
    print(f"  calibrate {r['calibrate_s']:.2f} s, compile {r['compile_s']:.2f} s "
          f"({r['compile_cpu_s']:.2f} s CPU, its worker processes included)")
    cyc = "-" if r["rtl_cycles"] < 0 else f"{r['rtl_cycles']:,}"
    print(f"  behavioral wall {r['behavioral_wall_s']:.2f} s; {r['backend']} wall "
          f"{r['rtl_wall_s']:.2f} s, {cyc} cycles (predicted {r['predicted_cycles']:,}), "
          f"GEMM utilization {util} ({r['macs'] / 1e9:.2f} GMAC)")
    basis = r["rtl_cycles"] if r["rtl_cycles"] > 0 else r["predicted_cycles"]
    print(f"  summed layer rooflines {r['roofline_cycles']:,} cycles (measured x"
          f"{basis / r['roofline_cycles']:.2f}; GEMM utilization a run "
          f"at the roofline would show {100 * r['roofline_utilization']:.1f}%: model MACs count "
          "padding taps, which VTA skips, so this may pass 100%)")
    print(f"  behavioral == {r['backend']}: {r['behavioral_equals_rtl']}")
    if not args.no_layers:
        print(format_profile(r["layers"], r["backend"]))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {**r, "layers": [_row_json(x) for x in r["layers"]]}, indent=1))
    return 0 if r["behavioral_equals_rtl"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
