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
  is measured by :func:`requantize_cost` (see the README). The host step works on
  the packed int32 result and yields the packed int8 one, so nothing is repacked.

Padding is folded into the plan (VTA's loads insert it). They insert zeros; a
convolution padded with another value (an input zero point: ``nn.conv2d``'s
``pad_value``, or an ``nn.pad`` in front) gets what the value contributes at the
border, ``pad_value * sum(w over the taps in the padding)`` per output pixel and
channel (:func:`_border_correction`), added to its int32 result: by the host step
when the requantize runs there, else as a constant int32 residual loaded into the
accumulators before the GEMMs.

In an executable (:func:`vm_lowerer`) a layer's input may be a
:class:`~vtakit.runtime.vm.objects.DeviceTensor` that the previous layer left in
device DRAM, read in place, and its output may go to one; the packed weights are
uploaded once per VM and stay resident.

:func:`run_graph` executes a whole module: layers on VTA, every other call with
the op's numpy compute (softmax, quantize, reshape, TFLite ADD, ...), recording
where each layer ran and why (:class:`LayerRecord`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import numpy as np

from ...hw.errors import VtakitError
from ...runtime.dram import whole_pages
from ...runtime.layout import nchw_shape, pack_activation
from ..ops.conv2d import assemble_planes, plan_conv2d
from ..ops.dense import plan_dense
from ..ops.elementwise import plan_add_gemm
from ..ops.epilogue import EpilogueError
from ..ir import Call, Constant, Function, IRModule, Op, Tuple, TupleGetItem, Var, post_order
from ..ops.layout import LayoutError
from ..ops.pool import plan_pool2d
from ..quant import fixed_point as fp
from ..quant.ops import add_shifts
from ..quant.pool import divide_round, pool_counts
from ..ops.reference import group_conv2d_ref
from ..ops.roofline import Roofline, plan_roofline
from ..ops.tiling import TilingError

__all__ = ["VTALayer", "LayerRecord", "match_layer", "split_layer", "lower_layer",
           "lower_primitive", "vm_lowerer", "VM_KIND",
           "run_graph", "requantize_cost", "function_roofline", "LoweringError"]


class LoweringError(VtakitError, ValueError):
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
    if (_is(e, "qnn.add") and e.attrs["rounding"] == "vta"
            and isinstance(e.args[1], (Var, Constant))):
        return VTALayer("add", expr, e.args[0], {
            "other": e.args[1], "add": dict(e.attrs), "clip": clip, "out_dtype": out_dtype})
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
        data, pad, pad_value = e.args[0], tuple(a["padding"]), a["pad_value"]
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
    roofline: object = None          # the plan's Roofline (vtakit.compiler.ops.roofline)


def _requant(acc, rq):
    from ..quant.ops import requantize
    return requantize(acc, scale=rq["scale"], zero_point=rq["zero_point"], axis=rq["axis"],
                      rounding=rq["rounding"])


def _per_lane(v, packed_shape):
    """A per-channel vector shaped to broadcast over a packed (N/b, C/c, H, W, b, c) array
    (the padding lanes repeat channel 0); a scalar stays a scalar."""
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(())
    cb, c = packed_shape[1], packed_shape[5]
    full = np.concatenate([v.ravel(), np.repeat(v.ravel()[:1], cb * c - v.size)])
    return full.reshape(1, cb, 1, 1, 1, c)


def _requantize_packed(planes, rq, clip, out_dtype, correction=None):
    """The exact requantize, clip and cast of a packed int32 result (four byte planes),
    after adding ``correction`` (packed int32, the border of a non-zero padding)."""
    acc = assemble_planes(planes)
    if correction is not None:
        acc = fp.wrap_int32(acc.astype(np.int64) + correction)
    rq = dict(rq, scale=_per_lane(rq["scale"], acc.shape),
              zero_point=_per_lane(rq["zero_point"], acc.shape), axis=None)
    return np.clip(_requant(acc, rq).astype(np.int64), clip[0], clip[1]).astype(out_dtype)


def _int8_store(lo, hi, out_dtype) -> bool:
    """Whether a result clipped to [lo, hi] and cast to ``out_dtype`` is what VTA's int8
    store writes (otherwise the int32 result goes to the host)."""
    return np.dtype(out_dtype) == np.int8 and -128 <= lo <= hi <= 127


def _vta_exact(rq):
    return rq["rounding"] == "vta" and fp.vta_shift(rq["scale"]) is not None


def _describe_tiling(plan):
    t = getattr(plan, "tiling", None)
    return "" if t is None else repr(t)


@dataclass
class _Spec:
    """How a layer runs for one input shape: the plan, what the host does after it (on
    the packed result), and where/why for reports."""

    plan: object
    post: object          # None, or f(packed out planes) -> packed result
    border: float | None  # a non-zero pad value, whose border contribution is corrected
    where: str
    why: str
    macs: int = 0
    consts: dict = field(default_factory=dict)   # packed weight operands (filled on use)
    params: tuple = ()    # the weight arrays they were packed from (kept: ids key the cache)
    #: the border correction, packed int32, when the host adds it (filled on use)
    correction: np.ndarray | None = None
    #: (tiling, predicted cycles, DRAM bytes, roofline) of the plan, for the records
    #: (filled on use)
    estimate: tuple | None = None


def _layer_spec(layer: VTALayer, shape, w_shape, config) -> _Spec:
    """Plan ``layer`` for input ``shape`` (raises TilingError, LoweringError, ...);
    ``w_shape`` is the weight's shape (an add's: its second operand's)."""
    a = layer.attrs
    shape = tuple(int(s) for s in shape)
    if layer.kind == "add":
        if not _int8_store(*a["clip"], a["out_dtype"]):
            raise LoweringError(f"an add clipped to {a['clip']} and cast to {a['out_dtype']} "
                                "is no int8 store")
        if tuple(w_shape) != shape or len(shape) not in (2, 4):
            raise LoweringError(f"an add of shapes {list(shape)} and {list(w_shape)} "
                                "(broadcasting) runs on the host")
        q = a["add"]
        ea, eb, k = add_shifts(q["lhs_scale"], q["rhs_scale"], q["out_scale"])
        if max(ea, eb) > 6:
            raise LoweringError(f"an operand scale 2^{max(ea, eb)} times the other's does not "
                                "fit an int8 weight")
        plan = plan_add_gemm(config, shape, bias=True, shift=k, clip=a["clip"])
        return _Spec(plan, None, None, "vta", "requantized add with power-of-two scales: "
                     "a shifted sum on the GEMM core")
    if layer.kind in ("conv2d", "dense"):
        rq, (lo, hi), border = a["requantize"], a["clip"], None
        pad = tuple(a.get("padding", (0, 0, 0, 0)))
        if layer.kind == "conv2d" and a["pad_value"] != 0 and any(pad):
            # VTA's load pads with zeros: what the pad value would add at the border is
            # added to the int32 result by the host step, or else loaded into the
            # accumulators as a constant int32 residual (see _border_correction).
            border = a["pad_value"]
        if _vta_exact(rq) and _int8_store(lo, hi, a["out_dtype"]):
            kw = dict(bias=True, shift=fp.vta_shift(rq["scale"]), clip=(lo, hi),
                      out_dtype=np.int8)
            host_step, where, why = False, "vta", ("requantize is a power-of-two shift: "
                                                   "epilogue on VTA")
        else:
            kw = dict(bias=True, out_dtype=np.int32)
            host_step = True
            where, why = "vta+host", (f"requantize rounding {rq['rounding']!r} is not a VTA "
                                      "shift: int32 result, exact requantize on the host")
        residual = "int32" if border and not host_step else False
        plan = (plan_dense(config, shape, w_shape, **kw) if layer.kind == "dense" else
                plan_conv2d(config, shape, w_shape, tuple(a["strides"]), pad,
                            groups=a["groups"], residual=residual, **kw))
        out = plan.operands["out"].shape
        macs = shape[0] * w_shape[0] * out[3] * out[4] * int(np.prod(w_shape[1:]))
        if border:
            why += (f"; pad value {border}: border correction "
                    + ("residual on VTA" if residual else "added by the host step"))
        spec = _Spec(plan, None, border, where, why, macs)
        if host_step:
            out_dtype = a["out_dtype"]
            spec.post = lambda planes: _requantize_packed(  # noqa: E731
                planes, rq, (lo, hi), out_dtype, spec.correction)
        return spec
    if layer.kind == "avg_pool2d":
        kh, kw_ = a["pool_size"]
        # Window sums on the GEMM core (all-ones depthwise kernel, zero padding), int32
        # out; the framework's rounding division on the host, by the window's count of
        # input positions (TFLite does not count the padding).
        plan = plan_conv2d(config, shape, (shape[1], 1, kh, kw_), tuple(a["strides"]),
                           tuple(a["padding"]), groups=shape[1], out_dtype=np.int32)
        mode = "tflite" if a["rounding"] != "vta" else "vta"
        counts = pool_counts(shape[2:], a["pool_size"], a["strides"], a["padding"], mode)
        counts = counts.reshape(1, 1, *counts.shape, 1, 1)      # over the packed layout
        (lo, hi), out_dtype = a["clip"], a["out_dtype"]
        post = lambda planes: np.clip(divide_round(assemble_planes(planes), counts, mode),  # noqa: E731
                                      lo, hi).astype(out_dtype)
        return _Spec(plan, post, None, "vta+host",
                     "window sums on VTA, rounding division on the host")
    plan = plan_pool2d(config, shape, "max", tuple(a["pool_size"]), tuple(a["strides"]),
                       tuple(a["padding"]))
    (lo, hi), out_dtype = a["clip"], a["out_dtype"] or np.int8
    post = None
    if lo > -128 or hi < 127 or np.dtype(out_dtype) != np.int8:
        post = lambda planes: np.clip(planes[0], lo, hi).astype(out_dtype)  # noqa: E731
    return _Spec(plan, post, None, "vta", "max on the ALU")


def _border_correction(plan, w, pad_value) -> np.ndarray:
    """The int32 (N, O, OH, OW) that padding with ``pad_value`` adds to a convolution
    over zero padding: ``pad_value`` times the weights over the taps in the padding."""
    n, c, h, wd = plan.x_shape
    t, l, b, r = plan.padding
    outside = np.ones((1, c, h + t + b, wd + l + r), np.int8)
    outside[:, :, t:t + h, l:l + wd] = 0
    taps = group_conv2d_ref(outside, w, plan.stride, 0, plan.groups).astype(np.int64)
    return np.broadcast_to(fp.wrap_int32(taps * int(pad_value)),
                           (n,) + taps.shape[1:]).astype(np.int32)


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
            w_shape = (params[0].shape if params else
                       self._operand(a["other"]).shape if "other" in a else None)
            spec = _layer_spec(self.layer, x_shape, w_shape, self.config)
            spec.consts = self._pack_constants(spec)
            spec.params = params
            self._cached, self._spec_key = spec, key
        return self._cached

    def _pack_constants(self, spec):
        """The plan's operands other than data and out, packed."""
        a, plan = self.layer.attrs, spec.plan
        if self.layer.kind in ("conv2d", "dense"):
            w = self._value(a["weight"])
            rq = a["requantize"]
            bias = (np.zeros(w.shape[0], np.int64) if a["bias"] is None
                    else self._value(a["bias"]).astype(np.int64))
            if spec.post is None:       # the rounding shift's zero point joins the bias
                k = fp.vta_shift(rq["scale"])
                bias = bias + np.asarray(rq["zero_point"], np.int64) * (1 << k)
            args = (w, fp.wrap_int32(bias))
            if spec.border:
                corr = _border_correction(plan, w, spec.border)
                if spec.post is None:
                    args += (corr,)
                else:
                    spec.correction = pack_activation(corr, self.config)
        elif self.layer.kind == "add":
            q = a["add"]
            ea, eb, k = add_shifts(q["lhs_scale"], q["rhs_scale"], q["out_scale"])
            offset = (-int(q["lhs_zero_point"]) << ea) - (int(q["rhs_zero_point"]) << eb) \
                + (int(q["out_zero_point"]) << k)
            c = plan.x_shape[1]
            packed = plan.pack(np.zeros(plan.x_shape, np.int8),
                               np.full((c, 1, 1, 1), 1 << ea, np.int8),
                               fp.wrap_int32(np.full(c, offset, np.int64)),
                               np.zeros(plan.x_shape, np.int8))
            packed["identity"] = packed["identity"] << eb
            del packed["data"], packed["residual"]
            return packed
        elif self.layer.kind == "avg_pool2d":
            kh, kw = a["pool_size"]
            args = (np.ones((plan.x_shape[1], 1, kh, kw), np.int8),)
        else:
            args = ()
        dummy = np.zeros(getattr(plan, "dense_shapes", (plan.x_shape,))[0], np.int8)
        packed = plan.pack(dummy, *args)
        del packed["data"]
        return packed

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
        y = plan.unpack(y[None])
        if L.kind == "add":                         # (N, C) adds run as (N, C, 1, 1)
            y = y.reshape(tuple(x.shape))
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
            inputs = {"data": x}
            if "other" in self.layer.attrs:         # an add's second operand
                inputs["residual"] = self._operand(self.layer.attrs["other"])
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
                other = layer.attrs.get("other")
                operands = None if other is None else {other: visit(other)}
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


def function_roofline(func, config) -> Roofline | None:
    """The roofline of a VTA layer primitive (a typed :class:`~vtakit.compiler.ir.Function`
    whose body is a quantized layer, as :func:`vm_lowerer` claims); None when
    the body is no VTA layer or does not fit ``config``."""
    layer, _ = split_layer(func.body)
    if layer is None or not func.params or layer.data is not func.params[0]:
        return None
    shape = tuple(func.params[0].checked_type.shape)
    w = layer.attrs.get("weight", layer.attrs.get("other"))
    w_shape = None if w is None else tuple(
        w.checked_type.shape if isinstance(w, Var) else w.data.shape)
    try:
        return plan_roofline(_layer_spec(layer, shape, w_shape, config).plan)
    except ValueError:          # TilingError, LoweringError, ...: the layer runs on the host
        return None


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
    from ..codegen import LoweredPrimitive
    from ..ir import astext
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
        w = layer.attrs.get("weight", layer.attrs.get("other"))
        w_shape = None if w is None else tuple(
            w.checked_type.shape if isinstance(w, Var) else w.data.shape)
        try:
            spec = _layer_spec(layer, shape, w_shape, config)
        except (TilingError, EpilogueError, LayoutError, LoweringError, ValueError) as e:
            rec.where, rec.why = "host", f"{type(e).__name__}: {e}"
            if report is not None:
                report.append(rec)
            return None
        plan = spec.plan
        rec.where, rec.why, rec.macs = spec.where, spec.why, spec.macs
        _fill_estimate(rec, plan)
        if report is not None:
            report.append(rec)
        blob = plan.program().to_bytes()
        kernel = f"vta_{layer.kind}_{hashlib.sha1(blob).hexdigest()[:12]}"
        int8 = lambda e: getattr(e.checked_type, "dtype", None) == "int8"  # noqa: E731
        # the run's tensors are staged per call (when not on the device), the rest resident
        staged = {"data", "out"} | ({"residual"} if layer.kind == "add" else set())
        dram = {n: whole_pages(op.nbytes) for n, op in plan.operands.items()}
        meta = {"ir": astext(func), "kernel": kernel,
                "dram_weights": sum(v for n, v in dram.items() if n not in staged),
                "dram_scratch": sum(v for n, v in dram.items() if n in staged)}
        return LoweredPrimitive(
            VM_KIND, meta, kernels=[(kernel, blob)], name=f"vta_{layer.kind}",
            device_output=not tail and int8(func.body),
            device_inputs=tuple(int8(p) and (p is layer.data or p is layer.attrs.get("other"))
                                for p in func.params))
    return lower


def _vta_layer_factory(entry, ctx):
    from ..ir import parse_expr
    func = parse_expr(entry.meta_dict["ir"])
    layer, tail = split_layer(func.body)
    if layer is None:
        raise LoweringError(f"primitive {entry.name}: its IR is not a quantized layer")
    lowered = lower_layer(layer)
    meta = entry.meta_dict
    if "kernel" in meta:
        lowered.program = ctx.program(meta["kernel"])
    lowered.keep_resident()
    ctx.on_close(lowered.release)
    n_in = len(func.params)

    def run(*args):
        ins, out = args[:n_in], args[n_in]
        env = dict(zip(func.params, ins))
        if tail:
            out[...] = _apply_tail(lowered(ctx.runtime, ins[0], env), tail)
        else:
            lowered(ctx.runtime, ins[0], env, out=out)
    return run


def _register_factory():
    from ...runtime.registry import get_global_func, register_func
    name = "vtakit.vm.primitive." + VM_KIND
    if get_global_func(name, allow_missing=True) is None:
        register_func(name, _vta_layer_factory)


_register_factory()
