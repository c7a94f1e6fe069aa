"""A MobileNetV2-style float ONNX model, as an exporter writes one (Conv with bias and
pads, depthwise groups, Clip(0, 6) with input bounds, inverted residual Adds,
GlobalAveragePool, Flatten, Gemm), through calibration and QDQ quantization."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper

from vtakit.compiler.build_model import compile_model
from onnx_quant import quantize  # noqa: E402

SHAPE = (1, 3, 32, 32)


def _mobilenet(path):
    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def tensor(arr):
        name = f"t{len(inits)}"
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    def node(op, inputs, **attrs):
        out = f"n{len(nodes)}"
        nodes.append(oh.make_node(op, inputs, [out], **attrs))
        return out

    def conv(x, cin, cout, k=1, s=1, g=1, relu6=True):
        w = rng.normal(0, (2.0 / (cin // g * k * k)) ** 0.5, (cout, cin // g, k, k))
        y = node("Conv", [x, tensor(w), tensor(rng.normal(0, 0.1, cout))],
                 kernel_shape=[k, k], strides=[s, s], group=g, pads=[k // 2] * 4)
        return node("Clip", [y, tensor(0.0), tensor(6.0)]) if relu6 else y

    y = conv("input", 3, 16, k=3, s=2)
    for cin, cout, s, t in [(16, 8, 1, 1), (8, 16, 2, 6), (16, 16, 1, 6), (16, 24, 2, 6),
                            (24, 24, 1, 6)]:
        z = conv(y, cin, cin * t) if t != 1 else y
        z = conv(conv(z, cin * t, cin * t, k=3, s=s, g=cin * t), cin * t, cout, relu6=False)
        y = node("Add", [y, z]) if s == 1 and cin == cout else z
    y = node("Flatten", [node("GlobalAveragePool", [conv(y, 24, 64)])], axis=1)
    nodes.append(oh.make_node("Gemm", [y, tensor(rng.normal(0, 0.2, (10, 64))),
                                       tensor(rng.normal(0, 0.1, 10))], ["logits"], transB=1))
    graph = oh.make_graph(nodes, "mobilenet", [oh.make_tensor_value_info(
        "input", TensorProto.FLOAT, SHAPE)], [oh.make_tensor_value_info(
            "logits", TensorProto.FLOAT, (1, 10))], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    return _mobilenet(tmp_path_factory.mktemp("mnv2") / "mobilenet.onnx")


def _images(n, seed):
    return np.random.default_rng(seed).uniform(0, 1, (n,) + SHAPE).astype(np.float32)


def test_calibrated_mobilenet_runs_on_vta(mobilenet):
    """Every layer on VTA (the input quantize aside), every intermediate kept on the
    device, and onnxruntime's top-1 on 30 images."""
    import onnxruntime as ort
    report = []
    exe = compile_model(mobilenet, "default", calibrate=_images(32, 1), report=report)
    assert [r.kind for r in report if r.where == "host"] == ["qnn.quantize"]
    assert exe.dram_plan()["device_tensors"] == sum(r.where != "host" for r in report) - 1
    sess = ort.InferenceSession(mobilenet)
    agree = [np.argmax(exe.run([x])) == np.argmax(sess.run(None, {"input": x})[0])
             for x in _images(30, 2)]
    assert np.mean(agree) >= 0.95


def test_qdq_mobilenet_equals_onnxruntime_reference(mobilenet, tmp_path):
    """The same network through onnxruntime's quantize_static (QDQ, per-channel int8):
    the compiled model's outputs equal, bit for bit, the host-independent reference of
    onnxruntime's fused kernels (:mod:`vtakit.compiler.quant.ort_reference`: exact
    integer QLinearConv / QGemm accumulation, QLinearAdd and QLinearGlobalAveragePool
    formulas in single float32 operations). Not onnxruntime's own output: its u8s8
    kernels saturate on x86 CPUs without VNNI and it fuses int8 convolutions only on
    arm64, so its answer depends on the CPU; the reference does not."""

    from vtakit.compiler.quant.ort_reference import run_reference

    qdq = str(tmp_path / "mobilenet_qdq.onnx")
    quantize(mobilenet, qdq, ({"input": x} for x in _images(16, 3)), act="int8",
             per_channel=True)
    exe = compile_model(qdq, "default")
    model = onnx.load(qdq)
    for x in _images(10, 4):
        np.testing.assert_array_equal(np.asarray(exe.run([x])),
                                      run_reference(model, {"input": x})[0])
