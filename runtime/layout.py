"""VTA's packed activation layout, shared by the operator library and the VM.

An activation (N, C, H, W) lives in device DRAM as (N/b, C/c, H, W, b, c): one
INP/OUT element holds ``BATCH x BLOCK`` scalars, the batch and channel axes
zero-padded to whole blocks (reference section 5.4). Dense data (N, K) is the
same bytes with H = W = 1. The compiler's other layouts (weights, bias) are in
:mod:`vtakit.compiler.ops.layout`.
"""

from __future__ import annotations

import math

import numpy as np

from ..hw.errors import VtakitError

__all__ = ["LayoutError", "ceil_div", "pair", "normalize_padding", "pack_activation", "unpack_activation", "nchw_shape",
           "packed_activation_shape", "packed_activation_nbytes"]


class LayoutError(VtakitError, ValueError):
    """An array whose rank or shape does not fit the requested layout."""


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for non-negative integers."""
    return -(-int(a) // int(b))


def pair(v, name="value") -> tuple[int, int]:
    """An int, ``(v,)`` or ``(h, w)`` -> ``(h, w)`` ints (a stride, a window, a dilation)."""
    if np.isscalar(v):
        return int(v), int(v)
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v[0], v[0]
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair, got {v!r}")
    return v


def normalize_padding(padding) -> tuple[int, int, int, int]:
    """``p`` | ``(ph, pw)`` | ``(top, left, bottom, right)`` -> (top, left, bottom, right)."""
    if isinstance(padding, (int, np.integer)):
        p = (int(padding),) * 4
    else:
        p = tuple(int(v) for v in padding)
        if len(p) == 2:
            p = (p[0], p[1], p[0], p[1])
        elif len(p) != 4:
            raise ValueError(f"padding must be an int, (ph, pw) or (top, left, bottom, right), "
                             f"got {padding!r}")
    if min(p) < 0:
        raise ValueError(f"padding must be non-negative, got {padding!r}")
    return p


def _check(name, array, ndim, what):
    array = np.asarray(array)
    if array.ndim != ndim:
        raise LayoutError(f"{name}: expected a {ndim}-D {what} array, got shape {array.shape}")
    return array


def _pad_to(array, shape):
    """Zero-pad ``array`` at the end of every axis up to ``shape``."""
    if array.shape == tuple(shape):
        return array
    out = np.zeros(shape, dtype=array.dtype)
    out[tuple(slice(0, s) for s in array.shape)] = array
    return out


def pack_blocks(x, b0: int, b1: int) -> np.ndarray:
    """(A, B, H, W) -> (A/b0, B/b1, H, W, b0, b1), zero-padding A and B to whole blocks
    (an NCHW activation, an OIHW weight)."""
    a, b, h, w = x.shape
    xp = _pad_to(x, (ceil_div(a, b0) * b0, ceil_div(b, b1) * b1, h, w))
    xp = xp.reshape(xp.shape[0] // b0, b0, xp.shape[1] // b1, b1, h, w)
    return np.ascontiguousarray(xp.transpose(0, 2, 4, 5, 1, 3))


def pack_activation(x, config) -> np.ndarray:
    """NCHW -> (N/b, C/c, H, W, b, c), zero-padding N and C to whole blocks."""
    return pack_blocks(_check("pack_activation", x, 4, "NCHW"), config.batch, config.block)


def unpack_activation(xp, config, n: int, c: int) -> np.ndarray:
    """(N/b, C/c, H, W, b, c) -> NCHW, dropping the batch and channel padding."""
    xp = _check("unpack_activation", xp, 6, "packed activation")
    nb, cb, h, w, b, blk = xp.shape
    if (b, blk) != (config.batch, config.block):
        raise LayoutError(f"unpack_activation: element shape ({b}, {blk}) does not match "
                          f"the config's (BATCH, BLOCK) = ({config.batch}, {config.block})")
    if n > nb * b or c > cb * blk:
        raise LayoutError(f"unpack_activation: cannot take N={n}, C={c} from a packed array "
                          f"holding N<={nb * b}, C<={cb * blk}")
    x = xp.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * blk, h, w)
    return np.ascontiguousarray(x[:n, :c])


def nchw_shape(shape) -> tuple:
    """An activation shape as (N, C, H, W): (N, K) is (N, K, 1, 1), the same packed bytes."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 2:
        shape += (1, 1)
    if len(shape) != 4:
        raise LayoutError(f"an activation is (N, C, H, W) or (N, K), not {list(shape)}")
    return shape


def packed_activation_shape(shape, config) -> tuple:
    """The packed shape of an activation: (N, C, H, W) -> (N/b, C/c, H, W, b, c);
    (N, K) is taken as (N, K, 1, 1)."""
    n, c, h, w = nchw_shape(shape)
    b, blk = config.batch, config.block
    return (ceil_div(n, b), ceil_div(c, blk), h, w, b, blk)


def packed_activation_nbytes(shape, dtype, config) -> int:
    """Bytes of an activation of ``shape`` and ``dtype`` in the packed layout."""
    return math.prod(packed_activation_shape(shape, config)) * np.dtype(dtype).itemsize
