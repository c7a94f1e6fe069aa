"""Bad input to the model-level commands (compile, run, disasm, compare on .vtax, plot,
demo, synth, build): one line naming what is wrong, exit code 2, no traceback, and no
output file left behind."""

import re
from pathlib import Path

import numpy as np
import pytest

from vtakit.cli.main import main

MLTK = Path(__file__).parent / "data" / "mltk"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_models")
    assert main(["compile", str(MLTK / "anomaly_detection.tflite"), "-o",
                 str(d / "m.vtax")]) == 0
    data = (d / "m.vtax").read_bytes()
    (d / "trunc.vtax").write_bytes(data[:len(data) // 3])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    (d / "flip.vtax").write_bytes(bytes(flipped))
    (d / "bad.tflite").write_bytes(b"garbage")
    (d / "bad.onnx").write_bytes(b"garbage")
    np.save(d / "wrong_shape.npy", np.zeros((2, 3), np.float32))
    np.save(d / "good.npy", np.zeros((1, 5, 128, 1), np.float32))
    return d


CASES = [
    (["compile", "{d}/nothere.tflite", "-o", "{d}/out.vtax"], r"nothere\.tflite"),
    (["compile", "{d}/wrong_shape.npy", "-o", "{d}/out.vtax"],
     r"unknown model format '\.npy'; expected \.tflite or \.onnx"),
    (["compile", "{d}/bad.tflite", "-o", "{d}/out.vtax"],
     r"bad\.tflite: not a TFLite model \(no 'TFL3' flatbuffer identifier"),
    (["compile", "{d}/bad.onnx", "-o", "{d}/out.vtax"], r"bad\.onnx: not a valid ONNX model"),
    (["compile", "{d}/bad.onnx", "-o", "{d}/out.vtax", "--config", "nosuch"],
     r"'nosuch' is neither a preset"),
    (["run", "{d}/nothere.vtax", "--input", "{d}/wrong_shape.npy", "-o", "{d}/out.npz"],
     r"nothere\.vtax: cannot read"),
    (["run", "{d}/trunc.vtax", "--input", "{d}/wrong_shape.npy", "-o", "{d}/out.npz"],
     r"trunc\.vtax: section \w+, byte \d+: truncated"),
    (["run", "{d}/flip.vtax", "--input", "{d}/wrong_shape.npy", "-o", "{d}/out.npz"],
     r"flip\.vtax: section \w+, byte \d+: "),
    (["run", "{d}/m.vtax", "--input", "{d}/wrong_shape.npy", "-o", "{d}/out.npz"],
     r"input '.+' is float32\[2, 3\]; the model expects float32\[1, 5, 128, 1\]"),
    (["run", "{d}/m.vtax", "--input", "{d}/nothere.npy", "-o", "{d}/out.npz"],
     r"nothere\.npy: no such file"),
    (["run", "{d}/m.vtax", "--input", "{d}/good.npy", "-o", "{d}/out.npz",
      "--backend", "nosuch"],
     r"^vtakit run: error: unknown backend 'nosuch'; backends are behavioral, pysim"),
    (["disasm", "{d}/trunc.vtax"], r"trunc\.vtax: section \w+, byte \d+: truncated"),
    (["compare", "{d}/m.vtax", "--input", "{d}/wrong_shape.npy", "--backends",
      "behavioral,pysim"], r"the model expects float32\[1, 5, 128, 1\]"),
    (["plot", "trace", "{d}/nothere.json", "-o", "{d}/out.png"],
     r"nothere\.json: no such file"),
    (["demo", "--count", "-1"], r"count=-1; the number of RTL images must be >= 0"),
    (["demo", "--config", "nosuch"], r"'nosuch' is neither a preset"),
    (["synth", "--config", "nosuch", "--target", "ecp5-85k"], r"'nosuch' is neither a preset"),
    (["synth", "--config", "tiny", "--target", "nosuch"], r"invalid choice: 'nosuch'"),
    (["build", "--board", "nosuch", "-o", "{d}/out.bit"], r"invalid choice: 'nosuch'"),
]


@pytest.mark.parametrize("argv, message", CASES, ids=[" ".join(c[0][:2]) + f"-{i}"
                                                      for i, c in enumerate(CASES)])
def test_bad_model_inputs(workdir, capsys, argv, message):
    argv = [a.format(d=workdir) for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:          # argparse rejects its own arguments this way
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert re.search(message, lines[-1]), err
    if argv[0] not in ("synth", "build"):   # argparse prints its usage line first
        assert len(lines) == 1, err
    assert not any(workdir.glob("out.*")), list(workdir.glob("out.*"))
