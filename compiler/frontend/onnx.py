"""ONNX models to the graph IR: :func:`from_onnx`.

Float models become float IR (NCHW, OIHW, Relay op names); QDQ models
(``QuantizeLinear``/``DequantizeLinear`` around float ops, as written by
``onnxruntime.quantization.quantize_static``) and operator-format models
(``QLinearConv``, ``QLinearMatMul``) become the integer *quantized IR form*
shared with the TFLite frontend:

    [nn.pad(x, zx)] -> nn.conv2d/nn.dense(int8, int8 -> int32) -> nn.bias_add(int32)
    -> qnn.requantize(rounding="onnx") -> clip -> cast(int8)

Activations are int8 in the IR: a uint8 ONNX tensor ``u`` with zero point
``z`` is carried exactly as ``u - 128`` with zero point ``z - 128``, and turned
back into uint8 only where it leaves the graph.

How nodes are imported:

* a node whose inputs are all known at compile time (initializers,
  ``Constant``, ``Shape`` of a static tensor, ...) is evaluated right away
  with onnx's own reference implementation, so shape arithmetic (Shape,
  Gather, Unsqueeze, Concat, Cast, Slice, ...) never reaches the IR;
* a DequantizeLinear output stays a *quantized value* (int8 expression plus
  scale and zero point) until an op needs it as float; Conv, Gemm and MatMul
  whose inputs are quantized and whose only consumer is a QuantizeLinear
  (possibly through Relu or Clip) become the integer layer above; MaxPool,
  Reshape, Flatten, Transpose, Identity and Concat (equal parameters) work on
  the int8 values directly; Add, Mul, AveragePool, GlobalAveragePool, Softmax,
  Sigmoid and LeakyRelu between a DequantizeLinear and a QuantizeLinear of the
  same type get the formula of the kernel onnxruntime fuses them into
  (``qnn.add``/``qnn.mul`` rounding ``"onnx"``, the ``qnn.ort_*`` ops and
  ``qnn.lut``, formulas in :mod:`vtakit.runtime.hostops.ort_kernels`), so a
  ``quantize_static`` model equals :func:`~vtakit.compiler.quant.ort_reference.run_reference`
  bit for bit; every other op on quantized values runs in float between
  ``qnn.dequantize`` and ``qnn.quantize`` (the QDQ semantics; for Concat that
  is QLinearConcat's requantization exactly);
* ``If`` becomes an IR ``If`` (or one branch, when the condition is
  constant); ``Loop`` becomes a recursive global function ``@loop_N`` whose
  parameters are the iteration count, the condition, the loop-carried values
  and the outer values the body reads.

The main function's parameters are the graph inputs (same names, dtypes and
shapes; unknown dims are taken from ``shapes`` or default to 1); it returns
the graph output, or a tuple of them in graph order, and records their names
in its ``"output_names"`` attribute.
"""

from __future__ import annotations

import os

import numpy as np

from ...hw.errors import VtakitError
from .. import quant  # noqa: F401  (registers the qnn.* operators)
from ..ir import (Call, Constant, Function, GlobalVar, If, IRModule, Tuple, TupleGetItem,
                  TupleType, TensorType, Var, get_op, infer_expr_type)

__all__ = ["from_onnx", "OnnxImportError", "SUPPORTED_OPS", "OPSET_RANGE"]

#: the default-domain opsets this importer accepts: those from 11 on are imported as they
#: are, older ones are first converted to :data:`CONVERT_TO` by ``onnx.version_converter``
OPSET_RANGE = (1, 22)
#: the opset models older than 11 are converted to
CONVERT_TO = 13


class OnnxImportError(VtakitError, ValueError):
    """A model that cannot be imported (unsupported op, malformed graph); one line."""


def _call(name, *args, **attrs):
    return Call(get_op(name), args, attrs)


def _np_dtype(elem_type):
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name


# ---- values --------------------------------------------------------------------------------

