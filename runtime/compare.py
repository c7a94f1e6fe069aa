"""Did two backends agree? The one comparison of device outcomes.

``vtakit compare`` (DRAM images), the differential fuzzer (:mod:`vtakit.sim.fuzz`) and
the layer-by-layer model comparison (:mod:`vtakit.runtime.layer_compare`) all decide
agreement here, by one rule:

* A run is an :class:`Outcome`: it completed (final DRAM and counters) or it stopped
  with a :class:`Fault`. A :class:`~vtakit.runtime.device.DeviceError` raised by the run
  itself is an outcome too; an error opening a device is not (it raises).
* Two faults are the same fault when their error code, unit and instruction index are
  equal (:attr:`Fault.key`); messages are never compared (they name the backend). A
  fault and a completed run always differ.
* Two completed runs agree when their final DRAM is byte-identical and the counters
  every backend reports (:data:`COMPARED_COUNTERS`) are equal where both have them.

The first difference of two arrays (:func:`first_difference`) is the same function for
DRAM bytes and for layer outputs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..hw.config import VTAConfig, load_config
from ..hw.isa import Opcode, bytes_to_words, isa_for
from ..hw.spec import INSN_BYTES, Unit
from .device import DeviceError, DeviceFault, open_device
from .image import DramImage, RunRecord

__all__ = ["COMPARED_COUNTERS", "WINDOW", "Fault", "fault_key", "Outcome", "run_outcome",
           "run_outcomes", "ArrayDifference", "first_difference", "Comparison",
           "compare_outcomes", "covering_store", "format_comparison"]

#: Counters every backend reports, compared after two completed runs.
COMPARED_COUNTERS = ("gemm_counter", "alu_counter", "load_insn_count", "store_insn_count")

#: Bytes shown on each side of a DRAM difference (rounded to a 16-byte aligned window).
WINDOW = 16


# ---------------------------------------------------------------------- faults

@dataclass
class Fault:
    """A run that stopped without completing: its message (for reports) and the fault's
    attributes (error code name, unit name, instruction index; None where the backend
    does not know them), which alone decide whether two faults are the same."""

    message: str
    module: str | None = None
    index: int | None = None
    code: str | None = None

    @classmethod
    def from_error(cls, e: DeviceError) -> "Fault":
        """The fault of a :class:`DeviceFault`; any other :class:`DeviceError` of a run
        (a simulator error) is code ``"ERROR"`` keyed by its message's first line."""
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if not isinstance(e, DeviceFault):
            return cls(message, None, None, "ERROR")
        code = getattr(e.code, "name", f"code {e.code}")
        module = (None if e.module is None else str(e.module) if isinstance(e.module, Unit)
                  else f"module {e.module}")
        return cls(message, module, e.index, code)

    @property
    def key(self) -> tuple:
        """What two faults must share to be the same fault."""
        if self.code == "ERROR":
            return (self.code, None, self.message)
        return (self.code, self.module, self.index)

    def summary(self) -> str:
        if self.code == "ERROR":
            return f"ERROR: {self.message}"
        if self.index is None:
            return self.code if self.module is None else f"{self.module} module: {self.code}"
        return f"{self.module} module, instruction {self.index}: {self.code}"


def fault_key(error: DeviceError) -> tuple:
    """:attr:`Fault.key` of a device error."""
    return Fault.from_error(error).key


# -------------------------------------------------------------------- outcomes

@dataclass
class Outcome:
    """What one backend did with one image: ``record`` (a completed run) or ``fault``."""

    backend: str
    record: RunRecord | None = None
    fault: Fault | None = None
    wall: float = 0.0

    @property
    def dram(self) -> np.ndarray | None:
        return None if self.record is None else np.asarray(self.record.dram)

    @property
    def counters(self) -> dict:
        """The :data:`COMPARED_COUNTERS` this backend reported."""
        stats = {} if self.record is None else self.record.stats
        return {k: int(stats[k]) for k in COMPARED_COUNTERS if k in stats}

    @property
    def message(self) -> str:
        return "" if self.fault is None else self.fault.message


