"""Dilated convolutions natively on VTA: the kernel with zeros between its taps.

A convolution with dilation ``(dh, dw)`` equals the undilated convolution with the
kernel ``(kh - 1) * dh + 1`` by ``(kw - 1) * dw + 1`` whose taps sit every ``dh``
rows and ``dw`` columns, zeros elsewhere (same stride, padding and groups). The
operator library plans that kernel; the strategy dilates the weights when packing.
Before this strategy such layers ran on the host.
"""

from __future__ import annotations

import numpy as np

from .conv import conv_spec, match_conv, pack_gemm
from .registry import Strategy

__all__ = ["dilate_kernel", "STRATEGY"]


def dilate_kernel(w, dilation) -> np.ndarray:
    """OIHW weights with ``dilation - 1`` zero rows/columns between the taps."""
    dh, dw = dilation
    o, i, kh, kw = w.shape
    out = np.zeros((o, i, (kh - 1) * dh + 1, (kw - 1) * dw + 1), w.dtype)
    out[:, :, ::dh, ::dw] = w
    return out


def _spec(layer, shape, w_shape, config):
    dh, dw = layer.attrs["dilation"]
    o, i, kh, kw = w_shape
    spec = conv_spec(layer, shape, (o, i, (kh - 1) * dh + 1, (kw - 1) * dw + 1), config)
    spec.why = f"dilation {dh}x{dw} as a zero-dilated kernel; " + spec.why
    # the MACs the layer does (not the zeros the kernel holds)
    spec.macs = spec.macs * kh * kw // (((kh - 1) * dh + 1) * ((kw - 1) * dw + 1))
    return spec


def _pack(layer, spec, value):
    a = layer.attrs
    w = dilate_kernel(np.asarray(value(a["weight"])), a["dilation"])
    return pack_gemm(layer, spec, w, None if a["bias"] is None else value(a["bias"]))


def _match(inner, root, clip, out_dtype):
    return match_conv(inner, root, clip, out_dtype, kind="conv2d_dilated")


STRATEGY = Strategy("conv2d_dilated", _match, _spec, _pack, priority=50)
