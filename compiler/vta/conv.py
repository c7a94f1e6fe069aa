"""The requantized GEMM layers: ``conv2d`` (grouped and depthwise included) and ``dense``.

::

    cast(int8) <- clip <- qnn.requantize <- [nn.bias_add] <- nn.conv2d | nn.dense
                                                              <- [nn.pad] <- data

* requantize rounding ``"vta"`` (scale ``2^-k``): the whole layer on VTA, bias plus
  ``zero_point * 2^k`` and the rounding constant in the bias tile, ``SHR k``, clip,
  int8 store;
* TFLite's fixed-point roundings (``"tflite"``: gemmlowp's double rounding of conv
  and depthwise; ``"tflite_single"``: FULLY_CONNECTED's single rounding) on a config
  with the ALU extension ``"requant"`` (``EXTENSIONS``): the whole layer on VTA, the
  per-channel multipliers and shifts as int32 rows in the accumulator SRAM
  (:class:`~vtakit.compiler.ops.epilogue.Requant`: SRDHM and RSHR, or MULSHR), the
  zero point as an ADD immediate, clip, int8 store;
* the same roundings on a config with ``"requant2"``: the whole layer on VTA, the
  multipliers and parameter words (exponent, rounding, zero point, clip) as two int32
  rows, per output-channel block REQ.M, REQ.P and one REQ pass that adds the bias and
  requantizes (:class:`~vtakit.compiler.ops.epilogue.Requant2`), int8 store;
* any other rounding (TFLite's without the extension, ONNX's float rounding): VTA
  computes the conv and stores int32 (byte planes: the low bytes its weights allow
  the result, at most four); the bias add (one ALU pass per output vector less on
  VTA), the exact requantize, clip and cast run on the host in numpy. VTA's 32-bit ALU cannot
  reproduce TFLite's 64-bit ``x * m >> (31 - s)`` even with TVM's ALU MUL (it keeps
  the low 32 bits of the product), so the exact step stays on the host; the cost
  is measured by :func:`requantize_cost` (see the README). The host step
  (``vta.requantize`` of :mod:`vtakit.runtime.hostops.vta`) works on the packed int32
  result and yields the packed int8 one, so nothing is repacked.

Padding is folded into the plan (VTA's loads insert it). They insert zeros; a
convolution padded with another value (an input zero point: ``nn.conv2d``'s
``pad_value``, or an ``nn.pad`` in front) gets what the value contributes at the
border, ``pad_value * sum(w over the taps in the padding)`` per output pixel and
channel (:func:`border_correction`), added to its int32 result: by the host step
when the requantize runs there; with the exact requantize on VTA as one per-channel
row per border rectangle (:func:`~vtakit.compiler.ops.conv2d.border_cases`) added by
the ALU over that rectangle (``"requant"``), or holding bias + correction, the src of
the rectangle's own REQ pass (``"requant2"``: no ADD pass); else (the shift epilogue) as a constant int32 residual
loaded into the accumulators before the GEMMs.
"""

from __future__ import annotations

import time

import numpy as np

from ...runtime.hostops import fixed_point as fp
from ...runtime.layout import pack_activation
from ...runtime.vta_layer import HostStep
from ..ir import Constant, Var
from ..ops.conv2d import plan_conv2d
from ..ops.dense import plan_dense
from ..ops.epilogue import (REQUANT_EXTENSION, REQUANT2_EXTENSION, EpilogueError, Requant,
                             Requant2, accumulation_bound, result_bytes_for)
from .registry import Spec, Strategy, VTALayer, int8_store, is_op

__all__ = ["requantized", "match_conv", "conv_spec", "pack_gemm", "border_correction",
           "requantize_cost", "CONV2D", "DENSE"]


def requantized(inner, out_dtype):
    """``(requantize attrs, bias or None, the GEMM call)`` of the chain
    ``requantize <- [bias_add] <- call`` under a layer's clip, or None."""
    if out_dtype is None or not is_op(inner, "qnn.requantize"):
        return None
    e, bias = inner.args[0], None
    if is_op(e, "nn.bias_add"):
        if not isinstance(e.args[1], (Constant, Var)) or e.attrs["axis"] != 1:
            return None
        bias, e = e.args[1], e.args[0]
    return dict(inner.attrs), bias, e


