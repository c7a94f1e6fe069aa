"""ONNX frontend on whole models: the shipped digits CNN, float and quantized by onnxruntime
(QDQ), and the operator-format QLinearConv / QLinearMatMul."""

import numpy as np
import pytest

import onnx as onnx
import onnxruntime as ort

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vtakit.compiler.frontend import from_onnx  # noqa: E402
from vtakit.compiler.ir import Call, evaluate, post_order  # noqa: E402
from vtakit.compiler.models import digits_cnn_path, load_digits_split  # noqa: E402
from vtakit.compiler.quant.ort_reference import run_reference  # noqa: E402
from onnx_quant import quantize  # noqa: E402


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


@pytest.mark.parametrize("opset", [11, 17, 21, 22])
def test_float_digits_cnn_opsets(digits, opset):
    _, x, _ = digits
    model = onnx.load(str(digits_cnn_path()))
    model.opset_import[0].version = opset  # every op of this model means the same in 11-22
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
    from onnxruntime.quantization.shape_inference import quant_pre_process

    x_train = digits[0]


    act, per_channel = request.param.split("-", 1)
    d = tmp_path_factory.mktemp("qdq")
    # the usual onnxruntime flow: pre-process (folds batch norm into the convs), then quantize
    quant_pre_process(str(digits_cnn_path()), str(d / "pre.onnx"))
    quantize(str(d / "pre.onnx"), str(d / "q.onnx"), ({"input": x[None]} for x in x_train[:64]),
             act=act, per_channel=per_channel == "per-channel")
    return d / "q.onnx"


