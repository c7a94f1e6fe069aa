"""``vtakit demo`` and the layer recorder, on the behavioral backend (small subsets)."""

import numpy as np
import pytest


from vtakit.cli.main import main  # noqa: E402
from vtakit.tools.demo import format_demo, model_macs, run_demo  # noqa: E402
from vtakit.runtime.device import open_device  # noqa: E402
from vtakit.runtime.recorder import LayerRecorder  # noqa: E402


@pytest.fixture(scope="module")
def result():
    return run_demo("default", "behavioral", 8, test_limit=40, progress=False,
                    log=lambda *_: None)


def test_demo_accuracy_and_agreement(result):
    assert result.n_test == 40 and result.rtl_count == 8
    assert result.float_accuracy > 0.9
    assert abs(result.float_accuracy - result.int8_accuracy) <= 0.01 + 1e-9
    assert result.rtl_agree == 8 and result.ok
    # the residual add fused into its convolution on VTA, flatten a view
    assert result.vta_layers == 7 and result.host_layers == 1
    # The behavioral model has no clock: no measured cycles, but the plans' prediction.
    assert result.cycles_per_image == -1 and result.gemm_utilization is None
    assert result.predicted_cycles_per_image > 0
    text = format_demo(result)
    assert "8/8 predictions identical" in text and "result: OK" in text


def test_model_macs_counts_conv_and_dense():
    from vtakit.compiler.ir import Call, Function, IRModule, TensorType, Var, get_op
    x = Var("x", TensorType((1, 3, 8, 8), "int8"))
    w = Var("w", TensorType((4, 3, 3, 3), "int8"))
    y = Call(get_op("nn.conv2d"), [x, w], {"padding": (1, 1, 1, 1), "out_dtype": "int32"})
    mod = IRModule({"main": Function([x, w], y)})
    assert model_macs(mod) == 4 * 8 * 8 * 3 * 3 * 3


def test_recorder_attributes_runs_to_layers():
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend.onnx import from_onnx
    from vtakit.compiler.models import digits_cnn_path, load_digits_split
    from vtakit.compiler.quant.calibrate import calibrate
    x_train, _, x_test, _ = load_digits_split()
    exe = compile_model(calibrate(from_onnx(digits_cnn_path()), x_train[:16, None]), "default")
    with open_device("behavioral", "default") as dev:
        with LayerRecorder(dev) as rec:
            y = exe.run(x_test[:1], device=dev, hook=rec.hook)
        assert "run" not in vars(dev)          # the device's own run is back
    engines = [layer.engine for layer in rec.layers]
    assert engines.count("VTA") == 7 and engines.count("host") == 1   # the add fused
    assert all(len(layer.runs) == 1 for layer in rec.layers if layer.engine == "VTA")
    assert all(layer.counter("load_insn_count") > 0 for layer in rec.layers if layer.runs)
    np.testing.assert_array_equal(rec.layers[-1].output, np.asarray(y))


def test_cli_demo_rejects_negative_count(capsys):
    assert main(["demo", "--count", "-1", "--backend", "behavioral"]) == 2
    assert "count=-1" in capsys.readouterr().err


def test_demo_on_verilator_counts_cycles():
    # The one RTL run of these tests (the Verilator build is shared with the other suites).
    from vtakit.tools.demo import rtl_build_cached
    r = run_demo("default", "verilator", 3, test_limit=6, progress=False, log=lambda *_: None)
    assert r.rtl_agree == 3 and r.ok
    assert r.cycles_per_image > 0 and 0 < r.gemm_utilization <= r.gemm_busy <= 1
    # the one predicted figure (the event model of every layer's kernel) is within 3%
    assert abs(r.predicted_cycles_per_image / r.cycles_per_image - 1) <= 0.03, \
        (r.predicted_cycles_per_image, r.cycles_per_image)
    assert rtl_build_cached("verilator", "default") and rtl_build_cached("behavioral", "tiny")


def test_recorders_nest():
    with open_device("behavioral", "default") as dev:
        outer = LayerRecorder(dev)
        with LayerRecorder(dev):
            pass
        assert vars(dev)["run"] == outer._logged_run      # the outer wrapper is back
        outer.close()
        assert "run" not in vars(dev)


def test_demo_latency_per_image(result):
    # Without a clock: the host time only; with one: VTA us (the predicted cycles, the
    # behavioral model has no clock) plus the host steps, here estimated for a Cortex-A9.
    assert result.fmax_mhz is None and result.latency_us_per_image is None
    assert result.host_us_per_image > 0
    assert "latency needs --fmax MHZ or --target FPGA" in format_demo(result)
    r = run_demo("default", "behavioral", 0, test_limit=10, progress=False,
                 log=lambda *_: None, fmax=50.0, host="cortex-a9")
    assert r.vta_us_per_image == pytest.approx(r.predicted_cycles_per_image / 50.0)
    assert r.host_us_per_image > 0
    assert r.latency_us_per_image == pytest.approx(r.vta_us_per_image + r.host_us_per_image)
    line = next(l for l in format_demo(r).splitlines() if "latency per image" in l)
    assert f"{r.latency_us_per_image:,.1f} us" in line and "at 50 MHz, --fmax" in line
    assert "estimated, cortex-a9" in line
