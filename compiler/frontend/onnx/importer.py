"""The ONNX importer: graphs, scopes and nodes to IR (:func:`from_onnx`).

A node whose op has a converter (:mod:`.registry`) is converted; one whose inputs are
all compile-time constants is evaluated by onnx's reference implementation; any other
standard op runs on the host as ``onnx.reference`` (onnx's reference evaluator), except
what a CNN kit refuses (sequences, optionals, strings, training ops), in one line.
Models of opsets before 11 are converted by ``onnx.version_converter`` first.
"""

from __future__ import annotations

import os

import numpy as np

from ...ir import Constant, Function, IRModule, TensorType, Var, infer_expr_type
from .registry import (_CONVERTERS, _MS_CONVERTERS, CONVERT_TO, OPSET_RANGE, OnnxImportError,
                       _attrs, _call, _dequant_np, _graph_result, _np_dtype, _scale_attr,
                       _to_int8_domain, _Val, _where, _zp_attr)

__all__ = ["from_onnx", "supported_ops"]


def supported_ops():
    """The op types the importer converts (default domain, then com.microsoft)."""
    return sorted(set(_CONVERTERS) | {"Constant", "Shape", "Size"} | set(_FOLD_ONLY)) \
        + sorted(f"com.microsoft.{op}" for op in _MS_CONVERTERS)


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

        from ....runtime.hostops.onnx_ref import encode_node

        names = [f"i{k}" if v is not None else "" for k, v in enumerate(ins)]
        while names and not names[-1]:
            names.pop()
        outs = [f"o{k}" if n else "" for k, n in enumerate(node.output)]
        proto = helper.make_node(node.op_type, names, outs, domain=node.domain)
        proto.attribute.extend(node.attribute)
        vals = [v for v in ins if v is not None]
        for v in vals:
            if v.dtype in ("object", "str") or (v.const is not None
                                                 and v.const.dtype.kind in "OSU"):
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
                              f"supported: {', '.join(supported_ops())}")

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
    from ...quant.ort_reference import OrtReferenceError, ort_graph

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

