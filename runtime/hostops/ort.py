"""Computes of the ``qnn.*`` operators for onnxruntime's fused kernels that are not an
integer layer (QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax, table
lookups): int8-domain tensors in and out (a uint8 ONNX tensor ``u`` is held as
``u - 128``), the kernel of :mod:`.ort_kernels` on the raw values (``raw_dtype``)."""

from __future__ import annotations

import numpy as np

from . import hostop
from . import ort_kernels as K

__all__ = ["to_raw", "from_raw", "pool_kw", "ort_avg_pool2d", "ort_global_avg_pool2d",
           "ort_softmax", "lut"]


def to_raw(x8, raw_dtype):
    """int8-domain values -> the raw ONNX tensor values."""
    x8 = np.asarray(x8)
    if raw_dtype == "uint8":
        return (x8.astype(np.int16) + 128).astype(np.uint8)
    return x8.astype(np.int8)


def from_raw(y, raw_dtype):
    y = np.asarray(y)
    if raw_dtype == "uint8":
        return (y.astype(np.int16) - 128).astype(np.int8)
    return y.astype(np.int8)


def pool_kw(attrs):
    """The keyword arguments of :func:`.ort_kernels.avg_pool` from the op's attributes."""
    return dict(kernel=tuple(attrs["pool_size"]), strides=tuple(attrs["strides"]),
                pads=tuple(attrs["padding"]), count_include_pad=bool(attrs["count_include_pad"]),
                ceil_mode=bool(attrs["ceil_mode"]))


@hostop("qnn.ort_avg_pool2d")
def ort_avg_pool2d(x, *, pool_size, strides=(1, 1), padding=(0, 0, 0, 0),
                   count_include_pad=False, ceil_mode=False, in_scale, in_zero_point,
                   out_scale, out_zero_point, raw_dtype):
    """onnxruntime's QLinearAveragePool (:func:`.ort_kernels.avg_pool`); zero points raw."""
    attrs = dict(pool_size=pool_size, strides=strides, padding=padding,
                 count_include_pad=count_include_pad, ceil_mode=ceil_mode)
    y = K.avg_pool(to_raw(x, raw_dtype), in_scale, in_zero_point, out_scale, out_zero_point,
                   raw_dtype, **pool_kw(attrs))
    return from_raw(y, raw_dtype)


@hostop("qnn.ort_global_avg_pool2d")
def ort_global_avg_pool2d(x, *, in_scale, in_zero_point, out_scale, out_zero_point,
                          raw_dtype):
    """onnxruntime's QLinearGlobalAveragePool (:func:`.ort_kernels.global_avg_pool`)."""
    y = K.global_avg_pool(to_raw(x, raw_dtype), in_scale, in_zero_point, out_scale,
                          out_zero_point, raw_dtype)
    return from_raw(y, raw_dtype)


@hostop("qnn.ort_softmax")
def ort_softmax(x, *, axis=-1, in_scale, out_scale, out_zero_point, raw_dtype):
    """onnxruntime's QLinearSoftmax (:func:`.ort_kernels.softmax`) along ``axis``."""
    y = K.softmax(to_raw(x, raw_dtype), in_scale, out_scale, out_zero_point, raw_dtype,
                  axis=axis)
    return from_raw(y, raw_dtype)


@hostop("qnn.lut")
def lut(x, *, table):
    """``table[x + 128]``: an int8 -> int8 function given by its 256 values."""
    return np.asarray(table, np.int8)[np.asarray(x, np.int64) + 128]
