"""The :class:`~vtakit.runtime.device.Device` of the compiled RTL simulators.

:class:`CompiledDevice` loads a library built by :mod:`vtakit.sim.rtl_build`
(CXXRTL or Verilator) with ctypes and runs a whole program in C++: the DRAM
model reads and writes the device's :class:`~vtakit.runtime.dram.DRAM` array in
place (no copy), and Python is called back only every :data:`CHUNK_CYCLES`
cycles (to update the progress bar), never per cycle.
"""

from __future__ import annotations

import ctypes
import weakref

import numpy as np

from ..hw.spec import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH, ErrorCode, Reg
from ..runtime.device import Device, DeviceError, DeviceFault, RunResult, check_int_options
from ..runtime.dram import DRAM
from ..runtime.progress import bar
from .rtl_build import Build, Design, get_build

__all__ = ["CompiledDevice", "DEFAULT_MAX_CYCLES", "DEFAULT_STALL_CYCLES", "CHUNK_CYCLES"]

#: A run that has not finished after this many cycles is reported as a timeout.
DEFAULT_MAX_CYCLES = 200_000_000
#: A run in which nothing moves (no DRAM traffic, no change of the unit counters, the
#: micro-op count, the unit state or any queue level) for this many cycles is reported
#: as a deadlock. Long DMA bursts and read latencies are traffic, a long GEMM or ALU
#: loop moves the micro-op count, so a few thousand cycles are safe.
DEFAULT_STALL_CYCLES = 4096
#: Cycles simulated per call into the library (progress granularity).
CHUNK_CYCLES = 1 << 20

# vta::Status of vta_harness.h
_RUNNING, _DONE, _TIMEOUT, _DRAM_FAULT, _PROTOCOL, _NOT_CONVERGED, _STALLED = range(7)


class _RunOut(ctypes.Structure):
    """``vta::RunOut`` of ``harness/vta_harness.h`` (same field order and types)."""

    _fields_ = [("cycles", ctypes.c_uint64), ("status", ctypes.c_uint32),
                ("regs", ctypes.c_uint32 * 16), ("fault_addr", ctypes.c_uint64),
                ("fault_bytes", ctypes.c_uint64), ("fault_write", ctypes.c_uint32),
                ("fault_beats", ctypes.c_uint32)]


_LIBS: dict[str, ctypes.CDLL] = {}


def _load(path) -> ctypes.CDLL:
    path = str(path)
    lib = _LIBS.get(path)
    if lib is None:
        lib = ctypes.CDLL(path)
        lib.vta_create.restype = ctypes.c_void_p
        lib.vta_create.argtypes = [ctypes.c_int, ctypes.c_char_p]
        lib.vta_destroy.restype = None
        lib.vta_destroy.argtypes = [ctypes.c_void_p]
        lib.vta_bus_bytes.restype = ctypes.c_uint32
        lib.vta_bus_bytes.argtypes = []
        lib.vta_start.restype = None
        lib.vta_start.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                  ctypes.c_uint32, ctypes.c_uint32]
        lib.vta_inject.restype = None
        lib.vta_inject.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64]
        lib.vta_step.restype = ctypes.c_uint32
        lib.vta_step.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64,
                                 ctypes.c_uint64, ctypes.POINTER(_RunOut)]
        _LIBS[path] = lib
    return lib


def _inject_beat(name: str, inject) -> int | None:
    """The write beat of an ``inject="write:N"`` option, or None without one."""
    if inject is None:
        return None
    kind, _, beat = str(inject).partition(":")
    if kind != "write" or not beat.isdigit():
        raise DeviceError(f"{name}: inject={inject!r}; the fault injection this backend "
                          "knows is 'write:N' (flip a bit of DRAM write beat N, N >= 0)")
    return int(beat)


