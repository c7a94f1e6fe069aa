"""ResNet-18 convolution layers C2-C11 on VTA: cycles, utilization, DRAM traffic.

The layer list of TVM's ``test_benchmark_topi_conv2d.py`` (reference 6.2),
each layer with a per-channel bias, a requantization shift of 8 (rounded),
a clip to [0, 127] and the int8 store, checked bit for bit against the numpy
reference. Per layer it prints the chosen tiling, the instruction count,
measured cycles (RTL backends), the cost model's prediction (tiling estimate
and the stream event model), ideal cycles (MACs / MACs-per-cycle), GEMM
utilization (ideal / cycles), DRAM bytes moved (the behavioral model's fsim
counters; RTL backends count no bytes) and the wall times of the run on the
chosen backend and on the behavioral model.

    python bench/resnet18_layers.py                    # fastest RTL backend available
    python bench/resnet18_layers.py --backend behavioral --json out.json
    python bench/resnet18_layers.py --layers C2,C5 --config 4x8

Without an RTL backend the utilization is computed from the predicted cycles
(marked ``pred``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from vtakit.compiler.ops import plan_conv2d
from vtakit.compiler.ops import reference as R
from vtakit.compiler.ops.cost.events import program_facts
from vtakit.compiler.ops.perfmodel import stream_traffic
from vtakit.hw.config import load_config
from vtakit.runtime import Runtime
from vtakit.sim import DeviceError, open_device

#: name -> (H, W, Cin, Cout, kernel, pad, stride)  (reference 6.2)
LAYERS = {
    "C2": (56, 56, 64, 64, 3, 1, 1),
    "C3": (56, 56, 64, 128, 3, 1, 2),
    "C4": (56, 56, 64, 128, 1, 0, 2),
    "C5": (28, 28, 128, 128, 3, 1, 1),
    "C6": (28, 28, 128, 256, 3, 1, 2),
    "C7": (28, 28, 128, 256, 1, 0, 2),
    "C8": (14, 14, 256, 256, 3, 1, 1),
    "C9": (14, 14, 256, 512, 3, 1, 2),
    "C10": (14, 14, 256, 512, 1, 0, 2),
    "C11": (7, 7, 512, 512, 3, 1, 1),
}

#: Backends tried, fastest first, when --backend is not given.
RTL_PREFERENCE = ("verilator", "cxxrtl")
SHIFT, CLIP = 8, (0, 127)


def open_backend(name, config):
    """(device, note): the named backend, or the first RTL backend that opens."""
    if name:
        return open_device(name, config), ""
    errors = []
    for cand in RTL_PREFERENCE:
        try:
            return open_device(cand, config), ""
        except Exception as e:  # a missing toolchain or a failed build: try the next
            errors.append(f"{cand}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    return (open_device("behavioral", config),
            "note: no RTL backend available (" + "; ".join(errors) + "); using behavioral, "
            "utilization from predicted cycles")


def layer_inputs(config, spec, rng):
    """Random int8 data and weights (full range) and an int32 bias in [-16384, 16384)."""
    h, w, cin, cout, k, _, _ = spec
    return (rng.integers(-128, 128, (config.batch, cin, h, w), dtype=np.int8),
            rng.integers(-128, 128, (cout, cin, k, k), dtype=np.int8),
            rng.integers(-16384, 16384, cout).astype(np.int32))


def run_layer(rt, name, spec, inputs):
    h, w, cin, cout, k, pad, stride = spec
    cfg = rt.config
    n = cfg.batch
    x, wt, bias = inputs
    plan = plan_conv2d(cfg, x.shape, wt.shape, stride, pad, bias=True, shift=SHIFT, clip=CLIP)
    packed = plan.pack(x, wt, bias)
    bufs = {nm: rt.alloc(op.nbytes) for nm, op in plan.operands.items()}
    try:
        for nm, arr in packed.items():
            rt.upload(bufs[nm], arr)
        plan.lower(rt, bufs)
        rt.finalize()
        insns = rt.instructions
        # the kernel's stream bound alone with its micro-ops (the lane needs them): the
        # prediction every report shows (Plan.predicted)
        pred = program_facts(plan.program())[0]
        traffic = stream_traffic(insns, cfg)
        t0 = time.perf_counter()
        result = rt.synchronize()
        wall = time.perf_counter() - t0
        out = plan.operands["out"]
        y = plan.unpack(rt.download(bufs["out"], out.dtype, out.shape))
    finally:
        for buf in bufs.values():
            rt.free(buf)
    ref = R.epilogue_ref(R.conv2d_ref(x, wt, stride, pad), bias=bias, shift=SHIFT, clip=CLIP)
    macs = n * cout * plan.oh * plan.ow * cin * k * k
    ideal = macs / cfg.macs_per_cycle
    measured = result.cycles if result.cycles is not None and result.cycles >= 0 else None
    cycles = measured if measured is not None else pred.cycles
    stats = result.stats or {}
    dram = {key: int(stats.get(key, traffic[key])) for key in traffic}
    return {
        "layer": name, "shape": dict(zip(("H", "W", "Cin", "Cout", "k", "pad", "stride"), spec)),
        "tiling": str(plan.tiling), "instructions": len(insns),
        "cycles": measured, "predicted_cycles": pred.cycles,
        "estimate_cycles": int(plan.estimate.cycles), "ideal_cycles": ideal,
        "utilization": ideal / cycles, "utilization_source": "measured" if measured else "predicted",
        "dram_bytes": sum(dram.values()), "dram": dram,
        "gemm_counter": int(stats.get("gemm_counter", pred.gemm_uops)),
        "wall_s": wall, "verified": bool(np.array_equal(y, ref)),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", help="device backend (default: fastest RTL backend available)")
    ap.add_argument("--config", default="default", help="preset or JSON config (default: default)")
    ap.add_argument("--layers", help="comma-separated subset, e.g. C2,C5")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--no-behavioral", action="store_true",
                    help="with an RTL backend, skip the behavioral run of each layer (its wall "
                         "time and DRAM byte counters)")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    names = args.layers.split(",") if args.layers else list(LAYERS)
    unknown = [nm for nm in names if nm not in LAYERS]
    if unknown:
        ap.error(f"unknown layer {unknown[0]!r}; layers are {', '.join(LAYERS)}")
    dev, note = open_backend(args.backend, cfg)
    if note:
        print(note, file=sys.stderr)
    rt = Runtime(dev)
    beh = None
    if dev.name != "behavioral" and not args.no_behavioral:
        beh = Runtime(open_device("behavioral", cfg))
    rng = np.random.default_rng(args.seed)
    print(f"backend {dev.name}, config {cfg.name}, bias + shift {SHIFT} + clip {CLIP}")
    hdr = (f"{'layer':<5} {'HxW':>7} {'Cin':>4} {'Cout':>4} {'k':>1} {'s':>1} "
           f"{'insns':>6} {'cycles':>10} {'predicted':>10} {'ideal':>9} {'util':>6} "
           f"{'DRAM MB':>8} {'wall s':>7} {'beh s':>6}  ok  tiling")
    print(hdr)
    rows = []
    for nm in names:
        try:
            inputs = layer_inputs(cfg, LAYERS[nm], rng)
            r = run_layer(rt, nm, LAYERS[nm], inputs)
            if beh is not None:      # the model's fsim counters and wall time, same inputs
                b = run_layer(beh, nm, LAYERS[nm], inputs)
                r.update(behavioral_wall_s=b["wall_s"], dram=b["dram"],
                         dram_bytes=b["dram_bytes"], verified=r["verified"] and b["verified"])
            elif dev.name == "behavioral":
                r["behavioral_wall_s"] = r["wall_s"]
        except DeviceError as e:
            print(f"{nm}: device error: {e}", file=sys.stderr)
            return 1
        rows.append(r)
        s = r["shape"]
        cyc = f"{r['cycles']:>10d}" if r["cycles"] is not None else f"{'-':>10}"
        print(f"{nm:<5} {s['H']:>3}x{s['W']:<3} {s['Cin']:>4} {s['Cout']:>4} {s['k']:>1} "
              f"{s['stride']:>1} {r['instructions']:>6} {cyc} {r['predicted_cycles']:>10d} "
              f"{r['ideal_cycles']:>9.0f} {r['utilization']:>6.1%} {r['dram_bytes'] / 1e6:>8.2f} "
              f"{r['wall_s']:>7.2f} {r.get('behavioral_wall_s', float('nan')):>6.2f}  "
              f"{'yes' if r['verified'] else 'NO '} {r['tiling']}", flush=True)

    def total(sel):
        cyc = sum((r["cycles"] if r["cycles"] is not None else r["predicted_cycles"]) for r in sel)
        ideal = sum(r["ideal_cycles"] for r in sel)
        return cyc, ideal, (ideal / cyc if cyc else 0.0)

    summary = {}
    for label, sel in (("all", rows), ("3x3", [r for r in rows if r["shape"]["k"] == 3])):
        if sel:
            cyc, ideal, util = total(sel)
            summary[label] = {"cycles": cyc, "ideal_cycles": ideal, "utilization": util,
                              "dram_bytes": sum(r["dram_bytes"] for r in sel),
                              "wall_s": sum(r["wall_s"] for r in sel)}
            print(f"total {label:<4}: cycles {cyc}, ideal {ideal:.0f}, utilization {util:.1%}, "
                  f"DRAM {summary[label]['dram_bytes'] / 1e6:.2f} MB, wall "
                  f"{summary[label]['wall_s']:.1f} s")
    ok = all(r["verified"] for r in rows)
    print("all layers match the numpy reference" if ok else "MISMATCH against the reference")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": dev.name, "config": cfg.name, "note": note, "layers": rows,
                       "summary": summary, "verified": ok}, f, indent=2)
    dev.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
