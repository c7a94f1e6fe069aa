"""A requantized add with power-of-two scales, as a shifted sum on the GEMM core::

    cast(int8) <- clip <- qnn.add(rounding="vta") <- data, other
"""

from __future__ import annotations

import numpy as np

from ..ir import Constant, Var
from ..ops.elementwise import plan_add_gemm
from ..quant import fixed_point as fp
from ..quant.ops import add_shifts
from .registry import (LoweringError, Spec, Strategy, VTALayer, int8_store, is_op,
                       register_strategy)

__all__: list[str] = []


def _match(inner, root, clip, out_dtype):
    if (out_dtype is None or not is_op(inner, "qnn.add") or inner.attrs["rounding"] != "vta"
            or not isinstance(inner.args[1], (Var, Constant))):
        return None
    return VTALayer("add", root, inner.args[0], {
        "other": inner.args[1], "add": dict(inner.attrs), "clip": clip, "out_dtype": out_dtype})


def _spec(layer, shape, w_shape, config):
    a = layer.attrs
    if not int8_store(*a["clip"], a["out_dtype"]):
        raise LoweringError(f"an add clipped to {a['clip']} and cast to {a['out_dtype']} "
                            "is no int8 store")
    if tuple(w_shape) != shape or len(shape) not in (2, 4):
        raise LoweringError(f"an add of shapes {list(shape)} and {list(w_shape)} "
                            "(broadcasting) runs on the host")
    q = a["add"]
    ea, eb, k = add_shifts(q["lhs_scale"], q["rhs_scale"], q["out_scale"])
    if max(ea, eb) > 6:
        raise LoweringError(f"an operand scale 2^{max(ea, eb)} times the other's does not "
                            "fit an int8 weight")
    plan = plan_add_gemm(config, shape, bias=True, shift=k, clip=a["clip"])
    return Spec(plan, None, None, "vta", "requantized add with power-of-two scales: "
                "a shifted sum on the GEMM core")


def _pack(layer, spec, value):
    plan, q = spec.plan, layer.attrs["add"]
    ea, eb, k = add_shifts(q["lhs_scale"], q["rhs_scale"], q["out_scale"])
    offset = (-int(q["lhs_zero_point"]) << ea) - (int(q["rhs_zero_point"]) << eb) \
        + (int(q["out_zero_point"]) << k)
    c = plan.x_shape[1]
    packed = plan.pack(np.zeros(plan.x_shape, np.int8),
                       np.full((c, 1, 1, 1), 1 << ea, np.int8),
                       fp.wrap_int32(np.full(c, offset, np.int64)),
                       np.zeros(plan.x_shape, np.int8))
    packed["identity"] = packed["identity"] << eb
    del packed["data"], packed["residual"]
    return packed


def _unpack(plan, y, x_shape):
    return plan.unpack(y[None]).reshape(tuple(x_shape))     # (N, C) adds run as (N, C, 1, 1)


register_strategy(Strategy("add", _match, _spec, _pack, inputs={"other": "residual"},
                           unpack=_unpack))
