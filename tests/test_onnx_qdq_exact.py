"""Exact ONNX QDQ import: every pattern onnxruntime fuses into an integer kernel, bit for bit.

A float CNN holding every fused op (Conv strided / padded / depthwise, Relu, Add,
Mul, MaxPool, AveragePool, Concat of differently scaled inputs, LeakyRelu, Sigmoid,
GlobalAveragePool, Flatten, Gemm, MatMul, Softmax) is quantized by onnxruntime's
``quantize_static`` (uint8 and int8 activations, per-tensor and per-channel
weights). Every quantized tensor of vtakit's import (each QuantizeLinear output made
a graph output) must equal the host-independent reference of onnxruntime's fused
kernels (:mod:`vtakit.compiler.quant.ort_reference`, itself checked against
onnxruntime in tests/test_ort_reference.py). Host-independent: both sides are numpy
integer arithmetic and single float32 operations; onnxruntime only calibrates the
model, and whatever it picks, both sides compute the same model.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vtakit.compiler.frontend import from_onnx
from vtakit.compiler.ir import Call, evaluate, post_order
from vtakit.compiler.quant.ort_reference import run_reference
from onnx_quant import quantize  # noqa: E402

SHAPE = (1, 3, 12, 12)


def _every_op_net():
    rng = np.random.default_rng(7)
    inits = []

    def w(name, *shape, s=0.3):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * s)
                                             .astype(np.float32), name))
        return name

    n = helper.make_node
    nodes = [
        n("Conv", ["x", w("w1", 8, 3, 3, 3), w("b1", 8)], ["c1"], strides=[2, 2],
          pads=[1, 0, 1, 1]),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", w("w2", 8, 1, 3, 3), w("b2", 8)], ["c2"], group=8, pads=[1, 1, 1, 1]),
        n("Add", ["c2", "r1"], ["a1"]),
        n("Mul", ["a1", "r1"], ["m1"]),
        n("MaxPool", ["m1"], ["mp"], kernel_shape=[2, 2], strides=[1, 1]),
        n("AveragePool", ["r1"], ["ap"], kernel_shape=[2, 2], strides=[1, 1]),
        n("AveragePool", ["c2"], ["ap2"], kernel_shape=[3, 3], strides=[1, 1],
          pads=[1, 1, 1, 1]),
        n("Concat", ["mp", "ap"], ["cat"], axis=1),
        n("LeakyRelu", ["cat"], ["lr"], alpha=0.1),
        n("Sigmoid", ["ap2"], ["sg"]),
        n("GlobalAveragePool", ["lr"], ["gap"]),
        n("GlobalAveragePool", ["sg"], ["gap2"]),
        n("Concat", ["gap", "gap2"], ["gcat"], axis=1),
        n("Flatten", ["gcat"], ["flat"]),
        n("Gemm", ["flat", w("wf", 10, 24), w("bf", 10)], ["fc"], transB=1),
        n("MatMul", ["fc", w("wm", 10, 6)], ["mm"]),
        n("Softmax", ["mm"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "every_op", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, SHAPE)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, (1, 6))], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _images(n, seed):
    return np.random.default_rng(seed).uniform(0, 1, (n,) + SHAPE).astype(np.float32)


def _quantize(tmp_path, act, per_channel):

    onnx.save(_every_op_net(), str(tmp_path / "f.onnx"))


    out = tmp_path / f"q_{act}_{per_channel}.onnx"
    quantize(str(tmp_path / "f.onnx"), str(out), ({"x": x} for x in _images(16, 1)), act=act,
             per_channel=per_channel)
    return out


def _with_quantized_outputs(model):
    """Every QuantizeLinear output also a graph output (with its inferred shape)."""
    m = onnx.shape_inference.infer_shapes(model)
    info = {v.name: v for v in m.graph.value_info}
    have = {o.name for o in m.graph.output}
    for nd in m.graph.node:
        if nd.op_type == "QuantizeLinear" and nd.output[0] not in have:
            m.graph.output.append(info[nd.output[0]])
    return m


@pytest.mark.parametrize("act", ["uint8", "int8"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_every_fused_kernel_bit_exact(tmp_path, act, per_channel):
    model = onnx.load(str(_quantize(tmp_path, act, per_channel)))
    ops = {nd.op_type for nd in model.graph.node}
    assert {"Conv", "Add", "Mul", "MaxPool", "AveragePool", "Concat", "LeakyRelu", "Sigmoid",
            "GlobalAveragePool", "Gemm", "MatMul", "Softmax"} <= ops
    full = _with_quantized_outputs(model)
    names = [o.name for o in full.graph.output]
    mod = from_onnx(full)
    n_values = 0
    for x in _images(6, 2):
        got = evaluate(mod, x)
        want = run_reference(full, {"x": x})
        assert len(got) == len(want) == len(names)
        for name, g, w in zip(names, got, want):
            assert g.dtype == w.dtype, name
            np.testing.assert_array_equal(g, w, err_msg=name)
            n_values += w.size
    assert n_values > 3000
    # every fused group became its integer kernel, none a float detour
    called = [nd.op.name for nd in post_order(mod["main"].body)
              if isinstance(nd, Call) and hasattr(nd.op, "name")]
    assert called.count("nn.conv2d") == 2 and called.count("nn.dense") == 2
    assert called.count("qnn.ort_avg_pool2d") == 2
    assert called.count("qnn.ort_global_avg_pool2d") == 2
    assert called.count("qnn.lut") == 2 and called.count("qnn.ort_softmax") == 1
    assert called.count("qnn.add") == 1 and called.count("qnn.mul") == 1
    assert "sigmoid" not in called and "nn.softmax" not in called
    assert "nn.avg_pool2d" not in called and "nn.global_avg_pool2d" not in called


@pytest.mark.parametrize("act", ["uint8", "int8"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_compiled_equals_reference_behavioral_and_verilator(tmp_path, act, per_channel):
    """Compiled for the default VTA (convs, dense layers and the max pool on VTA, the
    float32 kernels on the host): the behavioral model and the Verilator RTL give the
    reference's output bit for bit."""
    from vtakit.compiler.build_model import compile_model

    path = _quantize(tmp_path, act, per_channel)
    model = onnx.load(str(path))
    report = []
    exe = compile_model(path, "default", report=report)
    # x86 (the default onnxruntime CPU class): int8 convs whose output is shared stay
    # float ops between DequantizeLinear and QuantizeLinear, on the host
    assert [r.kind for r in report if r.where != "host"] == (
        ["conv2d", "conv2d", "max_pool2d", "dense", "dense"] if act == "uint8" else
        ["max_pool2d", "dense", "dense"])
    for i, x in enumerate(_images(2, 3)):
        want = run_reference(model, {"x": x})[0]
        np.testing.assert_array_equal(np.asarray(exe.run([x])), want)
        if i == 0:
            np.testing.assert_array_equal(np.asarray(exe.run([x], backend="verilator")), want)


