"""The host-independent reference of onnxruntime's fused integer kernels
(:mod:`vtakit.compiler.quant.ort_reference`) against onnxruntime itself, bit for bit.

Only where onnxruntime is exact on every CPU: weights within 7 bits (``|w| <= 64``),
so the u8s8 kernels of x86 CPUs without VNNI (``vpmaddubsw``: two u8 x s8 products
summed in a saturating int16) cannot saturate (255 * 64 * 2 = 32640 < 32767), and
uint8 activations for whole QDQ models (onnxruntime fuses int8-activation Conv /
MatMul groups on arm64 only). The verdict is then the same on any x86-64 or arm64
CPU, with or without VNNI. The other tests compare vtakit with this reference on
full-range models, where onnxruntime's own answer depends on the CPU.
"""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from vtakit.compiler.quant import ort_kernels as K
from vtakit.compiler.quant.ort_reference import run_reference
from onnx_quant import quantize  # noqa: E402


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _qlinear(op, xdtype, per_channel, rng):
    npx = np.dtype(xdtype)
    lo, hi = np.iinfo(npx).min, np.iinfo(npx).max
    if op == "QLinearConv":
        x = rng.integers(lo, hi + 1, (2, 8, 11, 10)).astype(npx)
        w = rng.integers(-64, 65, (12, 4, 3, 3)).astype(np.int8)
        n_out, attrs = 12, dict(pads=[1, 2, 0, 1], strides=[2, 1], group=2)
    else:
        x = rng.integers(lo, hi + 1, (7, 40)).astype(npx)
        w = rng.integers(-64, 65, (40, 9)).astype(np.int8)
        n_out, attrs = 9, {}
    ws = (rng.uniform(0.002, 0.01, n_out) if per_channel else np.array(0.005)).astype(np.float32)
    if op == "QLinearMatMul" and per_channel:
        ws = ws.reshape(1, -1)[0]
    xz = npx.type(int(rng.integers(lo, hi)))
    bias = rng.integers(-3000, 3000, n_out).astype(np.int32)
    # the output range from the float values, so that few outputs saturate
    if op == "QLinearConv":
        acc = K.conv_acc(x, xz, w, 0, bias, strides=(2, 1), pads=(1, 2, 0, 1), group=2)
        yf = acc * (0.04 * ws.reshape(1, -1, 1, 1) if per_channel else 0.04 * ws)
    else:
        yf = K.matmul_acc(x, xz, w, 0) * (0.04 * ws)
    ys = np.float32((yf.max() - yf.min()) / 250)
    yz = npx.type(lo + 3 + int(round(-yf.min() / ys)))
    inits = {"xs": np.float32(0.04), "xz": xz, "w": w, "ws": ws, "wz": np.zeros(ws.shape, np.int8),
             "ys": ys, "yz": yz}
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if op == "QLinearConv":
        inits["b"] = bias
        names.append("b")
    t = TensorProto.UINT8 if xdtype == "uint8" else TensorProto.INT8
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "q",
        [helper.make_tensor_value_info("x", t, x.shape)],
        [helper.make_tensor_value_info("y", t, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m, x


@pytest.mark.parametrize("op", ["QLinearConv", "QLinearMatMul"])
@pytest.mark.parametrize("xdtype", ["uint8", "int8"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_ops_equal_onnxruntime(op, xdtype, per_channel):
    """Operator-format QLinearConv (grouped, strided, asymmetric pads, bias) and
    QLinearMatMul, uint8 and int8 inputs, 7-bit weights: equal to onnxruntime."""
    rng = np.random.default_rng([len(op), len(xdtype), per_channel])
    m, x = _qlinear(op, xdtype, per_channel, rng)
    want = _ort(m, {"x": x})[0]
    got = run_reference(m, {"x": x})[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    info = np.iinfo(want.dtype)  # a real range of outputs, not a saturated one
    assert len(np.unique(want)) >= 20 and np.isin(want, [info.min, info.max]).mean() < 0.02


def _with_quantized_outputs(model):
    """Every QuantizeLinear output also a graph output: each fused kernel checked."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    zp_type = {i.name: i.data_type for i in m.graph.initializer}
    for nd in m.graph.node:
        if nd.op_type == "QuantizeLinear" and nd.output[0] not in have:
            m.graph.output.append(helper.make_tensor_value_info(
                nd.output[0], zp_type[nd.input[2]], None))
    return m


def _quantize(path, out, feeds, per_channel, fmt="QDQ", act="uint8"):


    quantize(str(path), str(out), feeds, fmt=fmt, act=act, per_channel=per_channel,
             reduce_range=True)
    model = onnx.load(str(out))
    weights = [numpy_helper.to_array(i) for i in model.graph.initializer
               if i.data_type == TensorProto.INT8 and len(i.dims) >= 2]
    assert weights   # 7-bit weights: no CPU can saturate
    assert all(np.abs(w.astype(int)).max() <= 64 for w in weights)
    return model


def _fused(model, tmp_path):
    """The op types of onnxruntime's optimized graph (its QDQ fusions applied)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return {nd.op_type for nd in onnx.load(so.optimized_model_filepath).graph.node}


def _check(model, feeds):
    m = _with_quantized_outputs(model)
    names = [o.name for o in m.graph.output]
    n_checked = 0
    ties = {}
    for f in feeds:
        want, got = _ort(m, f), run_reference(m, f, ties)
        for name, w, g in zip(names, want, got):
            assert g.dtype == w.dtype, name
            np.testing.assert_array_equal(g, w, err_msg=name)
            n_checked += w.size
    # no output of a float kernel whose operation order differs between onnxruntime's
    # CPU builds (QLinearAdd, QLinearMul, QLinearSigmoid) is near a rounding tie: the
    # comparison holds on every CPU, not only on this one
    assert not any(ties.values()), ties
    return n_checked


@pytest.mark.parametrize("per_channel", [False, True])
def test_qdq_mobile_net_equals_onnxruntime(tmp_path, per_channel):
    """QLinearConv (strided, depthwise, grouped), QLinearConcat with requantized
    inputs, QLinearGlobalAveragePool, QGemm, QLinearSigmoid: every quantized tensor."""
    from test_onnx_models import _mobile_net

    rng = np.random.default_rng(3)
    onnx.save(_mobile_net(rng), str(tmp_path / "f.onnx"))
    xs = rng.random((28, 1, 3, 12, 12)).astype(np.float32)
    model = _quantize(tmp_path / "f.onnx", tmp_path / "q.onnx", [{"x": x} for x in xs[:16]],
                      per_channel)
    # the kernels compared are onnxruntime's fused ones (uint8: fused on every CPU)
    assert {"QLinearConv", "QLinearConcat", "QLinearGlobalAveragePool", "QGemm",
            "QLinearSigmoid"} <= _fused(model, tmp_path)
    assert _check(model, [{"x": x} for x in xs[16:]]) > 5000


def test_qdq_digits_equals_onnxruntime(tmp_path):
    """The shipped digits CNN: QLinearConv, QLinearAdd (residual), MaxPool on integers,
    QLinearAveragePool, QGemm."""
    from vtakit.compiler.models import digits_cnn_path, load_digits_split

    x_train, _, x_test, _ = load_digits_split()
    model = _quantize(digits_cnn_path(), tmp_path / "q.onnx",
                      [{"input": x[None]} for x in x_train[:32]], True)
    assert {"Add", "AveragePool", "MaxPool", "Gemm"} <= {n.op_type for n in model.graph.node}
    assert {"QLinearConv", "QLinearAdd", "QLinearAveragePool", "QGemm"} <= \
        _fused(model, tmp_path)
    assert _check(model, [{"input": x[None]} for x in x_test[:12]]) > 5000


def _pool_net():
    """Float ops without weights: AveragePool (padded, counted with and without the
    padding), Add, Mul, Sigmoid, MaxPool, Concat of differently scaled inputs,
    LeakyRelu, Softmax (along channels), GlobalAveragePool."""
    n = helper.make_node
    nodes = [n("AveragePool", ["x"], ["p1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("AveragePool", ["x"], ["p2"], kernel_shape=[2, 3], strides=[2, 2],
               pads=[0, 1, 1, 1], count_include_pad=1),
             n("Add", ["x", "p1"], ["s"]),
             n("Mul", ["s", "p1"], ["m"]),
             n("Sigmoid", ["m"], ["g"]),
             n("MaxPool", ["g"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Concat", ["mp", "p2"], ["c"], axis=1),
             n("LeakyRelu", ["c"], ["lr"], alpha=0.2),
             n("Softmax", ["lr"], ["sm"], axis=1),
             n("GlobalAveragePool", ["sm"], ["y"])]
    graph = helper.make_graph(nodes, "pools", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 8, 1, 1])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_qdq_pools_equal_onnxruntime(tmp_path, act):
    """QLinearAveragePool, QLinearAdd, QLinearMul, QLinearSigmoid, QLinearConcat,
    QLinearLeakyRelu, QLinearSoftmax and QLinearGlobalAveragePool (fused on every CPU
    for both activation types, and no saturating integer kernel): every quantized
    tensor."""

    rng = np.random.default_rng(5)
    onnx.save(_pool_net(), str(tmp_path / "f.onnx"))
    xs = rng.normal(0, 1, (20, 1, 4, 8, 8)).astype(np.float32)


    quantize(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), ({"x": x} for x in xs[:10]),
             act=act)
    model = onnx.load(str(tmp_path / "q.onnx"))
    fused = _fused(model, tmp_path)
    assert {"QLinearSigmoid", "QLinearConcat", "QLinearLeakyRelu", "QLinearSoftmax",
            "QLinearGlobalAveragePool"} <= fused
    if act == "uint8":  # (x86 runs int8 Add/Mul and some pools as float ops between Q/DQ)
        assert {"QLinearAveragePool", "QLinearAdd", "QLinearMul"} <= fused
    assert _check(model, [{"x": x} for x in xs[10:]]) > 3000


def test_qdq_batched_matmul_equals_onnxruntime(tmp_path):
    """QLinearMatMul of a (1, 5, 8) tensor, QLinearAdd of a constant, QLinearSoftmax."""
    from test_onnx_qdq_exact import attn_net

    onnx.save(attn_net(), str(tmp_path / "f.onnx"))
    xs = np.random.default_rng(6).normal(0, 1, (20, 1, 5, 8)).astype(np.float32)
    model = _quantize(tmp_path / "f.onnx", tmp_path / "q.onnx", [{"x": x} for x in xs[:10]],
                      True)
    assert {"QLinearMatMul", "QLinearAdd", "QLinearSoftmax"} <= _fused(model, tmp_path)
    assert _check(model, [{"x": x} for x in xs[10:]]) > 500


@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_operator_format_equals_onnxruntime(tmp_path, act):
    """quantize_static(QOperator): onnxruntime runs QLinearConv, QLinearMatMul and the
    com.microsoft QLinearAdd, QLinearMul, QLinearAveragePool, QLinearConcat,
    QLinearLeakyRelu, QLinearSigmoid, QLinearGlobalAveragePool, QGemm and QLinearSoftmax
    as written (no fusion involved, int8 as well as uint8; 7-bit weights)."""
    from test_onnx_qdq_exact import _every_op_net, _images

    onnx.save(_every_op_net(), str(tmp_path / "f.onnx"))
    model = _quantize(tmp_path / "f.onnx", tmp_path / "q.onnx",
                      [{"x": x} for x in _images(16, 1)], True, "QOperator", act)
    assert sum(nd.domain == "com.microsoft" for nd in model.graph.node) >= 10
    ties = {}
    for x in _images(6, 2):
        np.testing.assert_array_equal(run_reference(model, {"x": x}, ties)[0],
                                      _ort(model, {"x": x})[0])
    assert not any(ties.values()), ties


def test_qdq_conv1d_equals_onnxruntime(tmp_path):
    from test_onnx_qdq_exact import conv1d_net

    onnx.save(conv1d_net(), str(tmp_path / "f.onnx"))
    xs = np.random.default_rng(9).normal(0, 1, (16, 1, 3, 40)).astype(np.float32)
    model = _quantize(tmp_path / "f.onnx", tmp_path / "q.onnx", [{"x": x} for x in xs[:8]],
                      True)
    assert "QLinearConv" in _fused(model, tmp_path)
    assert _check(model, [{"x": x} for x in xs[8:]]) > 1000


def test_operator_format_batched_matmul_equals_onnxruntime(tmp_path):
    """QOperator QLinearMatMul of a (1, 5, 8) tensor (and QLinearAdd, QLinearSoftmax)."""
    from test_onnx_qdq_exact import attn_net

    onnx.save(attn_net(), str(tmp_path / "f.onnx"))
    xs = np.random.default_rng(7).normal(0, 1, (12, 1, 5, 8)).astype(np.float32)
    model = _quantize(tmp_path / "f.onnx", tmp_path / "q.onnx", [{"x": x} for x in xs[:8]],
                      True, "QOperator")
    assert "QLinearMatMul" in {nd.op_type for nd in model.graph.node}
    from vtakit.compiler.frontend import from_onnx
    from vtakit.compiler.ir import evaluate
    mod = from_onnx(model)
    ties = {}
    for x in xs[8:]:
        ref = run_reference(model, {"x": x}, ties)[0]
        np.testing.assert_array_equal(ref, _ort(model, {"x": x})[0])
        np.testing.assert_array_equal(evaluate(mod, x), ref)
    assert not any(ties.values()), ties
