"""``vtakit compare IMAGE --backends A,B[,...]``: run one DRAM image on several backends.

The first backend is the reference; every other backend's outcome is compared with
it by the rule of :mod:`vtakit.runtime.compare` (the fuzzer's and layer compare's
too). The final DRAM is compared byte for byte; the report gives the first
differing address, the STORE instruction whose DRAM range covers it (the last one in
the stream, as that one wrote the byte last), the row and byte within that store,
and a short hex window of the expected and actual bytes. The counters every backend
reports are compared as well.

A backend whose run faults (a :class:`~vtakit.runtime.device.DeviceError` of the run)
is an outcome, not an error of the command: one backend faulting where the reference
completes (or the other way round) is a difference, and so are two faults that
differ in error code, unit or instruction index (the fault's attributes; messages
are never compared). The same fault on every backend is agreement.

Exit status: 0 when all backends agree (all complete with equal DRAM, or all
fault identically), 1 when any differs, 2 on an error (one line on stderr).
"""

from __future__ import annotations

from ...runtime.compare import compare_outcomes, format_comparison, run_outcomes
from ...runtime.device import backend_options, route_options
from ...runtime.image import DramImage
from ..main import UsageError
from .exec import CONFIG_HELP, image_config, parse_backends, parse_option

__all__ = ["register", "run"]


def register(sub):
    p = sub.add_parser("compare", help="run a DRAM image (.npz) or a compiled model (.vtax) on "
                                       "several backends and compare them byte for byte")
    p.add_argument("image", help="DRAM image .npz (dram, insn_addr, insn_count), or a compiled "
                                 "model .vtax (compared layer by layer)")
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]X.npy",
                   help="with a .vtax: an input array, as for vtakit run; repeatable")
    p.add_argument("--config", metavar="NAME|FILE", help=CONFIG_HELP)
    p.add_argument("--backends", required=True, metavar="A,B[,...]",
                   help="two or more backends; the first is the reference "
                        "(e.g. behavioral,cxxrtl,verilator)")
    p.add_argument("--token-depth", type=int, metavar="N",
                   help="capacity of each dependency-token queue (every backend)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="with a .vtax: replay the kernels on N Dask worker processes "
                        "(vtakit.tools.shard)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="with a .vtax: replay the kernels on an existing Dask cluster")
    p.add_argument("-O", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   type=parse_option, help="backend option, passed to every backend that "
                                           "takes it (e.g. -O url=socket://127.0.0.1:7777 for "
                                           "board); repeatable")
    p.set_defaults(func=run)


def run(args):
    backends = parse_backends(args.backends)
    with backend_options(route_options(backends, dict(args.options))):
        return _run(args, backends)


def _run(args, backends):
    if str(args.image).endswith(".vtax"):
        return _run_model(args, backends)
    if args.input or args.workers or args.scheduler:
        raise UsageError("--input, --workers and --scheduler are for a compiled model (.vtax), "
                         "not a DRAM image")
    image = DramImage.load(args.image)
    config = image_config(args.config, image, args.image)
    options = {} if args.token_depth is None else {"token_depth": args.token_depth}
    outcomes = run_outcomes(image, config, backends, **options)
    for name, out in outcomes.items():
        wall = f"wall {out.wall:.3f} s"
        if out.fault is not None:
            print(f"{name}: FAULT ({wall}): {out.fault.message}")
        else:
            cycles = out.record.cycles
            print(f"{name}: cycles {'n/a' if cycles < 0 else cycles}, {wall}")
    ref = outcomes[backends[0]]
    comparisons = [compare_outcomes(ref, outcomes[name]) for name in backends[1:]]
    for c in comparisons:
        print(format_comparison(c, image, config))
    status = 0 if all(c.equal for c in comparisons) else 1
    if status == 0 and ref.fault is not None:
        print(f"all backends fault identically: {ref.fault.summary()}")
    return status


def _run_model(args, backends):
    # A .vtax: every layer's output compared (vtakit.runtime.layer_compare).
    from pathlib import Path

    from ...runtime.executable import load, read_inputs
    from ...runtime.layer_compare import compare_layers, format_comparison as format_layers
    exe = load(args.image, config=args.config)
    inputs = read_inputs(exe, args.input)
    if "board" in backends:     # another config or a model too big: refused before any write
        from ...boards.board_device import check_model_fits
        check_model_fits(exe)
    if args.workers or args.scheduler:
        from ...tools.shard import compare_sharded, format_sharded
        result = compare_sharded(exe, inputs, backends, workers=args.workers,
                                 scheduler=args.scheduler, stem=Path(args.image).stem)
        print(format_sharded(result))
        return 0 if result.equal else 1
    result = compare_layers(exe, inputs, backends, stem=Path(args.image).stem)
    print(format_layers(result))
    return 0 if result.equal else 1
