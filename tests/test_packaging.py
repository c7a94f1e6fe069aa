"""Packaging: every package directory is in the build, and a non-editable install works.

An editable install finds a package directory that ``pyproject.toml`` forgot (the
source tree is on the path); a wheel does not. These tests catch that before a user
does: the first statically, the second by installing the tree (``pip install
--no-deps --no-build-isolation``, offline: setuptools and wheel come from the ``test``
extra) into a fresh venv that sees the running environment's packages, and importing
every subpackage from outside the checkout.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Top-level folders that are not part of the package (besides hidden ones such as .git,
#: .ci or a user's .venv).
NOT_PACKAGED = {"tests", "bench", "build", "dist"}


def _setuptools_table():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_dir(name: str, mapping: dict) -> Path:
    """The source directory of package ``name`` by setuptools' package-dir rule (the
    longest mapped prefix, the rest of the name as subfolders)."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in mapping:
            return ROOT / mapping[prefix] / Path(*parts[k:])
    return ROOT / Path(*parts)


def test_every_package_directory_is_listed():
    table = _setuptools_table()
    listed = {_package_dir(p, table["package-dir"]).resolve(): p for p in table["packages"]}
    on_disk = {p.parent.resolve() for p in ROOT.glob("*/**/__init__.py")
               if p.relative_to(ROOT).parts[0] not in NOT_PACKAGED
               and not p.relative_to(ROOT).parts[0].startswith(".")
               and "__pycache__" not in p.parts}
    missing = sorted(str(d.relative_to(ROOT)) for d in on_disk - set(listed))
    assert not missing, f"package directories missing from pyproject.toml packages: {missing}"
    absent = sorted(p for d, p in listed.items() if not (d / "__init__.py").is_file())
    assert not absent, f"listed packages without an __init__.py: {absent}"


_CHECK = """
import importlib, json, sys
names = json.loads(sys.argv[1])
site = sys.argv[2]
for name in names:
    module = importlib.import_module(name)
    assert module.__file__.startswith(site), (name, module.__file__)
from vtakit.hw import VTAConfig
from vtakit.sim import open_device
from vtakit.sim.rtl_build import HARNESS_DIR
assert (HARNESS_DIR / "vta_harness.h").is_file()
from vtakit.cli.main import main
assert main(["config", "show", "tiny"]) == 0
dev = open_device("behavioral", VTAConfig.preset("tiny"))
print("ok", len(names))
"""


def test_non_editable_install_imports_every_subpackage(tmp_path):
    # Build from a copy: an in-tree build would leave build/ and *.egg-info in the checkout.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", "tests", "bench"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The new venv sees the packages of the environment running the tests, the site
    # folders of its own sys.path included (setuptools and wheel from the test extra among
    # them). ``--system-site-packages`` would not do: run
    # from a venv, it exposes the base interpreter's site-packages, where a fresh machine
    # has neither wheel nor a setuptools recent enough to build.
    own = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    own |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    nested = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                             "['purelib'])"], capture_output=True, text=True, check=True
                            ).stdout.strip()
    (Path(nested) / "outer_env.pth").write_text("".join(f"{d}\n" for d in sorted(own)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_NO_INDEX"] = "1"            # offline: never reach for a package index
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", str(src)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True
                          ).stdout.strip()
    names = _setuptools_table()["packages"]
    proc = subprocess.run([str(python), "-c", _CHECK, json.dumps(names), site], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[-2:] == ["ok", str(len(names))]
    if shutil.which("vtakit", path=str(venv / "bin")) is None:
        pytest.fail("the vtakit console script was not installed")


_LAYERS = {
    # module imported: package prefixes it may load (besides itself and the root)
    "vtakit": (),
    "vtakit.hw.top": ("vtakit.hw",),
    "vtakit.runtime": ("vtakit.hw", "vtakit.runtime"),
    "vtakit.sim.behavioral": ("vtakit.hw", "vtakit.runtime", "vtakit.sim"),
    "vtakit.compiler": ("vtakit.hw", "vtakit.runtime", "vtakit.compiler"),
}


@pytest.mark.parametrize("module", _LAYERS)
def test_imports_follow_the_layers(module):
    """hw at the bottom; the runtime (and its device contract) never loads a simulator;
    backends are found by name when opened; ``import vtakit`` loads no subpackage."""
    code = (f"import sys, {module}\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('vtakit.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    allowed = _LAYERS[module]
    extra = [m for m in out if not m.startswith(allowed or ("vtakit.",)) or not allowed]
    assert extra == [], extra
