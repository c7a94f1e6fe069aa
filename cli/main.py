"""The ``vtakit`` command line.

Each subcommand is a module of :mod:`vtakit.cli.commands` with a ``register(subparsers)``
function that adds its parser and sets ``func``. Any error prints one line on
stderr and exits 2 (set ``VTAKIT_DEBUG=1`` to see the traceback). A message of
several lines (e.g. a build error followed by the tool's output) is shortened to
its first and last non-empty lines plus a hint.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from .. import __version__
from . import commands

__all__ = ["main", "error_lines"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vtakit", description="VTA hardware-software co-design kit")
    parser.add_argument("--version", action="version", version=f"vtakit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return parser


def error_lines(command: str, error: BaseException) -> list[str]:
    """The stderr lines for ``error``: its message's first line, and for a message of
    more non-empty lines its last one and a hint where the rest is (3 lines at most)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    if not lines:
        return [f"vtakit {command}: error: {type(error).__name__}"]
    out = [f"vtakit {command}: error: {lines[0]}"]
    if len(lines) == 2:
        out.append(f"  {lines[1].strip()}")
    elif len(lines) > 2:
        out += [f"  ... {lines[-1].strip()}", "  (VTAKIT_DEBUG=1 for the full message)"]
    return out


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = args.func(args) or 0
        sys.stdout.flush()           # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:          # `vtakit disasm m.vtax | head`: end quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13              # 141, the shell's status of a SIGPIPE death
    except KeyboardInterrupt:
        print("vtakit: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # short, no traceback: the contract of the CLI
        if os.environ.get("VTAKIT_DEBUG"):
            raise
        print("\n".join(error_lines(args.command, e)), file=sys.stderr)
        return 2
