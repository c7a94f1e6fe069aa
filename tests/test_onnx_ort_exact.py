"""vtakit against the onnxruntime session users run, bit for bit.

QDQ models written by ``quantize_static`` (per-tensor and per-channel weights, int8 and
uint8 activations) that chain a conv into an AveragePool, a MaxPool, Gemms, depthwise
convs, GlobalAveragePool, MatMul + Add, Softmax and residual Adds: the imported model
(IR interpreter) and the reference of :mod:`vtakit.compiler.quant.ort_reference` must
equal onnxruntime's default CPU session on every output element.

Which graph onnxruntime runs depends on the CPU class (x86-64 turns int8 Q/DQ pairs
into uint8 and leaves int8 convolutions as float ops; arm64 keeps int8), so the tests
compare with the session only on a machine of the class they follow, and say so in
their skip reason elsewhere. This project's machines are x86-64 with AVX512-VNNI.
"""

import platform

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from vtakit.compiler.frontend import from_onnx
from vtakit.compiler.ir import evaluate
from vtakit.compiler.quant.ort_reference import run_reference
from onnx_quant import quantize  # noqa: E402


def cpu_class():
    """The onnxruntime CPU class of this machine: ``x86-vnni``, ``x86`` (no VNNI: its u8s8
    kernels saturate, no reference), ``arm64`` or None."""
    m = platform.machine().lower()
    if m in ("aarch64", "arm64"):
        return "arm64"
    if m in ("x86_64", "amd64"):
        try:
            flags = open("/proc/cpuinfo").read()
        except OSError:
            return "x86"
        return "x86-vnni" if ("avx512_vnni" in flags or "avx_vnni" in flags) else "x86"
    return None


CPU = cpu_class()


def _model(nodes, inits, shape, out):
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _w(rng, *shape, s=0.2):
    return (rng.standard_normal(shape) * s).astype(np.float32)


def lenet(rng):
    """conv5x5 -> Relu -> AveragePool 2x2 -> conv5x5 -> Relu -> MaxPool -> three Gemms."""
    n = helper.make_node
    inits = {"w1": _w(rng, 6, 1, 5, 5), "b1": _w(rng, 6), "w2": _w(rng, 16, 6, 5, 5, s=0.1),
             "b2": _w(rng, 16), "f1": _w(rng, 400, 120, s=0.1), "c1": _w(rng, 120),
             "f2": _w(rng, 120, 84, s=0.1), "c2": _w(rng, 84), "f3": _w(rng, 84, 10, s=0.1),
             "c3": _w(rng, 10)}
    nodes = [n("Conv", ["x", "w1", "b1"], ["a1"], pads=[2, 2, 2, 2]), n("Relu", ["a1"], ["r1"]),
             n("AveragePool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p1", "w2", "b2"], ["a2"]), n("Relu", ["a2"], ["r2"]),
             n("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Flatten", ["p2"], ["fl"]),
             n("Gemm", ["fl", "f1", "c1"], ["g1"]), n("Relu", ["g1"], ["h1"]),
             n("Gemm", ["h1", "f2", "c2"], ["g2"]), n("Relu", ["g2"], ["h2"]),
             n("Gemm", ["h2", "f3", "c3"], ["y"])]
    return _model(nodes, inits, (1, 1, 28, 28), (1, 10)), (1, 1, 28, 28)


