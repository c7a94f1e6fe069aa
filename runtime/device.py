"""The one device interface every execution target implements.

A :class:`Device` owns a byte-addressed :class:`~vtakit.runtime.dram.DRAM` and runs
``insn_count`` instructions starting at a DRAM byte address. The runtime and
every test talk only to this interface, so any program runs on any backend:
``behavioral`` (the numpy model, the executable spec), ``pysim`` (Amaranth's
simulator), ``cxxrtl`` (Yosys CXXRTL), ``verilator``, and ``board`` (an FPGA board or
``vtakit board-sim`` over its serial link). The contract lives with the runtime that drives it; the
backends are found by name (:data:`BACKENDS`) and imported only when opened, so
importing the runtime never loads a simulator.

A run that stops without completing raises :class:`DeviceFault`, with the same
``code``, ``module``, ``index`` and ``insn`` on every backend for the same fault.
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import inspect
import numbers
from dataclasses import dataclass, field

import numpy as np

from ..hw.errors import VtakitError
from ..hw.config import VTAConfig, load_config
from ..hw.spec import (CMD_LEVEL_FIELDS, DRAM_ADDR_BITS, INSN_BYTES, OPCODE_BITS,
                       TOKEN_LEVEL_FIELDS,
                       ErrorCode, Opcode, Reg, Unit)
from .dram import DRAM
from .image import DramImage, RunRecord

__all__ = ["Device", "DeviceError", "DeviceFault", "RunResult", "BACKENDS", "open_device",
           "check_backend", "DRAM", "DramImage", "RunRecord", "check_int_options",
           "accepted_options", "route_options", "backend_options"]


class DeviceError(VtakitError, RuntimeError):
    """A device that cannot do what was asked: an unknown backend or option, a closed
    device, a failed build, a simulator error. A program's own fault is a
    :class:`DeviceFault` (a subclass)."""


def check_int_options(backend: str, **options) -> None:
    """Raise :class:`DeviceError` naming the first option that is not an integer
    (``None`` is allowed: the option's default or "unbounded")."""
    for key, value in options.items():
        if value is not None and (isinstance(value, bool)
                                  or not isinstance(value, numbers.Integral)):
            raise DeviceError(f"{backend}: {key}={value!r}; it must be an integer")


class DeviceFault(DeviceError):
    """A run that stopped without completing: a fault, a deadlock or a timeout.

    Every backend raises it with the same attributes for the same fault; the message
    (which may differ between backends) names the unit, the instruction index and
    its disassembly where known.

    Parameters
    ----------
    message : str
    code : ErrorCode or int
        Why the run stopped: the hardware's ERROR_CODE, or one of the codes the
        simulators report (``DRAM_IMAGE``, ``DEADLOCK``, ``TIMEOUT``). An int only for
        a register value without an :class:`ErrorCode` member.
    module : Unit, int or None
        The unit that faulted (None for deadlocks, timeouts and DRAM image faults
        that the backend cannot attribute).
    index : int or None
        Index in the stream of the faulting instruction.
    insn : Insn or None
        The faulting instruction, decoded.
    """

    def __init__(self, message: str, code, module=None, index=None, insn=None):
        super().__init__(message)
        self.code = _enum(ErrorCode, code)
        self.module = _enum(Unit, module)
        self.index = None if index is None else int(index)
        self.insn = insn

    @property
    def key(self) -> tuple:
        """``(code, module, index, instruction word)``: what two faults must share to be
        the same fault."""
        return (self.code, self.module, self.index,
                None if self.insn is None else int(self.insn.word))


def _enum(cls, value):
    if value is None or isinstance(value, cls):
        return value
    return cls(value) if int(value) in cls._value2member_map_ else int(value)


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
    #: Streams a :class:`~vtakit.runtime.Runtime` started on this device (counted before
    #: each run: a warm start checks that no other stream ran in between,
    #: :mod:`vtakit.runtime.chain`).
    streams = 0
    #: The SRAMs (inp, wgt, acc/out, micro-ops) hold, when a stream starts, what the last
    #: stream run on this device left in them. A warm start across a host step
    #: (:mod:`vtakit.runtime.chain`) relies on it and is used only where a backend says
    #: so; a device of its own (False) runs every layer cold.
    keeps_sram = False

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

        Raises :class:`DeviceFault` when the program faults, deadlocks or times out."""

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
        n = INSN_BYTES
        if (insn_addr % n or insn_addr < 0 or insn_count < 0
                or insn_addr + n * insn_count > len(data) or insn_addr >= 1 << DRAM_ADDR_BITS):
            code = (ErrorCode.ILLEGAL_FIELD if insn_addr % n or insn_count < 0
                    else ErrorCode.DRAM_IMAGE)
            raise DeviceFault(f"{where}: {insn_count} instructions at 0x{insn_addr:x} are not a "
                              f"{n}-byte aligned range inside the {len(data)}-byte DRAM",
                              code, Unit.FETCH)
        opcodes = data[insn_addr:insn_addr + n * insn_count:n] & ((1 << OPCODE_BITS) - 1)
        legal = np.array([int(op) for op in Opcode if op != Opcode.FINISH])
        if vta_isa and np.all(np.isin(opcodes, legal)):     # neither FINISH nor an illegal opcode
            raise DeviceFault(f"{where}: the stream of {insn_count} instructions at "
                              f"0x{insn_addr:x} has no FINISH; a run ends only when compute "
                              "executes FINISH", ErrorCode.ILLEGAL_FIELD, Unit.FETCH)

    def rtl_fault(self, where: str, error_code: int, error_module: int,
                  error_insn: int, insn_addr: int, insn_count: int) -> DeviceFault:
        """The :class:`DeviceFault` of a fault latched in the RTL's ERROR_* registers: its
        message names the unit, the index in the stream, the error code and the faulting
        instruction's disassembly (read from DRAM)."""
        from ..hw.isa import isa_for
        module = (str(Unit(error_module)) if error_module in Unit._value2member_map_
                  else f"module {error_module}")
        code = (ErrorCode(error_code).name if error_code in ErrorCode._value2member_map_
                else f"code {error_code}")
        insn = None
        if error_insn < insn_count:
            addr = insn_addr + INSN_BYTES * error_insn
            word = int.from_bytes(self.dram.data[addr:addr + INSN_BYTES].tobytes(), "little")
            insn = isa_for(self.config).decode(word)
            text = str(insn)
        else:
            text = f"(index past the {insn_count} instructions of the stream)"
        return DeviceFault(f"{where}: {module} module, instruction {error_insn}: {code} [{text}]",
                           error_code, error_module, error_insn, insn)

    @staticmethod
    def rtl_state(regs: dict, token_depth: int) -> str:
        """One line on where each unit stands, from the debug registers (UNIT_STATE,
        TOKEN_LEVELS_0/1, CMD_LEVELS) read after a run that did not finish: whether
        fetch, load and store hold an instruction, each command queue's level and each
        token queue's level out of ``token_depth``. ``regs`` maps :class:`Reg` to values."""
        def field(reg, lsb, width):
            return (regs[reg] >> lsb) & ((1 << width) - 1)
        busy = regs[Reg.UNIT_STATE]
        parts = [f"{u} {'busy' if busy >> u & 1 else 'idle'}"
                 for u in (Unit.FETCH, Unit.LOAD, Unit.STORE)]
        parts += [f"{u} queue {field(*f)}" for u, f in CMD_LEVEL_FIELDS.items()]
        parts += [f"{name} tokens {field(*f)}/{token_depth}"
                  for name, f in TOKEN_LEVEL_FIELDS.items()]
        return ", ".join(parts)

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
    "board": "vtakit.boards.board_device:BoardDevice",
    "netlist": "vtakit.sim.netlist:NetlistDevice",
}

