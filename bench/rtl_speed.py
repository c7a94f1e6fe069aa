"""Speed of the compiled RTL backends: build times and simulated cycles per second.

For each preset and fast backend (``cxxrtl``, ``verilator``): the cold build time
(a fresh, temporary build cache), the warm build time (the same build found in the
cache: a device construction), and the simulation speed on the tiled
128 x 128 x 128 GEMM (golden fixture ``gemm_tiled``) and on the longest other
golden fixture, next to the behavioral model's wall time on the same programs.
Every run's final DRAM is checked against the fixture's expected DRAM.

Usage::

    python bench/rtl_speed.py [--presets default,tiny] [--backends cxxrtl,verilator]
                              [--warm-only] [--repeat 3] [--baseline REV] [--resnet18]
                              [--json FILE]

``--warm-only`` skips the cold builds and uses the user's build cache (the
builds are made there first if missing, and then reported as cold).

``--baseline REV`` also builds each (preset, backend) at git revision ``REV`` (checked
out in a temporary worktree and imported from there in a subprocess; the build goes to
the user's cache) and runs both libraries in this process, alternately, on the same
programs: a second table gives the ratio of cycles per CPU-second (this tree over
``REV``) of the best runs, and the median and the 10th-90th percentiles of the
per-round ratios (its spread on a shared machine). Both run the same programs to the
same final DRAM; their cycle counts may differ when the design's timing changed since
``REV`` (e.g. the DRAM read arbiter's read-ahead limit), which is why the ratio is of
cycles per CPU-second and the table prints both counts. ``REV``'s library must have the
C API of ``sim/harness/vta_api.h``.

``--resnet18`` also runs ResNet-18 (224 x 224, random weights, as ``bench/resnet18.py``)
once on ``default`` with each backend (and ``REV``'s build), the same executable on
each, and prints wall and CPU times (outputs must be identical): 10-50 s per library
on a loaded 2-core machine, after about half a minute of calibration and compile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vtakit.sim import open_device
from vtakit.sim.rtl_build import Build, get_build
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


def timed_runs(devs, fx, repeat):
    """Run ``fx`` ``repeat`` times on each device, alternating between them round by
    round; checks the final DRAM every time. Per device: the wall and CPU (process)
    time of every run and the cycle count. CPU time is the fair figure on a shared
    machine."""
    out = [{"wall": [], "cpu": [], "cycles": -1} for _ in devs]
    for _ in range(repeat):
        for dev, o in zip(devs, out):
            dev.dram.load_image(fx.image.dram)
            start, start_cpu = time.perf_counter(), time.process_time()
            result = dev.run(fx.image.insn_addr, fx.image.insn_count)
            o["wall"].append(time.perf_counter() - start)
            o["cpu"].append(time.process_time() - start_cpu)
            diff = first_difference(dev.dram.data[:len(fx.expected)], fx.expected)
            if diff:
                raise AssertionError(f"{fx.id} on {dev.name}: {diff}")
            o["cycles"] = result.cycles
    return out


def _speed(o) -> dict:
    wall, cpu = min(o["wall"]), min(o["cpu"])
    return {"cycles": o["cycles"], "wall_s": wall, "cpu_s": cpu,
            "cycles_per_s": o["cycles"] / wall, "cycles_per_cpu_s": o["cycles"] / cpu}


def _ratio(new, base) -> dict:
    """Cycles per CPU-second of ``new`` over ``base``: of the best runs, and the median
    and 10th/90th percentiles of the per-round ratios."""
    work = new["cycles"] / base["cycles"]
    rounds = sorted(work * b / n for n, b in zip(new["cpu"], base["cpu"]))
    p10, p90 = np.percentile(rounds, [10, 90])
    return {"best": work * min(base["cpu"]) / min(new["cpu"]),
            "median": statistics.median(rounds), "p10": float(p10), "p90": float(p90)}


# Imports REV's package from its worktree (the package-dir map of its pyproject.toml),
# builds one library with REV's own code and prints its directory.
_BASELINE_BUILD = r"""
import importlib.util, json, sys, tomllib
from pathlib import Path
root = Path(sys.argv[1])
dirs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
class Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in dirs:
            d = root / dirs[name]
            return importlib.util.spec_from_file_location(
                name, d / "__init__.py", submodule_search_locations=[str(d)])
sys.meta_path.insert(0, Finder)
from vtakit.sim.rtl_build import get_build
build = get_build(sys.argv[2], sys.argv[3])
print(json.dumps({"path": str(build.path), "meta": build.meta}))
"""


@contextlib.contextmanager
def baseline_worktree(rev):
    """A temporary detached git worktree of this repository at ``rev``."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="rtl_speed-") as tmp:
        wt = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "-q", str(wt), rev],
                       check=True)
        try:
            yield wt
        finally:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(wt)],
                           check=False)


def baseline_build(worktree, backend, preset) -> Build:
    """The library of ``backend``/``preset`` built by the code of ``worktree``."""
    out = subprocess.run([sys.executable, "-c", _BASELINE_BUILD, str(worktree), backend, preset],
                         cwd=worktree.parent, check=True, stdout=subprocess.PIPE, text=True)
    info = json.loads(out.stdout.strip().splitlines()[-1])
    return Build(Path(info["path"]), True, info["meta"])


