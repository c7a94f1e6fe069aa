"""Thin-input convolutions (a network's stem) with kernel taps folded into the channels.

VTA reduces over blocks of ``BLOCK_IN`` input channels: a convolution of 3 channels
(ResNet-18's 7x7 stride-2 stem) fills 3/16 of every GEMM micro-op. Re-laid out on the
host, each spatial axis of such a layer can move part of itself into the channels
(:func:`~vtakit.runtime.hostops.vta.fold_axis`): its kernel taps (im2col: the axis
becomes the output's, kernel 1, stride 1) or its stride phases (space-to-depth:
kernel ``ceil(K / stride)``, stride 1). ResNet-18's stem with both axes' taps folded
is a 1x1 convolution of 147 channels (10 blocks instead of 49 taps of one).

The re-layout is the layer's *pre* step (:attr:`.registry.Spec.pre`, the host op
``vta.fold_input``), applied to the NCHW input before it is packed: a stem's input
comes from the host's quantize anyway. It inserts the padding with the layer's pad
value (the input zero point), so the folded convolution is unpadded and needs no
border correction. The weights are re-laid out to match when packing.

The strategy replaces :mod:`.conv`'s ``conv2d`` (same kind, same place in the match
order): a convolution with ``groups == 1``, more than one tap and input channels
that fill less than half a block is planned unfolded and with every fold of its rows
and columns, and runs the one of fewest predicted cycles (unfolded when no fold is
cheaper); any other convolution is :func:`.conv.conv_spec`'s.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from ...runtime.hostops.vta import fold_axis, fold_taps
from ...runtime.vta_layer import HostStep
from ..ops.epilogue import EpilogueError
from ..ops.layout import LayoutError
from ..ops.tiling import TilingError
from .conv import conv_spec, pack_gemm
from . import conv as _conv
from .registry import LoweringError, Spec, VTALayer

__all__ = ["fold_modes", "fold_weights", "folded_shapes", "fold_spec", "CONV2D"]


def fold_modes(w_shape, strides):
    """The ``(row mode, column mode)`` folds worth planning for a kernel of ``w_shape``
    (O, C, KH, KW): taps when the axis has more than one, phases when its stride does;
    not ``("none", "none")``."""
    def axis(k, s):
        return ["none"] + (["taps"] if k > 1 else []) + (["phase"] if k > 1 and s > 1 else [])
    return [m for m in itertools.product(axis(w_shape[2], strides[0]),
                                         axis(w_shape[3], strides[1]))
            if m != ("none", "none")]


def folded_shapes(shape, w_shape, strides, padding, modes):
    """``(input shape, weight shape, strides)`` of the convolution of an input of
    ``shape`` and weights of ``w_shape`` folded by ``modes``."""
    t, l, b, r = padding
    sh = fold_axis(modes[0], shape[2], w_shape[2], strides[0], t, b)
    sw = fold_axis(modes[1], shape[3], w_shape[3], strides[1], l, r)
    (th, strh), (tw, strw) = (fold_taps(m, k, s) for m, k, s in zip(modes, w_shape[2:],
                                                                     strides))
    f = sh.shape[0] * sw.shape[0]
    return ((shape[0], shape[1] * f, sh.shape[1], sw.shape[1]),
            (w_shape[0], w_shape[1] * f, th.shape[1], tw.shape[1]), (strh, strw))


def fold_weights(w, strides, modes) -> np.ndarray:
    """OIHW weights re-laid out for the input :func:`fold_input
    <vtakit.runtime.hostops.vta.fold_input>` gives (channel ``c * FH * FW + a * FW + b``;
    zeros at the taps past the kernel)."""
    w = np.asarray(w)
    (th, _), (tw, _) = (fold_taps(m, k, s) for m, k, s in zip(modes, w.shape[2:], strides))
    o, c = w.shape[:2]
    wz = np.pad(w, ((0, 0), (0, 0), (0, 1), (0, 1)))        # index -1: the zero tap
    g = wz[:, :, th][..., tw]                               # (O, C, FH, KH', FW, KW')
    fh, kh, fw, kw = g.shape[2:]
    return np.ascontiguousarray(g.transpose(0, 1, 2, 4, 3, 5)).reshape(o, c * fh * fw, kh, kw)


def fold_spec(layer: VTALayer, shape, w_shape, config, modes) -> Spec:
    """The spec of ``layer`` folded by ``modes``: :func:`.conv.conv_spec` of the folded,
    unpadded convolution with the ``vta.fold_input`` pre step."""
    a = layer.attrs
    strides, pad = tuple(a["strides"]), tuple(a.get("padding", (0, 0, 0, 0)))
    fx, fw, fs = folded_shapes(shape, w_shape, strides, pad, modes)
    folded = dataclasses.replace(layer, attrs={**a, "strides": fs, "padding": (0, 0, 0, 0),
                                               "pad_value": 0})
    spec = conv_spec(folded, fx, fw, config)
    spec.pre = HostStep("vta.fold_input", {
        "modes": tuple(modes), "kernel": tuple(int(k) for k in w_shape[2:]),
        "strides": tuple(int(s) for s in strides), "padding": tuple(int(p) for p in pad),
        "pad_value": int(a["pad_value"])})
    spec.macs = spec.macs * w_shape[2] * w_shape[3] * w_shape[1] // (fw[1] * fw[2] * fw[3])
    return spec


def _thin(layer, w_shape, config) -> bool:
    """Whether folding may pay: one group, several taps, input channels that fill less
    than half a block (a stem's 1 to 3 channels: its input comes from the host anyway;
    a wider layer mid-network would give up reading its input in place from device
    DRAM), and a pad value the int8 input can hold."""
    a = layer.attrs
    pv = a["pad_value"]
    return (a["groups"] == 1 and w_shape[2] * w_shape[3] > 1
            and 2 * w_shape[1] < config.block_in
            and float(pv).is_integer() and -128 <= pv <= 127)


def _cycles(spec):
    """A spec's predicted cycles: the event model's for a plan whose tilings it re-ranks
    (an int32 result or a REQ epilogue), else the tile search's estimate."""
    plan = spec.plan
    if getattr(plan, "problem", None) is not None and (plan.problem.int32_out
                                                      or plan.problem.req_pass):
        return float(plan.inspect()["predicted_cycles"])
    return float(plan.estimate.cycles)