def run_outcome(device, image: DramImage, backend: str | None = None) -> Outcome:
    """Run ``image`` on an open ``device``; a :class:`DeviceError` of the run is a fault."""
    start = time.perf_counter()
    try:
        record = device.run_image(image)
    except DeviceError as e:
        return Outcome(backend or device.name, fault=Fault.from_error(e),
                       wall=time.perf_counter() - start)
    return Outcome(backend or device.name, record, wall=time.perf_counter() - start)


def run_outcomes(image: DramImage, config, backends, **options) -> dict[str, Outcome]:
    """Run ``image`` on a fresh device of each backend: backend -> :class:`Outcome`.
    Errors opening a device (unknown backend, bad option, failed build) raise."""
    outcomes = {}
    for name in backends:
        with open_device(name, config, **options) as dev:
            outcomes[name] = run_outcome(dev, image, name)
    return outcomes


# --------------------------------------------------------- first difference

@dataclass(frozen=True)
class ArrayDifference:
    """Where ``actual`` first differs from ``expected`` (two arrays).

    Attributes
    ----------
    index : tuple
        The first differing element (row-major order); ``()`` when the shapes or
        dtypes differ, and then ``expected``/``actual`` are the two ``dtype[shape]``.
    expected, actual : object
        The values there.
    count : int
        Number of differing elements.
    size : int
        Number of elements of ``expected``.
    """

    index: tuple
    expected: object
    actual: object
    count: int
    size: int


def first_difference(expected, actual) -> ArrayDifference | None:
    """The first element where two arrays differ, or None when they are equal
    (NaN equals NaN)."""
    a, b = np.asarray(expected), np.asarray(actual)
    if a.shape != b.shape or a.dtype != b.dtype:
        return ArrayDifference((), f"{a.dtype}{list(a.shape)}", f"{b.dtype}{list(b.shape)}",
                               a.size, a.size)
    diff = a != b
    if a.dtype.kind in "fc":
        diff &= ~(np.isnan(a) & np.isnan(b))
    flat = np.flatnonzero(diff)
    if not len(flat):
        return None
    index = tuple(int(i) for i in np.unravel_index(flat[0], a.shape))
    return ArrayDifference(index, a[index].item(), b[index].item(), len(flat), a.size)


# ---------------------------------------------------------------- comparison

@dataclass
class Comparison:
    """How ``other`` compares with ``reference``: :attr:`equal`, or what differs."""

    reference: Outcome
    other: Outcome
    fault_fields: list = field(default_factory=list)   # fault attributes that differ
    dram: ArrayDifference | None = None
    counters: list = field(default_factory=list)       # (name, reference, other)

    @property
    def equal(self) -> bool:
        ref, other = self.reference.fault, self.other.fault
        if ref is not None or other is not None:
            return ref is not None and other is not None and ref.key == other.key
        return self.dram is None and not self.counters

    @property
    def head(self) -> str:
        return f"{self.reference.backend} vs {self.other.backend}: "

    def line(self) -> str:
        """One line: how the two outcomes compare."""
        ref, other = self.reference, self.other
        if ref.fault is not None or other.fault is not None:
            if self.equal:
                return self.head + f"same fault ({ref.fault.summary()})"
            if other.fault is None:
                return (self.head + f"DIFFER: {ref.backend} faults ({ref.fault.summary()}), "
                        f"{other.backend} completes")
            if ref.fault is None:
                return (self.head + f"DIFFER: {other.backend} faults "
                        f"({other.fault.summary()}), {ref.backend} completes")
            return self.head + "DIFFER: different faults (" + ", ".join(self.fault_fields) + ")"
        if self.dram is not None:
            d = self.dram
            if d.index == ():
                return self.head + f"DIFFER: DRAM of {d.expected} / {d.actual} bytes"
            return (self.head + f"DIFFER: first differing byte at 0x{d.index[0]:x} "
                    f"({d.count} byte{'s' if d.count != 1 else ''} differ)")
        if self.counters:
            return self.head + "DIFFER: counters " + ", ".join(
                f"{k} {a} / {b}" for k, a, b in self.counters)
        return self.head + f"equal ({len(ref.dram)} bytes)"


