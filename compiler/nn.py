"""Builder API: build graph-IR networks in Python (Relay's ``relay.nn`` style).

Each function returns an expression; :func:`var` makes typed inputs and
:func:`const` constants.  :func:`resnet18` and :func:`resnet50` build ResNet-18 and
ResNet-50 with random weights (for tests and benchmarks; nothing is downloaded).

Example
-------
>>> from vtakit.compiler import nn
>>> x = nn.var("x", (1, 3, 8, 8))
>>> y = nn.relu(nn.conv2d(x, nn.const(np.ones((4, 3, 3, 3), "float32")), padding=1))
>>> mod = nn.module(y)          # main(%x) = y
"""

from __future__ import annotations

import numpy as np

from .ir import (Call, Constant, Function, IRModule, Tuple, TupleGetItem, TensorType, Var,
                 get_op)
from .ir.analysis import free_vars
from .ir.expr import const as _const

__all__ = [
    "var", "const", "module", "conv2d", "dense", "bias_add", "batch_norm", "relu", "leaky_relu",
    "negative", "add", "subtract", "multiply", "divide", "maximum", "minimum", "right_shift", "left_shift",
    "clip", "cast", "round", "sigmoid", "tanh", "exp", "sqrt", "softmax", "max_pool2d",
    "avg_pool2d", "global_avg_pool2d", "dropout", "reshape", "transpose", "concatenate", "pad",
    "batch_flatten", "mean", "sum", "squeeze", "expand_dims", "equal", "less", "greater",
    "where", "zeros", "ones", "call", "resnet18", "resnet50", "conv_bn_relu",
]


def var(name, shape=None, dtype="float32", quant=None, type_annotation=None) -> Var:
    """A variable of type ``Tensor[shape, dtype]`` (or ``type_annotation``)."""
    if type_annotation is None and shape is not None:
        type_annotation = TensorType(shape, dtype, quant)
    return Var(name, type_annotation)


def const(value, dtype=None) -> Constant:
    """A constant (Python floats become float32, Python ints int32)."""
    return _const(value, dtype)


def module(body, params=None) -> IRModule:
    """An IRModule whose ``main`` returns ``body``; parameters are ``params`` or its free
    variables in order of first use."""
    params = free_vars(body) if params is None else list(params)
    return IRModule({"main": Function(params, body)})


def call(name, *args, **attrs):
    """``Call(get_op(name), args, attrs)``."""
    return Call(get_op(name), args, attrs)


def _as_expr(x, like=None):
    if isinstance(x, (int, float, np.ndarray, np.generic)):
        dtype = None
        if like is not None and like.has_type():
            dtype = like.checked_type.dtype
        elif like is not None and isinstance(like, Var) and like.type_annotation is not None:
            dtype = like.type_annotation.dtype
        return const(x, dtype)
    return x


def conv2d(data, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
           out_dtype=""):
    """2-D convolution, NCHW data, OIHW weight; padding int | (ph, pw) | (t, l, b, r)."""
    return call("nn.conv2d", data, weight, strides=strides, padding=padding,
                dilation=dilation, groups=groups, out_dtype=out_dtype)


def dense(data, weight, out_dtype=""):
    """``data (N, K) x weight (O, K)^T``."""
    return call("nn.dense", data, weight, out_dtype=out_dtype)


def bias_add(data, bias, axis=1):
    return call("nn.bias_add", data, bias, axis=axis)


def batch_norm(data, gamma, beta, moving_mean, moving_var, axis=1, epsilon=1e-5):
    """Inference batch norm; returns the normalized tensor (field 0 of the op's 3-tuple)."""
    return TupleGetItem(call("nn.batch_norm", data, gamma, beta, moving_mean, moving_var,
                             axis=axis, epsilon=epsilon), 0)


def dropout(data, rate=0.5):
    """Dropout (identity at inference); returns field 0 of the op's 2-tuple."""
    return TupleGetItem(call("nn.dropout", data, rate=rate), 0)


