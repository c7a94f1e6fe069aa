"""The board's serial link: the protocol's constants, its host side, and a Python model of
the bridge.

The protocol is described in ``docs/reference/board-protocol.md`` (the one place; the
constants below carry its names). In short: every command is one frame

    SYNC cmd seq addr[4] count[2] hcrc[4] [data[4*count] dcrc[4]]

(``cmd`` = op << 4 | space; the header CRC is checked before any data is used, the data
CRC before a register write takes effect), and every reply is

    SYNC status seq [data[4*count]] crc[4]

with CRC-32 (zlib's) everywhere. The bridge drops a frame whose header CRC fails or
that stops for :data:`IDLE_BYTE_TIMES` byte times, and answers ``BAD_CRC`` to a write
whose data CRC fails; a register write repeating the last executed write's ``seq`` is
acknowledged without being executed again, so a retried start never starts twice.

:class:`Link` is the host side over any pyserial-like port (``read``, ``write``,
``timeout``, ``reset_input_buffer``): bulk reads and pipelined bulk writes, every reply
checked, and on a garbled, lost or late reply a resynchronization (wait for a quiet
line, drop what came) and a retry, up to ``retries`` times, then one
:class:`LinkError` that says what went wrong. :class:`BridgeModel` is the bridge of
:class:`~vtakit.boards.board_top.HostBridge` in Python (with the behavioral model as its
VTA); the fault-injection tests drive the host against it.
"""

from __future__ import annotations

import enum
import json
import struct
import time
import zlib
from collections import deque
from dataclasses import dataclass, field

from ..hw.config import VTAConfig
from ..hw.errors import VtakitError
from ..runtime.device import DeviceError

__all__ = ["SYNC", "PROTOCOL_VERSION", "MAGIC", "MAX_WORDS", "IDLE_BYTE_TIMES", "Op", "Space",
           "Status", "Info", "BridgeReg", "Control", "BridgeStatus", "INFO_WORDS", "NAME_BYTES",
           "LinkError", "BoardInfo", "Link", "LinkStats", "BridgeModel", "config_fingerprint",
           "info_words", "config_label", "crc32", "CRC_INIT", "CRC_POLY", "CRC_RESIDUE", "frame",
           "DEFAULT_BAUD", "protocol_constants", "WRITE_SEQS"]

SYNC = 0xA5
PROTOCOL_VERSION = 1
MAGIC = 0x42415456          # "VTAB", little-endian
#: Most 32-bit words one command reads or writes.
MAX_WORDS = 256
#: A frame that stops for this many byte times is dropped by the bridge.
IDLE_BYTE_TIMES = 1024
#: Sequence numbers of writes (0 .. WRITE_SEQS - 1); reads use the rest.
WRITE_SEQS = 128
#: The link's default baud: the ULX3S's FT231X does 3 Mbaud.
DEFAULT_BAUD = 3_000_000
#: Reflected CRC-32 (zlib's): register start value and polynomial; a register fed a
#: message and then its CRC (little-endian) ends at the residue.
CRC_INIT, CRC_POLY = 0xFFFF_FFFF, 0xEDB8_8320


def _crc_register(data: bytes, reg: int = CRC_INIT) -> int:
    for byte in data:
        reg ^= byte
        for _ in range(8):
            reg = (reg >> 1) ^ (CRC_POLY if reg & 1 else 0)
    return reg


CRC_RESIDUE = _crc_register(b"\x00" * 4 + struct.pack("<I", zlib.crc32(b"\x00" * 4)))


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFF_FFFF


class Op(enum.IntEnum):
    READ = 1
    WRITE = 2


class Space(enum.IntEnum):
    """What a command's address refers to."""

    DRAM = 0       # the on-chip DRAM (byte address)
    CSR = 1        # the VTA's registers (vtakit.hw.spec.Reg offsets)
    INFO = 2       # the identification words (read only; Info)
    BRIDGE = 3     # the bridge's own registers (BridgeReg)


