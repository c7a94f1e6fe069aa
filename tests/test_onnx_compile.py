"""ONNX models through the whole compiler: VM executables with layers on the behavioral VTA,
bit-exact with the IR interpreter; control flow (If, Loop) through the VM."""

import numpy as np

import onnx

from onnx import TensorProto, helper

from vtakit.compiler.build_model import compile_model
from vtakit.compiler.frontend import from_onnx
from vtakit.compiler.ir import evaluate
from vtakit.compiler.models import digits_cnn_path, load_digits_split
from vtakit.compiler.quant.calibrate import calibrate

F = TensorProto.FLOAT


def test_calibrated_digits_on_vta_bit_exact():
    x_train, _, x_test, _ = load_digits_split()
    q = calibrate(from_onnx(digits_cnn_path()), x_train[:64, None])
    report = []
    exe = compile_model(q, "default", report=report)
    assert exe.output_names == ["logits"]
    # 4 convs (one with the residual add fused), the max pool, the 2x2 average pool
    # (window sums as an all-ones depthwise conv, requantized to its own scale by a
    # shift) and the dense layer: all whole on VTA
    assert [r.where for r in report if r.kind in ("conv2d", "conv2d_add", "dense",
                                                     "max_pool2d")] == ["vta"] * 7
    for x in x_test[:4]:
        np.testing.assert_array_equal(np.asarray(exe.run(x[None])), evaluate(q, x[None]))


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_loop_through_the_vm():
    # v = x; repeat M times: v = v * 0.5 + x
    body = helper.make_graph(
        [helper.make_node("Mul", ["v_in", "half"], ["h"]),
         helper.make_node("Add", ["h", "x"], ["v_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", F, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [2, 3])])
    m = _model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)],
               [helper.make_tensor_value_info("x", F, [2, 3]),
                helper.make_tensor_value_info("M", TensorProto.INT64, [])],
               [helper.make_tensor_value_info("y", F, [2, 3])],
               [onnx.numpy_helper.from_array(np.float32(0.5), "half")])
    exe = compile_model(from_onnx(m))
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for trips in (0, 1, 5):
        want = x.copy()
        for _ in range(trips):
            want = want * np.float32(0.5) + x
        got = exe.run({"x": x, "M": np.array(trips, np.int64)})
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_if_through_the_vm():
    def branch(op, name):
        return helper.make_graph([helper.make_node(op, ["x"], [name])], name, [],
                                 [helper.make_tensor_value_info(name, F, [2, 3])])

    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=branch("Relu", "t"),
                                 else_branch=branch("Neg", "e"))],
               [helper.make_tensor_value_info("x", F, [2, 3]),
                helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
               [helper.make_tensor_value_info("y", F, [2, 3])])
    exe = compile_model(from_onnx(m))
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(exe.run({"x": x, "c": np.array(True)})),
                                  np.maximum(x, 0))
    np.testing.assert_array_equal(np.asarray(exe.run({"x": x, "c": np.array(False)})), -x)


def test_report_names_the_opset_conversion_and_cpu_class(tmp_path, capsys):
    """``vtakit compile --report``: an ``import:`` line for an opset converted on import,
    and for a QDQ model the onnxruntime CPU class its kernels follow."""
    from vtakit.cli.main import main

    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = onnx.numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", F, x.shape),
                               helper.make_tensor_value_info("w", F, (3, 2, 3, 3))],
                              [helper.make_tensor_value_info("y", F, (1, 3, 3, 3))], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    m.ir_version = 3  # the initializer is also a graph input, as IR < 4 requires
    onnx.save(m, str(tmp_path / "old.onnx"))
    assert main(["compile", str(tmp_path / "old.onnx"), "-o", str(tmp_path / "old.vtax"),
                 "--report"]) == 0
    out = capsys.readouterr().out
    assert "import: opset 8 model converted to opset 13 by onnx.version_converter" in out

    q = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], "q",
        [helper.make_tensor_value_info("x", F, (1, 4))],
        [helper.make_tensor_value_info("y", F, (1, 4))],
        [onnx.numpy_helper.from_array(np.float32(0.1), "s"),
         onnx.numpy_helper.from_array(np.int8(3), "z")])
    qm = helper.make_model(q, opset_imports=[helper.make_opsetid("", 13)])
    qm.ir_version = 8
    onnx.save(qm, str(tmp_path / "q.onnx"))
    assert main(["compile", str(tmp_path / "q.onnx"), "-o", str(tmp_path / "q.vtax"),
                 "--report"]) == 0
    out = capsys.readouterr().out
    assert ("import: quantized kernels follow onnxruntime 1.32's CPU session on x86-vnni "
            "(1 int8 Q/DQ pair(s) run as uint8, as its QDQS8ToU8Transformer does)") in out
