"""TFLite frontend: a ``.tflite`` flatbuffer -> an :class:`~vtakit.compiler.ir.IRModule`.

int8 models become the quantized IR form of :mod:`vtakit.compiler.quant` with
TFLite's rounding everywhere, so the IR interpreter reproduces TFLite's
reference kernels (``OpResolverType.BUILTIN_REF``). Float ops of int8 models
(SOFTMAX, LOGISTIC) run as dequantize -> float -> quantize.

Layout: TFLite is NHWC; the IR is NCHW. 4-D values are converted lazily, where
an op needs NCHW (convolution, pooling, ...); layout-free ops (element-wise,
quantize) keep whatever layout their input has, so the transposes sit at the
model's edges (a reshape of a 4-D tensor with more than one non-unit spatial or
channel dimension also needs NHWC order). ``main``'s parameters and results keep
the model's tensor names, dtypes and NHWC shapes.

Ops that only compute shapes (SHAPE, STRIDED_SLICE, PACK, ... on constants) are
evaluated here in numpy.
"""

from __future__ import annotations

import os
import struct

import numpy as np

from ..ir import (Call, Constant, Function, IRModule, QuantParams, TensorType, Tuple, Var,
                  get_op)
from ...hw.errors import VtakitError
from .. import quant  # noqa: F401  (registers the qnn.* operators)
from ..quant import activation_range
from ..quant.layer import quantized_layer

__all__ = ["from_tflite", "TFLiteError", "SUPPORTED_OPS"]


class TFLiteError(VtakitError, ValueError):
    """A model file that is not a valid TFLite flatbuffer or uses an unsupported feature."""


_DTYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool",
           7: "int16", 9: "int8", 10: "float64"}
_ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}
_NHWC_TO_NCHW = (0, 3, 1, 2)
_NCHW_TO_NHWC = (0, 2, 3, 1)
# NHWC axis -> NCHW axis
_AXIS_TO_NCHW = {0: 0, 1: 2, 2: 3, 3: 1}


def _op(name, *args, **attrs):
    return Call(get_op(name), list(args), attrs)


class _Value:
    """An IR expression for a TFLite tensor, in NHWC (as TFLite) or NCHW (4-D only)."""

    __slots__ = ("expr", "layout")

    def __init__(self, expr, layout="NHWC"):
        self.expr = expr
        self.layout = layout


class _Tensor:
    """What the converter needs of one flatbuffer tensor."""

    def __init__(self, model, sg, index):
        t = sg.Tensors(index)
        self.index = index
        self.name = t.Name().decode("utf-8", "replace") if t.Name() else f"tensor_{index}"
        self.shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        code = t.Type()
        if code not in _DTYPES:
            raise TFLiteError(f"tensor {index} ('{self.name}') has element type code {code}, "
                              f"which vtakit does not support ({', '.join(_DTYPES.values())})")
        self.dtype = _DTYPES[code]
        self.data = None
        if t.Buffer() > 0:
            if t.Buffer() >= model.BuffersLength():
                raise TFLiteError(f"tensor {index} ('{self.name}') refers to buffer "
                                  f"{t.Buffer()}, but the model has {model.BuffersLength()}")
            buf = model.Buffers(t.Buffer())
            if buf.DataLength():
                raw = buf.DataAsNumpy().tobytes()
                n = int(np.prod(self.shape, dtype=np.int64))
                if len(raw) != n * np.dtype(self.dtype).itemsize:
                    raise TFLiteError(f"tensor {index} ('{self.name}'): buffer holds {len(raw)} "
                                      f"bytes, shape {self.shape} of {self.dtype} needs "
                                      f"{n * np.dtype(self.dtype).itemsize}")
                self.data = np.frombuffer(raw, self.dtype).reshape(self.shape).copy()
        self.scale = self.zero_point = None
        self.axis = 0
        q = t.Quantization()
        if q is not None and q.ScaleLength():
            self.scale = q.ScaleAsNumpy().astype(np.float32)
            self.zero_point = (q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength()
                               else np.zeros(self.scale.shape, np.int64))
            self.axis = int(q.QuantizedDimension())

    @property
    def quantized(self):
        return self.scale is not None and self.dtype in ("int8", "uint8", "int16", "int32")

    @property
    def s(self) -> float:
        """The per-tensor scale (float32 value as a Python float)."""
        return float(self.scale[0])

    @property
    def zp(self) -> int:
        return int(self.zero_point[0])

    def quant_params(self):
        if not self.quantized:
            return None
        if self.scale.size > 1:
            return QuantParams(self.scale, self.zero_point, axis=self.axis)
        return QuantParams(self.s, self.zp)

    def ir_type(self):
        return TensorType(self.shape, self.dtype, self.quant_params())