class CompiledDevice(Device):
    """Base of the ``cxxrtl`` and ``verilator`` devices.

    Parameters
    ----------
    config : VTAConfig, preset name or JSON path
    dram : DRAM, optional
        Memory to use (a fresh one by default).
    token_depth, cmd_depth : int
        Dependency-token and command queue depths of the simulated hardware.
    read_latency : int
        Cycles from a DRAM read request to its first data beat (>= 1).
    vcd : str or Path, optional
        Write a VCD waveform of every run to this file (slow; for debugging).
    max_cycles : int
        A run without done after this many cycles raises :class:`DeviceFault` (TIMEOUT).
    stall_cycles : int
        A run in which nothing moves for this many cycles raises :class:`DeviceFault`
        (DEADLOCK), naming where each unit stands; 0 turns the watch off.
    design : rtl_build.Design, optional
        Another top level with the VTA's top-level signature (tests use a stub).
    progress : bool
        Show tqdm bars on stderr while building and during long runs.
    inject : str, optional
        Fault injection, to test that a broken backend is caught: ``"write:N"`` flips
        bit 0 of the first byte of the N-th DRAM write beat of every run (from 0).
    build : rtl_build.Build, optional
        A library to load instead of the build of this config (``bench/rtl_speed.py
        --baseline`` runs another revision's build; it must have the same C API).
    """

    #: The rtl_build backend of this device.
    backend = "abstract"
    keeps_sram = True      # one simulation for every run

    def __init__(self, config, *, dram: DRAM | None = None,
                 token_depth: int = DEFAULT_TOKEN_DEPTH, cmd_depth: int = DEFAULT_CMD_DEPTH,
                 read_latency: int = 1, vcd=None, max_cycles: int = DEFAULT_MAX_CYCLES,
                 stall_cycles: int = DEFAULT_STALL_CYCLES, design: Design | None = None,
                 progress: bool = True, inject: str | None = None, build: Build | None = None):
        super().__init__(config, dram=dram)
        check_int_options(self.name, token_depth=token_depth, cmd_depth=cmd_depth,
                          read_latency=read_latency, max_cycles=max_cycles)
        inject_beat = _inject_beat(self.name, inject)
        if read_latency < 1:
            raise DeviceError(f"{self.name}: read_latency={read_latency}; it must be >= 1 cycle")
        if max_cycles < 1:
            raise DeviceError(f"{self.name}: max_cycles={max_cycles}; it must be >= 1")
        if stall_cycles < 0:
            raise DeviceError(f"{self.name}: stall_cycles={stall_cycles}; it must be >= 0 "
                              "(0: no deadlock watch)")
        if token_depth < 1 or cmd_depth < 2:
            raise DeviceError(f"{self.name}: token_depth={token_depth}, cmd_depth={cmd_depth}; "
                              "need token_depth >= 1 and cmd_depth >= 2")
        self.max_cycles = int(max_cycles)
        self.stall_cycles = int(stall_cycles)
        self.token_depth = int(token_depth)
        self.progress = progress
        self._vta_isa = design is None     # a stand-in design may use its own encoding
        self.build = build or get_build(self.backend, self.config, token_depth=token_depth,
                                        cmd_depth=cmd_depth, design=design,
                                        trace=vcd is not None, progress=progress)
        self._lib = _load(self.build.library)
        if self._lib.vta_bus_bytes() != self.config.bus_bytes:
            raise DeviceError(f"{self.name}: {self.build.library} was built for a "
                              f"{self._lib.vta_bus_bytes()}-byte bus, config {self.config.name} "
                              f"has {self.config.bus_bytes}; delete the cache entry")
        handle = self._lib.vta_create(read_latency, str(vcd).encode() if vcd else None)
        self._handle = handle
        self._finalizer = weakref.finalize(self, self._lib.vta_destroy, handle)
        if inject_beat is not None:
            self._lib.vta_inject(handle, 1, inject_beat)

    def close(self) -> None:
        self._finalizer()

    # ------------------------------------------------------------------ running
    def run(self, insn_addr: int, insn_count: int) -> RunResult:
        if not self._finalizer.alive:
            raise DeviceError(f"{self.name}: the device is closed")
        self.check_stream(insn_addr, insn_count, vta_isa=self._vta_isa)
        data = self.dram.data
        assert data.dtype == np.uint8 and data.flags.c_contiguous
        self._lib.vta_start(self._handle, data.ctypes.data, len(data), insn_addr, insn_count)
        out = _RunOut()
        with bar(desc=f"{self.name} run", unit="cycle", unit_scale=True, delay=2.0,
                 enable=self.progress) as progress:
            while True:
                status = self._lib.vta_step(self._handle, CHUNK_CYCLES, self.max_cycles,
                                            self.stall_cycles, ctypes.byref(out))
                progress.update(out.cycles - progress.n)
                if status != _RUNNING:
                    break
        return self._result(out, status, insn_addr, insn_count)

    def _reg(self, out, reg: Reg) -> int:
        return out.regs[int(reg) // 4]

    def _stats(self, out) -> dict:
        # Key names of the behavioral model's stats for the same quantities.
        r = lambda reg: self._reg(out, reg)  # noqa: E731
        return {"gemm_counter": r(Reg.GEMM_COUNT), "alu_counter": r(Reg.ALU_COUNT),
                "load_insn_count": r(Reg.LOAD_COUNT), "store_insn_count": r(Reg.STORE_COUNT)}

    def _result(self, out, status, insn_addr, insn_count) -> RunResult:
        where = f"{self.name} ({self.config.name})"
        if status == _STALLED:
            counters = ", ".join(f"{k}={v}" for k, v in self._stats(out).items())
            state = self.rtl_state({reg: self._reg(out, reg) for reg in Reg}, self.token_depth)
            raise DeviceFault(f"{where}: deadlock: no progress for {self.stall_cycles} cycles "
                              f"before FINISH running {insn_count} instructions at "
                              f"0x{insn_addr:x} ({counters}; {state})", ErrorCode.DEADLOCK)
        if status == _TIMEOUT:
            counters = ", ".join(f"{k}={v}" for k, v in self._stats(out).items())
            raise DeviceFault(f"{where}: no FINISH after {out.cycles} cycles (max_cycles="
                              f"{self.max_cycles}) running {insn_count} instructions at "
                              f"0x{insn_addr:x} ({counters}); the program deadlocks or needs a "
                              "larger max_cycles", ErrorCode.TIMEOUT)
        if status in (_DRAM_FAULT, _PROTOCOL):
            kind = "write" if out.fault_write else "read"
            if status == _DRAM_FAULT:
                raise DeviceFault(f"{where}: DRAM {kind} of {out.fault_bytes} bytes at "
                                  f"0x{out.fault_addr:x} is outside the DRAM image "
                                  f"[0, 0x{len(self.dram.data):x})", ErrorCode.DRAM_IMAGE)
            raise DeviceError(f"{where}: DRAM {kind} request with addr 0x{out.fault_addr:x}, "
                              f"beats {out.fault_beats}: the address must be a multiple of the "
                              f"{self.config.bus_bytes}-byte bus and beats >= 1")
        if status == _NOT_CONVERGED:
            raise DeviceError(f"{where}: the design did not settle in one delta cycle at cycle "
                              f"{out.cycles} (combinational feedback); run it with vcd=... "
                              "(two evaluations per cycle) or use the verilator backend")
        if self._reg(out, Reg.CTRL) & 4:
            raise self._fault(out, where, insn_addr, insn_count)
        return RunResult(cycles=self._reg(out, Reg.CYCLES), stats=self._stats(out))

    def _fault(self, out, where, insn_addr, insn_count) -> DeviceFault:
        return self.rtl_fault(where, self._reg(out, Reg.ERROR_CODE),
                                      self._reg(out, Reg.ERROR_MODULE),
                                      self._reg(out, Reg.ERROR_INSN), insn_addr, insn_count)
