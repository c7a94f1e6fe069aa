"""`vtakit compile MODEL.onnx --calibrate SAMPLES.npy` and `vtakit.compile(calibrate=...)`:
a float model quantized from representative inputs, compiled, run, and checked against
the compiler's own integer reference (the IR interpreter on the calibrated module)."""

import numpy as np
import pytest

import vtakit
from vtakit.cli.main import main
from vtakit.compiler.frontend.onnx import from_onnx
from vtakit.compiler.ir import evaluate
from vtakit.compiler.models import digits_cnn_path, load_digits_split
from vtakit.compiler.quant.calibrate import calibrate


@pytest.fixture(scope="module")
def digits():
    x_train, _, x_test, y_test = load_digits_split()
    return x_train[:32, None], x_test[:6], y_test[:6]


def test_cli_compile_with_calibration_equals_interpreter(tmp_path, digits, capsys):
    samples, x, _ = digits
    np.save(tmp_path / "samples.npy", samples)
    out = tmp_path / "digits.vtax"
    assert main(["compile", str(digits_cnn_path()), "--config", "default", "-o", str(out),
                 "--calibrate", str(tmp_path / "samples.npy")]) == 0
    assert "layer(s) on VTA" in capsys.readouterr().out
    exe = vtakit.load(out)
    qmod = calibrate(from_onnx(digits_cnn_path()), samples)
    for image in x:
        got = exe.run(image[None], backend="behavioral")
        want = evaluate(qmod, image[None])
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_python_compile_calibrate_array_matches_file(tmp_path, digits):
    samples, _, _ = digits
    np.save(tmp_path / "s.npy", samples)
    a = vtakit.compile(digits_cnn_path(), config="default", calibrate=samples).to_bytes()
    b = vtakit.compile(digits_cnn_path(), config="default", calibrate=tmp_path / "s.npy").to_bytes()
    assert a == b


@pytest.mark.parametrize("content, message", [
    (None, r"samples\.npy: no such file \(calibration samples"),
    (np.zeros((4, 8, 8), np.float32), r"calibrate: samples have shape \(4, 8, 8\); expected "
                                      r"\(N, 1, 1, 8, 8\)"),
])
def test_cli_compile_bad_samples(tmp_path, capsys, content, message):
    path = tmp_path / "samples.npy"
    if content is not None:
        np.save(path, content)
    code = main(["compile", str(digits_cnn_path()), "-o", str(tmp_path / "m.vtax"),
                 "--calibrate", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    import re
    assert re.search(message, err), err
    assert not (tmp_path / "m.vtax").exists()