def mobile(rng):
    """conv -> depthwise conv -> AveragePool -> pointwise conv, a residual Add,
    GlobalAveragePool, MatMul + Add, Softmax."""
    n = helper.make_node
    inits = {"w1": _w(rng, 16, 3, 3, 3), "b1": _w(rng, 16), "dw": _w(rng, 16, 1, 3, 3),
             "db": _w(rng, 16), "pw": _w(rng, 16, 16, 1, 1), "pb": _w(rng, 16),
             "pw2": _w(rng, 16, 16, 1, 1), "pb2": _w(rng, 16),
             "mm": _w(rng, 16, 10, s=0.3), "mb": _w(rng, 10)}
    nodes = [n("Conv", ["x", "w1", "b1"], ["a1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             n("Relu", ["a1"], ["r1"]),
             n("Conv", ["r1", "dw", "db"], ["a2"], pads=[1, 1, 1, 1], group=16),
             n("Relu", ["a2"], ["r2"]),
             n("AveragePool", ["r2"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p1", "pw", "pb"], ["a3"]), n("Relu", ["a3"], ["r3"]),
             n("Conv", ["r3", "pw2", "pb2"], ["a4"]),
             n("Add", ["a4", "r3"], ["s"]), n("Relu", ["s"], ["r4"]),
             n("GlobalAveragePool", ["r4"], ["gp"]), n("Flatten", ["gp"], ["fl"]),
             n("MatMul", ["fl", "mm"], ["m1"]), n("Add", ["m1", "mb"], ["m2"]),
             n("Softmax", ["m2"], ["y"], axis=-1)]
    return _model(nodes, inits, (1, 3, 32, 32), (1, 10)), (1, 3, 32, 32)


NETS = {"lenet": lenet, "mobile": mobile}


@pytest.fixture(scope="module", params=[(net, act, pc) for net in NETS
                                        for act in ("int8", "uint8") for pc in (False, True)],
                ids=lambda p: f"{p[0]}-{p[1]}-{'per-channel' if p[2] else 'per-tensor'}")
def qdq(request, tmp_path_factory):
    net, act, per_channel = request.param
    rng = np.random.default_rng([len(net), len(act), per_channel])
    model, shape = NETS[net](rng)
    d = tmp_path_factory.mktemp(net)
    onnx.save(model, str(d / "f.onnx"))
    xs = rng.standard_normal((24,) + shape).astype(np.float32)
    quantize(d / "f.onnx", d / "q.onnx", ({"x": x} for x in xs[:16]), act=act,
             per_channel=per_channel)
    return onnx.load(str(d / "q.onnx")), xs[16:]


@pytest.mark.skipif(CPU != "x86-vnni", reason=f"compares with onnxruntime's x86-vnni graph; "
                                              f"this machine is {CPU}")
def test_equal_to_onnxruntime_x86_vnni(qdq):
    """On an x86-64 VNNI machine: vtakit's import and the reference (cpu="x86-vnni") equal
    the onnxruntime session bit for bit."""
    model, xs = qdq
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    mod = from_onnx(model, ort_cpu="x86-vnni")
    assert "x86-vnni" in mod["main"].attrs["import_notes"][-1]
    for x in xs:
        want = sess.run(None, {"x": x})[0]
        np.testing.assert_array_equal(run_reference(model, {"x": x}, cpu="x86-vnni")[0], want)
        np.testing.assert_array_equal(evaluate(mod, x), want)


@pytest.mark.skipif(CPU != "arm64", reason=f"compares with onnxruntime's arm64 graph; this "
                                           f"machine is {CPU}")
def test_equal_to_onnxruntime_arm64(qdq):
    model, xs = qdq
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    mod = from_onnx(model, ort_cpu="arm64")
    for x in xs:
        want = sess.run(None, {"x": x})[0]
        np.testing.assert_array_equal(run_reference(model, {"x": x}, cpu="arm64")[0], want)
        np.testing.assert_array_equal(evaluate(mod, x), want)


def test_cpu_classes_import_alike_with_the_reference(qdq):
    """On any machine: for each CPU class the import equals that class's reference (the
    graphs differ between classes for int8 models, the agreement does not)."""
    model, xs = qdq
    for cpu in ("x86-vnni", "arm64"):
        mod = from_onnx(model, ort_cpu=cpu)
        for x in xs[:3]:
            np.testing.assert_array_equal(evaluate(mod, x),
                                          run_reference(model, {"x": x}, cpu=cpu)[0])


def test_unknown_cpu_class_is_one_line():
    from vtakit.compiler.frontend import OnnxImportError

    model, _ = lenet(np.random.default_rng(0))
    with pytest.raises(OnnxImportError, match=r"^unknown onnxruntime CPU class 'x86-avx2'; "
                                              r"known: x86-vnni, arm64$"):
        from_onnx(model, ort_cpu="x86-avx2")
