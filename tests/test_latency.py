"""Latency per inference on a target (vtakit.tools.latency, vtakit.runtime.hosttime):
host steps timed per layer, the host cost table, the Fmax cache of synth reports, and
`vtakit run --profile --fmax/--target/--host`."""

import gc
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import vtakit
from vtakit.boards.report import SynthReport
from vtakit.cli.main import main
from vtakit.compiler.frontend import from_tflite
from vtakit.compiler.ir import evaluate
from vtakit.hw.config import VTAConfig, load_config
from vtakit.hw.errors import InputError
from vtakit.runtime.hosttime import HostSpan, HostTimer, timed
from vtakit.testing import model_inputs
from vtakit.tools import latency
from vtakit.tools.profile import format_profile, latency_totals, profile_model

MLTK = Path(__file__).parent / "data" / "mltk"
#: A `vtakit synth --config tiny --target ecp5-85k --json` report, recorded (nextpnr's Fmax).
RECORDED = Path(__file__).parent / "fixtures" / "synth_tiny_ecp5.json"


def _recorded() -> SynthReport:
    (data,) = json.loads(RECORDED.read_text())
    return SynthReport.from_dict(data)


def _requant(base="tiny") -> VTAConfig:
    return VTAConfig.from_dict({**load_config(base).to_dict(), "EXTENSIONS": ["requant"]},
                               source=f"{base}+requant")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VTAKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------------------ hosttime
def test_timed_logs_only_while_a_timer_listens():
    a = np.arange(12, dtype=np.int32)
    assert timed("x", np.negative, a).tolist() == (-a).tolist()    # no timer: no log
    with HostTimer() as outer:
        timed("neg", np.negative, a)
        with HostTimer() as inner:
            timed("pack", lambda v: v.astype(np.int8), a)
        timed("none", lambda v: None, a)
    (span,) = inner.take()
    assert (span.op, span.elements, span.nbytes) == ("pack", 12, 48 + 12)
    spans = outer.take()
    assert [(s.op, s.elements, s.nbytes) for s in spans] == [("neg", 12, 96), ("none", 12, 48)]
    assert all(s.seconds >= 0 for s in spans) and outer.take() == []
    timed("after", np.negative, a)
    assert outer.spans == []


# ------------------------------------------------------------------ host cost table
def test_shipped_host_table_states_its_sources():
    host = latency.load_host("cortex-a9")
    assert host.clock_mhz == 650 and "default" in host.ops
    assert all(c.source.strip() for c in host.ops.values())
    c = host.cost("vta.requantize")
    span = HostSpan("vta.requantize", 1000, 5000, 1.0)
    assert host.seconds(span) == pytest.approx(
        (c.per_call + 1000 * c.per_element + 5000 * c.per_byte) / 650e6)
    assert host.cost("no.such.op") is host.ops["default"]
    assert latency.load_host("measured") is None and latency.load_host(None) is None
    assert latency.host_seconds([span, span]) == 2.0
    assert latency.host_seconds([span], host) == pytest.approx(host.seconds(span))


def test_bad_host_tables(tmp_path):
    with pytest.raises(InputError, match=r"^host 'pentium': give 'measured'"):
        latency.load_host("pentium")
    f = tmp_path / "h.json"
    f.write_text(json.dumps({"clock_mhz": 100, "ops": {"pack": {"cycles_per_byte": 1}}}))
    with pytest.raises(InputError, match=r"h\.json: the host cost table has no 'default'"):
        latency.load_host(str(f))
    f.write_text(json.dumps({"ops": {"default": {}}}))
    with pytest.raises(InputError, match=r"needs clock_mhz and ops"):
        latency.load_host(str(f))
    f.write_text(json.dumps({"clock_mhz": 0, "ops": {"default": {}}}))
    with pytest.raises(InputError, match=r"clock_mhz=0; must be > 0$"):
        latency.load_host(str(f))