def _unary(name):
    def f(x, **attrs):
        return call(name, x, **attrs)
    f.__name__ = name.split(".")[-1]
    f.__doc__ = f"``{name}`` (see the op registry for its attributes)."
    return f


def _binary(name):
    def f(a, b):
        a = _as_expr(a, b if not isinstance(b, (int, float)) else None)
        return call(name, a, _as_expr(b, a))
    f.__name__ = name
    f.__doc__ = f"``{name}`` with numpy broadcasting (numbers become constants of a's dtype)."
    return f


relu = _unary("nn.relu")
negative = _unary("negative")
sigmoid = _unary("sigmoid")
tanh = _unary("tanh")
exp = _unary("exp")
sqrt = _unary("sqrt")
round = _unary("round")  # noqa: A001  (Relay's name)
batch_flatten = _unary("nn.batch_flatten")
global_avg_pool2d = _unary("nn.global_avg_pool2d")
add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
maximum = _binary("maximum")
minimum = _binary("minimum")
right_shift = _binary("right_shift")
left_shift = _binary("left_shift")
equal = _binary("equal")
less = _binary("less")
greater = _binary("greater")


def leaky_relu(x, alpha=0.01):
    return call("nn.leaky_relu", x, alpha=alpha)


def clip(x, a_min, a_max):
    return call("clip", x, a_min=a_min, a_max=a_max)


def cast(x, dtype):
    return call("cast", x, dtype=dtype)


def softmax(x, axis=-1):
    return call("nn.softmax", x, axis=axis)


def max_pool2d(x, pool_size, strides=None, padding=0):
    return call("nn.max_pool2d", x, pool_size=pool_size, strides=strides, padding=padding)


def avg_pool2d(x, pool_size, strides=None, padding=0, count_include_pad=False):
    return call("nn.avg_pool2d", x, pool_size=pool_size, strides=strides, padding=padding,
                count_include_pad=count_include_pad)


def reshape(x, newshape):
    return call("reshape", x, newshape=newshape)


def transpose(x, axes=None):
    return call("transpose", x, axes=axes)


def concatenate(exprs, axis=0):
    return call("concatenate", Tuple(exprs), axis=axis)


def pad(x, pad_width, pad_value=0.0):
    return call("nn.pad", x, pad_width=pad_width, pad_value=pad_value)


def mean(x, axis=None, keepdims=False):
    return call("mean", x, axis=axis, keepdims=keepdims)


def sum(x, axis=None, keepdims=False):  # noqa: A001  (Relay's name)
    return call("sum", x, axis=axis, keepdims=keepdims)


def squeeze(x, axis=None):
    return call("squeeze", x, axis=axis)


def expand_dims(x, axis, num_newaxis=1):
    return call("expand_dims", x, axis=axis, num_newaxis=num_newaxis)


def where(cond, a, b):
    return call("where", cond, a, b)


def zeros(shape, dtype="float32"):
    return call("zeros", shape=shape, dtype=dtype)


def ones(shape, dtype="float32"):
    return call("ones", shape=shape, dtype=dtype)


# ---------------------------------------------------------------- ResNet-18 and -50

class _Weights:
    """Random weights, deterministic for a seed (He-normal convs, sane BN statistics)."""

    def __init__(self, seed, dtype):
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype

    def conv(self, o, i, k):
        std = np.sqrt(2.0 / (i * k * k))
        return const(self.rng.normal(0, std, (o, i, k, k)).astype(self.dtype))

    def bn(self, c):
        r = self.rng
        return [const(v.astype(self.dtype)) for v in (
            r.uniform(0.5, 1.5, c), r.normal(0, 0.1, c), r.normal(0, 0.1, c),
            r.uniform(0.5, 1.5, c))]


