"""Speed of the compiled RTL backends: build times and simulated cycles per second.

For each preset and fast backend (``cxxrtl``, ``verilator``): the cold build time
(a fresh, temporary build cache), the warm build time (the same build found in the
cache: a device construction), and the simulation speed on the tiled
128 x 128 x 128 GEMM (golden fixture ``gemm_tiled``) and on the longest other
golden fixture, next to the behavioral model's wall time on the same programs.
Every run's final DRAM is checked against the fixture's expected DRAM.

Usage::

    python bench/rtl_speed.py [--presets default,tiny] [--backends cxxrtl,verilator]
                              [--warm-only] [--repeat 3] [--json FILE]

``--warm-only`` skips the cold builds and uses the user's build cache (the
builds are made there first if missing, and then reported as cold).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from vtakit.sim import open_device
from vtakit.sim.rtl_build import get_build
from vtakit.testing.fixtures import first_difference, load_fixtures

__all__ = ["main", "measure"]


@contextlib.contextmanager
def cache_dir(path):
    old = os.environ.get("VTAKIT_CACHE")
    os.environ["VTAKIT_CACHE"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("VTAKIT_CACHE", None)
        else:
            os.environ["VTAKIT_CACHE"] = old


def programs(preset):
    """The 128^3 tiled GEMM fixture and the longest other fixture of a preset."""
    fixtures = load_fixtures(preset)
    gemm = next(f for f in fixtures if f.name == "gemm_tiled")
    other = max((f for f in fixtures if f.name != "gemm_tiled"),
                key=lambda f: f.image.insn_count)
    return [gemm, other]


def timed_run(dev, fx, repeat):
    """Best wall and CPU (process) times of ``repeat`` runs; checks the final DRAM
    every time. CPU time is the fair figure on a shared machine."""
    best, best_cpu, cycles = float("inf"), float("inf"), -1
    for _ in range(repeat):
        dev.dram.load_image(fx.image.dram)
        start, start_cpu = time.perf_counter(), time.process_time()
        result = dev.run(fx.image.insn_addr, fx.image.insn_count)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
        diff = first_difference(dev.dram.data[:len(fx.expected)], fx.expected)
        if diff:
            raise AssertionError(f"{fx.id} on {dev.name}: {diff}")
        cycles = result.cycles
    return best, best_cpu, cycles


def measure(preset, backend, *, cold: bool, repeat: int) -> dict:
    row = {"preset": preset, "backend": backend}
    with contextlib.ExitStack() as stack:
        if cold:
            stack.enter_context(cache_dir(stack.enter_context(tempfile.TemporaryDirectory())))
        start = time.perf_counter()
        build = get_build(backend, preset)
        row["build_cold_s"] = time.perf_counter() - start if not build.cached else None
        row["build_stages_s"] = build.meta.get("stage_seconds", {})
        start = time.perf_counter()
        dev = open_device(backend, preset)
        row["build_warm_s"] = time.perf_counter() - start
        with dev:
            for fx in programs(preset):
                wall, cpu, cycles = timed_run(dev, fx, repeat)
                model_wall, model_cpu, _ = timed_run(open_device("behavioral", preset), fx, repeat)
                row[fx.name] = {"cycles": cycles, "wall_s": wall, "cpu_s": cpu,
                                "cycles_per_s": cycles / wall, "cycles_per_cpu_s": cycles / cpu,
                                "behavioral_wall_s": model_wall, "behavioral_cpu_s": model_cpu}
    return row


def _fmt_s(v):
    return "cached" if v is None else f"{v:.1f}"


def table(rows) -> str:
    head = (f"{'preset':8} {'backend':10} {'cold build s':>12} {'warm s':>7}  "
            f"{'program':16} {'cycles':>9} {'wall s':>8} {'Mcyc/s':>7} {'cpu s':>8} "
            f"{'Mcyc/cpu-s':>10} {'behav. s':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        progs = [k for k in r if isinstance(r[k], dict) and "cycles" in r[k]]
        for n, name in enumerate(progs):
            p = r[name]
            left = (f"{r['preset']:8} {r['backend']:10} {_fmt_s(r['build_cold_s']):>12} "
                    f"{r['build_warm_s']:7.2f}" if n == 0 else " " * 40)
            lines.append(f"{left}  {name:16} {p['cycles']:9d} {p['wall_s']:8.3f} "
                         f"{p['cycles_per_s'] / 1e6:7.3f} {p['cpu_s']:8.3f} "
                         f"{p['cycles_per_cpu_s'] / 1e6:10.3f} {p['behavioral_wall_s']:9.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="default,tiny")
    ap.add_argument("--backends", default="cxxrtl,verilator")
    ap.add_argument("--warm-only", action="store_true",
                    help="use the user's build cache instead of cold builds")
    ap.add_argument("--repeat", type=int, default=3, help="runs per program (best is kept)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    rows = []
    for preset in args.presets.split(","):
        for backend in args.backends.split(","):
            print(f"measuring {backend} on {preset} ...", file=sys.stderr, flush=True)
            rows.append(measure(preset, backend, cold=not args.warm_only, repeat=args.repeat))
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"cpus": os.cpu_count(), "loadavg": os.getloadavg(),
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
