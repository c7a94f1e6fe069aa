"""``vtakit exec IMAGE``: run a saved DRAM image on a backend and save the result."""

from __future__ import annotations

import argparse
import ast
import time

from ..hw.config import load_config
from ..sim.device import open_device
from ..sim.image import DramImage

__all__ = ["register", "run", "parse_option"]


def register(sub):
    p = sub.add_parser("exec", help="run a DRAM image (.npz) on a backend and save the result")
    p.add_argument("image", help="DRAM image .npz (dram, insn_addr, insn_count)")
    p.add_argument("--config", default="default", metavar="NAME|FILE",
                   help="hardware config: preset name or JSON file (default: default)")
    p.add_argument("--backend", default="behavioral",
                   help="execution backend: behavioral, pysim, cxxrtl, verilator "
                        "(default: behavioral)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npz",
                   help="result file: final dram, cycles, stats")
    p.add_argument("--token-depth", type=int, metavar="N",
                   help="capacity of each dependency-token queue")
    p.add_argument("--seed", type=int, metavar="N",
                   help="behavioral backend: seed of the random module interleaving")
    p.add_argument("-O", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   type=parse_option,
                   help="backend option passed to the device as a keyword argument "
                        "(VALUE is a Python literal, else a string); repeatable")
    p.set_defaults(func=run)


def parse_option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` -> (key, value); VALUE as a Python literal, else as a string."""
    key, sep, value = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"backend option {text!r} is not KEY=VALUE")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def _backend_options(args) -> dict:
    """Device keyword arguments from the command line: ``-O`` options, then the
    named ones (a backend-specific flag such as ``--vcd`` adds one line here)."""
    options = dict(args.options)
    if args.token_depth is not None:
        options["token_depth"] = args.token_depth
    if args.seed is not None:
        if args.backend != "behavioral":
            raise ValueError(f"--seed (random module interleaving) is an option of the "
                             f"behavioral backend, not of {args.backend!r}")
        options["interleave_seed"] = args.seed
    return options


def run(args):
    image = DramImage.load(args.image)
    config = load_config(args.config)
    with open_device(args.backend, config, **_backend_options(args)) as dev:
        start = time.perf_counter()
        record = dev.run_image(image)
        wall = time.perf_counter() - start
    record.save(args.output)
    cycles = "n/a" if record.cycles < 0 else str(record.cycles)
    print(f"{args.backend}: {image.insn_count} instructions, cycles {cycles}, "
          f"wall {wall:.3f} s -> {args.output}")
