"""Program: a device-independent VTA kernel, and its byte format.

A :class:`Program` is what lowering produces and what a runtime binds: the
instructions (as :class:`~vtakit.hw.isa.Insn` values, never re-decoded for
analysis), the micro-op words its LOAD UOP instructions read (its *uop
staging*), the named DRAM buffer *slots* it reads and writes, and the
*relocations* that say which instructions address which slot. A relocated
instruction's ``dram_base`` field holds the element offset inside its slot (or,
for a LOAD UOP, the uop offset inside the staging); binding adds the slot's
base address in elements of the instruction's memory type. A Program exists
without any device and serializes deterministically (:meth:`Program.to_bytes`),
so a compiled model's kernel table can hold it.

Dependency tokens: a Program's instructions carry their dep flags, and the pops
that are still pending at its end (e.g. after the fence that ends every
operator) travel with it in :attr:`Program.pending_pops`, so a program appended
to a stream leaves the stream exactly as if its instructions had been queued
there one by one.

Byte format (version 1, all integers little-endian)::

    magic  b"VTAKPROG"                      8 bytes
    version                                 uint16
    reserved (0)                            uint16
    header length H                         uint32
    header: JSON, UTF-8, sorted keys        H bytes
        config (vta_config.json keys), name, insn_count, uop_count,
        slots [[name, nbytes], ...], relocations [[insn, slot], ...],
        pending_pops [[stage, flag], ...]
    instructions                            16 bytes each
    micro-ops                               4 bytes each
    CRC-32 of every byte before it          uint32
"""

from __future__ import annotations

import json
import struct
import weakref
import zlib
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from ..hw.config import VTAConfig
from ..hw.isa import DEP_FLAGS, Insn, IsaError, MemType, Opcode, isa_for
from .errors import VTARuntimeError

__all__ = ["Program", "Relocation", "ProgramFormatError", "UOPS", "FORMAT_MAGIC",
           "FORMAT_VERSION", "make_insn"]

#: Relocation target of LOAD UOP instructions: the program's own uop staging.
UOPS = "<uops>"
#: First bytes of :meth:`Program.to_bytes`.
FORMAT_MAGIC = b"VTAKPROG"
#: Version of the byte format written by :meth:`Program.to_bytes`.
FORMAT_VERSION = 1

_PREAMBLE = struct.Struct("<8sHHI")
_CRC = struct.Struct("<I")
_POP_FLAGS = DEP_FLAGS[:2]
_STAGES = (1, 2, 3)        # load, compute, store: the units' ERROR_MODULE numbers


#: Live Programs by the bytes they wrote: reading those bytes back gives the same
#: (immutable) Program, not a decoded copy (an executable reads every kernel its
#: compiler has just written).
_written: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class ProgramFormatError(VTARuntimeError, ValueError):
    """Bytes that are not a valid serialized Program, or an inconsistent Program."""


@dataclass(frozen=True, order=True)
class Relocation:
    """Instruction ``insn`` addresses DRAM relative to ``slot`` (a slot name, or :data:`UOPS`)."""

    insn: int
    slot: str


@lru_cache(maxsize=None)
def encoder(config: VTAConfig, opcode: Opcode):
    """``make_insn`` for one config and opcode: ``encode(fields) -> Insn`` (a builder
    looks it up once per opcode rather than once per instruction)."""
    opcode = Opcode(opcode)
    fmt = isa_for(config).format(opcode)
    assert fmt.fields[0].name == "opcode"
    table = {f.name: (f.offset, f.mask, f.min, f.max) for f in fmt.fields[1:]}
    order = tuple(f.name for f in fmt.fields)
    names = frozenset(order)
    head = int(opcode) << fmt.fields[0].offset
    assert all(lo <= 0 <= hi for _, _, lo, hi in table.values())   # zeros need no check

    def encode(fields: dict) -> Insn:
        if not fields.keys() <= names:
            isa_for(config).encode(opcode, **{k: v for k, v in fields.items() if k != "opcode"})
        values = dict.fromkeys(order, 0)        # every field of the format, in its order
        values["opcode"] = int(opcode)
        word = head
        for name, value in fields.items():
            if value and name != "opcode":
                offset, mask, lo, hi = table[name]
                if not lo <= value <= hi:
                    isa_for(config).encode(opcode, **{k: v for k, v in fields.items()
                                                      if k != "opcode"})
                value = values[name] = int(value)
                word |= (value & mask) << offset
            elif value != 0:                    # None, ...: the ISA's error
                isa_for(config).encode(opcode, **{k: v for k, v in fields.items()
                                                  if k != "opcode"})
        return Insn(opcode, fmt, values, word)
    return encode