def _same_padding(size, k, stride, dilation=1):
    """TFLite's SAME padding (before, after) of one spatial dimension."""
    out = (size + stride - 1) // stride
    eff = (k - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


class _Converter:
    def __init__(self, model, source):
        self.model = model
        self.source = source
        if model.SubgraphsLength() < 1:
            raise TFLiteError(f"{source}: the model has no subgraph")
        self.sg = model.Subgraphs(0)
        self.tensors = [_Tensor(model, self.sg, i) for i in range(self.sg.TensorsLength())]
        self.values: dict[int, _Value] = {}
        self.consts: dict[int, np.ndarray] = {t.index: t.data for t in self.tensors
                                              if t.data is not None}
        self.opnames = self._opcode_names()

    # ------------------------------------------------------------------ helpers

    def _opcode_names(self):
        from tflite.BuiltinOperator import BuiltinOperator
        names = {v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}
        out = []
        for i in range(self.model.OperatorCodesLength()):
            oc = self.model.OperatorCodes(i)
            code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
            if code == 32 and oc.CustomCode():  # CUSTOM
                out.append("CUSTOM:" + oc.CustomCode().decode("utf-8", "replace"))
            else:
                out.append(names.get(code, f"BUILTIN_{code}"))
        return out

    def value(self, index, layout=None) -> _Value:
        """The tensor as an IR value, converted to ``layout`` ("NHWC"/"NCHW") if given."""
        if index not in self.values:
            if index in self.consts:
                self.values[index] = _Value(Constant(np.asarray(self.consts[index])), "NHWC")
            else:
                t = self.tensors[index]
                raise TFLiteError(f"{self.source}: tensor {index} ('{t.name}') is read before "
                                  "any operator writes it")
        v = self.values[index]
        if layout is None or v.layout == layout or len(self.tensors[index].shape) != 4:
            return v
        perm = _NHWC_TO_NCHW if layout == "NCHW" else _NCHW_TO_NHWC
        key = (index, layout)
        conv = self.values.get(key)
        if conv is None:
            if isinstance(v.expr, Constant):
                conv = _Value(Constant(np.ascontiguousarray(
                    np.transpose(v.expr.data, perm))), layout)
            else:
                conv = _Value(_op("transpose", v.expr, axes=perm), layout)
            self.values[key] = conv
        return conv

    def nchw(self, index):
        return self.value(index, "NCHW").expr

    def set(self, index, expr, layout="NHWC"):
        self.values[index] = _Value(expr, layout)

    def const(self, index, what):
        if index not in self.consts:
            raise TFLiteError(f"{self.source}: {what} (tensor {index}, "
                              f"'{self.tensors[index].name}') must be a constant")
        return self.consts[index]

    def options(self, op, cls_name):
        import importlib
        mod = importlib.import_module(f"tflite.{cls_name}")
        opts = getattr(mod, cls_name)()
        table = op.BuiltinOptions()
        if table is None:
            return None
        opts.Init(table.Bytes, table.Pos)
        return opts

    def finish(self, expr, out: _Tensor, activation="NONE", layout="NHWC"):
        """clip to the fused activation's range, cast to the output dtype, store."""
        lo, hi = activation_range(activation, out.s, out.zp, out.dtype)
        expr = _op("clip", expr, a_min=lo, a_max=hi)
        self.set(out.index, _op("cast", expr, dtype=out.dtype), layout)

    # ------------------------------------------------------------------ convert

    def convert(self, outputs=None) -> IRModule:
        sg = self.sg
        params = []
        for k in range(sg.InputsLength()):
            t = self.tensors[sg.Inputs(k)]
            var = Var(t.name, t.ir_type())
            params.append(var)
            self.set(t.index, var)
        for i in range(sg.OperatorsLength()):
            op = sg.Operators(i)
            if op.OpcodeIndex() >= len(self.opnames):
                raise TFLiteError(f"{self.source}: operator {i} uses opcode index "
                                  f"{op.OpcodeIndex()}, but the model defines "
                                  f"{len(self.opnames)} opcodes")
            name = self.opnames[op.OpcodeIndex()]
            ins = [int(op.Inputs(j)) for j in range(op.InputsLength())]
            outs = [int(op.Outputs(j)) for j in range(op.OutputsLength())]
            for t in ins + outs:
                if t >= len(self.tensors):
                    raise TFLiteError(f"{self.source}: operator {i} ({name}) refers to tensor "
                                      f"{t}, but the subgraph has {len(self.tensors)}")
            handler = _HANDLERS.get(name)
            if handler is None:
                out_name = self.tensors[outs[0]].name if outs else "?"
                raise TFLiteError(
                    f"{self.source}: operator {i} ({name}, output '{out_name}') is not "
                    f"supported; supported operators: {', '.join(SUPPORTED_OPS)}")
            try:
                handler(self, op, [self.tensors[t] if t >= 0 else None for t in ins],
                        [self.tensors[t] for t in outs])
            except TFLiteError:
                raise
            except (ValueError, TypeError) as e:
                out_name = self.tensors[outs[0]].name if outs else "?"
                raise TFLiteError(f"{self.source}: operator {i} ({name}, output '{out_name}'): "
                                  f"{e}") from e
        if outputs is None:
            out_idx = [int(sg.Outputs(k)) for k in range(sg.OutputsLength())]
        else:
            by_name = {t.name: t.index for t in self.tensors}
            missing = [n for n in outputs if n not in by_name]
            if missing:
                raise TFLiteError(f"{self.source}: no tensor named {missing[0]!r}")
            out_idx = [by_name[n] for n in outputs]
        results = [self.value(idx, "NHWC").expr for idx in out_idx]
        body = results[0] if len(results) == 1 else Tuple(results)
        out_types = [self.tensors[i].ir_type() for i in out_idx]
        names = tuple(self.tensors[i].name for i in out_idx)
        from ..ir import TupleType
        ret = out_types[0] if len(out_types) == 1 else TupleType(out_types)
        fn = Function(params, body, ret_type=ret, attrs={"output_names": names})
        return IRModule({"main": fn})


# ---------------------------------------------------------------------- handlers

def _conv(cv: _Converter, op, ins, outs, depthwise: bool):
    x, w, b = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    out = outs[0]
    opts = cv.options(op, "DepthwiseConv2DOptions" if depthwise else "Conv2DOptions")
    kind = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
    if not (x.quantized and x.dtype == "int8" and w.dtype == "int8"):
        raise TFLiteError(f"{cv.source}: {kind} '{out.name}': only int8 inputs and weights are "
                          f"supported (got {x.dtype} x {w.dtype})")
    if opts.DilationHFactor() != 1 or opts.DilationWFactor() != 1:
        raise TFLiteError(f"{cv.source}: {kind} '{out.name}': dilation "
                          f"{opts.DilationHFactor()}x{opts.DilationWFactor()} is not supported")
    wd = cv.const(w.index, f"{kind} weight").astype(np.int64)
    if depthwise:
        # (1, KH, KW, C*M) -> OIHW (C*M, 1, KH, KW), groups = C
        w_oihw = np.transpose(wd, (3, 0, 1, 2))
        groups = x.shape[3]
        red = (1, 2, 3)
    else:
        # OHWI -> OIHW
        w_oihw = np.transpose(wd, (0, 3, 1, 2))
        groups = 1
        red = (1, 2, 3)
    if np.any(w.zero_point != 0):
        raise TFLiteError(f"{cv.source}: {kind} '{out.name}': weights with a non-zero zero "
                          "point are not supported (TFLite int8 weights are symmetric)")
    o, _, kh, kw = w_oihw.shape
    sh, sw = opts.StrideH(), opts.StrideW()
    if opts.Padding() == 0:  # SAME
        pt, pb = _same_padding(x.shape[1], kh, sh)
        pl, pr = _same_padding(x.shape[2], kw, sw)
    else:
        pt = pb = pl = pr = 0
    zx = x.zp
    data = cv.nchw(x.index)
    if pt or pb or pl or pr:
        data = _op("nn.pad", data, pad_width=((0, 0), (0, 0), (pt, pb), (pl, pr)),
                   pad_value=float(zx))
    bias = None if b is None else cv.const(b.index, "bias").astype(np.int64)
    act = _act(cv, _ACTIVATIONS.get(opts.FusedActivationFunction(), None), out)
    lo, hi = activation_range(act, out.s, out.zp, out.dtype)
    y = quantized_layer(data, w_oihw, bias, x_zero_point=zx,
                        scale=_per_channel_scale(x.s, w.scale, out.s, o), zero_point=out.zp,
                        rounding="tflite", lo=lo, hi=hi, out_dtype=out.dtype,
                        conv=dict(strides=(sh, sw), padding=(0, 0, 0, 0), groups=groups))
    cv.set(out.index, y, "NCHW")


def _act(cv, act, out):
    if act is None:
        raise TFLiteError(f"{cv.source}: '{out.name}': unsupported fused activation")
    return act


def _per_channel_scale(s_in, w_scales, s_out, channels):
    """TFLite (PopulateConvolutionQuantizationParams): in double,
    ``double(s_in) * double(s_w[c]) / double(s_out)`` for every output channel."""
    ws = np.asarray(w_scales, np.float32).astype(np.float64)
    if ws.size == 1:
        ws = np.full(channels, ws[0])
    return (np.float64(np.float32(s_in)) * ws) / np.float64(np.float32(s_out))


def _conv2d(cv, op, ins, outs):
    _conv(cv, op, ins, outs, depthwise=False)


def _depthwise(cv, op, ins, outs):
    _conv(cv, op, ins, outs, depthwise=True)


def _as_nhwc_flat(cv, t: _Tensor, shape):
    """The tensor reshaped to ``shape`` in TFLite's (NHWC) element order."""
    v = cv.values.get(t.index)
    if v is not None and v.layout == "NCHW" and len(t.shape) == 4 and (t.shape[1] * t.shape[2] == 1
                                                                       or t.shape[3] == 1):
        # Moving a unit dimension does not change the element order.
        expr = v.expr
    else:
        expr = cv.value(t.index, "NHWC").expr
    if tuple(shape) == tuple(t.shape) and (v is None or v.layout == "NHWC"):
        return expr
    return _op("reshape", expr, newshape=tuple(int(d) for d in shape))


def _fully_connected(cv, op, ins, outs):
    x, w, b = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    out = outs[0]
    opts = cv.options(op, "FullyConnectedOptions")
    if not (x.quantized and x.dtype == "int8" and w.dtype == "int8"):
        raise TFLiteError(f"{cv.source}: FULLY_CONNECTED '{out.name}': only int8 inputs and "
                          f"weights are supported (got {x.dtype} x {w.dtype})")
    if opts is not None and opts.WeightsFormat() != 0:
        raise TFLiteError(f"{cv.source}: FULLY_CONNECTED '{out.name}': shuffled weights are "
                          "not supported")
    wd = cv.const(w.index, "FULLY_CONNECTED weight").astype(np.int64)
    o, k = wd.shape
    n = int(np.prod(x.shape)) // k
    data = _as_nhwc_flat(cv, x, (n, k))
    bias = None if b is None else cv.const(b.index, "bias").astype(np.int64)
    if w.scale.size > 1:
        scale = _per_channel_scale(x.s, w.scale, out.s, o)
    else:
        # GetQuantizedConvolutionMultipler: the scale product in float32, then double.
        scale = np.float64(np.float32(x.s) * np.float32(w.s)) / np.float64(np.float32(out.s))
    act = _act(cv, _ACTIVATIONS.get(opts.FusedActivationFunction() if opts else 0), out)
    lo, hi = activation_range(act, out.s, out.zp, out.dtype)
    # LiteRT's FULLY_CONNECTED rounds once (see runtime.hostops.fixed_point), even with
    # BUILTIN_REF.
    y = quantized_layer(data, wd, bias, x_zero_point=x.zp, scale=scale, zero_point=out.zp,
                        rounding="tflite_single", lo=lo, hi=hi, out_dtype=out.dtype)
    if tuple(out.shape) != (n, o):
        y = _op("reshape", y, newshape=out.shape)
    cv.set(out.index, y)


def _binary_operands(cv, a: _Tensor, b: _Tensor, out: _Tensor):
    """Both operands in one layout (NCHW if either already is, for 4-D outputs)."""
    va, vb = cv.values.get(a.index), cv.values.get(b.index)
    nchw = len(out.shape) == 4 and any(v is not None and v.layout == "NCHW" for v in (va, vb))
    if not nchw:
        return cv.value(a.index, "NHWC").expr, cv.value(b.index, "NHWC").expr, "NHWC"
    exprs = []
    for t in (a, b):
        if len(t.shape) == 4:
            exprs.append(cv.nchw(t.index))
        elif t.index in cv.consts:
            c = np.asarray(cv.consts[t.index]).reshape((1,) * (4 - len(t.shape)) + t.shape)
            exprs.append(Constant(np.ascontiguousarray(np.transpose(c, _NHWC_TO_NCHW))))
        else:
            raise TFLiteError(f"{cv.source}: '{out.name}': broadcasting a {len(t.shape)}-D "
                              "operand against a 4-D one is supported for constants only")
    return exprs[0], exprs[1], "NCHW"


def _add_mul(kind):
    def handler(cv, op, ins, outs):
        a, b = ins
        out = outs[0]
        if not all(t.quantized and t.dtype == "int8" for t in (a, b, out)):
            raise TFLiteError(f"{cv.source}: {kind.upper()} '{out.name}': only int8 operands "
                              "are supported")
        ea, eb, layout = _binary_operands(cv, a, b, out)
        y = _op(f"qnn.{kind}", ea, eb, lhs_scale=a.s, lhs_zero_point=a.zp, rhs_scale=b.s,
                rhs_zero_point=b.zp, out_scale=out.s, out_zero_point=out.zp, rounding="tflite")
        opts = cv.options(op, "AddOptions" if kind == "add" else "MulOptions")
        act = _act(cv, _ACTIVATIONS.get(opts.FusedActivationFunction() if opts else 0), out)
        cv.finish(y, out, act, layout)
    return handler


def _pool(kind):
    def handler(cv, op, ins, outs):
        x, out = ins[0], outs[0]
        opts = cv.options(op, "Pool2DOptions")
        if not (x.quantized and x.dtype == "int8"):
            raise TFLiteError(f"{cv.source}: {kind} '{out.name}': only int8 is supported")
        kh, kw = opts.FilterHeight(), opts.FilterWidth()
        sh, sw = opts.StrideH(), opts.StrideW()
        if opts.Padding() == 0:
            pt, pb = _same_padding(x.shape[1], kh, sh)
            pl, pr = _same_padding(x.shape[2], kw, sw)
        else:
            pt = pb = pl = pr = 0
        data = cv.nchw(x.index)
        if kind == "AVERAGE_POOL_2D":
            y = _op("qnn.avg_pool2d", data, pool_size=(kh, kw), strides=(sh, sw),
                    padding=(pt, pl, pb, pr), rounding="tflite")
        else:
            y = _op("nn.max_pool2d", data, pool_size=(kh, kw), strides=(sh, sw),
                    padding=(pt, pl, pb, pr))
        act = _act(cv, _ACTIVATIONS.get(opts.FusedActivationFunction()), out)
        cv.finish(y, out, act, "NCHW")
    return handler


def _mean(cv, op, ins, outs):
    x, axes_t, out = ins[0], ins[1], outs[0]
    opts = cv.options(op, "ReducerOptions")
    keep = bool(opts.KeepDims()) if opts is not None else False
    axes = sorted(int(a) % len(x.shape) for a in np.ravel(cv.const(axes_t.index, "MEAN axis")))
    if not (x.quantized and x.dtype == "int8"):
        raise TFLiteError(f"{cv.source}: MEAN '{out.name}': only int8 is supported")
    method = "tflite"
    v = cv.values.get(x.index)
    if len(x.shape) == 4 and v is not None and v.layout == "NCHW" and keep:
        data, ax, layout = v.expr, tuple(sorted(_AXIS_TO_NCHW[a] for a in axes)), "NCHW"
    else:
        data, ax, layout = cv.value(x.index, "NHWC").expr, tuple(axes), "NHWC"
    y = _op("qnn.mean", data, axis=ax, keepdims=keep, in_scale=x.s, in_zero_point=x.zp,
            out_scale=out.s, out_zero_point=out.zp, rounding=method, out_dtype=out.dtype)
    cv.set(out.index, y, layout)


def _pad(cv, op, ins, outs):
    x, p, out = ins[0], ins[1], outs[0]
    pads = np.asarray(cv.const(p.index, "PAD paddings"), np.int64).reshape(-1, 2)
    value = 0.0
    if len(ins) > 2 and ins[2] is not None:  # PADV2
        value = float(np.ravel(cv.const(ins[2].index, "PADV2 constant"))[0])
    elif out.quantized:
        value = float(out.zp)
    v = cv.values.get(x.index)
    if len(x.shape) == 4 and (v is None or v.layout == "NCHW" or x.index in cv.consts):
        data, pw, layout = cv.nchw(x.index), tuple(tuple(pads[a]) for a in _NHWC_TO_NCHW), "NCHW"
    else:
        data, pw, layout = cv.value(x.index, "NHWC").expr, tuple(map(tuple, pads)), "NHWC"
    cv.set(out.index, _op("nn.pad", data, pad_width=pw, pad_value=value), layout)


def _reshape(cv, op, ins, outs):
    x, out = ins[0], outs[0]
    if x.index in cv.consts:
        cv.consts[out.index] = np.asarray(cv.consts[x.index]).reshape(out.shape)
        return
    cv.set(out.index, _as_nhwc_flat(cv, x, out.shape))


def _float_activation(kind):
    def handler(cv, op, ins, outs):
        x, out = ins[0], outs[0]
        layout = cv.values[x.index].layout if x.index in cv.values else "NHWC"
        data = cv.value(x.index, layout).expr
        if not x.quantized:
            raise TFLiteError(f"{cv.source}: {kind} '{out.name}': only int8 is supported")
        f = _op("qnn.dequantize", data, scale=x.s, zero_point=x.zp)
        if kind == "SOFTMAX":
            opts = cv.options(op, "SoftmaxOptions")
            beta = opts.Beta() if opts is not None else 1.0
            if beta != 1.0:
                f = _op("multiply", f, Constant(np.array(beta, np.float32)))
            axis = 1 if layout == "NCHW" else -1
            f = _op("nn.softmax", f, axis=axis)
        else:
            f = _op("sigmoid", f)
        cv.set(out.index, _op("qnn.quantize", f, scale=out.s, zero_point=out.zp,
                              out_dtype=out.dtype, rounding="tflite"), layout)
    return handler


def _quantize(cv, op, ins, outs):
    x, out = ins[0], outs[0]
    v = cv.value(x.index)
    if x.dtype.startswith("float"):
        y = _op("qnn.quantize", v.expr, scale=out.s, zero_point=out.zp, out_dtype=out.dtype,
                rounding="tflite")
    else:
        # int -> int requantization: (x - zp_in) * (s_in / s_out) + zp_out, saturated.
        d = _op("subtract", _op("cast", v.expr, dtype="int32"),
                Constant(np.array(x.zp, np.int32)))
        y = _op("qnn.requantize", d, scale=float(np.float64(x.s) / np.float64(out.s)),
                zero_point=out.zp, rounding="tflite", out_dtype=out.dtype)
    cv.set(out.index, y, v.layout)


def _dequantize(cv, op, ins, outs):
    x, out = ins[0], outs[0]
    v = cv.value(x.index)
    if x.index in cv.consts and x.dtype == "float16":
        cv.consts[out.index] = cv.consts[x.index].astype(np.float32)
        return
    cv.set(out.index, _op("qnn.dequantize", v.expr, scale=x.s, zero_point=x.zp), v.layout)


def _concatenation(cv, op, ins, outs):
    out = outs[0]
    opts = cv.options(op, "ConcatenationOptions")
    axis = int(opts.Axis()) % len(out.shape)
    for t in ins:
        if t.quantized and (t.s != out.s or t.zp != out.zp):
            raise TFLiteError(f"{cv.source}: CONCATENATION '{out.name}': int8 inputs must share "
                              "the output's scale and zero point (as TFLite requires)")
    layouts = [cv.values[t.index].layout for t in ins if t.index in cv.values]
    if len(out.shape) == 4 and "NCHW" in layouts:
        exprs, ax, layout = [cv.nchw(t.index) for t in ins], _AXIS_TO_NCHW[axis], "NCHW"
    else:
        exprs, ax, layout = [cv.value(t.index, "NHWC").expr for t in ins], axis, "NHWC"
    y = _op("concatenate", Tuple(exprs), axis=ax)
    act = _act(cv, _ACTIVATIONS.get(opts.FusedActivationFunction()), out)
    if act != "NONE":
        lo, hi = activation_range(act, out.s, out.zp, out.dtype)
        y = _op("clip", y, a_min=lo, a_max=hi)
    cv.set(out.index, y, layout)


# --------------------------------------------------------------- shape-only ops

def _fold(fn):
    def handler(cv, op, ins, outs):
        missing = [t for t in ins if t is not None and t.index not in cv.consts
                   and fn is not _shape]
        if missing:
            raise TFLiteError(f"{cv.source}: '{outs[0].name}': a shape operator on the "
                              f"non-constant tensor '{missing[0].name}' is not supported")
        cv.consts[outs[0].index] = np.asarray(fn(cv, op, ins, outs), outs[0].dtype)
    return handler


def _shape(cv, op, ins, outs):
    return np.array(ins[0].shape, np.int32)


def _strided_slice(cv, op, ins, outs):
    x = np.asarray(cv.consts[ins[0].index])
    begin, end, strides = (np.ravel(cv.consts[t.index]).astype(int) for t in ins[1:4])
    o = cv.options(op, "StridedSliceOptions")
    bm, em, sm = o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()
    if o.EllipsisMask() or o.NewAxisMask():
        raise TFLiteError(f"{cv.source}: STRIDED_SLICE '{outs[0].name}': ellipsis/new-axis "
                          "masks are not supported")
    idx = []
    for d in range(len(begin)):
        if sm >> d & 1:
            idx.append(int(begin[d]))
        else:
            idx.append(slice(None if bm >> d & 1 else int(begin[d]),
                             None if em >> d & 1 else int(end[d]), int(strides[d])))
    return x[tuple(idx)]


def _pack(cv, op, ins, outs):
    o = cv.options(op, "PackOptions")
    return np.stack([np.asarray(cv.consts[t.index]) for t in ins], axis=o.Axis())


_HANDLERS = {
    "CONV_2D": _conv2d,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _add_mul("add"),
    "MUL": _add_mul("mul"),
    "AVERAGE_POOL_2D": _pool("AVERAGE_POOL_2D"),
    "MAX_POOL_2D": _pool("MAX_POOL_2D"),
    "MEAN": _mean,
    "PAD": _pad,
    "PADV2": _pad,
    "RESHAPE": _reshape,
    "SOFTMAX": _float_activation("SOFTMAX"),
    "LOGISTIC": _float_activation("LOGISTIC"),
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "CONCATENATION": _concatenation,
    "SHAPE": _fold(_shape),
    "STRIDED_SLICE": _fold(_strided_slice),
    "PACK": _fold(_pack),
}

#: Operator names the frontend converts (SHAPE, STRIDED_SLICE, PACK only on constants).
SUPPORTED_OPS = tuple(sorted(_HANDLERS))


def from_tflite(model, *, outputs=None, name=None) -> IRModule:
    """Convert a TFLite model to an IRModule whose ``main`` computes the model.

    Parameters
    ----------
    model : str, os.PathLike or bytes
        A ``.tflite`` file or its contents.
    outputs : list of str, optional
        Tensor names to return instead of the model's outputs (to compare
        intermediate tensors with another runtime).
    name : str, optional
        The model's name in error messages (default: the path, or ``<bytes>``).

    Returns
    -------
    IRModule
        ``main`` takes the model's inputs (its tensor names, dtypes, NHWC shapes;
        quantization parameters in the types) and returns its output (a tuple for
        several); its ``attrs["output_names"]`` lists the output tensor names.

    Raises
    ------
    TFLiteError
        One line naming what is wrong: not a TFLite flatbuffer, a truncated or
        inconsistent file, or an unsupported operator (its type, index and
        output tensor, and the supported list).
    """
    if isinstance(model, (bytes, bytearray, memoryview)):
        buf, source = bytes(model), name or "<bytes>"
    else:
        source = name or os.fspath(model)
        try:
            with open(model, "rb") as f:
                buf = f.read()
        except OSError as e:
            raise TFLiteError(f"{source}: cannot read the model ({e.strerror})") from None
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise TFLiteError(f"{source}: not a TFLite model (no 'TFL3' flatbuffer identifier at "
                          f"byte 4; {len(buf)} bytes)")
    import tflite
    try:
        m = tflite.Model.GetRootAsModel(buf, 0)
        cv = _Converter(m, source)
    except TFLiteError:
        raise
    except Exception as e:  # noqa: BLE001 -- a corrupt flatbuffer fails anywhere in the reader
        raise TFLiteError(f"{source}: malformed TFLite flatbuffer ({type(e).__name__}: "
                          f"{e})") from None
    try:
        return cv.convert(outputs)
    except TFLiteError:
        raise
    except (IndexError, struct.error) as e:
        raise TFLiteError(f"{source}: malformed TFLite flatbuffer ({type(e).__name__}: "
                          f"{e})") from None

