"""Calibration quantizer: float IR + representative inputs -> the quantized IR form."""

import numpy as np
import pytest

import onnxruntime as ort

from vtakit.compiler.frontend import from_onnx  # noqa: E402
from vtakit.compiler import nn  # noqa: E402
from vtakit.compiler.ir import Call, evaluate, post_order  # noqa: E402
from vtakit.compiler.ir import IRModule, Function, Var, TensorType, Constant  # noqa: E402
from vtakit.compiler.models import digits_cnn_path, load_digits_split  # noqa: E402
from vtakit.compiler.quant import fixed_point  # noqa: E402
from vtakit.compiler.quant.calibrate import CalibrationError, calibrate, fold_batch_norm  # noqa: E402


@pytest.fixture(scope="module")
def data():
    x_train, _, x_test, y_test = load_digits_split()
    sess = ort.InferenceSession(str(digits_cnn_path()), providers=["CPUExecutionProvider"])
    ref = np.concatenate([sess.run(None, {"input": x[None]})[0] for x in x_test[:100]])
    return x_train[:64, None], x_test[:100], ref


def _calls(mod, name):
    return [n for n in post_order(mod["main"].body)
            if isinstance(n, Call) and getattr(n.op, "name", "") == name]


@pytest.mark.parametrize("rounding,method", [("vta", "minmax"), ("onnx", "minmax"),
                                             ("vta", "percentile"), ("vta", "entropy")])
def test_digits_top1_agreement(data, rounding, method):
    samples, x, ref = data
    q = calibrate(from_onnx(digits_cnn_path()), samples, rounding=rounding, method=method)
    got = np.concatenate([evaluate(q, xi[None]) for xi in x])
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert (got.argmax(1) == ref.argmax(1)).mean() >= 0.95
    # the integer form: int8 weights, int32 accumulators, BN folded away
    # (the 2x2 average pool: window sums as an all-ones depthwise conv, its own scale)
    convs = _calls(q, "nn.conv2d")
    assert len(convs) == 5 and not _calls(q, "nn.batch_norm")
    assert sum(bool(np.all(c.args[1].data == 1)) for c in convs) == 1
    assert all(c.args[1].data.dtype == np.int8 and c.attrs["out_dtype"] == "int32" for c in convs)
    reqs = _calls(q, "qnn.requantize")
    assert len(reqs) == 6 and all(r.attrs["rounding"] == rounding for r in reqs)
    if rounding == "vta":  # every layer is a pure shift: VTA runs it whole
        assert all(fixed_point.vta_shift(r.attrs["scale"]) is not None for r in reqs)


def test_vta_layers_run_on_vta_bit_exact(data):
    from vtakit.compiler.vta.lower import run_graph
    from vtakit.runtime import Runtime
    from vtakit.sim import open_device

    samples, x, _ = data
    q = calibrate(from_onnx(digits_cnn_path()), samples)
    rt = Runtime(open_device("behavioral", "default"))
    records = []
    for xi in x[:2]:
        np.testing.assert_array_equal(run_graph(q, rt, xi[None], records=records),
                                      evaluate(q, xi[None]))
    convs = [r for r in records if r.kind in ("conv2d", "dense")]
    assert convs and all(r.where == "vta" for r in convs)


def test_fold_batch_norm_is_exact_enough():
    rng = np.random.default_rng(0)
    x = Var("x", TensorType((1, 3, 6, 6), "float32"))
    w = Constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    y = nn.conv2d(x, w, padding=(1, 1, 1, 1))
    p = [Constant(v.astype(np.float32)) for v in (rng.standard_normal(4), rng.standard_normal(4),
                                                  rng.standard_normal(4), rng.random(4) + 0.5)]
    y = nn.batch_norm(y, *p)
    y = nn.relu(nn.batch_norm(y, *p))   # a second BN, not after a conv: multiply-add
    f = Function([x], y)
    g = fold_batch_norm(f)
    assert not [n for n in post_order(g.body) if getattr(getattr(n, "op", None), "name", "")
                == "nn.batch_norm"]
    xv = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(evaluate(g, xv), evaluate(f, xv), rtol=1e-4, atol=1e-4)


def test_errors(data):
    samples, _, _ = data
    mod = from_onnx(digits_cnn_path())
    with pytest.raises(CalibrationError, match=r"^calibrate: samples have shape \(64, 8, 8\); "
                                               r"expected \(N, 1, 1, 8, 8\) for input %input$"):
        calibrate(mod, samples[:, 0, 0])
    with pytest.raises(CalibrationError, match=r"^calibrate: rounding 'x'; expected vta, onnx "
                                               r"or tflite$"):
        calibrate(mod, samples, rounding="x")
    int_mod = IRModule({"main": Function([v := Var("a", TensorType((2,), "int8"))], v)})
    with pytest.raises(CalibrationError, match=r"int8; calibration quantizes float32 models"):
        calibrate(int_mod, np.zeros((1, 2), np.int8))


def test_grouped_conv_ungrouped_onto_vta():
    """3 groups of 4 -> 8 channels map onto no VTA block: the calibrated layer is one dense
    conv with a block-diagonal weight (same integers), on VTA, equal to the IR."""
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.quant.layer import ungroup

    rng = np.random.default_rng(2)
    w = rng.integers(-127, 128, (24, 4, 3, 3)).astype(np.int8)
    dense, groups = ungroup(w, 3)
    assert groups == 1 and dense.shape == (24, 12, 3, 3)
    xi = rng.integers(-128, 128, (1, 12, 7, 7)).astype(np.int8)
    grouped = nn.conv2d(Constant(xi), Constant(w), groups=3, out_dtype="int32")
    flat = nn.conv2d(Constant(xi), Constant(dense), out_dtype="int32")
    np.testing.assert_array_equal(evaluate(Function([], flat)), evaluate(Function([], grouped)))
    assert ungroup(w[:, :1], 24)[1] == 24  # depthwise maps: unchanged

    x = Var("x", TensorType((1, 12, 9, 9), "float32"))
    wf = Constant(rng.standard_normal((24, 4, 3, 3)).astype(np.float32))
    f = IRModule({"main": Function([x], nn.relu(nn.conv2d(x, wf, padding=(1, 1, 1, 1),
                                                          groups=3)))})
    q = calibrate(f, rng.standard_normal((16, 1, 12, 9, 9)).astype(np.float32))
    report = []
    exe = compile_model(q, "default", report=report)
    assert [r.where for r in report if r.kind == "conv2d"] == ["vta"]
    xv = rng.standard_normal((1, 12, 9, 9)).astype(np.float32)
    np.testing.assert_array_equal(exe.run([xv]), evaluate(q, xv))
