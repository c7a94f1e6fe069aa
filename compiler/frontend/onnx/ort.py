"""onnxruntime's quantized kernels and com.microsoft ops in the ONNX importer.

Two ways a model asks for them, one exact formula each (documented with its
onnxruntime source in :mod:`vtakit.runtime.hostops.ort_kernels`):

* QDQ groups ``DequantizeLinear -> op -> QuantizeLinear`` that onnxruntime's QDQ
  transformer fuses: AveragePool, GlobalAveragePool, Softmax, Sigmoid, LeakyRelu
  here (Conv / Gemm / MatMul / Add / Mul in :mod:`.qdq`);
* the operator-format com.microsoft ops that ``quantize_static(QOperator)`` and
  onnxruntime's optimizer write: QLinearAdd, QLinearMul, QLinearConcat,
  QLinearAveragePool, QLinearGlobalAveragePool, QLinearSigmoid, QLinearLeakyRelu,
  QLinearSoftmax, QGemm.

The float32 kernels become the host ops ``qnn.ort_*`` and ``qnn.lut``
(:mod:`vtakit.compiler.quant.ort_ops`); the integer layers run on VTA.
"""

from __future__ import annotations

import numpy as np

from ...ir import Constant, Tuple
from ....runtime.hostops.ort_kernels import logistic
from ...quant.ort_ops import lut_table
from .qdq import _int_layer, _weight_int8
from .registry import (OnnxImportError, _call, _converter, _int_attr_list, _QInfo, _qparams,
                       _requant_passthrough, _spatial, _to_int8_domain, _Val, _where,
                       _zp_domain)

__all__ = []


# ---- onnxruntime's single-input QDQ kernels -------------------------------------------------
#
# DequantizeLinear -> op -> QuantizeLinear of the same 8-bit type, the op's output used by
# that QuantizeLinear alone: onnxruntime's QDQ transformer fuses the group into one kernel
# (QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax, QLinearSigmoid,
# QLinearLeakyRelu); vtakit gives it that kernel's exact formula (the ``qnn.ort_*`` and
# ``qnn.lut`` ops, compiler/quant/ort_ops.py, formulas in runtime/hostops/ort_kernels.py).
# They run on the host (float32 arithmetic or a 256-entry table).

def _qdq_single(ctx, node, x, op, attrs):
    """``op`` on ``x``'s int8 values for the fused group of ``node``, or None."""
    if x.q is None or x.q.scale.ndim or x.q.raw not in ("uint8", "int8"):
        return None
    tail = ctx.quantized_tail(node)
    if tail is None or tail[0] is not None:
        return None
    qnode = tail[1]
    qins = [None] + [ctx.scope.lookup(n, ctx) if n else None for n in qnode.input[1:]]
    sy, zy_raw, ydtype = _qparams(qnode, qins, 2)
    if len(qins) > 2 and qins[2] is not None:
        ydtype = qins[2].dtype
    if ydtype != x.q.raw or sy.ndim:
        return None
    zy = int(np.asarray(zy_raw if zy_raw is not None else 0).reshape(()))
    if op == "qnn.lut":
        e = _call(op, ctx.int8_expr(x.q.src),
                  table=lut_table(attrs["fn"], x.q.scale, x.q.raw_zp, sy, zy, ydtype))
    else:
        q = dict(in_scale=float(x.q.scale), out_scale=float(sy), out_zero_point=zy,
                 raw_dtype=ydtype)
        if op != "qnn.ort_softmax":
            q["in_zero_point"] = x.q.raw_zp
        e = _call(op, ctx.int8_expr(x.q.src), **attrs, **q)
    ctx.fused.add(id(qnode))
    return {qnode.output[0]: _Val(e, dtype=ydtype, u8=ydtype == "uint8")}


def _qdq_table(ctx, node, x, fn):
    """QLinearSigmoid / QLinearLeakyRelu: a table of ``fn`` on every input value."""
    return _qdq_single(ctx, node, x, "qnn.lut", {"fn": fn})


