"""Build the simulated board of ``vtakit board-sim``: a board design's Verilog, verilated
with ``harness/board_sim.cc`` (the UART pins driven from a TCP socket) into one executable,
cached like the simulator libraries of :mod:`vtakit.sim.rtl_build`.

The design comes from the caller as a Verilog-text generator (the board designs live in
:mod:`vtakit.boards`, above this package); its key is the files that determine it, the
parameters, the harness, the flags and the tool versions.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Callable

from ..runtime.cpus import usable_cpus
from ..runtime.progress import Stages
from . import build_cache
from .rtl_build import (HARNESS_DIR, Build, _run, _sha, _verilator_env,
                        _verilator_root, cache_root, require_toolchain, toolchain_versions)

__all__ = ["get_board_sim", "BOARD_SIM_FLAGS", "BOARD_TOP"]

#: Module name of the board design in the generated Verilog.
BOARD_TOP = "board_top"
BOARD_SIM_FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
                   "-Wno-fatal", "-Wno-lint")
_HARNESS = "board_sim.cc"


def get_board_sim(name: str, generate: Callable[[], str], *, sources=(), params: dict,
                  cycles_per_bit: int, progress: bool = True) -> Build:
    """The cached executable of a simulated board (``Build.path / "board_sim"``), built
    first if needed.

    Parameters
    ----------
    name : str
        Short name, part of the cache directory.
    generate : callable
        Returns the design's Verilog (top module :data:`BOARD_TOP`).
    sources : sequence of path
        Files whose contents determine the Verilog (hashed into the key).
    params : dict
        Everything else that determines it (config, DRAM size, ...), JSON-ready.
    cycles_per_bit : int
        The UART bit time the harness drives and decodes.
    """
    require_toolchain("verilator")
    desc = {"kind": "board-sim", "params": params, "cycles_per_bit": cycles_per_bit,
            "sources": sorted(f"{Path(p).name}:{_sha(Path(p).read_bytes())[:16]}"
                              for p in sources),
            "harness": _sha((HARNESS_DIR / _HARNESS).read_bytes())[:16],
            "generator": _sha(Path(__file__).read_bytes())[:16],
            "flags": list(BOARD_SIM_FLAGS), "tools": toolchain_versions("verilator")}
    key = _sha(json.dumps(desc, sort_keys=True).encode())
    base = cache_root() / "board-sim"
    dest = base / f"{name}-{key[:16]}"

    def build(tmp):
        stages = Stages(f"building board-sim {name}", 2, enable=progress, heartbeat=15.0)
        stages.print(f"not built yet: a few minutes (first use only; cached in {base})")
        with stages.stage("elaborate + generate Verilog (Amaranth, Yosys)"):
            (tmp / f"{BOARD_TOP}.v").write_text(generate())
        root, env = _verilator_root(), _verilator_env()
        jobs = str(usable_cpus())
        shutil.copy(HARNESS_DIR / _HARNESS, tmp / _HARNESS)
        with stages.stage("verilate + compile (Verilator, g++)"):
            _run([str(root / "bin" / "verilator"), "--cc", "--exe", "--build", "-j", jobs,
                  f"{BOARD_TOP}.v", _HARNESS, "--top-module", BOARD_TOP, "-Mdir", "obj",
                  "-o", "board_sim", *BOARD_SIM_FLAGS,
                  "-CFLAGS", f"-O2 -DCPB={int(cycles_per_bit)}"],
                 cwd=tmp, env=env, stages=stages, what="verilator (board-sim)")
        shutil.move(str(tmp / "obj" / "board_sim"), tmp / "board_sim")
        shutil.rmtree(tmp / "obj")
        return {"key": key, **desc, "stage_seconds": stages.seconds,
                "built": time.strftime("%Y-%m-%d %H:%M:%S")}

    return Build(dest, *build_cache.build_once(dest, "board_sim", build, root=cache_root()))
