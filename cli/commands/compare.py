"""``vtakit compare IMAGE --backends A,B[,...]``: run one DRAM image on several backends.

The first backend is the reference. For every other backend the final DRAM is
compared byte for byte; the report gives the first differing address, the
STORE instruction whose DRAM range covers it (the last one in the stream, as
that one wrote the byte last), the row and byte within that store, and a short
hex window of the expected and actual bytes.

A backend whose run faults (a :class:`~vtakit.runtime.device.DeviceFault`) is an
outcome, not an error of the command: one backend faulting where the reference
completes (or the other way round) is a difference, and so are two faults that
differ in error code, unit or instruction index (the fault's attributes; messages
are never compared). The same fault on every backend is agreement.

Exit status: 0 when all backends agree (all complete with equal DRAM, or all
fault identically), 1 when any differs, 2 on an error (one line on stderr).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...hw.config import VTAConfig, load_config
from ...hw.isa import Opcode, Unit, bytes_to_words, isa_for
from ...hw.spec import INSN_BYTES
from ...runtime.device import DeviceFault, open_device
from ...runtime.image import DramImage, RunRecord
from ..main import UsageError
from .exec import CONFIG_HELP, image_config, parse_backends

__all__ = ["register", "run", "run_backends", "run_outcomes", "first_difference",
           "covering_store", "Difference", "format_difference", "Fault", "compare_outcomes",
           "WINDOW"]

#: Bytes shown on each side of a difference (rounded to a 16-byte aligned window).
WINDOW = 16


def register(sub):
    p = sub.add_parser("compare", help="run a DRAM image on several backends and compare the "
                                       "final DRAM byte for byte")
    p.add_argument("image", help="DRAM image .npz (dram, insn_addr, insn_count), or a compiled "
                                 "model .vtax (compared layer by layer)")
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]X.npy",
                   help="with a .vtax: an input array, as for vtakit run; repeatable")
    p.add_argument("--config", metavar="NAME|FILE", help=CONFIG_HELP)
    p.add_argument("--backends", required=True, metavar="A,B[,...]",
                   help="two or more backends; the first is the reference "
                        "(e.g. behavioral,cxxrtl,verilator)")
    p.add_argument("--token-depth", type=int, metavar="N",
                   help="capacity of each dependency-token queue (every backend)")
    p.set_defaults(func=run)


@dataclass
class Difference:
    """Where ``actual`` first differs from ``expected``.

    Attributes
    ----------
    addr : int
        First differing byte address.
    count : int
        Number of differing bytes in total.
    store : tuple or None
        ``(index, insn, row, offset)``: the last STORE whose DRAM range covers
        ``addr``, the row of that store and the byte offset within the row.
    """

    reference: str
    backend: str
    addr: int
    count: int
    expected: np.ndarray
    actual: np.ndarray
    window_start: int
    store: tuple | None


def run_backends(image: DramImage, config, backends, **options) -> dict[str, RunRecord]:
    """Run ``image`` on each backend; returns backend -> RunRecord (with ``wall`` in stats)."""
    records = {}
    for name in backends:
        with open_device(name, config, **options) as dev:
            start = time.perf_counter()
            record = dev.run_image(image)
            record.stats = {**record.stats, "wall": time.perf_counter() - start}
        records[name] = record
    return records


def run_outcomes(image: DramImage, config, backends, **options) -> dict:
    """Like :func:`run_backends`, but a run that faults gives a :class:`Fault` instead of
    raising. Errors opening a device (unknown backend, bad option, failed build) still raise."""
    outcomes = {}
    for name in backends:
        with open_device(name, config, **options) as dev:
            start = time.perf_counter()
            try:
                outcome = dev.run_image(image)
            except DeviceFault as e:
                outcome = Fault.from_error(e)
            wall = time.perf_counter() - start
        outcome.stats = {**outcome.stats, "wall": wall}
        outcomes[name] = outcome
    return outcomes


@dataclass
class Fault:
    """A run that faulted: its message (for the report) and the fault's attributes
    (error code name, unit name, instruction index; None where the backend does not
    know them), which alone decide whether two faults are the same."""

    message: str
    module: str | None = None
    index: int | None = None
    code: str | None = None
    stats: dict = field(default_factory=dict)   # ``wall``, as on a RunRecord

    @classmethod
    def from_error(cls, e: DeviceFault) -> "Fault":
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        code = getattr(e.code, "name", f"code {e.code}")
        module = (None if e.module is None else str(e.module) if isinstance(e.module, Unit)
                  else f"module {e.module}")
        return cls(message, module, e.index, code)

    @property
    def key(self) -> tuple:
        """What two faults must share to be the same fault."""
        return (self.code, self.module, self.index)

    def summary(self) -> str:
        if self.index is None:
            return self.code if self.module is None else f"{self.module} module: {self.code}"
        return f"{self.module} module, instruction {self.index}: {self.code}"


def compare_outcomes(ref: str, expected, name: str, actual) -> str | None:
    """The report of two outcomes of which at least one is a :class:`Fault`: a line
    starting ``"<ref> vs <name>: DIFFER: "`` (plus indented lines) when they differ,
    None when both are the same fault."""
    head = f"{ref} vs {name}: DIFFER: "
    if not isinstance(actual, Fault):
        return head + f"{ref} faults ({expected.summary()}), {name} completes"
    if not isinstance(expected, Fault):
        return head + f"{name} faults ({actual.summary()}), {ref} completes"
    if expected.key == actual.key:
        return None
    fields = [label for label, a, b in (("module", expected.module, actual.module),
                                        ("instruction", expected.index, actual.index),
                                        ("code", expected.code, actual.code)) if a != b]
    what = "different faults (" + ", ".join(fields) + ")"
    width = max(len(ref), len(name))
    return "\n".join([head + what, f"  {ref:<{width}} {expected.summary()}",
                      f"  {name:<{width}} {actual.summary()}"])


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


def first_difference(image: DramImage, config, reference: str, expected: RunRecord,
                     backend: str, actual: RunRecord) -> Difference | None:
    """The first byte where ``actual`` differs from ``expected``, or None if equal."""
    a, b = np.asarray(expected.dram), np.asarray(actual.dram)
    if a.shape != b.shape:
        raise ValueError(f"{backend} returned {len(b)} bytes of DRAM, {reference} {len(a)}")
    diff = np.flatnonzero(a != b)
    if not len(diff):
        return None
    addr = int(diff[0])
    lo = max(0, (addr - WINDOW) // 16 * 16)
    hi = min(len(a), lo + 2 * WINDOW + 16)
    return Difference(reference, backend, addr, len(diff), a[lo:hi].copy(), b[lo:hi].copy(), lo,
                      covering_store(image, load_config(config), addr))


def _hex(data: np.ndarray, mark: np.ndarray) -> str:
    # Differing bytes are bracketed so they stand out in a terminal and in a log.
    return " ".join(f"[{v:02x}]" if m else f" {v:02x} " for v, m in zip(data, mark)).rstrip()


def format_difference(d: Difference, image: DramImage) -> str:
    """The multi-line report of one difference."""
    lines = [f"{d.reference} vs {d.backend}: DIFFER: first differing byte at 0x{d.addr:x} "
             f"({d.count} byte{'s' if d.count != 1 else ''} differ)"]
    if d.store is not None:
        index, insn, row, offset = d.store
        lines.append(f"  region: DRAM range of STORE instruction {index} (the last STORE covering "
                     f"it), row {row}, byte {offset} of the row")
        lines.append(f"  instruction {index}: {insn}")
    else:
        end = image.insn_addr + INSN_BYTES * image.insn_count
        where = ("the instruction stream" if image.insn_addr <= d.addr < end
                 else "no STORE's DRAM range")
        lines.append(f"  region: {where} (no STORE of the stream writes this byte)")
    mark = d.expected != d.actual
    width = max(len(d.reference), len(d.backend))
    for name, data in ((d.reference, d.expected), (d.backend, d.actual)):
        lines.append(f"  {name:<{width}} 0x{d.window_start:08x}: {_hex(data, mark)}")
    return "\n".join(lines)


def run(args):
    backends = parse_backends(args.backends)
    if str(args.image).endswith(".vtax"):
        return _run_model(args, backends)
    if args.input:
        raise UsageError("--input is for a compiled model (.vtax), not a DRAM image")
    image = DramImage.load(args.image)
    config = image_config(args.config, image, args.image)
    options = {} if args.token_depth is None else {"token_depth": args.token_depth}
    outcomes = run_outcomes(image, config, backends, **options)
    for name, out in outcomes.items():
        wall = f"wall {out.stats['wall']:.3f} s"
        if isinstance(out, Fault):
            print(f"{name}: FAULT ({wall}): {out.message}")
        else:
            print(f"{name}: cycles {'n/a' if out.cycles < 0 else out.cycles}, {wall}")
    ref = backends[0]
    status = 0
    for name in backends[1:]:
        expected, actual = outcomes[ref], outcomes[name]
        if isinstance(expected, Fault) or isinstance(actual, Fault):
            report = compare_outcomes(ref, expected, name, actual)
            if report is None:
                print(f"{ref} vs {name}: same fault ({expected.summary()})")
            else:
                print(report)
                status = 1
            continue
        d = first_difference(image, config, ref, expected, name, actual)
        if d is None:
            print(f"{ref} vs {name}: equal ({len(expected.dram)} bytes)")
        else:
            print(format_difference(d, image))
            status = 1
    if status == 0 and isinstance(outcomes[ref], Fault):
        print(f"all backends fault identically: {outcomes[ref].summary()}")
    return status


def _run_model(args, backends):
    # A .vtax: every layer's output compared (vtakit.runtime.layer_compare).
    from pathlib import Path

    from ...runtime.executable import load, read_inputs
    from ...runtime.layer_compare import compare_layers, format_comparison
    exe = load(args.image, config=args.config)
    inputs = read_inputs(exe, args.input)
    result = compare_layers(exe, inputs, backends, stem=Path(args.image).stem)
    print(format_comparison(result))
    return 0 if result.equal else 1
