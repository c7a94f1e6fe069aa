"""Quantized layers (the IR form of :mod:`vtakit.compiler.quant`) run on VTA.

A *layer* is a chain the frontends produce, rooted at its final ``cast``/``clip``;
each kind is one strategy of :mod:`.registry` (:mod:`.conv`: conv2d and dense,
:mod:`.fold`: conv2d with thin inputs folded, :mod:`.dilated`: dilated conv2d,
:mod:`.pool`: average and max pooling, :mod:`.add`: a requantized add,
:mod:`.residual`: a convolution with its residual add fused).
:func:`match_layer` recognizes one; :func:`lower_layer` (or
:func:`lower_primitive` for a fused primitive :class:`~vtakit.compiler.ir.Function`
whose body is a layer) returns a packed function ``f(rt, x) -> numpy.ndarray`` that
runs the strategy's plan of the operator library on ``rt``'s device, after its pre
step on the input (a fold's re-layout) and before its host step (an exact
requantize, a rounding division) on the packed result.

A layer's input may be a :class:`~vtakit.runtime.vm.objects.DeviceTensor` that the
previous layer left in device DRAM, read in place, and its output may go to one; in
an executable (:mod:`.executable`) the packed weights are uploaded once per VM and
stay resident.

:func:`run_graph` executes a whole module: layers on VTA, every other call with
the op's numpy compute (softmax, quantize, reshape, TFLite ADD, ...), recording
where each layer ran and why (:class:`LayerRecord`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...runtime.layout import nchw_shape, pack_activation
from ..ir import Call, Constant, Function, IRModule, Op, Tuple, TupleGetItem, Var
from ..ops.epilogue import EpilogueError
from ..ops.layout import LayoutError
from ..ops.roofline import Roofline, plan_roofline
from ..ops.tiling import TilingError
from . import residual  # noqa: F401  (first: its pattern is an add of a conv layer)
from . import add, conv, dilated, fold, pool  # noqa: F401  (the strategies register)
from .conv import requantize_cost
from .registry import LoweringError, Spec, VTALayer, is_op, strategies

__all__ = ["VTALayer", "LayerRecord", "match_layer", "lower_layer", "lower_primitive",
           "run_graph", "requantize_cost", "function_roofline", "layer_spec", "weight_shape",
           "LoweringError"]


def match_layer(expr) -> VTALayer | None:
    """The layer rooted at ``expr``, or None when ``expr`` does not end one: the first
    registered strategy whose pattern matches what lies under the final clip (and cast)."""
    out_dtype = None
    e = expr
    if is_op(e, "cast"):
        out_dtype = e.attrs["dtype"]
        e = e.args[0]
    if not is_op(e, "clip"):
        return None
    clip = (e.attrs["a_min"], e.attrs["a_max"])
    for strategy in strategies():
        layer = strategy.match(e.args[0], expr, clip, out_dtype)
        if layer is not None:
            return layer
    return None


def weight_shape(layer: VTALayer, value=None):
    """The shape of the layer's weight (an add's: its second operand's), None without one;
    ``value(expr)`` gives an operand's array when it is no typed expression."""
    w = layer.attrs.get("weight", layer.attrs.get("other"))
    if w is None:
        return None
    if isinstance(w, Constant):
        return tuple(w.data.shape)
    t = getattr(w, "checked_type", None)
    if t is not None and value is None:
        return tuple(t.shape)
    return tuple(np.shape(value(w)))


def layer_spec(layer: VTALayer, shape, w_shape, config) -> Spec:
    """Plan ``layer`` for input ``shape`` with its strategy (raises TilingError,
    LoweringError, ...); ``w_shape`` is :func:`weight_shape`."""
    return layer.strategy.plan(layer, tuple(int(d) for d in shape), w_shape, config)


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
    roofline: object = None          # the plan's Roofline (vtakit.compiler.ops.roofline)


def _describe_tiling(plan):
    t = getattr(plan, "tiling", None)
    return "" if t is None else repr(t)


def _fill_estimate(rec, plan, spec=None):
    """The record's tiling, predicted cycles and DRAM bytes from ``plan``; kept in
    ``spec`` (a plan's estimate does not change), so a layer run again reuses it; and
    the plan's roofline."""
    if spec is not None and spec.estimate is not None:
        rec.tiling, rec.predicted_cycles, rec.dram_bytes, rec.roofline = spec.estimate
        return
    rec.tiling, rec.roofline = _describe_tiling(plan), plan_roofline(plan)
    est = getattr(plan, "estimate", None)
    if est is not None:
        rec.predicted_cycles = float(est.cycles)
        rec.dram_bytes = int(est.read_bytes + est.write_bytes)
    else:
        info = plan.inspect()
        rec.predicted_cycles = float(info["predicted_cycles"])
        rec.dram_bytes = int(sum(info["dram"].values()))
    if spec is not None:
        spec.estimate = (rec.tiling, rec.predicted_cycles, rec.dram_bytes, rec.roofline)


