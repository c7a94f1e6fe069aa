"""The four MLPerf Tiny int8 models (tests/data/mltk) through the TFLite frontend.

* the IR interpreter equals LiteRT's reference kernels (``BUILTIN_REF``) bit for bit
  on 8 inputs per model;
* ``lower_vta.run_graph`` (quantized layers on the behavioral VTA, the rest in numpy)
  equals the IR interpreter bit for bit.
"""

from pathlib import Path

import numpy as np
import pytest

from vtakit.compiler.frontend import from_tflite
from vtakit.compiler.ir import evaluate
from vtakit.testing import model_inputs

DATA = Path(__file__).parent / "data" / "mltk"
MODELS = ["keyword_spotting", "image_classification", "anomaly_detection", "visual_wake_words"]


def _inputs(param, n, seed=0):
    return model_inputs(param.type_annotation, n, seed)


@pytest.mark.parametrize("name", MODELS)
def test_parse_keeps_names_dtypes_shapes(name):
    import ai_edge_litert.interpreter as litert
    mod = from_tflite(DATA / f"{name}.tflite")
    it = litert.Interpreter(model_path=str(DATA / f"{name}.tflite"))
    (i,), (o,) = it.get_input_details(), it.get_output_details()
    (p,) = mod["main"].params
    assert p.name_hint == i["name"]
    assert p.type_annotation.shape == tuple(i["shape"])
    assert p.type_annotation.dtype == np.dtype(i["dtype"]).name
    assert mod["main"].attrs["output_names"] == (o["name"],)
    y = np.asarray(evaluate(mod, _inputs(p, 1)[0]))
    assert y.shape == tuple(o["shape"]) and y.dtype == np.dtype(o["dtype"])


@pytest.mark.parametrize("name", MODELS)
def test_interpreter_equals_tflite_reference(name):
    import ai_edge_litert.interpreter as litert
    path = DATA / f"{name}.tflite"
    mod = from_tflite(path)
    it = litert.Interpreter(model_path=str(path),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    (i,), (o,) = it.get_input_details(), it.get_output_details()
    for x in _inputs(mod["main"].params[0], 8, seed=1):
        it.set_tensor(i["index"], x)
        it.invoke()
        np.testing.assert_array_equal(np.asarray(evaluate(mod, x)), it.get_tensor(o["index"]))


def _vta_equals_interpreter(name, n):
    from vtakit.compiler.vta.lower import run_graph
    from vtakit.runtime import Runtime
    from vtakit.sim import open_device
    mod = from_tflite(DATA / f"{name}.tflite")
    rt = Runtime(open_device("behavioral", "default"))
    for x in _inputs(mod["main"].params[0], n, seed=2):
        records = []
        got = np.asarray(run_graph(mod, rt, x, records=records))
        np.testing.assert_array_equal(got, np.asarray(evaluate(mod, x)))
        assert records and all(r.where in ("vta", "vta+host") for r in records), \
            [(r.kind, r.where, r.why) for r in records if r.where == "host"]


@pytest.mark.parametrize("name", MODELS)
def test_vta_equals_interpreter(name):
    _vta_equals_interpreter(name, 2)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_vta_equals_interpreter_8_inputs(name):
    _vta_equals_interpreter(name, 8)


def test_smallest_model_on_verilator_equals_behavioral():
    """The compiled anomaly-detection autoencoder (10 dense layers) on the Verilator RTL."""
    import vtakit
    mod = from_tflite(DATA / "anomaly_detection.tflite")
    exe = vtakit.compile(DATA / "anomaly_detection.tflite", config="default")
    (x,) = _inputs(mod["main"].params[0], 1, seed=3)
    outs = [np.asarray(exe.run([x], backend=b)) for b in ("behavioral", "verilator")]
    np.testing.assert_array_equal(outs[1], outs[0])
    np.testing.assert_array_equal(outs[0], evaluate(mod, x))
