"""SimplifyInference (batch norm -> scale and shift, dropout removed) and FoldScaleAxis
(a per-output-channel scale after conv2d / dense folded into the constant weights)."""

from __future__ import annotations

import numpy as np

from ..ir import infer_types, is_op as _is_op
from ..ir.expr import Call, Constant, Op, TupleGetItem
from ..ir.op import get_op
from ..ir.ops._util import is_float
from ..ir.types import TensorType
from .infra import function_pass
from .rewrite import not_primitive, transform, user_counts

__all__ = ["SimplifyInference", "FoldScaleAxis"]


def _call(name, *args, **attrs):
    return Call(get_op(name), args, attrs)


def _bn_parts(bn, bn_old):
    """(scale, shift) expressions broadcastable against the data, per Relay's rewrite."""
    x, gamma, beta, mean, var = bn.args
    a = bn.attrs
    ty = bn_old.args[0].checked_type
    axis = a["axis"] % ty.ndim
    eps = Constant(np.array(a["epsilon"], dtype=ty.dtype))
    scale = _call("divide", gamma, _call("sqrt", _call("add", var, eps))) if a["scale"] else \
        _call("divide", Constant(np.array(1, ty.dtype)), _call("sqrt", _call("add", var, eps)))
    shift = _call("negative", _call("multiply", mean, scale))
    if a["center"]:
        shift = _call("add", shift, beta)
    trailing = ty.ndim - 1 - axis
    if trailing:
        scale = _call("expand_dims", scale, axis=1, num_newaxis=trailing)
        shift = _call("expand_dims", shift, axis=1, num_newaxis=trailing)
    return _call("add", _call("multiply", x, scale), shift)


@function_pass(opt_level=0, name="SimplifyInference")
class SimplifyInference:
    """Rewrite ``nn.batch_norm(...).0`` as ``x * scale + shift`` (scale and shift built
    from the statistics with IR ops, so FoldConstant folds them when they are
    constants), fields 1 and 2 as the moving mean and variance, and remove
    ``nn.dropout`` (identity at inference)."""

    def transform_function(self, func, mod, ctx):
        infer_types(func, mod)

        def post(old, new):
            if type(new) is TupleGetItem:
                tv = new.tuple_value
                if _is_op(tv, "nn.batch_norm"):
                    if new.index == 0:
                        return _bn_parts(tv, old.tuple_value)
                    return tv.args[2 + new.index]
                if _is_op(tv, "nn.dropout"):
                    return tv.args[0] if new.index == 0 else _call("ones_like", tv.args[0])
            return new

        return transform(func, post, descend=not_primitive)


def _channel_scale(e, out_type):
    """The per-output-channel scale vector of constant ``e`` against an (N, C, ...) or
    (N, C) output, or None if ``e`` is not channel-wise."""
    if type(e) is not Constant or not isinstance(out_type, TensorType):
        return None
    c = out_type.shape[1] if out_type.ndim >= 2 else None
    d = e.data
    if c is None or d.dtype.name != out_type.dtype or d.ndim > out_type.ndim:
        return None
    shape = (1,) * (out_type.ndim - d.ndim) + d.shape
    if any(s != 1 for i, s in enumerate(shape) if i != 1):
        return None
    if shape[1] not in (1, c):
        return None
    return np.broadcast_to(d.reshape(-1) if d.size > 1 else d.reshape(1), (c,))


def _fold_into(producer, scale):
    """``producer`` (conv2d / dense with a constant weight) with ``scale`` folded into it."""
    w = producer.args[1]
    ws = scale.reshape((-1,) + (1,) * (w.data.ndim - 1)).astype(w.data.dtype)
    return Call(producer.op, (producer.args[0], Constant(w.data * ws)), producer.attrs)


@function_pass(opt_level=3, name="FoldScaleAxis")
class FoldScaleAxis:
    """Fold ``multiply(conv2d(x, W), S)`` (and through a bias: ``multiply(add(conv2d(x, W),
    b), S)``) into ``conv2d(x, W * S)`` (``+ b * S``) when ``S`` and ``W`` are float
    constants and ``S`` is per output channel; the same for ``nn.dense``.

    Run after SimplifyInference and FoldConstant: a Conv+BN then becomes a
    convolution with folded weights plus a per-channel add.
    """

    def transform_function(self, func, mod, ctx):
        infer_types(func, mod)
        users = user_counts(func, descend=not_primitive)

        def foldable(p_new, p_old):
            return ((_is_op(p_new, "nn.conv2d") or _is_op(p_new, "nn.dense"))
                    and type(p_new.args[1]) is Constant and is_float(p_new.args[1].data.dtype)
                    and users.get(p_old, 0) == 1)

        def post(old, new):
            if not _is_op(new, "multiply"):
                return new
            out_t = old.checked_type
            for lhs, rhs in ((0, 1), (1, 0)):
                p, s, p_old = new.args[lhs], new.args[rhs], old.args[lhs]
                scale = _channel_scale(s, out_t)
                if scale is None:
                    continue
                if foldable(p, p_old) and p_old.checked_type == out_t:
                    return _fold_into(p, scale)
                if not (_is_op(p, "add") or _is_op(p, "nn.bias_add")) or \
                        users.get(p_old, 0) != 1 or p_old.checked_type != out_t:
                    continue
                (inner, bias), inner_old = p.args, p_old.args[0]
                if not (foldable(inner, inner_old) and type(bias) is Constant
                        and inner_old.checked_type == out_t):
                    continue
                if _is_op(p, "nn.bias_add"):
                    if p.attrs["axis"] % out_t.ndim != 1:
                        continue
                    new_bias = bias.data * scale.astype(bias.data.dtype)
                else:
                    if _channel_scale(bias, out_t) is None:
                        continue
                    nd = out_t.ndim
                    aligned = (1,) * (nd - bias.data.ndim) + bias.data.shape
                    new_bias = bias.data.reshape(aligned) * scale.reshape(
                        (1, -1) + (1,) * (nd - 2)).astype(bias.data.dtype)
                return Call(p.op, (_fold_into(inner, scale), Constant(new_bias)), p.attrs)
            return new

        return transform(func, post, descend=not_primitive)
