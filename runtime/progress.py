"""Progress of long work on stderr: the one helper every command uses.

* :func:`bar` is a tqdm bar. On a terminal it redraws one line as usual; when stderr is
  not a terminal (CI logs, a file) it writes plain lines instead, at most one every
  ``interval`` seconds and never a carriage return.
* :class:`Stages` prints the stage lines of a multi-step job (an RTL build, a synthesis):
  ``NAME: [i/n] STAGE ...`` when a stage starts, ``NAME: [i/n] STAGE done in 12.3 s`` when
  it ends, and while a stage runs a line every ``heartbeat`` seconds from
  :meth:`Stages.tick` (the elapsed time and, when given, the tool's last output line).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

from tqdm import tqdm

__all__ = ["bar", "Stages", "is_terminal", "NON_TTY_INTERVAL"]

#: Seconds between two progress lines when stderr is not a terminal.
NON_TTY_INTERVAL = 10.0


def is_terminal(file=None) -> bool:
    """Whether ``file`` (default: stderr) is an interactive terminal."""
    file = sys.stderr if file is None else file
    try:
        return file.isatty()
    except (AttributeError, ValueError):
        return False


class _Lines:
    """A file for tqdm that turns its ``\\r`` redraws into whole lines (non-terminals)."""

    def __init__(self, file):
        self.file = file

    def write(self, text):
        text = text.replace("\r", "").strip()
        if text:
            self.file.write(text + "\n")

    def flush(self):
        self.file.flush()


def bar(iterable=None, *, desc: str, unit: str = "it", total=None, enable: bool = True,
        delay: float = 0.0, leave: bool = False, interval: float = NON_TTY_INTERVAL, **kwargs):
    """A tqdm progress bar on stderr (see the module docstring); ``enable=False`` shows
    nothing. Other keyword arguments go to :class:`tqdm.tqdm`."""
    file = sys.stderr
    if is_terminal(file):
        return tqdm(iterable, desc=desc, unit=unit, total=total, file=file, leave=leave,
                    delay=delay, disable=not enable, **kwargs)
    return tqdm(iterable, desc=desc, unit=unit, total=total, file=_Lines(file), leave=True,
                delay=delay, disable=not enable, mininterval=interval, maxinterval=interval,
                ncols=80, ascii=True, **kwargs)


class Stages:
    """Stage lines of a job named ``name`` on stderr (nothing when ``enable`` is false).

    Use :meth:`stage` as a context manager around each step and call :meth:`tick` from
    the step's polling loop; :attr:`seconds` maps each finished stage to its duration.
    """

    def __init__(self, name: str, total: int | None = None, *, enable: bool = True,
                 heartbeat: float = 30.0, file=None):
        self.name, self.total, self.enable, self.heartbeat = name, total, enable, heartbeat
        self.file = file
        self.seconds: dict[str, float] = {}
        self._index = 0
        self._what = None
        self._start = self._last = time.monotonic()
        self.began = time.monotonic()

    def print(self, text: str) -> None:
        """One line ``NAME: text`` on stderr (when enabled)."""
        if self.enable:
            file = sys.stderr if self.file is None else self.file
            print(f"{self.name}: {text}", file=file, flush=True)

    def _label(self) -> str:
        count = f"[{self._index}/{self.total}] " if self.total else ""
        return f"{count}{self._what}"

    @contextmanager
    def stage(self, what: str, detail: str = ""):
        """Print the start and the end (with its elapsed time) of stage ``what``."""
        self._index += 1
        self._what = what
        self._start = self._last = time.monotonic()
        self.print(f"{self._label()} ...{' ' + detail if detail else ''}")
        try:
            yield self
        except BaseException:
            self.print(f"{self._label()} failed after {time.monotonic() - self._start:.1f} s")
            raise
        elapsed = time.monotonic() - self._start
        self.seconds[what] = elapsed
        self.print(f"{self._label()} done in {elapsed:.1f} s")
        self._what = None

    def tick(self, detail: str = "") -> None:
        """A line ``still running (N s)`` if ``heartbeat`` seconds passed since the last."""
        now = time.monotonic()
        if self._what is None or now - self._last < self.heartbeat:
            return
        self._last = now
        tail = f": {detail.strip()[:100]}" if detail and detail.strip() else ""
        self.print(f"{self._label()} still running ({now - self._start:.0f} s){tail}")
