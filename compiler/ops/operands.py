"""Checks of the arrays handed to an operator, before any planning or packing.

Each error says which operator and operand, what was wrong and what would be right,
so that bad input never surfaces as an exception from deep inside the tiler.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_operand", "check_positive", "check_fits"]


def check_operand(op: str, name: str, array, ndims=(4,), *, int32: bool = False) -> np.ndarray:
    """``array`` as a numpy array, or ValueError: it must have one of ``ndims`` dimensions,
    no zero-size axis, and integer values in int8 range (any int32 value with ``int32``)."""
    a = np.asarray(array)
    if a.ndim not in ndims:
        want = " or ".join(f"{n}-D" for n in ndims)
        raise ValueError(f"{op}: {name} must be a {want} array, got shape {a.shape}")
    if 0 in a.shape:
        raise ValueError(f"{op}: {name} has a zero-size axis (shape {a.shape}); every axis "
                         "needs at least one element")
    kind = "int32" if int32 else "int8"
    info = np.iinfo(np.int32 if int32 else np.int8)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{op}: {name} must hold integers ({kind}), got {a.dtype}")
    if a.dtype.itemsize > np.dtype(kind).itemsize or a.dtype.kind == "u":
        lo, hi = int(a.min()), int(a.max())
        if lo < info.min or hi > info.max:
            raise ValueError(f"{op}: {name} values {lo}..{hi} do not fit {kind} "
                             f"({info.min}..{info.max})")
    return a


def check_positive(op: str, name: str, value) -> None:
    """ValueError unless every entry of an int or tuple (stride, kernel) is >= 1."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    if not all(isinstance(v, (int, np.integer)) and v >= 1 for v in values):
        raise ValueError(f"{op}: {name} {value!r} must be a positive integer (or a pair of them)")


def check_fits(op: str, rt, *arrays) -> None:
    """ValueError when the int8 operands alone exceed the device's DRAM (before any
    tiling search or packing, which would take long on such shapes)."""
    need = sum(int(np.prod(np.shape(a), dtype=object)) for a in arrays)
    limit = rt.device.dram.limit
    if need > limit:
        raise ValueError(f"{op}: the operands hold {need} bytes, more than the device's "
                         f"{limit}-byte DRAM; split the operation into smaller ones")
