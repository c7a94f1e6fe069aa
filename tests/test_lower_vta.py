"""Quantized layers lowered onto the operator library (vtakit.compiler.vta.lower)."""

import numpy as np
import pytest

import vtakit.compiler.quant  # noqa: F401
from vtakit.compiler.ir import Call, Constant, Function, TensorType, Var, evaluate
from vtakit.compiler.vta.lower import (LoweringError, lower_primitive, match_layer,
                                       requantize_cost)
from vtakit.runtime import Runtime
from vtakit.sim import open_device
from vtakit.compiler.nn import call as _op


def _conv_layer(rounding, scale, pad_value=0.0):
    rng = np.random.default_rng(0)
    x = Var("x", TensorType((1, 16, 8, 8), "int8"))
    w = rng.integers(-20, 20, (32, 16, 3, 3)).astype(np.int8)
    b = rng.integers(-500, 500, 32).astype(np.int32)
    data = _op("nn.pad", x, pad_width=((0, 0), (0, 0), (1, 1), (1, 1)), pad_value=pad_value)
    y = _op("nn.conv2d", data, Constant(w), out_dtype="int32")
    y = _op("nn.bias_add", y, Constant(b), axis=1)
    y = _op("qnn.requantize", y, scale=scale, zero_point=-5, rounding=rounding,
            axis=None if np.isscalar(scale) else 1)
    y = _op("cast", _op("clip", y, a_min=-128, a_max=100), dtype="int8")
    return Function([x], y), rng.integers(-128, 128, (1, 16, 8, 8)).astype(np.int8)


@pytest.mark.parametrize("rounding,scale,pad_value,where", [
    ("vta", 2.0 ** -7, 0.0, "vta"),                          # the whole layer on VTA
    ("vta", 2.0 ** -7, -128.0, "vta"),                       # border rows on the ALU
    ("tflite", tuple(np.linspace(1e-3, 9e-3, 32)), -128.0, "vta+host"),
    ("onnx", 0.004, 3.0, "vta+host")])
def test_conv_layer_equals_interpreter(rounding, scale, pad_value, where):
    fn, x = _conv_layer(rounding, scale, pad_value)
    records = []
    f = lower_primitive(fn, records=records)
    got = f(Runtime(open_device("behavioral", "default")), x)
    np.testing.assert_array_equal(got, evaluate(fn, x))
    assert [r.where for r in records] == [where]
    assert records[0].predicted_cycles > 0 and records[0].dram_bytes > 0


def test_host_requantized_result_stores_the_bytes_its_weights_allow():
    # int8 inputs and weights in [-20, 20]: |conv| <= 128 x 144 x 20 < 2^23, so three byte
    # planes (the bias is added on the host); the result is still the interpreter's
    from vtakit.compiler.vta.lower import layer_spec, weight_shape
    from vtakit.hw.config import load_config
    fn, x = _conv_layer("tflite", tuple(np.linspace(1e-3, 9e-3, 32)))
    layer = match_layer(fn.body)
    spec = layer_spec(layer, x.shape, weight_shape(layer), load_config("default"))
    assert spec.where == "vta+host" and spec.plan.operands["out"].shape[0] == 3
    assert not spec.plan.epilogue.bias


def test_uniform_depthwise_reads_one_shared_weight_tile():
    # A calibrated average pool is a depthwise conv with all-ones weights: one weight tile
    # serves every block and tap, and the result is still the interpreter's.
    rng = np.random.default_rng(2)
    x = Var("x", TensorType((1, 40, 7, 7), "int8"))
    y = _op("nn.conv2d", x, Constant(np.ones((40, 1, 7, 7), np.int8)), groups=40,
            pad_value=-3.0, out_dtype="int32")
    y = _op("nn.bias_add", y, Constant(np.full(40, 3 * 49, np.int32)), axis=1)
    y = _op("qnn.requantize", y, scale=1 / 49, zero_point=-3, rounding="onnx")
    fn = Function([x], _op("cast", _op("clip", y, a_min=-128, a_max=127), dtype="int8"))
    v = rng.integers(-128, 128, (1, 40, 7, 7)).astype(np.int8)
    records = []
    f = lower_primitive(fn, records=records)
    np.testing.assert_array_equal(f(Runtime(open_device("behavioral", "default")), v),
                                  evaluate(fn, v))
    # DRAM reads: data 3 blocks x 49 x 16 B and the one 256 B tile (not 3 blocks x 49
    # taps x 256 B of weights; the bias joins the host's requantize)
    assert records[0].roofline.read_bytes == 3 * 49 * 16 + 256


def test_dense_layer():
    rng = np.random.default_rng(1)
    x = Var("x", TensorType((1, 40), "int8"))
    y = _op("nn.dense", x, Constant(rng.integers(-50, 50, (24, 40)).astype(np.int8)),
            out_dtype="int32")
    y = _op("nn.bias_add", y, Constant(rng.integers(-99, 99, 24).astype(np.int32)), axis=1)
    y = _op("qnn.requantize", y, scale=0.0123, zero_point=3, rounding="tflite_single")
    fn = Function([x], _op("cast", _op("clip", y, a_min=3, a_max=127), dtype="int8"))
    v = rng.integers(-128, 128, (1, 40)).astype(np.int8)
    got = lower_primitive(fn)(Runtime(open_device("behavioral", "default")), v)
    np.testing.assert_array_equal(got, evaluate(fn, v))


def test_not_a_layer():
    x = Var("x", TensorType((1, 4), "int8"))
    assert match_layer(_op("nn.relu", x)) is None
    with pytest.raises(LoweringError, match="^the function body is not a quantized"):
        lower_primitive(Function([x], _op("nn.relu", x)))


def test_requantize_cost_reports_both_epilogues():
    c = requantize_cost(open_device("behavioral", "default").config, (1, 16, 16, 16),
                        (32, 16, 3, 3), 1, 1)
    assert c["int32_bytes"] > c["int8_bytes"] and c["int32_cycles"] >= c["int8_cycles"] > 0
    assert c["host_requantize_s"] > 0


@pytest.mark.parametrize("x_shape,w_shape,stride,padding,groups", [
    ((1, 3, 30, 28), (8, 3, 7, 7), 2, (3, 3, 3, 3), 1),         # a stem
    ((2, 16, 12, 12), (16, 1, 3, 3), (2, 1), (2, 1, 0, 2), 16),   # depthwise, asymmetric
    ((1, 32, 10, 9), (32, 16, 3, 2), 1, (1, 0, 2, 1), 2)])      # grouped
def test_border_correction_is_the_padding_convolved(x_shape, w_shape, stride, padding, groups):
    """What a pad value adds at the border equals convolving a tensor that holds the pad
    value in the padding and zeros inside (the definition), for every geometry."""
    from vtakit.compiler.ops.conv2d import plan_conv2d
    from vtakit.compiler.ops.reference import group_conv2d_ref
    from vtakit.compiler.vta.conv import border_correction
    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, w_shape).astype(np.int8)
    plan = plan_conv2d(open_device("behavioral", "default").config, x_shape, w_shape, stride,
                       padding, groups=groups, out_dtype=np.int32)
    n, c, h, wd = x_shape
    t, l, b, r = padding
    padded = np.full((n, c, h + t + b, wd + l + r), -7, np.int8)
    padded[:, :, t:t + h, l:l + wd] = 0
    want = group_conv2d_ref(padded, w, stride, 0, groups)
    np.testing.assert_array_equal(border_correction(plan, w, -7), want)
