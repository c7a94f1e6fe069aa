"""Thin-input convolutions (stems) folded into channels (vtakit.compiler.vta.fold): the
host re-layout equals the padded convolution, the folded layer equals the interpreter
and the unfolded lowering on the behavioral model and bit for bit on Verilator, the
fold is chosen by predicted cycles, and executables carry it as data (a ``pre`` step)
that a saved ``.vtax`` runs without the compiler."""

import json
import subprocess
import sys

import numpy as np
import pytest

import vtakit
import vtakit.compiler.quant  # noqa: F401
from vtakit.compiler.codegen import compile_vm
from vtakit.compiler.ir import Call, Constant, Function, IRModule, TensorType, Var, evaluate
from vtakit.compiler.ops.reference import group_conv2d_ref
from vtakit.compiler.passes import default_pipeline, vm_pipeline
from vtakit.compiler.vta import fold, layer_spec, lower_primitive, match_layer, vm_lowerer
from vtakit.compiler.vta.conv import conv_spec
from vtakit.compiler.vta.fold import fold_modes, fold_spec, fold_weights, folded_shapes
from vtakit.hw.config import load_config
from vtakit.runtime import Runtime
from vtakit.runtime.hostops import get_hostop
from vtakit.runtime.layout import pack_activation
from vtakit.runtime.vm.objects import DeviceStorage
from vtakit.sim import open_device
from vtakit.compiler.nn import call as _op

TINY = load_config("tiny")


def _conv(x, w, b, stride, pad, pad_value, rounding):
    o = w.shape[0]
    y = _op("nn.conv2d", x, Constant(w), strides=stride, padding=pad, dilation=(1, 1),
            groups=1, pad_value=pad_value, out_dtype="int32")
    y = _op("nn.bias_add", y, Constant(b), axis=1)
    scale = 2.0 ** -8 if rounding == "vta" else tuple(np.linspace(2e-3, 6e-3, o))
    y = _op("qnn.requantize", y, scale=scale, zero_point=-3, rounding=rounding,
            axis=None if rounding == "vta" else 1)
    return _op("cast", _op("clip", y, a_min=-128, a_max=127), dtype="int8")


def _stem(rounding, c=3, o=16, k=5, stride=(2, 2), pad=(2, 2, 2, 1), size=(14, 13), seed=0,
          pad_value=-5.0):
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((1, c) + size, "int8"))
    w = rng.integers(-60, 60, (o, c, k, k)).astype(np.int8)
    b = rng.integers(-900, 900, o).astype(np.int32)
    fn = Function([x], _conv(x, w, b, stride, pad, pad_value, rounding))
    return fn, rng.integers(-128, 128, (1, c) + size).astype(np.int8)


@pytest.mark.parametrize("c,h,w,k,stride,pad", [
    (3, 11, 9, (3, 3), (2, 2), (1, 1, 1, 1)),
    (3, 13, 12, (7, 7), (2, 2), (3, 3, 3, 3)),
    (1, 12, 7, (4, 3), (2, 1), (2, 1, 1, 0)),
    (2, 10, 10, (5, 3), (3, 2), (0, 2, 1, 1))])
def test_every_fold_equals_the_padded_convolution(c, h, w, k, stride, pad):
    rng = np.random.default_rng(c * h + w)
    x = rng.integers(-128, 128, (2, c, h, w)).astype(np.int8)
    wt = rng.integers(-128, 128, (5, c) + k).astype(np.int8)
    t, l, b, r = pad
    want = group_conv2d_ref(np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=-7),
                            wt, stride, 0, 1)
    fold_input = get_hostop("vta.fold_input")
    modes = fold_modes(wt.shape, stride)
    assert ("taps", "taps") in modes and ("none", "none") not in modes
    for m in modes:
        fx = fold_input(x, modes=m, kernel=k, strides=stride, padding=pad, pad_value=-7)
        fw = fold_weights(wt, stride, m)
        shapes = folded_shapes(x.shape, wt.shape, stride, pad, m)
        assert (fx.shape, fw.shape) == shapes[:2] and fx.dtype == np.int8
        np.testing.assert_array_equal(group_conv2d_ref(fx, fw, shapes[2], 0, 1), want,
                                      err_msg=str(m))


def _run(fn, x, device, records=None):
    return lower_primitive(fn, records=records)(Runtime(device), x)