def attn_net():
    """x (1, 5, 8) -> MatMul by a constant (8, 6) -> Add a constant -> Softmax(-1)."""
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (8, 6)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.5, 6).astype(np.float32), "b")]
    n = helper.make_node
    graph = helper.make_graph(
        [n("MatMul", ["x", "w"], ["mm"]), n("Add", ["mm", "b"], ["a"]),
         n("Softmax", ["a"], ["y"], axis=-1)], "attn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 5, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 5, 6))], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_batched_matmul_and_softmax_bit_exact(tmp_path, act):
    """MatMul of a (1, 5, 8) tensor by a constant (QLinearMatMul over the rows), Add of a
    constant bias, Softmax over the last axis: every quantized tensor equals the reference."""

    onnx.save(attn_net(), str(tmp_path / "f.onnx"))
    rng = np.random.default_rng(4)
    xs = rng.normal(0, 1, (12, 1, 5, 8)).astype(np.float32)


    quantize(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), ({"x": x} for x in xs[:8]),
             act=act)
    full = _with_quantized_outputs(onnx.load(str(tmp_path / "q.onnx")))
    mod = from_onnx(full)
    called = [nd.op.name for nd in post_order(mod["main"].body)
              if isinstance(nd, Call) and hasattr(nd.op, "name")]
    assert called.count("nn.dense") == 1 and called.count("qnn.ort_softmax") == 1
    for x in xs[8:]:
        for g, w in zip(evaluate(mod, x), run_reference(full, {"x": x})):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_operator_format_bit_exact(tmp_path, act):
    """The same net through quantize_static(quant_format=QOperator): QLinearConv,
    com.microsoft QLinearAdd / QLinearMul / QLinearAveragePool / QLinearConcat /
    QLinearLeakyRelu / QLinearSigmoid / QLinearGlobalAveragePool / QGemm /
    QLinearSoftmax, QLinearMatMul: vtakit equals the reference on every output."""

    onnx.save(_every_op_net(), str(tmp_path / "f.onnx"))


    quantize(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"),
             ({"x": x} for x in _images(16, 1)), fmt="QOperator", act=act, per_channel=True)
    model = onnx.load(str(tmp_path / "q.onnx"))
    ms = {nd.op_type for nd in model.graph.node if nd.domain == "com.microsoft"}
    assert {"QLinearAdd", "QLinearMul", "QLinearAveragePool", "QLinearConcat",
            "QLinearLeakyRelu", "QLinearSigmoid", "QLinearGlobalAveragePool", "QGemm",
            "QLinearSoftmax"} <= ms
    mod = from_onnx(model)
    for x in _images(4, 2):
        np.testing.assert_array_equal(evaluate(mod, x), run_reference(model, {"x": x})[0])
    from vtakit.compiler.build_model import compile_model

    exe = compile_model(tmp_path / "q.onnx", "default")
    x = _images(1, 5)[0]
    np.testing.assert_array_equal(np.asarray(exe.run([x])), run_reference(model, {"x": x})[0])


def conv1d_net():
    """x (1, 3, 40) -> Conv1D (6 filters of 5, pads 2/1, stride 2) + bias -> Relu."""
    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array(rng.normal(0, 0.4, (6, 3, 5)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.2, 6).astype(np.float32), "b")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[2, 1], strides=[2]),
         helper.make_node("Relu", ["c"], ["y"])], "conv1d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 40))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 6, 20))], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_conv1d_bit_exact(tmp_path, act):
    """A 1-D QDQ convolution (audio-style, padded, strided) stays the integer layer."""

    onnx.save(conv1d_net(), str(tmp_path / "f.onnx"))
    rng = np.random.default_rng(8)
    xs = rng.normal(0, 1, (10, 1, 3, 40)).astype(np.float32)


    quantize(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), ({"x": x} for x in xs[:6]),
             act=act, per_channel=True)
    model = onnx.load(str(tmp_path / "q.onnx"))
    mod = from_onnx(model)
    called = [nd.op.name for nd in post_order(mod["main"].body)
              if isinstance(nd, Call) and hasattr(nd.op, "name")]
    assert "qnn.requantize" in called and "qnn.dequantize" in called[-2:]
    assert not [c for c in post_order(mod["main"].body) if isinstance(c, Call)
                and getattr(c.op, "name", "") == "nn.conv2d" and c.args[1].data.dtype != np.int8]
    for x in xs[6:]:
        np.testing.assert_array_equal(evaluate(mod, x), run_reference(model, {"x": x})[0])
