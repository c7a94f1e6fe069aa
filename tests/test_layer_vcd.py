"""``vtakit run ... --vcd FILE --vcd-layer N``: a waveform of one layer only."""

import numpy as np
import pytest


from vtakit.cli.main import main  # noqa: E402


@pytest.fixture(scope="module")
def digits_tiny(tmp_path_factory):
    """The calibrated digits CNN compiled for ``tiny`` (a waveform build of ``tiny`` is
    a fraction of ``default``'s): ``(executable, .vtax path, image, folder)``."""
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend.onnx import from_onnx
    from vtakit.compiler.models import digits_cnn_path, load_digits_split
    from vtakit.compiler.quant.calibrate import calibrate
    x_train, _, x_test, _ = load_digits_split()
    exe = compile_model(calibrate(from_onnx(digits_cnn_path()), x_train[:16, None]), "tiny")
    d = tmp_path_factory.mktemp("digits_tiny")
    np.save(d / "x.npy", x_test[:1])
    return exe, exe.save(d / "digits.vtax"), x_test[:1], d


def test_vcd_options_are_checked(digits, capsys):
    _, path, _, d = digits
    base = ["run", str(path), "--input", str(d / "x.npy"), "-o", str(d / "o")]
    assert main(base + ["--vcd", str(d / "w.vcd"), "--vcd-layer", "1"]) == 2   # behavioral
    assert "writes no waveform" in capsys.readouterr().err
    assert main(base + ["--backend", "verilator", "--vcd", str(d / "w.vcd")]) == 2
    assert "go together" in capsys.readouterr().err
    assert not (d / "w.vcd").exists()


def test_vcd_of_one_layer_on_verilator(digits_tiny, capsys):
    _, path, _, d = digits_tiny
    base = ["run", str(path), "--input", str(d / "x.npy"), "-o", str(d / "o"),
            "--backend", "verilator", "--profile"]
    vcd = d / "dense.vcd"
    assert main(base + ["--vcd", str(vcd), "--vcd-layer", "7"]) == 0
    out = capsys.readouterr().out
    # The replay ran exactly the cycles the model run measured for that layer.
    row = next(line for line in out.splitlines() if line.split()[:2] == ["7", "vta_dense"])
    cycles = row.split()[3]
    assert f"layer #7 vta_dense: waveform ({cycles} cycles) -> {vcd}" in out
    head = vcd.read_text()[:4000]
    assert "$enddefinitions" in head or "$scope" in head
    assert main(base + ["--vcd", str(d / "host.vcd"), "--vcd-layer", "0"]) == 2
    assert "ran on the host, not on VTA" in capsys.readouterr().err
    assert main(base + ["--vcd", str(d / "x.vcd"), "--vcd-layer", "8"]) == 2
    assert "the model ran 8 layers" in capsys.readouterr().err
