"""``vtakit run`` and ``vtakit disasm`` on a compiled model."""

import numpy as np
from test_vm_compiler import small_cnn

from vtakit.compiler.codegen import compile_vm
from vtakit.compiler.ir import evaluate
from vtakit.cli.main import main


def test_run_and_disasm(tmp_path, capsys):
    mod = small_cnn()
    model = compile_vm(mod).save(tmp_path / "cnn.vtax")
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(model), "--input", str(tmp_path / "x.npy"), "--backend",
                 "behavioral", "-o", str(tmp_path / "out")]) == 0
    assert "-> " + str(tmp_path / "out.npz") in capsys.readouterr().out
    with np.load(tmp_path / "out.npz") as out:
        assert out.files == ["output"] and out["output"].dtype == np.float32
        np.testing.assert_allclose(out["output"], evaluate(mod, x), rtol=1e-5, atol=1e-5)
    # by name, too
    assert main(["run", str(model), "--input", f"x={tmp_path / 'x.npy'}", "-o",
                 str(tmp_path / "o2.npz")]) == 0
    capsys.readouterr()
    assert main(["disasm", str(model)]) == 0
    text = capsys.readouterr().out
    assert "def @main($0:x)" in text and "invoke_packed fused_nn_conv2d" in text
    assert "primitives:" in text and "kernels:" in text


def test_errors_are_one_line(tmp_path, capsys):
    model = compile_vm(small_cnn()).save(tmp_path / "cnn.vtax")
    data = bytearray(model.read_bytes())
    data[100] ^= 4
    (tmp_path / "bad.vtax").write_bytes(bytes(data))
    assert main(["run", str(tmp_path / "bad.vtax"), "-o", str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "section HEAD, byte 12: checksum mismatch" in err[0]
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    assert main(["run", str(model), "--input", str(tmp_path / "x.npy"), "-o",
                 str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vtakit run: error: input 'x' is float32[1, 3, 8, 8]; the model expects "
                   "float32[1, 3, 16, 16]"]