def make_insn(config: VTAConfig, opcode, fields: dict) -> Insn:
    """An :class:`~vtakit.hw.isa.Insn` from field values (missing fields are 0),
    encoded once; its ``fields`` hold every field of the format, ``opcode`` included,
    exactly as :meth:`ISA.decode <vtakit.hw.isa.ISA.decode>` would give them.

    Raises
    ------
    IsaError
        If a field does not exist or its value does not fit.
    """
    return encoder(config, opcode)(fields)


def _memory_type(insn: Insn) -> MemType:
    return MemType.OUT if insn.opcode == Opcode.STORE else MemType(insn.memory_type)


class Program:
    """A device-independent VTA kernel (see the module docstring).

    Parameters
    ----------
    config : VTAConfig
        The hardware the instructions are encoded for.
    insns : sequence of Insn
        Instructions in stream order (no FINISH needed: a runtime appends one).
    uops : array of uint32
        The uop staging: encoded micro-ops that LOAD UOP instructions read.
    slots : dict of str -> int
        Buffer slots (name -> bytes the program may touch), in declaration order
        (a read-only mapping on the Program).
    relocations : sequence of Relocation
        Which instructions address which slot (or :data:`UOPS`).
    pending_pops : sequence of (int, str)
        ``(stage, flag)`` pops still pending at the end: stage 1 load, 2 compute,
        3 store (the units' ERROR_MODULE numbers); flag ``"pop_prev_dep"`` or
        ``"pop_next_dep"``.
    name : str
        What the program is (e.g. the operator), for messages and listings.

    Raises
    ------
    ProgramFormatError
        If a relocation names a missing instruction or slot, addresses an
        instruction that moves no DRAM data, or a pending pop is malformed.
    """

    __slots__ = ("config", "name", "insns", "uops", "slots", "relocations", "pending_pops",
                 "memo", "__weakref__")

    def __init__(self, config: VTAConfig, insns, uops=(), slots=None, relocations=(),
                 pending_pops=(), name: str = ""):
        self.config = config
        self.name = str(name)
        self.insns = tuple(insns)
        uops = np.array(uops, dtype=np.uint32).reshape(-1)
        uops.flags.writeable = False
        self.uops = uops
        self.slots = MappingProxyType(dict(slots or {}))
        # sorted as (insn, slot) pairs, the order of Relocation, at tuple speed
        self.relocations = tuple(Relocation(i, n) for i, n in sorted(
            (int(r[0]), str(r[1])) for r in relocations))
        self.pending_pops = tuple(sorted((int(s), str(f)) for s, f in pending_pops))
        #: values derived from this (immutable) program, kept with it by whoever computes
        #: them (e.g. :func:`vtakit.compiler.ops.perfmodel.program_prediction`); not part
        #: of the program (equality, bytes)
        self.memo = {}
        self._validate()

    def _validate(self):
        what = f"Program {self.name!r}" if self.name else "Program"
        for name, nbytes in self.slots.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ProgramFormatError(f"{what}: slot name {name!r} is not an identifier")
            if not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
                raise ProgramFormatError(f"{what}: slot {name!r} has {nbytes!r} bytes; "
                                         "expected a positive integer")
        seen = set()
        for r in self.relocations:
            if not 0 <= r.insn < len(self.insns):
                raise ProgramFormatError(f"{what}: relocation {r} names instruction {r.insn} "
                                         f"of {len(self.insns)}")
            if r.insn in seen:
                raise ProgramFormatError(f"{what}: instruction {r.insn} is relocated twice")
            seen.add(r.insn)
            insn = self.insns[r.insn]
            f = insn.fields
            if insn.opcode not in (Opcode.LOAD, Opcode.STORE) or insn.is_nop:
                raise ProgramFormatError(f"{what}: relocation {r} names instruction {r.insn} "
                                         f"({insn}), which moves no DRAM data")
            is_uop = insn.opcode == Opcode.LOAD and f["memory_type"] == MemType.UOP
            if (r.slot == UOPS) != is_uop:
                raise ProgramFormatError(
                    f"{what}: relocation {r}: LOAD UOP instructions (and only they) are "
                    f"relocated against {UOPS}, instruction {r.insn} is {insn}")
            if is_uop and f["dram_base"] + f["x_size"] > len(self.uops):
                raise ProgramFormatError(
                    f"{what}: instruction {r.insn} loads uops [{f['dram_base']}, "
                    f"{f['dram_base'] + f['x_size']}) of a {len(self.uops)}-uop staging")
            if r.slot != UOPS and r.slot not in self.slots:
                raise ProgramFormatError(f"{what}: relocation {r} names slot {r.slot!r}; the "
                                         "slots are " + (", ".join(self.slots) or "none"))
        for stage, flag in self.pending_pops:
            if stage not in _STAGES or flag not in _POP_FLAGS:
                raise ProgramFormatError(f"{what}: pending pop ({stage}, {flag!r}); expected a "
                                         f"stage in {_STAGES} and a flag in {_POP_FLAGS}")
        if len(set(self.pending_pops)) != len(self.pending_pops):
            raise ProgramFormatError(f"{what}: a pending pop is listed twice")

    # ---------------------------------------------------------------- queries

    def __len__(self) -> int:
        return len(self.insns)

    @property
    def words(self) -> list[int]:
        """The encoded instructions (relocated ``dram_base`` fields slot-relative)."""
        return [i.word for i in self.insns]

    def link(self, bases: dict) -> list[Insn]:
        """The instructions with every relocation resolved.

        Parameters
        ----------
        bases : dict of str -> int
            Byte address of each slot (and of :data:`UOPS`, where the staging is
            placed); each must be a multiple of the element size it is used with.
        """
        out = list(self.insns)
        for r in self.relocations:
            if r.slot not in bases:
                raise ProgramFormatError(f"link: no base address for {r.slot!r} (instruction "
                                         f"{r.insn}); given: " + ", ".join(bases))
            insn = out[r.insn]
            elem = self.config.elem_bytes(_memory_type(insn))
            base = int(bases[r.slot])
            if base % elem:
                raise ProgramFormatError(f"link: {r.slot!r} at byte 0x{base:x} is not aligned "
                                         f"to the {elem}-byte elements of instruction {r.insn}")
            fields = dict(insn.fields, dram_base=insn.dram_base + base // elem)
            out[r.insn] = encoder(self.config, insn.opcode)(fields)
        return out

    def disasm(self) -> list[str]:
        """One line per instruction; relocated ones name their slot."""
        targets = {r.insn: r.slot for r in self.relocations}
        lines = []
        for n, insn in enumerate(self.insns):
            line = f"{n:6d}: {insn}"
            if n in targets:
                line += f"  ; dram_base relative to {targets[n]}"
            lines.append(line)
        return lines

    def __repr__(self):
        return (f"Program({self.name!r}, config={self.config.name}, {len(self.insns)} insns, "
                f"{len(self.uops)} uops, slots={list(self.slots)})")

    def __eq__(self, other):
        if not isinstance(other, Program):
            return NotImplemented
        return (self.config == other.config and self.name == other.name
                and self.words == other.words and np.array_equal(self.uops, other.uops)
                and list(self.slots.items()) == list(other.slots.items())
                and self.relocations == other.relocations
                and self.pending_pops == other.pending_pops)

    def __hash__(self):
        return hash((self.name, tuple(self.words)))

    def __reduce__(self):           # pickling goes through the byte format
        return Program.from_bytes, (self.to_bytes(),)

    # ---------------------------------------------------------- serialization

    def to_bytes(self) -> bytes:
        """The program in the byte format of the module docstring (same program, same
        bytes, in any process)."""
        header = {
            "config": self.config.to_dict(), "name": self.name,
            "insn_count": len(self.insns), "uop_count": int(len(self.uops)),
            "slots": [[n, int(b)] for n, b in self.slots.items()],
            "relocations": [[r.insn, r.slot] for r in self.relocations],
            "pending_pops": [[s, f] for s, f in self.pending_pops],
        }
        text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        body = (_PREAMBLE.pack(FORMAT_MAGIC, FORMAT_VERSION, 0, len(text)) + text
                + b"".join(w.to_bytes(16, "little") for w in self.words)
                + self.uops.astype("<u4").tobytes())
        data = body + _CRC.pack(zlib.crc32(body))
        _written[data] = self
        return data

    @classmethod
    def from_bytes(cls, data) -> "Program":
        """Read a program written by :meth:`to_bytes`.

        Raises
        ------
        ProgramFormatError
            If the bytes are not a Program of a supported version, are truncated or
            altered (checksum), or describe an inconsistent program.
        """
        data = bytes(data)
        known = _written.get(data)
        if type(known) is cls:          # written by a live Program: that Program
            return known
        where = "Program.from_bytes"
        if len(data) < _PREAMBLE.size + _CRC.size:
            raise ProgramFormatError(f"{where}: {len(data)} bytes is too short for a Program "
                                     f"(at least {_PREAMBLE.size + _CRC.size})")
        magic, version, _, hlen = _PREAMBLE.unpack_from(data)
        if magic != FORMAT_MAGIC:
            raise ProgramFormatError(f"{where}: not a vtakit Program (the bytes start with "
                                     f"{magic!r}, expected {FORMAT_MAGIC!r})")
        if version != FORMAT_VERSION:
            raise ProgramFormatError(f"{where}: format version {version} is not supported "
                                     f"(this vtakit reads version {FORMAT_VERSION})")
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if zlib.crc32(data[:-_CRC.size]) != crc:
            raise ProgramFormatError(f"{where}: checksum mismatch over {len(data)} bytes (stored "
                                     f"0x{crc:08x}, computed 0x{zlib.crc32(data[:-4]):08x}): "
                                     "the bytes are truncated or corrupt")
        start = _PREAMBLE.size
        try:
            header = json.loads(data[start:start + hlen].decode())
            config = VTAConfig.from_dict(header["config"], source="Program header")
            n_insn, n_uop = int(header["insn_count"]), int(header["uop_count"])
            slots = {str(n): int(b) for n, b in header["slots"]}
            relocations = [(int(i), str(s)) for i, s in header["relocations"]]
            pending = [(int(s), str(f)) for s, f in header["pending_pops"]]
            name = str(header["name"])
            if n_insn < 0 or n_uop < 0:
                raise ValueError(f"negative counts ({n_insn} instructions, {n_uop} uops)")
        except (ValueError, KeyError, TypeError) as e:
            raise ProgramFormatError(f"{where}: malformed header ({type(e).__name__}: "
                                     f"{e})") from None
        pos = start + hlen
        end = pos + 16 * n_insn + 4 * n_uop
        if end != len(data) - _CRC.size:
            raise ProgramFormatError(f"{where}: the header declares {n_insn} instructions and "
                                     f"{n_uop} uops ({end + _CRC.size} bytes in all), the data "
                                     f"has {len(data)} bytes")
        isa = isa_for(config)
        insns, decoded = [], {}     # equal words (a tile's GEMMs, ...) share one Insn
        for k in range(n_insn):
            word = int.from_bytes(data[pos + 16 * k:pos + 16 * k + 16], "little")
            insn = decoded.get(word)
            if insn is None:
                try:
                    insn = decoded[word] = isa.decode(word)
                except IsaError as e:
                    raise ProgramFormatError(f"{where}: instruction {k}: {e}") from None
                if not isinstance(insn.opcode, Opcode):
                    raise ProgramFormatError(f"{where}: instruction {k} has illegal opcode "
                                             f"{insn.opcode}")
            insns.append(insn)
        uops = np.frombuffer(data, "<u4", n_uop, pos + 16 * n_insn).astype(np.uint32)
        return cls(config, insns, uops, slots, relocations, pending, name)
