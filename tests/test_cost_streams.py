"""The event model as the benches and the profile call it: with ``COMPUTE_OVERLAP`` they
pass each stream's uop staging (:func:`~vtakit.compiler.ops.cost.events.predict_stream`'s
``uops``), so that they predict the ALU lane as the compiler (the model engine,
:func:`~vtakit.tools.point.predict_layers`) does; no RTL needed."""

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from vtakit.compiler.build_model import compile_model
from vtakit.compiler.ops.perfmodel import predict_stream
from vtakit.hw.config import config_from_spec
from vtakit.tools import profile as profile_mod
from vtakit.tools.point import DEMO, load_model_input, predict_layers

SPEC = "tiny+overlap"


@pytest.fixture(scope="module")
def digits():
    """The demo CNN compiled for ``tiny+overlap`` (its conv layers chained), its input."""
    mod, x = load_model_input(DEMO, None)[:2]
    return compile_model(mod, config_from_spec(SPEC)), x


def _costmodel():
    path = Path(__file__).resolve().parent.parent / "bench" / "costmodel.py"
    spec = importlib.util.spec_from_file_location("bench_costmodel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_profile_predicts_the_lane(digits):
    """``run --profile``'s predicted cycles (the stream that ran, with the micro-ops its
    LOAD UOPs read from the device) are the model engine's, which follows the lane: on
    the chained stream the lane changes the prediction, so without the uops they differ."""
    exe, x = digits
    runs = []
    pred = predict_layers(exe, runs=runs)
    _, rows = profile_mod.profile_model(exe, [x], "behavioral")
    assert [r.name for r in rows] == [p["layer"] for p in pred]
    assert [r.predicted_cycles for r in rows] == [p["cycles"] for p in pred]
    chained = next(r for r in runs if r.insns is not None)
    one_lane = predict_stream(chained.insns, exe.config).cycles
    assert one_lane != chained.cycles, "the lane should change this stream's prediction"


def test_costmodel_fit_predicts_the_lane(digits, monkeypatch):
    """``bench/costmodel.py --fit`` predicts every kernel stream again: with the measured
    cycles standing in as the model engine's own, RTL_COST refits to 0% error (it did
    not when the refit predicted without the uops, i.e. without the lane)."""
    exe, x = digits
    cm = _costmodel()
    real = cm.profile_model

    def profile_as_predicted(exe, inputs, backend):
        out, rows = real(exe, inputs, "behavioral")
        cycles = {p["layer"]: p["cycles"] for p in predict_layers(exe)}
        return out, [dataclasses.replace(r, cycles=cycles[r.name]) for r in rows]
    monkeypatch.setattr(cm, "profile_model", profile_as_predicted)
    monkeypatch.setattr(cm, "compile_model", lambda mod, cfg: exe)
    row = cm.measure("digits_cnn", None, x, SPEC, exe.config, "predicted")
    assert row["error"] == 0 and row["model_cycles"] > 0
    assert any(len(s[0]) and s[1] is not None and len(s[1]) for s in row["streams"])
    line = cm.fit([row], {})[-1]
    assert line.split()[0] == "0.00%" and "RTL_COST as it is" in line, line