class Status(enum.IntEnum):
    OK = 0
    BAD_CRC = 1        # the data CRC of a write failed: nothing was executed
    BAD_COMMAND = 2    # an op, space or count the bridge does not take
    OUT_OF_RANGE = 3   # the words are outside the space


class Info(enum.IntEnum):
    """Word index of each identification word (Space.INFO)."""

    MAGIC = 0
    VERSION = 1
    DRAM_SIZE = 2
    FINGERPRINT = 3
    CLK_HZ = 4
    BAUD = 5
    MAX_WORDS = 6
    NAME = 8           # 16 bytes of the config name, NUL padded (words 8..11)


INFO_WORDS = 12
NAME_BYTES = 16


class BridgeReg(enum.IntEnum):
    """Word index of each bridge register (Space.BRIDGE)."""

    CONTROL = 0        # write: Control bits (read: the low end of the VTA's writes)
    WR_LO = 0          # read: lowest byte address the VTA wrote since the last CLEAR_TRACK
    WR_HI = 1          # read: one past the highest (0 when nothing was written)
    STATUS = 2         # read: BridgeStatus bits
    FAULT_ADDR = 3     # read: byte address of the first DMA request beyond the DRAM
    LAST_SEQ = 4       # read: seq of the last executed write (0x100 after reset: none)


BRIDGE_WORDS = 5


class Control(enum.IntFlag):
    RESET_VTA = 1      # pulse the VTA's reset
    CLEAR_TRACK = 2    # WR_LO/WR_HI to "nothing written", clear the range fault
    ZERO_DRAM = 4      # zero the whole DRAM (the reply comes when it is done)


class BridgeStatus(enum.IntFlag):
    RANGE_FAULT = 1    # the VTA requested DRAM beyond the board's DRAM
    FAULT_WRITE = 2    # ... and that request was a write


def protocol_constants() -> dict:
    """Every constant of this module the board design is built from (a build cache keys
    on these, not on this file's text, so host-side edits do not rebuild a design)."""
    return {"SYNC": SYNC, "PROTOCOL_VERSION": PROTOCOL_VERSION, "MAGIC": MAGIC,
            "MAX_WORDS": MAX_WORDS, "IDLE_BYTE_TIMES": IDLE_BYTE_TIMES,
            "DEFAULT_BAUD": DEFAULT_BAUD, "CRC": [CRC_INIT, CRC_POLY, CRC_RESIDUE],
            "INFO_WORDS": INFO_WORDS, "NAME_BYTES": NAME_BYTES, "BRIDGE_WORDS": BRIDGE_WORDS,
            **{cls.__name__: {m.name: int(m) for m in cls}
               for cls in (Op, Space, Status, Info, BridgeReg, Control, BridgeStatus)}}


def config_fingerprint(config: VTAConfig) -> int:
    """A 32-bit fingerprint of every field of a config (CRC-32 of its canonical JSON)."""
    return crc32(json.dumps(config.to_dict(), sort_keys=True).encode())


def config_label(config: VTAConfig) -> str:
    """The preset name of ``config`` if it is a preset, else its name."""
    from ..hw.config import PRESETS
    for preset in PRESETS:
        if VTAConfig.preset(preset) == config:
            return preset
    return config.name


def info_words(config: VTAConfig, dram_size: int, clk_hz: int, baud: int) -> list[int]:
    """The :data:`INFO_WORDS` identification words a board design reports."""
    name = config_label(config).encode()[:NAME_BYTES].ljust(NAME_BYTES, b"\0")
    words = [0] * INFO_WORDS
    words[Info.MAGIC], words[Info.VERSION] = MAGIC, PROTOCOL_VERSION
    words[Info.DRAM_SIZE], words[Info.FINGERPRINT] = dram_size, config_fingerprint(config)
    words[Info.CLK_HZ], words[Info.BAUD], words[Info.MAX_WORDS] = clk_hz, baud, MAX_WORDS
    words[Info.NAME:Info.NAME + 4] = struct.unpack("<4I", name)
    return words