def match_conv(inner, root, clip, out_dtype, *, kind="conv2d"):
    """The requantized convolution under the clip, or None. ``kind="conv2d"`` matches
    dilation 1, ``kind="conv2d_dilated"`` (:mod:`.dilated`) any other."""
    chain = requantized(inner, out_dtype)
    if chain is None or not is_op(chain[2], "nn.conv2d"):
        return None
    rq, bias, e = chain
    a = e.attrs
    if ((tuple(a["dilation"]) != (1, 1)) != (kind == "conv2d_dilated")
            or not isinstance(e.args[1], (Constant, Var))):
        return None
    data, pad, pad_value = e.args[0], tuple(a["padding"]), a["pad_value"]
    if is_op(data, "nn.pad"):
        pw = data.attrs["pad_width"]
        if any(tuple(p) != (0, 0) for p in pw[:2]) or any(pad):
            return None
        pad = (pw[2][0], pw[3][0], pw[2][1], pw[3][1])
        pad_value = data.attrs["pad_value"]
        data = data.args[0]
    return VTALayer(kind, root, data, {
        "weight": e.args[1], "bias": bias, "strides": a["strides"], "padding": pad,
        "pad_value": pad_value, "groups": a["groups"], "dilation": tuple(a["dilation"]),
        "requantize": rq, "clip": clip, "out_dtype": out_dtype})


def _match_dense(inner, root, clip, out_dtype):
    chain = requantized(inner, out_dtype)
    if chain is None or not is_op(chain[2], "nn.dense") \
            or not isinstance(chain[2].args[1], (Constant, Var)):
        return None
    rq, bias, e = chain
    return VTALayer("dense", root, e.args[0], {
        "weight": e.args[1], "bias": bias, "requantize": rq,
        "clip": clip, "out_dtype": out_dtype})


def _per_lane(v, packed_shape):
    """A per-channel vector shaped to broadcast over a packed (N/b, C/c, H, W, b, c) array
    (the padding lanes repeat channel 0); a scalar stays a scalar."""
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(())
    cb, c = packed_shape[1], packed_shape[5]
    full = np.concatenate([v.ravel(), np.repeat(v.ravel()[:1], cb * c - v.size)])
    return full.reshape(1, cb, 1, 1, 1, c)


def _uniform_depthwise(attrs, shape) -> bool:
    """Whether the layer is a depthwise convolution whose constant weight has one value
    everywhere (an average pool's window sum): every packed weight tile is then the
    same, so the kernel reads one shared tile instead of one per block and tap."""
    w = attrs["weight"]
    if not isinstance(w, Constant) or attrs["groups"] != shape[1] or w.data.shape[1] != 1 \
            or w.data.shape[0] != shape[1]:
        return False
    flat = np.asarray(w.data).ravel()
    return bool(flat.size) and bool((flat == flat[0]).all())


def _result_bytes(weight) -> int:
    """The byte planes an int32 result without bias needs: with int8 inputs every
    output lies within ``128 * sum(|w|)`` of its channel (4 when the weight is no
    constant)."""
    if not isinstance(weight, Constant):
        return 4
    return result_bytes_for(accumulation_bound(weight.data))


def _shift_bias(rq, bias) -> np.ndarray:
    """The bias of a ``"vta"`` requantize epilogue: ``bias + zero_point * 2^k`` (the
    output zero point joins the bias ahead of the shift ``k``); None: zeros."""
    k = fp.vta_shift(rq["scale"])
    return (np.int64(0) if bias is None else np.asarray(bias, np.int64)) + \
        np.asarray(rq["zero_point"], np.int64) * (1 << k)


def _vta_exact(rq):
    return rq["rounding"] == "vta" and fp.vta_shift(rq["scale"]) is not None


def _exact_requant(rq, channels, config, kind, clip=(-128, 127)):
    """``(Requant or Requant2, rows)`` when ``config``'s ALU extension (``"requant"`` or
    ``"requant2"``) runs this requantize exactly (``Requant2``: with the ``clip``); else
    None (no extension, another rounding) or a string saying why not."""
    ext = next((e for e in (REQUANT_EXTENSION, REQUANT2_EXTENSION) if e in config.extensions),
               None)
    if ext is None or rq["rounding"] not in ("tflite", "tflite_single"):
        return None
    single = rq["rounding"] == "tflite_single"
    scale = np.asarray(rq["scale"], np.float64).ravel()
    if scale.size not in (1, channels):
        return f"{scale.size} requantize scales for {channels} channels"
    m, s = fp.quantize_multiplier(np.broadcast_to(scale, (channels,)), single_rounding=single)
    try:
        if ext == REQUANT2_EXTENSION:
            return Requant2.make(m, s, rq["zero_point"], clip, single_rounding=single,
                                 op=kind)
        return Requant.make(m, s, rq["zero_point"], single_rounding=single, op=kind)
    except EpilogueError as e:
        return str(e)


