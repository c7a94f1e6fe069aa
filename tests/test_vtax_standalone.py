"""A saved ``.vtax`` runs without the compiler: in a fresh interpreter where importing
``vtakit.compiler``, onnx, onnxruntime or a TFLite package raises (a ``sys.meta_path``
blocker installed before anything else is imported), a compiled model loads, runs on the
behavioral backend and gives the in-process outputs bit for bit."""

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import vtakit

DATA = Path(__file__).parent / "data" / "mltk"

#: Top-level names a deployed host must not need.
BLOCKED = ("vtakit.compiler", "onnx", "onnxruntime", "tflite", "ai_edge_litert", "tensorflow")

RUNNER = textwrap.dedent("""
    import sys

    BLOCKED = {blocked!r}

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(f"{{name}} is blocked: an executable must run without it")
            return None

    sys.meta_path.insert(0, Blocker())

    import numpy as np
    import vtakit

    exe = vtakit.load(sys.argv[1])
    with np.load(sys.argv[2]) as f:
        inputs = [f[k] for k in sorted(f.files, key=int)]
    outs = {{}}
    for i, x in enumerate(inputs):
        for name, y in exe.run_named([x], backend="behavioral").items():
            outs[f"{{i}}:{{name}}"] = y
    np.savez(sys.argv[3], **outs)
    assert not any(m == b or m.startswith(b + ".") for m in sys.modules for b in BLOCKED)
""").format(blocked=BLOCKED)


def _demo_exe():
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend.onnx import from_onnx
    from vtakit.compiler.models import digits_cnn_path, load_digits_split
    from vtakit.compiler.quant.calibrate import calibrate
    from vtakit.tools.demo import CALIBRATION_SAMPLES
    x_train, _, x_test, _ = load_digits_split()
    qmod = calibrate(from_onnx(digits_cnn_path()), x_train[:CALIBRATION_SAMPLES, None])
    return compile_model(qmod, "default"), [x_test[i:i + 1] for i in range(4)]


def _tflite_exe():
    from vtakit.compiler.frontend import from_tflite
    from vtakit.testing import model_inputs
    path = DATA / "keyword_spotting.tflite"
    (p,) = from_tflite(path)["main"].params
    return vtakit.compile(path, config="default"), list(model_inputs(p.type_annotation, 3, 0))


@pytest.mark.parametrize("make", [_demo_exe, _tflite_exe], ids=["demo", "keyword_spotting"])
def test_saved_executable_runs_without_the_compiler(make, tmp_path):
    exe, inputs = make()
    assert any(p.kind == "vta_layer" for p in exe.primitives)
    want = {}
    for i, x in enumerate(inputs):
        for name, y in exe.run_named([x]).items():
            want[f"{i}:{name}"] = y
    exe.save(tmp_path / "m.vtax")
    np.savez(tmp_path / "in.npz", **{str(i): x for i, x in enumerate(inputs)})
    (tmp_path / "run.py").write_text(RUNNER)
    r = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path / "m.vtax"),
                        str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as got:
        assert sorted(got.files) == sorted(want)
        for k, y in want.items():
            assert got[k].dtype == y.dtype and got[k].shape == y.shape
            np.testing.assert_array_equal(got[k], y)


def test_the_blocker_blocks(tmp_path):
    """The subprocess's blocker really refuses the compiler (the test above can fail)."""
    script = RUNNER.split("import numpy as np")[0] + "import vtakit.compiler.ir\n"
    (tmp_path / "b.py").write_text(script)
    r = subprocess.run([sys.executable, str(tmp_path / "b.py")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "vtakit.compiler is blocked" in r.stderr


def test_compiled_model_is_byte_identical():
    """The same model and config give the same bytes (packed weights and host steps
    included), and a file read back writes them again."""
    data = _tflite_exe()[0].to_bytes()
    assert _tflite_exe()[0].to_bytes() == data
    assert vtakit.runtime.Executable.from_bytes(data).to_bytes() == data


def test_old_format_says_recompile(tmp_path):
    from vtakit.runtime.executable import FORMAT_VERSION, ExecutableError
    data = bytearray(_tflite_exe()[0].to_bytes())
    data[8:12] = (FORMAT_VERSION - 2).to_bytes(4, "little")
    with pytest.raises(ExecutableError, match=r"^m.vtax: header, byte 8: format version 2 is "
                       r"not supported \(this vtakit reads versions 3 to 4\); recompile the "
                       r"model: vtakit compile MODEL -o OUT.vtax$"):
        vtakit.runtime.Executable.from_bytes(bytes(data), source="m.vtax")


def test_format_3_still_reads():
    # version 3 had no pre steps; its files read (and run) as before
    from vtakit.runtime.executable import FORMAT_VERSION, _section
    exe = _tflite_exe()[0]
    data = bytearray(exe.to_bytes())
    assert FORMAT_VERSION == 4
    data[8:12] = (3).to_bytes(4, "little")
    body = bytes(data[:-48])                 # the END section: tag, length, SHA-256, CRC
    v3 = body + _section("END\0", hashlib.sha256(body).digest())
    assert vtakit.runtime.Executable.from_bytes(v3).to_bytes() == exe.to_bytes()