@pytest.mark.parametrize("rounding,where", [("vta", "vta"), ("tflite", "vta+host")])
def test_stem_folds_and_equals_interpreter_and_unfolded(rounding, where, monkeypatch):
    fn, x = _stem(rounding)
    spec = layer_spec(match_layer(fn.body), x.shape, (16, 3, 5, 5), TINY)
    assert spec.pre is not None and spec.pre.op == "vta.fold_input" and spec.border is None
    records, dev = [], open_device("behavioral", TINY)
    got = _run(fn, x, dev, records)
    np.testing.assert_array_equal(got, evaluate(fn, x))
    (rec,) = records
    assert (rec.kind, rec.where) == ("conv2d", where) and rec.dram_bytes_run > 0
    assert rec.why.startswith("3 input channels: folded on the host")
    assert rec.macs == 16 * 3 * 25 * 7 * 6
    # an input left in device DRAM is downloaded for the re-layout, not read in place
    rt, packed = Runtime(dev), pack_activation(x, TINY)
    xt = DeviceStorage(rt, packed.nbytes).tensor(0, x.shape, np.int8)
    xt.write_packed(packed)
    np.testing.assert_array_equal(lower_primitive(fn)(rt, xt), got)
    monkeypatch.setattr(fold, "_thin", lambda *a: False)        # the unfolded lowering
    records = []
    np.testing.assert_array_equal(_run(fn, x, dev, records), got)
    assert "folded" not in records[0].why and records[0].predicted_cycles > rec.predicted_cycles


def test_folded_stem_on_verilator_equals_behavioral():
    fn, x = _stem("tflite", seed=1)
    want = evaluate(fn, x)
    for backend in ("behavioral", "verilator"):
        dev = open_device(backend, TINY, **({"progress": False} if backend != "behavioral"
                                             else {}))
        try:
            records = []
            got = _run(fn, x, dev, records)
        finally:
            dev.close()
        assert dev.name == backend and "folded" in records[0].why
        assert records[0].cycles > 0 or backend == "behavioral"
        np.testing.assert_array_equal(got, want, err_msg=backend)


@pytest.mark.parametrize("config,c,k,stride,pad_value", [
    ("default", 3, 7, (2, 2), -5.0), ("default", 15, 3, (1, 1), -5.0),
    ("default", 15, 3, (1, 1), 0.0), ("tiny", 1, 3, (1, 1), 3.0), ("tiny", 3, 3, (2, 2), 0.0)])
def test_the_fold_of_fewest_predicted_cycles_is_chosen(config, c, k, stride, pad_value):
    cfg = load_config(config)
    fn, x = _stem("vta", c=c, o=16, k=k, stride=stride, pad=(k // 2,) * 4, size=(24, 24),
                  pad_value=pad_value)
    layer = match_layer(fn.body)
    shape, w_shape = x.shape, (16, c, k, k)
    chosen = layer_spec(layer, shape, w_shape, cfg)
    if 2 * c >= cfg.block_in:
        # half a block or more: not a stem; it keeps reading its input in place (a fold
        # would move it through the host), even where a fold would predict fewer cycles
        assert chosen.pre is None
        return
    cycles = [conv_spec(layer, shape, w_shape, cfg).plan.estimate.cycles]
    for m in fold_modes(w_shape, stride):
        cycles.append(fold_spec(layer, shape, w_shape, cfg, m).plan.estimate.cycles)
    assert chosen.plan.estimate.cycles == min(cycles)
    assert (chosen.pre is None) == (cycles[0] == min(cycles))


def _model():
    """A thin stem from the model's input, a 1x1 conv to 3 channels, and a second thin
    conv whose input comes from a VTA layer (device-resident unless folded)."""
    rng = np.random.default_rng(5)
    x = Var("x", TensorType((1, 3, 12, 12), "int8"))

    def params(o, c, k):
        return (rng.integers(-50, 50, (o, c, k, k)).astype(np.int8),
                rng.integers(-500, 500, o).astype(np.int32))
    y = _conv(x, *params(8, 3, 3), (2, 2), (1, 1, 1, 1), -5.0, "vta")
    y = _conv(y, *params(3, 8, 1), (1, 1), (0, 0, 0, 0), 0.0, "vta")
    y = _conv(y, *params(8, 3, 3), (1, 1), (1, 1, 1, 1), 4.0, "tflite")
    return Function([x], y), rng.integers(-128, 128, (1, 3, 12, 12)).astype(np.int8)


def test_folded_layers_in_an_executable_run_from_a_saved_vtax(tmp_path):
    from test_vtax_standalone import RUNNER
    fn, x = _model()
    want = evaluate(fn, x)
    mod = vm_pipeline()(default_pipeline()(IRModule({"main": fn})))
    report = []
    exe = compile_vm(mod, config=TINY, lowerer=vm_lowerer(TINY, report))
    assert [r.where for r in report] == ["vta", "vta", "vta+host"]
    assert ["folded" in r.why for r in report] == [True, False, True]
    metas = [json.loads(p.meta) for p in exe.primitives if p.kind == "vta_layer"]
    assert [m.get("pre", {}).get("op") for m in metas] == ["vta.fold_input", None,
                                                           "vta.fold_input"]
    assert "pre" not in metas[1]            # unfolded layers' metadata is as before
    with exe.vm() as vm:
        np.testing.assert_array_equal(vm.run(x), want)
    path = exe.save(tmp_path / "m.vtax")
    np.testing.assert_array_equal(np.asarray(vtakit.load(path).run([x])), want)
    np.savez(tmp_path / "in.npz", **{"0": x})
    (tmp_path / "run.py").write_text(RUNNER)
    r = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(path),
                        str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as got:
        (k,) = got.files
        np.testing.assert_array_equal(got[k], want)
