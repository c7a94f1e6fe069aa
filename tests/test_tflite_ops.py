"""Single TFLite operators (built in the test) against LiteRT's reference kernels.

Every case runs 8 random int8 inputs through ``from_tflite`` + the IR interpreter
and through ``OpResolverType.BUILTIN_REF``; outputs must be equal bit for bit,
except SOFTMAX/LOGISTIC, which vtakit computes in float (dequantize -> float32 ->
quantize) and which may differ by one output step.
"""

import numpy as np
import pytest


from tflite_builder import ModelBuilder, reference_run  # noqa: E402
from vtakit.compiler.frontend import TFLiteError, from_tflite  # noqa: E402
from vtakit.compiler.ir import evaluate  # noqa: E402

SAME, VALID = 0, 1
NONE, RELU, RELU6 = 0, 1, 3
I8, I32, F32, BOOL = "int8", "int32", "float32", "bool"


def _check(mb, ins, outs, tol=0, seed=0, samples=8):
    model = mb.build(ins, outs)
    mod = from_tflite(model)
    rng = np.random.default_rng(seed)
    worst = 0
    for _ in range(samples):
        xs = []
        for i in ins:
            shape, dtype = mb.tensors[i][1], mb.tensors[i][2]
            if dtype == "float32":
                xs.append(rng.uniform(-3, 3, shape).astype(np.float32))
            else:
                xs.append(rng.integers(-128, 128, shape).astype(np.int8))
        ref = reference_run(model, xs)[0]
        got = np.asarray(evaluate(mod, *xs))
        assert got.shape == ref.shape and got.dtype == ref.dtype
        worst = max(worst, int(np.abs(got.astype(np.int64) - ref.astype(np.int64)).max()))
    assert worst <= tol
    return worst


