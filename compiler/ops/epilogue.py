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

A requantized add fused behind it (:class:`ResidualAdd`: ResNet's residual adds,
power-of-two scales) is a second stage after the clip: SHR imm ``-e_a`` (a left
shift), the ``"int8"`` residual's identity GEMM (weights ``2^e_b``; it then runs after
the first stage, not before it), ADD imm of the offset and rounding constant, SHR imm
``k``, MAX/MIN of the add's clip.

With the ISA extension ``"requant"`` (config ``EXTENSIONS``) an epilogue may instead
requantize exactly as TFLite (:class:`Requant`): after the bias, one ALU pass with a
tensor operand per per-channel *row* (int32 acc tiles loaded like the bias, one 2-D
LOAD ACC for all of them):

* double rounding (conv, depthwise: gemmlowp): ``RSHR`` by ``-max(s, 0)`` (a left
  shift, only when some channel has ``s > 0``), ``SRDHM`` by ``m``, ``RSHR`` by
  ``max(-s, 0)``;
* single rounding (FULLY_CONNECTED): ``MULSHR`` by ``m`` with the immediate
  ``k = 31 - s`` (one ``s`` for every channel);

then ALU ADD imm of the output zero point and the clip.

With the extension ``"requant2"`` (:class:`Requant2`) the whole requantize is one ALU
pass instead: two per-channel rows (the Q31 multipliers ``M`` and the parameter words
``P`` of :func:`~vtakit.hw.fixedpoint.pack_requant_word`: exponent, rounding, zero
point, clip) and, per output-channel block of a tile, ``REQ.M`` (imm 1, src the block's ``M`` row) and
``REQ.P`` (imm 2, src its ``P`` row) load the ALU's per-lane registers, then one
``REQ`` (imm 0) over the block's accumulators with src the bias row (zero stride along
the pixels) adds the bias, requantizes, adds the zero point and clamps.

The narrowing store keeps the low 8 bits of every lane; without a clip to
[-128, 127] values outside int8 wrap, exactly as in :func:`reference.epilogue_ref`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...hw.errors import VtakitError
from ...hw.fixedpoint import pack_requant_word
from ...hw.isa import REQ_LOAD_M, REQ_LOAD_P, REQ_RUN, AluOp
from ...hw.spec import IMM_MAX, IMM_MIN, SHIFT_LIMIT
from ...runtime import UopKernel
from .loops import Dim, fold_loops
from .reference import wrap32

__all__ = ["accumulation_bound", "Epilogue", "EpilogueError", "MAX_SHIFT", "Requant",
           "Requant2", "REQUANT_EXTENSION", "REQUANT2_EXTENSION", "ResidualAdd",
           "result_bytes_for"]

#: The config ``EXTENSIONS`` name of the exact-requantization ALU opcodes.
REQUANT_EXTENSION = "requant"
#: The config ``EXTENSIONS`` name of the one-pass requantize (ALU opcode REQ).
REQUANT2_EXTENSION = "requant2"

#: ``REQ``'s modes (its ``imm`` field, :data:`~vtakit.hw.isa.ALU_OPS`): the requantize
#: pass, and the loads of the multiplier (RM) and the parameter (RP) registers.
REQ_PASS = REQ_RUN

#: Largest requantization shift (the ALU's shift limit).
MAX_SHIFT = SHIFT_LIMIT


class EpilogueError(VtakitError, ValueError):
    """An epilogue parameter VTA cannot execute (shift, clip bounds, dtype)."""


def accumulation_bound(w) -> int:
    """The largest ``|sum(w * x)|`` over int8 ``x`` of any output channel (axis 0) of
    the int8 weight ``w``: ``128 * sum(|w|)``."""
    w = np.abs(np.asarray(w, np.int64))
    return 128 * int(w.reshape(w.shape[0], -1).sum(axis=1).max(initial=0))


def result_bytes_for(bound: int) -> int:
    """The byte planes (2..4) an int32 result needs when every value lies in
    ``[-bound, bound]``: the host sign-extends the top plane."""
    for n in (2, 3):
        if int(bound) < 1 << (8 * n - 1):
            return n
    return 4