def _qdq_avg_pool(ctx, node, x, a):
    if x.q is None:
        return None
    kernel = _int_attr_list(a, "kernel_shape", [])
    if len(kernel) != 2 or len(ctx.shape_of(x)) != 4:
        return None
    strides, pads, dil = _spatial(ctx, node, a, ctx.shape_of(x), kernel, "AveragePool")
    if dil != (1, 1):
        return None
    return _qdq_single(ctx, node, x, "qnn.ort_avg_pool2d", dict(
        pool_size=tuple(kernel), strides=strides, padding=pads,
        count_include_pad=bool(a.get("count_include_pad", 0)),
        ceil_mode=bool(a.get("ceil_mode", 0))))


def _qdq_softmax(ctx, node, x, a):
    if x.q is None:
        return None
    shape = ctx.shape_of(x)
    if ctx.opset >= 13:
        return _qdq_single(ctx, node, x, "qnn.ort_softmax",
                           {"axis": int(a.get("axis", -1)) % len(shape)})
    # opsets < 13: normalized over the tail from `axis`, as a 2-D softmax
    axis = int(a.get("axis", 1)) % len(shape)
    flat = (int(np.prod(shape[:axis])), int(np.prod(shape[axis:])))
    x2 = _requant_passthrough(ctx, x, _call("reshape", ctx.int8_expr(x.q.src), newshape=flat))
    x2.shape = flat
    out = _qdq_single(ctx, node, x2, "qnn.ort_softmax", {"axis": 1})
    if out is None:
        return None
    (name, v), = out.items()
    v.expr = _call("reshape", v.expr, newshape=tuple(shape))
    return out


# ---- onnxruntime's operator-format quantized ops (com.microsoft) ----------------------------
#
# What quantize_static(quant_format=QOperator) writes and onnxruntime's own optimizer
# produces: the same kernels as the fused QDQ groups above, with their parameters as
# inputs (constants).

def _ms_params(node, ins, names):
    """The constant scale / zero point inputs at ``names`` (index -> what)."""
    out = []
    for i, what in names:
        v = ins[i] if i < len(ins) else None
        if v is None:
            if what.endswith("zero_point"):
                out.append(0)
                continue
            raise OnnxImportError(f"{_where(node)}: {what} is required")
        if v.const is None:
            raise OnnxImportError(f"{_where(node)}: {what} must be a constant")
        c = np.asarray(v.const).reshape(-1)
        if c.size != 1:
            raise OnnxImportError(f"{_where(node)}: {what} must be a scalar (per-tensor)")
        out.append(float(c[0]) if what.endswith("scale") else int(c[0]))
    return out


def _ms_quantized(ctx, node, x, scale, zp):
    """``x`` (a raw uint8/int8 tensor) as a quantized value (int8 domain inside)."""
    dtype = "uint8" if x.u8 else (x.dtype or ctx.type_of(x).dtype)
    if dtype not in ("uint8", "int8"):
        raise OnnxImportError(f"{_where(node)}: {dtype} input; expected uint8 or int8")
    zp8 = zp - 128 if dtype == "uint8" else zp
    if x.const is not None:
        src = _Val(const=_to_int8_domain(x.const))
    elif x.u8 or dtype == "int8":
        src = _Val(x.expr, shape=x.shape, dtype="int8")
    else:  # a uint8 expression holding the true values (e.g. a float-path op's output)
        src = _Val(_call("cast", _call("subtract", _call("cast", x.expr, dtype="int32"),
                                       Constant(np.int32(128))), dtype="int8"),
                   shape=x.shape, dtype="int8")
    return _Val(q=_QInfo(src, np.float32(scale), np.int32(zp8), None, dtype),
                shape=src.shape, dtype="float32")


def _ms_out(e, dtype):
    return [_Val(e, dtype=dtype, u8=dtype == "uint8")]


