"""Synthesis and place-and-route reports with the open tools from PyPI.

Flow of :func:`synthesize`: the component, wrapped in an
:class:`~vtakit.boards.harness.IOHarness`, goes through Amaranth's RTLIL
backend into Yosys (``synth_ecp5`` / ``synth_ice40 -dsp`` / ``synth_xilinx`` with the
classic ABC, see :data:`~vtakit.boards.targets.TARGETS`);
the netlist's cells are counted against the target's capacity; a design that
fits is placed and routed by nextpnr (ECP5, iCE40), whose utilization and
achieved Fmax replace Yosys's estimate. A design that does not fit skips
place-and-route and reports each overflowing resource; :func:`synth_config`
adds the largest config estimated to fit (:mod:`vtakit.boards.fit`).
7-series has no open place-and-route: its row is Yosys's estimate.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..hw.config import load_config
from ..hw.spec import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH
from ..runtime.progress import Stages
from .harness import IOHarness
from .report import Overflow, SynthReport, critical_paths
from .targets import RESOURCES, Target, get_target
from .tools import ToolError, run_tool, tool_version

__all__ = ["synthesize", "synth_config", "config_rtlil", "design_cells", "SynthPlatform", "TOP", "DEFAULT_FREQ_MHZ"]

#: Top module name in every netlist.
TOP = "top"
#: Clock target of timing-driven placement, by family (the report gives the achieved Fmax).
DEFAULT_FREQ_MHZ = {"ecp5": 100.0, "ice40": 48.0, "xilinx": 100.0}


@dataclass(frozen=True)
class SynthPlatform:
    """What the RTL generator may know of the part it is synthesized for (the
    ``platform`` argument of every ``elaborate``): the FPGA family, which selects
    vendor cells (the ECP5's registered ``MULT18X18D``), and how many GEMM products may
    be hard multipliers (None: all; see :meth:`Target.gemm_dsp_budget`). Amaranth's
    vendor platforms have the same ``family`` attribute."""

    family: str
    dsp_budget: int | None = None


def _rtlil(component, platform=None) -> tuple[str, IOHarness]:
    from amaranth.back import rtlil
    harness = IOHarness(component)
    return rtlil.convert(harness, name=TOP, ports=harness.ports(), emit_src=False,
                         platform=platform), harness


def _write_rtlil(component, path: Path, platform=None) -> IOHarness:
    text, harness = _rtlil(component, platform)
    path.write_text(text)
    return harness


def config_rtlil(config, target, *, token_depth: int = DEFAULT_TOKEN_DEPTH,
                 cmd_depth: int = DEFAULT_CMD_DEPTH, dsp_budget: int | None = None) -> str:
    """The RTLIL text :func:`synth_config` feeds Yosys for ``config`` on ``target`` (the
    elaborated design, without running a tool): what a synthesis result depends on."""
    from ..hw.top import VTA
    config = load_config(config)
    target = get_target(target) if isinstance(target, str) else target
    if dsp_budget is None:
        dsp_budget = target.gemm_dsp_budget(config)
    return _rtlil(VTA(config, token_depth=token_depth, cmd_depth=cmd_depth),
                  SynthPlatform(target.family, dsp_budget))[0]


def _yosys(target: Target, work: Path, *, netlist: bool, stages=None,
           verbose: bool = False) -> dict:
    script = [f"read_rtlil {TOP}.il", *(line.format(top=TOP) for line in target.synth),
              "tee -q -o stat.json stat -json"]
    if netlist:
        script.append(f"write_json {TOP}.json")
    (work / "synth.ys").write_text("\n".join(script) + "\n")
    # Not -q: the log names each pass, which the heartbeat lines show.
    run_tool("yosys", ["-s", "synth.ys"], cwd=work, log=work / "yosys.log", stages=stages,
             verbose=verbose)
    stat = json.loads((work / "stat.json").read_text())
    return design_cells(stat, TOP)


def design_cells(stat: dict, top: str) -> dict:
    """``{cell type: count}`` of the whole design from Yosys's ``stat -json``: each
    module's cells with every instance of a submodule replaced by that module's counts.
    (A flattening flow has one module. Yosys 0.70's own ``design`` totals of a
    hierarchical netlist leave out cell types such as ``FDRE`` and ``CARRY4`` in
    submodules, so they are not used.)"""
    modules = {name.lstrip("\\"): m["num_cells_by_type"] for name, m in stat["modules"].items()}
    totals: dict = {}

    def add(module: str, times: int) -> None:
        for cell, n in modules[module].items():
            if cell in modules:
                add(cell, times * n)
            elif not cell.startswith("$scopeinfo"):
                totals[cell] = totals.get(cell, 0) + times * n
    add(top, 1)
    return dict(sorted(totals.items()))


def _nextpnr(target: Target, work: Path, *, freq_mhz: float, seed: int,
             extra=(), stages=None, verbose: bool = False) -> tuple[dict, float | None, list]:
    tool, *device = target.pnr
    run_tool(tool, [*device, "--json", f"{TOP}.json", "--report", "pnr.json",
                    "--freq", f"{freq_mhz:g}", "--timing-allow-fail", "--seed", str(seed), *extra],
             cwd=work, log=work / "nextpnr.log", stages=stages, verbose=verbose)
    report = json.loads((work / "pnr.json").read_text())
    used = {}
    for key, resource in target.pnr_cells.items():
        if key in report.get("utilization", {}):
            used[resource] = report["utilization"][key]["used"]
    fmax = [v["achieved"] for v in report.get("fmax", {}).values() if "achieved" in v]
    paths = [{**asdict(p), "through": list(p.through)} for p in critical_paths(report)]
    return used, (min(fmax) if fmax else None), paths


def synthesize(component, target, *, name: str, workdir=None, place_and_route: bool = True,
               freq_mhz: float | None = None, seed: int = 1, pnr_args=(),
               dsp_budget: int | None = None, progress: bool = True,
               verbose: bool = False) -> SynthReport:
    """Synthesize ``component`` for ``target`` (and place and route it where possible).

    Parameters
    ----------
    component : amaranth.lib.wiring.Component
        Any component of the ``sync`` domain (its ports go through an :class:`IOHarness`).
    target : str or Target
        ``"ecp5-85k"``, ``"ice40-up5k"`` or ``"xilinx-7"``.
    name : str
        The design's name in the report.
    workdir : path, optional
        Keep the RTLIL, netlist, reports and tool logs there (default: a temporary directory).
    place_and_route : bool
        False stops after Yosys (no Fmax).
    freq_mhz : float, optional
        Clock target of nextpnr (default :data:`DEFAULT_FREQ_MHZ` of the family).
    seed : int
        nextpnr placer seed (fixed, so a report is reproducible).
    pnr_args : sequence of str
        Extra nextpnr arguments (e.g. ``--textcfg`` for a bitstream).
    dsp_budget : int, optional
        GEMM products built as hard multipliers (the platform's ``dsp_budget``; None:
        all of them).
    progress : bool
        Stage lines on stderr, the log folder, and a line at least every 30 s while a
        tool works (its log's last line).
    verbose : bool
        Copy the tools' logs to stderr as they are written.

    Raises
    ------
    ToolError
        A tool is missing or failed.
    """
    target = get_target(target) if isinstance(target, str) else target
    freq_mhz = freq_mhz or DEFAULT_FREQ_MHZ[target.family]
    temporary = workdir is None      # removed after a success, kept when a tool fails
    work = Path(tempfile.mkdtemp(prefix="vtakit-synth-") if temporary else workdir)
    work.mkdir(parents=True, exist_ok=True)
    pnr = place_and_route and target.pnr is not None
    stages = Stages(f"synth {name} {target.name}", 3 if pnr else 2, enable=progress,
                    heartbeat=25.0)
    stages.print(f"tool logs in {work} (yosys.log{', nextpnr.log' if pnr else ''}"
                 + ("; removed after a success, --workdir DIR keeps them" if temporary else "")
                 + ("" if verbose else "; --verbose streams them") + ")")
    platform = SynthPlatform(target.family, dsp_budget)
    report = _synthesize(component, target, name, work, pnr, freq_mhz, seed, pnr_args,
                         platform, stages, verbose)
    if temporary:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _synthesize(component, target, name, work, pnr, freq_mhz, seed, pnr_args, platform,
                stages, verbose) -> SynthReport:
    seconds, tools = {}, {"yosys": tool_version("yosys")}
    t = time.monotonic()
    with stages.stage("elaborate + RTLIL (Amaranth)"):
        harness = _write_rtlil(component, work / f"{TOP}.il", platform)
    seconds["rtlil"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    with stages.stage("synthesize (Yosys)", f"log {work / 'yosys.log'}"):
        cells = _yosys(target, work, netlist=pnr, stages=stages, verbose=verbose)
    seconds["yosys"] = round(time.monotonic() - t, 1)
    report = SynthReport(design=name, target=target.name, device=target.device,
                         resources=target.count(cells), capacity=dict(target.capacity),
                         harness=harness.cost, cells=dict(sorted(cells.items())),
                         seconds=seconds, tools=tools, dsp_budget=platform.dsp_budget)
    report.overflow = [Overflow(r, report.resources[r], target.capacity[r]) for r in RESOURCES
                       if report.resources[r] > target.capacity[r]]
    if pnr and report.fits:
        tools[target.pnr[0]] = tool_version(target.pnr[0])
        t = time.monotonic()
        with stages.stage("place and route (nextpnr)", f"log {work / 'nextpnr.log'}"):
            used, report.fmax_mhz, report.critical_paths = _nextpnr(target, work, freq_mhz=freq_mhz, seed=seed,
                                             extra=pnr_args, stages=stages, verbose=verbose)
        seconds["nextpnr"] = round(time.monotonic() - t, 1)
        report.resources.update(used)
        report.source = "nextpnr"
    return report


def synth_config(config, target, *, token_depth: int = DEFAULT_TOKEN_DEPTH,
                 cmd_depth: int = DEFAULT_CMD_DEPTH, suggest: bool = True, **kwargs) -> SynthReport:
    """:func:`synthesize` the VTA top level of ``config``; if it does not fit, the report's
    ``suggestion`` names the largest preset or config estimated to fit. Unless
    ``dsp_budget`` is given, the target sets it (:meth:`Target.gemm_dsp_budget`)."""
    from ..hw.top import VTA
    from .fit import suggest_fit
    config = load_config(config)
    target = get_target(target) if isinstance(target, str) else target
    if kwargs.get("dsp_budget") is None:
        kwargs["dsp_budget"] = target.gemm_dsp_budget(config)
    report = synthesize(VTA(config, token_depth=token_depth, cmd_depth=cmd_depth), target,
                        name=config.name, **kwargs)
    if suggest and not report.fits:
        report.suggestion = suggest_fit(config, report)
    return report


