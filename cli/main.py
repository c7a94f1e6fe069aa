"""The ``vtakit`` command line.

Each subcommand is a module of :mod:`vtakit.cli.commands` with a ``register(subparsers)``
function that adds its parser and sets ``func``. A user error (a
:class:`~vtakit.hw.errors.VtakitError`, or an ``OSError`` about a path) prints one
line on stderr and exits 2 (set ``VTAKIT_DEBUG=1`` to see the traceback). A message
of several lines (e.g. a build error followed by the tool's output) is shortened to
its first and last non-empty lines plus a hint. Anything else is a bug in vtakit: it
prints the traceback and "internal error: please report" and exits 3.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback

from .. import __version__
from ..hw.errors import InputError, VtakitError
from . import commands

__all__ = ["main", "error_lines", "is_user_error", "UsageError", "EXIT_USER_ERROR",
           "EXIT_INTERNAL_ERROR"]

#: Exit status of a user error (bad input, a fault, a failed build) and of a bug.
EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 3

# Error classes of modules this step could not edit (compiler/frontend, compiler/quant,
# being edited elsewhere): user errors all the same. Remove each entry once its class
# derives from VtakitError (tests/test_errors.py says when).
NOT_YET_ROOTED = frozenset()


class UsageError(InputError):
    """A command that cannot do what its options ask: options that do not fit together
    or do not fit the input, a design that does not fit the chosen FPGA."""


def is_user_error(error: BaseException) -> bool:
    """True for an error the user caused and can fix (shown in one line, exit 2):
    a :class:`VtakitError`, or an ``OSError`` (a missing or unreadable path)."""
    if isinstance(error, (VtakitError, OSError)):
        return True
    return any((c.__module__, c.__qualname__) in NOT_YET_ROOTED for c in type(error).__mro__)


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
    except Exception as e:
        if not is_user_error(e):
            traceback.print_exc()
            print(f"vtakit {args.command}: internal error: please report it with the "
                  f"traceback above ({type(e).__name__}: {e})", file=sys.stderr)
            return EXIT_INTERNAL_ERROR
        if os.environ.get("VTAKIT_DEBUG"):
            raise
        # short, no traceback: the contract of the CLI
        print("\n".join(error_lines(args.command, e)), file=sys.stderr)
        return EXIT_USER_ERROR
