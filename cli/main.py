"""The ``vtakit`` command line.

Each subcommand is a module of :mod:`vtakit.commands` with a ``register(subparsers)``
function that adds its parser and sets ``func``. Any error prints one line on
stderr and exits 2 (set ``VTAKIT_DEBUG=1`` to see the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from . import __version__, commands

__all__ = ["main", "CliError"]


class CliError(Exception):
    """A user error the command line reports in one line."""


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


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        print("vtakit: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # one line, no traceback: the contract of the CLI
        if os.environ.get("VTAKIT_DEBUG"):
            raise
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"vtakit {args.command}: error: {msg}", file=sys.stderr)
        return 2
