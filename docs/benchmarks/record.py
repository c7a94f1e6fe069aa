"""Run one ``bench/`` script and keep its JSON for the manual's benchmark pages.

Usage (from the repository root)::

    python docs/benchmarks/record.py NAME bench/models.py --backend behavioral --config tiny

runs ``python bench/models.py ... --json TMP`` and writes ``docs/benchmarks/data/NAME.json``:
the script, its arguments, the git revision (and whether the tree had local changes), the
machine (platform, CPU, cores, Python, load average), the date, the wall time and the
script's own JSON under ``"result"``. ``docs/_ext/vtakit_bench.py`` renders each file
as a page; nothing in the manual is a hand-copied figure.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def _git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False).stdout.strip()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    return {"system": f"{platform.system()} {platform.release()}",
            "cpu": cpu_model(), "cores": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or not argv[1].endswith(".py"):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    name, script, args = argv[0], argv[1], argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        start = time.perf_counter()
        subprocess.run([sys.executable, script, *args, "--json", str(out)], cwd=ROOT, check=True)
        wall = time.perf_counter() - start
        result = json.loads(out.read_text())
    record = {"script": script, "args": args,
              "revision": _git("rev-parse", "--short=12", "HEAD"),
              # local changes to the code measured (recorded results themselves excluded)
              "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".",
                                 ":(exclude)docs/benchmarks/data")),
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": machine(), "wall_s": round(wall, 1), "result": result}
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
