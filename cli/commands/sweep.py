"""``vtakit sweep``: configs x models on Dask, a tidy table, a Pareto plot.

Thin: the work is :func:`vtakit.tools.sweep.sweep`. Prints the skipped grid cells,
one summary line per point, the per-layer breakdown of each model's best point, and
the files written. Exit status 0 when every point succeeded, 1 when some failed
(their rows hold the errors), 2 on an error of the command itself.
"""

from __future__ import annotations

from ..checks import add_latency_options, output_file

__all__ = ["register", "run"]


def register(sub):
    from ...tools.point import ENGINES
    p = sub.add_parser("sweep", help="design-space sweep (configs x models) on Dask: table "
                                     "(Parquet, CSV), Pareto plot, per-layer breakdown")
    p.add_argument("--configs", default="default", metavar="A,B,...",
                   help="base configs: preset names or vta_config.json files (default: default)")
    p.add_argument("--grid", nargs="+", default=[], metavar="KEY=v1,v2",
                   help="config keys to vary over every base config (e.g. LOG_BLOCK=3,4 "
                        "LOG_BATCH=0,1; also EXTENSIONS=none,requant2, COMPUTE_OVERLAP=0,1, "
                        "UOP_STREAM=0,1); illegal combinations are reported and skipped")
    p.add_argument("--models", default="demo", metavar="A,B,...",
                   help=".tflite/.onnx files; 'demo' is the shipped digits CNN, calibrated as "
                        "vtakit demo does (default: demo)")
    p.add_argument("--calibrate", metavar="X.npy",
                   help="samples (N, *input shape) quantizing the float models")
    p.add_argument("--engine", default="model", choices=ENGINES,
                   help="model: event model, no simulation (default); behavioral; "
                        "verilator/cxxrtl: cycle-exact RTL")
    p.add_argument("--synth", metavar="TARGET",
                   help="add resource counts for an FPGA target and, where nextpnr places "
                        "and routes it (ecp5-85k, ice40-up5k), the Fmax and the latency "
                        "(one synthesis per config, cached; slow: minutes per config); "
                        "xilinx-7: Yosys counts, no Fmax")
    add_latency_options(p, target=False)      # --synth gives the clock per target
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes of the LocalCluster (default: one per core)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="use an existing Dask cluster instead of a LocalCluster")
    p.add_argument("-o", "--output", default="sweep.parquet", type=output_file,
                   metavar="S.parquet",
                   help="the table (S.csv and S.layers.parquet next to it); an existing one is "
                        "resumed (default: sweep.parquet)")
    p.add_argument("--plot", type=output_file, metavar="P.png",
                   help="Pareto plot as PNG: latency (else cycles) against LUTs and DSPs "
                        "(else peak MACs/cycle)")
    p.add_argument("--retries", type=int, default=2, metavar="N",
                   help="Dask retries of a point whose worker dies (default: 2)")
    p.set_defaults(func=run)


def _split(text):
    return [s.strip() for s in text.split(",") if s.strip()]


def run(args):
    from ...tools.pareto import best_points, format_layers
    from ...tools.sweep import sweep
    if args.synth:
        from ...boards.targets import get_target
        get_target(args.synth)          # an unknown target fails before any work
    result = sweep(_split(args.configs), _split(args.models), grid=args.grid,
                   engine=args.engine, synth=args.synth, fmax=args.fmax, host=args.host,
                   calibrate=args.calibrate,
                   workers=args.workers, scheduler=args.scheduler, output=args.output,
                   plot=args.plot, retries=args.retries)
    rows = result.rows
    print(f"{len(rows)} point(s) ({result.ran} run now), {len(result.failed)} failed, "
          f"{len(result.skipped)} config combination(s) skipped")
    for r in rows:
        if r["status"] == "ok":
            util = "-" if r["gemm_utilization"] is None else f"{100 * r['gemm_utilization']:.1f}%"
            check = {True: ", = interpreter", False: ", DIFFERS from the interpreter",
                     None: ""}[r["matches_interpreter"]]
            host = "" if r["host_us"] is None else f"  host {r['host_us']:>9,.1f} us"
            hw = "" if r["lut"] is None else f"  LUT {r['lut']:>6,} DSP {r['dsp']:>3}"
            lat = "" if r["fmax_mhz"] is None else f"  Fmax {r['fmax_mhz']:6.1f} MHz"
            if r["latency_us"] is not None:
                lat += f"  latency {r['latency_us']:>10,.1f} us"
            elif r["vta_us"] is not None:
                lat += f"  VTA {r['vta_us']:>10,.1f} us"
            print(f"  {r['config']:<36} {r['model']:<22} {r['cycles']:>12,} cycles  "
                  f"GEMM {util:>6}  DRAM {r['dram_bytes']:>11,} B{host}{hw}{lat}{check}")
        else:
            print(f"  {r['config']:<36} {r['model']:<22} FAILED: {r['error']}")
    for r in best_points(result.table):
        print(format_layers(result.layers, r))
    for kind, path in result.paths.items():
        print(f"wrote {path} ({kind})")
    return 1 if result.failed else 0
