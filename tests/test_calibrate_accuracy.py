"""The calibrator's accuracy on float CNNs with random but fixed weights (tests/cnn_models.py):
a residual CNN, an inverted-residual CNN, a LeNet-like CNN and an MLP, calibrated with
the default method (power-of-two scales, min/max ranges) on 32 inputs and compared with
the float model on 16 others."""

import numpy as np
import pytest

import cnn_models
from vtakit.compiler.frontend import from_onnx
from vtakit.compiler.ir import Call, evaluate, post_order
from vtakit.compiler.quant import fixed_point
from vtakit.compiler.quant.calibrate import activation_range, calibrate, kl_threshold


def _calls(mod, name):
    return [n for n in post_order(mod["main"].body)
            if isinstance(n, Call) and getattr(n.op, "name", "") == name]


def _compare(model, method="minmax"):
    mod = from_onnx(model)
    q = calibrate(mod, cnn_models.samples(model, 32, 10), method=method)
    cos, same = [], 0
    for x in cnn_models.samples(model, 16, 11):
        f = np.asarray(evaluate(mod, x), np.float64).ravel()
        g = np.asarray(evaluate(q, x), np.float64).ravel()
        cos.append(f @ g / (np.linalg.norm(f) * np.linalg.norm(g)))
        same += int(f.argmax() == g.argmax())
    return q, np.array(cos), same


@pytest.mark.parametrize("name", sorted(cnn_models.MODELS))
def test_default_calibration_accuracy(name):
    q, cos, same = _compare(cnn_models.MODELS[name]())
    assert cos.min() >= 0.99, cos.min()
    assert same >= 15
    # power-of-two scales: every requantize a VTA shift, or (average pools over a window
    # of 3x3 taps and the like) an exact host step
    for r in _calls(q, "qnn.requantize"):
        assert r.attrs["rounding"] == "onnx" or fixed_point.vta_shift(r.attrs["scale"]) is not None


def test_relu_outputs_asymmetric_and_pools_own_scale():
    """ReLU outputs are one-signed: zero point -128, 256 levels; the global average pool
    gets its own scale (its output range is below its input's)."""
    q, _, _ = _compare(cnn_models.resnet())
    zps = [r.attrs["zero_point"] for r in _calls(q, "qnn.requantize")]
    assert zps.count(-128) >= 4
    pool = [c for c in _calls(q, "nn.conv2d") if np.all(c.args[1].data == 1)]
    assert len(pool) == 1  # the global average pool as window sums
    (req,) = [r for r in _calls(q, "qnn.requantize") if r.args[0].args[0] is pool[0]]
    # s_in / (64 s_out): the pool's output step finer than its input's (the old calibrator
    # kept the input's scale, 1 / 64)
    assert req.attrs["scale"] * 64 >= 2


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_other_methods(method):
    _, cos, same = _compare(cnn_models.resnet(), method)
    assert cos.min() >= 0.99 and same >= 15


def test_activation_ranges():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.normal(0, 1, 100000), [40.0]])   # one far outlier
    assert activation_range(v) == (float(np.float32(v.min())), 40.0)
    lo, hi = activation_range(v, "percentile", 99.9)
    assert 2.5 < hi < 4 and -4 < lo < -2.5
    lo, hi = activation_range(v, "entropy")
    assert hi < 40 and lo == -hi
    relu = np.maximum(v, 0)
    assert activation_range(relu, "entropy")[0] == 0.0
    # the threshold of a uniform distribution is its maximum (nothing to clip)
    u = rng.uniform(0, 1, 100000)
    assert kl_threshold(u) == pytest.approx(u.max(), rel=1e-3)