def _conv_model(depthwise, padding, stride, act, mult=1, per_channel=True, kh=3, kw=3):
    rng = np.random.default_rng(1)
    mb = ModelBuilder()
    c = 4
    o = c * mult if depthwise else 6
    x = mb.tensor("x", (1, 7, 6, c), scale=0.04, zero_point=-5)
    wshape = (1, kh, kw, o) if depthwise else (o, kh, kw, c)
    axis = 3 if depthwise else 0
    ws = rng.uniform(0.002, 0.02, o if per_channel else 1).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, wshape).astype(np.int8), scale=ws,
                 zero_point=np.zeros(ws.size, np.int64), axis=axis)
    b = mb.const("b", rng.integers(-3000, 3000, o).astype(np.int32),
                 scale=(0.04 * ws).astype(np.float32), zero_point=np.zeros(ws.size, np.int64))
    y = mb.tensor("y", (1, -(-7 // stride) if padding == SAME else (7 - kh) // stride + 1,
                        -(-6 // stride) if padding == SAME else (6 - kw) // stride + 1, o),
                  scale=0.05, zero_point=7)
    if depthwise:
        mb.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions",
              {0: (I8, padding), 1: (I32, stride), 2: (I32, stride), 3: (I32, mult),
               4: (I8, act), 5: (I32, 1), 6: (I32, 1)})
    else:
        mb.op("CONV_2D", [x, w, b], [y], "Conv2DOptions",
              {0: (I8, padding), 1: (I32, stride), 2: (I32, stride), 3: (I8, act),
               4: (I32, 1), 5: (I32, 1)})
    return mb, [x], [y]


@pytest.mark.parametrize("padding,stride,act,per_channel", [
    (SAME, 1, RELU, True), (SAME, 2, RELU6, False), (VALID, 1, NONE, True)])
def test_conv2d(padding, stride, act, per_channel):
    _check(*_conv_model(False, padding, stride, act, per_channel=per_channel))


@pytest.mark.parametrize("mult,stride", [(1, 1), (2, 2)])
def test_depthwise_conv2d(mult, stride):
    _check(*_conv_model(True, SAME, stride, RELU, mult=mult))


def test_fully_connected():
    rng = np.random.default_rng(2)
    mb = ModelBuilder()
    x = mb.tensor("x", (2, 24), scale=0.03, zero_point=4)
    w = mb.const("w", rng.integers(-127, 128, (10, 24)).astype(np.int8), scale=0.011)
    b = mb.const("b", rng.integers(-500, 500, 10).astype(np.int32), scale=0.03 * 0.011)
    y = mb.tensor("y", (2, 10), scale=0.07, zero_point=-3)
    mb.op("FULLY_CONNECTED", [x, w, b], [y], "FullyConnectedOptions", {0: (I8, RELU)})
    _check(mb, [x], [y])


@pytest.mark.parametrize("kind", ["ADD", "MUL"])
def test_add_mul(kind):
    mb = ModelBuilder()
    a = mb.tensor("a", (1, 5, 4, 3), scale=0.05, zero_point=3)
    b = mb.tensor("b", (1, 5, 4, 3), scale=0.02, zero_point=-7)
    y = mb.tensor("y", (1, 5, 4, 3), scale=0.06 if kind == "ADD" else 0.03, zero_point=-2)
    mb.op(kind, [a, b], [y], "AddOptions" if kind == "ADD" else "MulOptions", {0: (I8, RELU)})
    _check(mb, [a, b], [y])


@pytest.mark.parametrize("kind,padding", [("AVERAGE_POOL_2D", SAME), ("AVERAGE_POOL_2D", VALID),
                                          ("MAX_POOL_2D", SAME)])
def test_pool(kind, padding):
    mb = ModelBuilder()
    x = mb.tensor("x", (1, 7, 8, 5), scale=0.05, zero_point=-3)
    oh = 4 if padding == SAME else 3
    y = mb.tensor("y", (1, oh, 4 if padding == SAME else 3, 5), scale=0.05, zero_point=-3)
    mb.op(kind, [x], [y], "Pool2DOptions", {0: (I8, padding), 1: (I32, 2), 2: (I32, 2),
                                            3: (I32, 3), 4: (I32, 3), 5: (I8, RELU)})
    _check(mb, [x], [y])


@pytest.mark.parametrize("keep,axes,out_q", [
    (True, (1, 2), (0.03, 5)),        # TFLite's integer path
    (False, (1, 2), (0.05, -3)),      # same scale and zero point: truncating mean
    (False, (2,), (0.02, 1))])        # the float path
def test_mean(keep, axes, out_q):
    mb = ModelBuilder()
    x = mb.tensor("x", (1, 5, 6, 4), scale=0.05, zero_point=-3)
    ax = mb.const("axes", np.asarray(axes, np.int32))
    shape = tuple(1 if i in axes else d for i, d in enumerate((1, 5, 6, 4))
                  if keep or i not in axes)
    y = mb.tensor("y", shape, scale=out_q[0], zero_point=out_q[1])
    mb.op("MEAN", [x, ax], [y], "ReducerOptions", {0: (BOOL, keep)})
    _check(mb, [x], [y])


def test_pad_concat_reshape():
    mb = ModelBuilder()
    x = mb.tensor("x", (1, 3, 4, 2), scale=0.05, zero_point=-3)
    z = mb.tensor("z", (1, 3, 4, 3), scale=0.05, zero_point=-3)
    p = mb.const("p", np.array([[0, 0], [1, 2], [0, 1], [0, 0]], np.int32))
    xp = mb.tensor("xp", (1, 6, 5, 2), scale=0.05, zero_point=-3)
    zp = mb.tensor("zp", (1, 6, 5, 3), scale=0.05, zero_point=-3)
    cat = mb.tensor("cat", (1, 6, 5, 5), scale=0.05, zero_point=-3)
    shp = mb.const("shape", np.array([1, 150], np.int32))
    y = mb.tensor("y", (1, 150), scale=0.05, zero_point=-3)
    mb.op("PAD", [x, p], [xp])
    mb.op("PAD", [z, p], [zp])
    mb.op("CONCATENATION", [xp, zp], [cat], "ConcatenationOptions", {0: (I32, 3), 1: (I8, NONE)})
    mb.op("RESHAPE", [cat, shp], [y])
    _check(mb, [x, z], [y])


@pytest.mark.parametrize("kind", ["SOFTMAX", "LOGISTIC"])
def test_softmax_logistic_within_one_step(kind):
    mb = ModelBuilder()
    x = mb.tensor("x", (2, 10), scale=0.1, zero_point=-20)
    if kind == "SOFTMAX":
        y = mb.tensor("y", (2, 10), scale=1 / 256, zero_point=-128)
        mb.op(kind, [x], [y], "SoftmaxOptions", {0: (F32, 1.0)})
    else:
        y = mb.tensor("y", (2, 10), scale=1 / 256, zero_point=-128)
        mb.op(kind, [x], [y])
    _check(mb, [x], [y], tol=1)


def test_quantize_dequantize():
    mb = ModelBuilder()
    x = mb.tensor("x", (3, 7), "float32")
    q = mb.tensor("q", (3, 7), scale=0.037, zero_point=-4)
    r = mb.tensor("r", (3, 7), scale=0.05, zero_point=9)
    y = mb.tensor("y", (3, 7), "float32")
    mb.op("QUANTIZE", [x], [q])
    mb.op("QUANTIZE", [q], [r])
    mb.op("DEQUANTIZE", [r], [y])
    model = mb.build([x], [y])
    mod = from_tflite(model)
    rng = np.random.default_rng(3)
    for _ in range(8):
        v = rng.uniform(-6, 6, (3, 7)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(evaluate(mod, v)), reference_run(model, [v])[0])


def test_unsupported_operator_is_one_line():
    mb = ModelBuilder()
    x = mb.tensor("x", (2, 3), scale=0.1, zero_point=0)
    y = mb.tensor("y_out", (2, 3), scale=0.1, zero_point=0)
    mb.op("TANH", [x], [y])
    with pytest.raises(TFLiteError, match=r"^<bytes>: operator 0 \(TANH, output 'y_out'\) is "
                                          r"not supported; supported operators: ADD, .*CONV_2D"):
        from_tflite(mb.build([x], [y]))


def test_malformed_files():
    with pytest.raises(TFLiteError, match=r"^<bytes>: not a TFLite model \(no 'TFL3' "):
        from_tflite(b"\x00" * 64)
    with pytest.raises(TFLiteError, match=r"^m.tflite: cannot read the model"):
        from_tflite("m.tflite")
    mb = ModelBuilder()
    x = mb.tensor("x", (2, 3), scale=0.1, zero_point=0)
    y = mb.tensor("y", (2, 3), scale=0.1, zero_point=0)
    mb.op("ADD", [x, x], [y], "AddOptions", {0: (I8, NONE)})
    data = mb.build([x], [y])
    with pytest.raises(TFLiteError, match=r"^<bytes>: malformed TFLite flatbuffer"):
        from_tflite(data[:40])
