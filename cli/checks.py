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