def _as_nchw(x):
    x = np.asarray(x)
    return x.reshape(nchw_shape(x.shape))


class _Lowered:
    """The packed function of one layer (callable as ``f(rt, x, env, out)``).

    The input may be a host array or a :class:`~vtakit.runtime.vm.objects.DeviceTensor`
    (read in place); the output goes to ``out`` when given (a host array, or a device
    tensor the kernel stores into directly when no host step follows) and is returned.
    Host steps after the kernel (exact requantize, rounding division) work on the packed
    result, so a layer whose output stays on the device is never unpacked.
    """

    def __init__(self, layer: VTALayer, config, records: list | None = None, program=None):
        self.layer = layer
        self.config = config
        self.records = records
        self.plan = None
        #: a Program from an executable's kernel table, run instead of plan.program()
        self.program = program
        self.env = {}
        self._cached, self._spec_key = None, None
        #: weight operands kept in device DRAM across calls (see :meth:`keep_resident`)
        self._resident = None

    def keep_resident(self) -> None:
        """Keep the packed weights on the device between calls (while the same weight
        arrays come in) until :meth:`release`."""
        self._resident = {}

    def release(self) -> None:
        """Free the resident weights."""
        for rt, buf in (self._resident or {}).values():
            try:
                rt.free(buf)
            except Exception:   # the device is already closed
                pass
        if self._resident is not None:
            self._resident = {}

    def _operand(self, e):
        """The value of a layer operand: a constant, or what ``env`` gives (possibly a
        device tensor)."""
        if isinstance(e, Constant):
            return e.data
        try:
            return self.env[e]
        except KeyError:
            raise LoweringError(f"no value for the layer's operand "
                                f"{getattr(e, 'name_hint', type(e).__name__)}") from None

    def _value(self, e):
        return np.asarray(self._operand(e))

    def _spec(self, x_shape):
        """The layer's spec and packed weights for this input shape and these weight arrays
        (one kept: the VM passes the same constant arrays every call)."""
        a = self.layer.attrs
        params = tuple(self._value(a[k]) for k in ("weight", "bias") if a.get(k) is not None)
        key = (x_shape, self.config) + tuple(id(p) for p in params)
        if key != self._spec_key:
            self.release()
            w_shape = weight_shape(self.layer, self._operand)
            spec = layer_spec(self.layer, x_shape, w_shape, self.config)
            spec.consts = self.layer.strategy.pack(self.layer, spec, self._value)
            spec.params = params
            self._cached, self._spec_key = spec, key
        return self._cached

    def __call__(self, rt, x, env=None, out=None):
        """Run the layer on ``x``; ``env`` maps the Vars of weight/bias to arrays."""
        self.env = env or {}
        try:
            return self._run(rt, x, out)
        finally:
            self.env = {}       # holds the call's tensors (device ones pin their DRAM)

    def _run(self, rt, x, out):
        from ...runtime.vm.objects import DeviceTensor
        L = self.layer
        if self.config is None or self.config != rt.config:
            self.config = rt.config
        rec = LayerRecord(L.kind, tuple(x.shape), "vta", "")
        try:
            spec = self._spec(tuple(x.shape))
        except (TilingError, EpilogueError, LayoutError, LoweringError) as e:
            rec.where, rec.why = "host", f"{type(e).__name__}: {e}"
            y = self._host(np.asarray(x))
            if self.records is not None:
                self.records.append(rec)
            if isinstance(out, DeviceTensor):
                out.write_packed(pack_activation(_as_nchw(y).astype(out.dtype), self.config))
                return out
            if out is not None:
                out[...] = y
            return y
        self.plan = plan = spec.plan
        rec.where, rec.why, rec.macs = spec.where, spec.why, spec.macs
        _fill_estimate(rec, plan, spec)
        y = self._launch(rt, spec, x, out, rec)
        if self.records is not None:
            self.records.append(rec)
        if y is None:                               # the kernel stored into ``out``
            return out
        if isinstance(out, DeviceTensor):
            out.write_packed(y.astype(out.dtype, copy=False))
            return out
        y = L.strategy.unpack(plan, y, tuple(x.shape))
        dtype = L.attrs.get("out_dtype")
        if dtype is not None and y.dtype != np.dtype(dtype):
            y = y.astype(dtype)
        if out is not None:
            out[...] = y
        return y

    def _launch(self, rt, spec, x, out, rec):
        """Bind the layer's operands (device tensors in place, host ones packed and staged,
        weights resident or staged), run the kernel and return its packed result after
        the host step; None when the kernel stored straight into the device tensor
        ``out``."""
        from ...runtime.vm.objects import DeviceTensor
        plan, ops = spec.plan, spec.plan.operands
        program = self.program if self.program is not None else plan.program()
        _check_program(plan, program)
        direct = (spec.post is None and ops["out"].shape[0] == 1
                  and isinstance(out, DeviceTensor) and out.nbytes == ops["out"].nbytes)
        scratch, bufs = [], {}

        def staged(name, array=None):
            buf = rt.alloc(ops[name].nbytes)
            scratch.append(buf)
            if array is not None:
                rt.upload(buf, array)
            return buf
        try:
            inputs = {"data": x if spec.pre is None else spec.pre(_as_nchw(x))}
            for attr, slot in self.layer.strategy.inputs.items():
                inputs[slot] = self._operand(self.layer.attrs[attr])
            for name, v in inputs.items():
                if isinstance(v, DeviceTensor) and v.nbytes == ops[name].nbytes:
                    bufs[name] = v.buffer           # left on the device by the last layer
                else:
                    bufs[name] = staged(name, pack_activation(_as_nchw(v).astype(np.int8),
                                                              self.config))
            for name, array in spec.consts.items():
                if self._resident is None:
                    bufs[name] = staged(name, array)
                    continue
                if name not in self._resident:
                    buf = rt.alloc(ops[name].nbytes)
                    rt.upload(buf, array)
                    self._resident[name] = (rt, buf)
                bufs[name] = self._resident[name][1]
            bufs["out"] = out.buffer if direct else staged("out")
            rt.bind(program, bufs)
            res = rt.synchronize()
            rec.cycles = int(res.cycles)
            rec.dram_bytes_run = int(sum(v for k, v in res.stats.items()
                                         if k.endswith("_nbytes")))
            if direct:
                return None
            planes = rt.download(bufs["out"], ops["out"].dtype, ops["out"].shape)
            t0 = time.perf_counter()
            y = planes[0] if spec.post is None else spec.post(planes)
            rec.host_seconds = time.perf_counter() - t0
            return y
        finally:
            for buf in scratch:
                rt.free(buf)

    # ------------------------------------------------------------- host fallback

    def _host(self, x):
        from ..ir import evaluate
        v = Var("x")
        body = _replace_input(self.layer, v)
        named = {"x": x}
        for key in ("weight", "bias", "other"):
            e = self.layer.attrs.get(key)
            if isinstance(e, Var):
                named[e.name_hint] = self._value(e)
        return np.asarray(evaluate(body, **named))


