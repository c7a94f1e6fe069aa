"""Computes of the neural-network operators (NCHW data, OIHW weights): convolution,
dense, pooling, normalization, padding. Integers accumulate in int64 and wrap to the
output dtype at the end (exact)."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import hostop
from .elemwise import is_int

__all__: list[str] = []


def _acc_dtype(in_dtype, out_dtype):
    return np.int64 if is_int(in_dtype) else np.dtype(out_dtype)


def _windows(x, kh, kw, strides, padding, dilation, fill):
    t, l, b, r = padding
    if any(padding):
        x = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=fill)
    dh, dw = dilation
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    sh, sw = strides
    win = sliding_window_view(x, (ekh, ekw), axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw]  # N, C, OH, OW, KH, KW


@hostop("nn.conv2d")
def _conv2d(x, w, strides, padding, dilation, groups, out_dtype, pad_value=0.0):
    out_dtype = out_dtype or x.dtype
    acc = _acc_dtype(x.dtype, out_dtype)
    o, cg, kh, kw = w.shape
    win = _windows(x.astype(acc, copy=False), kh, kw, strides, padding, dilation, pad_value)
    w = w.astype(acc, copy=False)
    og = o // groups
    parts = [np.tensordot(win[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og],
                          axes=([1, 4, 5], [1, 2, 3])) for g in range(groups)]
    out = parts[0] if groups == 1 else np.concatenate(parts, axis=-1)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2)).astype(out_dtype)


@hostop("nn.dense")
def _dense(x, w, out_dtype):
    out_dtype = out_dtype or x.dtype
    acc = _acc_dtype(x.dtype, out_dtype)
    return np.matmul(x.astype(acc, copy=False), w.astype(acc, copy=False).T).astype(out_dtype)


@hostop("nn.bias_add")
def _bias_add(x, b, axis):
    axis = axis % x.ndim
    shape = [1] * x.ndim
    shape[axis] = -1
    return (x + b.reshape(shape)).astype(x.dtype)


@hostop("nn.softmax")
def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


@hostop("nn.max_pool2d")
def _max_pool2d(x, pool_size, strides, padding):
    fill = np.iinfo(x.dtype).min if is_int(x.dtype) else -np.inf
    win = _windows(x, *pool_size, strides, padding, (1, 1), fill)
    return win.max(axis=(4, 5)).astype(x.dtype)


def _int_mean(total, count, dtype):
    # integer averages truncate toward zero, as C integer division does
    q = np.abs(total) // count
    return (np.sign(total) * q).astype(dtype)


@hostop("nn.avg_pool2d")
def _avg_pool2d(x, pool_size, strides, padding, count_include_pad):
    acc = np.int64 if is_int(x.dtype) else np.float64
    win = _windows(x.astype(acc), *pool_size, strides, padding, (1, 1), 0)
    total = win.sum(axis=(4, 5))
    if count_include_pad or not any(padding):
        count = np.full(total.shape[2:], pool_size[0] * pool_size[1], np.int64)
    else:
        ones = np.ones((1, 1) + x.shape[2:], np.int64)
        count = _windows(ones, *pool_size, strides, padding, (1, 1), 0).sum(axis=(4, 5))[0, 0]
    if is_int(x.dtype):
        return _int_mean(total, count, x.dtype)
    return (total / count).astype(x.dtype)


@hostop("nn.global_avg_pool2d")
def _gap(x):
    if is_int(x.dtype):
        total = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
        return _int_mean(total, x.shape[2] * x.shape[3], x.dtype)
    return x.mean(axis=(2, 3), keepdims=True, dtype=np.float64).astype(x.dtype)


hostop("nn.global_max_pool2d", lambda x: x.max(axis=(2, 3), keepdims=True))


@hostop("nn.batch_norm")
def _batch_norm(x, gamma, beta, mean, var, axis, epsilon, center, scale):
    shape = [1] * x.ndim
    shape[axis % x.ndim] = -1
    inv = 1.0 / np.sqrt(var.astype(np.float64) + epsilon)
    g = gamma.astype(np.float64) if scale else 1.0
    out = (x - mean.reshape(shape)) * (inv * g).reshape(shape)
    if center:
        out = out + beta.reshape(shape)
    return out.astype(x.dtype), mean, var


hostop("nn.dropout", lambda x, rate: (x, np.ones_like(x)))


@hostop("nn.pad")
def _pad(x, pad_width, pad_value):
    return np.pad(x, pad_width, constant_values=np.array(pad_value).astype(x.dtype))


hostop("nn.batch_flatten", lambda x: x.reshape(x.shape[0], -1))
