"""Float converters: element-wise ops, Conv / ConvTranspose / Gemm / MatMul, pools, batch
norm, shape ops, Pad, Cast, reductions. A converter that finds its inputs quantized
(DequantizeLinear outputs) and its output quantized hands the group to :mod:`.qdq` or
:mod:`.ort` for onnxruntime's fused kernel; what it cannot express runs on the host
through onnx's reference evaluator (``ctx.reference``)."""

from __future__ import annotations

import numpy as np

from ...ir import Constant, Tuple, TupleGetItem
from . import ort as _ortq
from .qdq import _qdq_binary, _qdq_layer
from .registry import (_CONVERTERS, OnnxImportError, _call, _converter, _dilate_kernel,
                       _int_attr_list, _np_dtype, _QInfo, _requant_passthrough, _spatial,
                       _Val, _where)

__all__: list[str] = []


def _unary(name, **fixed):
    def conv(ctx, node, ins, a):
        if node.op_type == "Sigmoid":
            fused = _ortq._qdq_table(ctx, node, ins[0], _ortq.logistic)
            if fused is not None:
                return fused
        return [ctx.out(_call(name, ctx.value_expr(ctx.float_val(ins[0])), **fixed))]
    return conv


for _onnx, _ir in [("Relu", "nn.relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh"),
                   ("Exp", "exp"), ("Sqrt", "sqrt"), ("Neg", "negative"), ("Abs", "abs"),
                   ("Floor", "floor"), ("Ceil", "ceil"), ("Log", "log")]:
    _CONVERTERS[_onnx] = _unary(_ir)


def _binary_conv(name):
    def conv(ctx, node, ins, a):
        if node.op_type in ("Max", "Min") and len(ins) != 2:
            return _variadic(ctx, node, ins, a)
        if node.op_type in ("Add", "Mul"):
            fused = _qdq_binary(ctx, node, ins)
            if fused is not None:
                return fused
        x, y = (ctx.value_expr(ctx.float_val(v) if v.q is not None else v) for v in ins)
        return [ctx.out(_call(name, x, y))]
    return conv


for _onnx, _ir in [("Add", "add"), ("Sub", "subtract"), ("Mul", "multiply"),
                   ("Div", "divide"), ("Max", "maximum"), ("Min", "minimum"),
                   ("Equal", "equal"), ("Less", "less"), ("Greater", "greater")]:
    _CONVERTERS[_onnx] = _binary_conv(_ir)


@_converter("Sum", "Mean")
def _variadic(ctx, node, ins, a):
    """Sum, Mean and Max/Min of any number of inputs: a chain of binary ops (so a Sum of
    two activations is the ``add`` the VTA residual-add strategies match)."""
    name = {"Sum": "add", "Mean": "add", "Max": "maximum", "Min": "minimum"}[node.op_type]
    vals = [v for v in ins if v is not None]
    exprs = [ctx.value_expr(ctx.float_val(v) if v.q is not None else v) for v in vals]
    if len(exprs) == 1 and node.op_type != "Mean":
        return [vals[0]]
    e = exprs[0]
    for other in exprs[1:]:
        e = _call(name, e, other)
    if node.op_type == "Mean" and len(exprs) > 1:
        dtype = ctx.type_of(vals[0]).dtype
        e = _call("divide", e, Constant(np.asarray(len(exprs), dtype)))
    return [ctx.out(e)]


@_converter("Identity", "Dropout")
def _identity(ctx, node, ins, a):
    if node.op_type == "Dropout" and len(ins) > 2 and ins[2] is not None and (
            ins[2].const is None or bool(ins[2].const)):
        raise OnnxImportError(f"{_where(node)}: training_mode is not supported (inference "
                              f"only)")
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        # inference: the output is the input and the mask all true (ONNX's definition)
        return [ins[0], _Val(const=np.ones(ctx.shape_of(ins[0]), np.bool_))]
    return [ins[0]]


@_converter("LeakyRelu")
def _leaky(ctx, node, ins, a):
    alpha = np.float32(a.get("alpha", 0.01))
    fused = _ortq._qdq_table(ctx, node, ins[0],
                       lambda f: np.where(f >= 0, f, (f * alpha).astype(np.float32)))
    if fused is not None:
        return fused
    return [ctx.out(_call("nn.leaky_relu", ctx.value_expr(ctx.float_val(ins[0])),
                          alpha=float(a.get("alpha", 0.01))))]


