"""The one device interface every execution target implements.

A :class:`Device` owns a byte-addressed :class:`~vtakit.sim.dram.DRAM` and runs
``insn_count`` instructions starting at a DRAM byte address. The runtime and
every test talk only to this interface, so any program runs on any backend:
``behavioral`` (the numpy model, the executable spec), ``pysim`` (Amaranth's
simulator), ``cxxrtl`` (Yosys CXXRTL) and ``verilator``.
"""

from __future__ import annotations

import abc
import importlib
import numbers
from dataclasses import dataclass, field

import numpy as np

from ..hw.config import VTAConfig, load_config
from .dram import DRAM
from .image import DramImage, RunRecord

__all__ = ["Device", "DeviceError", "RunResult", "BACKENDS", "open_device"]


class DeviceError(RuntimeError):
    """A run that failed: the message names the module, instruction index and disassembly."""


def check_int_options(backend: str, **options) -> None:
    """Raise :class:`DeviceError` naming the first option that is not an integer
    (``None`` is allowed: the option's default or "unbounded")."""
    for key, value in options.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
            raise DeviceError(f"{backend}: {key}={value!r}; it must be an integer")


@dataclass
class RunResult:
    """What a run reports: simulated cycles (-1 without a clock) and counters."""

    cycles: int = -1
    stats: dict = field(default_factory=dict)


class Device(abc.ABC):
    """Base class of every backend.

    Parameters
    ----------
    config : VTAConfig, preset name or JSON path
        The hardware configuration.
    dram : DRAM, optional
        Memory to use (a fresh one by default).
    """

    #: Backend name, as given to :func:`open_device`.
    name = "abstract"

    def __init__(self, config, *, dram: DRAM | None = None):
        self.config: VTAConfig = load_config(config)
        self.dram = dram if dram is not None else DRAM()

    # DRAM ------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        """Allocate a page-aligned buffer; returns its byte address."""
        return self.dram.alloc(nbytes)

    def free(self, addr: int) -> None:
        self.dram.free(addr)

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        return self.dram.read(addr, nbytes)

    def write(self, addr: int, data) -> None:
        self.dram.write(addr, data)

    # Execution ---------------------------------------------------------------
    @abc.abstractmethod
    def run(self, insn_addr: int, insn_count: int) -> RunResult:
        """Execute ``insn_count`` instructions at byte address ``insn_addr``.

        Raises :class:`DeviceError` when the program faults or deadlocks."""

    def run_image(self, image: DramImage) -> RunRecord:
        """Load a saved image, run it, and return the final memory and counters."""
        self.dram.load_image(image.dram)
        result = self.run(image.insn_addr, image.insn_count)
        return RunRecord(self.dram.data[:len(image.dram)].copy(), result.cycles, result.stats)

    def check_stream(self, insn_addr: int, insn_count: int, *, vta_isa: bool = True) -> None:
        """Reject, before simulating, a stream an RTL run could only fetch out of range or
        hang on: it must be a 16-byte aligned range inside the DRAM image and (``vta_isa``)
        hold a FINISH or an illegal opcode, which faults before it."""
        data = self.dram.data
        where = f"{self.name} ({self.config.name})"
        if (insn_addr % 16 or insn_addr < 0 or insn_count < 0
                or insn_addr + 16 * insn_count > len(data) or insn_addr >= 1 << 32):
            raise DeviceError(f"{where}: {insn_count} instructions at 0x{insn_addr:x} are not a "
                              f"16-byte aligned range inside the {len(data)}-byte DRAM")
        opcodes = data[insn_addr:insn_addr + 16 * insn_count:16] & 7
        if vta_isa and not np.any((opcodes == 3) | (opcodes >= 5)):     # FINISH is 3; 5..7 are illegal
            raise DeviceError(f"{where}: the stream of {insn_count} instructions at "
                              f"0x{insn_addr:x} has no FINISH; a run ends only when compute "
                              "executes FINISH")

    def rtl_fault_message(self, where: str, error_code: int, error_module: int,
                          error_insn: int, insn_addr: int, insn_count: int) -> str:
        """The message of a fault latched in the RTL's ERROR_* registers: module, index in
        the stream, error code and the faulting instruction's disassembly (read from DRAM)."""
        from ..hw.spec import ErrorCode, Module
        from ..hw.isa import isa_for
        module = (Module(error_module).name.lower() if error_module in Module._value2member_map_
                  else f"module {error_module}")
        code = (ErrorCode(error_code).name if error_code in ErrorCode._value2member_map_
                else f"code {error_code}")
        if error_insn < insn_count:
            addr = insn_addr + 16 * error_insn
            word = int.from_bytes(self.dram.data[addr:addr + 16].tobytes(), "little")
            insn = str(isa_for(self.config).decode(word))
        else:
            insn = f"(index past the {insn_count} instructions of the stream)"
        return f"{where}: {module} module, instruction {error_insn}: {code} [{insn}]"

    def close(self) -> None:
        """Release simulator resources."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: Backend name -> "module:Class", imported on first use.
BACKENDS = {
    "behavioral": "vtakit.sim.behavioral:BehavioralDevice",
    "pysim": "vtakit.sim.pysim:PysimDevice",
    "cxxrtl": "vtakit.sim.cxxrtl:CxxrtlDevice",
    "verilator": "vtakit.sim.verilator:VerilatorDevice",
}


def open_device(backend: str, config, **options) -> Device:
    """Create a device of a named backend for a config."""
    try:
        target = BACKENDS[backend]
    except KeyError:
        raise DeviceError(f"unknown backend {backend!r}; backends are "
                          + ", ".join(BACKENDS)) from None
    module, cls = target.split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        raise DeviceError(f"backend {backend!r} is not available in this version") from None
    return getattr(mod, cls)(config, **options)
