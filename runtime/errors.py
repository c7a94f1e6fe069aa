"""Errors raised by the runtime driver.

Every error is a :class:`VTARuntimeError` (a :class:`RuntimeError` and a
:class:`~vtakit.hw.errors.VtakitError`), so callers can catch the whole family; the
subclasses say which rule was broken.
"""

from ..hw.errors import VtakitError

__all__ = [
    "VTARuntimeError", "BufferHandleError", "InvalidArgumentError", "SramRangeError",
    "DramRangeError", "StageError", "KernelError", "StreamStateError",
]


class VTARuntimeError(VtakitError, RuntimeError):
    """Base class of every error of :mod:`vtakit.runtime`."""


class BufferHandleError(VTARuntimeError):
    """A buffer that this runtime did not allocate, or that was already freed."""


class InvalidArgumentError(VTARuntimeError, ValueError):
    """An argument outside its instruction field or otherwise meaningless."""


class SramRangeError(VTARuntimeError):
    """A load, store or kernel that would touch an SRAM index >= the buffer depth."""


class DramRangeError(VTARuntimeError):
    """A load or store that would touch bytes outside its DRAM buffer."""


class StageError(VTARuntimeError):
    """An illegal dependency pair (same stage, or load <-> store)."""


class KernelError(VTARuntimeError):
    """A micro-op kernel that breaks a kernel rule (reference 4.4 and 3.4)."""


class StreamStateError(VTARuntimeError):
    """A call that the stream's current state does not allow (e.g. a push after finalize)."""
