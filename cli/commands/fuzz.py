"""``vtakit fuzz --config C --backends A,B[,...] --count N --seed S``: differential fuzzing.

Thin: parses the options and calls :func:`vtakit.sim.fuzz.fuzz`. Exit 0 when every
program agrees on every backend, 1 on a mismatch (its shrunk reproducer is saved
and the ``vtakit compare`` line that replays it printed), 2 on an error.
"""

from __future__ import annotations

import argparse

from ...sim.fuzz import format_summary, fuzz
from ..main import UsageError
from .exec import check_options, parse_backends, parse_option

__all__ = ["register", "run", "parse_backend_option"]


def parse_backend_option(text: str) -> tuple[str, str, object]:
    """``[BACKEND:]KEY=VALUE`` -> (backend or "*", key, value)."""
    head, sep, value = text.partition("=")
    backend, colon, key = head.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"device option {text!r} is not [BACKEND:]KEY=VALUE")
    key, value = parse_option(f"{key}={value}")
    return (backend if colon else "*"), key, value


def register(sub):
    p = sub.add_parser("fuzz", help="run random legal programs on several backends and "
                                    "compare them; shrink any difference")
    p.add_argument("--config", default="tiny", metavar="NAME|FILE",
                   help="hardware config: preset name or JSON file (default: tiny)")
    p.add_argument("--backends", default="behavioral,cxxrtl,verilator", metavar="A,B[,...]",
                   help="two or more backends; the first is the reference "
                        "(default: behavioral,cxxrtl,verilator)")
    p.add_argument("--count", type=int, default=20, metavar="N", help="programs (default 20)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="campaign seed (default 0)")
    p.add_argument("--size", type=int, default=24, metavar="N",
                   help="largest number of actions per program (default 24)")
    p.add_argument("--token-depth", type=int, default=256, metavar="N",
                   help="capacity of each dependency-token queue (default 256)")
    p.add_argument("--out-dir", default="vtakit-fuzz", metavar="DIR",
                   help="where shrunk reproducers are saved (default ./vtakit-fuzz)")
    p.add_argument("--max-failures", type=int, default=1, metavar="N",
                   help="stop after N differing programs (default 1)")
    p.add_argument("--no-shrink", action="store_true", help="save differing programs unshrunk")
    p.add_argument("-O", dest="options", action="append", default=[], type=parse_backend_option,
                   metavar="[BACKEND:]KEY=VALUE",
                   help="device option for one backend (or all), e.g. -O verilator:inject=write:0")
    p.set_defaults(func=run)


def run(args):
    backends = parse_backends(args.backends)
    if args.count < 1:
        raise UsageError(f"--count {args.count}: need at least 1 program")
    if args.size < 1:
        raise UsageError(f"--size {args.size}: need at least 1 action per program")
    if args.token_depth < 1:
        raise UsageError(f"--token-depth {args.token_depth}: a token queue needs capacity >= 1")
    options: dict = {}
    for backend, key, value in args.options:
        if backend != "*" and backend not in backends:
            raise UsageError(f"-O {backend}:{key}: {backend!r} is not one of --backends "
                             f"{','.join(backends)}")
        options.setdefault(backend, {})[key] = value
    for b in backends:
        check_options(b, {**options.get("*", {}), **options.get(b, {})})
    report = fuzz(args.config, backends, args.count, args.seed, token_depth=args.token_depth,
                  options=options, out_dir=args.out_dir, shrink_failures=not args.no_shrink,
                  max_failures=args.max_failures, size=args.size)
    print(format_summary(report))
    return 1 if report.mismatches else 0
