"""Imports point down: which top-level package may import which (as tests/test_packaging.py
pins the package list). Every import counts, including those inside functions; the
root package ``vtakit`` (its ``__version__``) may be imported from anywhere.

The layers, bottom up: hw; runtime; sim (and vtakit.testing, which lives in
sim/testing); boards beside them over hw (and the runtime's progress lines). The
compiler in three parts: the operator library ``compiler.ops`` over hw and runtime
only; the graph compiler (``compiler.ir``, passes, quant, frontend, codegen, the build
entry), whose IR imports nothing of the compiler but itself; the VTA lowering
``compiler.vta`` between them (graph IR onto the operator library). Tools (demo,
profiles, traces, sweeps, sharded runs) over all of these; the command line on top.
A compiler module's layer is ``compiler.<its subpackage>`` for ``ops``, ``vta`` and
``ir``, else ``compiler``.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Source folder -> the import name pyproject.toml maps it to.
FOLDERS = {"hw": "vtakit.hw", "sim": "vtakit.sim", "runtime": "vtakit.runtime",
           "compiler": "vtakit.compiler", "boards": "vtakit.boards", "cli": "vtakit.cli",
           "tools": "vtakit.tools", "vtakit": "vtakit"}

#: Package -> the vtakit packages its modules may import (itself included).
ALLOWED = {
    "hw": {"hw"},
    "runtime": {"hw", "runtime"},
    "sim": {"hw", "runtime", "sim", "testing"},
    "testing": {"hw", "runtime", "sim", "testing"},
    "boards": {"hw", "runtime", "boards"},
    "compiler.ops": {"hw", "runtime", "compiler.ops"},
    "compiler.ir": {"hw", "runtime", "compiler.ir"},
    "compiler.vta": {"hw", "runtime", "compiler", "compiler.ir", "compiler.ops", "compiler.vta"},
    "compiler": {"hw", "runtime", "compiler", "compiler.ir", "compiler.ops", "compiler.vta"},
    "tools": {"hw", "runtime", "sim", "testing", "boards", "compiler", "compiler.ir",
              "compiler.ops", "compiler.vta", "tools"},
    "cli": {"hw", "runtime", "sim", "testing", "boards", "compiler", "compiler.ir",
            "compiler.ops", "compiler.vta", "tools", "cli"},
}


def layer_of(module: str) -> str:
    """The ALLOWED key of a dotted module name (``vtakit`` for the root package)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "vtakit"
    if parts[1] == "compiler" and len(parts) > 2 and f"compiler.{parts[2]}" in ALLOWED:
        return f"compiler.{parts[2]}"
    return parts[1]


def module_name(root: Path, folder: str, path: Path) -> tuple[str, bool]:
    """The dotted name of a source file and whether it is a package ``__init__``."""
    parts = list(path.relative_to(root / folder).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    if folder == "sim" and parts[:1] == ["testing"]:
        return ".".join(["vtakit.testing", *parts[1:]]), is_package
    return ".".join([FOLDERS[folder], *parts]), is_package


def imported_names(source: str, module: str, is_package: bool) -> list[str]:
    """Absolute names of every module an import statement of ``source`` names."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                names.append(".".join(base + ([node.module] if node.module else [])))
            else:
                names.append(node.module or "")
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def violations(root: Path = ROOT) -> list[str]:
    """``"importer -> imported"`` for every import the ALLOWED table forbids."""
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            module, is_package = module_name(root, folder, path)
            layer = layer_of(module)
            if layer not in ALLOWED:      # the root package and vtakit.__main__
                continue
            for name in imported_names(path.read_text(), module, is_package):
                parts = name.split(".")
                if parts[0] != "vtakit" or len(parts) == 1:
                    continue
                if layer_of(name) not in ALLOWED[layer]:
                    found.append(f"{module} -> {name}")
    return found


def test_imports_point_down():
    assert violations() == []


def test_every_source_folder_has_a_rule():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert packages <= set(FOLDERS), packages - set(FOLDERS)


@pytest.mark.parametrize("folder,source,expected", [
    ("runtime", "def f():\n    from ..compiler import ir\n",
     "vtakit.runtime.planted -> vtakit.compiler"),
    ("runtime", "import vtakit.sim.behavioral\n",
     "vtakit.runtime.planted -> vtakit.sim.behavioral"),
    ("hw", "from ..runtime.device import Device\n",
     "vtakit.hw.planted -> vtakit.runtime.device"),
    ("sim", "from vtakit.compiler.ir import expr\n",
     "vtakit.sim.planted -> vtakit.compiler.ir"),
    ("boards", "from ..sim import pysim\n", "vtakit.boards.planted -> vtakit.sim"),
    ("compiler/ops", "from ..ir import Var\n", "vtakit.compiler.ops.planted -> vtakit.compiler.ir"),
    ("compiler/ops", "from ..vta.lower import match_layer\n",
     "vtakit.compiler.ops.planted -> vtakit.compiler.vta.lower"),
    ("compiler/ir", "from ..ops.reference import wrap32\n",
     "vtakit.compiler.ir.planted -> vtakit.compiler.ops.reference"),
    ("runtime", "import vtakit.compiler.ops.tiling\n",
     "vtakit.runtime.planted -> vtakit.compiler.ops.tiling"),
])
def test_a_planted_upward_import_is_found(tmp_path, folder, source, expected):
    for name in FOLDERS:
        (tmp_path / name).mkdir()
    (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    (tmp_path / folder / "planted.py").write_text(source)
    assert violations(tmp_path) == [expected]


def test_the_runtime_loads_no_compiler():
    """Importing every runtime module (the host operators and both primitive kinds
    included) loads nothing of the compiler, onnx or TFLite: what a host that only runs
    executables needs (tests/test_vtax_standalone.py runs models so)."""
    import subprocess
    import sys
    modules = sorted(module_name(ROOT, "runtime", p)[0] for p in (ROOT / "runtime").rglob("*.py"))
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    importlib.import_module(m)\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('vtakit.compiler', 'onnx', "
            "'tflite', 'ai_edge_litert')))\n"
            "print(' '.join(bad))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == []


# ------------------------------------------------------------- no cycle inside a package

#: The packages whose modules must import each other without a cycle (every import
#: counts, those inside functions included).
ACYCLIC = ("compiler/ops", "compiler/vta", "runtime")


def module_graph(root: Path, folder: str) -> dict[str, set[str]]:
    """module -> the modules of ``folder`` (a source folder or a package below one) it
    imports. ``from pkg import name`` names the module ``pkg.name`` when there is one,
    else ``pkg`` itself (its ``__init__``)."""
    top = folder.split("/")[0]
    files = {}
    for path in sorted((root / folder).rglob("*.py")):
        files[module_name(root, top, path)] = path
    modules = {name for name, _ in files}
    graph = {}
    for (module, is_package), path in files.items():
        package = module.split(".") if is_package else module.split(".")[:-1]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = (".".join(package[:len(package) - node.level + 1]
                                 + ([node.module] if node.module else []))
                        if node.level else node.module or "")
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    edges.add(sub if sub in modules else base)
            elif isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
        graph[module] = {m for m in edges if m in modules and m != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("folder", ACYCLIC)
def test_no_import_cycle_inside_the_package(folder):
    assert cycles(module_graph(ROOT, folder)) == []


def test_a_planted_cycle_is_found(tmp_path):
    pkg = tmp_path / "runtime"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from . import a, b\n")
    assert cycles(module_graph(tmp_path, "runtime")) == [["vtakit.runtime.a",
                                                          "vtakit.runtime.b"]]
