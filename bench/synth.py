"""Resources and Fmax of VTA configs on the open-source FPGA targets.

    python bench/synth.py                              # tiny, mid, default on every target
    python bench/synth.py --configs tiny --targets ecp5-85k --json out.json
    python bench/synth.py --no-pnr                     # Yosys only (minutes, not hours)
    python bench/synth.py --configs tiny,tiny+requant --targets ecp5-85k
    python bench/synth.py --configs mid --targets ecp5-85k --freq 50 --pnr-args='--router router2'

Prints the revision and machine measured on, the table of
:func:`vtakit.boards.format_table` and each placed design's critical paths; ``--json
FILE`` writes every report (updated after each run, so a long bench can be watched)
plus the revision and machine. ``mid`` is a 1x16 GEMM with buffers a quarter of
default's. Place and route of a large config takes tens of minutes on two cores.
"""

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from vtakit.boards import TARGETS, SynthReport, format_table, reports_to_json, synth_config
from vtakit.boards.report import format_paths
from vtakit.hw.config import VTAConfig, config_from_spec

#: A mid-size config: default's 16x16 GEMM with smaller buffers.
MID = VTAConfig.preset("default").replace(log_uop_buff_size=13, log_inp_buff_size=13,
                                          log_wgt_buff_size=16, log_acc_buff_size=15)


def measured_on() -> dict:
    """The source revision (``git describe``, ``-dirty`` with local edits) and the machine."""
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=root,
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown"
    return {"revision": rev, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                                       f"{platform.system()} {platform.release()}"}


def _nextpnr_note(where: dict) -> str:
    """``"; nextpnr --freq 40 --seed 3 --router router2"`` for a non-default run, else ``""``."""
    if "nextpnr" not in where:
        return ""
    n = where["nextpnr"]
    freq = "" if n["freq_mhz"] is None else f" --freq {n['freq_mhz']:g}"
    return f"; nextpnr{freq} --seed {n['seed']}" + "".join(f" {shlex.quote(a)}" for a in n["args"])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="tiny,mid,default",
                   help="comma-separated presets or JSON files ('mid': see the module doc; "
                        "NAME+EXT adds an ISA extension, e.g. tiny+requant)")
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--no-pnr", action="store_true", help="stop after Yosys (no Fmax)")
    p.add_argument("--freq", type=float, metavar="MHZ",
                   help="nextpnr's clock target (default: the family's, 100 MHz on the ECP5); "
                        "a target near the reachable Fmax spends less effort on timing")
    p.add_argument("--seed", type=int, default=1, help="nextpnr placer seed (default 1)")
    p.add_argument("--pnr-args", default="", metavar="ARGS",
                   help="extra nextpnr arguments, one string (e.g. '--router router2')")
    p.add_argument("--json", metavar="FILE", help="write the reports as JSON")
    p.add_argument("--workdir", metavar="DIR", help="keep netlists and logs under DIR")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--from-json", nargs="+", metavar="FILE",
                   help="print the table of earlier --json files instead of running")
    args = p.parse_args(argv)
    if args.from_json:
        loaded = [json.loads(Path(f).read_text()) for f in args.from_json]
        for data in loaded:
            if isinstance(data, dict):
                print(f"revision {data['revision']}; machine {data['machine']}")
        rows = [(SynthReport.from_dict(r), data.get("revision", "?") if isinstance(data, dict)
                 else "?") for data in loaded
                for r in (data["reports"] if isinstance(data, dict) else data)]
        # Files of more than one revision: each row says which it was measured on.
        revs = [rev for _, rev in rows] if len({rev for _, rev in rows}) > 1 else None
        print(format_table([r for r, _ in rows], markdown=args.markdown, revisions=revs))
        return
    where = measured_on()
    if args.freq is not None or args.seed != 1 or args.pnr_args:
        # Recorded beside the revision: a non-default nextpnr run is not the kit's figure.
        where["nextpnr"] = {"freq_mhz": args.freq, "seed": args.seed,
                            "args": shlex.split(args.pnr_args)}
    print(f"revision {where['revision']}; machine {where['machine']}"
          + _nextpnr_note(where), file=sys.stderr)
    reports = []
    for spec in args.configs.split(","):
        config = config_from_spec(spec, {"mid": MID})
        for target in args.targets.split(","):
            t = time.monotonic()
            work = Path(args.workdir) / f"{config.name}-{target}" if args.workdir else None
            r = synth_config(config, target, place_and_route=not args.no_pnr, workdir=work,
                             freq_mhz=args.freq, seed=args.seed,
                             pnr_args=tuple(shlex.split(args.pnr_args)))
            reports.append(r)
            print(f"{config.name} on {target}: {time.monotonic() - t:.0f} s", file=sys.stderr)
            if args.json:
                data = {**where, "reports": json.loads(reports_to_json(reports))}
                Path(args.json).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"revision {where['revision']}; machine {where['machine']}"
          + _nextpnr_note(where))
    print(format_table(reports, markdown=args.markdown))
    for r in reports:
        if r.critical_paths:
            print(f"{r.design} on {r.target}:\n" + format_paths(r))
        if not r.fits:
            print(r.overflow_message())


if __name__ == "__main__":
    main()