@dataclass(frozen=True)
class Requant:
    """TFLite's exact requantization on the ALU extension ``"requant"``.

    Attributes
    ----------
    rounding : str
        ``"double"`` (gemmlowp: SRDHM then a rounding divide; TFLite conv, depthwise)
        or ``"single"`` (one 64-bit product and rounding; TFLite FULLY_CONNECTED).
    left : bool
        ``"double"``: some channel's exponent ``s`` is positive, so the accumulators are
        first shifted left by ``max(s, 0)`` (an RSHR row of ``-max(s, 0)``).
    right : bool
        ``"double"``: some channel's exponent is negative, so a rounding divide (an RSHR
        row of ``max(-s, 0)``) follows the SRDHM (a row of zeros would change nothing).
    k : int
        ``"single"``: MULSHR's shift ``31 - s`` (1..62), one for every channel.
    zero_point : int
        The output zero point (an ADD immediate).
    """

    rounding: str
    left: bool = False
    right: bool = True
    k: int = 0
    zero_point: int = 0
    extension = REQUANT_EXTENSION

    @classmethod
    def make(cls, multiplier, shift, zero_point=0, *, single_rounding: bool,
             op: str = "op") -> tuple["Requant", np.ndarray]:
        """``(Requant, rows)`` for TFLite's ``MultiplyByQuantizedMultiplier`` by the Q31
        ``multiplier`` and exponent ``shift`` (per-channel vectors of
        :func:`~vtakit.compiler.quant.fixed_point.quantize_multiplier`) then
        ``+ zero_point``; ``rows`` is the (rows, channels) int32 constant the tensor
        passes read. EpilogueError when the ALU cannot do it exactly (a per-channel zero
        point, per-channel single-rounding shifts, a left shift past the ALU's limit)."""
        zp = np.asarray(zero_point, np.int64)
        if np.unique(zp).size != 1:
            raise EpilogueError(f"{op}: a per-channel output zero point is not one ALU "
                                "ADD immediate")
        zp = int(zp.ravel()[0])
        if not IMM_MIN <= zp <= IMM_MAX:
            raise EpilogueError(f"{op}: output zero point {zp} does not fit a signed 16-bit "
                                f"ALU immediate ({IMM_MIN}..{IMM_MAX})")
        m, s = np.atleast_1d(np.asarray(multiplier, np.int64)), np.atleast_1d(
            np.asarray(shift, np.int64))
        if m.shape != s.shape or m.ndim != 1:
            raise EpilogueError(f"{op}: multiplier {m.shape} and shift {s.shape} must be "
                                "per-channel vectors of one length")
        if single_rounding:
            ks = {int(31 - v) for v, mm in zip(np.minimum(s, 30), m) if mm}
            if len(ks) > 1:
                raise EpilogueError(f"{op}: single-rounding requantize with per-channel "
                                    f"shifts {sorted(31 - k for k in ks)}; MULSHR takes one "
                                    "shift immediate for every channel")
            k = ks.pop() if ks else 31
            return cls("single", k=k, zero_point=zp), wrap32(m)[None]
        left, right = np.maximum(s, 0), np.maximum(-s, 0)
        if max(left.max(), right.max()) > SHIFT_LIMIT:
            raise EpilogueError(f"{op}: requantize exponents {int(s.min())}..{int(s.max())} "
                                f"exceed the ALU's shift limit {SHIFT_LIMIT}")
        rows = [-left] * bool(left.any()) + [m] + [right] * bool(right.any())
        return (cls("double", left=bool(left.any()), right=bool(right.any()), zero_point=zp),
                wrap32(np.stack(rows)))

    def passes(self) -> list:
        """[(AluOp, imm or None)]: one tensor pass per row, in row order."""
        if self.rounding == "single":
            return [(AluOp.MULSHR, self.k)]
        return ([(AluOp.RSHR, None)] * self.left + [(AluOp.SRDHM, None)]
                + [(AluOp.RSHR, None)] * self.right)

    @property
    def rows(self) -> int:
        return len(self.passes())


