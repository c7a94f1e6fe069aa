"""A machine without a C++ toolchain: the fast RTL backends say what to install, in one
line, before any work (no compiler traceback)."""

import subprocess
import sys

import numpy as np
import pytest

from vtakit.runtime.image import DramImage
from vtakit.sim.rtl_build import BuildError, get_build


@pytest.mark.parametrize("backend, missing", [("cxxrtl", "g\\+\\+"),
                                              ("verilator", "g\\+\\+ and make")])
def test_missing_compiler_is_one_clear_error(backend, missing, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # no g++, no make
    monkeypatch.setenv("VTAKIT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(BuildError, match=rf"^the {backend} backend compiles the RTL to C\+\+ "
                                         rf"and needs {missing} on PATH: install .*apt-get "
                                         r"install g\+\+ make.*--backend behavioral or pysim$"):
        get_build(backend, "tiny", progress=False)
    assert not (tmp_path / "cache").exists()           # checked before anything was built


def test_missing_compiler_in_the_cli(tmp_path):
    image = tmp_path / "prog.npz"
    DramImage(dram=np.zeros(4096, np.uint8), insn_addr=0, insn_count=0).save(image)
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path), "VTAKIT_CACHE": str(tmp_path / "c")}
    r = subprocess.run([sys.executable, "-m", "vtakit", "exec", str(image), "--config", "tiny",
                        "--backend", "verilator", "-o", str(tmp_path / "out.npz")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "needs g++ and make on PATH" in lines[0], r.stderr
