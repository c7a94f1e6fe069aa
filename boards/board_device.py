"""The ``board`` backend: the VTA on an FPGA board (or ``vtakit board-sim``), driven over
its serial link (:mod:`vtakit.boards.link`).

The device keeps the DRAM on the host, as every backend does, and a shadow of what the
board's DRAM holds. Before a run it writes only the words that differ from the shadow
(after the board's DRAM is zeroed, at the first run, only non-zero words), starts the
VTA, polls its registers, and reads back only the range the VTA wrote (the bridge
tracks it). The board is identified when the device opens: a board of another config
or protocol version is refused before anything is written, and so is a program whose
DRAM does not fit the board's, naming both sizes.
"""

from __future__ import annotations

import struct
import sys
import time

import numpy as np

from ..hw.spec import INSN_BYTES, ErrorCode, Reg
from ..runtime.device import Device, DeviceError, DeviceFault, RunResult, check_int_options
from ..runtime.dram import DRAM, PAGE_BYTES, whole_pages
from .link import (DEFAULT_BAUD, BridgeReg, BridgeStatus, Control, Link, LinkError, Space,
                   config_fingerprint, config_label)

__all__ = ["BoardDevice", "open_port", "check_model_fits", "MERGE_GAP_WORDS"]

#: Runs of changed words closer than this are written as one command (a command costs
#: about 24 bytes of header, CRCs and reply, six words).
MERGE_GAP_WORDS = 6


def open_port(port=None, url=None, baud=DEFAULT_BAUD):
    """Open a pyserial port by device name or URL; one clear :class:`LinkError` if not."""
    try:
        import serial
    except ImportError:
        raise LinkError("the board backend needs pyserial (pip install pyserial)") from None
    if (port is None) == (url is None):
        raise LinkError("board: give the serial port, -O port=/dev/ttyUSB0 (the board's USB "
                        "serial), or a pyserial URL, -O url=socket://HOST:PORT (vtakit "
                        "board-sim); not both")
    where = port or url
    try:
        if url is not None:
            return serial.serial_for_url(url, baudrate=baud, timeout=1.0)
        return serial.Serial(port, baudrate=baud, timeout=1.0)
    except (serial.SerialException, OSError, ValueError) as e:
        hint = ("is vtakit board-sim --listen running at that address?"
                if str(where).startswith("socket://") else
                "check that the board is plugged in and powered, the port name (ls "
                "/dev/ttyUSB* /dev/ttyACM*) and that you may use it (group dialout)")
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise LinkError(f"board: cannot open {where}: {reason}; {hint}") from None


def check_model_fits(exe) -> None:
    """Open the board of the current ``board`` options (:func:`~vtakit.runtime.device.open_device`)
    and refuse ``exe`` before any write if it is for another config or does not fit its
    DRAM (:meth:`BoardDevice.check_model`)."""
    from ..runtime.device import open_device
    with open_device("board", exe.config, progress=False) as dev:
        dev.check_model(exe)


def _runs(diff: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """``(first, end)`` word ranges covering the True words of ``diff``, merging runs
    less than ``gap`` words apart."""
    idx = np.flatnonzero(diff)
    if not len(idx):
        return []
    breaks = np.flatnonzero(np.diff(idx) > gap)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]])) + 1
    return list(zip(starts.tolist(), ends.tolist()))


