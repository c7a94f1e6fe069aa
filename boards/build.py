"""Bitstreams for real boards (amaranth-boards platforms, YoWASP tools).

:func:`build_bitstream` elaborates :class:`~vtakit.boards.board_top.BoardTop`
for a board's platform, lets Amaranth write the RTLIL, Yosys script and pin
constraints (``platform.prepare``), then runs Yosys, nextpnr (timing must
meet the board clock, or the build fails) and the bitstream packer.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from amaranth.hdl import Elaboratable, Module

from ..hw.errors import InputError
from ..hw.config import load_config
from ..runtime.progress import Stages
from .board_top import BoardTop
from .report import SynthReport
from .targets import get_target
from .tools import run_tool, tool_version

__all__ = ["Board", "BOARDS", "build_bitstream"]


@dataclass(frozen=True)
class Board:
    """A board vtakit can build for.

    Attributes
    ----------
    name : str
    platform : str
        ``module:class`` of the amaranth-boards platform.
    target : str
        The :data:`~vtakit.boards.targets.TARGETS` entry of its FPGA (capacities).
    pnr_device : tuple of str
        nextpnr's device arguments.
    packer : str
        Bitstream tool (``ecppack``).
    config : str
        Default config (one that fits and meets the board clock).
    dram_size : int
        Bytes of on-chip DRAM.
    """

    name: str
    platform: str
    target: str
    pnr_device: tuple
    packer: str
    config: str
    dram_size: int


BOARDS = {
    "ulx3s": Board(name="ulx3s", platform="amaranth_boards.ulx3s:ULX3S_85F_Platform",
                   target="ecp5-85k",
                   pnr_device=("--85k", "--package", "CABGA381", "--speed", "6"),
                   packer="ecppack", config="tiny", dram_size=128 * 1024),
}


class _BoardDesign(Elaboratable):
    def __init__(self, config, dram_size):
        self.config, self.dram_size = config, dram_size

    def elaborate(self, platform):
        m = Module()
        m.submodules.top = top = BoardTop(self.config, dram_size=self.dram_size,
                                          clk_hz=int(platform.default_clk_frequency))
        uart = platform.request("uart", 0)
        m.d.comb += [top.uart_rx.eq(uart.rx.i), uart.tx.o.eq(top.uart_tx)]
        for i in range(8):
            m.d.comb += platform.request("led", i).o.eq(top.leds[i])
        return m


def _platform(board: Board):
    import importlib
    module, cls = board.platform.split(":")
    try:
        return getattr(importlib.import_module(module), cls)()
    except ImportError:
        raise ImportError(f"board {board.name} needs amaranth-boards "
                          f"(pip install 'vtakit[boards]')") from None


def build_bitstream(board: str, config=None, output="vta.bit", *, workdir=None,
                    seed: int = 1, dram_size: int | None = None) -> SynthReport:
    """Build a bitstream of the VTA for ``board``; return its resources and Fmax.

    Parameters
    ----------
    board : str
        A :data:`BOARDS` name.
    config : str, VTAConfig or None
        Default: the board's :attr:`Board.config`.
    output : path
        The bitstream to write.
    workdir : path, optional
        Keep the build files there (default: a temporary directory).
    dram_size : int, optional
        Bytes of on-chip DRAM, a power of two (default: the board's
        :attr:`Board.dram_size`; a model whose DRAM needs more is refused by the board
        backend, naming both sizes).

    Raises
    ------
    ValueError
        Unknown board.
    ToolError
        A tool failed (including timing not met at the board clock).
    """
    if board not in BOARDS:
        raise InputError(f"unknown board {board!r}; boards are {', '.join(BOARDS)}")
    b = BOARDS[board]
    config = load_config(config or b.config)
    dram_size = dram_size or b.dram_size
    if dram_size < 4096 or dram_size & (dram_size - 1):
        raise InputError(f"on-chip DRAM of {dram_size} bytes: it must be a power of two of at "
                         "least 4096 bytes")
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="vtakit-build-") as tmp:
            return build_bitstream(board, config, output, workdir=tmp, seed=seed,
                                   dram_size=dram_size)
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    platform = _platform(b)
    name = "vta"
    stages = Stages(f"build {config.name} for {board}", 4, heartbeat=25.0)
    stages.print(f"build files and tool logs in {work}")
    with stages.stage("elaborate + RTLIL (Amaranth)"):
        plan = platform.prepare(_BoardDesign(config, dram_size), name=name)
        plan.extract(work)
    with stages.stage("synthesize (Yosys)", f"log {work / 'yosys.log'}"):
        run_tool("yosys", ["-l", f"{name}.rpt", f"{name}.ys"], cwd=work,
                 log=work / "yosys.log", stages=stages)
    freq = platform.default_clk_frequency / 1e6
    with stages.stage("place and route (nextpnr)", f"log {work / 'nextpnr.log'}"):
        run_tool("nextpnr-ecp5", [*b.pnr_device, "--json", f"{name}.json", "--lpf",
                                  f"{name}.lpf", "--textcfg", f"{name}.config", "--report",
                                  "pnr.json", "--freq", f"{freq:g}", "--seed", str(seed)],
                 cwd=work, log=work / "nextpnr.log", stages=stages)
    with stages.stage(f"pack the bitstream ({b.packer})"):
        run_tool(b.packer, ["--input", f"{name}.config", "--bit", f"{name}.bit"], cwd=work,
                 log=work / f"{b.packer}.log", stages=stages)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(work / f"{name}.bit", output)
    target = get_target(b.target)
    pnr = json.loads((work / "pnr.json").read_text())
    used = {r: pnr["utilization"][k]["used"] for k, r in target.pnr_cells.items()
            if k in pnr.get("utilization", {})}
    fmax = [v["achieved"] for v in pnr.get("fmax", {}).values() if "achieved" in v]
    return SynthReport(design=f"{config.name} on {board}", target=target.name,
                       device=target.device, resources={**dict.fromkeys(used, 0), **used},
                       capacity=dict(target.capacity), fmax_mhz=min(fmax) if fmax else None,
                       source="nextpnr", tools={t: tool_version(t) for t in ("yosys", "nextpnr-ecp5")})