#: Options every :func:`open_device` of a backend gets unless the call gives them (the
#: command line's ``-O``, set for a command by :func:`backend_options`).
_DEFAULT_OPTIONS: dict[str, dict] = {}


def check_backend(backend: str) -> str:
    """``backend`` if it names one of :data:`BACKENDS`, else a :class:`DeviceError` (a
    command checks its backend with this before any work)."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise DeviceError(f"unknown backend {backend!r}; backends are " + ", ".join(BACKENDS))
    return backend


def accepted_options(backend: str) -> list[str] | None:
    """The keyword options of a backend's device (None: it takes any, or it is not
    available)."""
    module, cls = BACKENDS[check_backend(backend)].split(":")
    try:
        params = inspect.signature(getattr(importlib.import_module(module), cls)).parameters
    except (ImportError, AttributeError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    return [p.name for p in params.values() if p.kind is p.KEYWORD_ONLY and p.name != "dram"]


def route_options(backends, options: dict) -> dict[str, dict]:
    """``{backend: its options}``: each option goes to every backend in ``backends`` that
    takes it (``-O url=...`` to ``board`` only in ``--backends behavioral,board``); an
    option none of them takes is a :class:`DeviceError`."""
    routed = {b: {} for b in backends}
    for key, value in options.items():
        takers = [b for b in backends if (a := accepted_options(b)) is None or key in a]
        if not takers:
            raise DeviceError(f"no backend of {', '.join(backends)} has an option {key!r}")
        for b in takers:
            routed[b][key] = value
    return routed


@contextlib.contextmanager
def backend_options(routed: dict):
    """Within the block, :func:`open_device` of each backend in ``routed`` gets its options
    (keyword arguments of the call win)."""
    saved = dict(_DEFAULT_OPTIONS)
    _DEFAULT_OPTIONS.update({b: dict(o) for b, o in routed.items() if o})
    try:
        yield
    finally:
        _DEFAULT_OPTIONS.clear()
        _DEFAULT_OPTIONS.update(saved)


def open_device(backend: str, config, **options) -> Device:
    """Create a device of a named backend for a config."""
    options = {**_DEFAULT_OPTIONS.get(backend, {}), **options}
    target = BACKENDS[check_backend(backend)]
    module, cls = target.split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        raise DeviceError(f"backend {backend!r} is not available in this version") from None
    return getattr(mod, cls)(config, **options)
