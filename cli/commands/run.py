"""``vtakit run MODEL.vtax``: run a compiled model and save its outputs."""

from __future__ import annotations

import time

import numpy as np

from ...runtime.device import backend_options, check_backend, open_device, route_options
from ...runtime.executable import load, read_inputs
from ...runtime.layer_vcd import VCD_BACKENDS, write_layer_vcd
from ...runtime.recorder import LayerRecorder
from ...runtime.image import npz_path
from ..checks import add_latency_options, output_file
from ..main import UsageError
from .exec import parse_option

__all__ = ["register", "run"]


def register(sub):
    p = sub.add_parser("run", help="run a compiled model (.vtax) and save its outputs (.npz)")
    p.add_argument("model", help="compiled model (.vtax)")
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]X.npy",
                   help="an input array (.npy, in input order or by name), or a .npz of "
                        "arrays named like the inputs; repeatable")
    p.add_argument("--backend", default="behavioral",
                   help="device of the VTA kernels: behavioral, pysim, cxxrtl, verilator, "
                        "netlist, board (with -O port=DEV or -O url=socket://HOST:PORT) "
                        "(default: behavioral)")
    p.add_argument("--config", metavar="NAME|FILE",
                   help="the hardware expected (default: the config the model records)")
    p.add_argument("-o", "--output", required=True, type=output_file, metavar="OUT.npz",
                   help="one array per model output, by output name (.npz is appended if "
                        "missing)")
    p.add_argument("--profile", action="store_true",
                   help="print a per-layer table: engine (VTA/host), cycles, predicted "
                        "cycles, roofline (binding bound, cycles, cycles over roofline), "
                        "GEMM utilization, DRAM bytes, wall time, and VTA us (with --fmax "
                        "or --target), host us and total us")
    add_latency_options(p, "--profile: ")
    p.add_argument("--trace", type=output_file, metavar="FILE.json",
                   help="write the layer timeline as Chrome/Perfetto trace JSON "
                        "(vtakit plot trace FILE -o timeline.png draws it)")
    p.add_argument("--vcd", type=output_file, metavar="FILE.vcd",
                   help="write a waveform of one layer (--vcd-layer N; pysim, cxxrtl or "
                        "verilator): the layer's kernel is run again on a traced device")
    p.add_argument("--vcd-layer", type=int, metavar="N",
                   help="the layer of --vcd (its # in the --profile table)")
    p.add_argument("-O", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   type=parse_option, help="backend option (as for vtakit exec), e.g. "
                                           "-O url=socket://127.0.0.1:7777; repeatable")
    p.set_defaults(func=run)


def run(args):
    check_backend(args.backend)
    with backend_options(route_options([args.backend], dict(args.options))):
        return _run(args)


def _run(args):
    exe = load(args.model, config=args.config)
    if args.backend == "board":    # another config or a model too big: refused before writes
        from ...boards.board_device import check_model_fits
        check_model_fits(exe)
    inputs = read_inputs(exe, args.input)
    if (args.vcd is None) != (args.vcd_layer is None):
        raise UsageError("--vcd FILE and --vcd-layer N go together")
    if args.vcd is not None and args.backend not in VCD_BACKENDS:
        raise UsageError(f"--vcd: backend {args.backend!r} writes no waveform; use "
                         f"--backend {'|'.join(VCD_BACKENDS)}")
    fmax = source = host = None
    if args.fmax is not None or args.target is not None or args.host != "measured":
        if not args.profile:
            raise UsageError("--fmax, --target and --host go with --profile")
        if args.fmax is not None and args.target is not None:
            raise UsageError("give the clock once: --fmax MHZ or --target FPGA")
        from ...tools.latency import fmax_mhz, load_host
        if args.target is not None:
            from ...boards.targets import get_target
            get_target(args.target)         # an unknown target fails with the known ones
        fmax, source = fmax_mhz(exe.config, args.target, args.fmax)
        host = load_host(args.host)
    start = time.perf_counter()
    dev = rec = None
    if args.vcd:
        # This recorder keeps layer N's kernel images for the replay; the profile's
        # recorder (if any) nests inside it.
        dev = open_device(args.backend, exe.config)
        rec = LayerRecorder(dev, keep_images={args.vcd_layer}, keep_outputs=False)
    try:
        if args.profile or args.trace:
            from ...tools.profile import format_profile, profile_model
            outputs, rows = profile_model(exe, inputs, args.backend, device=dev,
                                          hook=rec.hook if rec else None)
        else:
            outputs = exe.run_named(inputs, backend=args.backend, device=dev,
                                    hook=rec.hook if rec else None)
    finally:
        if dev is not None:
            rec.close()
            dev.close()
    wall = time.perf_counter() - start
    if args.profile:
        print(format_profile(rows, args.backend, fmax_mhz=fmax, host=host, fmax_source=source))
    if args.vcd:
        vcd, cycles = write_layer_vcd(rec.layers, args.vcd_layer, args.backend, exe.config,
                                      args.vcd)
        layer = rec.layers[args.vcd_layer]
        print(f"layer #{args.vcd_layer} {layer.name}: waveform ({cycles:,} cycles) -> {vcd}")
    if args.trace:
        from ...tools.trace import write_trace
        print(f"layer timeline -> {write_trace(rows, args.trace)}")
    path = npz_path(args.output)
    np.savez(path, **outputs)
    print(f"{args.backend}: {len(outputs)} output(s) ({', '.join(outputs)}), wall {wall:.3f} s "
          f"-> {path}")
