"""The fixed-point kernels of vtakit.compiler.quant and the qnn.* operators."""

import numpy as np
import pytest

from vtakit.compiler.ir import Call, OpError, TensorType, Var, evaluate, get_op, infer_types
from vtakit.compiler.quant import fixed_point as fp
from vtakit.compiler.quant import activation_range
from vtakit.compiler.quant.ops import add, requantize


def test_quantize_multiplier():
    m, s = fp.quantize_multiplier([0.5, 1.0, 0.0, 0.75, 2.0 ** -40, 1 - 2.0 ** -40])
    assert m.tolist() == [1 << 30, 1 << 30, 0, 3 << 29, 0, 1 << 30]
    assert s.tolist() == [0, 1, 0, 0, 0, 1]          # the last rounds up to 2^31: carry
    with pytest.raises(ValueError, match="finite and >= 0"):
        fp.quantize_multiplier(-1.0)


def test_gemmlowp_primitives():
    imin = fp.INT32_MIN
    assert fp.saturating_rounding_doubling_high_mul(imin, imin) == fp.INT32_MAX
    assert fp.saturating_rounding_doubling_high_mul(1 << 30, 1 << 30) == 1 << 29
    # RoundingDivideByPOT rounds half away from zero
    assert fp.rounding_divide_by_pot([3, -3, 5, -5, -6], [1, 1, 2, 2, 2]).tolist() == \
        [2, -2, 1, -1, -2]


def test_single_and_double_rounding_differ_by_one_step():
    # measured on the anomaly-detection model's last FULLY_CONNECTED (exact 54.499...)
    m, s = 1094312796, -9
    assert fp.multiply_by_quantized_multiplier(54758, m, s) == 55
    assert fp.multiply_by_quantized_multiplier(54758, m, s, single_rounding=True) == 54


def test_requantize_vta_is_the_alu_rounding_shift():
    x = np.arange(-40, 40, dtype=np.int32)
    assert fp.vta_shift(0.125) == 3 and fp.vta_shift(0.3) is None
    assert fp.vta_shift(np.full(4, 0.25)) == 2 and fp.vta_shift([0.25, 0.5]) is None
    np.testing.assert_array_equal(fp.requantize_vta(x, 0.125, 5), ((x + 4) >> 3) + 5)
    with pytest.raises(ValueError, match="needs one scale 2\\^-k"):
        fp.requantize_vta(x, 0.3)


def test_requantize_roundings():
    x = np.array([[-1000, -3, 7, 100001]], np.int32).repeat(2, axis=0)
    scale = (0.01, 0.5)
    y = requantize(x, scale=scale, zero_point=-3, axis=0, rounding="tflite")
    exact = x * np.array(scale)[:, None]
    assert np.abs(y + 3 - exact).max() <= 0.5 + 1e-9
    onnx = requantize(x, scale=0.5, zero_point=0, rounding="onnx")
    assert onnx[0].tolist() == [-500, -2, 4, 50000]   # half to even
    assert requantize(x, scale=0.01, rounding="tflite", out_dtype="int8").max() == 127


def test_tflite_add_matches_float_within_a_step():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, 1000)
    b = rng.integers(-128, 128, 1000)
    y = add(a, b, lhs_scale=0.05, lhs_zero_point=3, rhs_scale=0.02, rhs_zero_point=-7,
            out_scale=0.06, out_zero_point=-2)
    ref = (0.05 * (a - 3) + 0.02 * (b + 7)) / 0.06 - 2
    assert np.abs(y - ref).max() <= 0.5 + 1e-6


def test_activation_range():
    assert activation_range("NONE", 0.1, 3) == (-128, 127)
    assert activation_range("RELU", 0.1, -128) == (-128, 127)
    assert activation_range("RELU", 0.1, 3) == (3, 127)
    assert activation_range("RELU6", 0.05, -128) == (-128, -8)
    with pytest.raises(ValueError, match="expected NONE, RELU"):
        activation_range("TANH", 0.1, 0)


def test_qnn_ops_through_the_ir():
    import vtakit.compiler.quant  # noqa: F401
    x = Var("x", TensorType((2, 3), "int32"))
    call = Call(get_op("qnn.requantize"), [x], {"scale": 0.25, "zero_point": 1,
                                                "rounding": "vta", "out_dtype": "int8"})
    v = np.array([[-3, -2, 0], [1, 2, 1000]], np.int32)
    np.testing.assert_array_equal(evaluate(call, x=v), np.clip(((v + 2) >> 2) + 1, -128, 127))
    bad = Call(get_op("qnn.requantize"), [x], {"scale": 0.3, "rounding": "vta"})
    with pytest.raises(Exception, match="rounding 'vta' needs a power-of-two scale"):
        infer_types(bad)
    with pytest.raises(OpError, match="qnn.requantize has no attribute 'shift'"):
        Call(get_op("qnn.requantize"), [x], {"shift": 3})
    q = Call(get_op("qnn.quantize"), [Var("f", TensorType((4,), "float32"))],
             {"scale": 0.5, "zero_point": -1})
    np.testing.assert_array_equal(
        evaluate(q, f=np.array([-0.25, 0.25, 0.75, 1000], np.float32)), [-2, 0, 1, 127])