@dataclass(frozen=True)
class Requant2:
    """TFLite's exact requantization, bias, zero point and clamp in one ALU pass on the
    extension ``"requant2"`` (opcode ``REQ``; rows: ``M`` then ``P``, see
    :func:`~vtakit.hw.fixedpoint.pack_requant_word`).

    Attributes
    ----------
    single : bool
        Single rounding (TFLite FULLY_CONNECTED) instead of gemmlowp's double rounding.
    uniform : bool
        Every channel has the same multiplier and parameter word (a per-tensor scale,
        as TFLite's FULLY_CONNECTED): the rows hold one block (:meth:`Epilogue.pack_rows`),
        the registers are loaded once per program and one REQ covers a tile's blocks.
    """

    single: bool = False
    uniform: bool = False
    #: the :class:`Epilogue` reads these: no immediate pass of a zero point, two rows
    zero_point: int = 0
    rows: int = 2
    extension: str = REQUANT2_EXTENSION

    @classmethod
    def make(cls, multiplier, shift, zero_point=0, clip=(-128, 127), *,
             single_rounding: bool, op: str = "op") -> tuple["Requant2", np.ndarray]:
        """``(Requant2, rows)`` for TFLite's ``MultiplyByQuantizedMultiplier`` by the Q31
        ``multiplier`` and exponent ``shift`` (per-channel vectors of
        :func:`~vtakit.compiler.quant.fixed_point.quantize_multiplier`), ``+ zero_point``
        and the clamp to ``clip``; ``rows`` the (2, channels) int32 ``M`` and ``P`` rows.
        EpilogueError when ``REQ`` cannot do it (an exponent outside -32..31, a zero point
        or clip bound outside int8)."""
        m, s = np.atleast_1d(np.asarray(multiplier, np.int64)), np.atleast_1d(
            np.asarray(shift, np.int64))
        if m.shape != s.shape or m.ndim != 1:
            raise EpilogueError(f"{op}: multiplier {m.shape} and shift {s.shape} must be "
                                "per-channel vectors of one length")
        if m.size and (m.min() < 0 or m.max() >= 1 << 31):
            raise EpilogueError(f"{op}: requantize multipliers {m.min()}..{m.max()} are no "
                                "Q31 values (0..2^31-1)")
        if single_rounding:      # TFLite's single-rounding multiply saturates s at 30
            s = np.minimum(s, 30)
        zp = np.broadcast_to(np.asarray(zero_point, np.int64).ravel(), m.shape) \
            if np.size(zero_point) in (1, m.size) else None
        if zp is None:
            raise EpilogueError(f"{op}: {np.size(zero_point)} output zero points for "
                                f"{m.size} channels")
        lo, hi = (-128 if clip[0] is None else int(clip[0]),
                  127 if clip[1] is None else int(clip[1]))
        if not -128 <= lo <= hi <= 127:
            raise EpilogueError(f"{op}: clip [{lo}, {hi}] is no int8 range (REQ clamps "
                                "within int8)")
        try:
            p = pack_requant_word(s, zp, lo, hi, single_rounding=single_rounding)
        except ValueError as e:
            raise EpilogueError(f"{op}: {e}") from None
        rows = np.stack([wrap32(m), p])
        return cls(bool(single_rounding), bool((rows == rows[:, :1]).all())), rows

    def passes(self) -> list:
        """[(AluOp, imm)]: the three instructions of an output-channel block."""
        return [(AluOp.REQ, REQ_LOAD_M), (AluOp.REQ, REQ_LOAD_P), (AluOp.REQ, REQ_PASS)]


