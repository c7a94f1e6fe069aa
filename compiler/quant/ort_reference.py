"""A host-independent reference for quantized ONNX models: :func:`run_reference`.

It computes what onnxruntime's CPU provider computes for a QDQ model once its
QDQ transformer has fused every ``DequantizeLinear -> op -> QuantizeLinear`` group
into an integer kernel, and for the operator-format ops (QLinearConv,
QLinearMatMul, and onnxruntime's com.microsoft QLinearAdd, QLinearMul,
QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool, QLinearSigmoid,
QLinearLeakyRelu, QLinearSoftmax and QGemm), with each kernel's exact formula
from :mod:`.ort_kernels`:

* Conv / Gemm / MatMul (QLinearConv, QGemm, QLinearMatMul), including a Relu or
  Clip between the op and its QuantizeLinear (onnxruntime drops it when the
  quantization range makes it redundant, which is what ``quantize_static``
  writes): exact integer accumulation, MlasRequantizeOutput;
* Add (QLinearAdd), Mul (QLinearMul), GlobalAveragePool
  (QLinearGlobalAveragePool), AveragePool (QLinearAveragePool), Concat
  (QLinearConcat: each input requantized by a table unless its parameters equal
  the output's), Sigmoid and LeakyRelu (QLinearSigmoid / QLinearLeakyRelu
  tables), Softmax (QLinearSoftmax);
* ops that only move or select values (MaxPool, Reshape, Flatten, Transpose,
  Squeeze, Unsqueeze, Identity) run in float between their DequantizeLinear and
  QuantizeLinear: with equal parameters that detour gives back the very integers
  onnxruntime moves when it drops the Q/DQ pair;
* QuantizeLinear / DequantizeLinear with onnxruntime's float32 formulas; any
  other node runs in float through onnx's own reference implementation.

Which groups onnxruntime fuses depends on the CPU class (:data:`CPU_CLASSES`,
``cpu=``): on x86-64 (``"x86-vnni"``, the default) its QDQS8ToU8Transformer first turns
int8 Q/DQ pairs into uint8 ones (:func:`ort_graph`) and int8-activation Conv / Gemm /
MatMul groups stay float ops; on ``"arm64"`` int8 is kept and those groups are fused.
``tests/test_onnx_ort_exact.py`` checks the x86-vnni class against the session itself. QLinearAdd, QLinearMul and the
logistic of QLinearSigmoid are float kernels whose operation order differs
between onnxruntime's CPU builds; they round alike except within a hair of a
tie, and :func:`run_reference` can count such outputs (``ties``).

Why this and not onnxruntime's output: see :mod:`.ort_kernels` (its u8s8 kernels
saturate on x86-64 CPUs without VNNI; int8-activation convolutions are fused on
arm64 only). The reference is pure numpy on integers plus single float32
operations, so it gives the same result on every CPU. It is checked bit for bit
against onnxruntime itself where onnxruntime is exact on every CPU (weights within
7 bits, so no pair of products can saturate 16 bits) in ``tests/test_ort_reference.py``.
"""

from __future__ import annotations

import numpy as np

from ...hw.errors import VtakitError
from ...runtime.hostops import ort_kernels as K

__all__ = ["run_reference", "OrtReferenceError", "ort_graph", "CPU_CLASSES", "DEFAULT_CPU"]

#: The CPU classes whose onnxruntime (1.32, default CPU session) the reference follows:
#: ``"x86-vnni"`` (x86-64 with AVX512-VNNI or AVX-VNNI: int8 Q/DQ pairs run as uint8
#: (QDQS8ToU8Transformer), int8-activation Conv/Gemm/MatMul stay float ops) and
#: ``"arm64"`` (int8 kept, int8 Conv/Gemm/MatMul fused). x86-64 without VNNI fuses as
#: ``"x86-vnni"`` does, but its u8s8 kernels saturate pairs of products in int16
#: (``vpmaddubsw``), which no reference models.
CPU_CLASSES = ("x86-vnni", "arm64")
#: The class of this project's machines, and the default.
DEFAULT_CPU = "x86-vnni"


