"""``vtakit demo``: the digits CNN quantized, compiled and run on VTA (behavioral and RTL).

The work is :func:`vtakit.tools.demo.run_demo`; this module only parses options
and prints. Exit status 0 when the acceptance criteria hold (int8 accuracy within
1 point of float, RTL predictions identical to the behavioral ones), 1 otherwise.
"""

from __future__ import annotations

from ..checks import add_latency_options

__all__ = ["register", "run"]


def register(sub):
    p = sub.add_parser("demo", help="compile the shipped digits CNN for VTA and run it on the "
                                    "behavioral model and an RTL simulator")
    p.add_argument("--backend", default="verilator",
                   help="backend of the RTL subset: verilator, cxxrtl, pysim or behavioral "
                        "(default: verilator, the fastest)")
    p.add_argument("--config", default="default", metavar="NAME|FILE",
                   help="hardware config: preset name or vta_config.json (default: default)")
    p.add_argument("--count", type=int, default=20, metavar="N",
                   help="test images run on the RTL backend (default: 20; 0 skips it)")
    add_latency_options(p)
    p.set_defaults(func=run)


def run(args):
    from ...tools.demo import format_demo, run_demo
    from ..main import UsageError
    if args.fmax is not None and args.target is not None:
        raise UsageError("give the clock once: --fmax MHZ or --target FPGA")
    result = run_demo(args.config, args.backend, args.count, fmax=args.fmax,
                      target=args.target, host=args.host)
    print(format_demo(result))
    return 0 if result.ok else 1