@_converter("Clip")
def _clip(ctx, node, ins, a):
    x = ctx.value_expr(ctx.float_val(ins[0]))
    bounds = []
    for i in (1, 2):
        v = ins[i] if len(ins) > i else None
        if v is not None and v.const is None:
            return ctx.reference(node, ins)  # runtime bounds
        bounds.append(None if v is None else float(v.const))
    lo, hi = bounds
    if lo is None and hi is None:
        return [ins[0]]
    return [ctx.out(_call("clip", x, a_min=-np.inf if lo is None else lo,
                          a_max=np.inf if hi is None else hi))]


@_converter("Softmax")
def _softmax(ctx, node, ins, a):
    fused = _ortq._qdq_softmax(ctx, node, ins[0], a)
    if fused is not None:
        return fused
    x = ctx.float_val(ins[0])
    shape = ctx.shape_of(x)
    e = ctx.value_expr(x)
    if ctx.opset >= 13:
        return [ctx.out(_call("nn.softmax", e, axis=int(a.get("axis", -1))))]
    # opsets < 13: the input is coerced to 2-D at `axis` and normalized over the tail
    axis = int(a.get("axis", 1)) % len(shape)
    if axis == len(shape) - 1:
        return [ctx.out(_call("nn.softmax", e, axis=-1))]
    flat = _call("reshape", e, newshape=(int(np.prod(shape[:axis])), -1))
    return [ctx.out(_call("reshape", _call("nn.softmax", flat, axis=-1), newshape=shape))]


def _conv_1d_to_2d(ctx, ins):
    """(N, C, L) conv operands as (N, C, 1, L); quantized ones stay quantized."""
    x, w = ins[0], ins[1]
    shape = ctx.shape_of(x)
    shape4 = (shape[0], shape[1], 1, shape[2])
    if x.q is not None and x.q.scale.ndim == 0 and w.q is not None and \
            w.q.src.const is not None:
        x4 = _requant_passthrough(ctx, x, _call("reshape", ctx.int8_expr(x.q.src),
                                                 newshape=shape4))
        x4.shape = shape4
        q = w.q
        w4 = _Val(q=_QInfo(_Val(const=q.src.const[:, :, None, :]), q.scale, q.zp, q.axis,
                           q.raw), dtype="float32")
        return x4, w4
    return (_Val(_call("reshape", ctx.value_expr(ctx.float_val(x)), newshape=shape4)),
            _Val(const=ctx.float_val(w).const[:, :, None, :]) if w.const is not None or
            (w.q is not None and w.q.src.const is not None) else
            _Val(_call("expand_dims", ctx.value_expr(w), axis=2)))


@_converter("Conv")
def _conv(ctx, node, ins, a):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    wshape = ctx.shape_of(w)
    if len(wshape) == 3:  # 1-D conv as a 2-D conv of height 1
        return _conv1d(ctx, node, ins, a)
    strides, pads, dil = _spatial(ctx, node, a, ctx.shape_of(x), wshape[2:], "Conv")
    groups = int(a.get("group", 1))
    tail = ctx.quantized_tail(node)
    if (tail and x.q is not None and w.q is not None and w.q.src.const is not None
            and (b is None or b.const is not None or (b.q and b.q.src.const is not None))):
        fused = _qdq_layer(ctx, node, tail, x, w, b, "conv",
                           dict(strides=strides, pads=pads, dilation=dil, groups=groups))
        if fused is not None:
            return fused
    wv = ctx.float_val(w)
    if wv.const is not None and dil != (1, 1):
        wv, dil = _Val(const=_dilate_kernel(wv.const, dil)), (1, 1)
    y = _call("nn.conv2d", ctx.value_expr(ctx.float_val(x)), ctx.value_expr(wv),
              strides=strides, padding=pads, dilation=dil, groups=groups)
    if b is not None:
        y = _call("nn.bias_add", y, ctx.value_expr(ctx.float_val(b)), axis=1)
    return [ctx.out(y)]