def _ms_unary(ctx, node, ins, op, attrs):
    """QLinearSigmoid / LeakyRelu / AveragePool / GlobalAveragePool / Softmax:
    inputs (X, X_scale, X_zero_point, Y_scale, Y_zero_point)."""
    if int(attrs.pop("channels_last", 0)):
        raise OnnxImportError(f"{_where(node)}: channels_last is not supported (NCHW only)")
    xs, xz, ys, yz = _ms_params(node, ins, [(1, "X_scale"), (2, "X_zero_point"),
                                             (3, "Y_scale"), (4, "Y_zero_point")])
    x = _ms_quantized(ctx, node, ins[0], xs, xz)
    dtype = x.q.raw
    src = ctx.int8_expr(x.q.src)
    if op == "qnn.lut":
        e = _call(op, src, table=lut_table(attrs["fn"], xs, xz, ys, yz, dtype))
    else:
        q = dict(in_scale=xs, out_scale=ys, out_zero_point=yz, raw_dtype=dtype)
        if op != "qnn.ort_softmax":
            q["in_zero_point"] = xz
        e = _call(op, src, **attrs, **q)
    return _ms_out(e, dtype)


@_converter("QLinearSigmoid", "QLinearLeakyRelu", domain="com.microsoft")
def _ms_table(ctx, node, ins, a):
    if node.op_type == "QLinearSigmoid":
        fn = logistic
    else:
        alpha = np.float32(a.get("alpha", 0.01))

        def fn(f):
            return np.where(f >= 0, f, (f * alpha).astype(np.float32))
    return _ms_unary(ctx, node, ins, "qnn.lut", {"fn": fn})


@_converter("QLinearAveragePool", domain="com.microsoft")
def _ms_avg_pool(ctx, node, ins, a):
    kernel = _int_attr_list(a, "kernel_shape", [])
    shape = ctx.shape_of(ins[0])
    if len(kernel) != 2 or len(shape) != 4:
        raise OnnxImportError(f"{_where(node)}: only 2-D NCHW pooling is supported")
    strides, pads, _ = _spatial(ctx, node, a, shape, kernel, "QLinearAveragePool")
    return _ms_unary(ctx, node, ins, "qnn.ort_avg_pool2d", dict(
        pool_size=tuple(kernel), strides=strides, padding=pads,
        count_include_pad=bool(a.get("count_include_pad", 0)),
        ceil_mode=bool(a.get("ceil_mode", 0)), channels_last=a.get("channels_last", 0)))


@_converter("QLinearGlobalAveragePool", domain="com.microsoft")
def _ms_gap(ctx, node, ins, a):
    return _ms_unary(ctx, node, ins, "qnn.ort_global_avg_pool2d",
                     {"channels_last": a.get("channels_last", 0)})


@_converter("QLinearSoftmax", domain="com.microsoft")
def _ms_softmax(ctx, node, ins, a):
    shape = ctx.shape_of(ins[0])
    opset = int(a.get("opset", 13))
    if opset >= 13:
        return _ms_unary(ctx, node, ins, "qnn.ort_softmax",
                         {"axis": int(a.get("axis", -1)) % len(shape)})
    axis = int(a.get("axis", 1)) % len(shape)
    flat = (int(np.prod(shape[:axis])), int(np.prod(shape[axis:])))
    x2 = _Val(_call("reshape", ctx.int8_expr(ins[0]), newshape=flat), shape=flat,
              dtype=ins[0].dtype, u8=ins[0].u8)
    (v,) = _ms_unary(ctx, node, [x2] + list(ins[1:]), "qnn.ort_softmax", {"axis": 1})
    v.expr = _call("reshape", v.expr, newshape=tuple(shape))
    return [v]


