"""Fused epilogues: the ALU passes that turn int32 accumulators into the stored int8.

An :class:`Epilogue` describes what happens between the last GEMM of an output
tile and its store (reference 5.6, requantization with power-of-two scales):

1. residual add, two ways (every add wraps mod 2^32, so where it happens does not
   change the result):

   * ``"int8"``: the residual (e.g. the previous layer's int8 output, read in place)
     is one more GEMM group of the tile: the load module streams its int8 tile into
     an inp slot and one GEMM micro-op loop adds it through an identity weight tile
     (one cycle per accumulator, overlapped with the other loads);
   * ``"int32"``: the accumulators *start* from the residual tile (LOAD ACC of int32
     data on the compute module, 4x the bytes) instead of a reset GEMM;
2. per-channel bias: LOAD ACC of one acc element per output-channel block, then
   ALU ADD tensor with a zero source stride along the tile; the rounding
   constant ``2^(shift-1)`` is folded into the bias on the host (wrapping add);
3. rounding without a bias: ALU ADD imm ``2^(shift-1)`` (an immediate holds at
   most 2^14, so for ``shift > 15`` a zero bias tile carries the constant);
4. shift: ALU SHR imm ``shift``;
5. clip: ALU MAX imm ``lo`` then MIN imm ``hi`` (``relu`` raises lo to 0).

The narrowing store keeps the low 8 bits of every lane; without a clip to
[-128, 127] values outside int8 wrap, exactly as in :func:`reference.epilogue_ref`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...hw.errors import VtakitError
from ...hw.isa import AluOp
from ...hw.spec import IMM_MAX, IMM_MIN, SHIFT_LIMIT
from ...runtime import UopKernel
from .loops import Dim, fold_loops
from .reference import wrap32

__all__ = ["Epilogue", "EpilogueError", "MAX_SHIFT"]

#: Largest requantization shift (the ALU's shift limit).
MAX_SHIFT = SHIFT_LIMIT


class EpilogueError(VtakitError, ValueError):
    """An epilogue parameter VTA cannot execute (shift, clip bounds, dtype)."""


@dataclass(frozen=True)
class Epilogue:
    """What to apply to an int32 accumulator tile before the store.

    Parameters
    ----------
    bias : bool
        A per-output-channel int32 bias is added.
    residual : str or None
        ``"int8"`` (identity GEMM), ``"int32"`` (LOAD ACC) or None.
    shift : int
        Requantization shift (0..31): add ``2^(shift-1)`` then shift right arithmetically.
    lo, hi : int or None
        Clip bounds (signed 16-bit immediates); ``relu`` is ``lo=0``.
    out_dtype : str
        ``"int8"`` (the store) or ``"int32"`` (four byte planes).
    op : str
        Operator name for messages.
    """

    bias: bool = False
    residual: str | None = None
    shift: int = 0
    lo: int | None = None
    hi: int | None = None
    out_dtype: str = "int8"
    op: str = "op"

    @classmethod
    def make(cls, *, bias=False, residual=False, shift=0, clip=None, relu=False,
             out_dtype=np.int8, op="op") -> "Epilogue":
        """Validate user arguments (``clip=(lo, hi)``, ``relu``) into an Epilogue.
        ``residual``: False/None, ``"int8"``/``np.int8``, or ``"int32"``/``np.int32``/True."""
        shift = int(shift)
        if not 0 <= shift <= MAX_SHIFT:
            raise EpilogueError(f"{op}: shift={shift} is outside 0..{MAX_SHIFT} (the ALU "
                                f"shifts by at most {SHIFT_LIMIT})")
        lo, hi = (None, None) if clip is None else (clip[0], clip[1])
        if relu:
            lo = 0 if lo is None else max(int(lo), 0)
        for name, v in (("lo", lo), ("hi", hi)):
            if v is not None and not IMM_MIN <= int(v) <= IMM_MAX:
                raise EpilogueError(f"{op}: clip {name}={v} does not fit a signed 16-bit ALU "
                                    f"immediate ({IMM_MIN}..{IMM_MAX})")
        if lo is not None and hi is not None and int(lo) > int(hi):
            raise EpilogueError(f"{op}: clip lo={lo} is greater than hi={hi}")
        dt = np.dtype(out_dtype).name
        if dt not in ("int8", "int32"):
            raise EpilogueError(f"{op}: out_dtype {dt} is not supported; VTA stores int8 "
                                "(int32 results are read back as four int8 byte planes)")
        if residual is None or residual is False:
            res = None
        elif residual is True:
            res = "int32"
        else:
            try:
                res = np.dtype(residual).name
            except TypeError:
                res = None
            if res not in ("int8", "int32"):
                raise EpilogueError(f"{op}: residual={residual!r}; expected 'int8', 'int32', "
                                    "True or None")
        return cls(bool(bias), res, shift, None if lo is None else int(lo),
                   None if hi is None else int(hi), dt, op)

    # ------------------------------------------------------------------ plan

    @property
    def round_const(self) -> int:
        return 1 << (self.shift - 1) if self.shift else 0

    @property
    def bias_tile(self) -> bool:
        """A per-channel acc tile is loaded (the bias, or the rounding constant alone)."""
        return self.bias or self.round_const > IMM_MAX

    def imm_passes(self) -> list:
        """[(AluOp, imm)] applied to every accumulator after the bias add."""
        out = []
        if self.round_const and not self.bias_tile:
            out.append((AluOp.ADD, self.round_const))
        if self.shift:
            out.append((AluOp.SHR, self.shift))
        if self.lo is not None:
            out.append((AluOp.MAX, self.lo))
        if self.hi is not None:
            out.append((AluOp.MIN, self.hi))
        return out

    @property
    def planes(self) -> int:
        return 4 if self.out_dtype == "int32" else 1

    def pack_bias_values(self, bias, channels: int) -> np.ndarray:
        """The int32 per-channel vector the bias tile holds: bias + rounding (wrapping)."""
        b = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64)
        if b.shape != (channels,):
            raise EpilogueError(f"{self.op}: bias has shape {b.shape}, expected ({channels},)")
        return wrap32(b + self.round_const)

    # ------------------------------------------------------------------ emit

    def emit(self, stream, acc_base: int, dims, bias_base: int | None = None,
             bias_dims=None) -> None:
        """Queue the ALU passes over one acc tile into ``stream`` (a
        :class:`~vtakit.runtime.ProgramBuilder` or a Runtime).

        Parameters
        ----------
        dims : list of Dim
            The tile's accumulators (dst strides), for the immediate passes.
        bias_dims : list of Dim
            The same nest with src strides selecting the tile's bias element.
        """
        if self.bias_tile:
            f = fold_loops(bias_dims, (acc_base, bias_base, 0))
            stream.push_alu(UopKernel.alu(AluOp.ADD, [u[:2] for u in f.uops],
                                      [lp[:3] for lp in f.loops]))
        passes = self.imm_passes()
        if passes:
            f = fold_loops([Dim(d.name, d.extent, d.dst, d.dst) for d in dims],
                           (acc_base, acc_base, 0))
            uops, loops = [u[:2] for u in f.uops], [lp[:3] for lp in f.loops]
            for op, imm in passes:
                stream.push_alu(UopKernel.alu(op, uops, loops, imm=imm))

    def emit_plane_shift(self, stream, acc_base: int, dims) -> None:
        """SHR imm 8 over the tile: exposes the next byte plane of an int32 result."""
        f = fold_loops([Dim(d.name, d.extent, d.dst, d.dst) for d in dims],
                       (acc_base, acc_base, 0))
        stream.push_alu(UopKernel.alu(AluOp.SHR, [u[:2] for u in f.uops],
                                  [lp[:3] for lp in f.loops], imm=8))

    def reference(self, acc, bias=None, residual=None) -> np.ndarray:
        """Numpy semantics of this epilogue (see :func:`reference.epilogue_ref`)."""
        from .reference import epilogue_ref
        return epilogue_ref(acc, bias=bias, residual=residual, shift=self.shift,
                            clip=(self.lo, self.hi), out_dtype=self.out_dtype)