def measure(preset, backend, *, cold: bool, repeat: int, baseline: Build | None = None) -> dict:
    row = {"preset": preset, "backend": backend}
    with contextlib.ExitStack() as stack:
        if cold:
            stack.enter_context(cache_dir(stack.enter_context(tempfile.TemporaryDirectory())))
        start = time.perf_counter()
        build = get_build(backend, preset)
        row["build_cold_s"] = time.perf_counter() - start if not build.cached else None
        row["build_stages_s"] = build.meta.get("stage_seconds", {})
        start = time.perf_counter()
        dev = stack.enter_context(open_device(backend, preset))
        row["build_warm_s"] = time.perf_counter() - start
        devs = [dev]
        if baseline is not None:
            devs.append(stack.enter_context(open_device(backend, preset, build=baseline,
                                                        progress=False)))
            row["baseline"] = {}
        model = open_device("behavioral", preset)
        for fx in programs(preset):
            runs = timed_runs(devs, fx, repeat)
            model_run = _speed(timed_runs([model], fx, repeat)[0])
            row[fx.name] = {**_speed(runs[0]), "behavioral_wall_s": model_run["wall_s"],
                            "behavioral_cpu_s": model_run["cpu_s"]}
            if baseline is not None:
                row["baseline"][fx.name] = {**_speed(runs[1]), "ratio": _ratio(*runs)}
    return row


def resnet18_walls(devices: dict, size: int = 224, calibration: int = 2) -> dict:
    """Wall and CPU seconds of one ResNet-18 inference (the model and image of
    ``bench/resnet18.py``) on each of ``devices`` (name: zero-argument opener)."""
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.nn import resnet18
    from vtakit.compiler.quant.calibrate import calibrate
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)
              for _ in range(calibration + 1)]
    exe = compile_model(calibrate(resnet18(image_shape=(3, size, size)), images[:calibration]),
                        "default")
    out, first = {}, None
    for name, opener in devices.items():
        with opener() as dev:
            start, start_cpu = time.perf_counter(), time.process_time()
            y = np.asarray(exe.run(images[-1], device=dev))
            out[name] = {"wall_s": time.perf_counter() - start,
                         "cpu_s": time.process_time() - start_cpu}
        if first is None:
            first = y
        elif not np.array_equal(y, first):
            raise AssertionError(f"ResNet-18 on {name}: the output differs from the first device's")
    return out


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


def baseline_table(rows, rev) -> str:
    head = (f"{'preset':8} {'backend':10} {'program':16} {'cycles':>9} {'Mcyc/cpu-s':>10} "
            f"{rev[:10] + ' cycles':>17} {rev[:10] + ' Mcyc/cpu-s':>22} {'ratio best':>10} "
            f"{'ratio median [p10, p90]':>24}")
    lines = [head, "-" * len(head)]
    for r in rows:
        for name, b in r.get("baseline", {}).items():
            q = b["ratio"]
            lines.append(f"{r['preset']:8} {r['backend']:10} {name:16} {r[name]['cycles']:9d} "
                         f"{r[name]['cycles_per_cpu_s'] / 1e6:10.3f} {b['cycles']:17d} "
                         f"{b['cycles_per_cpu_s'] / 1e6:22.3f} {q['best']:10.2f} "
                         f"{q['median']:8.2f} [{q['p10']:.2f}, {q['p90']:.2f}]")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="default,tiny")
    ap.add_argument("--backends", default="cxxrtl,verilator")
    ap.add_argument("--warm-only", action="store_true",
                    help="use the user's build cache instead of cold builds")
    ap.add_argument("--repeat", type=int, default=3, help="runs per program (best is kept)")
    ap.add_argument("--baseline", metavar="REV",
                    help="also run the build of git revision REV, alternately, and print ratios")
    ap.add_argument("--resnet18", action="store_true",
                    help="also time one ResNet-18 inference on default (minutes per backend)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    presets, backends = args.presets.split(","), args.backends.split(",")
    rows, resnet = [], {}
    with contextlib.ExitStack() as stack:
        bases = {}
        if args.baseline:
            wt = stack.enter_context(baseline_worktree(args.baseline))
            need = {(p, b) for p in presets + (["default"] if args.resnet18 else [])
                    for b in backends}
            for preset, backend in sorted(need):
                print(f"building {backend} on {preset} at {args.baseline} ...", file=sys.stderr,
                      flush=True)
                bases[preset, backend] = baseline_build(wt, backend, preset)
        for preset in presets:
            for backend in backends:
                print(f"measuring {backend} on {preset} ...", file=sys.stderr, flush=True)
                rows.append(measure(preset, backend, cold=not args.warm_only, repeat=args.repeat,
                                    baseline=bases.get((preset, backend))))
        if args.resnet18:
            devices = {}
            for backend in backends:
                devices[backend] = lambda b=backend: open_device(b, "default")
                if args.baseline:
                    devices[f"{backend}@{args.baseline}"] = lambda b=backend: open_device(
                        b, "default", build=bases["default", b])
            print("ResNet-18 on default ...", file=sys.stderr, flush=True)
            resnet = resnet18_walls(devices)
    print(table(rows))
    if args.baseline:
        print()
        print(baseline_table(rows, args.baseline))
    for name, t in resnet.items():
        print(f"ResNet-18 224x224 on default, {name}: wall {t['wall_s']:.1f} s, "
              f"CPU {t['cpu_s']:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpus": os.cpu_count(), "loadavg": os.getloadavg(),
                                               "baseline": args.baseline, "rows": rows,
                                               "resnet18": resnet}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