# ------------------------------------------------------------------ Fmax cache
def test_fmax_cache_of_a_recorded_report(cache):
    report = _recorded()
    assert report.target == "ecp5-85k" and report.fmax_mhz > 0
    with pytest.raises(InputError, match=r"no cached ecp5-85k synthesis report of config "
                                         r"1x8_i8w8a32_12_12_14_14; run `vtakit synth "
                                         r"--config tiny --target ecp5-85k`"):
        latency.fmax_mhz("tiny", "ecp5-85k")
    path = latency.store_report("tiny", report)
    assert path.parent == cache / "fmax" and path.name.startswith("ecp5-85k-1x8_")
    assert latency.fmax_mhz("tiny", "ecp5-85k") == (report.fmax_mhz,
                                                   "vtakit synth ecp5-85k (nextpnr)")
    # keyed by config and target: another config or target has no report
    assert latency.cached_report(_requant(), "ecp5-85k") is None
    assert latency.cached_report("tiny", "ice40-up5k") is None
    assert latency.fmax_mhz("tiny", "ecp5-85k", 42.0) == (42.0, "--fmax")
    assert latency.fmax_mhz("tiny") == (None, "")
    with pytest.raises(InputError, match=r"^--fmax -1: a clock must be > 0 MHz$"):
        latency.fmax_mhz("tiny", None, -1.0)
    # a report of another design is stale: refused, with the command that refreshes it
    data = json.loads(path.read_text())
    assert data["design"] == latency.design_digest("tiny", "ecp5-85k")
    path.write_text(json.dumps({**data, "design": "0" * 16}))
    with pytest.raises(latency.StaleReport, match=r"made from another design \(RTLIL 0{16}, "
                                                  r"now [0-9a-f]{16}: the RTL changed\); run "
                                                  r"`vtakit synth --config tiny"):
        latency.fmax_mhz("tiny", "ecp5-85k")
    assert latency.cached_report("tiny", "ecp5-85k", stale_ok=True).fmax_mhz == report.fmax_mhz


def test_a_report_outlives_a_hw_edit_that_keeps_the_design(cache, monkeypatch):
    """The cache is keyed on the elaborated design (the RTLIL `vtakit synth` feeds Yosys),
    not on the hw/ sources: an edit whose design is byte-identical keeps the report (the
    design is elaborated again, once), one that changes the design makes it stale."""
    from vtakit.sim import rtl_build
    real = latency._rtlil
    calls = []

    def counted(cfg, target):
        calls.append((cfg.name, target))
        return real(cfg, target)
    monkeypatch.setattr(latency, "_rtlil", counted)
    latency._design_digest.cache_clear()
    report = _recorded()
    latency.store_report("tiny", report)
    assert calls == [("1x8_i8w8a32_12_12_14_14", "ecp5-85k")]
    # per process, and on disk (a new process reads it): no second elaboration
    latency._design_digest.cache_clear()
    assert latency.cached_report("tiny", "ecp5-85k").fmax_mhz == report.fmax_mhz
    assert len(calls) == 1 and len(list((cache / "fmax" / "designs").iterdir())) == 1

    # an edit of hw/ (other source digests) whose Verilog is the same: still current
    edited = {**rtl_build.SOURCE_DIGESTS, "compute.py": "0" * 64}
    monkeypatch.setattr(rtl_build, "SOURCE_DIGESTS", edited)
    assert latency.cached_report("tiny", "ecp5-85k").fmax_mhz == report.fmax_mhz
    assert len(calls) == 2          # elaborated again: the sources changed

    # an edit that changes the design: stale
    monkeypatch.setattr(rtl_build, "SOURCE_DIGESTS", {**edited, "alu.py": "1" * 64})
    monkeypatch.setattr(latency, "_rtlil", lambda cfg, target: real(cfg, target) + "\n")
    with pytest.raises(latency.StaleReport, match=r"was made from another design"):
        latency.cached_report("tiny", "ecp5-85k")
    assert latency.cached_report("tiny", "ecp5-85k", stale_ok=True).fmax_mhz == report.fmax_mhz


def test_a_report_of_before_design_digests_is_current_while_the_sources_are(cache):
    """A report that records only the hw/ sources' hash (written before reports recorded
    their design) stays current while the sources are the same, and is stale after."""
    report = _recorded()
    path = latency.report_path("tiny", "ecp5-85k")
    path.parent.mkdir(parents=True)
    data = {"config": load_config("tiny").to_dict(), "target": "ecp5-85k",
            "rtl": latency.rtl_digest(), "report": report.to_dict()}
    path.write_text(json.dumps(data))
    assert latency.cached_report("tiny", "ecp5-85k").fmax_mhz == report.fmax_mhz
    path.write_text(json.dumps({**data, "rtl": "0" * 16}))
    with pytest.raises(latency.StaleReport, match=r"another design \(hw/ sources 0{16}, now "):
        latency.cached_report("tiny", "ecp5-85k")


