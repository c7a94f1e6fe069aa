"""The event model as the benches and the profile call it: with ``COMPUTE_OVERLAP`` they
pass each stream's uop staging (:func:`~vtakit.compiler.ops.cost.events.predict_stream`'s
``uops``), so that they predict the ALU lane as the compiler (the model engine,
:func:`~vtakit.tools.point.predict_layers`) does; no RTL needed."""

import dataclasses

import pytest

from bench_util import load_script
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
    return load_script("costmodel")


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


def test_compute_load_waits_for_the_burst_asked_before_it():
    """A compute LOAD that starts after the load module's LOAD started waits for that
    LOAD's burst in flight (``hw/top.py``'s arbiter grants nothing while more than its
    read-ahead of beats is outstanding; a 288-beat weight LOAD's first burst is 256
    beats). The compute module's token push lets both go; the model used to run the
    compute module ahead and give its LOAD the port first (the demo CNN's chain
    boundaries: B's hoisted bias rows behind B's weights, predicted 2.5% short)."""
    from vtakit.hw.isa import MemType, Opcode, isa_for
    from vtakit.hw.spec import Unit, dispatch_unit
    cfg = config_from_spec("default")
    isa = isa_for(cfg)

    def load(mt, n, **flags):
        return isa.encode(Opcode.LOAD, memory_type=mt, y_size=1, x_size=n, x_stride=n, **flags)
    words = [load(MemType.UOP, 0, push_prev_dep=1),      # compute: g2l to the load module
             load(MemType.WGT, 9, pop_next_dep=1),       # load: 9 x 32 beats
             load(MemType.UOP, 0),                        # compute: a cycle later
             load(MemType.ACC, 1),                        # compute: its LOAD asks then
             isa.encode(Opcode.FINISH)]
    insns = [isa.decode(w) for w in words]
    spans = [s for s in predict_stream(insns, cfg, intervals=True).intervals["compute"]
             if s.kind == "busy"]
    assert [dispatch_unit(i.opcode, i.fields.get("memory_type")) for i in insns] == [
        Unit.COMPUTE, Unit.LOAD, Unit.COMPUTE, Unit.COMPUTE, Unit.COMPUTE]
    # the burst's beats beyond the read-ahead come first: the 8-beat row is not there
    # before ~190 of the 256 beats are (the weights started a cycle or so before)
    acc = spans[2]
    assert acc.end - acc.start > 190, spans
    # asked before the weights, it goes first
    first = [words[0], words[3], words[1], words[2], words[4]]
    spans = [s for s in predict_stream([isa.decode(w) for w in first], cfg,
                                       intervals=True).intervals["compute"] if s.kind == "busy"]
    assert spans[1].end - spans[1].start < 30, spans


def test_costmodel_load_refits_saved_rows(digits, monkeypatch, tmp_path, capsys):
    """``bench/costmodel.py --save`` then ``--load --fit``: the refit reads the saved
    kernel streams (nothing compiled or measured again) and prints what a refit of the
    rows in memory prints."""
    exe, x = digits
    cm = _costmodel()
    real = cm.profile_model
    monkeypatch.setattr(cm, "profile_model",
                        lambda exe, inputs, backend: real(exe, inputs, "behavioral"))
    monkeypatch.setattr(cm, "compile_model", lambda mod, cfg: exe)
    monkeypatch.setattr(cm, "load_model_input", lambda path, _: (None, x, None))
    saved = tmp_path / "rows.pkl"
    cm.main(["--backend", "behavioral", "--configs", SPEC, "--models", "digits_cnn",
             "--save", str(saved), "--fit", "store_insn_cycles=3"])
    first = capsys.readouterr().out
    monkeypatch.setattr(cm, "compile_model", None)      # --load compiles nothing
    monkeypatch.setattr(cm, "profile_model", None)
    cm.main(["--load", str(saved), "--fit", "store_insn_cycles=3"])
    again = capsys.readouterr().out
    assert "refit" in first and first == again
