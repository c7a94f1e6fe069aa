"""Quantization: QuantizeLinear / DequantizeLinear, the integer layer a QDQ Conv / Gemm /
MatMul group becomes (conv -> bias -> requantize -> clip -> cast), QDQ Add / Mul, and the
operator-format QLinearConv / QLinearMatMul."""

from __future__ import annotations

import numpy as np

from ...ir import Constant
from ...quant.layer import quantized_layer
from .registry import (OnnxImportError, _call, _check_qdtype, _converter, _dilate_kernel,
                       _QInfo, _qparams, _spatial, _to_int8_domain, _Val, _where, _zp_domain,
                       _scale_attr, _zp_attr)

__all__: list[str] = []


@_converter("QuantizeLinear")
def _quantize(ctx, node, ins, a):
    x = ins[0]
    scale, zp_raw, dtype = _qparams(node, ins, 2)
    if len(ins) > 2 and ins[2] is not None:
        dtype = ins[2].dtype
    _check_qdtype(node, dtype)
    if a.get("block_size", 0):
        raise OnnxImportError(f"{_where(node)}: blocked quantization is not supported")
    zp = _zp_domain(zp_raw, dtype)
    axis = int(a.get("axis", 1))
    if x.q is not None and x.q.same_params(scale, zp, axis):
        # Q(DQ(q)) with the same parameters is q itself
        return [_Val(x.q.src.expr, x.q.src.const, x.q.src.shape, dtype, u8=dtype == "uint8"
                     and x.q.src.const is None)]
    if x.q is not None and scale.ndim == 0 and x.q.scale.ndim == 0 and dtype != "int32":
        e = _requantize(ctx, _call("cast", ctx.int8_expr(x.q.src), dtype="int32"),
                        x.q.zp, x.q.scale / scale, zp, -128, 127)
        return [_Val(e, shape=x.q.src.shape, dtype=dtype, u8=dtype == "uint8")]
    xf = ctx.value_expr(ctx.float_val(x))
    e = _call("qnn.quantize", xf, scale=_scale_attr(scale), zero_point=_zp_attr(zp),
              axis=axis if scale.ndim else None, rounding="onnx",
              out_dtype="int32" if dtype == "int32" else "int8")
    return [_Val(e, dtype=dtype, u8=dtype == "uint8")]


@_converter("DequantizeLinear")
def _dequantize(ctx, node, ins, a):
    x = ins[0]
    scale, zp_raw, _ = _qparams(node, ins, 2)
    _check_qdtype(node, x.dtype)
    zp = _zp_domain(zp_raw, x.dtype)
    if x.const is not None:
        src = _Val(const=_to_int8_domain(x.const) if x.dtype == "uint8" else x.const)
    else:
        src = _Val(x.expr, shape=x.shape, dtype="int8" if x.dtype == "uint8" else x.dtype)
    axis = int(a.get("axis", 1))
    if axis < 0 and scale.ndim:
        axis += len(src.shape if src.shape else ctx.shape_of(src))
    return [_Val(q=_QInfo(src, scale, zp, axis, x.dtype), shape=src.shape, dtype="float32")]


def _requantize(ctx, acc, zp_in, scale, zp_out, lo, hi, axis=None):
    """int32 ``acc`` (with zero point ``zp_in``) -> int8 with ``scale`` and ``zp_out``."""
    zp_in = np.asarray(zp_in, np.int32)
    if np.any(zp_in):  # scalar zero points only (callers check)
        acc = _call("subtract", acc, Constant(zp_in))
    scale = np.asarray(scale, np.float64)
    r = _call("qnn.requantize", acc, scale=float(scale) if scale.ndim == 0 else scale,
              zero_point=int(zp_out), axis=axis if scale.ndim else None, rounding="onnx",
              out_dtype="int32")
    return _call("cast", _call("clip", r, a_min=int(lo), a_max=int(hi)), dtype="int8")


def _act_bounds(ctx, act, scale, zp):
    """int8 clip bounds of an optional Relu/Clip folded before QuantizeLinear."""
    lo, hi = -128, 127
    if act is None:
        return lo, hi
    if act.op_type == "Relu":
        return max(lo, int(zp)), hi
    ins = [ctx.scope.lookup(n, ctx) if n else None for n in act.input]

    def q(v):
        return int(np.clip(np.rint(np.float32(v) / scale) + zp, -128, 127))

    if len(ins) > 1 and ins[1] is not None:
        lo = max(lo, q(ins[1].const))
    if len(ins) > 2 and ins[2] is not None:
        hi = min(hi, q(ins[2].const))
    return lo, hi