def test_qdq_digits_equal_reference(qdq_model, digits):
    """Bit for bit the host-independent reference of onnxruntime's fused kernels
    (:mod:`vtakit.compiler.quant.ort_reference`: QLinearConv, QLinearAdd, MaxPool,
    QLinearAveragePool, QGemm); onnxruntime's own u8s8 kernels saturate on x86 CPUs
    without VNNI, so its output depends on the CPU."""
    _, x, _ = digits
    model = onnx.load(str(qdq_model))
    # as onnxruntime fuses on arm64 (int8 kept): every conv integer (on x86 some int8
    # convs stay float ops: tests/test_onnx_ort_exact.py)
    mod = from_onnx(qdq_model, ort_cpu="arm64")
    got = ir_run(mod, x[:100])
    want = np.concatenate([run_reference(model, {"input": xi[None]}, cpu="arm64")[0]
                           for xi in x[:100]])
    np.testing.assert_array_equal(got, want)
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
    """Full-range int8 weights: vtakit equals the host-independent reference
    (:mod:`vtakit.compiler.quant.ort_reference`, onnxruntime's QLinearConv formula:
    exact integer accumulation, MlasRequantizeOutput) bit for bit. Not onnxruntime's
    own output: its u8s8 kernel saturates 16-bit pair sums on x86 CPUs without VNNI,
    so that answer depends on the CPU (the reference is checked against onnxruntime
    where no CPU saturates, in tests/test_ort_reference.py)."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (1, 2, 7, 7), dtype=np.uint8)
    w = rng.integers(-127, 128, (3, 2, 3, 3), dtype=np.int8)
    b = rng.integers(-500, 500, 3).astype(np.int32)
    m, _ = _qlinear_model("QLinearConv", x, w, dict(pads=[1, 0, 1, 2], strides=[1, 2]),
                          0.1, 128, b)
    want = run_reference(m, {"x": x})[0]
    got = evaluate(from_onnx(m), x)
    assert got.dtype == np.uint8 and got.shape == want.shape == (1, 3, 7, 4)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 20  # not a saturated, constant output


def test_qlinear_matmul():
    """As :func:`test_qlinear_conv` for QLinearMatMul (full-range weights, bit-exact
    with the host-independent reference)."""
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (4, 6), dtype=np.uint8)
    w = rng.integers(-127, 128, (6, 5), dtype=np.int8)
    m, _ = _qlinear_model("QLinearMatMul", x, w, {}, 0.2, 100)
    want = run_reference(m, {"x": x})[0]
    got = evaluate(from_onnx(m), x)
    assert got.dtype == np.uint8 and got.shape == want.shape == (4, 5)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 10


def test_qdq_digits_compiled_bit_exact(qdq_model, digits):
    from vtakit.compiler.build_model import compile_model

    _, x, _ = digits
    mod = from_onnx(qdq_model, ort_cpu="arm64")  # every conv integer (see above)
    report = []
    exe = compile_model(mod, "default", report=report)
    # onnxruntime's float requantization is not a VTA shift: int32 on VTA, exact on the host
    assert [r.where for r in report if r.kind in ("conv2d", "dense")] == ["vta+host"] * 5
    for xi in x[:2]:
        np.testing.assert_array_equal(np.asarray(exe.run(xi[None])), evaluate(mod, xi[None]))


def _mobile_net(rng):
    """Depthwise, grouped and strided convs with asymmetric pads, Clip, Concat, global
    pooling, Gemm and Sigmoid: the op mix of small mobile CNNs."""
    def w(*shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32))

    inits = {"w1": w(8, 3, 3, 3), "b1": w(8), "w2": w(8, 1, 3, 3), "b2": w(8),
             "w3": w(8, 4, 1, 1), "b3": w(8), "wf": w(5, 16), "bf": w(5),
             "lo": numpy_helper.from_array(np.float32(0)),
             "hi": numpy_helper.from_array(np.float32(6))}
    for k, v in inits.items():
        v.name = k
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[0, 0, 1, 1]),
             n("Relu", ["c1"], ["r1"]),
             n("Conv", ["r1", "w2", "b2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
             n("Clip", ["c2", "lo", "hi"], ["r2"]),
             n("Conv", ["r2", "w3", "b3"], ["c3"], group=2),
             n("Concat", ["c3", "r1"], ["cat"], axis=1),
             n("GlobalAveragePool", ["cat"], ["gap"]),
             n("Flatten", ["gap"], ["flat"]),
             n("Gemm", ["flat", "wf", "bf"], ["fc"], transB=1),
             n("Sigmoid", ["fc"], ["y"])]
    graph = helper.make_graph(nodes, "mobile", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 12, 12])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 5])], initializer=list(inits.values()))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_qdq_mobile_ops_equal_reference(tmp_path, act):
    """quantize_static (QDQ, per-channel int8 weights) of a small mobile CNN: vtakit's
    output equals the host-independent reference of onnxruntime's fused kernels
    (QLinearConv, QLinearConcat, QLinearGlobalAveragePool, QGemm, QLinearSigmoid) bit
    for bit. Host-independent: the reference is numpy integer arithmetic and single
    float32 operations (:mod:`vtakit.compiler.quant.ort_reference`), not onnxruntime's
    CPU-dependent u8s8 kernels; onnxruntime only calibrates the model, and whatever
    scales it picks on a CPU, both sides compute on the same model."""

    rng = np.random.default_rng(3)
    onnx.save(_mobile_net(rng), str(tmp_path / "f.onnx"))
    xs = rng.random((40, 1, 3, 12, 12)).astype(np.float32)


    quantize(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), ({"x": x} for x in xs[:20]),
             act=act, per_channel=True)
    model = onnx.load(str(tmp_path / "q.onnx"))
    mod = from_onnx(model, ort_cpu="arm64")  # int8 convs fused (x86: test_onnx_ort_exact.py)
    got = np.concatenate([evaluate(mod, x) for x in xs[20:]])
    want = np.concatenate([run_reference(model, {"x": x}, cpu="arm64")[0] for x in xs[20:]])
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 20
    ops = [nd.op.name for nd in post_order(mod["main"].body)
           if isinstance(nd, Call) and hasattr(nd.op, "name")]
    assert ops.count("nn.conv2d") == 3 and ops.count("qnn.requantize") >= 4
