"""ONNX frontend on whole models: the shipped digits CNN, float and quantized by onnxruntime
(QDQ), and the operator-format QLinearConv / QLinearMatMul."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("sklearn")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vtakit.compiler.frontend import from_onnx  # noqa: E402
from vtakit.compiler.ir import Call, evaluate, post_order  # noqa: E402
from vtakit.compiler.models import digits_cnn_path, load_digits_split  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    x_train, _, x_test, y_test = load_digits_split()
    return x_train, x_test, y_test


def ort_run(model_path, xs, name="input"):
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(None, {name: x[None]})[0] for x in xs])


def ir_run(mod, xs):
    return np.concatenate([evaluate(mod, x[None]) for x in xs])


def test_float_digits_cnn_matches_onnxruntime(digits):
    _, x, _ = digits
    mod = from_onnx(digits_cnn_path())
    np.testing.assert_allclose(ir_run(mod, x[:50]), ort_run(digits_cnn_path(), x[:50]),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opset", [11, 17, 21])
def test_float_digits_cnn_opsets(digits, opset):
    _, x, _ = digits
    model = onnx.load(str(digits_cnn_path()))
    model.opset_import[0].version = opset  # every op of this model means the same in 11-21
    if opset >= 21:
        model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(evaluate(from_onnx(model), x[:1]),
                               sess.run(None, {"input": x[:1]})[0], rtol=1e-4, atol=1e-4)


def test_shipped_model_accuracy(digits):
    _, x, y = digits
    assert (ort_run(digits_cnn_path(), x).argmax(1) == y).mean() >= 0.97


@pytest.fixture(scope="module", params=["uint8-per-tensor", "int8-per-channel"])
def qdq_model(request, digits, tmp_path_factory):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    x_train = digits[0]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({"input": x[None]} for x in x_train[:64])

        def get_next(self):
            return next(self.it, None)

    act, per_channel = request.param.split("-", 1)
    d = tmp_path_factory.mktemp("qdq")
    # the usual onnxruntime flow: pre-process (folds batch norm into the convs), then quantize
    quant_pre_process(str(digits_cnn_path()), str(d / "pre.onnx"))
    quantize_static(str(d / "pre.onnx"), str(d / "q.onnx"), Reader(),
                    quant_format=QuantFormat.QDQ, per_channel=per_channel == "per-channel",
                    activation_type=QuantType.QUInt8 if act == "uint8" else QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    return d / "q.onnx"


def test_qdq_digits_within_one_step(qdq_model, digits):
    _, x, _ = digits
    model = onnx.load(str(qdq_model))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    step = float(inits["logits_scale"])
    mod = from_onnx(qdq_model)
    got, want = ir_run(mod, x[:100]), ort_run(qdq_model, x[:100])
    steps = np.abs(got - want) / step
    assert (steps <= 1 + 1e-3).mean() >= 0.99
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.99
    # every conv and the dense layer became the integer form
    ops = [n.op.name for n in post_order(mod["main"].body)
           if isinstance(n, Call) and hasattr(n.op, "name")]
    assert ops.count("nn.conv2d") == 4 and ops.count("nn.dense") == 1
    assert ops.count("qnn.requantize") == 5 and ops.count("qnn.add") == 1
    convs = [n for n in post_order(mod["main"].body)
             if isinstance(n, Call) and getattr(n.op, "name", "") == "nn.conv2d"]
    assert all(c.args[1].data.dtype == np.int8 and c.attrs["out_dtype"] == "int32"
               for c in convs)


def _qlinear_model(op, x, w_q, attrs, y_scale, y_zp, bias=None):
    xs, xz = np.float32(0.05), np.uint8(120)
    ws = np.array([0.02, 0.03, 0.01], np.float32) if op == "QLinearConv" else np.float32(0.02)
    inits = {"xs": xs, "xz": xz, "w": w_q, "ws": ws, "wz": np.zeros(ws.shape, np.int8),
             "ys": np.float32(y_scale), "yz": np.uint8(y_zp)}
    ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias is not None:
        inits["b"] = bias
        ins.append("b")
    n = helper.make_node(op, ins, ["y"], name="q", **attrs)
    out_shape = None
    graph = helper.make_graph(
        [n], "q", [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, out_shape)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    y = sess.run(None, {"x": x})[0]
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.UINT8, y.shape))
    return m, y


def test_qlinear_conv():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (1, 2, 7, 7), dtype=np.uint8)
    w = rng.integers(-127, 128, (3, 2, 3, 3), dtype=np.int8)
    b = rng.integers(-500, 500, 3).astype(np.int32)
    m, want = _qlinear_model("QLinearConv", x, w, dict(pads=[1, 0, 1, 2], strides=[1, 2]),
                             0.1, 128, b)
    got = evaluate(from_onnx(m), x)
    assert got.dtype == np.uint8 and got.shape == want.shape
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert (got == want).mean() >= 0.99


def test_qlinear_matmul():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (4, 6), dtype=np.uint8)
    w = rng.integers(-127, 128, (6, 5), dtype=np.int8)
    m, want = _qlinear_model("QLinearMatMul", x, w, {}, 0.2, 100)
    got = evaluate(from_onnx(m), x)
    assert got.dtype == np.uint8
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert (got == want).mean() >= 0.95


def test_qdq_digits_compiled_bit_exact(qdq_model, digits):
    from vtakit.compiler.build_model import compile_model

    _, x, _ = digits
    mod = from_onnx(qdq_model)
    report = []
    exe = compile_model(qdq_model, "default", report=report)
    # onnxruntime's float requantization is not a VTA shift: int32 on VTA, exact on the host
    assert [r.where for r in report if r.kind in ("conv2d", "dense")] == ["vta+host"] * 5
    for xi in x[:2]:
        np.testing.assert_array_equal(np.asarray(exe.run(xi[None])), evaluate(mod, xi[None]))