class _QInfo:
    """Quantization of a DequantizeLinear output: value = (src - zp) * scale.

    ``src`` is an int8-domain :class:`_Val` (or a constant), ``zp`` is in the same
    domain, ``scale``/``zp`` are scalars or 1-D along ``axis``.
    """

    __slots__ = ("src", "scale", "zp", "axis", "raw")

    def __init__(self, src, scale, zp, axis, raw="int8"):
        self.src, self.scale, self.zp, self.axis, self.raw = src, scale, zp, axis, raw

    @property
    def raw_zp(self):
        """The zero point as written in the model (uint8 tensors: in 0..255)."""
        return int(self.zp) + 128 if self.raw == "uint8" else int(self.zp)

    def same_params(self, scale, zp, axis):
        if self.scale.shape != np.shape(scale) or self.zp.shape != np.shape(zp):
            return False
        if self.scale.ndim and self.axis != axis:
            return False
        return bool(np.array_equal(self.scale, scale) and np.array_equal(self.zp, zp))


class _Val:
    """An ONNX tensor during import: an IR expr, a compile-time constant or a quantized value.

    ``u8``: a runtime uint8 tensor held in the IR as int8 (value - 128).
    """

    __slots__ = ("expr", "const", "shape", "dtype", "q", "u8")

    def __init__(self, expr=None, const=None, shape=None, dtype=None, q=None, u8=False):
        if const is not None:
            const = np.asarray(const)
            shape, dtype = const.shape, const.dtype.name
        self.expr, self.const, self.shape, self.dtype, self.q, self.u8 = (
            expr, const, None if shape is None else tuple(int(d) for d in shape), dtype, q, u8)


# ---- the importer --------------------------------------------------------------------------

_CONVERTERS = {}
_MS_CONVERTERS = {}   # com.microsoft ops (onnxruntime's operator-format quantized ops)


def _converter(*names, domain=""):
    table = _MS_CONVERTERS if domain == "com.microsoft" else _CONVERTERS
    def deco(fn):
        for n in names:
            table[n] = fn
        return fn
    return deco


def _refused(op):
    """Default-domain ops vtakit refuses: sequences, optionals, strings (what a CNN kit does
    not compute); every other op without a converter runs in onnx's reference evaluator."""
    return (op.startswith(("Sequence", "Optional")) or op in _REFUSED_OPS)


_REFUSED_OPS = {"SplitToSequence", "ConcatFromSequence", "StringNormalizer",
                "StringConcat", "StringSplit", "RegexFullMatch", "TfIdfVectorizer"}


# ops evaluated by onnx's reference implementation when every input is a constant, besides
# the converters' ops (shape arithmetic); never folded: control flow, randomness, Q/DQ
# (kept structured for the integer form)
_FOLD_ONLY = ("Constant", "Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Cast", "Slice",
              "ConstantOfShape", "Range", "Equal", "Less", "Greater", "Where", "Not", "And",
              "Or", "ReduceProd", "ReduceSum", "Div", "Floor", "Ceil", "Expand", "Tile",
              "Neg", "Abs", "Sqrt", "Pow", "Min", "Max", "CastLike", "Mod", "Split",
              "NonZero", "ScatterND", "GatherElements", "GatherND", "ReduceMin", "ReduceMax",
              "Einsum", "TopK", "ArgMax", "ArgMin")
