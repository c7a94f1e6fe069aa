"""The ONNX backend test data the ``onnx`` wheel ships (``onnx/backend/test/data``), the
conformance data onnxruntime's and TVM's frontends run: every model of the
pytorch-converted, pytorch-operator and simple folders compiled as given (opsets 6-10
converted on import) and run on the host in float, against its stored outputs; what is
refused is exactly the 3-D, sequence, string and training-op tests, in one line each.
A few Conv/Gemm tests quantized on the behavioral VTA, and the light zoo models (slow).

``bench/onnx_suite.py`` runs the same data with a table and JSON.
"""

import glob
import os
import re

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from vtakit.compiler.build_model import compile_model
from vtakit.compiler.frontend import OnnxImportError, from_onnx

ROOT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")

#: the tests vtakit refuses, and the one-line reason each gives
REFUSED = {
    r"test_(AvgPool|MaxPool)3d.*": r"only 1-D and 2-D (AveragePool|MaxPool) is supported, "
                                   r"got a 3-D kernel",
    r"test_Conv3d.*": r"only 1-D and 2-D Conv is supported, got a 3-D kernel",
    r"test_sequence_model\d": r"unsupported ONNX op (Sequence\w+|SplitToSequence) ",
    r"test_strnorm_model_.*": r"unsupported ONNX op StringNormalizer ",
    r"test_gradient_of_.*": r"unsupported ONNX op ai\.onnx\.preview\.training\.Gradient ",
}


def _pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def _case(d):
    ds = os.path.join(d, "test_data_set_0")
    ins = [_pb(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")))]
    outs = [_pb(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")))]
    return os.path.join(d, "model.onnx"), ins, outs


DIRS = sorted(glob.glob(os.path.join(ROOT, "pytorch-converted", "*"))
              + glob.glob(os.path.join(ROOT, "pytorch-operator", "*"))
              + glob.glob(os.path.join(ROOT, "simple", "*")))


def _flat(r):
    return [a for x in r for a in _flat(x)] if isinstance(r, (tuple, list)) else [np.asarray(r)]


def test_the_data_is_there():
    assert len(DIRS) == 140


@pytest.mark.parametrize("d", DIRS, ids=lambda d: "/".join(d.split(os.sep)[-2:]))
def test_backend_model_float(d):
    name = os.path.basename(d)
    path, ins, outs = _case(d)
    refused = [why for pat, why in REFUSED.items() if re.fullmatch(pat, name)]
    if refused:
        with pytest.raises(OnnxImportError, match=refused[0]) as e:
            from_onnx(path)
        assert "\n" not in str(e.value)
        return
    exe = compile_model(from_onnx(path))
    got = _flat(exe.run(list(ins)))
    assert len(got) == len(outs)
    for g, want in zip(got, outs):
        assert g.shape == want.shape and g.dtype == want.dtype
        if want.dtype.kind == "f":
            np.testing.assert_allclose(g, want, rtol=1e-3, atol=1e-5)
        else:
            np.testing.assert_array_equal(g, want)


def _cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _quantized_cosine(path, x, ref):
    from vtakit.compiler.quant.calibrate import calibrate

    rng = np.random.default_rng(0)
    samples = np.concatenate([x[None], (x[None] + 0.1 * float(x.std()) * rng.standard_normal(
        (15,) + x.shape)).astype(np.float32)])
    report = []
    exe = compile_model(calibrate(from_onnx(path), samples), "default", report=report)
    on_vta = [r for r in report if r.kind.split("_")[0] in ("conv2d", "dense")
              and r.where != "host"]
    return _cosine(exe.run([x]), ref), len(on_vta)


@pytest.mark.parametrize("name", ["test_Conv1d_dilated", "test_Conv2d_depthwise_strided",
                                  "test_ConvTranspose2d", "test_Linear"])
def test_backend_model_quantized_on_vta(name):
    """Calibrated on 16 inputs (the test's and noisy copies), run on the behavioral VTA:
    the layer on VTA and cosine >= 0.99 against the stored float output."""
    path, ins, outs = _case(os.path.join(ROOT, "pytorch-converted", name))
    cos, on_vta = _quantized_cosine(path, ins[0], outs[0])
    assert cos >= 0.99 and on_vta >= 1, (cos, on_vta)


LIGHT = sorted(glob.glob(os.path.join(ROOT, "light", "*.onnx")))


def _light_input(path):
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    vi = next(i for i in m.graph.input if i.name not in inits)
    shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)  # as onnx's runner does


@pytest.mark.slow
@pytest.mark.parametrize("path", LIGHT, ids=lambda p: os.path.basename(p)[6:-5])
def test_light_zoo_model(path):
    """The nine light zoo models (opset 9, IR 3) as given: float equals the stored output;
    quantized on VTA, cosine >= 0.99 with at least half the Conv/Gemm layers on VTA."""
    x = _light_input(path)
    want = _pb(path[:-5] + "_output_0.pb")
    np.testing.assert_allclose(compile_model(from_onnx(path)).run([x]), want, rtol=1e-3,
                               atol=1e-5)
    cos, _ = _quantized_cosine(path, x, want)
    assert cos >= 0.99
