"""Neural-network operators: convolution, dense, pooling, normalization."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..op import REQUIRED, OpPattern, register_op
from ..types import TensorType, TupleType
from ._util import dtype_or_empty, is_float, is_int, norm_axis, pair, padding4, tensor_arg

__all__: list[str] = []


def _acc_dtype(in_dtype, out_dtype):
    """Integers accumulate in int64 and wrap to ``out_dtype`` at the end (exact)."""
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


def _out_hw(h, w, kh, kw, strides, padding, dilation, what):
    t, l, b, r = padding
    ekh, ekw = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    oh = (h + t + b - ekh) // strides[0] + 1
    ow = (w + l + r - ekw) // strides[1] + 1
    if oh < 1 or ow < 1:
        raise TypeError(f"{what} window {kh}x{kw} with padding {padding} does not fit the "
                        f"{h}x{w} input")
    return oh, ow


def _conv_norm(a):
    return {**a, "strides": pair(a["strides"], "strides"), "padding": padding4(a["padding"]),
            "dilation": pair(a["dilation"], "dilation"), "groups": int(a["groups"]),
            "out_dtype": dtype_or_empty(a["out_dtype"]), "pad_value": float(a["pad_value"])}


def _check_mixed(x, w, what):
    if is_float(x.dtype) != is_float(w.dtype) or (is_float(x.dtype) and x.dtype != w.dtype):
        raise TypeError(f"{what} data and weight dtypes do not match: {x.dtype} and {w.dtype}")


def _conv2d_type(types, attrs):
    x, w = tensor_arg(types, 0, "data"), tensor_arg(types, 1, "weight")
    if x.ndim != 4 or w.ndim != 4:
        raise TypeError(f"nn.conv2d needs NCHW data and OIHW weight, got shapes {x.shape} "
                        f"and {w.shape}")
    _check_mixed(x, w, "nn.conv2d")
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    g = attrs["groups"]
    if g < 1 or c != ci * g or o % g:
        raise TypeError(f"nn.conv2d with groups={g}: data has {c} channels, weight "
                        f"{w.shape} expects {ci * g} and {o} outputs divisible by {g}")
    oh, ow = _out_hw(h, wd, kh, kw, attrs["strides"], attrs["padding"], attrs["dilation"],
                     "nn.conv2d")
    return TensorType((n, o, oh, ow), attrs["out_dtype"] or x.dtype)


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


register_op("nn.conv2d", attrs={"strides": (1, 1), "padding": (0, 0, 0, 0),
                                "dilation": (1, 1), "groups": 1, "out_dtype": "",
                                "pad_value": 0.0},
            infer_type=_conv2d_type, compute=_conv2d, num_inputs=2,
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE, normalize_attrs=_conv_norm)


def _dense_type(types, attrs):
    x, w = tensor_arg(types, 0, "data"), tensor_arg(types, 1, "weight")
    if x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
        raise TypeError(f"nn.dense needs data (..., K) and weight (O, K), got {x.shape} "
                        f"and {w.shape}")
    _check_mixed(x, w, "nn.dense")
    return TensorType(x.shape[:-1] + (w.shape[0],), attrs["out_dtype"] or x.dtype)


def _dense(x, w, out_dtype):
    out_dtype = out_dtype or x.dtype
    acc = _acc_dtype(x.dtype, out_dtype)
    return np.matmul(x.astype(acc, copy=False), w.astype(acc, copy=False).T).astype(out_dtype)


register_op("nn.dense", attrs={"out_dtype": ""}, infer_type=_dense_type, compute=_dense,
            num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
            normalize_attrs=lambda a: {**a, "out_dtype": dtype_or_empty(a["out_dtype"])})


def _bias_add_type(types, attrs):
    x, b = tensor_arg(types, 0), tensor_arg(types, 1, "bias")
    axis = norm_axis(attrs["axis"], x.ndim)
    if b.shape != (x.shape[axis],) or b.dtype != x.dtype:
        raise TypeError(f"nn.bias_add needs a bias of shape ({x.shape[axis]},) and dtype "
                        f"{x.dtype}, got {b.shape} {b.dtype}")
    return x


def _bias_add(x, b, axis):
    axis = axis % x.ndim
    shape = [1] * x.ndim
    shape[axis] = -1
    return (x + b.reshape(shape)).astype(x.dtype)


register_op("nn.bias_add", attrs={"axis": 1}, infer_type=_bias_add_type, compute=_bias_add,
            num_inputs=2, pattern=OpPattern.BROADCAST)


def _softmax_type(types, attrs):
    x = tensor_arg(types, 0)
    if not is_float(x.dtype):
        raise TypeError(f"nn.softmax needs a float tensor, got {x.dtype}")
    norm_axis(attrs["axis"], x.ndim)
    return x


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


register_op("nn.softmax", attrs={"axis": -1}, infer_type=_softmax_type, compute=_softmax,
            num_inputs=1, pattern=OpPattern.OPAQUE)


def _pool_norm(a):
    out = {**a, "pool_size": pair(a["pool_size"], "pool_size"),
           "padding": padding4(a["padding"])}
    out["strides"] = pair(a["strides"] if a["strides"] is not None else out["pool_size"],
                          "strides")
    return out


def _pool_type(name):
    def infer(types, attrs):
        x = tensor_arg(types, 0)
        if x.ndim != 4:
            raise TypeError(f"{name} needs NCHW data, got shape {x.shape}")
        kh, kw = attrs["pool_size"]
        oh, ow = _out_hw(x.shape[2], x.shape[3], kh, kw, attrs["strides"], attrs["padding"],
                         (1, 1), name)
        return TensorType(x.shape[:2] + (oh, ow), x.dtype)
    return infer


def _max_pool2d(x, pool_size, strides, padding):
    fill = np.iinfo(x.dtype).min if is_int(x.dtype) else -np.inf
    win = _windows(x, *pool_size, strides, padding, (1, 1), fill)
    return win.max(axis=(4, 5)).astype(x.dtype)


def _int_mean(total, count, dtype):
    # integer averages truncate toward zero, as C integer division does
    q = np.abs(total) // count
    return (np.sign(total) * q).astype(dtype)


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


register_op("nn.max_pool2d", attrs={"pool_size": REQUIRED, "strides": None,
                                    "padding": (0, 0, 0, 0)},
            infer_type=_pool_type("nn.max_pool2d"), compute=_max_pool2d, num_inputs=1,
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE, normalize_attrs=_pool_norm)
register_op("nn.avg_pool2d", attrs={"pool_size": REQUIRED, "strides": None,
                                    "padding": (0, 0, 0, 0), "count_include_pad": False},
            infer_type=_pool_type("nn.avg_pool2d"), compute=_avg_pool2d, num_inputs=1,
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
            normalize_attrs=lambda a: {**_pool_norm(a),
                                       "count_include_pad": bool(a["count_include_pad"])})


def _gap_type(types, attrs):
    x = tensor_arg(types, 0)
    if x.ndim != 4:
        raise TypeError(f"nn.global_avg_pool2d needs NCHW data, got shape {x.shape}")
    return TensorType(x.shape[:2] + (1, 1), x.dtype)


def _gap(x):
    if is_int(x.dtype):
        total = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
        return _int_mean(total, x.shape[2] * x.shape[3], x.dtype)
    return x.mean(axis=(2, 3), keepdims=True, dtype=np.float64).astype(x.dtype)


register_op("nn.global_avg_pool2d", infer_type=_gap_type, compute=_gap, num_inputs=1,
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE)


def _gmp_type(types, attrs):
    return _gap_type(types, attrs)


register_op("nn.global_max_pool2d", infer_type=_gmp_type, num_inputs=1,
            compute=lambda x: x.max(axis=(2, 3), keepdims=True),
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE)


def _bn_type(types, attrs):
    x = tensor_arg(types, 0)
    if not is_float(x.dtype):
        raise TypeError(f"nn.batch_norm needs float data, got {x.dtype}")
    axis = norm_axis(attrs["axis"], x.ndim)
    c = x.shape[axis]
    for i, name in enumerate(("gamma", "beta", "moving_mean", "moving_var"), start=1):
        t = tensor_arg(types, i, name)
        if t.shape != (c,) or t.dtype != x.dtype:
            raise TypeError(f"nn.batch_norm {name} must be ({c},) {x.dtype}, got {t.shape} "
                            f"{t.dtype}")
    vec = TensorType((c,), x.dtype)
    return TupleType([x, vec, vec])


def _batch_norm(x, gamma, beta, mean, var, axis, epsilon, center, scale):
    shape = [1] * x.ndim
    shape[axis % x.ndim] = -1
    inv = 1.0 / np.sqrt(var.astype(np.float64) + epsilon)
    g = gamma.astype(np.float64) if scale else 1.0
    out = (x - mean.reshape(shape)) * (inv * g).reshape(shape)
    if center:
        out = out + beta.reshape(shape)
    return out.astype(x.dtype), mean, var


register_op("nn.batch_norm", attrs={"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
            infer_type=_bn_type, compute=_batch_norm, num_inputs=5, pattern=OpPattern.OPAQUE)


def _dropout_type(types, attrs):
    x = tensor_arg(types, 0)
    return TupleType([x, x])


register_op("nn.dropout", attrs={"rate": 0.5}, infer_type=_dropout_type, num_inputs=1,
            compute=lambda x, rate: (x, np.ones_like(x)), pattern=OpPattern.OPAQUE)


def _pad_norm(a):
    pw = tuple(pair(p, "pad_width entry") for p in a["pad_width"])
    return {**a, "pad_width": pw, "pad_value": float(a["pad_value"])}


def _pad_type(types, attrs):
    x = tensor_arg(types, 0)
    pw = attrs["pad_width"]
    if len(pw) != x.ndim or any(p < 0 for pr in pw for p in pr):
        raise TypeError(f"nn.pad needs {x.ndim} non-negative (before, after) pairs, got {pw}")
    return TensorType(tuple(d + a + b for d, (a, b) in zip(x.shape, pw)), x.dtype)


def _pad(x, pad_width, pad_value):
    return np.pad(x, pad_width, constant_values=np.array(pad_value).astype(x.dtype))


register_op("nn.pad", attrs={"pad_width": REQUIRED, "pad_value": 0.0}, infer_type=_pad_type,
            compute=_pad, num_inputs=1, pattern=OpPattern.INJECTIVE, normalize_attrs=_pad_norm)


def _flatten_type(types, attrs):
    x = tensor_arg(types, 0)
    if x.ndim < 1:
        raise TypeError("nn.batch_flatten needs a tensor of rank >= 1")
    return TensorType((x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64))), x.dtype)


register_op("nn.batch_flatten", infer_type=_flatten_type, num_inputs=1,
            compute=lambda x: x.reshape(x.shape[0], -1), pattern=OpPattern.INJECTIVE)