@dataclass(frozen=True)
class ResidualAdd:
    """A requantized add of the epilogue's int8 result ``y`` and an int8 residual ``r``
    with power-of-two scales, fused after the epilogue's clip::

        out = clip(((y << e_a) + r * 2^e_b + offset) >> k, lo, hi)

    ``offset`` holds the zero points and the rounding constant: ``-(z_a << e_a) -
    (z_b << e_b) + (z_out << k) + 2^(k-1)`` (:meth:`make`). The residual reaches the
    accumulators through the epilogue's ``"int8"`` identity GEMM, weights ``2^e_b``."""

    ea: int = 0
    eb: int = 0
    offset: int = 0
    shift: int = 0
    lo: int | None = None
    hi: int | None = None

    @classmethod
    def make(cls, ea, eb, k, zero_points=(0, 0, 0), clip=None, op="add") -> "ResidualAdd":
        """The stage of ``qnn.add(rounding="vta")`` with shifts ``(ea, eb, k)`` (of
        ``add_shifts``), zero points ``(z_a, z_b, z_out)`` and ``clip=(lo, hi)``;
        EpilogueError when the ALU or an int8 weight cannot hold it."""
        ea, eb, k = int(ea), int(eb), int(k)
        za, zb, zo = (int(z) for z in zero_points)
        if not 0 <= eb <= 6:
            raise EpilogueError(f"{op}: the residual's scale is 2^{eb} times the smallest; "
                                "its identity weight 2^e_b must fit int8 (e_b <= 6)")
        if not (0 <= ea <= SHIFT_LIMIT and 0 <= k <= SHIFT_LIMIT):
            raise EpilogueError(f"{op}: shifts e_a={ea}, k={k} outside 0..{SHIFT_LIMIT}")
        offset = -(za << ea) - (zb << eb) + (zo << k) + ((1 << k) >> 1)
        if not IMM_MIN <= offset <= IMM_MAX:
            raise EpilogueError(f"{op}: the add's offset {offset} (zero points and rounding) "
                                f"does not fit a signed 16-bit ALU immediate")
        if (128 << ea) + (128 << eb) + abs(offset) >= 1 << 31:
            raise EpilogueError(f"{op}: with e_a={ea} the int8 sum may leave int32 (the ALU "
                                "wraps where the add saturates)")
        lo, hi = (None, None) if clip is None else (clip[0], clip[1])
        for name, v in (("lo", lo), ("hi", hi)):
            if v is not None and not IMM_MIN <= int(v) <= IMM_MAX:
                raise EpilogueError(f"{op}: clip {name}={v} does not fit a signed 16-bit ALU "
                                    f"immediate ({IMM_MIN}..{IMM_MAX})")
        return cls(ea, eb, offset, k, None if lo is None else int(lo),
                   None if hi is None else int(hi))

    def before(self) -> list:
        """[(AluOp, imm)] before the residual's GEMM: the left shift by ``e_a``."""
        return [(AluOp.SHR, -self.ea)] if self.ea else []

    def after(self) -> list:
        """[(AluOp, imm)] after the residual's GEMM: offset, shift, clip."""
        out = [(AluOp.ADD, self.offset)] if self.offset else []
        out += [(AluOp.SHR, self.shift)] if self.shift else []
        out += [] if self.lo is None else [(AluOp.MAX, self.lo)]
        return out + ([] if self.hi is None else [(AluOp.MIN, self.hi)])

    @property
    def passes(self) -> int:
        """ALU passes per output vector."""
        return len(self.before()) + len(self.after())

    def reference(self, y, residual) -> np.ndarray:
        """Numpy semantics: the int32 result before the store (wrapping adds)."""
        v = wrap32(np.asarray(y, np.int64) << self.ea).astype(np.int64)
        v = wrap32(v + (np.asarray(residual, np.int64) << self.eb) + self.offset)
        v = v.astype(np.int64) >> self.shift
        if self.lo is not None:
            v = np.maximum(v, self.lo)
        if self.hi is not None:
            v = np.minimum(v, self.hi)
        return v


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
        ``"int8"`` (the store) or ``"int32"`` (byte planes).
    op : str
        Operator name for messages.
    requant : Requant, Requant2 or None
        Exact TFLite requantization on the ALU extension (``shift`` is then 0); a
        :class:`Requant2` also adds the bias and clamps (``bias=True``, no clip here).
    result_bytes : int
        ``"int32"``: the low bytes stored, one plane each (2..4; fewer than 4 when the
        caller knows the results fit, e.g. from the weights: the host sign-extends them).
    add : ResidualAdd or None
        A requantized add with the ``"int8"`` residual after the clip (the residual's
        GEMM then runs between the two stages).
    init : int
        0: the accumulators start from a reset and the bias is added by an ALU ADD.
        Else (:meth:`with_min_init`) they start from ``bias - init``: one ALU MIN of the
        bias tile over what the slot's previous tile left there, which the last clip
        bounded from below, instead of the reset and the ADD. The offset carries
        through the shifts to the clips (their immediates move with it,
        :meth:`stages`) and reaches the store as a multiple of 256, which the
        narrowing store drops.
    fold : bool
        With :attr:`init` and a fused add: the add's ADD of its offset is not emitted;
        the init carries it instead (:meth:`with_min_init`). An offset ``o`` added after
        the left shift by ``e_a`` is ``o / 2^e_a`` added before it, and that is
        ``(o / 2^e_a) << s`` added before the first shift ``s``: exact when ``2^e_a``
        divides ``o``. The clips before the add see it and move with it.
    """

    bias: bool = False
    residual: str | None = None
    shift: int = 0
    lo: int | None = None
    hi: int | None = None
    out_dtype: str = "int8"
    op: str = "op"
    requant: Requant | Requant2 | None = None
    result_bytes: int = 4
    add: ResidualAdd | None = None
    init: int = 0
    fold: bool = False

    @classmethod
    def make(cls, *, bias=False, residual=False, shift=0, clip=None, relu=False,
             out_dtype=np.int8, op="op", requant: Requant | Requant2 | None = None,
             result_bytes: int = 4, add: ResidualAdd | None = None) -> "Epilogue":
        """Validate user arguments (``clip=(lo, hi)``, ``relu``) into an Epilogue.
        ``residual``: False/None, ``"int8"``/``np.int8``, or ``"int32"``/``np.int32``/True."""
        shift = int(shift)
        if requant is not None and shift:
            raise EpilogueError(f"{op}: shift={shift} with an exact requantize; the "
                                "requantize replaces the shift (give shift=0)")
        if isinstance(requant, Requant2) and (not bias or clip is not None or relu):
            raise EpilogueError(f"{op}: the one-pass requantize (REQ) reads the bias row and "
                                "clamps itself: give bias=True and no clip (the clip is in "
                                "its P row, Requant2.make)")
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
        if not 2 <= int(result_bytes) <= 4:
            raise EpilogueError(f"{op}: result_bytes={result_bytes}; an int32 result stores "
                                "2 to 4 byte planes")
        if add is not None and (res != "int8" or dt != "int8"):
            raise EpilogueError(f"{op}: a fused add reads an int8 residual and stores int8 "
                                f"(got residual={res}, out_dtype={dt})")
        return cls(bool(bias), res, shift, None if lo is None else int(lo),
                   None if hi is None else int(hi), dt, op, requant, int(result_bytes), add)

    # ------------------------------------------------------------------ plan

    @property
    def round_const(self) -> int:
        return 1 << (self.shift - 1) if self.shift else 0

    @property
    def bias_tile(self) -> bool:
        """A per-channel acc tile is loaded (the bias, or the rounding constant alone)."""
        return self.bias or self.round_const > IMM_MAX or bool(self.init)

    def imm_passes(self) -> list:
        """[(AluOp, imm)] applied to every accumulator after the bias add (the clips'
        true bounds; :meth:`stages` gives the emitted ones)."""
        out = []
        if self.requant is not None and self.requant.zero_point:
            out.append((AluOp.ADD, self.requant.zero_point))
        if self.round_const and not self.bias_tile:
            out.append((AluOp.ADD, self.round_const))
        if self.shift:
            out.append((AluOp.SHR, self.shift))
        if self.lo is not None:
            out.append((AluOp.MAX, self.lo))
        if self.hi is not None:
            out.append((AluOp.MIN, self.hi))
        return out

    def _groups(self) -> tuple:
        """The immediate passes ``(after the bias, before the add's residual GEMM, after
        it)`` with the clips' true bounds."""
        return (self.imm_passes(),) + ((self.add.before(), self.add.after()) if self.add
                                       else ([], []))

    def stages(self) -> tuple:
        """The emitted immediate passes of :meth:`_groups`: the clips' immediates moved
        by the offset :attr:`init` carries to them."""
        return _carry(self._groups(), self.init, self.fold)[0]

    def with_min_init(self, bias, bound: int) -> "Epilogue":
        """This epilogue with accumulators that start from ``bias - init`` (see
        :attr:`init`) when that is exact for the int32 per-channel ``bias`` (None: zeros)
        and accumulations within ``[-bound, bound]``; else itself.

        The ALU MIN of ``bias - init`` over the previous tile's results is
        ``bias - init`` when none of them is smaller, and the last clip (``lo``, moved
        by the offset ``d`` that reaches it) keeps them ``>= lo - d``. The offset is
        ``init = 256 m 2^S`` (``S`` the epilogue's net right shift), so ``d = 256 m``;
        the smallest ``m`` whose clip immediates fit and whose sums stay in int32
        (the shifts would not be exact on wrapped values) is taken.

        With a fused add whose offset ``2^e_a`` divides, the init also carries the
        offset (:attr:`fold`: one ALU pass fewer), tried first: ``init`` is then
        ``d = 256 m`` carried back through the passes (:func:`_init_for`)."""
        last = self.add.lo if self.add else self.lo
        if (self.init or self.out_dtype != "int8" or self.requant is not None
                or self.residual == "int32" or last is None
                or (self.add is not None and (self.lo is None or self.hi is None))):
            return self
        groups = replace(self, bias=True)._groups()
        net = sum(imm for g in groups for op, imm in g if op == AluOp.SHR)
        b = self._bias_values(bias, None)
        if net < 1 or b.size == 0:
            return self
        bound = int(bound) + (128 if self.residual == "int8" and self.add is None else 0)
        folds = [False]
        if self.add is not None and self.add.offset and self.add.offset % (1 << self.add.ea) == 0:
            folds.insert(0, True)
        for fold in folds:
            for m in range(1, 128):
                init = _init_for(groups, 256 * m, fold) if fold else (256 * m) << net
                if init is None:
                    break
                if init <= 0:
                    continue
                moved, d, exact = _carry(groups, init, fold)
                imms = [imm for g in moved for op, imm in g if op in (AluOp.MAX, AluOp.MIN)]
                if (not exact or d % 256 or min(imms) < IMM_MIN or max(imms) > IMM_MAX
                        or init + bound + int(np.abs(b).max()) >= 1 << 31):
                    break
                if self.add is not None:
                    y = max(abs(self.lo), abs(self.hi)) + (init >> self.shift)
                    if ((y << self.add.ea) + (128 << self.add.eb) + abs(self.add.offset)
                            >= 1 << 31):
                        break
                if int(b.max()) <= self._largest_bias(groups, init, fold):
                    return replace(self, init=init, fold=fold)
        return self

    def _largest_bias(self, groups, init: int, fold: bool = False) -> int:
        """The largest bias (with rounding) a MIN init with offset ``init`` allows: the
        previous results are ``>= lo - d`` (the last clip's ``lo``, moved by the offset
        ``d`` that reaches it), so ``bias - init`` must not exceed that."""
        last = self.add.lo if self.add else self.lo
        return init + last - _carry(groups, init, fold)[1]

    def _bias_values(self, bias, channels) -> np.ndarray:
        """The int64 per-channel bias plus the rounding constant (None: zeros)."""
        b = np.zeros(channels or 1, np.int64) if bias is None else np.asarray(bias, np.int64)
        if channels is not None and b.shape != (channels,):
            raise EpilogueError(f"{self.op}: bias has shape {b.shape}, expected ({channels},)")
        return b + self.round_const

    @property
    def rows(self) -> int:
        """Per-channel requantize rows (acc tiles of one element per channel block)."""
        return 0 if self.requant is None else self.requant.rows

    def check_config(self, config) -> None:
        """EpilogueError when the epilogue needs an ALU extension ``config`` lacks."""
        ext = None if self.requant is None else self.requant.extension
        if ext is not None and ext not in config.extensions:
            raise EpilogueError(f"{self.op}: the exact requantize needs the ALU extension "
                                f"{ext!r}; config {config.name} has EXTENSIONS "
                                f"{list(config.extensions)} (add \"{ext}\")")

    @property
    def uniform_rows(self) -> bool:
        """The requantize rows are one block for every channel (:attr:`Requant2.uniform`)."""
        return bool(getattr(self.requant, "uniform", False))

    def pack_rows(self, rows, channels: int, config) -> np.ndarray:
        """The packed (rows, C/c, b, c) int32 requantize rows of (rows, C) values; (rows,
        1, b, c) with :attr:`uniform_rows`."""
        from .layout import pack_bias
        rows = np.asarray(rows)
        if rows.shape != (self.rows, channels):
            raise EpilogueError(f"{self.op}: requantize rows have shape {rows.shape}, "
                                f"expected ({self.rows}, {channels})")
        packed = np.stack([pack_bias(r, config) for r in rows])
        return np.ascontiguousarray(packed[:, :1]) if self.uniform_rows else packed

    @property
    def planes(self) -> int:
        """Byte planes stored: ``result_bytes`` for an int32 result, else 1."""
        return self.result_bytes if self.out_dtype == "int32" else 1

    def pack_bias_values(self, bias, channels: int) -> np.ndarray:
        """The int32 per-channel vector the bias tile holds: bias + rounding (wrapping)."""
        b = self._bias_values(bias, channels)
        if self.init:        # the MIN init must find every previous result above it
            top = self._largest_bias(self._groups(), self.init, self.fold)
            if int(b.max()) > top:
                raise EpilogueError(f"{self.op}: bias (with rounding) up to {int(b.max())} "
                                    f"exceeds what the plan's accumulator init offset "
                                    f"{self.init} allows ({top}); plan with this bias "
                                    "(Epilogue.with_min_init)")
        return wrap32(b - self.init)

    # ------------------------------------------------------------------ emit

    def emit(self, stream, acc_base: int, dims, bias_base: int | None = None,
             bias_dims=None, rows_base: int | None = None, rows_step: int = 0,
             block0: int | None = None, loaded: list | None = None, parts=None) -> None:
        """Queue the ALU passes over one acc tile into ``stream`` (a
        :class:`~vtakit.runtime.ProgramBuilder` or a Runtime).

        Parameters
        ----------
        dims : list of Dim
            The tile's accumulators (dst strides), for the immediate passes.
        bias_dims : list of Dim
            The same nest with src strides selecting the tile's bias element.
        rows_base, rows_step : int
            Requantize row ``r`` starts at ``rows_base + r * rows_step`` (addressed as
            the bias, with ``bias_dims``).
        block0, loaded : int, list
            :class:`Requant2` only (else ignored): the tile's first output-channel block
            (of the whole layer) and a one-element list, shared by the tiles of one
            program in emission order, holding the block whose rows REQ's registers
            hold (None at the start). A block whose rows are loaded skips its setup, and
            the blocks run from that end of the tile (see :func:`_push_req`).
        parts : list, optional
            :class:`Requant2` only: the REQ pass split into ``[(acc base, src base,
            dims)]``, each dims with an ``"o"`` dimension as ``bias_dims`` (a padded
            convolution's border rectangles, each with its own bias + correction row as
            src); default: the whole tile, ``[(acc_base, bias_base, bias_dims)]``.
        """
        if isinstance(self.requant, Requant2):
            parts = parts or [(acc_base, bias_base, bias_dims)]
            if self.uniform_rows:
                _push_req_uniform(stream, parts, rows_base, loaded)
            else:
                _push_req(stream, parts, rows_base, rows_step, block0, loaded)
            _push_imm_passes(stream, acc_base, dims, self.stages()[0])
            return
        if self.bias_tile and not self.init:
            _push_tensor_pass(stream, AluOp.ADD, acc_base, bias_base, bias_dims)
        if self.requant is not None:
            for r, (op, imm) in enumerate(self.requant.passes()):
                _push_tensor_pass(stream, op, acc_base, rows_base + r * rows_step, bias_dims,
                                  imm)
        _push_imm_passes(stream, acc_base, dims, self.stages()[0])

    def emit_req_setup(self, stream, rows_base: int, loaded: list) -> None:
        """Queue REQ.M and REQ.P of :attr:`uniform_rows` (row ``r`` at ``rows_base + r``)
        ahead of the first :meth:`emit` that shares ``loaded`` with it (which then skips
        them): e.g. before a program's first GEMM waits for its weights."""
        if not (isinstance(self.requant, Requant2) and self.uniform_rows):
            raise EpilogueError(f"{self.op}: REQ's registers are set up ahead only for "
                                "uniform Requant2 rows")
        _load_req_uniform(stream, rows_base, loaded)

    def emit_init(self, stream, acc_base: int, bias_base: int, bias_dims) -> None:
        """Queue the ALU MIN that starts a tile's accumulators from ``bias - init``
        (:attr:`init`; ``bias_dims`` as for :meth:`emit`)."""
        _push_tensor_pass(stream, AluOp.MIN, acc_base, bias_base, bias_dims)

    def emit_add(self, stream, acc_base: int, dims, after: bool) -> None:
        """Queue the fused add's immediate passes over one acc tile: those before the
        residual's GEMM (``after=False``) or after it."""
        self.emit_stage(stream, acc_base, dims, 2 if after else 1)

    def emit_stage(self, stream, acc_base: int, dims, stage: int, passes=None) -> None:
        """Queue the immediate passes of :meth:`stages` ``[stage]`` over one acc tile,
        one ALU instruction each; ``passes``, a slice, only those of them."""
        got = self.stages()[stage]
        _push_imm_passes(stream, acc_base, dims, got if passes is None else got[passes])

    def emit_plane_shift(self, stream, acc_base: int, dims) -> None:
        """SHR imm 8 over the tile: exposes the next byte plane of an int32 result."""
        _push_imm_passes(stream, acc_base, dims, [(AluOp.SHR, 8)])

    @staticmethod
    def emit_zero(stream, acc_base: int, dims) -> None:
        """Zero the acc tile by two ALU passes, whatever it holds: SHR imm 31 (every
        int32 to 0 or -1), then MAX imm 0. Instead of a GEMM reset, where the ALU lane
        of ``COMPUTE_OVERLAP`` runs them beside the GEMMs."""
        _push_imm_passes(stream, acc_base, dims, [(AluOp.SHR, SHIFT_LIMIT), (AluOp.MAX, 0)])

    def reference(self, acc, bias=None, residual=None) -> np.ndarray:
        """Numpy semantics of this epilogue (see :func:`reference.epilogue_ref`)."""
        from .reference import epilogue_ref
        if self.add is not None:
            y = epilogue_ref(acc, bias=bias, shift=self.shift, clip=(self.lo, self.hi),
                             out_dtype=np.int32)
            return wrap32(self.add.reference(y, residual)).astype(np.int8)
        return epilogue_ref(acc, bias=bias, residual=residual, shift=self.shift,
                            clip=(self.lo, self.hi), out_dtype=self.out_dtype)


