"""``vtakit compile MODEL --config C -o M.vtax [--report]``: compile a model file."""

from __future__ import annotations

import sys
import time

from ..checks import output_file

__all__ = ["register", "run"]


def register(sub):
    p = sub.add_parser("compile", help="compile a model (.tflite, .onnx) to an executable (.vtax)")
    p.add_argument("model", help="model file (.tflite or .onnx)")
    p.add_argument("--config", default="default", metavar="NAME|FILE",
                   help="hardware config: preset name or vta_config.json (default: default)")
    p.add_argument("-o", "--output", required=True, type=output_file, metavar="MODEL.vtax",
                   help="the executable to write")
    p.add_argument("--calibrate", metavar="SAMPLES.npy",
                   help="quantize a float model to int8 from representative inputs: an array "
                        "of shape (N, *input shape), the model's batch dimension included")
    p.add_argument("--calibrate-method", choices=("minmax", "percentile", "entropy"),
                   default="minmax",
                   help="with --calibrate: how each activation's range is chosen from the "
                        "samples (default: minmax)")
    p.add_argument("--symmetric", action="store_true",
                   help="with --calibrate: zero points 0 everywhere (one-signed tensors lose "
                        "a bit of resolution, but padded convolutions need no border "
                        "correction on VTA: fewer cycles)")
    p.add_argument("--accuracy", action="store_true",
                   help="with --calibrate: run the float model and the calibrated one on the "
                        "samples and print, per layer, SQNR and cosine against float, the "
                        "scale and range chosen, marking the layers that lose the most")
    p.add_argument("--report", action="store_true",
                   help="print every layer: where it runs and why, tiling, predicted cycles, "
                        "DRAM bytes")
    p.set_defaults(func=run)


def _calibrate_options(args) -> dict:
    from ...compiler.build_model import ModelError
    options = {"method": args.calibrate_method, "asymmetric": not args.symmetric}
    if args.calibrate is None and (args.symmetric or args.calibrate_method != "minmax"):
        raise ModelError(f"{args.model}: --calibrate-method and --symmetric choose how a float "
                         "model is calibrated; give the samples with --calibrate SAMPLES.npy")
    return options


def run(args):
    from ...compiler.build_model import compile_model, format_report
    options = _calibrate_options(args)
    if args.accuracy:
        _print_accuracy(args, options)
    records, notes = [], []
    start = time.perf_counter()
    exe = compile_model(args.model, args.config, calibrate=args.calibrate, report=records,
                        calibrate_options=options, notes=notes)
    path = exe.save(args.output)
    wall = time.perf_counter() - start
    if args.report:
        for note in notes:
            print(f"import: {note}")
        print(format_report(records))
        plan = exe.dram_plan()
        print(f"device DRAM: weights {plan['weights']:,} B resident + arena {plan['arena']:,} B "
              f"({plan['device_tensors']} tensor(s) kept on the device between layers) + "
              f"staging {plan['staging']:,} B = peak {exe.peak_dram_bytes:,} B; host arena "
              f"{exe.peak_host_bytes:,} B")
    on_vta = sum(r.where != "host" for r in records)
    print(f"{args.model}: {on_vta} layer(s) on VTA, {len(records) - on_vta} host "
          f"primitive(s), peak device DRAM {exe.peak_dram_bytes:,} bytes, compiled in "
          f"{wall:.2f} s -> {path}")
    floats = [i for i in exe.inputs if str(i.get("dtype", "")).startswith("float")]
    if not on_vta and floats and not args.calibrate:
        print(f"hint: the model is float (input {floats[0]['name']!r}: {floats[0]['dtype']}), so "
              "every layer runs on the host; --calibrate SAMPLES.npy quantizes it to int8 "
              "for VTA", file=sys.stderr)


def _print_accuracy(args, options):
    from ...compiler.build_model import ModelError, load_model, load_samples
    from ...compiler.quant.accuracy import accuracy_report
    if args.calibrate is None:
        raise ModelError(f"{args.model}: --accuracy compares the float model with its "
                         "calibrated int8 version; give the samples with --calibrate SAMPLES.npy")
    print(accuracy_report(load_model(args.model), load_samples(args.calibrate), **options)
          .format())
