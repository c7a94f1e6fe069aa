"""Byte-addressed simulated DRAM with a page allocator.

As in TVM's simulated DRAM, physical addresses start at page 1 (0x1000), so
address 0 is never a valid buffer, and every buffer is page aligned, which makes
``address / element_bytes`` an integer for every VTA element size.
"""

from __future__ import annotations

import numpy as np

from ..hw.errors import VtakitError

__all__ = ["DRAM", "DramError", "PAGE_BYTES"]

PAGE_BYTES = 4096


def whole_pages(nbytes: int) -> int:
    """``nbytes`` rounded up to whole DRAM pages (what an allocation of it takes)."""
    return -(-int(nbytes) // PAGE_BYTES) * PAGE_BYTES


class DramError(VtakitError, RuntimeError):
    """An allocation failure or an access outside the DRAM image."""


class DRAM:
    """A growable ``uint8`` memory image with a first-fit page allocator.

    Parameters
    ----------
    limit : int
        Largest image size in bytes (default 1 GiB).

    Attributes
    ----------
    data : numpy.ndarray
        The whole image, byte address 0 at index 0. Its length is the end of the
        highest allocation; it may be reallocated by :meth:`alloc`, so take no
        long-lived views of it.
    allocated, peak_allocated : int
        Bytes in live allocations (whole pages), and the most there have been.
    """

    def __init__(self, limit: int = 1 << 30):
        self.limit = limit
        self.data = np.zeros(PAGE_BYTES, dtype=np.uint8)
        self._blocks: dict[int, int] = {}   # address -> size in bytes (page multiple)
        self.allocated = 0
        self.peak_allocated = 0

    @property
    def size(self) -> int:
        return len(self.data)

    def alloc(self, nbytes: int) -> int:
        """Allocate ``nbytes`` (rounded up to whole pages); returns the byte address."""
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise DramError(f"cannot allocate {nbytes} bytes: size must be positive")
        span = whole_pages(nbytes)
        addr = PAGE_BYTES
        for a in sorted(self._blocks):
            if a - addr >= span:
                break
            addr = max(addr, a + self._blocks[a])
        end = addr + span
        if end > self.limit:
            raise DramError(f"out of DRAM: {nbytes} bytes requested, image limit is "
                            f"{self.limit} bytes")
        if end > len(self.data):
            grown = np.zeros(max(end, min(self.limit, 2 * len(self.data))), dtype=np.uint8)
            grown[:len(self.data)] = self.data
            self.data = grown
        self.data[addr:end] = 0
        self._blocks[addr] = span
        self.allocated += span
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return addr

    def free(self, addr: int) -> None:
        if addr not in self._blocks:
            raise DramError(f"free of 0x{addr:x}: not the start of an allocated buffer")
        self.allocated -= self._blocks.pop(addr)

    def _check(self, addr: int, nbytes: int, what: str) -> None:
        if addr < 0 or nbytes < 0 or addr + nbytes > len(self.data):
            raise DramError(f"DRAM {what} of {nbytes} bytes at 0x{addr:x} is outside the "
                            f"image [0, 0x{len(self.data):x})")

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes at ``addr``."""
        self._check(addr, nbytes, "read")
        return self.data[addr:addr + nbytes].copy()

    def write(self, addr: int, data) -> None:
        """Write bytes (``bytes`` or any numpy array, taken as its raw bytes)."""
        buf = np.frombuffer(np.ascontiguousarray(data).tobytes() if isinstance(data, np.ndarray)
                            else bytes(data), dtype=np.uint8)
        self._check(addr, len(buf), "write")
        self.data[addr:addr + len(buf)] = buf

    def load_image(self, image: np.ndarray) -> None:
        """Replace the contents by a saved image; everything past page 0 counts as allocated."""
        image = np.asarray(image, dtype=np.uint8)
        if image.ndim != 1:
            raise DramError(f"a DRAM image must be one-dimensional, got shape {image.shape}")
        if len(image) > self.limit:
            raise DramError(f"DRAM image of {len(image)} bytes exceeds the limit {self.limit}")
        size = max(PAGE_BYTES, whole_pages(len(image)))
        self.data = np.zeros(size, dtype=np.uint8)
        self.data[:len(image)] = image
        self._blocks = {PAGE_BYTES: size - PAGE_BYTES} if size > PAGE_BYTES else {}
        self.allocated = sum(self._blocks.values())
        self.peak_allocated = max(self.peak_allocated, self.allocated)
