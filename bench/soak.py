"""Soak run of the differential fuzzer: fuzzed programs on every backend, many configs.

Usage: ``python bench/soak.py [--instructions 1000000] [--configs tiny,default,4x8]
[--backends behavioral,cxxrtl,verilator] [--seed S] [--json FILE]``

Runs batches of :func:`vtakit.sim.fuzz.fuzz` per config until the config has run its
share of ``--instructions`` (every program on every backend), then prints one row per
config: programs, instructions, programs built to fault, mismatches (expected 0),
wall time and instructions per second (all backends together). Mismatching programs
are shrunk and saved under ``--out-dir``. Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import time

from vtakit.sim.fuzz import format_summary, fuzz

BATCH = 100


def soak(config, backends, target, seed, out_dir):
    row = {"config": config, "programs": 0, "instructions": 0, "faulting": 0,
           "mismatches": 0, "skipped": 0, "wall": 0.0, "reproducers": []}
    batch = 0
    t0 = time.perf_counter()
    while row["instructions"] < target:
        r = fuzz(config, backends, BATCH, seed * 100_000 + batch, out_dir=out_dir,
                 max_failures=BATCH, progress=False)
        batch += 1
        row["programs"] += r.programs
        row["instructions"] += r.instructions
        row["faulting"] += r.faulting
        row["skipped"] += r.skipped_racy
        row["mismatches"] += len(r.mismatches)
        row["reproducers"] += [m.command for m in r.mismatches]
        if r.mismatches:
            print(format_summary(r), flush=True)
    row["wall"] = time.perf_counter() - t0
    row["insn_per_s"] = row["instructions"] / row["wall"]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructions", type=int, default=1_000_000)
    ap.add_argument("--configs", default="tiny,default,4x8")
    ap.add_argument("--backends", default="behavioral,cxxrtl,verilator")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out-dir", default="vtakit-soak")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    configs = args.configs.split(",")
    backends = args.backends.split(",")
    share = -(-args.instructions // len(configs))
    rows = [soak(c, backends, share, args.seed, args.out_dir) for c in configs]
    print(f"| config | programs | instructions | built to fault | mismatches | wall (s) "
          f"| instructions/s ({len(backends)} backends) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['config']} | {r['programs']:,} | {r['instructions']:,} | {r['faulting']:,} "
              f"| {r['mismatches']} | {r['wall']:.0f} | {r['insn_per_s']:,.0f} |")
    total = sum(r["instructions"] for r in rows)
    print(f"total: {total:,} instructions, {sum(r['mismatches'] for r in rows)} mismatches, "
          f"{sum(r['skipped'] for r in rows)} schedule-dependent programs skipped")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backends": backends, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
