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

import numpy as np

from ...runtime.launch import LayerLaunch
from ...runtime.layout import nchw_shape, pack_activation
from ...runtime.vm.objects import DeviceTensor
from ..ir import Call, Constant, Function, IRModule, Op, Tuple, TupleGetItem, Var
from ..ops.epilogue import EpilogueError
from ..ops.layout import LayoutError
from ..ops.tiling import TilingError
from .conv import requantize_cost
from .layers import (LayerRecord, fill_estimate, function_roofline, layer_spec, match_layer,
                     weight_shape)
from .registry import LoweringError, VTALayer

__all__ = ["VTALayer", "LayerRecord", "match_layer", "lower_layer", "lower_primitive",
           "run_graph", "requantize_cost", "function_roofline", "layer_spec", "weight_shape",
           "LoweringError"]


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
        self._resident = False
        #: the runtime's launch of the spec's kernel (see :mod:`vtakit.runtime.launch`)
        self._launch = None

    def keep_resident(self) -> None:
        """Keep the packed weights on the device between calls (while the same weight
        arrays come in) until :meth:`release`."""
        self._resident = True

    def release(self) -> None:
        """Free the resident weights."""
        if self._launch is not None:
            self._launch.release()

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
        (one kept: the VM passes the same constant arrays every call), and its launch."""
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
            self._launch = None
        return self._cached

    def _launcher(self, spec) -> LayerLaunch:
        if self._launch is None:
            plan = spec.plan
            program = self.program if self.program is not None else plan.program()
            _check_program(plan, program)
            out = plan.operands["out"]
            self._launch = LayerLaunch(program, self.config, out.shape, out.dtype,
                                       pre=spec.pre, post=spec.post, resident=self._resident)
        return self._launch

    def __call__(self, rt, x, env=None, out=None):
        """Run the layer on ``x``; ``env`` maps the Vars of weight/bias to arrays."""
        self.env = env or {}
        try:
            return self._run(rt, x, out)
        finally:
            self.env = {}       # holds the call's tensors (device ones pin their DRAM)

    def _run(self, rt, x, out):
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
            return LayerLaunch.deliver(y, out, lambda y: y)
        self.plan = plan = spec.plan
        rec.where, rec.why, rec.macs = spec.where, spec.why, spec.macs
        fill_estimate(rec, plan, spec)
        launch = self._launcher(spec)
        activations = {"data": x}
        for attr, slot in L.strategy.inputs.items():
            activations[slot] = self._operand(L.attrs[attr])
        res = launch.run(rt, activations, spec.consts, out)
        rec.cycles, rec.dram_bytes_run = res.cycles, res.dram_bytes
        y = res.y
        if y is not None:
            t0 = time.perf_counter()
            y = launch.requantize(y)
            rec.host_seconds = time.perf_counter() - t0
        if self.records is not None:
            self.records.append(rec)
        return LayerLaunch.deliver(y, out, lambda y: self._unpack(plan, y, tuple(x.shape)))

    def _unpack(self, plan, y, x_shape):
        y = self.layer.strategy.unpack(plan, y, x_shape)
        dtype = self.layer.attrs.get("out_dtype")
        return y if dtype is None or y.dtype == np.dtype(dtype) else y.astype(dtype)

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
