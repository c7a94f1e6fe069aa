"""Argument checks the commands run before any work (argparse ``type=`` functions).

A bad path is reported by argparse as ``vtakit CMD: error: argument -o/--output: ...``
(exit 2) before a compile, a build or a run is started.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

__all__ = ["output_file"]


def output_file(text: str) -> str:
    """A file to write: its folder must exist and be writable (the file itself may not
    exist yet)."""
    path = Path(text)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name in it")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"folder '{folder}' of {text!r} does not exist "
                                         f"(create it first: mkdir -p {folder})")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"folder '{folder}' of {text!r} is not writable")
    return text


def add_latency_options(p, scope: str = "", target: bool = True) -> None:
    """``--fmax``, ``--target`` (unless ``target`` is false) and ``--host``: the clock and
    the host of a latency figure (:mod:`vtakit.tools.latency`); ``scope`` prefixes each
    help text (e.g. ``"--profile: "``)."""
    p.add_argument("--fmax", type=float, metavar="MHZ",
                   help=f"{scope}VTA's clock, for VTA us = cycles / Fmax")
    if target:
        p.add_argument("--target", metavar="FPGA",
                       help=f"{scope}take the clock from the cached `vtakit synth` report of "
                            "the config on this target (ecp5-85k, ice40-up5k)")
    p.add_argument("--host", default="measured", metavar="measured|NAME|FILE.json",
                   help=f"{scope}host us measured on this machine (default), or estimated "
                        "from a host cost table (cortex-a9: a 650 MHz Cortex-A9 as the "
                        "PYNQ-Z1's; or your own JSON)")