def test_the_digested_design_is_the_one_synth_feeds_yosys(monkeypatch):
    """config_rtlil (what design_digest hashes) elaborates what synth_config synthesizes:
    the same top level of the config with the same platform (family, DSP budget)."""
    import vtakit.boards.synth as synth
    seen = []

    def capture(component, platform=None):
        seen.append((type(component).__name__, component.config,
                     {n: q.depth for n, q in {**component.tokens, **component.commands}.items()},
                     platform))
        raise RuntimeError("stop before Yosys")
    monkeypatch.setattr(synth, "_rtlil", capture)
    with warnings.catch_warnings():      # the tops built here are never elaborated
        warnings.simplefilter("ignore")
        for cfg, target in (("tiny", "ecp5-85k"), (_requant(), "ice40-up5k")):
            for make in (lambda: synth.synth_config(cfg, target, progress=False),
                         lambda: synth.config_rtlil(cfg, target)):
                try:
                    make()
                except RuntimeError as e:
                    assert str(e) == "stop before Yosys"
            assert len(seen) == 2 and seen[0] == seen[1], seen
            assert seen[0][1] == load_config(cfg) and target.startswith(seen[0][3].family)
            seen.clear()
        gc.collect()


def test_synth_fmax_reuses_the_cache(cache, monkeypatch):
    import vtakit.boards.synth as synth
    calls = []

    def fake(cfg, target, **kw):
        calls.append((cfg.name, target))
        return _recorded()
    monkeypatch.setattr(synth, "synth_config", fake)
    first, spent = latency.synth_fmax("tiny", "ecp5-85k")
    again, spent2 = latency.synth_fmax("tiny", "ecp5-85k")
    assert calls == [("1x8_i8w8a32_12_12_14_14", "ecp5-85k")] and spent2 == 0.0
    assert again.fmax_mhz == first.fmax_mhz == _recorded().fmax_mhz


def test_a_report_without_fmax_is_not_cached(cache):
    report = _recorded()
    report.fmax_mhz = None
    with pytest.raises(InputError, match=r"has no Fmax \(not placed and routed\)"):
        latency.store_report("tiny", report)


# ------------------------------------------------------------------ profile
def _anomaly_input():
    path = MLTK / "anomaly_detection.tflite"
    x = model_inputs(from_tflite(path)["main"].params[0].type_annotation)[0]
    return path, x


@pytest.fixture(scope="module")
def anomaly():
    path, x = _anomaly_input()
    ref = np.asarray(evaluate(from_tflite(path), x))
    return path, x, ref


def _check_sums(rows, fmax):
    totals = latency_totals(rows, fmax)
    assert totals["host_us"] == pytest.approx(sum(r.host_us() for r in rows))
    assert totals["vta_us"] == pytest.approx(
        sum(r.vta_cycles for r in rows if r.engine == "VTA") / fmax)
    assert totals["total_us"] == pytest.approx(totals["vta_us"] + totals["host_us"])
    assert totals["dram_bytes"] == sum(r.dram_bytes for r in rows)
    return totals


def test_host_steps_base_isa_and_requant(anomaly):
    """On the base ISA every dense layer's int32 result is requantized on the host; with
    the requant extension the layers between the first and the last have no host step."""
    path, x, ref = anomaly
    exe = vtakit.compile(path, config="tiny")
    y, rows = profile_model(exe, [x])
    assert np.array_equal(y[exe.output_names[0]], ref)
    vta = [r for r in rows if r.engine == "VTA"]
    assert len(vta) == 10
    for r in vta:
        assert "vta.requantize" in [s.op for s in r.host_spans], r.name
        assert r.host_us() > 0
    host = latency.load_host("cortex-a9")
    est = [r.host_us(host) for r in vta]
    assert all(e > 0 for e in est)
    _check_sums(rows, 100.0)

    exe = vtakit.compile(path, config=_requant())
    y, rows = profile_model(exe, [x], chain=False)
    assert np.array_equal(y[exe.output_names[0]], ref)
    vta = [r for r in rows if r.engine == "VTA"]
    assert all("vta.requantize" not in [s.op for s in r.host_spans] for r in vta)
    inner = vta[1:-1]           # device tensor in, device tensor out: nothing on the host
    assert inner and all(r.host_spans == [] and r.host_us() == 0.0 for r in inner)
    assert [s.op for s in vta[0].host_spans] == ["pack", "upload"]
    assert [s.op for s in vta[-1].host_spans] == ["download", "unpack"]
    _check_sums(rows, 50.0)

    # chained (the default): the ten layers run as one stream, one row naming them
    y, rows = profile_model(exe, [x])
    assert np.array_equal(y[exe.output_names[0]], ref)
    (chain,) = [r for r in rows if r.engine == "VTA"]
    assert chain.layers == tuple(r.name for r in vta)
    assert chain.name == f"{vta[0].name} +9"
    assert [s.op for s in chain.host_spans] == ["pack", "upload", "download", "unpack"]
    totals = _check_sums(rows, 50.0)
    text = format_profile(rows, "behavioral", fmax_mhz=50.0, host=host)
    lines = text.splitlines()
    assert re.search(r"VTA us +host us +total us$", lines[0])
    for r, line in zip(rows, lines[1:]):
        vta_us = r.vta_cycles / 50.0 if r.engine == "VTA" else 0.0
        host_us = r.host_us(host)
        assert line.split()[-3:] == [f"{vta_us:,.1f}", f"{host_us:,.1f}",
                                     f"{vta_us + host_us:,.1f}"], line
    assert lines[-2].split()[-3:] == [f"{totals['vta_us']:,.1f}",
                                      f"{sum(r.host_us(host) for r in rows):,.1f}",
                                      f"{totals['vta_us'] + sum(r.host_us(host) for r in rows):,.1f}"]
    assert "predicted cycles at 50 MHz" in lines[-1] and "estimated for cortex-a9" in lines[-1]


