"""The plain sequential specification of VTA's datapath (reference section 3).

One instruction at a time, one element or micro-op at a time, in the order the
reference defines: a LOAD fills its destination row by row (pads are zeros), a STORE
writes its rows in order (a later row wins where rows overlap), GEMM and ALU run
their loops p > q > k. Nothing here is vectorized or clever: this module is the
definition that the fast numpy datapath (:mod:`vtakit.sim.datapath`, which the
behavioral model runs) is diffed against in the tests, not something to run programs on.

Every function works on a :class:`~vtakit.sim.datapath.SRAMs` (its ``inp``, ``wgt``,
``acc``, ``out`` and ``uop`` arrays, updated in place) and the DRAM bytes, counts into
fsim's :class:`~vtakit.sim.datapath.Counters`, and raises
:class:`~vtakit.sim.datapath.Fault` with the same error code as the datapath: field
and DMA faults before anything moves; an out-of-range SRAM index in a GEMM or ALU loop
after every iteration before it has executed (as the RTL does).
"""

from __future__ import annotations

import numpy as np

from ..hw.fixedpoint import wrap_int32
from ..hw.isa import alu_semantics, alu_violation
from ..hw.spec import DRAM_ADDR_BITS, ErrorCode, MemType, Opcode
from .datapath import Counters, Fault, SRAMs

__all__ = ["execute", "load", "store", "gemm", "alu"]

_LOAD_SRAM = {MemType.INP: "inp", MemType.WGT: "wgt", MemType.ACC: "acc", MemType.UOP: "uop"}


def execute(srams: SRAMs, insn, dram: np.ndarray, counters: Counters) -> None:
    """Execute one decoded instruction (LOAD, STORE, GEMM, ALU; FINISH and sync-only
    NOPs do nothing)."""
    if insn.opcode == Opcode.FINISH or insn.is_nop:
        return
    {Opcode.LOAD: lambda: load(srams, insn, dram, counters),
     Opcode.STORE: lambda: store(srams, insn, dram, counters),
     Opcode.GEMM: lambda: gemm(srams, insn, counters),
     Opcode.ALU: lambda: alu(srams, insn, counters)}[insn.opcode]()


# ----------------------------------------------------------------------- DMA

def _dram_spans(insn, dram, ebytes):
    """The DRAM byte range of every element of a LOAD/STORE, row by row. Every byte must
    lie below 2**32 (else DRAM_OUT_OF_RANGE, the hardware's fault) and inside the
    simulated image (else DRAM_IMAGE), checked in that order before anything moves."""
    rows = [[(insn.dram_base + y * insn.x_stride + x) * ebytes for x in range(insn.x_size)]
            for y in range(insn.y_size)]
    starts = [start for row in rows for start in row]
    for limit, code in ((1 << DRAM_ADDR_BITS, ErrorCode.DRAM_OUT_OF_RANGE),
                        (len(dram), ErrorCode.DRAM_IMAGE)):
        bad = [start for start in starts if start + ebytes > limit]
        if bad:
            raise Fault(code, f"DRAM element at byte 0x{bad[0]:x} is past 0x{limit:x}")
    return [[slice(start, start + ebytes) for start in row] for row in rows]


def load(srams: SRAMs, insn, dram: np.ndarray, counters: Counters) -> None:
    """LOAD: DRAM -> SRAM (2-D, with zero pads for INP/WGT/ACC; UOP: one row, no pads)."""
    mt = insn.memory_type
    if mt not in _LOAD_SRAM:
        raise Fault(ErrorCode.ILLEGAL_MEMORY_TYPE, f"LOAD memory_type {mt}")
    pads = (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)
    if mt == MemType.UOP and (insn.y_size != 1 or any(pads)):
        raise Fault(ErrorCode.ILLEGAL_FIELD, "LOAD UOP needs y_size 1 and no pads")
    name = _LOAD_SRAM[mt]
    sram = getattr(srams, name)
    ebytes = srams.config.elem_bytes(mt)
    x_total = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    y_total = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    if insn.sram_base + x_total * y_total > len(sram):
        raise Fault(ErrorCode.SRAM_OUT_OF_RANGE, f"LOAD {name} past its depth {len(sram)}")
    spans = _dram_spans(insn, dram, ebytes)
    raw = sram.view(np.uint8).reshape(len(sram), ebytes)
    index = insn.sram_base
    for y in range(y_total):
        for x in range(x_total):
            inside = (insn.y_pad_0 <= y < insn.y_pad_0 + insn.y_size
                      and insn.x_pad_0 <= x < insn.x_pad_0 + insn.x_size)
            if inside:
                raw[index] = dram[spans[y - insn.y_pad_0][x - insn.x_pad_0]]
            else:
                raw[index] = 0
            index += 1
    counters[f"{name}_load_nbytes"] += insn.x_size * insn.y_size * ebytes