def _carry(groups, delta: int, fold: bool = False) -> tuple:
    """``(groups, d, exact)``: the pass groups with every clip immediate moved by the
    offset ``-delta`` accumulators carry as it reaches the clip (a right shift by ``k``
    divides it by ``2^k``, a left shift multiplies it; adds keep it), the offset ``d``
    left after the last pass, and whether every right shift divided it exactly. With
    ``fold`` the ADDs of the last group (the fused add's offset, :attr:`Epilogue.fold`)
    are left out and carried: the values lack the ADD's immediate, which the offset
    then holds too."""
    out, exact = [], True
    for i, passes in enumerate(groups):
        moved = []
        for op, imm in passes:
            if op == AluOp.SHR:
                exact &= imm < 0 or delta % (1 << imm) == 0
                delta = delta >> imm if imm >= 0 else delta << -imm
            elif op in (AluOp.MAX, AluOp.MIN):
                imm -= delta
            elif op == AluOp.ADD and fold and i == len(groups) - 1:
                delta += imm
                continue
            moved.append((op, imm))
        out.append(moved)
    return tuple(out), delta, exact


def _init_for(groups, d: int, fold: bool) -> int | None:
    """The init offset that :func:`_carry` (with ``fold``) carries to ``d`` after the
    last pass, exactly (every right shift dividing it); None when there is none (a
    left shift whose ``2^k`` does not divide what must come out of it)."""
    for i in range(len(groups) - 1, -1, -1):
        for op, imm in reversed(groups[i]):
            if op == AluOp.SHR:
                if imm >= 0:
                    d <<= imm
                elif d % (1 << -imm):
                    return None
                else:
                    d >>= -imm
            elif op == AluOp.ADD and fold and i == len(groups) - 1:
                d -= imm
    return d


