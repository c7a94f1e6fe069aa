"""Lowering of quantized layers (the IR form of :mod:`vtakit.compiler.quant`) onto VTA.

A *layer* is the chain the frontends produce, rooted at its final ``cast``::

    cast(int8) <- clip <- qnn.requantize <- nn.bias_add <- nn.conv2d | nn.dense
                                                             <- [nn.pad] <- data
    cast(int8) <- clip <- qnn.avg_pool2d <- data        (TFLite average pool)
    clip <- nn.max_pool2d <- data

:func:`match_layer` recognizes one; :func:`lower_layer` (or
:func:`lower_primitive` for a fused primitive :class:`~vtakit.compiler.ir.Function`
whose body is a layer) returns a packed function ``f(rt, x) -> numpy.ndarray`` that
runs the operator library's plan on ``rt``'s device:

* requantize rounding ``"vta"`` (scale ``2^-k``): the whole layer on VTA, bias plus
  ``zero_point * 2^k`` and the rounding constant in the bias tile, ``SHR k``, clip,
  int8 store;
* any other rounding (TFLite's fixed-point multiplier, ONNX's float rounding): VTA
  computes ``conv + bias`` and stores int32 (four byte planes); the exact
  requantize, clip and cast run on the host in numpy. VTA's 32-bit ALU cannot
  reproduce TFLite's 64-bit ``x * m >> (31 - s)`` even with TVM's ALU MUL (it keeps
  the low 32 bits of the product), so the exact step stays on the host; the cost
  is measured by :func:`requantize_cost` (see the README).

An input zero point other than 0 is padded on the host (VTA's load pads with
zeros only); zero padding is folded into the plan.

:func:`run_graph` executes a whole module: layers on VTA, every other call with
the op's numpy compute (softmax, quantize, reshape, TFLite ADD, ...), recording
where each layer ran and why (:class:`LayerRecord`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import numpy as np

from .conv2d import plan_conv2d
from .dense import plan_dense
from .epilogue import EpilogueError
from .ir import Call, Constant, Function, IRModule, Op, Tuple, TupleGetItem, Var, post_order
from .layout import LayoutError
from .pool import plan_pool2d
from .quant import fixed_point as fp
from .quant.pool import divide_round
from .tiling import TilingError

__all__ = ["VTALayer", "LayerRecord", "match_layer", "split_layer", "lower_layer",
           "lower_primitive", "vm_lowerer", "VM_KIND",
           "run_graph", "requantize_cost", "LoweringError"]


class LoweringError(ValueError):
    """A layer that the operator library cannot run (the graph runs it on the host)."""


def _is(expr, name):
    return isinstance(expr, Call) and isinstance(expr.op, Op) and expr.op.name == name


@dataclass
class VTALayer:
    """One recognized quantized layer.

    Attributes
    ----------
    kind : str
        ``"conv2d"``, ``"dense"``, ``"avg_pool2d"`` or ``"max_pool2d"``.
    root : Call
        The layer's last call (its value is the layer's output).
    data : Expr
        The layer's input (before any explicit pad).
    attrs : dict
        weight and bias (Constant or Var expressions), strides, padding (top, left,
        bottom, right), pad_value, groups,
        requantize attributes (scale, zero_point, axis, rounding), clip (lo, hi),
        out_dtype, pool_size.
    """

    kind: str
    root: Call
    data: object
    attrs: dict = field(default_factory=dict)


def match_layer(expr) -> VTALayer | None:
    """The layer rooted at ``expr``, or None when ``expr`` does not end one."""
    out_dtype = None
    e = expr
    if _is(e, "cast"):
        out_dtype = e.attrs["dtype"]
        e = e.args[0]
    if not _is(e, "clip"):
        return None
    clip = (e.attrs["a_min"], e.attrs["a_max"])
    e = e.args[0]
    if _is(e, "nn.max_pool2d"):
        a = e.attrs
        return VTALayer("max_pool2d", expr, e.args[0], {
            "pool_size": a["pool_size"], "strides": a["strides"] or a["pool_size"],
            "padding": a["padding"], "clip": clip, "out_dtype": out_dtype})
    if out_dtype is None:
        return None
    if _is(e, "qnn.avg_pool2d"):
        a = e.attrs
        return VTALayer("avg_pool2d", expr, e.args[0], {
            "pool_size": a["pool_size"], "strides": a["strides"], "padding": a["padding"],
            "rounding": a["rounding"], "clip": clip, "out_dtype": out_dtype})
    if not _is(e, "qnn.requantize"):
        return None
    rq = dict(e.attrs)
    e = e.args[0]
    bias = None
    if _is(e, "nn.bias_add"):
        if not isinstance(e.args[1], (Constant, Var)) or e.attrs["axis"] != 1:
            return None
        bias = e.args[1]
        e = e.args[0]
    if _is(e, "nn.conv2d"):
        a = e.attrs
        if tuple(a["dilation"]) != (1, 1) or not isinstance(e.args[1], (Constant, Var)):
            return None
        data, pad, pad_value = e.args[0], tuple(a["padding"]), 0.0
        if _is(data, "nn.pad"):
            pw = data.attrs["pad_width"]
            if any(tuple(p) != (0, 0) for p in pw[:2]) or any(pad):
                return None
            pad = (pw[2][0], pw[3][0], pw[2][1], pw[3][1])
            pad_value = data.attrs["pad_value"]
            data = data.args[0]
        return VTALayer("conv2d", expr, data, {
            "weight": e.args[1], "bias": bias, "strides": a["strides"],
            "padding": pad, "pad_value": pad_value, "groups": a["groups"],
            "requantize": rq, "clip": clip, "out_dtype": out_dtype})
    if _is(e, "nn.dense") and isinstance(e.args[1], (Constant, Var)):
        return VTALayer("dense", expr, e.args[0], {
            "weight": e.args[1], "bias": bias, "requantize": rq,
            "clip": clip, "out_dtype": out_dtype})
    return None


@dataclass
class LayerRecord:
    """Where one layer ran, why, and what it cost."""

    kind: str
    shape: tuple
    where: str                       # "vta", "vta+host" (exact requantize on the host), "host"
    why: str
    tiling: str = ""
    predicted_cycles: float = 0.0
    dram_bytes: int = 0
    cycles: int = -1
    host_seconds: float = 0.0
    macs: int = 0
    dram_bytes_run: int = 0          # measured: the device's load/store byte counters


def _host_requantize(acc, rq, clip, out_dtype):
    y = _requant(acc, rq)
    return np.clip(y.astype(np.int64), clip[0], clip[1]).astype(out_dtype)


def _requant(acc, rq):
    from .quant.ops import requantize
    return requantize(acc, scale=rq["scale"], zero_point=rq["zero_point"], axis=rq["axis"],
                      rounding=rq["rounding"])


def _vta_exact(rq):
    return rq["rounding"] == "vta" and fp.vta_shift(rq["scale"]) is not None


def _describe_tiling(plan):
    t = getattr(plan, "tiling", None)
    return "" if t is None else repr(t)


class _Lowered:
    """The packed function of one layer (callable as ``f(rt, x)``)."""

    def __init__(self, layer: VTALayer, config, records: list | None = None, program=None):
        self.layer = layer
        self.config = config
        self.records = records
        self.plan = None
        #: a Program from an executable's kernel table, run instead of plan.program()
        self.program = program

    def __call__(self, rt, x, env=None):
        """Run the layer on ``x``; ``env`` maps the Vars of weight/bias to arrays."""
        L = self.layer
        x = np.asarray(x)
        self.env = env or {}
        if self.config is None or self.config != rt.config:
            self.config = rt.config
        rec = LayerRecord(L.kind, tuple(x.shape), "vta", "")
        try:
            y = getattr(self, "_" + L.kind)(rt, x, rec)
        except (TilingError, EpilogueError, LayoutError, LoweringError) as e:
            rec.where, rec.why = "host", f"{type(e).__name__}: {e}"
            y = self._host(x)
        if self.records is not None:
            self.records.append(rec)
        return y

    def _value(self, e):
        if isinstance(e, Constant):
            return np.asarray(e.data)
        try:
            return np.asarray(self.env[e])
        except KeyError:
            raise LoweringError(f"no value for the layer's parameter %{e.name_hint}") from None

    # ------------------------------------------------------------- per kind

    def _run_plan(self, rt, plan, packed, rec):
        self.plan = plan
        if self.program is None:
            out, res = plan.run(rt, packed)
        else:
            out, res = _run_program(rt, plan, self.program, packed)
        rec.tiling = _describe_tiling(plan)
        est = getattr(plan, "estimate", None)
        if est is not None:
            rec.predicted_cycles = float(est.cycles)
            rec.dram_bytes = int(est.read_bytes + est.write_bytes)
        rec.cycles = int(res.cycles)
        rec.dram_bytes_run = int(sum(v for k, v in res.stats.items() if k.endswith("_nbytes")))
        return plan.unpack(out)

    def _conv_like(self, rt, x, rec, dense):
        a = self.layer.attrs
        rq, (lo, hi) = a["requantize"], a["clip"]
        w = self._value(a["weight"])
        o = w.shape[0]
        bias = (np.zeros(o, np.int64) if a["bias"] is None
                else self._value(a["bias"]).astype(np.int64))
        if not dense:
            pad = tuple(a["padding"])
            if a["pad_value"] != 0 and any(pad):
                # VTA's load pads with zeros; other pad values are applied here.
                t, l, b, r = pad
                x = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)),
                           constant_values=np.array(a["pad_value"]).astype(x.dtype))
                pad = (0, 0, 0, 0)
        if _vta_exact(rq) and -(1 << 15) <= lo <= hi < (1 << 15):
            k = fp.vta_shift(rq["scale"])
            zp = np.asarray(rq["zero_point"], np.int64)
            b32 = fp.wrap_int32(bias + zp * (1 << k))
            kw = dict(bias=True, shift=k, clip=(lo, hi), out_dtype=np.int8)
            rec.why = "requantize is a power-of-two shift: epilogue on VTA"
            exact_host = False
        else:
            b32 = fp.wrap_int32(bias)
            kw = dict(bias=True, out_dtype=np.int32)
            rec.where = "vta+host"
            rec.why = (f"requantize rounding {rq['rounding']!r} is not a VTA shift: int32 "
                       "result, exact requantize on the host")
            exact_host = True
        if dense:
            plan = plan_dense(self.config, x.shape, w.shape, **kw)
            packed = plan.pack(x, w, b32)
        else:
            plan = plan_conv2d(self.config, x.shape, w.shape, tuple(a["strides"]), pad,
                               groups=a["groups"], **kw)
            packed = plan.pack(x, w, b32)
        y = self._run_plan(rt, plan, packed, rec)
        rec.macs = int(np.prod(y.shape)) * int(np.prod(w.shape[1:]))
        if exact_host:
            t0 = time.perf_counter()
            y = _host_requantize(y, rq, (lo, hi), a["out_dtype"])
            rec.host_seconds = time.perf_counter() - t0
        return y.astype(a["out_dtype"]) if y.dtype != np.dtype(a["out_dtype"]) else y

    def _conv2d(self, rt, x, rec):
        return self._conv_like(rt, x, rec, dense=False)

    def _dense(self, rt, x, rec):
        return self._conv_like(rt, x, rec, dense=True)

    def _avg_pool2d(self, rt, x, rec):
        a = self.layer.attrs
        kh, kw = a["pool_size"]
        c = x.shape[1]
        pad = tuple(a["padding"])
        if any(pad) and a["rounding"] != "vta":
            raise LoweringError("a padded TFLite average pool excludes the padding from the "
                                "count; VTA's pools count it")
        # Window sums on the GEMM core (all-ones depthwise kernel), int32 out; the
        # framework's rounding division on the host.
        ones = np.ones((c, 1, kh, kw), np.int8)
        plan = plan_conv2d(self.config, x.shape, ones.shape, tuple(a["strides"]), pad,
                           groups=c, out_dtype=np.int32)
        sums = self._run_plan(rt, plan, plan.pack(x, ones), rec)
        t0 = time.perf_counter()
        y = divide_round(sums, kh * kw, "tflite" if a["rounding"] != "vta" else "vta")
        lo, hi = a["clip"]
        y = np.clip(y, lo, hi).astype(a["out_dtype"])
        rec.host_seconds = time.perf_counter() - t0
        rec.where, rec.why = "vta+host", "window sums on VTA, rounding division on the host"
        return y

    def _max_pool2d(self, rt, x, rec):
        a = self.layer.attrs
        if x.dtype != np.int8:
            raise LoweringError(f"max pool of {x.dtype}")
        plan = plan_pool2d(self.config, x.shape, "max", tuple(a["pool_size"]),
                           tuple(a["strides"]), tuple(a["padding"]))
        y = self._run_plan(rt, plan, plan.pack(x), rec)
        lo, hi = a["clip"]
        rec.why = "max on the ALU"
        y = np.clip(y, lo, hi)
        return y if a["out_dtype"] is None else y.astype(a["out_dtype"])

    # ------------------------------------------------------------- host fallback

    def _host(self, x):
        from .ir import evaluate
        v = Var("x")
        body = _replace_input(self.layer, v)
        named = {"x": x}
        for key in ("weight", "bias"):
            e = self.layer.attrs.get(key)
            if isinstance(e, Var):
                named[e.name_hint] = self._value(e)
        return np.asarray(evaluate(body, **named))


def _run_program(rt, plan, program, packed):
    """``plan.run`` with a stored Program (checked against the plan's operands)."""
    want = {name: op.nbytes for name, op in plan.operands.items()}
    if dict(program.slots) != want:
        raise LoweringError(f"stored kernel {program.name!r} has slots {dict(program.slots)}, "
                            f"the layer's plan needs {want}")
    plan.check_packed(packed)
    bufs = {}
    try:
        for name, op in plan.operands.items():
            bufs[name] = rt.alloc(op.nbytes)
            if name != "out":
                rt.upload(bufs[name], packed[name])
        rt.bind(program, bufs)
        result = rt.synchronize()
        out = plan.operands["out"]
        return rt.download(bufs["out"], out.dtype, out.shape), result
    finally:
        for buf in bufs.values():
            rt.free(buf)


def _replace_input(layer: VTALayer, v):
    """The layer's root expression with its input replaced by ``v``."""
    memo = {}

    def rec(e):
        if e is layer.data:
            return v
        if id(e) in memo:
            return memo[id(e)]
        if isinstance(e, Call):
            out = Call(e.op, [rec(a) for a in e.args], e.attrs if isinstance(e.op, Op) else None)
        else:
            out = e
        memo[id(e)] = out
        return out
    return rec(layer.root)


def lower_layer(layer: VTALayer, config=None, records: list | None = None):
    """A packed function ``f(rt, x) -> numpy.ndarray`` running ``layer`` on ``rt``.

    Plans are made for ``rt.config`` (``config`` is a hint kept for callers that plan
    ahead). ``records``, when given, receives one :class:`LayerRecord` per call.
    """
    return _Lowered(layer, config, records)


def lower_primitive(func: Function, config=None, records: list | None = None):
    """Lower a fused primitive function (one parameter, a layer as its body).

    Raises
    ------
    LoweringError
        When the body is not a quantized layer of the form above.
    """
    if len(func.params) != 1:
        raise LoweringError(f"a VTA layer function takes one input, this one takes "
                            f"{len(func.params)}")
    layer = match_layer(func.body)
    if layer is None or layer.data is not func.params[0]:
        raise LoweringError("the function body is not a quantized conv2d/dense/pool layer "
                            "(cast <- clip <- qnn.requantize <- nn.bias_add <- nn.conv2d)")
    return lower_layer(layer, config, records)


def run_graph(mod, rt, *args, records: list | None = None):
    """Run ``mod["main"]`` with its quantized layers on ``rt``'s device.

    Every layer :func:`match_layer` recognizes runs through :func:`lower_layer`; any
    other call runs its op's numpy compute. Returns what the reference interpreter
    would return for the same inputs (bit for bit: the tests check it).
    """
    func = mod["main"] if isinstance(mod, IRModule) else mod
    if len(args) != len(func.params):
        raise TypeError(f"main takes {len(func.params)} inputs, got {len(args)}")
    env = {id(p): np.asarray(a) for p, a in zip(func.params, args)}
    layers = {}

    def visit(e):
        key = id(e)
        if key in env:
            return env[key]
        if isinstance(e, Constant):
            val = e.data
        elif isinstance(e, Tuple):
            val = tuple(visit(f) for f in e.fields)
        elif isinstance(e, TupleGetItem):
            val = visit(e.tuple_value)[e.index]
        elif isinstance(e, Call) and isinstance(e.op, Op):
            layer = layers.get(key)
            if layer is None:
                layer = match_layer(e)
                layers[key] = layer or False
            if layer:
                val = lower_layer(layer, rt.config, records)(rt, visit(layer.data))
            else:
                val = e.op.compute(*[visit(a) for a in e.args], **e.attrs)
        else:
            raise LoweringError(f"run_graph: unsupported expression {type(e).__name__}")
        env[key] = val
        return val

    from .ir.interpreter import deep_recursion
    with deep_recursion():
        return visit(func.body)


def requantize_cost(config, x_shape, w_shape, stride=1, padding=0, groups=1) -> dict:
    """What exact host requantization costs against an int8 epilogue on VTA, for one conv.

    Returns predicted cycles and DRAM bytes of the int32-output plan (host requantize)
    and of the int8-output plan (shift epilogue on VTA), and the host's numpy time
    for the exact TFLite requantize of the int32 result.
    """
    p32 = plan_conv2d(config, x_shape, w_shape, stride, padding, groups=groups, bias=True,
                      out_dtype=np.int32)
    p8 = plan_conv2d(config, x_shape, w_shape, stride, padding, groups=groups, bias=True,
                     shift=8, clip=(-128, 127), out_dtype=np.int8)
    n, _, h, w = x_shape
    oh, ow = p32.unpack(np.zeros(p32.operands["out"].shape, np.int8)).shape[2:]
    acc = np.random.default_rng(0).integers(-(1 << 20), 1 << 20, (n, w_shape[0], oh, ow),
                                            dtype=np.int64).astype(np.int32)
    scale = np.linspace(1e-4, 5e-3, w_shape[0])
    t0 = time.perf_counter()
    for _ in range(5):
        fp.requantize_tflite(acc, scale, -128, axis=1)
    host = (time.perf_counter() - t0) / 5
    return {"int32_cycles": p32.estimate.cycles, "int8_cycles": p8.estimate.cycles,
            "int32_bytes": p32.estimate.read_bytes + p32.estimate.write_bytes,
            "int8_bytes": p8.estimate.read_bytes + p8.estimate.write_bytes,
            "host_requantize_s": host}


# --------------------------------------------------------------------------- VM hook

#: Primitive-factory kind of VTA layers in executables ("vtakit.vm.primitive.vta_layer").
VM_KIND = "vta_layer"


def split_layer(body):
    """``(layer, tail)``: the layer inside ``body`` and the element-wise calls applied
    after it (innermost first; each takes the layer's value as its first argument and
    constants otherwise), or ``(None, [])``."""
    tail = []
    e = body
    while True:
        layer = match_layer(e)
        if layer is not None:
            return layer, tail[::-1]
        if (isinstance(e, Call) and isinstance(e.op, Op) and e.args
                and all(isinstance(a, Constant) for a in e.args[1:])
                and e.op.pattern <= 1):       # ELEMWISE or BROADCAST
            tail.append(e)
            e = e.args[0]
            continue
        return None, []


def _apply_tail(y, tail):
    for call in tail:
        y = call.op.compute(y, *[a.data for a in call.args[1:]], **call.attrs)
    return np.asarray(y)


def vm_lowerer(config, report: list | None = None):
    """A ``lowerer`` hook for :func:`vtakit.compiler.codegen.compile_vm`.

    It claims every fused primitive whose body is a quantized layer (optionally
    followed by element-wise host ops such as ``qnn.dequantize``) and whose plan
    fits ``config``; the executable stores the primitive's IR text and the
    ``vta_layer`` factory runs it with :func:`lower_layer` on the VM's runtime.
    ``report`` receives one :class:`LayerRecord` per primitive seen (where it will
    run and why, tiling, predicted cycles, DRAM bytes). The layer's Program goes into
    the executable's kernel table; the factory binds that stored Program (checked
    against the plan it recomputes for packing) rather than lowering again.
    """
    from .codegen import LoweredPrimitive
    from .ir import astext
    _register_factory()

    def lower(func):
        layer, tail = split_layer(func.body)
        if layer is None or layer.data is not func.params[0]:
            if report is not None and func.params:
                ops = [n.op.name for n in post_order(func.body)
                       if isinstance(n, Call) and isinstance(n.op, Op)]
                t = func.params[0].checked_type
                report.append(LayerRecord(
                    "+".join(dict.fromkeys(ops)) or "host", tuple(getattr(t, "shape", ())),
                    "host", "not a quantized conv/dense/pool layer: numpy on the host"))
            return None
        shape = tuple(func.params[0].checked_type.shape)
        rec = LayerRecord(layer.kind, shape, "vta", "")
        try:
            plan = _plan_for(layer, shape, func, config, rec)
        except (TilingError, EpilogueError, LayoutError, LoweringError, ValueError) as e:
            rec.where, rec.why = "host", f"{type(e).__name__}: {e}"
            if report is not None:
                report.append(rec)
            return None
        if report is not None:
            report.append(rec)
        blob = plan.program().to_bytes()
        kernel = f"vta_{layer.kind}_{hashlib.sha1(blob).hexdigest()[:12]}"
        return LoweredPrimitive(VM_KIND, {"ir": astext(func), "kernel": kernel},
                                kernels=[(kernel, blob)], name=f"vta_{layer.kind}")
    return lower


def _plan_for(layer, shape, func, config, rec):
    """Plan the layer at compile time (checks that it fits; fills ``rec``)."""
    a = layer.attrs
    if layer.kind in ("conv2d", "dense"):
        rq = a["requantize"]
        w_shape = tuple(a["weight"].checked_type.shape if isinstance(a["weight"], Var)
                        else a["weight"].data.shape)
        exact = _vta_exact(rq)
        kw = (dict(bias=True, shift=fp.vta_shift(rq["scale"]), clip=a["clip"],
                   out_dtype=np.int8) if exact else dict(bias=True, out_dtype=np.int32))
        pad = tuple(a.get("padding", (0, 0, 0, 0)))
        if layer.kind == "conv2d" and a["pad_value"] != 0 and any(pad):
            t, l, b, r = pad
            shape = (shape[0], shape[1], shape[2] + t + b, shape[3] + l + r)
            pad = (0, 0, 0, 0)
        plan = (plan_dense(config, shape, w_shape, **kw) if layer.kind == "dense" else
                plan_conv2d(config, shape, w_shape, tuple(a["strides"]), pad,
                            groups=a["groups"], **kw))
        rec.where = "vta" if exact else "vta+host"
        rec.why = ("requantize is a power-of-two shift: epilogue on VTA" if exact else
                   f"requantize rounding {rq['rounding']!r}: int32 on VTA, exact step on host")
    elif layer.kind == "avg_pool2d":
        kh, kw_ = a["pool_size"]
        if any(a["padding"]) and a["rounding"] != "vta":
            raise LoweringError("a padded TFLite average pool excludes the padding")
        plan = plan_conv2d(config, shape, (shape[1], 1, kh, kw_), tuple(a["strides"]),
                           tuple(a["padding"]), groups=shape[1], out_dtype=np.int32)
        rec.where, rec.why = "vta+host", "window sums on VTA, rounding division on the host"
    else:
        plan = plan_pool2d(config, shape, "max", tuple(a["pool_size"]), tuple(a["strides"]),
                           tuple(a["padding"]))
        rec.why = "max on the ALU"
    rec.tiling = _describe_tiling(plan)
    est = getattr(plan, "estimate", None)
    if est is not None:
        rec.predicted_cycles = float(est.cycles)
        rec.dram_bytes = int(est.read_bytes + est.write_bytes)
    else:
        info = plan.inspect()
        rec.predicted_cycles = float(info["predicted_cycles"])
        rec.dram_bytes = int(sum(info["dram"].values()))
    return plan


def _vta_layer_factory(entry, ctx):
    from .ir import parse_expr
    func = parse_expr(entry.meta_dict["ir"])
    layer, tail = split_layer(func.body)
    if layer is None:
        raise LoweringError(f"primitive {entry.name}: its IR is not a quantized layer")
    lowered = lower_layer(layer)
    if "kernel" in entry.meta_dict:
        lowered.program = ctx.program(entry.meta_dict["kernel"])
    n_in = len(func.params)

    def run(*args):
        ins, out = args[:n_in], args[n_in]
        env = dict(zip(func.params, ins))
        y = lowered(ctx.runtime, ins[0], env)
        out[...] = _apply_tail(y, tail)
    return run


def _register_factory():
    from ..runtime.registry import get_global_func, register_func
    name = "vtakit.vm.primitive." + VM_KIND
    if get_global_func(name, allow_missing=True) is None:
        register_func(name, _vta_layer_factory)


_register_factory()