def conv_spec(layer: VTALayer, shape, w_shape, config, **extra) -> Spec:
    """The spec of a conv2d or dense layer with weights of shape ``w_shape`` (a dilated
    convolution passes its dilated kernel's shape); ``extra``: more epilogue arguments
    of the plan (:mod:`.residual`'s fused add)."""
    a = layer.attrs
    dense = layer.kind == "dense"
    rq, (lo, hi), border = a["requantize"], a["clip"], None
    pad = tuple(a.get("padding", (0, 0, 0, 0)))
    if not dense and a["pad_value"] != 0 and any(pad):
        # VTA's load pads with zeros: what the pad value would add at the border is
        # added to the int32 result by the host step, or else by the ALU per border
        # rectangle (see border_correction).
        border = a["pad_value"]
    exact = _exact_requant(rq, w_shape[0], config, layer.kind, (lo, hi))
    rows = None
    if _vta_exact(rq) and int8_store(lo, hi, a["out_dtype"]):
        kw = dict(bias=True, shift=fp.vta_shift(rq["scale"]), clip=(lo, hi),
                  out_dtype=np.int8)
        b = a["bias"]
        if isinstance(a["weight"], Constant) and (b is None or isinstance(b, Constant)):
            # accumulators start from the bias where that is exact (Epilogue.init)
            bias = _shift_bias(rq, None if b is None else b.data)
            kw["min_init"] = (np.broadcast_to(bias, (w_shape[0],)), a["weight"].data)
        host_step, where, why = False, "vta", ("requantize is a power-of-two shift: "
                                               "epilogue on VTA")
    elif isinstance(exact, tuple) and isinstance(exact[0], Requant2) and int8_store(
            lo, hi, a["out_dtype"]):
        requant, rows = exact
        kw = dict(bias=True, requant=requant, out_dtype=np.int8)
        host_step, where, why = False, "vta", (
            f"requantize rounding {rq['rounding']!r} exact on the ALU extension "
            f"{REQUANT2_EXTENSION!r} (per output-channel block REQ.M, REQ.P of per-channel "
            "rows, then one REQ pass: bias, requantize, zero point, clip): epilogue on VTA")
    elif isinstance(exact, tuple) and int8_store(lo, hi, a["out_dtype"]):
        (requant, rows), ops = exact, " then ".join(o.name for o, _ in exact[0].passes())
        kw = dict(bias=True, requant=requant, clip=(lo, hi), out_dtype=np.int8)
        host_step, where, why = False, "vta", (
            f"requantize rounding {rq['rounding']!r} exact on the ALU extension "
            f"{REQUANT_EXTENSION!r} ({ops} by per-channel rows): epilogue on VTA")
    else:
        # the bias joins the host step's int32 addend (one ALU pass less per output
        # vector); only the byte planes the results can need are stored
        kw = dict(bias=False, out_dtype=np.int32, result_bytes=_result_bytes(a["weight"]))
        host_step = True
        where, why = "vta+host", (f"requantize rounding {rq['rounding']!r} is not a VTA "
                                  "shift: int32 result, exact requantize on the host")
        if isinstance(exact, str):
            why += f" ({exact})"
    rows_border = bool(border) and not host_step
    kw.update(extra)
    plan = (plan_dense(config, shape, w_shape, **kw) if dense else
            plan_conv2d(config, shape, w_shape, tuple(a["strides"]), pad,
                        groups=a["groups"], border=rows_border,
                        pad_value=border if rows_border else None,
                        shared_weight=_uniform_depthwise(a, shape), **kw))
    out = plan.operands["out"].shape
    macs = shape[0] * w_shape[0] * out[3] * out[4] * int(np.prod(w_shape[1:]))
    if border:
        why += (f"; pad value {border}: border correction "
                + ("added by the host step" if not rows_border else
                   "added straight to the border accumulators by GEMMs of the pad value "
                   "with the padding's weight taps" if plan.direct_border else
                   f"in {len(plan.border_cases)} bias + correction rows, each the src of "
                   "its rectangle's REQ pass" + (" (computed on VTA: GEMMs of the pad value "
                   "with the padding's weight taps)" if plan.onchip_border else "")
                   if plan.folded_border else
                   f"ALU ADD of {len(plan.border_cases)} per-channel rows on VTA"))
    spec = Spec(plan, None, border, where, why, macs, requant_rows=rows)
    if host_step:
        # the exact requantize, clip and cast of the packed int32 result, after adding the
        # bias and the border correction (joins its constants when packing)
        lanes = out[1:]
        spec.post = HostStep("vta.requantize", {
            "rounding": rq["rounding"], "a_min": lo, "a_max": hi,
            "out_dtype": np.dtype(a["out_dtype"]).name},
            [_per_lane(rq["scale"], lanes), _per_lane(rq["zero_point"], lanes)])
    return spec


