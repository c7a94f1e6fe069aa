"""Residency of micro-op kernels in the uop SRAM (reference 4.4).

Kernels are placed contiguously in a ring of ``depth`` entries. A resident
kernel is reused as is; a new one is placed at the current end, wrapping to 0
when it does not fit, and every resident kernel it overlaps is evicted.

The cache only tracks SRAM placement. The DRAM side (staging copies the LOAD UOP
instructions read from) is the driver's job: every kernel gets its own staging
offset, so evicting and reloading within one stream never redirects an earlier
LOAD UOP to another kernel's bytes.
"""

from __future__ import annotations

from .errors import KernelError

__all__ = ["UopCache"]


class UopCache:
    """Ring placement of kernels in a uop SRAM of ``depth`` entries.

    Attributes
    ----------
    resident : dict
        kernel -> SRAM start index, in placement order.
    hits, misses, evictions : int
        Counters since construction (not reset by :meth:`invalidate`).
    """

    def __init__(self, depth: int):
        self.depth = depth
        self.resident: dict = {}
        self._next = 0
        self.hits = self.misses = self.evictions = 0

    def lookup(self, kernel) -> int | None:
        """The SRAM start of a resident kernel, or None (and count a hit or miss)."""
        start = self.resident.get(kernel)
        if start is None:
            self.misses += 1
        else:
            self.hits += 1
        return start

    def place(self, kernel, size: int) -> int:
        """Place a kernel of ``size`` uops; returns its SRAM start index."""
        if size > self.depth:
            raise KernelError(f"kernel of {size} micro-ops does not fit the uop buffer of "
                              f"{self.depth} entries")
        start = self._next if self._next + size <= self.depth else 0
        end = start + size
        for other, begin in list(self.resident.items()):
            if begin < end and start < begin + other.size:
                del self.resident[other]
                self.evictions += 1
        self.resident[kernel] = start
        self._next = end
        return start

    def invalidate(self) -> None:
        """Forget every resident kernel (after a run nothing is assumed in SRAM)."""
        self.resident.clear()
        self._next = 0
