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
           "round_shift_right", "rounding_shift", "mul_shift"]

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
