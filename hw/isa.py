"""The VTA instruction set, defined once (HW_VER 0.0.2, bit-compatible with TVM's VTA).

Every instruction kind has one field table (:class:`Format`) whose bit positions
are computed from a :class:`~vtakit.hw.config.VTAConfig` by VTA's packing rule:
fields are laid out LSB-first in declaration order inside 64-bit storage units
(32-bit for the micro-op), and a field that would straddle a unit boundary
starts at the next unit instead. The same tables give the Python encoder,
decoder and disassembler and, through :meth:`Format.layout`, the
``amaranth.lib.data`` layouts the RTL decoders use, so the two cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np

from .errors import VtakitError
from .fixedpoint import (INT32_MAX, INT32_MIN, MASK32 as _MASK32, mul_shift, requantize_word,
                         rounding_shift, srdhm)
from .fixedpoint import wrap_int32 as _wrap32
from .config import VTAConfig
from .spec import (ALU_OPCODE_BITS, DEP_FLAGS, DEP_QUEUES, DRAM_BASE_BITS, ENCODING_UNIT_BITS,
                   EXTENSIONS, IMM_BITS, INSN_BITS, INSN_BYTES, LOOP_ITER_BITS, MEM_TYPE_BITS, OPCODE_BITS,
                   IMM_MAX, IMM_MIN, PAD_BITS, SHIFT_LIMIT, SRAM_BASE_BITS, UOP_BITS, XFER_BITS,
                   AluOp, MemType, Opcode, Unit, dispatch_unit)

__all__ = [
    "Opcode", "MemType", "AluOp", "Unit", "DEP_FLAGS", "DEP_QUEUES", "unit_of", "IsaError",
    "Field", "Format", "Insn", "Uop", "ISA", "isa_for", "insns_to_bytes", "bytes_to_words",
    "AluSemantics", "ALU_OPS", "AluTableError", "alu_ops", "alu_semantics", "alu_violation",
    "illegal_alu_opcodes", "alu_opcode_bits", "alu_entry", "alu_registers", "INT32_MIN",
    "REQ_RUN", "REQ_LOAD_M", "REQ_LOAD_P",
    "INT32_MAX",
    "srdhm", "rounding_shift", "mul_shift",
]


def unit_of(insn) -> Unit:
    """The unit fetch dispatches a decoded instruction to (:func:`~vtakit.hw.spec.dispatch_unit`)."""
    return dispatch_unit(insn.opcode, insn.fields.get("memory_type"))


class IsaError(VtakitError, ValueError):
    """A value that cannot be encoded, or a word that cannot be decoded."""


# ------------------------------------------------------------------ the ALU table

class AluTableError(IsaError):
    """The ALU table is inconsistent, or an opcode in it has no implementation
    (no lane function for the models, no RTL for the hardware)."""


def _column(times, ndim: int):
    """A per-row count as a column that broadcasts over the lanes of ``ndim``-D rows."""
    times = np.asarray(times, dtype=np.int64)
    return times.reshape((-1,) + (1,) * (ndim - 1)) if np.ndim(times) else times


def _shift(a: np.ndarray, k: int, times=1) -> np.ndarray:
    """SHR by ``k`` applied ``times`` times (array or int): right shifts compose to
    one arithmetic shift (saturating at 31), left shifts to one shift (0 past 31)."""
    total = _column(times, a.ndim) * abs(k)
    wide = a.astype(np.int64)
    if k >= 0:
        return (wide >> np.minimum(total, 31)).astype(np.int32)
    shifted = (wide << np.minimum(total, 32)) & _MASK32
    return _wrap32(np.where(total >= 32, 0, shifted))


# The lanes of the ``requant`` extension (TFLite's requantization, exactly) are
# :func:`~vtakit.hw.fixedpoint.srdhm`, :func:`~vtakit.hw.fixedpoint.rounding_shift` and
# :func:`~vtakit.hw.fixedpoint.mul_shift`.


@dataclass(frozen=True)
class AluSemantics:
    """One ALU opcode: its encoding, operand rules and the function it computes.

    Attributes
    ----------
    code : int
        The ``alu_opcode`` field value.
    name : str
    fn : callable or None
        ``fn(a, b) -> int32 array``: the lane function on int32 lanes; ``a`` is an int32
        array (the destination), ``b`` an int32 array of the same shape (tensor operand)
        or a Python int (the sign-extended immediate). Results wrap modulo ``2**32``.
        With ``tensor_imm``: ``fn(a, b, k)``, ``k`` the instruction's immediate field.
        None: not implemented, so the models refuse to run it (use :meth:`function`).
    tensor : bool
        A tensor operand (``use_imm=0``) is legal.
    imm : bool
        An immediate operand (``use_imm=1``) is legal.
    imm_range : (int, int)
        Legal immediates, inclusive (the whole 16-bit field unless restricted).
    tensor_imm : (int, int) or None
        The opcode takes the immediate field as a third operand of its tensor form: a
        ``use_imm=0`` instruction is legal only with ``imm`` in this range (inclusive).
        Such an opcode takes no ``use_imm=1`` form (``imm`` must be False).
    base : bool
        Legal in the base ISA (HW_VER 0.0.2). An opcode with ``base=False`` is legal only
        in a config that enables its ``extension``.
    extension : str or None
        The ISA extension (a key of :data:`~vtakit.hw.spec.EXTENSIONS`) that makes a
        non-base opcode legal; None with ``base=False``: legal nowhere.
    repeat : callable or None
        Optional fast form for the behavioral model: ``repeat(a, b, n)`` is ``fn`` applied
        ``n[i]`` times (``n >= 1``) to row ``a[i]`` with the same immediate ``b``.
    reduce : numpy.ufunc or None
        Optional: the op is commutative and associative as this ufunc, so repeated
        destinations with unwritten operands may be folded in any order.
    registers : dict or None
        Per-lane ALU registers (state that persists across instructions, reset to 0) this
        opcode uses: ``{imm: name}``. The tensor form with one of these immediates *loads*
        the register ``name`` from the tensor operand (``REG[name] = ACC[src]``, lane by
        lane; no SRAM write); with any other immediate ``fn(a, b, regs)`` computes the
        lane, ``regs`` the registers by name (arrays that broadcast against ``a``).
    """

    code: int
    name: str
    fn: Callable | None
    tensor: bool = True
    imm: bool = True
    imm_range: tuple = (IMM_MIN, IMM_MAX)
    base: bool = True
    repeat: Callable | None = None
    reduce: np.ufunc | None = None
    tensor_imm: tuple | None = None
    extension: str | None = None
    registers: dict | None = field(default=None, hash=False)

    def __str__(self):
        return f"{self.name}={int(self.code)}"

    def uses_imm_field(self, use_imm) -> bool:
        """Whether an instruction with this ``use_imm`` reads its ``imm`` field."""
        return bool(use_imm) or self.tensor_imm is not None

    def imm_meaning(self) -> str:
        """What the imm field of the tensor form means (``tensor_imm`` opcodes), for
        messages."""
        lo, hi = self.tensor_imm
        if self.registers is None:
            return f"shift {lo}..{hi}"
        modes = ", ".join(f"{k} loads {v}" for k, v in sorted(self.registers.items()))
        return f"mode {lo}..{hi} ({modes}, else compute)"

    def loads_register(self, use_imm, imm) -> str | None:
        """The ALU register an instruction with these fields loads from its tensor
        operand (see ``registers``), or None when it computes lanes."""
        if self.registers is None or use_imm:
            return None
        return self.registers.get(int(imm))

    def function(self, imm=None, regs=None) -> Callable:
        """The lane function as ``f(a, b)``; for a ``tensor_imm`` opcode, with the
        instruction's immediate field ``imm`` bound as its third operand; for an opcode
        with ``registers``, with the register values ``regs`` (``{name: array}``) bound.
        :class:`AluTableError` if the table gives none."""
        if self.fn is None:
            raise AluTableError(f"ALU opcode {self} is in the ALU table (vtakit.hw.isa.ALU_OPS) "
                                f"without a lane function, so the models cannot execute it; "
                                f"give it fn=...")
        fn = self.fn
        if self.registers is not None:
            if regs is None:
                raise AluTableError(f"ALU opcode {self} reads the ALU registers "
                                    f"{', '.join(sorted(set(self.registers.values())))}: pass regs")
            return lambda a, b: fn(a, b, regs)
        if self.tensor_imm is None:
            return fn
        k = int(imm)
        return lambda a, b: fn(a, b, k)


#: The ALU opcodes: the one definition of what each computes and which operands it takes.
#: MIN and MAX are signed; ADD wraps modulo 2**32; SHR shifts every lane by the immediate
#: ``k`` (``k >= 0``: arithmetic right shift; ``k < 0``: left shift by ``-k`` keeping the
#: low 32 bits) and takes no tensor operand.
#:
#: The ``requant`` extension (legal only in a config with ``"EXTENSIONS": ["requant"]``),
#: TFLite's requantization with per-lane (per-channel) multipliers and shifts from a
#: tensor operand ``b`` (a row of the accumulator SRAM):
#: SRDHM ``a = SaturatingRoundingDoublingHighMul(a, b)`` (:func:`srdhm`); RSHR
#: ``a = RoundingDivideByPOT(a, b)``, negative ``b`` a left shift (:func:`rounding_shift`);
#: MULSHR ``a = (a*b + 2^(k-1)) >> k`` with ``k`` the immediate field, 1..62, of the
#: ``use_imm=0`` instruction (:func:`mul_shift`, TFLite's single rounding).
#:
#: The ``requant2`` extension: REQ, tensor form only, the immediate 0..2 selecting what it
#: does with the per-lane registers RM and RP (:data:`~AluSemantics.registers`): imm 1
#: ``RM = ACC[src]``, imm 2 ``RP = ACC[src]`` (no SRAM write), imm 0
#: ``ACC[dst] = requantize_word(ACC[dst] + ACC[src], RM, RP)``: the whole TFLite
#: requantize, zero point and clamp of a biased accumulator
#: (:func:`~vtakit.hw.fixedpoint.requantize_word`; RP packed by
#: :func:`~vtakit.hw.fixedpoint.pack_requant_word`).
REQ_RUN, REQ_LOAD_M, REQ_LOAD_P = 0, 1, 2      # REQ's modes (its imm field)

ALU_OPS = (
    AluSemantics(AluOp.MIN, "MIN", lambda a, b: np.minimum(a, b),
                 repeat=lambda a, b, n: np.minimum(a, b), reduce=np.minimum),
    AluSemantics(AluOp.MAX, "MAX", lambda a, b: np.maximum(a, b),
                 repeat=lambda a, b, n: np.maximum(a, b), reduce=np.maximum),
    AluSemantics(AluOp.ADD, "ADD", lambda a, b: _wrap32(a.astype(np.int64) + b),
                 repeat=lambda a, b, n: _wrap32(a.astype(np.int64)
                                                + np.int64(b) * _column(n, a.ndim)),
                 reduce=np.add),
    AluSemantics(AluOp.SHR, "SHR", lambda a, b: _shift(a, b), tensor=False,
                 imm_range=(-SHIFT_LIMIT, SHIFT_LIMIT), repeat=_shift),
    AluSemantics(AluOp.SRDHM, "SRDHM", srdhm, imm=False, base=False, extension="requant"),
    AluSemantics(AluOp.RSHR, "RSHR", rounding_shift, imm=False, base=False,
                 extension="requant"),
    AluSemantics(AluOp.MULSHR, "MULSHR", mul_shift, imm=False, tensor_imm=(1, 62), base=False,
                 extension="requant"),
    AluSemantics(AluOp.REQ, "REQ", lambda a, b, regs: requantize_word(
        _wrap32(a.astype(np.int64) + b), regs["RM"], regs["RP"]), imm=False,
        tensor_imm=(REQ_RUN, REQ_LOAD_P), base=False, extension="requant2",
        registers={REQ_LOAD_M: "RM", REQ_LOAD_P: "RP"}),
)


def _check_table(table) -> dict:
    codes = [int(e.code) for e in table]
    for e in table:
        if not 0 <= e.code < 1 << ALU_OPCODE_BITS:
            raise AluTableError(f"ALU opcode {e} does not fit the {ALU_OPCODE_BITS}-bit "
                                f"alu_opcode field")
        if codes.count(int(e.code)) > 1:
            raise AluTableError(f"ALU opcode {int(e.code)} appears twice in the ALU table")
        lo, hi = e.imm_range
        if not IMM_MIN <= lo <= hi <= IMM_MAX:
            raise AluTableError(f"ALU opcode {e}: immediate range {lo}..{hi} is outside the "
                                f"{IMM_BITS}-bit field {IMM_MIN}..{IMM_MAX}")
        if not (e.tensor or e.imm):
            raise AluTableError(f"ALU opcode {e} takes neither a tensor nor an immediate")
        if e.code in AluOp._value2member_map_ and AluOp(e.code).name != e.name:
            raise AluTableError(f"ALU opcode {e} is {AluOp(e.code).name} in hw.spec.AluOp")
        if e.extension is not None and (e.base or e.extension not in EXTENSIONS):
            raise AluTableError(f"ALU opcode {e}: extension {e.extension!r} needs base=False "
                                f"and a name of hw.spec.EXTENSIONS ({', '.join(EXTENSIONS)})")
        if e.tensor_imm is not None:
            lo, hi = e.tensor_imm
            if not (e.tensor and not e.imm and IMM_MIN <= lo <= hi <= IMM_MAX):
                raise AluTableError(f"ALU opcode {e}: tensor_imm {lo}..{hi} needs tensor=True, "
                                    f"imm=False and a range inside {IMM_MIN}..{IMM_MAX}")
        if e.registers is not None:
            lo, hi = e.tensor_imm or (0, -1)
            if not e.registers or not all(lo <= k <= hi for k in e.registers):
                raise AluTableError(f"ALU opcode {e}: the immediates of its registers "
                                    f"{sorted(e.registers)} must lie inside tensor_imm")
    return {int(e.code): e for e in sorted(table, key=lambda e: e.code)}


_checked: tuple = (None, {}, {})


def _extensions(config) -> frozenset:
    """The extension names of ``config``: a VTAConfig, None (the base ISA) or a
    collection of names."""
    if config is None:
        return frozenset()
    ext = getattr(config, "extensions", config)
    return frozenset((ext,) if isinstance(ext, str) else ext)


def _table() -> dict:
    """``{code: entry}`` of the whole table (legal or not), checked once per table object."""
    global _checked
    if _checked[0] is not ALU_OPS:
        _checked = (ALU_OPS, _check_table(ALU_OPS), {})
    return _checked[1]


def _legal(config=None) -> dict:
    """``{code: entry}`` of the opcodes legal in ``config`` (see :func:`alu_ops`)."""
    table = _table()
    ext = _extensions(config)
    by_ext = _checked[2]
    if ext not in by_ext:
        by_ext[ext] = {c: e for c, e in table.items()
                       if e.base or (e.extension is not None and e.extension in ext)}
    return by_ext[ext]


def alu_ops(config=None) -> tuple:
    """The ALU opcodes legal in ``config`` by code, checked: distinct codes that fit the
    ``alu_opcode`` field, immediates inside the field.

    ``config``: a :class:`~vtakit.hw.config.VTAConfig`, a collection of extension names,
    or None for the base ISA (HW_VER 0.0.2: the entries with ``base``). An entry with
    ``base=False`` is legal only where its ``extension`` is enabled. Every function below
    takes ``config`` the same way."""
    return tuple(_legal(config).values())


def alu_entry(code) -> AluSemantics | None:
    """The table entry with this code whether or not any config makes it legal (names
    for the disassembler), or None."""
    return _table().get(int(code))


def alu_semantics(code, config=None) -> AluSemantics | None:
    """The ALU opcode with this code legal in ``config``, or None."""
    return _legal(config).get(int(code))


def illegal_alu_opcodes(config=None) -> list[int]:
    """The ``alu_opcode`` field values that are no legal opcode in ``config``, ascending."""
    legal = _legal(config)
    return [v for v in range(1 << ALU_OPCODE_BITS) if v not in legal]


def alu_registers(config=None) -> tuple:
    """The names of the per-lane ALU registers of ``config`` (those of its legal opcodes'
    ``registers``), sorted; empty for the base ISA."""
    return tuple(sorted({n for e in alu_ops(config) for n in (e.registers or {}).values()}))


def alu_opcode_bits(config=None) -> int:
    """Bits the RTL keeps of an ``alu_opcode`` legal in ``config`` (enough for the largest)."""
    return max(1, max(int(e.code) for e in alu_ops(config)).bit_length())


def alu_violation(code, use_imm, imm, config=None) -> str | None:
    """Why an ALU instruction with these operand fields is illegal in ``config`` (a
    sentence that starts with the opcode; callers prefix ``"ALU "`` or their context), or
    None if legal. The behavioral model, the sequential spec and the kernel builder all
    ask this."""
    e = alu_semantics(code, config)
    if e is None:
        text = (f"opcode {int(code)} is illegal; legal opcodes are "
                + ", ".join(str(o) for o in alu_ops(config)))
        other = alu_entry(code)
        if other is not None and other.extension is not None:
            text += (f"; {other} needs the ISA extension {other.extension!r} "
                     f"(config key \"EXTENSIONS\": [\"{other.extension}\"])")
        return text
    if not use_imm and not e.tensor:
        return f"{e.name} needs use_imm=1 (an immediate); a tensor operand is not supported"
    if use_imm and not e.imm:
        if e.tensor_imm is not None:
            return (f"{e.name} needs use_imm=0 (a tensor operand); its imm field is the "
                    f"{e.imm_meaning()}, not an operand")
        return f"{e.name} needs use_imm=0 (a tensor operand); an immediate is not supported"
    lo, hi = e.imm_range
    if use_imm and not lo <= imm <= hi:
        return f"{e.name} imm {imm} is out of range; {e.name} immediates are {lo}..{hi}"
    if not use_imm and e.tensor_imm is not None and not e.tensor_imm[0] <= imm <= e.tensor_imm[1]:
        lo, hi = e.tensor_imm
        return (f"{e.name} imm {imm} is out of range; {e.name} takes a tensor operand "
                f"(use_imm=0) and an imm field that is the {e.imm_meaning()}")
    return None


@dataclass(frozen=True)
class Field:
    """One instruction field: ``width`` bits at bit ``offset`` of the word."""

    name: str
    width: int
    offset: int
    signed: bool = False

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    @property
    def min(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else self.mask

    def extract(self, word: int) -> int:
        v = (word >> self.offset) & self.mask
        if self.signed and v >> (self.width - 1):
            v -= 1 << self.width
        return v


class Format:
    """The field table of one instruction kind.

    Parameters
    ----------
    name : str
        Kind name (``"MEM"``, ``"GEMM"``, ``"ALU"``, ``"FINISH"``, ``"UOP"``).
    bits : int
        Word width (128 for instructions, 32 for micro-ops).
    unit : int
        Storage unit of the packing rule (64 for instructions, 32 for micro-ops).
    specs : sequence of (name, width) or (name, width, signed)
        Fields in declaration order.
    """

    def __init__(self, name, bits, unit, specs):
        self.name = name
        self.bits = bits
        fields, pos = [], 0
        for spec in specs:
            fname, width, signed = (*spec, False)[:3]
            if pos // unit != (pos + width - 1) // unit:
                pos = (pos // unit + 1) * unit
            fields.append(Field(fname, width, pos, signed))
            pos += width
        if pos > bits:
            # VTAConfig's validation rejects every config that gets here; keep the guard.
            raise IsaError(f"{name} field {fields[-1].name} ends at bit {pos} > {bits}")
        self.fields = tuple(fields)
        self.by_name = {f.name: f for f in fields}
        self._unpack = tuple((f.name, f.offset, f.mask, 1 << f.width if f.signed else 0)
                             for f in fields)      # what decode needs, computed once

    def __repr__(self):
        return f"Format({self.name}: " + ", ".join(
            f"{f.name}[{f.offset + f.width - 1}:{f.offset}]" for f in self.fields) + ")"

    def __getitem__(self, name) -> Field:
        return self.by_name[name]

    def encode(self, **values) -> int:
        """Pack field values into a word; missing fields are zero."""
        word = 0
        for fname, value in values.items():
            f = self.by_name.get(fname)
            if f is None:
                raise IsaError(f"{self.name} instruction has no field {fname!r}; fields are "
                               + ", ".join(self.by_name))
            value = int(value)
            if not f.min <= value <= f.max:
                raise IsaError(f"{self.name} field {fname}={value} does not fit in "
                               f"{f.width} {'signed ' if f.signed else ''}bits "
                               f"(range {f.min}..{f.max})")
            word |= (value & f.mask) << f.offset
        return word

    def decode(self, word: int) -> dict:
        """Unpack a word into ``{field: value}`` (what :meth:`Field.extract` gives)."""
        out = {}
        for name, offset, mask, wrap in self._unpack:
            v = (word >> offset) & mask
            out[name] = v - wrap if wrap and v >= wrap >> 1 else v
        return out

    def layout(self):
        """The ``amaranth.lib.data`` layout of this word, for RTL decoders."""
        from amaranth.hdl import signed, unsigned
        from amaranth.lib import data
        return data.FlexibleLayout(self.bits, {
            f.name: data.Field(signed(f.width) if f.signed else unsigned(f.width), f.offset)
            for f in self.fields})


class Insn:
    """A decoded instruction: ``opcode``, its :class:`Format` and field values.

    Field values are attributes (``insn.x_size``); ``str(insn)`` disassembles.
    """

    __slots__ = ("opcode", "format", "fields", "word")

    def __init__(self, opcode, fmt, fields, word):
        self.opcode = opcode
        self.format = fmt
        self.fields = fields
        self.word = word

    def __getattr__(self, name):
        # only field names: ``fields`` itself is unset while pickle and copy rebuild an
        # instance and look up hooks such as ``__setstate__`` (it would recurse)
        if name == "fields" or name.startswith("__"):
            raise AttributeError(name)
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def is_nop(self) -> bool:
        """A LOAD/STORE with ``x_size == 0``: sync only, no data movement."""
        return self.opcode in (Opcode.LOAD, Opcode.STORE) and self.fields["x_size"] == 0

    def __str__(self):
        if not isinstance(self.opcode, Opcode):
            return f"ILLEGAL opcode={self.opcode} word=0x{self.word:032x}"
        name = self.opcode.name
        sub = ""
        if self.opcode in (Opcode.LOAD, Opcode.STORE):
            mt = self.fields["memory_type"]
            sub = MemType(mt).name if mt in MemType._value2member_map_ else f"mem{mt}"
        elif self.opcode == Opcode.ALU:
            op = self.fields["alu_opcode"]
            e = alu_entry(op)
            sub = e.name if e is not None else f"aluop{op}"
        deps = [d[:-4] for d in DEP_FLAGS if self.fields[d]]
        rest = " ".join(f"{k}={v}" for k, v in self.fields.items()
                        if k != "opcode" and k not in DEP_FLAGS)
        text = f"{name:<6} {sub:<4} [{' '.join(deps)}]"
        if rest:
            text += " " + rest
        if self.is_nop:
            text += "  ; nop"
        return text

    __repr__ = __str__


@dataclass(frozen=True)
class Uop:
    """A decoded micro-op."""

    dst_idx: int
    src_idx: int
    wgt_idx: int

    def __str__(self):
        return f"UOP dst_idx={self.dst_idx} src_idx={self.src_idx} wgt_idx={self.wgt_idx}"


_HEADER = (("opcode", OPCODE_BITS),) + tuple((d, 1) for d in DEP_FLAGS)


class ISA:
    """The field tables of every instruction kind for one config.

    Attributes
    ----------
    mem, gemm, alu, finish, uop : Format
        LOAD/STORE, GEMM, ALU, FINISH and micro-op tables.
    """

    def __init__(self, config: VTAConfig):
        self.config = config
        c = config
        u, a, i, w = c.log_uop_depth, c.log_acc_depth, c.log_inp_depth, c.log_wgt_depth
        U = ENCODING_UNIT_BITS
        self.mem = Format("MEM", INSN_BITS, U, _HEADER + (
            ("memory_type", MEM_TYPE_BITS), ("sram_base", SRAM_BASE_BITS),
            ("dram_base", DRAM_BASE_BITS), ("y_size", XFER_BITS), ("x_size", XFER_BITS),
            ("x_stride", XFER_BITS), ("y_pad_0", PAD_BITS), ("y_pad_1", PAD_BITS),
            ("x_pad_0", PAD_BITS), ("x_pad_1", PAD_BITS)))
        loop = (("reset_reg", 1), ("uop_bgn", u), ("uop_end", u + 1),
                ("iter_out", LOOP_ITER_BITS), ("iter_in", LOOP_ITER_BITS),
                ("dst_factor_out", a), ("dst_factor_in", a))
        self.gemm = Format("GEMM", INSN_BITS, U, _HEADER + loop + (
            ("src_factor_out", i), ("src_factor_in", i),
            ("wgt_factor_out", w), ("wgt_factor_in", w)))
        self.alu = Format("ALU", INSN_BITS, U, _HEADER + loop + (
            ("src_factor_out", a), ("src_factor_in", a),
            ("alu_opcode", ALU_OPCODE_BITS), ("use_imm", 1), ("imm", IMM_BITS, True)))
        self.finish = Format("FINISH", INSN_BITS, U, _HEADER)
        self.uop = Format("UOP", UOP_BITS, UOP_BITS, (
            ("dst_idx", a), ("src_idx", max(a, i)), ("wgt_idx", w)))
        self._by_opcode = {Opcode.LOAD: self.mem, Opcode.STORE: self.mem,
                           Opcode.GEMM: self.gemm, Opcode.ALU: self.alu,
                           Opcode.FINISH: self.finish}

    def format(self, opcode) -> Format:
        try:
            return self._by_opcode[Opcode(opcode)]
        except ValueError:
            raise IsaError(f"illegal opcode {int(opcode)}; legal opcodes are "
                           + ", ".join(f"{o.name}={o.value}" for o in Opcode)) from None

    # ------------------------------------------------------------- instructions

    def encode(self, opcode, **fields) -> int:
        """Encode one instruction as a 128-bit integer."""
        opcode = Opcode(opcode)
        return self.format(opcode).encode(opcode=int(opcode), **fields)

    def decode(self, word: int) -> Insn:
        """Decode a 128-bit instruction word; an illegal opcode gives an ``Insn``
        whose ``opcode`` is a plain int and whose ``format`` is the FINISH header."""
        word = int(word)
        if not 0 <= word < 1 << INSN_BITS:
            raise IsaError(f"instruction word 0x{word:x} is wider than {INSN_BITS} bits")
        op = word & ((1 << OPCODE_BITS) - 1)
        try:
            opcode = Opcode(op)
        except ValueError:
            return Insn(op, self.finish, self.finish.decode(word), word)
        fmt = self._by_opcode[opcode]
        return Insn(opcode, fmt, fmt.decode(word), word)

    def disasm(self, words, start: int = 0) -> list[str]:
        """One line per instruction: index, opcode, dep flags and every field."""
        return [f"{start + n:6d}: {self.decode(w)}" for n, w in enumerate(words)]

    # ---------------------------------------------------------------- micro-ops

    def encode_uop(self, dst_idx: int, src_idx: int = 0, wgt_idx: int = 0) -> int:
        return self.uop.encode(dst_idx=dst_idx, src_idx=src_idx, wgt_idx=wgt_idx)

    def encode_uops(self, uops) -> np.ndarray:
        """Vectorized :meth:`encode_uop` of a sequence of ``(dst, src, wgt)`` triples: a
        uint32 array; IsaError (the scalar encoder's, for the first bad uop) when a field
        does not fit."""
        a = np.asarray(uops, dtype=np.int64).reshape(-1, 3)
        words = np.zeros(len(a), np.int64)
        for col, name in enumerate(("dst_idx", "src_idx", "wgt_idx")):
            f = self.uop.by_name[name]
            v = a[:, col]
            bad = (v < f.min) | (v > f.max)
            if bad.any():
                self.encode_uop(*(int(x) for x in a[int(np.argmax(bad))]))   # raises
            words |= (v & f.mask) << f.offset
        return words.astype(np.uint32)

    def decode_uop(self, word: int) -> Uop:
        return Uop(**self.uop.decode(int(word)))

    def decode_uops(self, words) -> dict[str, np.ndarray]:
        """Vectorized decode of a uint32 array into ``dst_idx``/``src_idx``/``wgt_idx`` arrays."""
        words = np.asarray(words, dtype=np.uint32).astype(np.int64)
        return {f.name: (words >> f.offset) & f.mask for f in self.uop.fields}


@lru_cache(maxsize=None)
def isa_for(config: VTAConfig) -> ISA:
    """The (cached) :class:`ISA` of a config."""
    return ISA(config)


def insns_to_bytes(words) -> bytes:
    """128-bit instruction words as little-endian bytes, 16 per instruction."""
    return b"".join(int(w).to_bytes(INSN_BYTES, "little") for w in words)


def bytes_to_words(data, nbytes: int) -> list[int]:
    """Split little-endian bytes into ``nbytes``-wide integers (:data:`INSN_BYTES` for
    instructions, :data:`UOP_BYTES` for micro-ops)."""
    data = bytes(data)
    if len(data) % nbytes:
        raise IsaError(f"{len(data)} bytes is not a whole number of {nbytes}-byte words")
    return [int.from_bytes(data[k:k + nbytes], "little") for k in range(0, len(data), nbytes)]