def frame(op: Op, space: Space, seq: int, addr: int, count: int, data: bytes = b"") -> bytes:
    """The bytes of one command."""
    header = struct.pack("<BBIH", (op << 4) | space, seq, addr, count)
    out = bytes([SYNC]) + header + struct.pack("<I", crc32(header))
    if op == Op.WRITE:
        out += data + struct.pack("<I", crc32(data))
    return out


class LinkError(DeviceError):
    """The serial link failed: no valid reply after every retry, a board that is not a
    vtakit board, or a port that cannot be opened. The message says which."""


@dataclass
class BoardInfo:
    """What a board reports about itself (Space.INFO)."""

    config_name: str
    fingerprint: int
    dram_size: int
    version: int
    clk_hz: int
    baud: int
    max_words: int


@dataclass
class LinkStats:
    """Bytes each way, commands, retries and the time on the wire at ``baud`` (8N1)."""

    bytes_out: int = 0
    bytes_in: int = 0
    nonzero_written: int = 0       # bytes of the non-zero words written (the payload)
    commands: int = 0
    retries: int = 0
    problems: list = field(default_factory=list)

    def wire_seconds(self, baud: int) -> float:
        """How long the bytes take on a full-duplex 8N1 link at ``baud`` (the longer way)."""
        return 10 * max(self.bytes_out, self.bytes_in) / baud


class _Garbled(VtakitError):
    """A reply that is missing, late or wrong (the reason is the message)."""


@dataclass
class _Cmd:
    op: Op
    space: Space
    addr: int
    count: int
    data: bytes = b""
    seq: int | None = None
    tries: int = 0
    result: bytes | None = None

    def describe(self) -> str:
        what = "read" if self.op == Op.READ else "write"
        return f"{what} of {self.count} word(s) at {self.space.name} 0x{self.addr:x}"


