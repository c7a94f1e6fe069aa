"""``vtakit.compile`` / ``vtakit compile``: TFLite models to executables, run on the VM."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vtakit
from vtakit.compiler.frontend import from_tflite
from vtakit.compiler.ir import evaluate
from vtakit.testing import model_inputs

DATA = Path(__file__).parent / "data" / "mltk"


def _input(mod, seed):
    return model_inputs(mod["main"].params[0].type_annotation, 1, seed)[0]


@pytest.mark.parametrize("name", ["keyword_spotting", "image_classification",
                                  "anomaly_detection", "visual_wake_words"])
def test_compiled_model_equals_interpreter(name, tmp_path):
    records = []
    exe = vtakit.compile(DATA / f"{name}.tflite", config="default", report=records)
    layers = [r for r in records if r.kind in ("conv2d", "dense", "avg_pool2d", "max_pool2d")]
    assert layers and all(r.where in ("vta", "vta+host") for r in layers)
    assert all(r.kind.startswith(("qnn.", "nn.", "reshape", "transpose", "cast"))
               or r.kind == "add" and "'requant'" in r.why    # TFLite's ADD: extension only
               for r in records if r.where == "host")
    # every VTA layer's Program is in the kernel table (identical kernels shared)
    assert 1 <= len(exe.kernels) <= len(layers)
    assert all(name.startswith("vta_") for name, _ in exe.kernels)
    exe = vtakit.load(exe.save(tmp_path / "m.vtax"))
    mod = from_tflite(DATA / f"{name}.tflite")
    assert exe.input_names == [p.name_hint for p in mod["main"].params]
    assert exe.output_names == list(mod["main"].attrs["output_names"])
    for seed in range(2):
        x = _input(mod, seed)
        got = exe.run_named([x])
        np.testing.assert_array_equal(got[exe.output_names[0]], evaluate(mod, x))


def test_cli_compile_report(tmp_path):
    out = tmp_path / "kws.vtax"
    r = subprocess.run([sys.executable, "-m", "vtakit", "compile",
                        str(DATA / "keyword_spotting.tflite"), "--config", "default",
                        "-o", str(out), "--report"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["#", "layer", "input"]
    assert sum(" conv2d " in ln for ln in lines) == 9
    assert "11 layer(s) on VTA" in lines[-1] and out.exists()
    mem = next(ln for ln in lines if ln.startswith("device DRAM: weights"))
    assert "(10 tensor(s) kept on the device between layers)" in mem
    assert any(" host " in ln and "nn.softmax" in ln for ln in lines)


def test_cli_compile_unknown_format(tmp_path):
    bad = tmp_path / "m.pb"
    bad.write_bytes(b"x")
    r = subprocess.run([sys.executable, "-m", "vtakit", "compile", str(bad), "-o",
                        str(tmp_path / "m.vtax")], capture_output=True, text=True)
    assert r.returncode == 2
    assert "unknown model format '.pb'; expected .tflite or .onnx" in r.stderr