def _check_cpu(cpu):
    if cpu not in CPU_CLASSES:
        raise OrtReferenceError(f"unknown onnxruntime CPU class {cpu!r}; known: "
                                f"{', '.join(CPU_CLASSES)}")


def ort_graph(model, cpu=DEFAULT_CPU):
    """``(model, converted)``: ``model`` as onnxruntime's CPU session of class ``cpu``
    rewrites its Q/DQ pairs before fusing, and how many pairs it converted.

    On x86-64 (``QDQIsInt8Allowed`` false) its QDQS8ToU8Transformer turns every
    QuantizeLinear whose only consumer is a DequantizeLinear (itself feeding one node,
    as EnsureUniqueDQForNodeUnit leaves it), neither a graph output, with equal scalar
    constant int8 zero points, into a uint8 pair with zero point + 128. The integers
    are the same values shifted by 128, but the float kernels that add the zero point
    before rounding (QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax, the
    requantization of QLinearConv and QGemm) round in that domain. arm64 keeps int8.
    """
    _check_cpu(cpu)
    if cpu == "arm64":
        return model, 0
    from onnx import ModelProto, numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}
    consumers = {}
    for nd in g.node:
        for n in nd.input:
            if n:
                consumers.setdefault(n, []).append(nd)
    outputs = {o.name for o in g.output}

    def int8_scalar(name):
        t = inits.get(name)
        if t is None:
            return None
        a = numpy_helper.to_array(t)
        return int(a.reshape(-1)[0]) if a.dtype == np.int8 and a.size == 1 else None

    pairs = []
    for q in g.node:
        if q.op_type != "QuantizeLinear" or q.domain not in ("", "ai.onnx"):
            continue
        users = consumers.get(q.output[0], [])
        if len(users) != 1 or q.output[0] in outputs:
            continue
        dq = users[0]
        if dq.op_type != "DequantizeLinear" or len(q.input) != 3 or len(dq.input) != 3:
            continue
        if len(consumers.get(dq.output[0], [])) + (dq.output[0] in outputs) > 1:
            continue  # a shared DQ: onnxruntime duplicates it, two consumers of the Q
        zq, zd = int8_scalar(q.input[2]), int8_scalar(dq.input[2])
        if zq is None or zq != zd:
            continue
        pairs.append((q, dq, zq))
    if not pairs:
        return model, 0
    new = ModelProto()
    new.CopyFrom(model)
    by_name = {nd.output[0]: nd for nd in new.graph.node if nd.output}
    for k, (q, dq, z) in enumerate(pairs):
        name = f"vtakit_s8_to_u8_zp_{k}"
        zp = numpy_helper.from_array(np.array(z + 128, np.uint8), name)
        new.graph.initializer.append(zp)
        by_name[q.output[0]].input[2] = name
        by_name[dq.output[0]].input[2] = name
    return new, len(pairs)


class OrtReferenceError(VtakitError, ValueError):
    """A model the reference does not cover (one line: the node and why)."""


_MOVE_OPS = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity"}


