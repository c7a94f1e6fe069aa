"""ResNet-18 end to end on VTA: builder model (random weights), calibrated, compiled, run.

Builds ResNet-18 with :func:`vtakit.compiler.nn.resnet18` (random weights, batch
norm folded by the calibration), calibrates it to int8 with power-of-two scales on
random images, compiles it for the config and runs one image on the behavioral
model and on an RTL backend through the VM, with a
:class:`~vtakit.runtime.recorder.LayerRecorder` counting the cycles of every kernel.
Prints compile time, behavioral wall time, RTL wall time and cycles, GEMM
utilization, the summed per-layer rooflines (the fewest cycles the config allows
these layers, :mod:`vtakit.compiler.ops.roofline`) and checks that both backends
give the same output bit for bit.

Usage::

    python bench/resnet18.py [--backend verilator] [--config default] [--size 224] [--json F]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from vtakit.compiler.build_model import compile_model
from vtakit.tools.demo import model_macs
from vtakit.compiler.nn import resnet18
from vtakit.compiler.quant.calibrate import calibrate
from vtakit.hw.config import load_config
from vtakit.runtime.device import open_device
from vtakit.runtime.recorder import LayerRecorder


def measure(config="default", backend="verilator", size=224, calibration=2):
    cfg = load_config(config)
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)
              for _ in range(calibration + 1)]
    t = time.perf_counter()
    q = calibrate(resnet18(image_shape=(3, size, size)), images[:calibration])
    calibrate_s = time.perf_counter() - t
    report = []
    t = time.perf_counter()
    exe = compile_model(q, cfg, report=report)
    compile_s = time.perf_counter() - t
    x = images[-1]
    walls, outs, cycles, gemm = {}, {}, {}, {}
    for name in ("behavioral", backend):
        with open_device(name, cfg) as dev:
            exe.run(np.zeros_like(x), device=dev)        # warm-up (tiling, device open)
            with LayerRecorder(dev, keep_outputs=False) as rec:
                t = time.perf_counter()
                # the recorder keeps no outputs: layers handing device tensors over run
                # chained (vtakit.runtime.chain), as without a hook
                outs[name] = np.asarray(exe.run(x, device=dev, hook=rec.hook,
                                                hook_outputs=False))
                walls[name] = time.perf_counter() - t
            runs = rec.runs
        cycles[name] = (sum(r.cycles for r in runs) if all(r.cycles >= 0 for r in runs)
                        else -1)
        gemm[name] = sum(int(r.stats.get("gemm_counter", 0)) for r in runs)
    equal = bool(np.array_equal(outs["behavioral"], outs[backend]))
    macs = model_macs(q)
    peak = cfg.batch * cfg.block_in * cfg.block_out
    cyc = cycles[backend]
    # the layers' rooflines summed: the fewest cycles the config allows these layers
    roof = sum(r.roofline.cycles for r in report if r.roofline is not None)
    return {"config": cfg.name, "backend": backend, "image": size,
            "calibrate_s": calibrate_s, "compile_s": compile_s,
            "behavioral_wall_s": walls["behavioral"], "rtl_wall_s": walls[backend],
            "rtl_cycles": cyc, "macs": macs,
            "gemm_utilization": macs / (cyc * peak) if cyc > 0 else None,
            "gemm_busy": gemm[backend] / cyc if cyc > 0 else None,
            "roofline_cycles": roof, "roofline_utilization": macs / (roof * peak),
            "vta_layers": sum(r.where != "host" for r in report),
            "device_runs": len(runs),
            "host_primitives": sum(r.where == "host" for r in report),
            "behavioral_equals_rtl": equal}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="verilator")
    ap.add_argument("--config", default="default")
    ap.add_argument("--size", type=int, default=224, help="image height and width")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    r = measure(args.config, args.backend, args.size)
    util = "-" if r["gemm_utilization"] is None else f"{100 * r['gemm_utilization']:.1f}%"
    print(f"ResNet-18 {r['image']}x{r['image']} on {r['config']}: {r['vta_layers']} layers on "
          f"VTA + {r['host_primitives']} host primitives; {r['device_runs']} device runs "
          "(chained layers run as one)")
    print(f"  calibrate {r['calibrate_s']:.2f} s, compile {r['compile_s']:.2f} s")
    print(f"  behavioral wall {r['behavioral_wall_s']:.2f} s; {r['backend']} wall "
          f"{r['rtl_wall_s']:.2f} s, {r['rtl_cycles']:,} cycles, GEMM utilization {util} "
          f"({r['macs'] / 1e9:.2f} GMAC)")
    over = r["rtl_cycles"] / r["roofline_cycles"]
    print(f"  summed layer rooflines {r['roofline_cycles']:,} cycles (measured x{over:.2f}; "
          f"GEMM utilization a run at the roofline would show "
          f"{100 * r['roofline_utilization']:.1f}%: model MACs count padding taps, which VTA "
          "skips, so this may pass 100%)")
    print(f"  behavioral == {r['backend']}: {r['behavioral_equals_rtl']}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1))
    return 0 if r["behavioral_equals_rtl"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