class BoardDevice(Device):
    """The VTA of a board, over its serial link.

    Parameters
    ----------
    config : VTAConfig, preset name or JSON path
        The config of the program; the board must run the same one.
    dram : DRAM, optional
    port : str, optional
        Serial device (``/dev/ttyUSB0``).
    url : str, optional
        pyserial URL instead (``socket://127.0.0.1:PORT`` for ``vtakit board-sim``).
    baud : int
        Link speed (the bitstream's; default 3 Mbaud).
    timeout : float
        Seconds a reply may be late before the link resynchronizes and retries.
    retries : int
        Retries of one command before the run fails with :class:`~vtakit.boards.link.LinkError`.
    max_seconds : float
        A run without done after this long raises :class:`DeviceFault` (TIMEOUT).
    stall_seconds : float
        A run whose counters, unit state and queue levels do not change for this long
        raises :class:`DeviceFault` (DEADLOCK).
    progress : bool
        Print the link's traffic (bytes, retries, time at the baud) when the device closes.
    serial : object, optional
        An open pyserial-like port to use (tests).
    """

    name = "board"
    keeps_sram = True      # one model / simulation / board for every run

    def __init__(self, config, *, dram: DRAM | None = None, port: str | None = None,
                 url: str | None = None, baud: int = DEFAULT_BAUD, timeout: float = 2.0,
                 retries: int = 4, max_seconds: float = 600.0, stall_seconds: float = 10.0,
                 progress: bool = True, serial=None):
        super().__init__(config, dram=dram)
        check_int_options(self.name, baud=baud, retries=retries)
        self.progress = progress
        self.max_seconds, self.stall_seconds = float(max_seconds), float(stall_seconds)
        self.port = serial if serial is not None else open_port(port, url, baud)
        self.where = port or url or "board"
        self.link = Link(self.port, name=self.where, baud=baud, timeout=timeout,
                         retries=retries)
        try:
            self.info = self.link.identify()
        except BaseException:
            self._close_port()
            raise
        if self.info.fingerprint != config_fingerprint(self.config):
            self._close_port()
            want, have = config_label(self.config), self.info.config_name
            same = " (same name, other fields)" if have == want else ""
            raise DeviceError(
                f"board at {self.where} runs config {have}{same} (fingerprint "
                f"0x{self.info.fingerprint:08x}), the program is for config {want} "
                f"(0x{config_fingerprint(self.config):08x}); nothing was written. Flash a "
                f"bitstream of {want} (vtakit build --board ulx3s --config {want}) or compile "
                f"for {have}")
        self.dram_size = self.info.dram_size
        self._shadow = None       # what the board's DRAM holds (None: unknown)

    # ------------------------------------------------------------------ DRAM
    def alloc(self, nbytes: int) -> int:
        addr = self.dram.alloc(nbytes)
        end = addr + whole_pages(nbytes)
        if end > self.dram_size:
            self.dram.free(addr)
            raise DeviceError(f"board at {self.where}: the program needs more DRAM than the "
                              f"board has: a buffer of {nbytes} bytes would end at {end} bytes, "
                              f"the board has {self.dram_size} bytes; nothing more was "
                              "written (build the bitstream or board-sim with a larger "
                              "--dram-size)")
        return addr

    def _check_fits(self, need: int, what: str) -> None:
        if need > self.dram_size:
            raise DeviceError(f"board at {self.where}: {what} needs {need} bytes of DRAM, the "
                              f"board has {self.dram_size} bytes; nothing was written (build "
                              "the bitstream or board-sim with a larger --dram-size)")

    def check_model(self, exe) -> None:
        """Refuse, before anything is written, a compiled model whose planned DRAM
        (:attr:`~vtakit.runtime.executable.Executable.peak_dram_bytes`, from page 1 on)
        does not fit the board's."""
        plan = exe.dram_plan()
        need = PAGE_BYTES + exe.peak_dram_bytes
        if need > self.dram_size:
            raise DeviceError(
                f"board at {self.where}: the model needs {need} bytes of DRAM (weights "
                f"{plan['weights']}, arena {plan['arena']}, staging {plan['staging']}, from "
                f"address {PAGE_BYTES}), the board has {self.dram_size} bytes; nothing was "
                "written (build the bitstream or board-sim with a larger --dram-size)")

    def run_image(self, image):
        self._check_fits(len(image.dram), "the image")
        return super().run_image(image)

    # ------------------------------------------------------------------ running
    def _control(self, bits: Control) -> None:
        self.link.write_word(Space.BRIDGE, BridgeReg.CONTROL, int(bits))

    def _sync(self) -> None:
        """Write every word that differs from what the board holds."""
        data = self.dram.data
        nz = np.flatnonzero(data)
        need = int(nz[-1]) + 1 if len(nz) else 0
        self._check_fits(need, "the DRAM contents")
        if self._shadow is None:
            self._control(Control.RESET_VTA | Control.CLEAR_TRACK | Control.ZERO_DRAM)
            self._shadow = np.zeros(self.dram_size, dtype=np.uint8)
        n = min(len(data), self.dram_size) & ~3
        host = data[:n].view("<u4")
        diff = host != self._shadow[:n].view("<u4")
        runs = _runs(diff, MERGE_GAP_WORDS)
        self.link.write_runs([(4 * a, host[a:b].tobytes()) for a, b in runs])
        self._shadow[:n] = data[:n]

    def _regs(self) -> list[int]:
        return list(struct.unpack("<16I", self.link.read(Space.CSR, 0, 16)))

    def run(self, insn_addr: int, insn_count: int) -> RunResult:
        if self.port is None:
            raise DeviceError(f"{self.name}: the device is closed")
        self.check_stream(insn_addr, insn_count)
        self._check_fits(insn_addr + INSN_BYTES * insn_count, "the instruction stream")
        where = f"{self.name} ({self.config.name})"
        self._sync()
        self._control(Control.CLEAR_TRACK)
        self.link.write_word(Space.CSR, Reg.INSN_COUNT // 4, insn_count)
        self.link.write_word(Space.CSR, Reg.INSN_ADDR // 4, insn_addr)
        self.link.write_word(Space.CSR, Reg.CTRL // 4, 1)
        began = last_move = time.monotonic()
        watch = None
        while True:
            regs = self._regs()
            if regs[Reg.CTRL // 4] & 0b110:
                break
            now = time.monotonic()
            moved = [regs[r // 4] for r in (Reg.LOAD_COUNT, Reg.STORE_COUNT, Reg.UOP_COUNT,
                                            Reg.UNIT_STATE, Reg.TOKEN_LEVELS_0,
                                            Reg.TOKEN_LEVELS_1, Reg.CMD_LEVELS)]
            if moved != watch:
                watch, last_move = moved, now
            state = lambda: self.rtl_state({r: regs[r // 4] for r in Reg}, 0)  # noqa: E731
            if now - last_move > self.stall_seconds:
                self._reset()
                raise DeviceFault(f"{where}: deadlock: no progress for {self.stall_seconds:g} s "
                                  f"before FINISH running {insn_count} instructions at "
                                  f"0x{insn_addr:x} ({state()})", ErrorCode.DEADLOCK)
            if now - began > self.max_seconds:
                self._reset()
                raise DeviceFault(f"{where}: no FINISH after {self.max_seconds:g} s running "
                                  f"{insn_count} instructions at 0x{insn_addr:x} ({state()}); "
                                  "pass a larger -O max_seconds=", ErrorCode.TIMEOUT)
        lo, hi, status, fault_addr = struct.unpack("<4I", self.link.read(Space.BRIDGE, 0, 4))
        if status & BridgeStatus.RANGE_FAULT:
            self._shadow = None     # wrapped accesses: the board's DRAM is unknown
            self._reset()
            kind = "write" if status & BridgeStatus.FAULT_WRITE else "read"
            raise DeviceFault(f"{where}: DRAM {kind} at 0x{fault_addr:x} is outside the "
                              f"board's {self.dram_size}-byte DRAM", ErrorCode.DRAM_IMAGE)
        if hi > lo:
            if hi > len(self.dram.data):
                self._shadow = None
                self._reset()
                raise DeviceFault(f"{where}: DRAM write up to 0x{hi:x} is outside the DRAM "
                                  f"image [0, 0x{len(self.dram.data):x})", ErrorCode.DRAM_IMAGE)
            back = np.frombuffer(self.link.read(Space.DRAM, lo, (hi - lo) // 4), np.uint8)
            self.dram.data[lo:hi] = back
            self._shadow[lo:hi] = back
        if regs[Reg.CTRL // 4] & 0b100:
            self._reset()
            raise self.rtl_fault(where, regs[Reg.ERROR_CODE // 4], regs[Reg.ERROR_MODULE // 4],
                                 regs[Reg.ERROR_INSN // 4], insn_addr, insn_count)
        r = lambda reg: regs[reg // 4]  # noqa: E731
        return RunResult(cycles=r(Reg.CYCLES),
                         stats={"gemm_counter": r(Reg.GEMM_COUNT), "alu_counter": r(Reg.ALU_COUNT),
                                "load_insn_count": r(Reg.LOAD_COUNT),
                                "store_insn_count": r(Reg.STORE_COUNT)})

    def _reset(self) -> None:
        self._control(Control.RESET_VTA | Control.CLEAR_TRACK)

    # ------------------------------------------------------------------ closing
    def traffic(self) -> str:
        """One line: commands, bytes each way, retries and the time at the link's baud."""
        s, baud = self.link.stats, self.info.baud or self.link.baud
        return (f"board link: {s.commands} commands, {s.bytes_out:,} bytes out "
                f"({s.nonzero_written:,} of them non-zero DRAM words), "
                f"{s.bytes_in:,} bytes in, {s.retries} retries; "
                f"{s.wire_seconds(baud):.2f} s on the wire at {baud:,} baud")

    def _close_port(self) -> None:
        if self.port is not None:
            try:
                self.port.close()
            finally:
                self.port = None

    def close(self) -> None:
        if self.port is not None and self.progress:
            print(self.traffic(), file=sys.stderr)
        self._close_port()