#: The ALU kernels of :func:`_tile_kernels`, keyed by its arguments by value (an
#: emission runs the same passes over the same tiles again and again, and so does every
#: candidate schedule of a plan search); bounded, emptied when full;
#: :func:`.plan.clear_program_cache` empties it.
TILE_KERNELS: dict = {}
_TILE_KERNELS_SIZE = 4096


def _tile_kernels(nest: tuple, acc_base: int, src_base: int, passes) -> tuple:
    """One ALU kernel per ``(op, imm)`` of ``passes`` over the acc tile ``nest`` (its
    dims as ``(name, extent, dst, src, wgt, reduce)`` tuples, :class:`.loops.Dim`'s
    fields) at ``acc_base``, the tensor operand at ``src_base`` (the src strides);
    remembered in :data:`TILE_KERNELS` by the arguments."""
    key = (nest, acc_base, src_base, tuple(passes))
    kernels = TILE_KERNELS.get(key)
    if kernels is None:
        f = fold_loops([Dim(*d) for d in nest], (acc_base, src_base, 0))
        uops, loops = [u[:2] for u in f.uops], [lp[:3] for lp in f.loops]
        kernels = tuple(UopKernel.alu(op, uops, loops, imm=imm) for op, imm in passes)
        if len(TILE_KERNELS) >= _TILE_KERNELS_SIZE:
            TILE_KERNELS.clear()
        TILE_KERNELS[key] = kernels
    return kernels