def compare_outcomes(reference: Outcome, other: Outcome) -> Comparison:
    """Compare two outcomes by the rule of this module."""
    c = Comparison(reference, other)
    ref, oth = reference.fault, other.fault
    if ref is not None and oth is not None:
        c.fault_fields = [label for label, a, b in (("module", ref.module, oth.module),
                                                    ("instruction", ref.index, oth.index),
                                                    ("code", ref.code, oth.code)) if a != b]
        if ref.key != oth.key and not c.fault_fields:
            c.fault_fields = ["message"]          # two ERRORs of different text
    if ref is not None or oth is not None:
        return c
    a, b = reference.dram, other.dram
    if a.shape != b.shape:
        c.dram = ArrayDifference((), len(a), len(b), max(a.size, b.size), a.size)
    else:
        c.dram = first_difference(a, b)
    theirs = other.counters
    c.counters = [(k, v, theirs[k]) for k, v in reference.counters.items()
                  if k in theirs and theirs[k] != v]
    return c


# ------------------------------------------------------------ DRAM reports

def covering_store(image: DramImage, config: VTAConfig, addr: int):
    """The last STORE of the stream whose DRAM range covers byte ``addr``.

    Returns ``(index, insn, row, offset_in_row)`` or None. Instructions after the
    first FINISH never run and are not considered."""
    isa = isa_for(config)
    elem = config.out_elem_bytes
    found = None
    for index, word in enumerate(bytes_to_words(image.instructions(), INSN_BYTES)):
        insn = isa.decode(word)
        if insn.opcode == Opcode.FINISH:
            break
        if insn.opcode != Opcode.STORE or insn.x_size == 0:
            continue
        row_bytes = insn.x_size * elem
        for row in range(insn.y_size):
            start = (insn.dram_base + row * insn.x_stride) * elem
            if start <= addr < start + row_bytes:
                found = (index, insn, row, addr - start)
    return found


def _hex(data: np.ndarray, mark: np.ndarray) -> str:
    # Differing bytes are bracketed so they stand out in a terminal and in a log.
    return " ".join(f"[{v:02x}]" if m else f" {v:02x} " for v, m in zip(data, mark)).rstrip()


def format_comparison(c: Comparison, image: DramImage | None = None, config=None) -> str:
    """The report of one comparison: :meth:`Comparison.line`, and for two faults the
    fault of each, for a DRAM difference (given the ``image`` that ran) the STORE whose
    range covers the first differing byte and a hex window of both DRAMs, and the
    counters that differ."""
    lines = [c.line()]
    ref, other = c.reference, c.other
    width = max(len(ref.backend), len(other.backend))
    if ref.fault is not None and other.fault is not None and not c.equal:
        lines += [f"  {ref.backend:<{width}} {ref.fault.summary()}",
                  f"  {other.backend:<{width}} {other.fault.summary()}"]
    if c.dram is not None and c.dram.index != () and image is not None:
        addr = c.dram.index[0]
        store = covering_store(image, load_config(config), addr)
        if store is not None:
            index, insn, row, offset = store
            lines.append(f"  region: DRAM range of STORE instruction {index} (the last STORE "
                         f"covering it), row {row}, byte {offset} of the row")
            lines.append(f"  instruction {index}: {insn}")
        else:
            end = image.insn_addr + INSN_BYTES * image.insn_count
            where = ("the instruction stream" if image.insn_addr <= addr < end
                     else "no STORE's DRAM range")
            lines.append(f"  region: {where} (no STORE of the stream writes this byte)")
        a, b = ref.dram, other.dram
        lo = max(0, (addr - WINDOW) // 16 * 16)
        hi = min(len(a), lo + 2 * WINDOW + 16)
        mark = a[lo:hi] != b[lo:hi]
        for name, data in ((ref.backend, a), (other.backend, b)):
            lines.append(f"  {name:<{width}} 0x{lo:08x}: {_hex(data[lo:hi], mark)}")
    if c.dram is not None and c.counters:
        lines.append("  counters: " + ", ".join(f"{k} {a} / {b}" for k, a, b in c.counters))
    return "\n".join(lines)