def _gemm_uops(shape, w_shape, strides, config) -> int:
    """The GEMM micro-ops of an unpadded convolution: a lower bound of its cycles."""
    def blocks(n, b):
        return -(-n // b)
    o, c, kh, kw = w_shape
    oh, ow = ((shape[2] - kh) // strides[0] + 1, (shape[3] - kw) // strides[1] + 1)
    return (blocks(shape[0], config.batch) * blocks(o, config.block_out) * oh * ow
            * blocks(c, config.block_in) * kh * kw)


def _spec(layer, shape, w_shape, config):
    """The unfolded spec, or the folded one of fewest predicted cycles when that is
    fewer (folds whose GEMM micro-ops alone exceed the best so far are not planned)."""
    if not _thin(layer, w_shape, config):
        return conv_spec(layer, shape, w_shape, config)
    strides, pad = tuple(layer.attrs["strides"]), tuple(layer.attrs["padding"])
    best, errors, plain = None, [], "unfolded does not fit"
    try:
        best = conv_spec(layer, shape, w_shape, config)
        plain = f"{_cycles(best):,.0f} unfolded"
    except (TilingError, EpilogueError, LayoutError, LoweringError) as e:
        errors.append(e)
    folds = []
    for modes in fold_modes(w_shape, strides):
        fx, fw, fs = folded_shapes(shape, w_shape, strides, pad, modes)
        folds.append((_gemm_uops(fx, fw, fs, config), modes))
    for bound, modes in sorted(folds):
        if best is not None and bound >= _cycles(best):
            break
        try:
            spec = fold_spec(layer, shape, w_shape, config, modes)
        except (TilingError, EpilogueError, LayoutError, LoweringError) as e:
            errors.append(e)
            continue
        if best is None or _cycles(spec) < _cycles(best):
            best = spec
    if best is None:
        raise errors[0]
    if best.pre is not None:
        modes = best.pre.attrs["modes"]
        fx = folded_shapes(shape, w_shape, strides, pad, modes)[0]
        c = f"{w_shape[1]} input channel" + ("s" if w_shape[1] != 1 else "")
        best.why = (f"{c}: folded on the host (rows {modes[0]}, "
                    f"columns {modes[1]}: {fx[1]} channels, {_cycles(best):,.0f} predicted "
                    f"cycles, {plain}); " + best.why)
    return best


def _pack(layer, spec, value):
    a = layer.attrs
    w = np.asarray(value(a["weight"]))
    if spec.pre is not None:
        p = spec.pre.attrs
        w = fold_weights(w, p["strides"], p["modes"])
    return pack_gemm(layer, spec, w, None if a["bias"] is None else value(a["bias"]))


#: conv2d with its thin inputs folded: :data:`.conv.CONV2D` planned and packed here
CONV2D = dataclasses.replace(_conv.CONV2D, plan=_spec, pack=_pack)