def _push_tensor_pass(stream, op, acc_base: int, src_base: int, dims, imm=None) -> None:
    """Queue one ALU instruction ``op`` over the acc tile ``dims`` at ``acc_base`` with
    the tensor operand at ``src_base`` (``dims``' src strides; ``imm``: the extension's
    shift immediate of MULSHR)."""
    nest = tuple((d.name, d.extent, d.dst, d.src, d.wgt, d.reduce) for d in dims)
    stream.push_alu(_tile_kernels(nest, acc_base, src_base, ((op, imm),))[0])


def _push_imm_passes(stream, acc_base: int, dims, passes) -> None:
    """Queue one ALU instruction per ``(op, imm)`` of ``passes`` over the acc tile
    ``dims`` (dst strides) at ``acc_base``, in place."""
    if not passes:
        return
    nest = tuple((d.name, d.extent, d.dst, d.dst, 0, False) for d in dims)
    for kernel in _tile_kernels(nest, acc_base, acc_base, passes):
        stream.push_alu(kernel)


def _push_req_uniform(stream, parts, rows_base: int, loaded: list | None = None) -> None:
    """:func:`_push_req` for rows of one block shared by every channel
    (:attr:`Requant2.uniform`; row ``r`` at ``rows_base + r``): REQ.M and REQ.P unless
    ``loaded`` says an earlier tile of the program loaded them, then one REQ per part
    over all its blocks (the src row of each block)."""
    _load_req_uniform(stream, rows_base, loaded)
    for acc_base, src_base, dims in parts:
        _push_tensor_pass(stream, AluOp.REQ, acc_base, src_base, dims, REQ_PASS)


