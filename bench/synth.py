"""Resources and Fmax of VTA configs on the open-source FPGA targets.

    python bench/synth.py                              # tiny, mid, default on every target
    python bench/synth.py --configs tiny --targets ecp5-85k --json out.json
    python bench/synth.py --no-pnr                     # Yosys only (minutes, not hours)

Prints the table of :func:`vtakit.boards.format_table`; ``--json FILE`` writes
every report (updated after each run, so a long bench can be watched). ``mid``
is a 1x16 GEMM with buffers a quarter of default's. Place and route of a
large config takes tens of minutes on two cores.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from vtakit.boards import TARGETS, SynthReport, format_table, reports_to_json, synth_config
from vtakit.hw.config import VTAConfig, load_config

#: A mid-size config: default's 16x16 GEMM with smaller buffers.
MID = VTAConfig.preset("default").replace(log_uop_buff_size=13, log_inp_buff_size=13,
                                          log_wgt_buff_size=16, log_acc_buff_size=15)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="tiny,mid,default",
                   help="comma-separated presets or JSON files ('mid': see the module doc)")
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--no-pnr", action="store_true", help="stop after Yosys (no Fmax)")
    p.add_argument("--json", metavar="FILE", help="write the reports as JSON")
    p.add_argument("--workdir", metavar="DIR", help="keep netlists and logs under DIR")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--from-json", nargs="+", metavar="FILE",
                   help="print the table of earlier --json files instead of running")
    args = p.parse_args(argv)
    if args.from_json:
        reports = [SynthReport.from_dict(r) for f in args.from_json
                   for r in json.loads(Path(f).read_text())]
        print(format_table(reports, markdown=args.markdown))
        return
    reports = []
    for spec in args.configs.split(","):
        config = MID if spec == "mid" else load_config(spec)
        for target in args.targets.split(","):
            t = time.monotonic()
            work = Path(args.workdir) / f"{config.name}-{target}" if args.workdir else None
            r = synth_config(config, target, place_and_route=not args.no_pnr, workdir=work)
            reports.append(r)
            print(f"{config.name} on {target}: {time.monotonic() - t:.0f} s", file=sys.stderr)
            if args.json:
                Path(args.json).write_text(reports_to_json(reports))
    print(format_table(reports, markdown=args.markdown))
    for r in reports:
        if not r.fits:
            print(r.overflow_message())


if __name__ == "__main__":
    main()