def _conv1d(ctx, node, ins, a):
    x2, w2 = _conv_1d_to_2d(ctx, ins)
    a2 = dict(a)
    for key, default in (("strides", [1]), ("dilations", [1])):
        a2[key] = [1] + list(a.get(key, default))
    if "pads" in a:
        a2["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    if "kernel_shape" in a:
        a2["kernel_shape"] = [1] + list(a["kernel_shape"])
    out = _conv(ctx, node, [x2, w2] + list(ins[2:]), a2)
    if isinstance(out, dict):  # the integer layer, fused with its QuantizeLinear
        for v in out.values():
            n, c, _, length = ctx.shape_of(v)
            v.expr, v.shape = _call("reshape", v.expr, newshape=(n, c, length)), None
        return out
    y = out[0]
    shape = ctx.shape_of(y)
    return [ctx.out(_call("reshape", ctx.value_expr(y), newshape=(shape[0], shape[1], shape[3])))]


@_converter("ConvTranspose")
def _conv_transpose(ctx, node, ins, a):
    # y = conv(zero-upsampled x, flipped and transposed kernel): exact, and an ordinary conv
    x, w = ctx.float_val(ins[0]), ctx.float_val(ins[1])
    b = ins[2] if len(ins) > 2 else None
    if len(ctx.shape_of(w)) > 4:
        raise OnnxImportError(f"{_where(node)}: only 1-D and 2-D ConvTranspose is supported, "
                              f"got a {len(ctx.shape_of(w)) - 2}-D kernel")
    groups = int(a.get("group", 1))
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if (w.const is None or w.const.ndim != 4 or groups != 1 or "output_shape" in a
            or auto not in ("NOTSET", "", "VALID")):
        # 1-D, grouped, a runtime weight, output_shape or SAME padding: onnx's reference
        return ctx.reference(node, ins)
    n, c, h, wd = ctx.shape_of(x)
    s = _int_attr_list(a, "strides", [1, 1])
    d = _int_attr_list(a, "dilations", [1, 1])
    op = _int_attr_list(a, "output_padding", [0, 0])
    p = _int_attr_list(a, "pads", [0, 0, 0, 0])
    wk = _dilate_kernel(w.const, d)
    kk = wk.shape[2:]
    wk = np.ascontiguousarray(wk[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    e = ctx.value_expr(x)
    if s != [1, 1]:
        # (N,C,H,1,W,1) padded to (N,C,H,s,W,s): s-1 zeros after every pixel
        e = _call("reshape", e, newshape=(n, c, h, 1, wd, 1))
        e = _call("nn.pad", e, pad_width=((0, 0), (0, 0), (0, 0), (0, s[0] - 1), (0, 0),
                                          (0, s[1] - 1)))
        e = _call("reshape", e, newshape=(n, c, h * s[0], wd * s[1]))
    # the upsampled tensor has s-1 extra trailing zeros per axis: less bottom/right padding
    pads = [kk[0] - 1 - p[0], kk[1] - 1 - p[1], kk[0] - 1 - p[2] + op[0] - (s[0] - 1),
            kk[1] - 1 - p[3] + op[1] - (s[1] - 1)]
    if min(pads) < 0:
        return ctx.reference(node, ins)  # pads larger than the kernel extent
    y = _call("nn.conv2d", e, Constant(wk.astype(np.float32)), padding=tuple(pads))
    if b is not None:
        y = _call("nn.bias_add", y, ctx.value_expr(ctx.float_val(b)), axis=1)
    return [ctx.out(y)]


def _matmul_weight(ctx, node, w, trans):
    """A (K, N) ONNX weight (or (N, K) with ``trans``) as nn.dense's (N, K)."""
    wv = ctx.float_val(w)
    if wv.const is not None:
        c = wv.const.astype(np.float32)
        return Constant(np.ascontiguousarray(c if trans else c.T))
    e = ctx.value_expr(wv)
    return e if trans else _call("transpose", e, axes=(1, 0))


@_converter("Gemm", "MatMul")
def _gemm(ctx, node, ins, a):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    gemm = node.op_type == "Gemm"
    trans_a, trans_b = (int(a.get("transA", 0)), int(a.get("transB", 0))) if gemm else (0, 0)
    alpha, beta = (float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))) if gemm else (1.0, 1.0)
    xshape, wshape = ctx.shape_of(x), ctx.shape_of(w)
    if len(wshape) != 2 or (gemm and len(xshape) != 2) or len(xshape) < 2:
        return ctx.reference(node, ins)  # batched or 1-D products
    tail = ctx.quantized_tail(node)
    if (tail and not trans_a and alpha == 1.0 and beta == 1.0 and x.q is not None
            and w.q is not None and w.q.src.const is not None and len(xshape) >= 2
            and x.q.scale.ndim == 0
            and (b is None or b.const is not None or (b.q and b.q.src.const is not None))):
        x2 = x
        if len(xshape) > 2:  # MatMul of a batch: QLinearMatMul on the rows, as a 2-D dense
            rows = (int(np.prod(xshape[:-1])), xshape[-1])
            x2 = _requant_passthrough(ctx, x, _call("reshape", ctx.int8_expr(x.q.src),
                                                    newshape=rows))
            x2.shape = rows
        fused = _qdq_layer(ctx, node, tail, x2, w, b, "dense", dict(trans_b=bool(trans_b)))
        if fused is not None and len(xshape) > 2:
            (name, v), = fused.items()
            n_out = wshape[0] if trans_b else wshape[1]
            v.expr = _call("reshape", v.expr, newshape=tuple(xshape[:-1]) + (n_out,))
        if fused is not None:
            return fused
    xe = ctx.value_expr(ctx.float_val(x))
    if trans_a:
        xe = _call("transpose", xe, axes=(1, 0))
    we = _matmul_weight(ctx, node, w, trans_b)
    if alpha != 1.0:
        we = _call("multiply", we, Constant(np.float32(alpha)))
    y = _call("nn.dense", xe, we)  # (..., K) x (N, K): nn.dense takes any leading dims
    if b is not None:
        bv = ctx.float_val(b)
        be = ctx.value_expr(bv)
        if beta != 1.0:
            be = _call("multiply", be, Constant(np.float32(beta)))
        n_out = wshape[0] if trans_b else wshape[1]
        if ctx.shape_of(bv) == (n_out,):
            y = _call("nn.bias_add", y, be, axis=-1)
        else:
            y = _call("add", y, be)
    return [ctx.out(y)]


def _pool_common(ctx, node, a, x):
    kernel = _int_attr_list(a, "kernel_shape", [])
    shape = ctx.shape_of(x)
    strides, pads, dil = _spatial(ctx, node, a, shape, kernel, node.op_type)
    if dil != (1, 1):
        raise OnnxImportError(f"{_where(node)}: dilated pooling is not supported")
    if int(a.get("ceil_mode", 0)):
        # ceil mode = extra bottom/right padding (the last window must start inside the
        # input or its begin padding)
        pads = list(pads)
        for i in range(2):
            size = shape[2 + i] + pads[i] + pads[i + 2]
            out = -(-(size - kernel[i]) // strides[i]) + 1
            if (out - 1) * strides[i] >= shape[2 + i] + pads[i]:
                out -= 1
            pads[i + 2] += max(0, (out - 1) * strides[i] + kernel[i] - size)
        pads = tuple(pads)
    return tuple(kernel), strides, pads


def _pool_dims(ctx, node, ins, a):
    """Route a pool that is not a plain 2-D one: 1-D pools as 2-D pools of height 1 (the
    converter's result), dilated ones to onnx's reference evaluator; 3-D ones are
    refused. None for a plain 2-D pool."""
    kernel = list(a.get("kernel_shape", []))
    if len(kernel) not in (1, 2):
        raise OnnxImportError(f"{_where(node)}: only 1-D and 2-D {node.op_type} is supported, "
                              f"got a {len(kernel)}-D kernel")
    if any(int(d) != 1 for d in a.get("dilations", [])) or (
            len(node.output) > 1 and node.output[1]):
        return ctx.reference(node, ins)  # dilated windows, or MaxPool's Indices output
    if len(kernel) == 2:
        return None
    x = ins[0]
    n, c, length = ctx.shape_of(x)
    x4 = _reshape_val(ctx, x, (n, c, 1, length))
    a2 = dict(a)
    for key, default in (("kernel_shape", None), ("strides", [1]), ("dilations", [1])):
        if key in a or default is not None:
            a2[key] = [1] + list(a.get(key, default))
    if "pads" in a:
        a2["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    out = _CONVERTERS[node.op_type](ctx, node, [x4] + list(ins[1:]), a2)
    if isinstance(out, dict):  # fused with its QuantizeLinear
        for v in out.values():
            nn_, cc, _, ll = ctx.shape_of(v)
            v.expr, v.shape = _call("reshape", v.expr, newshape=(nn_, cc, ll)), None
        return out
    y = out[0]
    _, _, _, ll = ctx.shape_of(y.q.src if y.q is not None else y)
    return [_reshape_val(ctx, y, (n, c, ll))]


@_converter("MaxPool")
def _max_pool(ctx, node, ins, a):
    routed = _pool_dims(ctx, node, ins, a)
    if routed is not None:
        return routed
    x = ins[0]
    kernel, strides, pads = _pool_common(ctx, node, a, x)
    attrs = dict(pool_size=kernel, strides=strides, padding=pads)
    if x.q is not None:  # max commutes with the (monotone) dequantization
        # clip(max_pool) is the VTA lowering's max-pool layer (the clip is a no-op)
        pool = _call("nn.max_pool2d", ctx.int8_expr(x.q.src), **attrs)
        return [_requant_passthrough(ctx, x, _call("clip", pool, a_min=-128, a_max=127))]
    return [ctx.out(_call("nn.max_pool2d", ctx.value_expr(ctx.float_val(x)), **attrs))]


@_converter("AveragePool")
def _avg_pool(ctx, node, ins, a):
    routed = _pool_dims(ctx, node, ins, a)
    if routed is not None:
        return routed
    fused = _ortq._qdq_avg_pool(ctx, node, ins[0], a)
    if fused is not None:
        return fused
    kernel, strides, pads = _pool_common(ctx, node, a, ins[0])
    include = bool(a.get("count_include_pad", 0))
    return [ctx.out(_call("nn.avg_pool2d", ctx.value_expr(ctx.float_val(ins[0])),
                          pool_size=kernel, strides=strides, padding=pads,
                          count_include_pad=include))]


@_converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx, node, ins, a):
    name = "nn.global_avg_pool2d" if node.op_type == "GlobalAveragePool" else \
        "nn.global_max_pool2d"
    rank = len(ctx.shape_of(ins[0]))
    if rank > 4:
        raise OnnxImportError(f"{_where(node)}: only 1-D and 2-D {node.op_type} is supported, "
                              f"got a {rank - 2}-D input")
    if rank != 4:
        return ctx.reference(node, ins)
    if node.op_type == "GlobalAveragePool":
        fused = _ortq._qdq_single(ctx, node, ins[0], "qnn.ort_global_avg_pool2d", {})
        if fused is not None:
            return fused
    return [ctx.out(_call(name, ctx.value_expr(ctx.float_val(ins[0]))))]


@_converter("BatchNormalization")
def _batch_norm(ctx, node, ins, a):
    if int(a.get("training_mode", 0)) or len([o for o in node.output if o]) > 1:
        raise OnnxImportError(f"{_where(node)}: training mode is not supported (inference "
                              f"only)")
    args = [ctx.value_expr(ctx.float_val(v)) for v in ins[:5]]
    bn = _call("nn.batch_norm", *args, axis=1, epsilon=float(a.get("epsilon", 1e-5)))
    return [ctx.out(TupleGetItem(bn, 0))]


def _reshape_val(ctx, x, newshape):
    """Reshape a value; quantized values stay quantized (same parameters)."""
    newshape = tuple(int(d) for d in newshape)
    if x.q is not None and x.q.scale.ndim == 0:
        return _requant_passthrough(ctx, x, _call("reshape", ctx.int8_expr(x.q.src),
                                                  newshape=newshape))
    return ctx.out(_call("reshape", ctx.value_expr(x), newshape=newshape), shape=newshape)


@_converter("Flatten")
def _flatten(ctx, node, ins, a):
    shape = ctx.shape_of(ins[0])
    axis = int(a.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    return [_reshape_val(ctx, ins[0], (outer, int(np.prod(shape, dtype=np.int64)) // max(outer, 1)))]


@_converter("Reshape")
def _reshape(ctx, node, ins, a):
    x, s = ins
    if s.const is None:
        return ctx.reference(node, ins)  # a runtime shape (its value fixes the type)
    shape = ctx.shape_of(x)
    want = [int(d) for d in s.const.reshape(-1)]
    allow_zero = int(a.get("allowzero", 0))
    out = [shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(want)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        out[out.index(-1)] = int(np.prod(shape, dtype=np.int64)) // max(known, 1)
    if int(np.prod(out, dtype=np.int64)) != int(np.prod(shape, dtype=np.int64)):
        raise OnnxImportError(f"{_where(node)}: cannot reshape {list(shape)} to {want}")
    return [_reshape_val(ctx, x, out)]


@_converter("Squeeze", "Unsqueeze")
def _squeeze(ctx, node, ins, a):
    shape = list(ctx.shape_of(ins[0]))
    if len(ins) > 1 and ins[1] is not None:
        if ins[1].const is None:
            return ctx.reference(node, ins)
        axes = [int(v) for v in ins[1].const.reshape(-1)]
    else:
        axes = list(a.get("axes", []))
    if node.op_type == "Squeeze":
        axes = [x % len(shape) for x in axes] or [i for i, d in enumerate(shape) if d == 1]
        out = [d for i, d in enumerate(shape) if i not in axes]
    else:
        rank = len(shape) + len(axes)
        axes = sorted(x % rank for x in axes)
        out = list(shape)
        for x in axes:
            out.insert(x, 1)
    return [_reshape_val(ctx, ins[0], out)]


@_converter("Transpose")
def _transpose(ctx, node, ins, a):
    x = ins[0]
    rank = len(ctx.shape_of(x))
    perm = tuple(int(p) for p in a.get("perm", range(rank - 1, -1, -1)))
    if x.q is not None and x.q.scale.ndim == 0:
        return [_requant_passthrough(ctx, x, _call("transpose", ctx.int8_expr(x.q.src),
                                                   axes=perm))]
    return [ctx.out(_call("transpose", ctx.value_expr(x), axes=perm))]


@_converter("Concat")
def _concat(ctx, node, ins, a):
    axis = int(a["axis"])
    vals = [v for v in ins if v is not None]
    q0 = vals[0].q
    if q0 is not None and q0.scale.ndim == 0 and all(
            v.q is not None and v.q.same_params(q0.scale, q0.zp, q0.axis) for v in vals):
        return [_requant_passthrough(ctx, vals[0], _call(
            "concatenate", Tuple([ctx.int8_expr(v.q.src) for v in vals]), axis=axis))]
    exprs = [ctx.value_expr(ctx.float_val(v) if (v.q or v.dtype == "float32") else v)
             for v in vals]
    return [ctx.out(_call("concatenate", Tuple(exprs), axis=axis))]


@_converter("Pad")
def _pad(ctx, node, ins, a):
    x = ins[0]
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    rank = len(ctx.shape_of(x))
    if mode != "constant" or len(ins) < 2 or any(v is not None and v.const is None
                                                  for v in ins[1:]):
        return ctx.reference(node, ins)  # reflect/edge/wrap, or runtime pads
    pads = [int(p) for p in ins[1].const.reshape(-1)]
    value = 0.0
    if len(ins) > 2 and ins[2] is not None:
        if ins[2].const is None:
            return ctx.reference(node, ins)
        value = float(ins[2].const.reshape(-1)[0]) if ins[2].const.size else 0.0
    axes = list(range(rank))
    if len(ins) > 3 and ins[3] is not None:
        axes = [int(v) % rank for v in ins[3].const.reshape(-1)]
    width = [(0, 0)] * rank
    for i, ax in enumerate(axes):
        width[ax] = (pads[i], pads[i + len(axes)])
    if min(pads) < 0:
        return ctx.reference(node, ins)  # negative pads crop
    return [ctx.out(_call("nn.pad", ctx.value_expr(ctx.float_val(x)), pad_width=tuple(width),
                          pad_value=value))]


@_converter("Cast")
def _cast(ctx, node, ins, a):
    to = _np_dtype(int(a["to"]))
    x = ctx.float_val(ins[0]) if ins[0].q is not None else ins[0]
    return [ctx.out(_call("cast", ctx.value_expr(x), dtype=to), dtype=to)]


@_converter("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
def _reduce(ctx, node, ins, a):
    name = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max",
            "ReduceMin": "min"}[node.op_type]
    rank = len(ctx.shape_of(ins[0]))
    axes = a.get("axes")
    if len(ins) > 1 and ins[1] is not None:
        if ins[1].const is None:
            return ctx.reference(node, ins)
        axes = [int(v) for v in ins[1].const.reshape(-1)]
    if not axes:
        if int(a.get("noop_with_empty_axes", 0)):
            return [ins[0]]
        axes = list(range(rank))
    return [ctx.out(_call(name, ctx.value_expr(ctx.float_val(ins[0])),
                          axis=tuple(int(x) % rank for x in axes),
                          keepdims=bool(a.get("keepdims", 1))))]

