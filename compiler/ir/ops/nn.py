"""Neural-network operators: convolution, dense, pooling, normalization (computes:
:mod:`vtakit.runtime.hostops.nn`)."""

from __future__ import annotations

import numpy as np

from ....runtime.hostops import get_hostop
from ..op import REQUIRED, OpPattern, register_op
from ..types import TensorType, TupleType
from ._util import dtype_or_empty, is_float, norm_axis, pair, padding4, tensor_arg

__all__: list[str] = []


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


register_op("nn.conv2d", attrs={"strides": (1, 1), "padding": (0, 0, 0, 0),
                                "dilation": (1, 1), "groups": 1, "out_dtype": "",
                                "pad_value": 0.0},
            infer_type=_conv2d_type, compute=get_hostop("nn.conv2d"), num_inputs=2,
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE, normalize_attrs=_conv_norm)


def _dense_type(types, attrs):
    x, w = tensor_arg(types, 0, "data"), tensor_arg(types, 1, "weight")
    if x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
        raise TypeError(f"nn.dense needs data (..., K) and weight (O, K), got {x.shape} "
                        f"and {w.shape}")
    _check_mixed(x, w, "nn.dense")
    return TensorType(x.shape[:-1] + (w.shape[0],), attrs["out_dtype"] or x.dtype)


register_op("nn.dense", attrs={"out_dtype": ""}, infer_type=_dense_type,
            compute=get_hostop("nn.dense"),
            num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
            normalize_attrs=lambda a: {**a, "out_dtype": dtype_or_empty(a["out_dtype"])})


def _bias_add_type(types, attrs):
    x, b = tensor_arg(types, 0), tensor_arg(types, 1, "bias")
    axis = norm_axis(attrs["axis"], x.ndim)
    if b.shape != (x.shape[axis],) or b.dtype != x.dtype:
        raise TypeError(f"nn.bias_add needs a bias of shape ({x.shape[axis]},) and dtype "
                        f"{x.dtype}, got {b.shape} {b.dtype}")
    return x


register_op("nn.bias_add", attrs={"axis": 1}, infer_type=_bias_add_type,
            compute=get_hostop("nn.bias_add"),
            num_inputs=2, pattern=OpPattern.BROADCAST)


def _softmax_type(types, attrs):
    x = tensor_arg(types, 0)
    if not is_float(x.dtype):
        raise TypeError(f"nn.softmax needs a float tensor, got {x.dtype}")
    norm_axis(attrs["axis"], x.ndim)
    return x


register_op("nn.softmax", attrs={"axis": -1}, infer_type=_softmax_type,
            compute=get_hostop("nn.softmax"),
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


register_op("nn.max_pool2d", attrs={"pool_size": REQUIRED, "strides": None,
                                    "padding": (0, 0, 0, 0)},
            infer_type=_pool_type("nn.max_pool2d"), compute=get_hostop("nn.max_pool2d"),
            num_inputs=1,
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE, normalize_attrs=_pool_norm)
register_op("nn.avg_pool2d", attrs={"pool_size": REQUIRED, "strides": None,
                                    "padding": (0, 0, 0, 0), "count_include_pad": False},
            infer_type=_pool_type("nn.avg_pool2d"), compute=get_hostop("nn.avg_pool2d"),
            num_inputs=1,
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
            normalize_attrs=lambda a: {**_pool_norm(a),
                                       "count_include_pad": bool(a["count_include_pad"])})


def _gap_type(types, attrs):
    x = tensor_arg(types, 0)
    if x.ndim != 4:
        raise TypeError(f"nn.global_avg_pool2d needs NCHW data, got shape {x.shape}")
    return TensorType(x.shape[:2] + (1, 1), x.dtype)


register_op("nn.global_avg_pool2d", infer_type=_gap_type,
            compute=get_hostop("nn.global_avg_pool2d"), num_inputs=1,
            pattern=OpPattern.OUT_ELEMWISE_FUSABLE)


def _gmp_type(types, attrs):
    return _gap_type(types, attrs)


register_op("nn.global_max_pool2d", infer_type=_gmp_type, num_inputs=1,
            compute=get_hostop("nn.global_max_pool2d"),
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


register_op("nn.batch_norm", attrs={"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
            infer_type=_bn_type, compute=get_hostop("nn.batch_norm"), num_inputs=5,
            pattern=OpPattern.OPAQUE)


def _dropout_type(types, attrs):
    x = tensor_arg(types, 0)
    return TupleType([x, x])


register_op("nn.dropout", attrs={"rate": 0.5}, infer_type=_dropout_type, num_inputs=1,
            compute=get_hostop("nn.dropout"), pattern=OpPattern.OPAQUE)


def _pad_norm(a):
    pw = tuple(pair(p, "pad_width entry") for p in a["pad_width"])
    return {**a, "pad_width": pw, "pad_value": float(a["pad_value"])}


def _pad_type(types, attrs):
    x = tensor_arg(types, 0)
    pw = attrs["pad_width"]
    if len(pw) != x.ndim or any(p < 0 for pr in pw for p in pr):
        raise TypeError(f"nn.pad needs {x.ndim} non-negative (before, after) pairs, got {pw}")
    return TensorType(tuple(d + a + b for d, (a, b) in zip(x.shape, pw)), x.dtype)


register_op("nn.pad", attrs={"pad_width": REQUIRED, "pad_value": 0.0}, infer_type=_pad_type,
            compute=get_hostop("nn.pad"), num_inputs=1, pattern=OpPattern.INJECTIVE,
            normalize_attrs=_pad_norm)


def _flatten_type(types, attrs):
    x = tensor_arg(types, 0)
    if x.ndim < 1:
        raise TypeError("nn.batch_flatten needs a tensor of rank >= 1")
    return TensorType((x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64))), x.dtype)


register_op("nn.batch_flatten", infer_type=_flatten_type, num_inputs=1,
            compute=get_hostop("nn.batch_flatten"), pattern=OpPattern.INJECTIVE)