def store(srams: SRAMs, insn, dram: np.ndarray, counters: Counters) -> None:
    """STORE: OUT -> DRAM (2-D, no pads)."""
    if insn.memory_type != MemType.OUT:
        raise Fault(ErrorCode.ILLEGAL_MEMORY_TYPE, f"STORE memory_type {insn.memory_type}")
    if insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1:
        raise Fault(ErrorCode.ILLEGAL_FIELD, "STORE pads must be 0")
    out = srams.out
    ebytes = srams.config.out_elem_bytes
    if insn.sram_base + insn.x_size * insn.y_size > len(out):
        raise Fault(ErrorCode.SRAM_OUT_OF_RANGE, f"STORE out past its depth {len(out)}")
    spans = _dram_spans(insn, dram, ebytes)
    raw = out.view(np.uint8).reshape(len(out), ebytes)
    index = insn.sram_base
    for row in spans:
        for span in row:
            dram[span] = raw[index]
            index += 1
    counters["out_store_nbytes"] += insn.x_size * insn.y_size * ebytes


# ------------------------------------------------------------------- compute

def _loop(srams: SRAMs, insn):
    """The micro-op loop of GEMM/ALU in sequential order: yields (p, q, uop)."""
    depth = len(srams.uop)
    if insn.uop_end < insn.uop_bgn or insn.uop_end > depth:
        raise Fault(ErrorCode.ILLEGAL_FIELD, f"uop range [{insn.uop_bgn}, {insn.uop_end})")
    isa = srams.isa
    for p in range(insn.iter_out):
        for q in range(insn.iter_in):
            for k in range(insn.uop_bgn, insn.uop_end):
                yield p, q, isa.decode_uop(int(srams.uop[k]))


def _index(name, value, depth):
    if value >= depth:
        raise Fault(ErrorCode.SRAM_OUT_OF_RANGE, f"{name} index {value} >= depth {depth}")
    return value


def gemm(srams: SRAMs, insn, counters: Counters) -> None:
    """GEMM: ``ACC[d] = 0`` (reset, OUT untouched), or ``ACC[d] += INP[s] . WGT[w]^T``
    wrapping at 32 bits and ``OUT[d] = low 8 bits of ACC[d]``."""
    acc, out, inp, wgt = srams.acc, srams.out, srams.inp, srams.wgt
    for p, q, u in _loop(srams, insn):
        d = _index("acc", u.dst_idx + p * insn.dst_factor_out + q * insn.dst_factor_in, len(acc))
        if insn.reset_reg:
            acc[d] = 0
            continue
        s = _index("inp", u.src_idx + p * insn.src_factor_out + q * insn.src_factor_in, len(inp))
        w = _index("wgt", u.wgt_idx + p * insn.wgt_factor_out + q * insn.wgt_factor_in, len(wgt))
        for b in range(acc.shape[1]):
            for o in range(acc.shape[2]):
                dot = sum(int(inp[s, b, i]) * int(wgt[w, o, i]) for i in range(inp.shape[2]))
                acc[d, b, o] = wrap_int32(np.int64(int(acc[d, b, o]) + dot))
        out[d] = acc[d].astype(np.int8)
        counters["gemm_counter"] += 1


def alu(srams: SRAMs, insn, counters: Counters) -> None:
    """ALU: ``ACC[d] = op(ACC[d], imm or ACC[s])`` lane by lane with the opcode's function
    in :data:`~vtakit.hw.isa.ALU_OPS` (wrapping at 32 bits; an opcode with ``tensor_imm``
    also takes the immediate field), and ``OUT[d] = low 8 bits of ACC[d]``; the operand
    rules are the table's for the config (SHR only with an immediate in
    ``[-SHIFT_LIMIT, SHIFT_LIMIT]``, extension opcodes only with their extension). An
    instruction that loads an ALU register (REQ's setup forms) sets it to ``ACC[s]`` per
    micro-op and writes no SRAM."""
    violation = alu_violation(insn.alu_opcode, insn.use_imm, insn.imm, srams.config)
    if violation is not None:
        raise Fault(ErrorCode.ILLEGAL_FIELD, "ALU " + violation)
    op = alu_semantics(insn.alu_opcode, srams.config)
    register = op.loads_register(insn.use_imm, insn.imm)
    regs = srams.alu_regs
    acc, out = srams.acc, srams.out
    for p, q, u in _loop(srams, insn):
        d = _index("acc", u.dst_idx + p * insn.dst_factor_out + q * insn.dst_factor_in, len(acc))
        if not insn.use_imm:
            s = _index("acc", u.src_idx + p * insn.src_factor_out + q * insn.src_factor_in,
                       len(acc))
        if register is not None:      # REG = ACC[s], no SRAM write
            regs[register][...] = acc[s]
            counters["alu_counter"] += 1
            continue
        for b in range(acc.shape[1]):
            for o in range(acc.shape[2]):
                fn = op.function(insn.imm, {k: v[b, o:o + 1] for k, v in regs.items()})
                other = insn.imm if insn.use_imm else acc[s, b, o:o + 1]
                acc[d, b, o:o + 1] = fn(acc[d, b, o:o + 1], other)
        out[d] = acc[d].astype(np.int8)
        counters["alu_counter"] += 1
