"""ONNX frontend, op by op: the IR interpreter on the imported graph vs onnxruntime."""

import numpy as np
import pytest

import onnxruntime as ort

from onnx import TensorProto, helper, numpy_helper

from vtakit.compiler.frontend import OnnxImportError, from_onnx
from vtakit.compiler.ir import evaluate

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def make(nodes, inputs, outputs, inits=None, opset=13, elem=None):
    """A model of ``nodes``; ``inputs`` name -> array, ``outputs`` names (shapes inferred)."""
    elem = elem or {}
    graph = helper.make_graph(
        nodes, "case",
        [helper.make_tensor_value_info(n, elem.get(n, helper.np_dtype_to_tensor_dtype(a.dtype)),
                                       a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, elem.get(n, F), None) for n in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    # output shapes as onnxruntime computes them (the checker wants them declared)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: a for n, a in inputs.items() if n not in (inits or {})}
    for out, val in zip(model.graph.output, sess.run(None, feeds)):
        out.CopyFrom(helper.make_tensor_value_info(
            out.name, helper.np_dtype_to_tensor_dtype(val.dtype), val.shape))
    return model


def run_both(model, inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, inputs)
    got = evaluate(from_onnx(model), **inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want)
    return got, want


def check(model, inputs, atol=1e-5):
    got, want = run_both(model, inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)


def node(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), name=f"{op.lower()}_node", **attrs)


CONV_CASES = {
    "plain": ((1, 3, 7, 7), (4, 3, 3, 3), {}),
    "strides_asym_pads": ((1, 3, 9, 8), (5, 3, 3, 3), dict(strides=[2, 1], pads=[0, 1, 2, 1])),
    "groups": ((1, 4, 6, 6), (6, 2, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),
    "depthwise": ((1, 4, 6, 6), (4, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1])),
    "dilation": ((1, 2, 9, 9), (3, 2, 3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
    "same_upper": ((1, 2, 7, 7), (3, 2, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    "same_lower": ((1, 2, 6, 6), (3, 2, 2, 2), dict(auto_pad="SAME_LOWER")),
    "conv1d": ((1, 2, 10), (3, 2, 3), dict(pads=[1, 0], strides=[2])),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv(case):
    xs, ws, attrs = CONV_CASES[case]
    x = rand(*xs)
    m = make([node("Conv", ["x", "w", "b"], **attrs)], {"x": x}, ["y"],
             {"w": rand(*ws), "b": rand(ws[0])})
    check(m, {"x": x})


@pytest.mark.parametrize("attrs", [dict(strides=[2, 2]), dict(strides=[2, 2], pads=[1, 1, 1, 1],
                                                            output_padding=[1, 1]),
                                   dict(dilations=[2, 1])])
def test_conv_transpose(attrs):
    x = rand(1, 3, 4, 5)
    m = make([node("ConvTranspose", ["x", "w", "b"], **attrs)], {"x": x}, ["y"],
             {"w": rand(3, 2, 3, 3), "b": rand(2)})
    check(m, {"x": x})


@pytest.mark.parametrize("attrs", [{}, dict(transA=1), dict(transB=1, alpha=0.5, beta=2.0)])
def test_gemm(attrs):
    a = rand(3, 4) if not attrs.get("transA") else rand(4, 3)
    b = rand(5, 4) if attrs.get("transB") else rand(4, 5)
    m = make([node("Gemm", ["a", "b", "c"], **attrs)], {"a": a}, ["y"], {"b": b, "c": rand(5)})
    check(m, {"a": a})


@pytest.mark.parametrize("xs", [(3, 4), (2, 3, 4)])
def test_matmul(xs):
    x = rand(*xs)
    check(make([node("MatMul", ["x", "w"])], {"x": x}, ["y"], {"w": rand(4, 6)}), {"x": x})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary_broadcast(op):
    x, y = rand(2, 3, 4, 5), rand(3, 1, 1)
    if op == "Div":
        y = np.abs(y) + 0.5
    check(make([node(op, ["x", "c"], ["y"])], {"x": x}, ["y"], {"c": y}), {"x": x})
    z = rand(1, 3, 1, 5)
    check(make([node(op, ["x", "z"], ["y"])], {"x": x, "z": z}, ["y"]), {"x": x, "z": z})


@pytest.mark.parametrize("op,attrs", [("Relu", {}), ("Sigmoid", {}), ("Tanh", {}),
                                      ("LeakyRelu", dict(alpha=0.2)), ("Identity", {}),
                                      ("Dropout", {}), ("Exp", {}), ("Abs", {})])
def test_unary(op, attrs):
    x = rand(2, 3, 4)
    check(make([node(op, ["x"], **attrs)], {"x": x}, ["y"]), {"x": x})


@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo", ""), ("", "hi")])
def test_clip(bounds):
    x = rand(2, 8)
    inits = {"lo": np.float32(-0.5), "hi": np.float32(0.7)}
    m = make([node("Clip", ["x"] + list(bounds))], {"x": x}, ["y"],
             {k: v for k, v in inits.items() if k in bounds})
    check(m, {"x": x})


@pytest.mark.parametrize("opset,axis", [(11, 1), (11, 2), (13, 1), (13, -1)])
def test_softmax(opset, axis):
    x = rand(2, 3, 4)
    check(make([node("Softmax", ["x"], axis=axis)], {"x": x}, ["y"], opset=opset), {"x": x})


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER")),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 0],
                         count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {})])
def test_pool(op, attrs):
    x = rand(1, 3, 7, 7)
    check(make([node(op, ["x"], **attrs)], {"x": x}, ["y"]), {"x": x})


def test_batch_norm_flatten_transpose_concat():
    x = rand(2, 3, 4, 5)
    inits = {"g": rand(3), "b": rand(3), "m": rand(3), "v": np.abs(rand(3)) + 0.1}
    nodes = [node("BatchNormalization", ["x", "g", "b", "m", "v"], ["bn"], epsilon=1e-3),
             node("Transpose", ["bn"], ["t"], perm=[0, 2, 3, 1]),
             node("Concat", ["t", "t"], ["c"], axis=3),
             node("Flatten", ["c"], ["y"], axis=2)]
    check(make(nodes, {"x": x}, ["y"], inits), {"x": x})


@pytest.mark.parametrize("opset", [11, 18])
def test_pad(opset):
    x = rand(1, 2, 3, 4)
    if opset == 18:  # pads over the given axes only
        inits = {"p": np.array([1, 0, 2, 1], np.int64), "v": np.float32(0.5),
                 "ax": np.array([2, 3], np.int64)}
        ins = ["x", "p", "v", "ax"]
    else:
        inits = {"p": np.array([0, 0, 1, 0, 0, 0, 2, 1], np.int64), "v": np.float32(0.5)}
        ins = ["x", "p", "v"]
    check(make([node("Pad", ins, mode="constant")], {"x": x}, ["y"], inits, opset=opset),
          {"x": x})


def test_shape_arithmetic_is_folded():
    # reshape to (batch, -1) with the batch read from Shape: Shape, Gather, Unsqueeze,
    # Concat, Cast and Constant never reach the IR
    x = rand(2, 3, 4)
    nodes = [node("Shape", ["x"], ["s"]),
             node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array(0, np.int64))),
             node("Gather", ["s", "i0"], ["n"], axis=0),
             node("Unsqueeze", ["n", "ax"], ["n1"]),
             node("Constant", [], ["m1"], value_ints=[-1]),
             node("Concat", ["n1", "m1"], ["shape_f"], axis=0),
             node("Cast", ["shape_f"], ["shape"], to=TensorProto.INT64),
             node("Reshape", ["x", "shape"], ["r"]),
             node("Relu", ["r"], ["y"])]
    m = make(nodes, {"x": x}, ["y"], {"ax": np.array([0], np.int64)})
    check(m, {"x": x})
    ops = {type(n).__name__ + ":" + getattr(getattr(n, "op", None), "name", "")
           for n in _nodes(from_onnx(m)["main"].body)}
    assert ops == {"Var:", "Call:reshape", "Call:nn.relu"}


def test_reshape_zero_and_minus_one():
    x = rand(2, 3, 4)
    m = make([node("Reshape", ["x", "s"])], {"x": x}, ["y"], {"s": np.array([0, -1], np.int64)})
    check(m, {"x": x})


def test_squeeze_unsqueeze():
    x = rand(1, 3, 1, 4)
    nodes = [node("Squeeze", ["x", "a"], ["s"]), node("Unsqueeze", ["s", "b"], ["y"])]
    check(make(nodes, {"x": x}, ["y"], {"a": np.array([0, 2], np.int64),
                                        "b": np.array([-1], np.int64)}), {"x": x})


def _nodes(expr):
    from vtakit.compiler.ir import post_order

    return post_order(expr)


def test_io_names_dtypes_and_symbolic_batch():
    x = rand(1, 4)
    graph = helper.make_graph([node("Relu", ["in:0"], ["out:0"])], "g",
                              [helper.make_tensor_value_info("in:0", F, ["N", 4])],
                              [helper.make_tensor_value_info("out:0", F, ["N", 4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod = from_onnx(m)
    main = mod["main"]
    assert [p.name_hint for p in main.params] == ["in:0"]
    assert main.params[0].type_annotation.shape == (1, 4)
    assert main.attrs["output_names"] == ("out:0",)
    mod3 = from_onnx(m, shapes={"in:0": (3, 4)})
    assert mod3["main"].params[0].type_annotation.shape == (3, 4)
    np.testing.assert_array_equal(evaluate(mod, x), np.maximum(x, 0))


def test_multiple_outputs():
    x = rand(2, 3)
    m = make([node("Relu", ["x"], ["a"]), node("Neg", ["x"], ["b"])], {"x": x}, ["a", "b"])
    check(m, {"x": x})


# ---- control flow ----------------------------------------------------------------------------

def _branch(op, name):
    return helper.make_graph([helper.make_node(op, ["x"], [name + "_out"])], name, [],
                             [helper.make_tensor_value_info(name + "_out", F, [2, 3])])


@pytest.mark.parametrize("flag", [True, False])
def test_if_runtime_condition(flag):
    x = rand(2, 3)
    nodes = [node("If", ["c"], ["y"], then_branch=_branch("Relu", "then"),
                  else_branch=_branch("Neg", "else"))]
    m = make(nodes, {"x": x, "c": np.array(flag)}, ["y"])
    check(m, {"x": x, "c": np.array(flag)})


def test_if_constant_condition_is_inlined():
    x = rand(2, 3)
    nodes = [node("If", ["c"], ["y"], then_branch=_branch("Relu", "then"),
                  else_branch=_branch("Neg", "else"))]
    m = make(nodes, {"x": x}, ["y"], {"c": np.array(False)})
    check(m, {"x": x})
    assert not any(type(n).__name__ == "If" for n in _nodes(from_onnx(m)["main"].body))


def test_loop_becomes_recursive_function():
    # v = x; repeat M times: v = v * 0.5 + x  (x read from the outer scope)
    x = rand(2, 3)
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
    nodes = [node("Loop", ["M", "", "x"], ["y"], body=body)]
    m = make(nodes, {"x": x, "M": np.array(4, np.int64)}, ["y"], {"half": np.float32(0.5)})
    check(m, {"x": x, "M": np.array(4, np.int64)})
    mod = from_onnx(m)
    assert "loop_0" in mod


# ---- errors ----------------------------------------------------------------------------------

def test_unsupported_op_names_type_node_and_list():
    # sequences are what a CNN kit refuses (one line, the op, the node and the list)
    x = rand(2, 3)
    graph = helper.make_graph(
        [node("SequenceConstruct", ["x", "x"], ["s"]), node("SequenceLength", ["s"], ["y"])],
        "g", [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    with pytest.raises(OnnxImportError,
                       match=r"^unsupported ONNX op SequenceConstruct \(node "
                             r"'sequenceconstruct_node'\); supported: "
                             r".*\bConv\b.*\bQuantizeLinear\b") as e:
        from_onnx(m)
    assert "\n" not in str(e.value)


def test_op_without_converter_runs_in_the_reference_evaluator():
    # Hardmax has no IR op: it runs as onnx.reference on the host, as onnx defines it
    x = rand(2, 3)
    m = make([node("Hardmax", ["x"])], {"x": x}, ["y"])
    mod = from_onnx(m)
    assert "onnx.reference" in str(mod)
    check(m, {"x": x})


def test_malformed_file(tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"\x08\x07garbage\xff\xff\xff")
    with pytest.raises(OnnxImportError, match=r"bad\.onnx: .*") as e:
        from_onnx(p)
    assert "\n" not in str(e.value)
    with pytest.raises(OnnxImportError, match=r"no such file"):
        from_onnx(tmp_path / "missing.onnx")


def test_malformed_graph_one_line():
    graph = helper.make_graph([node("Relu", ["nowhere"])], "g",
                              [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y", F, [2, 3])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"^the model: malformed ONNX model: ") as e:
        from_onnx(m)
    assert "\n" not in str(e.value)


def test_opset_out_of_range():
    x = rand(2, 3)
    m = make([node("Relu", ["x"])], {"x": x}, ["y"])
    m.opset_import[0].version = 23
    m.ir_version = 11
    with pytest.raises(OnnxImportError, match=r"opset 23 is not supported; vtakit imports "
                                              r"opsets 1-22"):
        from_onnx(m)


def test_old_opset_converted_and_noted():
    # opset 9 Upsample-era model: converted by onnx.version_converter, said in the notes
    x = rand(2, 3)
    m = make([node("Relu", ["x"])], {"x": x}, ["y"], opset=9)
    mod = from_onnx(m)
    assert mod["main"].attrs["import_notes"] == (
        "opset 9 model converted to opset 13 by onnx.version_converter",)
    np.testing.assert_array_equal(evaluate(mod, x), np.maximum(x, 0))


def test_runtime_slice_runs_on_the_host():
    x = rand(2, 3)
    m = make([node("Slice", ["x", "st", "en"])], {"x": x}, ["y"],
             {"st": np.array([0], np.int64), "en": np.array([1], np.int64)})
    check(m, {"x": x})


def test_bad_shapes_argument():
    x = rand(2, 3)
    m = make([node("Relu", ["x"])], {"x": x}, ["y"])
    with pytest.raises(OnnxImportError, match=r"shapes names \['z'\], which are not graph "
                                              r"inputs; the inputs are \['x'\]"):
        from_onnx(m, shapes={"z": (1,)})


# ---- ops without a converter: onnx's reference evaluator on the host --------------------------

@pytest.mark.parametrize("op,attrs", [("LRN", dict(size=3, alpha=1e-3, beta=0.75, bias=1.0)),
                                      ("InstanceNormalization", {}), ("PRelu", {}),
                                      ("Elu", dict(alpha=0.7)), ("Sign", {})])
def test_reference_evaluated_ops(op, attrs):
    x = rand(1, 4, 5, 5)
    extra, ins = {}, ["x"]
    if op == "InstanceNormalization":
        extra = {"s": rand(4), "b": rand(4)}
        ins = ["x", "s", "b"]
    if op == "PRelu":
        extra = {"slope": rand(4, 1, 1)}
        ins = ["x", "slope"]
    m = make([node(op, ins, **attrs)], {"x": x, **extra}, ["y"], extra)
    mod = from_onnx(m)
    assert "onnx.reference" in str(mod)
    # exactly what onnx's reference evaluator gives (onnxruntime's LRN differs from it by
    # up to 0.3%)
    from onnx.reference import ReferenceEvaluator

    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(evaluate(mod, x), want)


def test_runtime_resize_where_expand_run_on_the_host():
    x = rand(1, 2, 3, 3)
    nodes = [node("Resize", ["x", "", "sc"], ["r"], mode="nearest"),
             node("Greater", ["r", "zero"], ["g"]),
             node("Where", ["g", "r", "zero"], ["w"]),
             node("Expand", ["w", "shape"], ["y"])]
    inits = {"sc": np.array([1, 1, 2, 2], np.float32), "zero": np.float32(0),
             "shape": np.array([2, 2, 6, 6], np.int64)}
    m = make([nodes[0]] + [n for n in nodes[1:]], {"x": x}, ["y"], inits)
    check(m, {"x": x})


def test_dropout_mask_output():
    # inference Dropout: the output is the input, the mask (used or not) all true
    x = rand(2, 3)
    m = make([node("Dropout", ["x"], ["d", "mask"]), node("Relu", ["d"], ["y"])], {"x": x},
             ["y"])
    check(m, {"x": x})
    m = make([node("Dropout", ["x"], ["y", "mask"])], {"x": x}, ["y", "mask"],
             elem={"mask": TensorProto.BOOL})
    check(m, {"x": x})


def test_sum_of_three_is_a_chain_of_adds():
    x, y, z = rand(2, 3), rand(2, 3), rand(1, 3)
    m = make([node("Sum", ["x", "y", "z"], ["s"])], {"x": x, "y": y, "z": z}, ["s"])
    mod = from_onnx(m)
    assert str(mod).count("add(") == 2 and "onnx.reference" not in str(mod)
    check(m, {"x": x, "y": y, "z": z})
