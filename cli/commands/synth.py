"""``vtakit synth --config C --target T``: resources and Fmax of the VTA on an FPGA (open tools).

Thin: the flow is :func:`vtakit.boards.synth_config`.
"""

from __future__ import annotations

from pathlib import Path

from ..checks import output_file
from ..main import UsageError

__all__ = ["register", "run"]


def register(sub):
    from ...boards.targets import TARGETS
    p = sub.add_parser("synth", help="synthesize (and place and route) the VTA for an FPGA: "
                                     "resources and Fmax")
    p.add_argument("--config", default="tiny", metavar="NAME|FILE",
                   help="hardware config: preset name or JSON file (default: tiny)")
    p.add_argument("--target", required=True, choices=sorted(TARGETS),
                   help="FPGA: ECP5-85F and iCE40-UP5K are placed and routed (nextpnr); "
                        "xilinx-7 (Zynq-7020) is a Yosys estimate")
    p.add_argument("--no-pnr", action="store_true", help="stop after Yosys (no Fmax)")
    p.add_argument("--freq", type=float, metavar="MHZ", help="clock target of nextpnr")
    p.add_argument("--seed", type=int, default=1, help="nextpnr placer seed (default: 1)")
    p.add_argument("--dsp-budget", type=int, metavar="N",
                   help="GEMM products built as hard multipliers, the rest in LUTs (default: "
                        "all that fit the target beside the other multipliers)")
    p.add_argument("--json", type=output_file, metavar="FILE",
                   help="also write the report as JSON")
    p.add_argument("--workdir", metavar="DIR", help="keep netlist, reports and tool logs in DIR")
    p.add_argument("--verbose", action="store_true",
                   help="stream the tools' logs (Yosys, nextpnr) to stderr as they work")
    p.set_defaults(func=run)


def run(args):
    from ...boards import format_table, reports_to_json, synth_config
    from ...boards.report import format_paths
    if args.dsp_budget is not None and args.dsp_budget < 0:
        raise UsageError(f"--dsp-budget {args.dsp_budget}: a number of multipliers, 0 or more")
    report = synth_config(args.config, args.target, place_and_route=not args.no_pnr,
                          freq_mhz=args.freq, seed=args.seed, workdir=args.workdir,
                          dsp_budget=args.dsp_budget, verbose=args.verbose)
    print(format_table([report]))
    if report.critical_paths:
        print(format_paths(report))
    if report.fmax_mhz is not None and args.dsp_budget is None:
        # the clock of `vtakit run --profile --target T` (a report with a DSP budget of
        # its own is not the config's default build, so it is not cached)
        from ...tools.latency import store_report
        print(f"cached for latency (vtakit run --profile --target {args.target}): "
              f"{store_report(args.config, report)}")
    if args.json:
        Path(args.json).write_text(reports_to_json([report]))
    if not report.fits:
        raise UsageError(report.overflow_message())
    return 0