def _attrs(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _dtype(arr):
    return np.asarray(arr).dtype.name


class _Q:
    """A DequantizeLinear output: float value plus its integer source."""

    __slots__ = ("q", "scale", "zp", "axis")

    def __init__(self, q, scale, zp, axis):
        self.q, self.scale, self.zp, self.axis = q, scale, zp, axis


class _Run:
    def __init__(self, model, cpu=DEFAULT_CPU):
        from onnx import numpy_helper

        self.cpu = cpu
        self.graph = model.graph
        self.opset = next((int(o.version) for o in model.opset_import
                           if o.domain in ("", "ai.onnx")), 13)
        self.vals = {i.name: numpy_helper.to_array(i) for i in self.graph.initializer}
        self.dq = {}        # DequantizeLinear output name -> _Q
        self.done = set()   # ids of nodes consumed by a fused group
        self.consumers = {}
        for nd in self.graph.node:
            for n in nd.input:
                self.consumers.setdefault(n, []).append(nd)
        self.outputs = {o.name for o in self.graph.output}
        self.ties = {}      # op type -> outputs within a hair of a rounding tie

    def count_ties(self, op, exact):
        """Kernels whose float order differs between onnxruntime's CPU builds (Add,
        Mul, Sigmoid) round alike except near a tie: count those outputs."""
        self.ties[op] = self.ties.get(op, 0) + int(K.near_tie(exact).sum())

    # -- helpers

    def const(self, name):
        return None if not name else self.vals[name]

    def single_q(self, name):
        """The QuantizeLinear that alone consumes ``name`` (through a redundant Relu or
        Clip), with the activation node, or (None, None)."""
        users = self.consumers.get(name, [])
        if len(users) != 1 or name in self.outputs:
            return None, None
        nxt, act = users[0], None
        if nxt.op_type in ("Relu", "Clip"):
            act = nxt
            users = self.consumers.get(nxt.output[0], [])
            if len(users) != 1 or nxt.output[0] in self.outputs:
                return None, None
            nxt = users[0]
        if nxt.op_type != "QuantizeLinear":
            return None, None
        if act is not None and not self._clip_redundant(act, nxt):
            return None, None
        return act, nxt

    def _clip_redundant(self, act, q):
        scale, zp, dtype = self.qparams(q)
        lo, hi = K.qrange(dtype)
        if np.ndim(scale):
            return False
        qmin = float(scale) * (lo - int(zp))
        qmax = float(scale) * (hi - int(zp))
        if act.op_type == "Relu":
            return int(zp) == lo
        cmin = self.const(act.input[1]) if len(act.input) > 1 and act.input[1] else None
        cmax = self.const(act.input[2]) if len(act.input) > 2 and act.input[2] else None
        return bool((cmin is None or float(cmin) <= qmin)
                    and (cmax is None or float(cmax) >= qmax))

    def qparams(self, qnode):
        scale = self.const(qnode.input[1])
        zp = self.const(qnode.input[2]) if len(qnode.input) > 2 and qnode.input[2] else \
            np.uint8(0)
        return np.asarray(scale, np.float32), np.asarray(zp), _dtype(zp)

    # -- the walk

    def run(self, feeds):
        for k, v in feeds.items():
            self.vals[k] = np.asarray(v)
        for node in self.graph.node:
            if id(node) in self.done:
                continue
            outs = self.node(node)
            for name, v in zip(node.output, outs):
                if name:
                    self.vals[name] = v
        return [self.vals[o.name] for o in self.graph.output]

    def node(self, node):
        op = node.op_type
        a = _attrs(node)
        if op == "DequantizeLinear":
            q = self.vals[node.input[0]]
            scale = np.asarray(self.vals[node.input[1]], np.float32)
            zp = self.vals[node.input[2]] if len(node.input) > 2 and node.input[2] else 0
            axis = int(a.get("axis", 1)) % max(q.ndim, 1) if np.ndim(scale) else None
            self.dq[node.output[0]] = _Q(q, scale, np.asarray(zp), axis)
            return [K.dequantize_linear(q, scale, zp, axis)]
        if op == "QuantizeLinear":
            x = self.vals[node.input[0]]
            scale, zp, dtype = self.qparams(node)
            axis = int(a.get("axis", 1)) % x.ndim if np.ndim(scale) else None
            return [K.quantize_linear(x, scale, zp, dtype, axis)]
        if op in ("QLinearConv", "QLinearMatMul"):
            return [self.qlinear_op(node, a)]
        if node.domain == "com.microsoft":
            return [_ms_op(self, node, a)]
        fused = self.fuse(node, a)
        if fused is not None:
            return fused
        return self.float_node(node)

    def float_node(self, node):
        from onnx.reference import ReferenceEvaluator

        x = self.vals.get(node.input[0]) if node.input else None
        if node.op_type == "MaxPool" and isinstance(x, np.ndarray) and x.dtype.kind in "iu":
            return [_int_max_pool(node, _attrs(node), x)]
        if node.domain not in ("", "ai.onnx"):
            raise OrtReferenceError(f"{node.op_type} node {node.name!r}: domain {node.domain} "
                                 f"is not covered")
        feeds = {n: self.vals[n] for n in node.input if n}
        return ReferenceEvaluator(node, opsets={"": self.opset}).run(None, feeds)

    # -- fused groups

    def fuse(self, node, a):
        op = node.op_type
        ins = [n for n in node.input if n]
        if op in _MOVE_OPS:
            return None  # the float detour is exact for these (see the module docstring)
        if op not in ("Conv", "Gemm", "MatMul", "Add", "Mul", "GlobalAveragePool", "AveragePool",
                      "Concat", "Sigmoid", "LeakyRelu", "Softmax"):
            return None
        act, qn = self.single_q(node.output[0])
        if qn is None:
            return None
        if op in ("Conv", "Gemm", "MatMul"):
            data = ins[:2]
        else:
            data = ins
        if not all(n in self.dq for n in data):
            return None
        scale, zp, dtype = self.qparams(qn)
        if np.ndim(scale):
            return None
        x = self.dq[data[0]]
        if _dtype(x.q) != dtype:
            return None
        if op in ("Conv", "Gemm", "MatMul"):
            y = self.integer_layer(node, a, op, ins, scale, zp, dtype)
            if y is None:
                return None
        elif op in ("Add", "Mul"):
            p, r = self.dq[ins[0]], self.dq[ins[1]]
            if np.ndim(p.scale) or np.ndim(r.scale) or _dtype(r.q) != dtype:
                return None
            fn = K.qlinear_add if op == "Add" else K.qlinear_mul
            y = fn(p.q, p.scale, p.zp, r.q, r.scale, r.zp, scale, zp, dtype)
            exact = (K.qlinear_add_exact if op == "Add" else K.qlinear_mul_exact)(
                p.q, p.scale, p.zp, r.q, r.scale, r.zp, scale)
            self.count_ties(op, exact)
        elif op == "GlobalAveragePool":
            y = K.global_avg_pool(x.q, x.scale, x.zp, scale, zp, dtype)
        elif op == "AveragePool":
            if len(a.get("kernel_shape", ())) != 2 or x.q.ndim != 4:
                return None
            auto = a.get("auto_pad", b"NOTSET")
            if auto not in (b"NOTSET", "NOTSET", b"", ""):
                return None
            p = list(a.get("pads", [0, 0, 0, 0]))
            y = K.avg_pool(x.q, x.scale, x.zp, scale, zp, dtype,
                           kernel=tuple(a["kernel_shape"]), strides=tuple(a.get("strides", (1, 1))),
                           pads=(p[0], p[1], p[2], p[3]),
                           count_include_pad=bool(a.get("count_include_pad", 0)),
                           ceil_mode=bool(a.get("ceil_mode", 0)))
        elif op == "Concat":
            parts = []
            for n in ins:
                v = self.dq[n]
                if _dtype(v.q) != dtype or np.ndim(v.scale):
                    return None
                if float(v.scale) == float(scale) and int(v.zp) == int(zp):
                    parts.append(v.q)
                else:
                    t = K.lookup_table(lambda f: f, v.scale, v.zp, scale, zp, dtype)
                    parts.append(K.apply_table(v.q, t, dtype))
            y = np.concatenate(parts, axis=int(a["axis"]))
        elif op == "LeakyRelu":
            alpha = np.float32(a.get("alpha", 0.01))
            t = K.lookup_table(lambda f: np.where(f >= 0, f, (f * alpha).astype(np.float32)),
                               x.scale, x.zp, scale, zp, dtype)
            y = K.apply_table(x.q, t, dtype)
        elif op == "Softmax":
            if self.opset >= 13:
                y = K.softmax(x.q, x.scale, scale, zp, dtype, axis=int(a.get("axis", -1)))
            else:  # coerced to 2-D at axis
                ax = int(a.get("axis", 1)) % x.q.ndim
                flat = x.q.reshape(int(np.prod(x.q.shape[:ax])), -1)
                y = K.softmax(flat, x.scale, scale, zp, dtype).reshape(x.q.shape)
        else:  # Sigmoid
            t = K.lookup_table(K.logistic, x.scale, x.zp, scale, zp, dtype)
            y = K.apply_table(x.q, t, dtype)
            xf = K.dequantize_linear(x.q, x.scale, x.zp).astype(np.float64)
            # logistic(0) = 0.5 exactly in every implementation: not an ambiguous tie
            self.count_ties(op, (1.0 / (1.0 + np.exp(-xf)) / float(scale))[xf != 0])
        self.done.add(id(qn))
        if act is not None:
            self.done.add(id(act))
        self.vals[qn.output[0]] = y
        return [None]

    def integer_layer(self, node, a, op, ins, scale, zp, dtype):
        x, w = self.dq[ins[0]], self.dq[ins[1]]
        if dtype == "int8" and self.cpu != "arm64":
            return None  # x86: int8-activation Conv/Gemm/MatMul groups stay float ops
        if np.ndim(x.scale) or not isinstance(self.vals.get(node.input[1]), np.ndarray):
            return None
        bias = None
        if len(ins) > 2:
            b = self.dq.get(ins[2])
            if b is None or _dtype(b.q) != "int32":
                return None
            bias = b.q
        if op == "Conv":
            return self.conv(node, a, x.q, x.scale, x.zp, w.q, w.scale, w.zp, bias, scale, zp,
                             dtype)
        wq, wz = w.q, w.zp
        if op == "Gemm":
            if int(a.get("transA", 0)) or float(a.get("beta", 1.0)) != 1.0:
                return None
            alpha = float(a.get("alpha", 1.0))
            if int(a.get("transB", 0)):
                wq = wq.T
        else:
            alpha = 1.0
        s = K.output_scale(x.scale, w.scale, scale, alpha)
        acc = K.matmul_acc(x.q, x.zp, wq, wz, bias)
        return K.requantize_output(acc, s, zp, dtype, axis=-1 if np.ndim(s) else None)

    def conv(self, node, a, xq, xs, xz, wq, ws, wz, bias, ys, yz, dtype):
        if xq.ndim == 3:  # 1-D: as a 2-D convolution of height 1
            a = dict(a)
            for key in ("strides", "dilations"):
                a[key] = [1] + list(a.get(key, [1]))
            p = list(a.get("pads", [0, 0]))
            a["pads"] = [0, p[0], 0, p[1]]
            y = self.conv(node, a, xq[:, :, None], xs, xz, wq[:, :, None], ws, wz, bias, ys,
                          yz, dtype)
            return y[:, :, 0]
        if xq.ndim != 4:
            raise OrtReferenceError(f"Conv node {node.name!r}: only 1-D and 2-D convolutions are "
                                 f"covered")
        auto = a.get("auto_pad", b"NOTSET")
        if auto not in (b"NOTSET", "NOTSET", b"", ""):
            raise OrtReferenceError(f"Conv node {node.name!r}: auto_pad is not covered")
        p = list(a.get("pads", [0, 0, 0, 0]))
        acc = K.conv_acc(xq, xz, wq, wz, bias, strides=tuple(a.get("strides", (1, 1))),
                         pads=(p[0], p[1], p[2], p[3]),
                         dilations=tuple(a.get("dilations", (1, 1))),
                         group=int(a.get("group", 1)))
        s = K.output_scale(xs, ws, ys)
        return K.requantize_output(acc, s, yz, dtype, axis=1 if np.ndim(s) else None)

    def qlinear_op(self, node, a):
        v = [self.vals[n] if n else None for n in node.input]
        x, xs, xz, w, ws, wz, ys, yz = v[:8]
        dtype = _dtype(yz)
        if node.op_type == "QLinearConv":
            bias = v[8] if len(v) > 8 else None
            return self.conv(node, a, x, xs, xz, w, ws, wz, bias, ys, yz, dtype)
        if x.ndim < 2 or w.ndim != 2:
            raise OrtReferenceError(f"QLinearMatMul node {node.name!r}: only a 2-D weight is "
                                 f"covered")
        s = K.output_scale(xs, ws, ys)
        acc = K.matmul_acc(x, xz, w, wz)
        return K.requantize_output(acc, s, yz, dtype, axis=-1 if np.ndim(s) else None)


def _int_max_pool(node, a, x):
    """MaxPool on 8-bit integers (2-D NCHW), as onnxruntime's kernel: the max of each
    window's taps inside the input (onnx's reference pads with NaN, not integers)."""
    if x.ndim != 4 or len(node.output) > 1 and node.output[1] or \
            a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"", "") or \
            tuple(a.get("dilations", (1, 1))) != (1, 1):
        raise OrtReferenceError(f"MaxPool node {node.name!r}: only plain 2-D integer pooling "
                             f"is covered")
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", (1, 1))
    t, l, b, r = a.get("pads", (0, 0, 0, 0))
    n, c, h, w = x.shape
    ceil = bool(a.get("ceil_mode", 0))
    oh = K.avg_pool_out_size(h, kh, sh, t, b, ceil)
    ow = K.avg_pool_out_size(w, kw, sw, l, r, ceil)
    lo = np.iinfo(x.dtype).min
    xp = np.full((n, c, max((oh - 1) * sh + kh, t + h), max((ow - 1) * sw + kw, l + w)), lo,
                 x.dtype)
    xp[:, :, t:t + h, l:l + w] = x
    y = np.full((n, c, oh, ow), lo, x.dtype)
    for i in range(kh):
        for j in range(kw):
            y = np.maximum(y, xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
    return y


def _ms_scalar(v, default=0):
    return default if v is None else np.asarray(v).reshape(-1)[0]


def _ms_op(self, node, a):  # noqa: C901 (one branch per op, as in onnxruntime)
    """onnxruntime's com.microsoft quantized ops (operator format), same kernels."""
    op = node.op_type
    v = [self.vals[n] if n else None for n in node.input]
    if op in ("QLinearAdd", "QLinearMul"):
        dtype = _dtype(v[0])
        fn = K.qlinear_add if op == "QLinearAdd" else K.qlinear_mul
        args = (v[0], _ms_scalar(v[1]), _ms_scalar(v[2]), v[3], _ms_scalar(v[4]),
                _ms_scalar(v[5]), _ms_scalar(v[6]))
        exact = (K.qlinear_add_exact if op == "QLinearAdd" else K.qlinear_mul_exact)(*args)
        self.count_ties(op, exact)
        return fn(*args, _ms_scalar(v[7]), dtype)
    if op == "QLinearConcat":
        ys, yz = _ms_scalar(v[0]), _ms_scalar(v[1])
        dtype = _dtype(v[2])
        parts = []
        for k in range(2, len(v), 3):
            xs, xz = _ms_scalar(v[k + 1]), _ms_scalar(v[k + 2])
            if np.float32(xs) == np.float32(ys) and int(xz) == int(yz):
                parts.append(v[k])
            else:
                parts.append(K.apply_table(v[k], K.lookup_table(lambda f: f, xs, xz, ys, yz,
                                                                 dtype), dtype))
        return np.concatenate(parts, axis=int(a["axis"]))
    if op == "QGemm":
        if int(a.get("transA", 0)) or len(v) < 9 or v[7] is None:
            raise OrtReferenceError(f"QGemm node {node.name!r}: transA or a float output is not "
                                 f"covered")
        b = v[3].T if int(a.get("transB", 0)) else v[3]
        bz = v[5] if v[5] is not None else 0
        acc = K.matmul_acc(v[0], _ms_scalar(v[2]), b, bz, v[6])
        s = K.output_scale(_ms_scalar(v[1]), v[4], _ms_scalar(v[7]), float(a.get("alpha", 1.0)))
        return K.requantize_output(acc, s, _ms_scalar(v[8]), _dtype(v[0]),
                                   axis=-1 if np.ndim(s) else None)
    x, xs, xz, ys, yz = v[0], _ms_scalar(v[1]), _ms_scalar(v[2]), _ms_scalar(v[3]), \
        _ms_scalar(v[4])
    dtype = _dtype(x)
    if int(a.get("channels_last", 0)):
        raise OrtReferenceError(f"{op} node {node.name!r}: channels_last is not covered")
    if op == "QLinearGlobalAveragePool":
        return K.global_avg_pool(x, xs, xz, ys, yz, dtype)
    if op == "QLinearAveragePool":
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"", ""):
            raise OrtReferenceError(f"{op} node {node.name!r}: auto_pad is not covered")
        p = list(a.get("pads", [0, 0, 0, 0]))
        return K.avg_pool(x, xs, xz, ys, yz, dtype, kernel=tuple(a["kernel_shape"]),
                          strides=tuple(a.get("strides", (1, 1))), pads=(p[0], p[1], p[2], p[3]),
                          count_include_pad=bool(a.get("count_include_pad", 0)),
                          ceil_mode=bool(a.get("ceil_mode", 0)))
    if op in ("QLinearSigmoid", "QLinearLeakyRelu"):
        if op == "QLinearSigmoid":
            fn = K.logistic
        else:
            alpha = np.float32(a.get("alpha", 0.01))

            def fn(f):
                return np.where(f >= 0, f, (f * alpha).astype(np.float32))
        return K.apply_table(x, K.lookup_table(fn, xs, xz, ys, yz, dtype), dtype)
    if op == "QLinearSoftmax":
        if int(a.get("opset", 13)) >= 13:
            return K.softmax(x, xs, ys, yz, dtype, axis=int(a.get("axis", -1)))
        ax = int(a.get("axis", 1)) % x.ndim
        flat = x.reshape(int(np.prod(x.shape[:ax])), -1)
        return K.softmax(flat, xs, ys, yz, dtype).reshape(x.shape)
    raise OrtReferenceError(f"com.microsoft.{op} node {node.name!r} is not covered")



def run_reference(model, feeds, ties=None, cpu=DEFAULT_CPU):
    """Run a quantized ONNX model (QDQ or operator format) with onnxruntime's fused
    integer kernel formulas; returns the graph outputs in order (numpy arrays).

    ``model``: an ``onnx.ModelProto`` or a path; ``feeds``: input name -> array;
    ``ties``: an optional dict that receives, per op type, how many outputs of the
    float kernels whose operation order differs between onnxruntime's CPU builds
    (QLinearAdd, QLinearMul, QLinearSigmoid) lie within a hair of a rounding tie:
    where that count is 0, every build of onnxruntime gives the reference's answer;
    ``cpu``: the onnxruntime CPU class followed (:data:`CPU_CLASSES`, :func:`ort_graph`).
    """
    import onnx

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model))
    model, _ = ort_graph(model, cpu)
    run = _Run(model, cpu)
    outs = run.run(feeds)
    if ties is not None:
        for k, v in run.ties.items():
            ties[k] = ties.get(k, 0) + v
    return outs
