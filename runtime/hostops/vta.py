"""Host steps after a VTA kernel, on its packed result (``planes``: the downloaded
``out`` operand, ``(planes, N/b, C/c, H, W, b, c)``, one int8 plane or four byte
planes of an int32 result). Each returns the packed int8 result, so a layer whose
output stays on the device is never unpacked. Registered as ``vtakit.op.vta.*``."""

from __future__ import annotations

import numpy as np

from . import fixed_point as fp
from . import hostop
from .pool import divide_round
from .qnn import requantize

__all__ = ["assemble_planes", "requantize_packed", "divide_round_packed", "clip_cast_packed"]


def assemble_planes(planes) -> np.ndarray:
    """Four int8 byte planes (least significant first, stacked on axis 0) -> int32."""
    p = np.asarray(planes).view(np.uint8).astype(np.uint32)
    return (p[0] | (p[1] << 8) | (p[2] << 16) | (p[3] << 24)).view(np.int32)


@hostop("vta.requantize")
def requantize_packed(planes, scale, zero_point, correction=None, *, rounding, a_min, a_max,
                      out_dtype):
    """The exact requantize (``qnn.requantize`` with the framework's ``rounding``), clip and
    cast of an int32 result, after adding ``correction`` (packed int32: what a non-zero
    padding value adds at the border). ``scale`` and ``zero_point`` are scalars or
    per-lane arrays shaped to broadcast over the packed layout."""
    acc = assemble_planes(planes)
    if correction is not None:
        acc = fp.wrap_int32(acc.astype(np.int64) + correction)
    y = requantize(acc, scale=scale, zero_point=zero_point, axis=None, rounding=rounding)
    return np.clip(y.astype(np.int64), a_min, a_max).astype(out_dtype)


@hostop("vta.divide_round")
def divide_round_packed(planes, counts, *, rounding, a_min, a_max, out_dtype):
    """Window sums (int32) divided by each window's count with the framework's rounding
    (:func:`.pool.divide_round`), clipped and cast: an average pool's host step."""
    return np.clip(divide_round(assemble_planes(planes), counts, rounding),
                   a_min, a_max).astype(out_dtype)


@hostop("vta.clip_cast")
def clip_cast_packed(planes, *, a_min, a_max, out_dtype):
    """An int8 result clipped and cast (a clip narrower than int8's range, or a wider
    dtype)."""
    return np.clip(planes[0], a_min, a_max).astype(out_dtype)