def _load_req_uniform(stream, rows_base: int, loaded: list | None = None) -> None:
    """REQ.M and REQ.P of the uniform rows at ``rows_base`` (row ``r`` at ``rows_base +
    r``), unless ``loaded`` (see :meth:`Epilogue.emit`) says they are loaded; marks it."""
    if loaded is None or loaded[0] != "uniform":
        for r, mode in enumerate((REQ_LOAD_M, REQ_LOAD_P)):
            stream.push_alu(UopKernel.alu(AluOp.REQ, [(rows_base + r, rows_base + r)], [],
                                          imm=mode))
        if loaded is not None:
            loaded[0] = "uniform"


def _push_req(stream, parts, rows_base: int, rows_step: int, block0: int | None = None,
              loaded: list | None = None) -> None:
    """Queue the one-pass requantize (:class:`Requant2`) over one acc tile, given as
    ``parts`` ``[(acc base, src base, dims)]`` (:meth:`Epilogue.emit`): per
    output-channel block (the dimension ``"o"`` of each part's dims), REQ.M and REQ.P of
    the block's rows (``rows_base + r * rows_step``, addressed as the bias) then one REQ
    per part over the block's accumulators with the part's row as src (its other
    dimensions).

    The registers keep the last block's parameters from one instruction to the next:
    with ``loaded`` (``[block]`` or ``[None]``) and the tile's first block ``block0``, a
    block already loaded skips its two setup instructions, and a tile whose last block
    is the one loaded runs its blocks in reverse (tiles that walk the pixels of one
    channel range alternate directions and save a setup pair each)."""
    op = AluOp.REQ
    split = []
    for acc_base, src_base, dims in parts:
        k = next(i for i, d in enumerate(dims) if d.name == "o")
        split.append((acc_base, src_base, dims[k], dims[:k] + dims[k + 1:]))
    o = split[0][2]
    order = range(o.extent)
    if loaded is not None and block0 is not None and loaded[0] == block0 + o.extent - 1:
        order = reversed(order)
    for j in order:
        if loaded is None or block0 is None or loaded[0] != block0 + j:
            for r, mode in enumerate((REQ_LOAD_M, REQ_LOAD_P)):
                src = rows_base + r * rows_step + j      # block j's rows, as the bias
                stream.push_alu(UopKernel.alu(op, [(src, src)], [], imm=mode))
        for acc_base, src_base, oj, rest in split:
            _push_tensor_pass(stream, op, acc_base + j * oj.dst, src_base + j * oj.src, rest,
                              REQ_PASS)
        if loaded is not None and block0 is not None:
            loaded[0] = block0 + j
