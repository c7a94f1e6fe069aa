"""Fixed-point integer helpers, written once: the ALU table and the host requantize both call them.

Plain numpy on int64 intermediates, vectorized. The gemmlowp/TFLite primitives
(:func:`srdhm`, :func:`rounding_divide_by_pot`, :func:`round_shift_right`) and the
32-bit two's-complement wrap the VTA ALU and C's int32 arithmetic share
(:func:`wrap_int32`). :mod:`vtakit.hw.isa` builds the ALU lane functions from them
(:func:`rounding_shift`, :func:`mul_shift`); :mod:`vtakit.runtime.hostops.fixed_point`
builds TFLite's requantization from them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["INT32_MIN", "INT32_MAX", "MASK32", "wrap_int32", "srdhm", "rounding_divide_by_pot",
           "round_shift_right", "rounding_shift", "mul_shift", "requantize_word",
           "pack_requant_word", "unpack_requant_word"]

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
#: The low 32 bits of an int64.
MASK32 = np.int64(0xFFFFFFFF)


def wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap of integers to int32 (C's behaviour on overflow, the ALU's add)."""
    return np.asarray(x, np.int64).astype(np.uint64).astype(np.uint32).view(np.int32)


def srdhm(a, b) -> np.ndarray:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul``: the high 32 bits of ``2*a*b``,
    rounded half away from zero; ``a == b == INT32_MIN`` saturates to ``INT32_MAX``
    (int32 array)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    v = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(v >= 0, v >> 31, -((-v) >> 31))        # C division truncates
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, high).astype(np.int32)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2^exponent`` rounded half away from zero
    (``0 <= exponent``; int64 array)."""
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << e) - 1
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0))


def round_shift_right(x, k) -> np.ndarray:
    """``(x + 2^(k-1)) >> k`` on int64 values, ``k >= 1``: one rounding half up
    (TFLite's single-rounding multiply, the ALU's MULSHR)."""
    return np.asarray(x, np.int64) + (np.int64(1) << (np.asarray(k, np.int64) - 1)) >> k


def rounding_shift(a, e) -> np.ndarray:
    """gemmlowp's ``RoundingDivideByPOT(a, e)`` (round half away from zero) for
    ``0 <= e <= 31`` (``e > 31`` acts as 31); ``e < 0`` shifts left by ``-e`` keeping the
    low 32 bits (TFLite's ``a * (1 << -e)`` in int32; 0 when ``-e >= 32``)."""
    a, e = np.asarray(a, np.int64), np.asarray(e, np.int64)
    right = rounding_divide_by_pot(a, np.clip(e, 0, 31))
    n = np.clip(-e, 0, 32)
    left = np.where(n >= 32, 0, (a << np.minimum(n, 31)) & MASK32)
    return wrap_int32(np.where(e < 0, left, right))


def mul_shift(a, b, k: int) -> np.ndarray:
    """TFLite's single-rounding ``MultiplyByQuantizedMultiplier``: ``(a*b + 2^(k-1)) >> k``
    on the exact 64-bit product, ``1 <= k <= 62``, wrapped to 32 bits."""
    prod = np.asarray(a, np.int64) * np.asarray(b, np.int64)   # |prod| <= 2^62
    return wrap_int32(round_shift_right(prod, k))


# The parameter word of the ``requant2`` extension's REQ (one int32 per lane):
# bits 5..0 the signed exponent s, bit 6 single rounding, bit 7 reserved,
# bits 15..8 the zero point, 23..16 the clamp's low and 31..24 its high bound (int8 each).
_S_BITS, _SINGLE_BIT, _ZP_SHIFT, _LO_SHIFT, _HI_SHIFT = 6, 6, 8, 16, 24
_S_MIN, _S_MAX = -(1 << (_S_BITS - 1)), (1 << (_S_BITS - 1)) - 1


def _field(word, shift, bits, signed=True):
    v = (np.asarray(word, np.int64) >> shift) & ((1 << bits) - 1)
    return (v ^ (1 << (bits - 1))) - (1 << (bits - 1)) if signed else v


def unpack_requant_word(word) -> dict:
    """The fields of REQ parameter words (int64 arrays): ``s`` (-32..31), ``single``
    (0/1), ``zp``, ``lo``, ``hi`` (int8 values)."""
    return {"s": _field(word, 0, _S_BITS), "single": _field(word, _SINGLE_BIT, 1, False),
            "zp": _field(word, _ZP_SHIFT, 8), "lo": _field(word, _LO_SHIFT, 8),
            "hi": _field(word, _HI_SHIFT, 8)}


def pack_requant_word(shift, zero_point, lo, hi, *, single_rounding: bool) -> np.ndarray:
    """REQ parameter words (int32, one per channel) for TFLite's exponent ``shift``
    (per channel; double rounding: -32..31, single rounding: 31 - k with k in 1..62), the
    output ``zero_point`` and the clamp ``[lo, hi]`` (int8 each, per tensor or per
    channel). ValueError naming the field when a value does not fit."""
    s = np.atleast_1d(np.asarray(shift, np.int64))
    lo_s, hi_s = (-31, 30) if single_rounding else (_S_MIN, _S_MAX)
    fields = {"shift": (s, lo_s, hi_s), "zero_point": (zero_point, -128, 127),
              "lo": (lo, -128, 127), "hi": (hi, -128, 127)}
    for name, (v, a, b) in fields.items():
        v = np.asarray(v, np.int64)
        if v.size and (v.min() < a or v.max() > b):
            bad = v.ravel()[np.flatnonzero((v.ravel() < a) | (v.ravel() > b))[0]]
            raise ValueError(f"REQ parameter {name}={int(bad)} does not fit the parameter word "
                             f"(legal: {a}..{b})")
    word = ((s & 0x3F) | (np.int64(bool(single_rounding)) << _SINGLE_BIT)
            | ((np.asarray(zero_point, np.int64) & 0xFF) << _ZP_SHIFT)
            | ((np.asarray(lo, np.int64) & 0xFF) << _LO_SHIFT)
            | ((np.asarray(hi, np.int64) & 0xFF) << _HI_SHIFT))
    return wrap_int32(np.broadcast_to(word, s.shape))


def requantize_word(x, multiplier, word) -> np.ndarray:
    """The ``requant2`` extension's REQ lane: TFLite's requantize of the int32 ``x`` by
    the Q31 ``multiplier`` and the parameter ``word`` (:func:`pack_requant_word`), then
    the zero point and the clamp (int32 array; the arguments broadcast).

    Double rounding (gemmlowp; TFLite CONV_2D, DEPTHWISE_CONV_2D):
    ``rounding_shift(srdhm(rounding_shift(x, -max(s, 0)), M), max(-s, 0))``; single
    rounding: ``mul_shift(x, M, clip(31 - s, 1, 62))``. Then
    ``min(max(wrap32(q + zp), lo), hi)``."""
    x, m = np.asarray(x, np.int64), np.asarray(multiplier, np.int64)
    f = unpack_requant_word(word)
    s = f["s"]
    double = rounding_shift(srdhm(rounding_shift(x, -np.maximum(s, 0)), m), np.maximum(-s, 0))
    k = np.clip(31 - s, 1, 62)
    single = wrap_int32(round_shift_right(x * m, k))
    q = np.where(f["single"] == 1, single, double).astype(np.int64)
    y = wrap_int32(q + f["zp"]).astype(np.int64)
    return np.minimum(np.maximum(y, f["lo"]), f["hi"]).astype(np.int32)