def _weight_int8(node, w):
    """A DequantizeLinear'd constant weight as (int8 array, scale array or scalar, axis)."""
    q = w.q
    wq = q.src.const.astype(np.int32) - (q.zp.reshape((-1,) + (1,) * (q.src.const.ndim - 1))
                                         if q.zp.ndim and q.axis == 0 else q.zp)
    if q.zp.ndim and q.axis != 0 and np.any(q.zp):
        raise OnnxImportError(f"{_where(node)}: per-channel weight zero points along axis "
                              f"{q.axis} are not supported")
    if wq.min() < -128 or wq.max() > 127:
        raise OnnxImportError(f"{_where(node)}: weights minus their zero point do not fit int8 "
                              f"(range {wq.min()}..{wq.max()})")
    return wq.astype(np.int8), q.scale, q.axis


def _qdq_layer(ctx, node, tail, x, w, b, kind, p):
    """Conv/Gemm/MatMul between DequantizeLinear inputs and a QuantizeLinear: integer form."""
    act, qnode = tail
    qins = [None] + [ctx.scope.lookup(n, ctx) if n else None for n in qnode.input[1:]]
    sy, zy_raw, ydtype = _qparams(qnode, qins, 2)
    if len(qins) > 2 and qins[2] is not None:
        ydtype = qins[2].dtype
    if ydtype == "int8" and getattr(ctx, "ort_cpu", "x86-vnni") != "arm64":
        return None  # x86: int8-activation groups stay float ops (see ort_reference)
    if ydtype not in ("int8", "uint8") or sy.ndim or x.q.scale.ndim or x.q.raw != ydtype:
        # not a group onnxruntime fuses (its input and output types must match): the
        # caller imports the float op (QDQ semantics)
        return None
    zy = int(_zp_domain(zy_raw, ydtype))
    try:
        wq, sw, waxis = _weight_int8(node, w)
    except OnnxImportError:
        return None  # weights that are not int8 after their zero point: float op
    if kind == "dense" and not p["trans_b"]:
        wq = np.ascontiguousarray(wq.T)
        waxis = 1 - waxis if sw.ndim else waxis
    if sw.ndim and waxis != 0:
        return None  # scales along the reduction axis: float op
    sx, zx = x.q.scale, x.q.zp
    lo, hi = _act_bounds(ctx, act, sy, zy)
    e = _int_layer(ctx, ctx.int8_expr(x.q.src), float(sx), int(zx), wq, sw, b, float(sy), zy,
                   lo, hi, kind, p)
    ctx.fused.add(id(qnode))
    if act is not None:
        ctx.fused.add(id(act))
    return {qnode.output[0]: _Val(e, dtype=ydtype, u8=ydtype == "uint8")}


def _qdq_binary(ctx, node, ins):
    """DequantizeLinear + DequantizeLinear -> Add/Mul -> [Relu] -> QuantizeLinear: qnn.add/mul."""
    tail = ctx.quantized_tail(node)
    x, y = ins
    if tail is None or x.q is None or y.q is None or x.q.scale.ndim or y.q.scale.ndim:
        return None
    act, qnode = tail
    qins = [None] + [ctx.scope.lookup(n, ctx) if n else None for n in qnode.input[1:]]
    sy, zy_raw, ydtype = _qparams(qnode, qins, 2)
    if len(qins) > 2 and qins[2] is not None:
        ydtype = qins[2].dtype
    if ydtype not in ("int8", "uint8") or sy.ndim or not x.q.raw == y.q.raw == ydtype:
        return None
    zy = int(_zp_domain(zy_raw, ydtype))
    lo, hi = _act_bounds(ctx, act, sy, zy)
    name = "qnn.add" if node.op_type == "Add" else "qnn.mul"
    e = _call(name, ctx.int8_expr(x.q.src), ctx.int8_expr(y.q.src),
              lhs_scale=float(x.q.scale), lhs_zero_point=int(x.q.zp),
              rhs_scale=float(y.q.scale), rhs_zero_point=int(y.q.zp), out_scale=float(sy),
              out_zero_point=zy, rounding="onnx", out_dtype="int32")
    e = _call("cast", _call("clip", e, a_min=lo, a_max=hi), dtype="int8")
    ctx.fused.add(id(qnode))
    if act is not None:
        ctx.fused.add(id(act))
    return {qnode.output[0]: _Val(e, dtype=ydtype, u8=ydtype == "uint8")}