def test_profile_cycles_are_the_rtl_runs(anomaly, tmp_path):
    """On Verilator the VTA us are the measured cycles of the device runs (counted by an
    outer recorder of the same device) over Fmax; the model's total is the layers' sum."""
    from vtakit.runtime.recorder import LayerRecorder
    from vtakit.sim import open_device
    path, x, ref = anomaly
    exe = vtakit.compile(path, config="tiny")
    with open_device("verilator", exe.config) as dev, \
            LayerRecorder(dev, keep_outputs=False) as outer:
        y, rows = profile_model(exe, [x], device=dev, hook=outer.hook)
    assert np.array_equal(y[exe.output_names[0]], ref)
    measured = [layer.cycles for layer in outer.layers]
    assert all(c > 0 for c, r in zip(measured, rows) if r.engine == "VTA")
    assert [r.cycles for r in rows] == measured
    fmax = _recorded().fmax_mhz
    totals = _check_sums(rows, fmax)
    assert totals["cycles"] == sum(measured)
    assert totals["vta_us"] == pytest.approx(sum(measured) / fmax)
    assert [r.vta_us(fmax) for r in rows if r.engine == "VTA"] == \
        pytest.approx([c / fmax for c, r in zip(measured, rows) if r.engine == "VTA"])


# ------------------------------------------------------------------ vtakit run
def test_run_profile_fmax_and_target(anomaly, tmp_path, capsys, cache):
    path, x, _ = anomaly
    model = tmp_path / "m.vtax"
    assert main(["compile", str(path), "--config", "tiny", "-o", str(model)]) == 0
    np.save(tmp_path / "x.npy", x)
    base = ["run", str(model), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y")]
    capsys.readouterr()
    assert main(base + ["--profile", "--fmax", "100"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(i for i, l in enumerate(out) if "VTA us" in l)
    total = next(l for l in out if l.lstrip().startswith("total"))
    layers = out[head + 1:out.index(total)]
    assert len(layers) == 12
    vta = [float(l.split()[-3].replace(",", "")) for l in layers]
    host = [float(l.split()[-2].replace(",", "")) for l in layers]
    assert sum(v > 0 for v in vta) == 10 and all(h > 0 for h in host)
    assert float(total.split()[-3].replace(",", "")) == pytest.approx(sum(vta), abs=0.6)
    assert "at 100 MHz (--fmax)" in out[out.index(total) + 1]

    # the clock of a cached synth report of the config on the target
    assert main(base + ["--profile", "--target", "ecp5-85k"]) == 2
    assert "no cached ecp5-85k synthesis report" in capsys.readouterr().err
    latency.store_report("tiny", _recorded())
    assert main(base + ["--profile", "--target", "ecp5-85k", "--host", "cortex-a9"]) == 0
    out = capsys.readouterr().out
    assert f"at {_recorded().fmax_mhz:g} MHz (vtakit synth ecp5-85k (nextpnr))" in out
    assert "estimated for cortex-a9 at 650 MHz" in out

    assert main(base + ["--fmax", "100"]) == 2
    assert "--fmax, --target and --host go with --profile" in capsys.readouterr().err
    assert main(base + ["--profile", "--fmax", "100", "--target", "ecp5-85k"]) == 2
    assert "give the clock once" in capsys.readouterr().err