def border_correction(plan, w, pad_value) -> np.ndarray:
    """The int32 (N, O, OH, OW) that padding with ``pad_value`` adds to a convolution
    over zero padding: ``pad_value`` times the weights over the taps in the padding.
    The padding is the same for every input channel, so a tap's weight summed over its
    channels is all that counts: all taps' sum minus those of the taps inside the input
    (separable in rows and columns), without convolving anything."""
    n, _, h, wd = plan.x_shape
    t, l, b, r = plan.padding
    sh, sw = plan.stride
    _, _, kh, kw = w.shape
    oh, ow = (h + t + b - kh) // sh + 1, (wd + l + r - kw) // sw + 1
    wsum = w.astype(np.int64).sum(axis=1)                       # (O, KH, KW)
    rows = np.arange(oh)[:, None] * sh + np.arange(kh) - t      # input row of each tap
    cols = np.arange(ow)[:, None] * sw + np.arange(kw) - l
    in_rows = ((rows >= 0) & (rows < h)).astype(np.int64)       # (OH, KH)
    in_cols = ((cols >= 0) & (cols < wd)).astype(np.int64)      # (OW, KW)
    inside = np.einsum("pi,oiq->opq", in_rows, wsum @ in_cols.T)
    taps = wsum.sum(axis=(1, 2))[:, None, None] - inside
    return np.broadcast_to(fp.wrap_int32(taps * int(pad_value)),
                           (n,) + taps.shape).astype(np.int32)


def pack_gemm(layer: VTALayer, spec: Spec, w, bias, **extra) -> dict:
    """The packed constants of a conv2d/dense plan from its int8 weights ``w`` (as the
    plan reads them) and int32 ``bias`` (None: zeros); ``extra``: more arguments of the
    plan's ``pack``."""
    plan, rq = spec.plan, layer.attrs["requantize"]
    bias = np.zeros(w.shape[0], np.int64) if bias is None else bias.astype(np.int64)
    if spec.post is None and spec.requant_rows is None:
        bias = _shift_bias(rq, bias)
    args, kwargs = (w,), dict(extra)
    if spec.post is None:
        args += (fp.wrap_int32(bias),)
    else:
        # the host step adds bias and border correction to the int32 result: per lane of
        # the packed layout, or per element with a border correction
        corr = _per_lane(fp.wrap_int32(bias), plan.operands["out"].shape[1:])
        if spec.border:
            corr = pack_activation(fp.wrap_int32(border_correction(plan, w, spec.border)
                                                 + bias[None, :, None, None]), plan.config)
        spec.correction = corr
        spec.post.constants[2:] = [corr]
    if spec.requant_rows is not None:
        kwargs["requant"] = spec.requant_rows
    if spec.border and spec.post is None:
        kwargs["border"] = border_correction(plan, w, spec.border)
    dummy = np.zeros(getattr(plan, "dense_shapes", (plan.x_shape,))[0], np.int8)
    packed = plan.pack(dummy, *args, **kwargs)
    del packed["data"]
    return packed


def _pack(layer, spec, value):
    a = layer.attrs
    bias = None if a["bias"] is None else value(a["bias"])
    return pack_gemm(layer, spec, value(a["weight"]), bias)


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


#: conv2d (the target lists :data:`.fold.CONV2D`, this one with thin inputs folded)
CONV2D = Strategy("conv2d", match_conv, conv_spec, _pack, priority=10)
DENSE = Strategy("dense", _match_dense, conv_spec, _pack, priority=20)