def conv_bn_relu(x, w: _Weights, cin, cout, k, stride, relu_=True):
    """conv2d (no bias) -> batch_norm -> relu, the ResNet unit."""
    y = conv2d(x, w.conv(cout, cin, k), strides=stride, padding=k // 2)
    y = batch_norm(y, *w.bn(cout))
    return relu(y) if relu_ else y


def _basic_block(x, w, cin, cout, stride):
    y = conv_bn_relu(x, w, cin, cout, 3, stride)
    y = conv_bn_relu(y, w, cout, cout, 3, 1, relu_=False)
    short = x if stride == 1 and cin == cout else conv_bn_relu(x, w, cin, cout, 1, stride,
                                                                relu_=False)
    return relu(add(y, short))


def _resnet(block, stages, expansion, batch_size, image_shape, num_classes, dtype,
            seed) -> IRModule:
    """The ResNet v1 frame around ``stages`` of ``(blocks, width)``: the 7x7/2 stem and
    3x3/2 max pool, ``block(x, w, cin, width, stride)`` (a stage's first block strides 2,
    from the second stage on; it outputs ``expansion * width`` channels), global average
    pool, dense, softmax. Weights are drawn in that order."""
    w = _Weights(seed, dtype)
    data = var("data", (batch_size,) + tuple(image_shape), dtype)
    x = conv_bn_relu(data, w, image_shape[0], 64, 7, 2)
    x = max_pool2d(x, 3, strides=2, padding=1)
    cin = 64
    for i, (blocks, width) in enumerate(stages):
        for j in range(blocks):
            x = block(x, w, cin, width, 2 if i > 0 and j == 0 else 1)
            cin = expansion * width
    x = batch_flatten(global_avg_pool2d(x))
    fc_w = const(w.rng.normal(0, 0.01, (num_classes, cin)).astype(dtype))
    fc_b = const(np.zeros(num_classes, dtype))
    x = bias_add(dense(x, fc_w), fc_b)
    return module(softmax(x), [data])


def resnet18(batch_size=1, image_shape=(3, 224, 224), num_classes=1000, dtype="float32",
             seed=0) -> IRModule:
    """ResNet-18 (v1, batch norm, NCHW) with random weights as constants.

    Returns
    -------
    IRModule
        ``main(%data: Tensor[(batch_size, *image_shape), dtype])`` returning the
        softmax of the logits, shape ``(batch_size, num_classes)``.
    """
    return _resnet(_basic_block, ((2, 64), (2, 128), (2, 256), (2, 512)), 1, batch_size,
                   image_shape, num_classes, dtype, seed)


def _bottleneck(x, w, cin, width, stride):
    """ResNet v1 bottleneck: 1x1 (stride) -> 3x3 -> 1x1 to ``4 * width`` channels, plus
    the input or, where the shape changes, its 1x1 projection; relu of the sum."""
    cout = 4 * width
    y = conv_bn_relu(x, w, cin, width, 1, stride)
    y = conv_bn_relu(y, w, width, width, 3, 1)
    y = conv_bn_relu(y, w, width, cout, 1, 1, relu_=False)
    short = x if stride == 1 and cin == cout else conv_bn_relu(x, w, cin, cout, 1, stride,
                                                                relu_=False)
    return relu(add(y, short))


def resnet50(batch_size=1, image_shape=(3, 224, 224), num_classes=1000, dtype="float32",
             seed=0) -> IRModule:
    """ResNet-50 v1 (bottleneck blocks, batch norm, NCHW) with random weights as constants.

    The v1 of He et al. (2015), as Caffe and Keras build it: a stage's first block
    downsamples in its first 1x1 convolution (v1.5 moves the stride to the 3x3). Stages
    of 3, 4, 6 and 3 blocks of widths 64, 128, 256 and 512 (outputs four times as wide);
    53 convolutions and one dense layer, 3.9 GMAC at 224 x 224.

    Returns
    -------
    IRModule
        ``main(%data: Tensor[(batch_size, *image_shape), dtype])`` returning the
        softmax of the logits, shape ``(batch_size, num_classes)``.
    """
    return _resnet(_bottleneck, ((3, 64), (4, 128), (6, 256), (3, 512)), 4, batch_size,
                   image_shape, num_classes, dtype, seed)
