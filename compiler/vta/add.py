"""Requantized adds of two tensors::

    cast(int8) <- clip <- qnn.add(rounding="vta" | "tflite") <- data, other

* ``"vta"`` (power-of-two scales): a shifted sum on the GEMM core;
* ``"tflite"`` (TFLite's ADD: both operands rescaled from 20 fractional bits, then
  the sum) on a config with the ALU extension ``"requant"``: exactly, by
  :class:`~vtakit.compiler.ops.elementwise.RescaledAddPlan`; without the extension it
  runs on the host (the 0.0.2 ALU cannot rescale exactly), as with ``"requant2"``
  (its one-pass REQ has no two-operand rescale).
"""

from __future__ import annotations

import numpy as np

from ..ir import Constant, Var
from ..ops.elementwise import RescaledAddPlan, plan_add_gemm
from ..ops.epilogue import REQUANT_EXTENSION, REQUANT2_EXTENSION, EpilogueError, Requant
from ..quant import fixed_point as fp
from ..quant.ops import add_shifts
from ...runtime.hostops.qnn import ADD_LEFT_SHIFT, tflite_add_multipliers
from .registry import LoweringError, Spec, Strategy, VTALayer, int8_store, is_op

__all__ = ["STRATEGY"]


def _match(inner, root, clip, out_dtype):
    if (out_dtype is None or not is_op(inner, "qnn.add")
            or inner.attrs["rounding"] not in ("vta", "tflite")
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
    if q["rounding"] == "tflite":
        return _tflite_spec(q, shape, a["clip"], config)
    ea, eb, k = add_shifts(q["lhs_scale"], q["rhs_scale"], q["out_scale"])
    if max(ea, eb) > 6:
        raise LoweringError(f"an operand scale 2^{max(ea, eb)} times the other's does not "
                            "fit an int8 weight")
    plan = plan_add_gemm(config, shape, bias=True, shift=k, clip=a["clip"])
    return Spec(plan, None, None, "vta", "requantized add with power-of-two scales: "
                "a shifted sum on the GEMM core")


def _tflite_rescales(q):
    """``(R_a, R_b, R_out, rows)``: the ADD's three rescales as per-tensor Requants and
    their rows, concatenated; EpilogueError when the ALU cannot run one."""
    out, rows = [], []
    zps = (0, 0, q["out_zero_point"])
    for (m, s), zp in zip(tflite_add_multipliers(q["lhs_scale"], q["rhs_scale"],
                                                 q["out_scale"]), zps):
        rq, r = Requant.make(np.atleast_1d(m), np.atleast_1d(s), zp, single_rounding=False,
                             op="add")
        out.append(rq)
        rows.append(r[:, 0])
    return (*out, np.concatenate(rows))


def _tflite_spec(q, shape, clip, config):
    if REQUANT_EXTENSION not in config.extensions:
        raise LoweringError("TFLite's ADD rescales both operands exactly (20 fractional "
                            f"bits): on VTA only with the ALU extension {REQUANT_EXTENSION!r}"
                            + (f" ({REQUANT2_EXTENSION!r}'s REQ requantizes one operand; "
                               "the add runs on the host as on the base ISA)"
                               if REQUANT2_EXTENSION in config.extensions else ""))
    try:
        ra, rb, ro, _ = _tflite_rescales(q)
    except EpilogueError as e:
        raise LoweringError(str(e)) from None
    plan = RescaledAddPlan(config, shape, rescale_a=ra, rescale_b=rb, rescale_out=ro,
                           zero_points=(q["lhs_zero_point"], q["rhs_zero_point"]), clip=clip,
                           left_shift=ADD_LEFT_SHIFT)
    return Spec(plan, None, None, "vta", "TFLite's ADD exact on the ALU extension "
                f"{REQUANT_EXTENSION!r}: both operands through an identity GEMM, rescaled "
                "(SRDHM, RSHR) and summed on the ALU")


def _pack(layer, spec, value):
    plan, q = spec.plan, layer.attrs["add"]
    if q["rounding"] == "tflite":
        packed = plan.pack(np.zeros(plan.shape, np.int8), np.zeros(plan.shape, np.int8),
                           _tflite_rescales(q)[3])
        del packed["data"], packed["residual"]
        return packed
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


STRATEGY = Strategy("add", _match, _spec, _pack, inputs={"other": "residual"},
                    unpack=_unpack, priority=40)