@_converter("QLinearAdd", "QLinearMul", domain="com.microsoft")
def _ms_binary(ctx, node, ins, a):
    sa, za, sb, zb, sc, zc = _ms_params(node, ins, [
        (1, "A_scale"), (2, "A_zero_point"), (4, "B_scale"), (5, "B_zero_point"),
        (6, "C_scale"), (7, "C_zero_point")])
    x, y = _ms_quantized(ctx, node, ins[0], sa, za), _ms_quantized(ctx, node, ins[3], sb, zb)
    dtype = x.q.raw
    zc8 = zc - 128 if dtype == "uint8" else zc
    name = "qnn.add" if node.op_type == "QLinearAdd" else "qnn.mul"
    e = _call(name, ctx.int8_expr(x.q.src), ctx.int8_expr(y.q.src), lhs_scale=sa,
              lhs_zero_point=int(x.q.zp), rhs_scale=sb, rhs_zero_point=int(y.q.zp),
              out_scale=sc, out_zero_point=zc8, rounding="onnx", out_dtype="int32")
    return _ms_out(_call("cast", _call("clip", e, a_min=-128, a_max=127), dtype="int8"), dtype)


@_converter("QLinearConcat", domain="com.microsoft")
def _ms_concat(ctx, node, ins, a):
    ys, yz = _ms_params(node, ins, [(0, "Y_scale"), (1, "Y_zero_point")])
    parts, dtype = [], None
    for k in range(2, len(ins), 3):
        xs, xz = _ms_params(node, ins, [(k + 1, "X_scale"), (k + 2, "X_zero_point")])
        x = _ms_quantized(ctx, node, ins[k], xs, xz)
        dtype = dtype or x.q.raw
        e = ctx.int8_expr(x.q.src)
        if np.float32(xs) != np.float32(ys) or xz != yz:  # requantized through a table
            e = _call("qnn.lut", e, table=lut_table(lambda f: f, xs, xz, ys, yz, dtype))
        parts.append(e)
    return _ms_out(_call("concatenate", Tuple(parts), axis=int(a["axis"])), dtype)


@_converter("QGemm", domain="com.microsoft")
def _ms_gemm(ctx, node, ins, a):
    if len(ins) < 9 or ins[7] is None:
        raise OnnxImportError(f"{_where(node)}: a float output (no y_scale) is not supported")
    if int(a.get("transA", 0)):
        raise OnnxImportError(f"{_where(node)}: transA is not supported")
    sa, za, ys, yz = _ms_params(node, ins, [(1, "A_scale"), (2, "A_zero_point"),
                                             (7, "y_scale"), (8, "y_zero_point")])
    x = _ms_quantized(ctx, node, ins[0], sa, za)
    w, ws, wz = ins[3], ins[4], ins[5]
    if w is None or w.const is None or ws.const is None or (wz is not None and wz.const is None):
        raise OnnxImportError(f"{_where(node)}: B and its scale and zero point must be constants")
    wv = _Val(q=_QInfo(_Val(const=_to_int8_domain(w.const)), np.asarray(ws.const, np.float32),
                       _zp_domain(wz.const if wz is not None else 0, w.dtype), 1 if
                       np.ndim(ws.const) and not int(a.get("transB", 0)) else 0, w.dtype),
              dtype="float32")
    alpha = float(a.get("alpha", 1.0))
    wq, sw, waxis = _weight_int8(node, wv)
    if not int(a.get("transB", 0)):
        wq = np.ascontiguousarray(wq.T)
    bias = None
    c = ins[6] if len(ins) > 6 else None
    # onnxruntime's output scale: alpha * a_scale * b_scale / y_scale, left to right
    sx = np.float32(np.float32(alpha) * np.float32(sa)) if alpha != 1.0 else np.float32(sa)
    if c is not None:
        if c.const is None:
            raise OnnxImportError(f"{_where(node)}: C must be a constant")
        # C is added to the int32 accumulator as it is
        bias = _Val(q=_QInfo(_Val(const=np.asarray(c.const, np.int32).reshape(-1)),
                             (sx * np.asarray(sw, np.float32)).astype(np.float32),
                             np.int32(0), 0), dtype="float32")
    dtype = x.q.raw
    yz8 = yz - 128 if dtype == "uint8" else yz
    e = _int_layer(ctx, ctx.int8_expr(x.q.src), float(sx), int(x.q.zp), wq, sw, bias, ys, yz8,
                   -128, 127, "dense", {})
    return _ms_out(e, dtype)
