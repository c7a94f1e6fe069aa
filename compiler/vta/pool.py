"""Pooling layers: TFLite's average pool (window sums on the GEMM core, the rounding
division on the host) and max pool (on the ALU)::

    cast(int8) <- clip <- qnn.avg_pool2d <- data
    [cast] <- clip <- nn.max_pool2d <- data
"""

from __future__ import annotations

import numpy as np

from ...runtime.hostops.pool import pool_counts
from ...runtime.vta_layer import HostStep
from ..ops.conv2d import plan_conv2d
from ..ops.epilogue import result_bytes_for
from ..ops.pool import global_sums_or, plan_pool2d
from .registry import Spec, Strategy, VTALayer, is_op

__all__ = ["MAX_POOL2D", "AVG_POOL2D"]


def _match_avg(inner, root, clip, out_dtype):
    if out_dtype is None or not is_op(inner, "qnn.avg_pool2d"):
        return None
    a = inner.attrs
    return VTALayer("avg_pool2d", root, inner.args[0], {
        "pool_size": a["pool_size"], "strides": a["strides"], "padding": a["padding"],
        "rounding": a["rounding"], "clip": clip, "out_dtype": out_dtype})


def _avg_spec(layer, shape, w_shape, config):
    a = layer.attrs
    kh, kw = a["pool_size"]
    # Window sums on the GEMM core (all-ones depthwise kernel: one shared weight tile,
    # zero padding; a global pool's input streamed in chunks, GlobalSumPlan), int32 out
    # in the byte planes sums of int8 need; the framework's rounding division on the
    # host, by the window's count of input positions (TFLite does not count the padding).
    conv = plan_conv2d(config, shape, (shape[1], 1, kh, kw), tuple(a["strides"]),
                       tuple(a["padding"]), groups=shape[1], out_dtype=np.int32,
                       shared_weight=True, result_bytes=result_bytes_for(128 * kh * kw))
    plan = global_sums_or(conv, warm_next=True)
    mode = "tflite" if a["rounding"] != "vta" else "vta"
    counts = pool_counts(shape[2:], a["pool_size"], a["strides"], a["padding"], mode)
    counts = counts.reshape(1, 1, *counts.shape, 1, 1)      # over the packed layout
    (lo, hi), out_dtype = a["clip"], np.dtype(a["out_dtype"]).name
    post = HostStep("vta.divide_round", {"rounding": mode, "a_min": lo, "a_max": hi,
                                         "out_dtype": out_dtype}, [counts])
    return Spec(plan, post, None, "vta+host", "window sums on VTA, rounding division on the host")


def _avg_pack(layer, spec, value):
    plan = spec.plan
    kh, kw = layer.attrs["pool_size"]
    packed = plan.pack(np.zeros(plan.x_shape, np.int8),
                       np.ones((plan.x_shape[1], 1, kh, kw), np.int8))
    del packed["data"]
    return packed


def _match_max(inner, root, clip, out_dtype):
    if not is_op(inner, "nn.max_pool2d"):
        return None
    a = inner.attrs
    return VTALayer("max_pool2d", root, inner.args[0], {
        "pool_size": a["pool_size"], "strides": a["strides"] or a["pool_size"],
        "padding": a["padding"], "clip": clip, "out_dtype": out_dtype})


def _max_spec(layer, shape, w_shape, config):
    a = layer.attrs
    plan = plan_pool2d(config, shape, "max", tuple(a["pool_size"]), tuple(a["strides"]),
                       tuple(a["padding"]))
    (lo, hi), out_dtype = a["clip"], a["out_dtype"] or np.int8
    post = None
    if lo > -128 or hi < 127 or np.dtype(out_dtype) != np.int8:
        post = HostStep("vta.clip_cast", {"a_min": lo, "a_max": hi,
                                          "out_dtype": np.dtype(out_dtype).name})
    return Spec(plan, post, None, "vta", "max on the ALU")


def _max_pack(layer, spec, value):
    plan = spec.plan
    packed = plan.pack(np.zeros(plan.x_shape, np.int8))
    del packed["data"]
    return packed


MAX_POOL2D = Strategy("max_pool2d", _match_max, _max_spec, _max_pack, priority=60)
AVG_POOL2D = Strategy("avg_pool2d", _match_avg, _avg_spec, _avg_pack, priority=70)