_NEVER_FOLD = {"If", "Loop", "DequantizeLinear", "RandomNormal", "RandomUniform",
               "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


class _Scope:
    """Name -> value, chained to the enclosing graph's scope.

    With ``capture`` (a Loop body, which becomes its own global function), runtime
    values of enclosing graphs become parameters: recorded in ``captures``.
    """

    def __init__(self, parent=None, capture=False):
        self.names, self.parent, self.capture = {}, parent, capture
        self.captures = {}  # name -> (Var, outer _Val)

    def lookup(self, name, ctx):
        if name in self.names:
            return self.names[name]
        if self.parent is None:
            raise OnnxImportError(f"tensor {name!r} is used before it is defined")
        outer = self.parent.lookup(name, ctx)
        if not self.capture or outer.const is not None:
            return outer
        if name not in self.captures:
            expr = ctx.value_expr(outer)
            var = Var(name, ctx.type_of(outer))
            self.captures[name] = (var, expr)
        return _Val(self.captures[name][0], shape=outer.shape, dtype=ctx.type_of(outer).dtype)

    def __setitem__(self, name, val):
        self.names[name] = val


class _Importer:
    def __init__(self, model, shapes):
        from onnx import shape_inference

        self.opset = _default_opset(model)
        self.model = _with_input_shapes(model, shapes)
        try:
            inferred = shape_inference.infer_shapes(self.model, data_prop=True)
        except Exception:  # shape inference is a convenience; the IR infers what it misses
            inferred = self.model
        self.value_info = {}
        _collect_value_info(inferred.graph, self.value_info)
        self.mod = IRModule()
        self.fused = set()   # ids of nodes already imported as part of a pattern
        self.n_loops = 0

    # -- types and exprs

    def type_of(self, v):
        if v.const is not None:
            return TensorType(v.shape, v.dtype)
        if v.q is not None:  # a dequantized value has its integer source's shape
            if v.shape is None:
                v.shape = self.shape_of(v.q.src)
            return TensorType(v.shape, "float32")
        if v.shape is None or v.dtype is None:
            expr = self.value_expr(v)
            t = infer_expr_type(expr, self.mod)
            v.shape, v.dtype = t.shape, t.dtype
        return TensorType(v.shape, v.dtype)

    def shape_of(self, v):
        if v.shape is not None:
            return v.shape
        return self.type_of(v).shape

    def value_expr(self, v):
        """The IR expr computing ``v``'s ONNX value (float for quantized values)."""
        if v.const is not None:
            return Constant(v.const)
        if v.q is not None and v.expr is None:
            q = v.q
            v.expr = _call("qnn.dequantize", self.int8_expr(q.src), scale=_scale_attr(q.scale),
                           zero_point=_zp_attr(q.zp), axis=q.axis if q.scale.ndim else None)
            v.dtype = "float32"
        if v.u8:
            # held as int8 (value - 128): back to uint8 where an op needs the true value
            return _call("cast", _call("add", _call("cast", v.expr, dtype="int32"),
                                       Constant(np.int32(128))), dtype="uint8")
        return v.expr

    def int8_expr(self, v):
        """An int8-domain tensor (see :class:`_Val`) as an int8 IR expr."""
        if v.const is not None:
            return Constant(_to_int8_domain(v.const))
        return v.expr

    def float_val(self, v):
        if v.const is not None and v.dtype != "float32":
            return _Val(const=v.const.astype(np.float32))
        if v.q is not None and v.q.src.const is not None:
            q = v.q
            return _Val(const=_dequant_np(q.src.const, q.scale, q.zp, q.axis))
        return v

    def out(self, expr, shape=None, dtype=None):
        return _Val(expr, shape=shape, dtype=dtype)

    # -- graphs

    def convert_graph(self, graph, scope):
        consumers = {}
        for node in graph.node:
            for name in node.input:
                consumers.setdefault(name, []).append(node)
        graph_outputs = {o.name for o in graph.output}
        self.consumers, self.graph_outputs = consumers, graph_outputs
        for node in graph.node:
            if id(node) in self.fused:
                continue
            ins = [scope.lookup(n, self) if n else None for n in node.input]
            self.scope = scope
            outs = self.convert_node(node, ins, scope)
            if isinstance(outs, dict):
                for name, val in outs.items():
                    scope[name] = val
            else:
                for name, val in zip(node.output, outs):
                    if name:
                        scope[name] = val
                        if val.shape is None and val.q is None and name in self.value_info:
                            val.shape = self.value_info[name][0]
            # restore the graph-level maps after a nested subgraph replaced them
            self.consumers, self.graph_outputs = consumers, graph_outputs
        return [scope.lookup(o.name, self) for o in graph.output]

    def convert_node(self, node, ins, scope):
        op = node.op_type
        if node.domain == "com.microsoft" and op in _MS_CONVERTERS:
            try:
                return _MS_CONVERTERS[op](self, node, ins, _attrs(node))
            except OnnxImportError:
                raise
            except Exception as e:  # an IR type error etc.: name the node
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise OnnxImportError(f"{_where(node)}: {msg}") from e
        if node.domain not in ("", "ai.onnx"):
            self.unsupported(node, f"{node.domain}.{op}")
        if (ins and all(v is None or v.const is not None for v in ins) or not ins) \
                and op not in _NEVER_FOLD and (op in _CONVERTERS or op in _FOLD_ONLY
                                               or op == "QuantizeLinear"):
            return self.fold(node, ins)
        if op == "Shape" or op == "Size":
            return [_Val(const=_shape_op(node, self.shape_of(ins[0])))]
        fn = _CONVERTERS.get(op)
        if fn is None:
            if _refused(op):
                self.unsupported(node, op)
            return self.reference(node, ins)
        try:
            return fn(self, node, ins, _attrs(node))
        except OnnxImportError:
            raise
        except Exception as e:  # an IR type error etc.: name the node
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise OnnxImportError(f"{_where(node)}: {msg}") from e

    def fold(self, node, ins):
        from onnx.reference import ReferenceEvaluator

        feeds = {n: v.const for n, v in zip(node.input, ins) if n}
        try:
            outs = ReferenceEvaluator(node, opsets={"": self.opset}).run(None, feeds)
        except Exception as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise OnnxImportError(f"{_where(node)}: cannot evaluate on its constant inputs: "
                                  f"{msg}") from e
        return [_Val(const=np.asarray(o)) for o in outs]

    def reference(self, node, ins):
        """``node`` as ``onnx.reference`` host ops (one per output): onnx's reference
        evaluator runs it at this model's opset (:mod:`vtakit.runtime.hostops.onnx_ref`)."""
        from onnx import helper

        from ...runtime.hostops.onnx_ref import encode_node

        names = [f"i{k}" if v is not None else "" for k, v in enumerate(ins)]
        while names and not names[-1]:
            names.pop()
        outs = [f"o{k}" if n else "" for k, n in enumerate(node.output)]
        proto = helper.make_node(node.op_type, names, outs, domain=node.domain)
        proto.attribute.extend(node.attribute)
        vals = [v for v in ins if v is not None]
        for v in vals:
            if v.dtype in ("object", "str") or (v.const is not None and v.const.dtype.kind in "OSU"):
                raise OnnxImportError(f"{_where(node)}: string tensors are not supported (a "
                                      f"CNN kit computes on numbers)")
        types = self.reference_types(node, proto, vals)
        args = [self.value_expr(self.float_val(v) if v.q is not None else v) for v in vals]
        blob = encode_node(proto.SerializeToString())
        result = []
        for k, name in enumerate(node.output):
            if not name:
                result.append(None)
                continue
            shape, dtype = types[k]
            if dtype in ("object", "str") or np.dtype(dtype).kind in "OSU":
                raise OnnxImportError(f"{_where(node)}: string tensors are not supported (a "
                                      f"CNN kit computes on numbers)")
            e = _call("onnx.reference", *args, node=blob, opset=self.opset, index=k,
                      shape=shape, dtype=dtype)
            result.append(_Val(e, shape=shape, dtype=dtype))
        return result

    def reference_types(self, node, proto, vals):
        """(shape, dtype) of every output of ``node``: from shape inference, else by
        running it on zeros (constant inputs as they are)."""
        known = [self.value_info.get(n) for n in node.output]
        if all(t is not None for t, n in zip(known, node.output) if n):
            return known
        from onnx.reference import ReferenceEvaluator

        feeds = {}
        for name, v in zip([n for n in proto.input if n], vals):
            t = self.type_of(v) if v.const is None else None
            feeds[name] = v.const if v.const is not None else np.zeros(t.shape, t.dtype)
        try:
            outs = ReferenceEvaluator(proto, opsets={"": self.opset}).run(None, feeds)
        except Exception as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise OnnxImportError(f"{_where(node)}: cannot infer its output types: {msg}") \
                from None
        return [(tuple(np.shape(o)), np.asarray(o).dtype.name) for o in outs]

    def unsupported(self, node, op):
        raise OnnxImportError(f"unsupported ONNX op {op} (node {node.name or '?'!r}); "
                              f"supported: {', '.join(SUPPORTED_OPS)}")

    def single_consumer(self, name):
        users = self.consumers.get(name, [])
        if len(users) != 1 or name in self.graph_outputs:
            return None
        return users[0]

    def quantized_tail(self, node):
        """``(activation node or None, QuantizeLinear node)`` if ``node``'s output feeds
        exactly one QuantizeLinear, directly or through one Relu/Clip; else None."""
        nxt = self.single_consumer(node.output[0])
        act = None
        if nxt is not None and nxt.op_type in ("Relu", "Clip"):
            act, nxt = nxt, self.single_consumer(nxt.output[0])
        if nxt is None or nxt.op_type != "QuantizeLinear":
            return None
        return act, nxt


# ---- helpers -------------------------------------------------------------------------------

def _where(node):
    return f"{node.op_type} node {node.name or '?'!r}"


def _attrs(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _default_opset(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    raise OnnxImportError("the model imports no default-domain (ai.onnx) opset")


def _collect_value_info(graph, out):
    for vi in list(graph.value_info) + list(graph.input) + list(graph.output):
        t = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not t.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if all(d is not None for d in dims):
            out[vi.name] = (tuple(dims), _np_dtype(t.elem_type))
    for node in graph.node:
        for a in node.attribute:
            if a.type == a.GRAPH:
                _collect_value_info(a.g, out)


def _with_input_shapes(model, shapes):
    """A copy of ``model`` whose graph inputs have static shapes (``shapes`` or 1 for unknown)."""
    from onnx import ModelProto

    m = ModelProto()
    m.CopyFrom(model)
    inits = {i.name for i in m.graph.initializer}
    shapes = dict(shapes or {})
    for inp in m.graph.input:
        if inp.name in inits:
            continue
        dims = inp.type.tensor_type.shape.dim
        if inp.name in shapes:
            want = tuple(shapes.pop(inp.name))
            if len(want) != len(dims):
                raise OnnxImportError(f"shapes[{inp.name!r}] = {want} has rank {len(want)}; the "
                                      f"model's input has rank {len(dims)}")
            for d, w in zip(dims, want):
                d.ClearField("dim_param")
                d.dim_value = int(w)
        for d in dims:
            if not d.HasField("dim_value") or d.dim_value <= 0:
                d.ClearField("dim_param")
                d.dim_value = 1
    if shapes:
        raise OnnxImportError(f"shapes names {sorted(shapes)}, which are not graph inputs; the "
                              f"inputs are {[i.name for i in m.graph.input if i.name not in inits]}")
    return m


def _shape_op(node, shape):
    a = _attrs(node)
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), np.int64)
    start, end = a.get("start", 0), a.get("end", len(shape))
    return np.array(shape[slice(start, end)], np.int64)


def _to_int8_domain(arr):
    arr = np.asarray(arr)
    if arr.dtype == np.uint8:
        return (arr.astype(np.int16) - 128).astype(np.int8)
    return arr


def _zp_domain(zp, dtype):
    zp = np.asarray(zp if zp is not None else 0).astype(np.int32)
    return zp - 128 if dtype == "uint8" else zp


def _dequant_np(q, scale, zp, axis):
    q = _to_int8_domain(q).astype(np.float32)
    scale, zp = np.asarray(scale, np.float32), np.asarray(zp, np.float32)
    if scale.size == 1:  # a 1-element scale is per tensor (onnxruntime's reading)
        scale, zp = scale.reshape(()), zp.reshape(-1)[0] if zp.size else zp
    if scale.ndim == 1:
        shape = [1] * q.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return ((q - zp) * scale).astype(np.float32)


def _scale_attr(s):
    s = np.asarray(s, np.float32)
    return float(s) if s.ndim == 0 else s


def _zp_attr(z):
    z = np.asarray(z, np.int32)
    return int(z) if z.ndim == 0 else z


def _int_attr_list(a, key, default):
    v = a.get(key, default)
    return [int(x) for x in v]


# ---- float converters ----------------------------------------------------------------------

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


def _spatial(ctx, node, a, in_shape, kernel, what):
    """strides, (top, left, bottom, right) padding and dilations of a 2-D window op."""
    if len(kernel) != 2:
        raise OnnxImportError(f"{_where(node)}: only 1-D and 2-D {what} is supported, got a "
                              f"{len(kernel)}-D kernel")
    strides = _int_attr_list(a, "strides", [1, 1])
    dil = _int_attr_list(a, "dilations", [1, 1])
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        p = _int_attr_list(a, "pads", [0, 0, 0, 0])
        pads = (p[0], p[1], p[2], p[3])
    elif auto == "VALID":
        pads = (0, 0, 0, 0)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(2):
            size = in_shape[2 + i]
            out = -(-size // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - size)
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto == "SAME_UPPER" else (big, small)
            begin.append(b)
            end.append(e)
        pads = (begin[0], begin[1], end[0], end[1])
    else:
        raise OnnxImportError(f"{_where(node)}: unknown auto_pad {auto!r}")
    return tuple(strides), pads, tuple(dil)


def _dilate_kernel(w, dil):
    """A constant kernel with zeros between its taps: the same conv without dilation."""
    o, i, kh, kw = w.shape
    out = np.zeros((o, i, (kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1), w.dtype)
    out[:, :, ::dil[0], ::dil[1]] = w
    return out


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


# ---- quantization --------------------------------------------------------------------------

def _qparams(node, ins, zp_index, axis_default=1):
    """(scale float32, zero point int32 in the int8 domain, axis, onnx dtype)."""
    scale = ins[1].const if ins[1] is not None else None
    if scale is None:
        raise OnnxImportError(f"{_where(node)}: the scale must be a constant")
    zp = ins[zp_index] if len(ins) > zp_index else None
    if zp is not None and zp.const is None:
        raise OnnxImportError(f"{_where(node)}: the zero point must be a constant")
    dtype = zp.dtype if zp is not None else "uint8"
    return np.asarray(scale, np.float32), zp.const if zp is not None else None, dtype


def _check_qdtype(node, dtype):
    if dtype not in ("int8", "uint8", "int32"):
        raise OnnxImportError(f"{_where(node)}: {dtype} quantization is not supported "
                              f"(int8 and uint8 activations, int32 biases)")


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


def _requant_passthrough(ctx, x, int8_expr):
    """A quantized value computed on int8 data with ``x``'s parameters unchanged."""
    q = x.q
    return _Val(q=_QInfo(_Val(int8_expr, dtype="int8"), q.scale, q.zp, q.axis, q.raw),
                dtype="float32")


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
    red = tuple(range(1, wq.ndim))
    if b is None:
        bias = np.zeros(wq.shape[0], np.int64)
    elif b.q is not None and b.q.src.const is not None and b.q.src.const.dtype == np.int32 \
            and np.allclose(b.q.scale, acc_scale, rtol=1e-6, atol=0) and not np.any(b.q.zp):
        bias = b.q.src.const.astype(np.int64)
    else:
        bf = ctx.float_val(b).const.astype(np.float64)
        bias = np.rint(bf / acc_scale.astype(np.float64)).astype(np.int64)
    bias = bias - int(zx) * wq.astype(np.int64).sum(axis=red)
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
        acc = _call("nn.conv2d", xe, Constant(wq), strides=p["strides"], padding=pads,
                    dilation=dil, groups=p["groups"], out_dtype="int32")
    else:
        acc = _call("nn.dense", xe, Constant(wq), out_dtype="int32")
    acc = _call("nn.bias_add", acc, Constant(bias.astype(np.int32)), axis=1)
    scale = (acc_scale / np.float32(sy)).astype(np.float64)
    return _requantize(ctx, acc, 0, scale, zy, lo, hi, axis=1)


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


# ---- control flow --------------------------------------------------------------------------

def _scalar_bool(ctx, v):
    e = ctx.value_expr(v)
    t = ctx.type_of(v)
    if t.shape != ():
        e = _call("reshape", e, newshape=())
    if t.dtype != "bool":
        e = _call("cast", e, dtype="bool")
    return e


def _graph_result(ctx, outs):
    exprs = [ctx.value_expr(o) for o in outs]
    return exprs[0] if len(exprs) == 1 else Tuple(exprs)


@_converter("If")
def _if(ctx, node, ins, a):
    cond = ins[0]
    saved = ctx.scope
    if cond.const is not None:  # decided at compile time: import one branch inline
        branch = a["then_branch"] if bool(cond.const.reshape(-1)[0]) else a["else_branch"]
        outs = ctx.convert_graph(branch, _Scope(saved))
        ctx.scope = saved
        return outs
    then_outs = ctx.convert_graph(a["then_branch"], _Scope(saved))
    else_outs = ctx.convert_graph(a["else_branch"], _Scope(saved))
    ctx.scope = saved
    res = If(_scalar_bool(ctx, cond), _graph_result(ctx, then_outs),
             _graph_result(ctx, else_outs))
    if len(node.output) == 1:
        return [ctx.out(res)]
    return [ctx.out(TupleGetItem(res, i)) for i in range(len(node.output))]


@_converter("Loop")
def _loop(ctx, node, ins, a):
    body = a["body"]
    trip, cond0 = ins[0], ins[1] if len(ins) > 1 else None
    carried = ins[2:]
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan:
        raise OnnxImportError(f"{_where(node)}: scan outputs are not supported (only "
                              f"loop-carried values)")
    saved = ctx.scope
    i_var = Var("iter", TensorType((), "int64"))
    c_var = Var("cond", TensorType((), "bool"))
    m_var = Var("max_trip", TensorType((), "int64"))
    v_types = [ctx.type_of(v) for v in carried]
    v_vars = [Var(f"v{k}", t) for k, t in enumerate(v_types)]
    scope = _Scope(saved, capture=True)
    names = [i.name for i in body.input]
    scope[names[0]] = _Val(i_var, shape=(), dtype="int64")
    scope[names[1]] = _Val(c_var, shape=(), dtype="bool")
    for n, v, t in zip(names[2:], v_vars, v_types):
        scope[n] = _Val(v, shape=t.shape, dtype=t.dtype)
    outs = ctx.convert_graph(body, scope)
    ctx.scope = saved
    gv = GlobalVar(f"loop_{ctx.n_loops}")
    ctx.n_loops += 1
    cap_vars = [v for v, _ in scope.captures.values()]
    cap_exprs = [e for _, e in scope.captures.values()]
    next_i = _call("add", i_var, Constant(np.int64(1)))
    cond_out = _scalar_bool(ctx, outs[0])
    v_out = [ctx.value_expr(o) for o in outs[1:]]
    recur = Call(gv, [next_i, cond_out, m_var] + v_out + cap_vars)
    done = Tuple(list(v_vars))
    go = If(_call("less", i_var, m_var), recur, done)
    body_expr = If(c_var, go, done)
    ret = TupleType(v_types)
    ctx.mod[gv] = Function([i_var, c_var, m_var] + v_vars + cap_vars, body_expr, ret_type=ret)
    m0 = (Constant(np.int64(2**62)) if trip is None else
          _call("reshape", _call("cast", ctx.value_expr(trip), dtype="int64"), newshape=()))
    c0 = Constant(np.bool_(True)) if cond0 is None else _scalar_bool(ctx, cond0)
    res = Call(gv, [Constant(np.int64(0)), c0, m0] + [ctx.value_expr(v) for v in carried]
               + cap_exprs)
    return [ctx.out(TupleGetItem(res, k), shape=t.shape, dtype=t.dtype)
            for k, t in enumerate(v_types)]


# onnxruntime's fused QDQ kernels and com.microsoft ops (registers their converters)
from . import onnx_ort as _ortq  # noqa: E402

#: ONNX op types the importer converts (default domain, then onnxruntime's com.microsoft ops)
SUPPORTED_OPS = sorted(set(_CONVERTERS) | {"Constant", "Shape", "Size"} | set(_FOLD_ONLY)) \
    + sorted(f"com.microsoft.{op}" for op in _MS_CONVERTERS)


# ---- entry point ---------------------------------------------------------------------------

def _load(model):
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model, "the model"
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise OnnxImportError(f"{path}: no such file")
    try:
        return onnx.load(path), path
    except Exception as e:  # protobuf's DecodeError and friends
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise OnnxImportError(f"{path}: not a valid ONNX model ({msg})") from None


def _upgrade(proto, where):
    """``(model, notes)``: ``proto`` in an opset the converters implement (11 on).

    Older models are converted with ``onnx.version_converter`` (onnx's own rules for every
    op whose meaning changed); a graph of IR version < 4 lists its initializers as graph
    inputs, which the importer skips, and the converted model gets the IR version its new
    opset needs.
    """
    opset = _default_opset(proto)
    if not OPSET_RANGE[0] <= opset <= OPSET_RANGE[1]:
        raise OnnxImportError(f"{where}: opset {opset} is not supported; vtakit imports opsets "
                              f"{OPSET_RANGE[0]}-{OPSET_RANGE[1]} (convert it with "
                              f"onnx.version_converter)")
    if opset >= 11:
        return proto, []
    from onnx import version_converter

    try:
        new = version_converter.convert_version(proto, CONVERT_TO)
    except Exception as e:  # the converter's C++ errors are one line at best
        msg = " ".join(str(e).split())[:200]
        raise OnnxImportError(f"{where}: opset {opset} could not be converted to opset "
                              f"{CONVERT_TO} by onnx.version_converter: {msg}") from None
    new.ir_version = max(new.ir_version, 7)  # opset 13's IR version; initializers need no input
    return new, [f"opset {opset} model converted to opset {CONVERT_TO} by "
                 f"onnx.version_converter"]


def from_onnx(model, shapes=None, ort_cpu="x86-vnni") -> IRModule:
    """Import an ONNX model as an :class:`~vtakit.compiler.ir.IRModule`.

    Parameters
    ----------
    model : str | os.PathLike | onnx.ModelProto
        The model file or a loaded model.
    shapes : dict of str -> tuple of int, optional
        Static shapes of graph inputs whose dims are symbolic or unknown (those
        not given default to 1).
    ort_cpu : str
        The onnxruntime CPU class whose fusion of QDQ models the import reproduces bit
        for bit (:data:`vtakit.compiler.quant.ort_reference.CPU_CLASSES`: ``"x86-vnni"``,
        the default, or ``"arm64"``); it is named in ``main.attrs["import_notes"]``.

    Returns
    -------
    IRModule
        ``main`` takes the graph inputs (names, dtypes and shapes of the model) and
        returns its output (a tuple if it has several); ``main.attrs["output_names"]``
        lists their ONNX names. ``Loop`` bodies are extra global functions.

    Raises
    ------
    OnnxImportError
        One line: an unsupported op (its type, the node's name and the supported
        list), an opset above 22, or what is malformed.
    """
    import onnx

    proto, where = _load(model)
    try:
        onnx.checker.check_model(proto)
    except Exception as e:
        msg = " ".join(str(e).split())
        raise OnnxImportError(f"{where}: malformed ONNX model: {msg[:300]}") from None
    proto, notes = _upgrade(proto, where)
    from ..quant.ort_reference import OrtReferenceError, ort_graph

    try:
        proto, converted = ort_graph(proto, ort_cpu)
    except OrtReferenceError as e:
        raise OnnxImportError(str(e)) from None
    if any(nd.op_type in ("QuantizeLinear", "DequantizeLinear") or nd.op_type.startswith(
            "QLinear") for nd in proto.graph.node):
        notes.append(f"quantized kernels follow onnxruntime 1.32's CPU session on {ort_cpu}"
                     + (f" ({converted} int8 Q/DQ pair(s) run as uint8, as its "
                        f"QDQS8ToU8Transformer does)" if converted else ""))
    ctx = _Importer(proto, shapes)
    ctx.ort_cpu = ort_cpu
    graph = ctx.model.graph
    inits = {i.name for i in graph.initializer}
    scope = _Scope()
    params = []
    from onnx import numpy_helper

    for init in graph.initializer:
        scope[init.name] = _Val(const=numpy_helper.to_array(init))
    for inp in graph.input:
        if inp.name in inits:
            continue
        t = inp.type.tensor_type
        shape = tuple(d.dim_value for d in t.shape.dim)
        dtype = _np_dtype(t.elem_type)
        var = Var(inp.name, TensorType(shape, dtype))
        params.append(var)
        if dtype == "uint8":  # carried as int8 (value - 128), see the module docstring
            e = _call("cast", _call("subtract", _call("cast", var, dtype="int32"),
                                    Constant(np.int32(128))), dtype="int8")
            scope[inp.name] = _Val(e, shape=shape, dtype="uint8", u8=True)
        else:
            scope[inp.name] = _Val(var, shape=shape, dtype=dtype)
    outs = ctx.convert_graph(graph, scope)
    body = _graph_result(ctx, outs)
    names = tuple(o.name for o in graph.output)
    ctx.mod["main"] = Function(params, body, attrs={"output_names": names,
                                                    "import_notes": tuple(notes)})
    return ctx.mod