def test_accuracy_report_names_the_wrong_pool():
    """A deliberately wrong range on the global average pool (0..40 for values up to 4,
    eight times too coarse a scale): the report marks that tensor as losing the most."""
    from vtakit.compiler.quant.accuracy import accuracy_report

    model = cnn_models.resnet()
    mod, samples = from_onnx(model), cnn_models.samples(model, 16, 10)
    good = accuracy_report(mod, samples)
    (gap,) = [r for r in good if r.op == "global_avg_pool2d"]
    assert good.worst()[0].id != gap.id and gap.own > 60
    assert all(r.cosine > 0.99 and r.sqnr > 25 for r in good)
    bad = accuracy_report(mod, samples, ranges={gap.id: (0.0, 40.0)})
    (worst,) = bad.worst()
    assert worst.id == gap.id and worst.op == "global_avg_pool2d"
    assert worst.scale == 8 * gap.scale and worst.own < min(r.own for r in good) - 5
    text = bad.format()
    assert any(ln.split()[:2] == [gap.id, "global_avg_pool2d"] for ln in text.splitlines())
    assert [ln.split()[0] for ln in text.splitlines() if ln.endswith("<- loses the most")] == \
        [gap.id]


def test_cli_accuracy(tmp_path, capsys):
    import onnx

    from vtakit.cli.main import main

    model = cnn_models.lenet()
    onnx.save(model, str(tmp_path / "lenet.onnx"))
    np.save(tmp_path / "s.npy", cnn_models.samples(model, 8, 10))
    args = ["compile", str(tmp_path / "lenet.onnx"), "-o", str(tmp_path / "m.vtax")]
    assert main(args + ["--calibrate", str(tmp_path / "s.npy"), "--accuracy"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["tensor", "layer", "shape"]
    assert any("avg_pool2d" in ln for ln in lines) and "loses the most" in out
    assert "layer(s) on VTA" in lines[-1]
    assert main(args + ["--accuracy"]) == 2
    assert "--accuracy compares the float model with its calibrated int8 version" in \
        capsys.readouterr().err


def test_symmetric_option_keeps_zero_points_zero():
    q = calibrate(from_onnx(cnn_models.lenet()), cnn_models.samples(cnn_models.lenet(), 8, 1),
                  asymmetric=False)
    assert all(r.attrs["zero_point"] == 0 for r in _calls(q, "qnn.requantize"))
    assert all(r.attrs["zero_point"] == 0 for r in _calls(q, "qnn.quantize"))


def test_cli_calibration_options(tmp_path, capsys):
    """``--calibrate-method`` and ``--symmetric`` reach the calibrator: the executables differ
    from the default one, a symmetric compile has no border-correction residual, and the
    options without ``--calibrate`` are one clear error."""
    import onnx

    import vtakit
    from vtakit.cli.main import main
    from vtakit.runtime.executable import load

    model = cnn_models.resnet()
    onnx.save(model, str(tmp_path / "r.onnx"))
    np.save(tmp_path / "s.npy", cnn_models.samples(model, 8, 10))
    base = ["compile", str(tmp_path / "r.onnx"), "--calibrate", str(tmp_path / "s.npy"), "-o"]
    blobs = {}
    for name, extra in [("default", []), ("entropy", ["--calibrate-method", "entropy"]),
                        ("symmetric", ["--symmetric"])]:
        assert main(base + [str(tmp_path / f"{name}.vtax"), *extra]) == 0, capsys.readouterr()
        blobs[name] = (tmp_path / f"{name}.vtax").read_bytes()
    capsys.readouterr()
    assert len(set(blobs.values())) == 3
    x = cnn_models.samples(model, 1, 11)[0]
    outs = {n: np.asarray(load(tmp_path / f"{n}.vtax").run(x)) for n in blobs}
    assert all(o.shape == outs["default"].shape for o in outs.values())
    for name, options, corrected in [("default", None, True),
                                     ("symmetric", {"asymmetric": False}, False)]:
        report = []
        vtakit.compile(tmp_path / "r.onnx", calibrate=tmp_path / "s.npy", report=report,
                       calibrate_options=options)
        assert any("border correction" in r.why for r in report) == corrected, name
    assert main(["compile", str(tmp_path / "r.onnx"), "-o", str(tmp_path / "x.vtax"),
                 "--symmetric"]) == 2
    assert "give the samples with --calibrate SAMPLES.npy" in capsys.readouterr().err