def _check_program(plan, program):
    """A stored Program must have the slots of the plan it was made for."""
    want = {name: op.nbytes for name, op in plan.operands.items()}
    if dict(program.slots) != want:
        raise LoweringError(f"stored kernel {program.name!r} has slots {dict(program.slots)}, "
                            f"the layer's plan needs {want}")


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
    """A packed function ``f(rt, x, env=None, out=None)`` running ``layer`` on ``rt``.

    ``x`` is a host array or a :class:`~vtakit.runtime.vm.objects.DeviceTensor`;
    ``env`` maps the layer's parameter Vars (weights, an add's second operand) to
    values; the result is a host array, or ``out`` when that is given (filled, a device
    tensor included). Plans are made for ``rt.config`` (``config`` is a hint kept for
    callers that plan ahead). ``records``, when given, receives one
    :class:`LayerRecord` per call.
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
                operands = {e: visit(e) for e in (layer.attrs[a]
                                                  for a in layer.strategy.inputs)} or None
                val = lower_layer(layer, rt.config, records)(rt, visit(layer.data), operands)
            else:
                val = e.op.compute(*[visit(a) for a in e.args], **e.attrs)
        else:
            raise LoweringError(f"run_graph: unsupported expression {type(e).__name__}")
        env[key] = val
        return val

    from ..ir.interpreter import deep_recursion
    with deep_recursion():
        return visit(func.body)


def function_roofline(func, config) -> Roofline | None:
    """The roofline of a VTA layer primitive (a typed :class:`~vtakit.compiler.ir.Function`
    whose body is a quantized layer, as :func:`.executable.vm_lowerer` claims); None when
    the body is no VTA layer or does not fit ``config``."""
    from .executable import split_layer
    layer, _ = split_layer(func.body)
    if layer is None or not func.params or layer.data is not func.params[0]:
        return None
    try:
        return plan_roofline(layer_spec(layer, func.params[0].checked_type.shape,
                                        weight_shape(layer), config).plan)
    except ValueError:          # TilingError, LoweringError, ...: the layer runs on the host
        return None