def _int_layer(ctx, xe, sx, zx, wq, sw, b, sy, zy, lo, hi, kind, p):
    """The quantized IR form of one conv/dense layer (see the module docstring)."""
    sw = np.asarray(sw, np.float32)
    acc_scale = (np.float32(sx) * sw).astype(np.float32)  # onnxruntime's float32 products
    if b is None:
        bias = None
    elif b.q is not None and b.q.src.const is not None and b.q.src.const.dtype == np.int32 \
            and np.allclose(b.q.scale, acc_scale, rtol=1e-6, atol=0) and not np.any(b.q.zp):
        bias = b.q.src.const.astype(np.int64)
    else:
        bf = ctx.float_val(b).const.astype(np.float64)
        bias = np.rint(bf / acc_scale.astype(np.float64)).astype(np.int64)
    conv = None
    if kind == "conv":
        pads = p["pads"]
        if zx != 0 and any(pads):
            t, l, bt, r = pads
            xe = _call("nn.pad", xe, pad_width=((0, 0), (0, 0), (t, bt), (l, r)),
                       pad_value=float(zx))
            pads = (0, 0, 0, 0)
        dil = p["dilation"]
        if dil != (1, 1):
            wq, dil = _dilate_kernel(wq, dil), (1, 1)
        conv = dict(strides=p["strides"], padding=pads, dilation=dil, groups=p["groups"])
    return quantized_layer(xe, wq, bias, x_zero_point=zx,
                           scale=(acc_scale / np.float32(sy)).astype(np.float64),
                           zero_point=zy, rounding="onnx", lo=int(lo), hi=int(hi), conv=conv)


@_converter("QLinearConv", "QLinearMatMul")
def _qlinear(ctx, node, ins, a):
    conv = node.op_type == "QLinearConv"
    x, xs, xz, w, ws, wz, ys, yz = ins[:8]
    b = ins[8] if conv and len(ins) > 8 else None
    for v, what in ((xs, "x_scale"), (xz, "x_zero_point"), (w, "w"), (ws, "w_scale"),
                    (wz, "w_zero_point"), (ys, "y_scale"), (yz, "y_zero_point")):
        if v is None or v.const is None:
            raise OnnxImportError(f"{_where(node)}: {what} must be a constant")
    xdtype, ydtype = x.dtype, yz.dtype
    _check_qdtype(node, xdtype)
    _check_qdtype(node, ydtype)
    zx = int(_zp_domain(xz.const, xdtype))
    zy = int(_zp_domain(yz.const, ydtype))
    # per-channel scales: along the output channels (QLinearConv's axis 0, the
    # columns of QLinearMatMul's (K, N) weight)
    wv = _Val(q=_QInfo(_Val(const=_to_int8_domain(w.const)), np.asarray(ws.const, np.float32),
                       _zp_domain(wz.const, w.dtype), 0 if conv else 1), dtype="float32")
    wq, sw, _ = _weight_int8(node, wv)
    sx, sy = float(xs.const), float(ys.const)
    xe = ctx.int8_expr(x) if x.const is None else Constant(_to_int8_domain(x.const))
    if conv:
        wshape = wq.shape
        strides, pads, dil = _spatial(ctx, node, a, ctx.shape_of(x), wshape[2:], "QLinearConv")
        p = dict(strides=strides, pads=pads, dilation=dil, groups=int(a.get("group", 1)))
        bias = None if b is None else _Val(q=_QInfo(_Val(const=b.const),
                                                    np.float32(sx) * np.asarray(sw, np.float32),
                                                    np.zeros(1, np.int32)[0], 0))
        e = _int_layer(ctx, xe, sx, zx, wq, sw, bias, sy, zy, -128, 127, "conv", p)
    else:
        xshape = ctx.shape_of(x)
        if len(wq.shape) != 2 or len(xshape) < 2:
            raise OnnxImportError(f"{_where(node)}: only QLinearMatMul by a 2-D weight is "
                                  f"supported")
        if len(xshape) > 2:  # a batch of rows: one 2-D product
            xe = _call("reshape", xe, newshape=(int(np.prod(xshape[:-1])), xshape[-1]))
        # (K, N) weight with per-column scales -> nn.dense's (N, K)
        wq = np.ascontiguousarray(wq.T)
        e = _int_layer(ctx, xe, sx, zx, wq, sw, None, sy, zy, -128, 127, "dense", {})
        if len(xshape) > 2:
            e = _call("reshape", e, newshape=tuple(xshape[:-1]) + (wq.shape[0],))
    return [_Val(e, dtype=ydtype, u8=ydtype == "uint8")]

