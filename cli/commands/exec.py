"""``vtakit exec IMAGE``: run a saved DRAM image on a backend and save the result."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import time

from ...hw.config import ConfigError, load_config
from ...runtime.device import BACKENDS, open_device
from ...runtime.image import DramImage, ImageError
from ..checks import output_file
from ..main import UsageError

__all__ = ["register", "run", "parse_option", "parse_backends", "image_config", "check_options", "CONFIG_HELP"]

#: The ``--config`` help text of every command that runs or decodes an image.
CONFIG_HELP = ("hardware config: preset name or JSON file (default: the config recorded in "
               "the image, else default)")


def register(sub):
    p = sub.add_parser("exec", help="run a DRAM image (.npz) on a backend and save the result")
    p.add_argument("image", help="DRAM image .npz (dram, insn_addr, insn_count[, config])")
    p.add_argument("--config", metavar="NAME|FILE", help=CONFIG_HELP)
    p.add_argument("--backend", default="behavioral",
                   help="execution backend: behavioral, pysim, cxxrtl, verilator "
                        "(default: behavioral)")
    p.add_argument("-o", "--output", required=True, type=output_file, metavar="OUT.npz",
                   help="result file: final dram, cycles, stats (.npz is appended if missing)")
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


def parse_backends(text: str) -> list[str]:
    """The backends of a ``--backends a,b,...`` option: two or more, none twice."""
    backends = [b.strip() for b in text.split(",") if b.strip()]
    if len(backends) < 2:
        raise UsageError(f"--backends needs two or more backends, got {text!r}")
    if len(set(backends)) != len(backends):
        raise UsageError(f"--backends names a backend twice: {text!r}")
    return backends


def image_config(requested, image: DramImage, path):
    """The config for ``image``: ``--config`` if given (it must name the hardware the image
    records, if it records one), else the image's, else ``default``."""
    if image.config is not None:
        try:
            load_config(image.config)
        except ConfigError as e:
            raise ImageError(f"{path}: the config recorded in the image is illegal ({e}); "
                             "rebuild the image with a valid config") from None
    try:
        return image.resolve_config(requested)
    except ImageError as e:
        raise ImageError(f"{path}: --config {requested}: {e}") from None


def check_options(backend: str, options: dict) -> None:
    """Raise ValueError naming the accepted options if ``options`` has a key the
    backend's device constructor does not take (unknown backends are left to
    :func:`~vtakit.runtime.device.open_device`, which names the known ones)."""
    target = BACKENDS.get(backend)
    if target is None or not options:
        return
    module, name = target.split(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return   # open_device says the backend is not available
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    # config is positional and dram is the device's memory: neither is a command-line option.
    accepted = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name != "dram"]
    unknown = [k for k in options if k not in accepted]
    if unknown:
        raise UsageError(f"backend {backend!r} has no option {unknown[0]!r}; its options are "
                         + ", ".join(accepted))


def _backend_options(args) -> dict:
    """Device keyword arguments from the command line: ``-O`` options, then the
    named ones (a backend-specific flag such as ``--vcd`` adds one line here)."""
    options = dict(args.options)
    if args.token_depth is not None:
        options["token_depth"] = args.token_depth
    if args.seed is not None:
        if args.backend != "behavioral":
            raise UsageError(f"--seed (random module interleaving) is an option of the "
                             f"behavioral backend, not of {args.backend!r}")
        options["interleave_seed"] = args.seed
    check_options(args.backend, options)
    return options


def run(args):
    image = DramImage.load(args.image)
    config = image_config(args.config, image, args.image)
    with open_device(args.backend, config, **_backend_options(args)) as dev:
        start = time.perf_counter()
        record = dev.run_image(image)
        wall = time.perf_counter() - start
    path = record.save(args.output)
    cycles = "n/a" if record.cycles < 0 else str(record.cycles)
    print(f"{args.backend}: {image.insn_count} instructions, cycles {cycles}, "
          f"wall {wall:.3f} s -> {path}")