class Link:
    """The host side of the protocol over a pyserial-like ``port``.

    Parameters
    ----------
    port : serial.Serial or alike
        Open port (``read(n)``, ``write(b)``, ``timeout``, ``reset_input_buffer()``).
    name : str
        How errors name the port (e.g. ``/dev/ttyUSB0``).
    baud : int
        The link's baud, to size reply timeouts.
    timeout : float
        Seconds a reply may be late beyond its transfer time.
    retries : int
        Tries of one command after the first, before :class:`LinkError`.
    quiet : float
        Seconds without a byte that end a resynchronization.
    window : int
        Write commands sent before their replies are read.
    """

    def __init__(self, port, *, name: str = "board", baud: int = DEFAULT_BAUD,
                 timeout: float = 2.0, retries: int = 4, quiet: float = 0.2, window: int = 4):
        self.port, self.name, self.baud = port, name, baud
        self.timeout, self.retries, self.quiet, self.window = timeout, retries, quiet, window
        self.stats = LinkStats()
        self._read_seq = 0
        self._write_seq = 0

    # ------------------------------------------------------------------ commands
    def identify(self) -> BoardInfo:
        """Read the identification words; start the write sequence after the board's last."""
        words = struct.unpack(f"<{INFO_WORDS}I", self.read(Space.INFO, 0, INFO_WORDS))
        if words[Info.MAGIC] != MAGIC:
            raise LinkError(f"{self.name}: the device answered but is not a vtakit board "
                            f"(magic 0x{words[Info.MAGIC]:08x}, expected 0x{MAGIC:08x})")
        name = struct.pack("<4I", *words[Info.NAME:Info.NAME + 4]).rstrip(b"\0")
        info = BoardInfo(name.decode(errors="replace"), words[Info.FINGERPRINT],
                         words[Info.DRAM_SIZE], words[Info.VERSION], words[Info.CLK_HZ],
                         words[Info.BAUD], words[Info.MAX_WORDS])
        if info.version != PROTOCOL_VERSION:
            raise LinkError(f"{self.name}: the board speaks link protocol version "
                            f"{info.version}, this vtakit version {PROTOCOL_VERSION}; flash a "
                            "bitstream built by this vtakit (vtakit build --board ulx3s)")
        last = self.read_word(Space.BRIDGE, BridgeReg.LAST_SEQ)
        self._write_seq = last % WRITE_SEQS
        return info

    def read(self, space: Space, addr: int, count: int) -> bytes:
        """``count`` words from ``addr`` on (split into commands of :data:`MAX_WORDS`)."""
        cmds = [_Cmd(Op.READ, space, addr + 4 * i, min(MAX_WORDS, count - i))
                for i in range(0, count, MAX_WORDS)]
        out = b""
        for c in cmds:       # reads one at a time: a long reply is never pipelined
            self._exchange([c])
            out += c.result
        return out

    def read_word(self, space: Space, index: int) -> int:
        return struct.unpack("<I", self.read(space, 4 * index, 1))[0]

    def write_word(self, space: Space, index: int, value: int) -> None:
        self.write(space, 4 * index, struct.pack("<I", value))

    def write(self, space: Space, addr: int, data: bytes) -> None:
        """Write ``data`` (whole words) at ``addr``."""
        self.write_runs([(addr, data)], space)

    def write_runs(self, runs, space: Space = Space.DRAM) -> None:
        """Write every ``(addr, bytes)`` run, in commands of at most :data:`MAX_WORDS`
        words, ``window`` commands in flight."""
        cmds = []
        for addr, data in runs:
            if len(data) % 4 or addr % 4:
                raise ValueError(f"link writes whole aligned words, got {len(data)} bytes at "
                                 f"0x{addr:x}")
            for i in range(0, len(data), 4 * MAX_WORDS):
                chunk = bytes(data[i:i + 4 * MAX_WORDS])
                words = struct.unpack(f"<{len(chunk) // 4}I", chunk)
                self.stats.nonzero_written += 4 * sum(1 for w in words if w)
                cmds.append(_Cmd(Op.WRITE, space, addr + i, len(chunk) // 4, chunk))
        for i in range(0, len(cmds), 64):
            self._exchange(cmds[i:i + 64])

    # ------------------------------------------------------------------ transport
    def _seq(self, c: _Cmd) -> int:
        # Writes number 0..127 (the bridge remembers the last), reads 128..255. Every try
        # of a read or a DRAM write gets a new number: a late reply to an earlier try is
        # never taken for this try's (a DRAM write's words are written before its CRC is
        # checked, so only this try's OK means they are right). A register write keeps
        # its number across tries: it takes effect only after its CRC, and the bridge
        # does not execute the same number twice in a row (a retried start).
        if c.op == Op.READ:
            self._read_seq = (self._read_seq + 1) % (256 - WRITE_SEQS)
            return WRITE_SEQS + self._read_seq
        if c.seq is None or c.space == Space.DRAM:
            self._write_seq = (self._write_seq + 1) % WRITE_SEQS
            return self._write_seq
        return c.seq

    def _exchange(self, cmds: list) -> None:
        pending = deque(cmds)
        self.stats.commands += len(cmds)
        while pending:
            flight = [pending[i] for i in range(min(self.window, len(pending)))]
            for c in flight:
                c.seq = self._seq(c)
            data = b"".join(frame(c.op, c.space, c.seq, c.addr, c.count, c.data) for c in flight)
            self._write(data)
            for k, c in enumerate(flight):
                try:
                    c.result = self._reply(c, sum(len(x.data) + 17 for x in flight[k:]))
                except _Garbled as e:
                    c.tries += 1
                    self.stats.retries += 1
                    self.stats.problems.append(str(e))
                    if c.tries > self.retries:
                        raise LinkError(f"{self.name}: no valid reply to a {c.describe()} after "
                                        f"{c.tries} tries (last: {e}); check the cable, the "
                                        f"baud ({self.baud}) and that the board runs a vtakit "
                                        "bitstream") from None
                    self._recover()
                    break
                pending.popleft()

    def _write(self, data: bytes) -> None:
        try:
            self.port.write(data)
        except Exception as e:     # pyserial's SerialException, socket errors
            raise LinkError(f"{self.name}: write failed: {e}") from None
        self.stats.bytes_out += len(data)

    def _read(self, n: int, seconds: float) -> bytes:
        self.port.timeout = seconds
        try:
            data = self.port.read(n)
        except Exception as e:
            raise LinkError(f"{self.name}: read failed: {e}") from None
        self.stats.bytes_in += len(data)
        return data

    def _reply(self, c: _Cmd, ahead: int) -> bytes | None:
        # The transfer time of what is still to be sent and received, plus the timeout.
        length = 7 + (4 * c.count if c.op == Op.READ else 0)
        seconds = self.timeout + 10 * (ahead + length) / self.baud
        head = self._read(3, seconds)
        if len(head) < 3:
            raise _Garbled(f"no reply within {seconds:.2f} s" if not head
                           else f"reply cut short after {len(head)} byte(s)")
        if head[0] != SYNC:
            raise _Garbled(f"reply starts with 0x{head[0]:02x}, not the sync byte 0x{SYNC:02x}")
        status = head[1]
        n = 4 * c.count if (c.op == Op.READ and status == Status.OK) else 0
        rest = self._read(n + 4, seconds)
        if len(rest) < n + 4:
            raise _Garbled(f"reply cut short after {3 + len(rest)} of {7 + n} bytes")
        body, crc = head[1:] + rest[:n], struct.unpack("<I", rest[n:])[0]
        if crc32(body) != crc:
            raise _Garbled("reply CRC mismatch")
        if head[2] != c.seq:
            raise _Garbled(f"reply to command #{head[2]}, expected #{c.seq} (a stale reply)")
        if status == Status.BAD_CRC:
            raise _Garbled("the board received the command's data garbled (data CRC)")
        if status != Status.OK:
            name = Status(status).name if status in Status._value2member_map_ else status
            raise LinkError(f"{self.name}: the board refused a {c.describe()}: {name}")
        return body[2:] if c.op == Op.READ else None

    def _recover(self, limit: float = 10.0) -> None:
        """Wait until the line has been quiet for ``quiet`` seconds, drop what came."""
        began = time.monotonic()
        while self._read(4096, self.quiet):
            if time.monotonic() - began > limit:
                raise LinkError(f"{self.name}: the board keeps sending for {limit:.0f} s; "
                                "reset the board")
        try:
            self.port.reset_input_buffer()
        except Exception:      # a port without an input buffer to reset
            pass


class BridgeModel:
    """The bridge of :class:`~vtakit.boards.board_top.HostBridge` in Python, byte in, bytes
    out, over a DRAM of ``dram_size`` bytes; a start runs the program on ``vta``
    (``vta(dram, insn_addr, insn_count)`` runs it in place on the DRAM, a uint8 array, and
    returns the 16 register values at the end).

    :meth:`feed` takes received bytes and returns the reply bytes; :meth:`idle` is the
    line going quiet for :data:`IDLE_BYTE_TIMES` (a partial frame is dropped).
    """

    def __init__(self, config: VTAConfig, dram_size: int, vta=None, *, clk_hz=25_000_000,
                 baud=DEFAULT_BAUD):
        self.info = info_words(config, dram_size, clk_hz, baud)
        self.dram = bytearray(dram_size)
        self.csr = [0] * 16
        self.vta = vta
        self.last_seq = 0x100
        self.wr_lo, self.wr_hi = 0xFFFF_FFFF, 0
        self.buf = b""
        self.executed = 0

    def idle(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> bytes:
        out = b""
        self.buf += data
        while True:
            i = self.buf.find(bytes([SYNC]))
            if i < 0:
                self.buf = b""
                return out
            self.buf = self.buf[i:]
            if len(self.buf) < 13:
                return out
            header = self.buf[1:9]
            if crc32(header) != struct.unpack("<I", self.buf[9:13])[0]:
                self.buf = self.buf[1:]        # hunt on from the next byte
                continue
            cmd, seq, addr, count = struct.unpack("<BBIH", header)
            op, space = cmd >> 4, cmd & 15
            if op == Op.WRITE:
                end = 13 + 4 * count + 4
                if count <= MAX_WORDS and len(self.buf) < end:
                    return out                 # the rest of the frame is still to come
            bad = self._check(op, space, addr, count)
            if bad is not None:
                self.buf = self.buf[13:]
                out += self._reply(bad, seq)
                continue
            if op == Op.READ:
                self.buf = self.buf[13:]
                words = [self._read(space, addr // 4 + i) for i in range(count)]
                out += self._reply(Status.OK, seq, struct.pack(f"<{count}I", *words))
                continue
            data, dcrc = self.buf[13:end - 4], struct.unpack("<I", self.buf[end - 4:end])[0]
            self.buf = self.buf[end:]
            if space == Space.DRAM:        # the bridge writes DRAM words as they arrive
                self.dram[addr:addr + len(data)] = data
            if crc32(data) != dcrc:
                out += self._reply(Status.BAD_CRC, seq)
                continue
            if space != Space.DRAM and seq != self.last_seq:
                self._write_reg(space, addr // 4, struct.unpack("<I", data)[0])
            self.last_seq = seq
            self.executed += 1
            out += self._reply(Status.OK, seq)

    def _check(self, op, space, addr, count):
        if op not in (Op.READ, Op.WRITE) or space > Space.BRIDGE or not 1 <= count <= MAX_WORDS \
                or addr % 4 or (op == Op.WRITE and space != Space.DRAM and count != 1) \
                or (op == Op.WRITE and space == Space.INFO):
            return Status.BAD_COMMAND
        words = {Space.DRAM: len(self.dram) // 4, Space.CSR: 16, Space.INFO: INFO_WORDS,
                 Space.BRIDGE: BRIDGE_WORDS}[space]
        if addr // 4 + count > words:
            return Status.OUT_OF_RANGE
        return None

    def _reply(self, status, seq, data=b"") -> bytes:
        body = bytes([status, seq]) + data
        return bytes([SYNC]) + body + struct.pack("<I", crc32(body))

    def _read(self, space, index) -> int:
        if space == Space.DRAM:
            return struct.unpack_from("<I", self.dram, 4 * index)[0]
        if space == Space.CSR:
            return self.csr[index]
        if space == Space.INFO:
            return self.info[index]
        return [self.wr_lo, self.wr_hi, 0, 0, self.last_seq][index]

    def _write_reg(self, space, index, value) -> None:
        if space == Space.BRIDGE:
            if value & Control.CLEAR_TRACK:
                self.wr_lo, self.wr_hi = 0xFFFF_FFFF, 0
            if value & Control.ZERO_DRAM:
                self.dram[:] = bytes(len(self.dram))
            if value & Control.RESET_VTA:
                self.csr = [0] * 16
            return
        self.csr[index] = value
        if index == 0 and value & 1 and self.vta is not None:
            import numpy as np
            before = np.frombuffer(bytes(self.dram), dtype=np.uint8)
            dram = np.frombuffer(self.dram, dtype=np.uint8)       # the model's DRAM, in place
            self.csr = [int(v) for v in self.vta(dram, self.csr[3], self.csr[2])]
            changed = np.flatnonzero(dram != before)
            if len(changed):
                self.wr_lo = min(self.wr_lo, int(changed[0]) & ~3)
                self.wr_hi = max(self.wr_hi, (int(changed[-1]) | 3) + 1)
