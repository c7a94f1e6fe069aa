"""Computes of the element-wise and broadcasting operators (integers keep their dtype)."""

from __future__ import annotations

import numpy as np

from . import hostop

__all__ = ["is_int", "is_float", "clip", "cast"]


def is_int(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.integer)


def is_float(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.floating)


def _keep(fn):
    """Wrap a numpy ufunc so the result keeps the first input's dtype (no promotion)."""
    def compute(*xs, **attrs):
        return np.asarray(fn(*xs)).astype(xs[0].dtype, copy=False)
    return compute


def _truncdiv(a, b):
    if is_int(a.dtype):
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        q = np.abs(a64) // np.abs(b64)
        return (np.sign(a64) * np.sign(b64) * q).astype(np.result_type(a, b))
    return a / b


for _name, _fn in [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                   ("maximum", np.maximum), ("minimum", np.minimum),
                   ("divide", _truncdiv)]:
    hostop(_name, _keep(_fn))


def _shift(fn):
    def compute(a, b):
        # shift counts beyond the width saturate like arithmetic shifts do in hardware
        bits = np.dtype(a.dtype).itemsize * 8
        return fn(a.astype(np.int64), np.clip(b.astype(np.int64), 0, bits)).astype(a.dtype)
    return compute


hostop("right_shift", _shift(np.right_shift))
hostop("left_shift", _shift(np.left_shift))


def _compare(fn):
    def compute(a, b):
        return fn(a, b)
    return compute


for _name, _fn in [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                   ("less_equal", np.less_equal), ("greater", np.greater),
                   ("greater_equal", np.greater_equal)]:
    hostop(_name, _compare(_fn))

hostop("where", lambda c, a, b: np.where(c, a, b))

for _name, _fn in [("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("tanh", np.tanh),
                   ("exp", np.exp), ("sqrt", np.sqrt), ("log", np.log),
                   ("rsqrt", lambda x: 1 / np.sqrt(x)), ("round", np.round),
                   ("floor", np.floor), ("ceil", np.ceil),
                   ("negative", np.negative), ("abs", np.abs), ("copy", np.copy)]:
    hostop(_name, _keep(_fn))

hostop("nn.relu", lambda x: np.maximum(x, x.dtype.type(0)))


@hostop("nn.leaky_relu")
def _leaky(x, alpha):
    return np.where(x > 0, x, x * x.dtype.type(alpha)).astype(x.dtype)


def _clip_bounds(dtype, a_min, a_max):
    if is_int(dtype):
        info = np.iinfo(dtype)
        lo = int(np.clip(np.ceil(a_min), info.min, info.max))
        hi = int(np.clip(np.floor(a_max), info.min, info.max))
        return np.dtype(dtype).type(lo), np.dtype(dtype).type(hi)
    return np.dtype(dtype).type(a_min), np.dtype(dtype).type(a_max)


@hostop("clip")
def clip(x, a_min, a_max):
    lo, hi = _clip_bounds(x.dtype, a_min, a_max)
    return np.minimum(np.maximum(x, lo), hi)


@hostop("cast")
def cast(x, dtype):
    # float -> int casts truncate toward zero (C semantics); out-of-range wraps
    if is_float(x.dtype) and is_int(dtype):
        return np.trunc(x).astype(np.int64).astype(dtype)
    return x.astype(dtype)


hostop("zeros", lambda shape, dtype: np.zeros(shape, dtype))
hostop("ones", lambda shape, dtype: np.ones(shape, dtype))
hostop("zeros_like", lambda x: np.zeros_like(x))
hostop("ones_like", lambda x: np.ones_like(x))
