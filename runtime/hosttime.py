"""Timing of the host's steps in a model run: what the host, not VTA, spends per layer.

The VM's host primitives (:mod:`.host`) and the host steps inside VTA layers
(:mod:`.vta_layer`: packing an input, the ``pre`` step, downloading and
requantizing an int32 result, unpacking, the element-wise ``tail``) run through
:func:`timed`. While nothing listens it calls the function and returns: one global
read per step. Inside ``with HostTimer() as t:`` every step is logged as a
:class:`HostSpan` (operation, elements touched, bytes, seconds on this machine);
:meth:`HostTimer.take` hands over the spans logged since the last call, which is how
:func:`vtakit.tools.profile.profile_model` attributes them to the layer just finished.
An embedded host's time is estimated from the same spans by
:mod:`vtakit.tools.latency` (a per-operation cost table).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["HostSpan", "HostTimer", "timed"]

#: The listening timer, or None (timing off).
_active = None


@dataclass(frozen=True)
class HostSpan:
    """One host step: the operation's name (a host op's registered name, or ``pack``,
    ``unpack``, ``upload``, ``download``), the elements of its result (of its largest
    operand when it returns none), the bytes of its array operands and result, and its
    wall seconds on this machine."""

    op: str
    elements: int
    nbytes: int
    seconds: float


def _size(x) -> tuple[int, int]:
    size, nbytes = getattr(x, "size", None), getattr(x, "nbytes", None)
    if isinstance(size, int) and isinstance(nbytes, int):
        return size, nbytes
    if isinstance(x, (tuple, list)):
        sizes = [_size(v) for v in x]
        return sum(s for s, _ in sizes), sum(b for _, b in sizes)
    return 0, 0


def timed(op: str, func, *args, **kwargs):
    """``func(*args, **kwargs)``, logged as the host step ``op`` while a
    :class:`HostTimer` listens."""
    timer = _active
    if timer is None:
        return func(*args, **kwargs)
    start = time.perf_counter()
    result = func(*args, **kwargs)
    seconds = time.perf_counter() - start
    sizes = [_size(a) for a in args]
    n_out, b_out = _size(result)
    elements = n_out or max((n for n, _ in sizes), default=0)
    timer.spans.append(HostSpan(op, elements, sum(b for _, b in sizes) + b_out, seconds))
    return result


class HostTimer:
    """Logs every :func:`timed` host step while active (``with HostTimer() as t``).
    Timers nest: the innermost listens, the outer one resumes on exit.

    Attributes
    ----------
    spans : list of HostSpan
        The steps logged since the last :meth:`take`.
    """

    def __init__(self):
        self.spans: list[HostSpan] = []
        self._outer = None

    def take(self) -> list[HostSpan]:
        """The spans logged since the last call (and forget them)."""
        spans, self.spans = self.spans, []
        return spans

    def __enter__(self):
        global _active
        self._outer, _active = _active, self
        return self

    def __exit__(self, *exc):
        global _active
        _active = self._outer
