"""The one builder of the quantized layer form: :func:`quantized_layer`.

    nn.conv2d / nn.dense (int8 x int8 -> int32) -> nn.bias_add(int32 bias - zx * sum(w))
      -> qnn.requantize(scale, zero_point, rounding) -> clip(lo, hi) -> cast(out_dtype)

The ONNX frontend (QDQ groups, QLinearConv, QLinearMatMul), the TFLite frontend (CONV_2D,
DEPTHWISE_CONV_2D, FULLY_CONNECTED) and the calibrator build every integer layer with
it, and the VTA strategies (:mod:`vtakit.compiler.vta`) match exactly this chain. What
differs between the frameworks is only the arguments: how the data is padded (an
``nn.pad`` with the zero point, or the conv's own ``pad_value``), the scale (float32 or
double products) and the rounding (``qnn.requantize``'s ``rounding``).
"""

from __future__ import annotations

import numpy as np

from ..ir import Call, Constant, get_op

__all__ = ["quantized_layer", "requantize_scale", "ungroup"]


def _call(name, *args, **attrs):
    return Call(get_op(name), args, attrs)


def requantize_scale(scale):
    """``qnn.requantize``'s ``(scale, axis)`` attributes for one multiplier per output
    channel (or one): a float when they are all equal, else a tuple along axis 1."""
    scale = np.asarray(scale, np.float64).reshape(-1)
    if scale.size > 1 and np.all(scale == scale[0]):
        scale = scale[:1]
    if scale.size == 1:
        return float(scale[0]), None
    return tuple(float(s) for s in scale), 1


def _groups_map(cin, cout, block):
    """Whether VTA's conv plan maps ``cin`` input and ``cout`` output channels per group
    onto ``block``-channel tiles (whole blocks per group, or groups inside a block)."""
    return (cin % block == 0 and cout % block == 0) or (cin == cout and block % cin == 0)


def ungroup(weight, groups):
    """``(weight, groups)`` of a grouped convolution, as one dense convolution with a
    block-diagonal weight when its groups map onto neither 8- nor 16-channel blocks (the
    presets' BLOCK) and there are at most 16 of them: ``groups`` times the MACs, but one
    layer VTA runs instead of a group-by-group loop on the host. The result is the same
    (the extra weights are zeros). Other convolutions are returned as they are."""
    weight = np.asarray(weight)
    o, i = weight.shape[:2]
    if groups <= 1 or groups > 16 or any(_groups_map(i, o // groups, b) for b in (8, 16)):
        return weight, groups
    og = o // groups
    dense = np.zeros((o, i * groups) + weight.shape[2:], weight.dtype)
    for g in range(groups):
        dense[g * og:(g + 1) * og, g * i:(g + 1) * i] = weight[g * og:(g + 1) * og]
    return dense, 1


def quantized_layer(data, weight, bias, *, x_zero_point, scale, zero_point, rounding, lo, hi,
                    conv=None, out_dtype="int8"):
    """One integer conv/dense layer in the quantized IR form.

    Parameters
    ----------
    data : Expr
        The int8 input, already padded where the padding must hold the zero point.
    weight : numpy.ndarray
        int8 weights, OIHW for a convolution, (N, K) for a dense layer.
    bias : numpy.ndarray or None
        The bias in accumulator units (integers, any width; None: zero).
    x_zero_point : int
        The input's zero point, folded into the bias as ``- zx * sum(w)`` over each
        output channel.
    scale : float or array
        The requantize multiplier ``s_x s_w / s_y`` (one, or one per output channel).
    zero_point, rounding :
        ``qnn.requantize``'s output zero point and rounding.
    lo, hi :
        The clip bounds (the output range narrowed by a fused activation).
    conv : dict, optional
        ``nn.conv2d`` attributes (strides, padding, dilation, groups, pad_value); a
        dense layer without.
    out_dtype : str
        The layer's output dtype.

    Returns
    -------
    Expr
        ``cast(clip(qnn.requantize(bias_add(conv2d/dense(data, weight), bias))))``.
    """
    weight = np.asarray(weight)
    red = tuple(range(1, weight.ndim))
    if conv is not None and conv.get("groups", 1) > 1:
        # zeros off the diagonal: each output channel's weights, so its bias, unchanged
        weight, groups = ungroup(weight, conv["groups"])
        conv = {**conv, "groups": groups}
    b = np.zeros(weight.shape[0], np.int64) if bias is None else np.asarray(bias, np.int64)
    b = b - int(x_zero_point) * weight.astype(np.int64).sum(axis=red)
    b32 = b.astype(np.uint64).astype(np.uint32).view(np.int32)  # two's complement wrap
    w = Constant(weight.astype(np.int8))
    if conv is not None:
        acc = _call("nn.conv2d", data, w, **{**conv, "out_dtype": "int32"})
    else:
        acc = _call("nn.dense", data, w, out_dtype="int32")
    acc = _call("nn.bias_add", acc, Constant(b32), axis=1)
    s, axis = requantize_scale(scale)
    r = _call("qnn.requantize", acc, scale=s, zero_point=int(zero_point), axis=axis,
              rounding=rounding, out_dtype="int32")
    return _call("cast", _call("clip", r, a_min=lo, a_max=hi), dtype=out_dtype)
