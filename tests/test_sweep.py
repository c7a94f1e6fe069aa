"""`vtakit sweep` on a real 2-worker dask LocalCluster: grid expansion, engines (model,
behavioral, one Verilator point on the tiny config), 1 vs 2 workers, a worker killed
mid-sweep, failed points, resuming, the CLI and the Pareto plot."""

import functools
import json
import os
from pathlib import Path

import cloudpickle
import numpy as np
import pyarrow.parquet as pq
import pytest
from distributed import Client, LocalCluster

import vtakit
from vtakit.cli.main import main
from vtakit.tools import point as point_mod
from vtakit.tools.grid import expand_configs, make_points, parse_grid
from vtakit.tools.pareto import pareto_front
from vtakit.tools.point import TIMING_COLUMNS, run_point
from vtakit.tools.sweep import sweep

MLTK = Path(__file__).parent / "data" / "mltk"
ANOMALY = str(MLTK / "anomaly_detection.tflite")


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def _deterministic(table):
    return table.drop_columns(list(TIMING_COLUMNS)).to_pylist()


def test_grid_skips_illegal_combinations_with_the_loader_error():
    cfgs, skipped = expand_configs(["default"], ["LOG_BLOCK=3,4", "LOG_BATCH=0"])
    assert [c[0] for c in cfgs] == ["default/LOG_BLOCK=4/LOG_BATCH=0"]
    (label, err), = skipped
    assert label == "default/LOG_BLOCK=3/LOG_BATCH=0"
    assert "LOG_ACC_BUFF_SIZE=17" in err and "bits" in err
    _, skipped = expand_configs(["tiny"], {"NOT_A_KEY": [1]})
    assert "unknown config key(s) NOT_A_KEY" in skipped[0][1]
    with pytest.raises(ValueError, match="KEY=v1,v2"):
        parse_grid(["LOG_BLOCK"])
    # the ISA extensions are one more axis (issue 22's requant)
    cfgs, skipped = expand_configs(["tiny"], ["EXTENSIONS=none,requant,bogus"])
    assert [c[0] for c in cfgs] == ["tiny/EXTENSIONS=none", "tiny/EXTENSIONS=requant"]
    assert "EXTENSIONS" not in json.loads(cfgs[0][1])
    assert json.loads(cfgs[1][1])["EXTENSIONS"] == ["requant"]
    assert skipped[0][0] == "tiny/EXTENSIONS=bogus" and "bogus" in skipped[0][1]
    # so are the micro-architecture keys a preset leaves out (tiny has neither)
    cfgs, skipped = expand_configs(["tiny"], ["UOP_STREAM=0,1", "COMPUTE_OVERLAP=1,2"])
    assert [c[0] for c in cfgs] == ["tiny/UOP_STREAM=0/COMPUTE_OVERLAP=1",
                                    "tiny/UOP_STREAM=1/COMPUTE_OVERLAP=1"]
    got = [json.loads(c[1]) for c in cfgs]
    assert "UOP_STREAM" not in got[0] and got[1]["UOP_STREAM"] == 1
    assert all(g["COMPUTE_OVERLAP"] == 1 for g in got)
    assert [s[0] for s in skipped] == ["tiny/UOP_STREAM=0/COMPUTE_OVERLAP=2",
                                       "tiny/UOP_STREAM=1/COMPUTE_OVERLAP=2"]
    assert "COMPUTE_OVERLAP must be 0 or 1" in skipped[0][1]
    points, _ = make_points(["tiny", "default"], ["demo", ANOMALY])
    assert [(p.config, p.model) for p in points] == [
        ("default", "anomaly_detection"), ("default", "demo"),
        ("tiny", "anomaly_detection"), ("tiny", "demo")]


def test_model_engine_equals_the_event_model_on_the_streams_that_ran(client):
    # The model engine binds each kernel as the VM does; its per-layer cycles are the
    # behavioral engine's (event model of the recorded streams), without running.
    res = sweep(["tiny", "default"], ["demo", ANOMALY], engine="behavioral", client=client,
                progress=False, log=None)
    model = sweep(["tiny", "default"], ["demo", ANOMALY], engine="model", client=client,
                  progress=False, log=None)
    assert not res.failed and not model.failed
    rows = res.rows
    assert all(r["matches_interpreter"] and r["mismatched_elements"] == 0 for r in rows)
    assert [r["cycles"] for r in rows] == [r["cycles"] for r in model.rows]
    assert all(r["matches_interpreter"] is None for r in model.rows)
    layers = model.layers.to_pylist()
    assert [(r["layer"], r["cycles"]) for r in layers] == \
        [(r["layer"], r["cycles"]) for r in res.layers.to_pylist()]
    for r in rows:
        mine = [x for x in layers if (x["config"], x["model"]) == (r["config"], r["model"])]
        assert r["cycles"] == sum(x["cycles"] for x in mine) > 0
        # a chain of layers (one stream) is one row covering its calls
        assert r["vta_layers"] == sum(x["calls"] for x in mine if x["where"] == "VTA")
        assert r["peak_dram_bytes"] > 0 and r["dram_bytes"] > 0
        assert 0 < r["gemm_utilization"] < 1


def test_one_verilator_point_measures_cycles_and_matches_the_interpreter(client):
    res = sweep(["tiny"], ["demo"], engine="verilator", client=client, progress=False,
                log=None)
    row, = res.rows
    assert row["status"] == "ok", row["error"]
    assert row["cycles_source"] == "rtl" and row["matches_interpreter"]
    # measured cycles differ from the event model's prediction, which is also recorded
    assert row["cycles"] > 0 and row["predicted_cycles"] > 0


def test_one_and_two_workers_give_the_same_table(client, tmp_path):
    args = (["default", "4x8"], ["demo", ANOMALY])
    kw = dict(grid=["LOG_BLOCK=3,4"], engine="model", progress=False, log=None)
    two = sweep(*args, client=client, output=tmp_path / "two.parquet", **kw)
    one = sweep(*args, workers=1, output=tmp_path / "one.parquet", **kw)
    assert len(two.rows) == 6 and len(two.skipped) == 1
    assert _deterministic(one.table) == _deterministic(two.table)
    assert _deterministic(pq.read_table(tmp_path / "one.parquet")) == _deterministic(two.table)
    assert one.layers.to_pylist() == two.layers.to_pylist()
    assert (tmp_path / "two.csv").read_text().count("\n") == 7


def _crash_once(spec, marker):
    # Kills its worker process the first time any worker runs it (the marker file is
    # shared); the scheduler reschedules the point, which then runs normally.
    if spec.model == "anomaly_detection" and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return run_point(spec)


def test_a_worker_killed_mid_sweep_loses_no_point(client, tmp_path):
    marker = tmp_path / "crashed"
    cloudpickle.register_pickle_by_value(__import__(__name__))
    try:
        res = sweep(["tiny", "default"], ["demo", ANOMALY], engine="model", client=client,
                    progress=False, log=None,
                    task=functools.partial(_crash_once, marker=str(marker)))
    finally:
        cloudpickle.unregister_pickle_by_value(__import__(__name__))
    assert marker.exists(), "no worker was killed"
    assert [(r["config"], r["model"], r["status"]) for r in res.rows] == [
        ("default", "anomaly_detection", "ok"), ("default", "demo", "ok"),
        ("tiny", "anomaly_detection", "ok"), ("tiny", "demo", "ok")]
    client.wait_for_workers(2, timeout=60)     # the nanny restarted the killed one


def test_failed_point_is_recorded_and_resuming_runs_only_what_is_missing(client, tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not an onnx model")
    out = tmp_path / "s.parquet"
    kw = dict(engine="model", client=client, progress=False, log=None, output=out)
    first = sweep(["tiny"], ["demo", str(bad)], **kw)
    rows = {r["model"]: r for r in first.rows}
    assert rows["demo"]["status"] == "ok"
    assert rows["broken"]["status"] == "error" and "broken.onnx" in rows["broken"]["error"]
    # the same sweep plus a model: the done point is kept, the failed one retried
    lines = []
    second = sweep(["tiny"], ["demo", str(bad), ANOMALY], **{**kw, "log": lines.append})
    assert second.ran == 2 and "1 point(s) done, 2 to run" in lines[0]
    assert [r["model"] for r in second.rows] == ["anomaly_detection", "broken", "demo"]
    assert _deterministic(second.table)[2] == _deterministic(first.table)[1]
    # an interrupted sweep: only its journal exists
    journal = tmp_path / "s.parquet.partial.jsonl"
    for f in (out, tmp_path / "s.layers.parquet"):
        f.unlink()
    journal.write_text("".join(
        json.dumps({"row": r, "layers": []}) + "\n" for r in second.rows[:1])
        + '{"row": {"cut sh')
    third = sweep(["tiny"], ["demo", ANOMALY], **kw)
    assert third.ran == 1 and not journal.exists() and out.exists()


def test_cli_sweep_writes_table_plot_and_layer_breakdown(client, tmp_path, capsys):
    out, png = tmp_path / "s.parquet", tmp_path / "p.png"
    code = main(["sweep", "--configs", "tiny,default", "--grid", "LOG_BATCH=0,1",
                 "--models", f"demo,{ANOMALY}", "--scheduler", client.scheduler.address,
                 "-o", str(out), "--plot", str(png)])
    text = capsys.readouterr().out
    assert code == 0, text
    table = pq.read_table(out).to_pylist()
    assert len(table) == 8 and all(r["status"] == "ok" for r in table)
    assert "costliest layers" in text and "wrote" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for model in ("demo", "anomaly_detection"):
        mine = [r for r in table if r["model"] == model]
        front = pareto_front(mine, "macs_per_cycle")
        best = min(r["cycles"] for r in mine)
        assert front[-1]["cycles"] == best
        assert np.all(np.diff([r["cycles"] for r in front]) < 0)


def test_public_api_and_cli_errors(tmp_path, capsys):
    assert vtakit.sweep is sweep
    assert point_mod.ENGINES == ("model", "behavioral", "verilator", "cxxrtl")
    assert main(["sweep", "--models", str(tmp_path / "missing.tflite")]) == 2
    assert "missing.tflite: no such file" in capsys.readouterr().err
    assert main(["sweep", "-o", str(tmp_path / "x.csv")]) == 2
    assert "is a .parquet file" in capsys.readouterr().err


# ---------------------------------------------------------------- sharded compare

@pytest.fixture(scope="module")
def digits_tiny(tmp_path_factory):
    from vtakit.tools.point import load_model_input
    mod, x, _ = load_model_input("demo", None)
    exe = vtakit.compile(mod, config="tiny")
    d = tmp_path_factory.mktemp("shard")
    np.save(d / "x.npy", x)
    return exe, exe.save(d / "digits.vtax"), x, d


def _register_corrupting_backend(insn_count):
    # In a worker: a behavioral backend "corrupt" whose kernels of `insn_count`
    # instructions store one wrong byte (the first byte the run changed, plus one).
    from vtakit.runtime import device
    from vtakit.sim import behavioral

    class CorruptDevice(behavioral.BehavioralDevice):
        def run_image(self, image):
            record = super().run_image(image)
            if image.insn_count == insn_count:
                changed = np.flatnonzero(record.dram != image.dram)
                record.dram[changed[0]] += 1
            return record
    behavioral.CorruptDevice = CorruptDevice
    device.BACKENDS["corrupt"] = "vtakit.sim.behavioral:CorruptDevice"


def test_sharded_compare_names_the_first_diverging_layer(client, digits_tiny):
    from vtakit.tools.shard import compare_sharded, format_sharded
    exe, _, x, d = digits_tiny
    same = compare_sharded(exe, x, ["behavioral", "behavioral"], client=client, save_dir=d,
                           progress=False)
    assert same.equal and len(same.checks) == 7
    assert [name for name, _ in same.layers][3] == "vta_conv2d_add"
    # the fused add kernel is the only one with its instruction count: corrupt it on the
    # workers
    from vtakit.runtime.device import open_device
    from vtakit.runtime.recorder import LayerRecorder
    with open_device("behavioral", exe.config) as dev, \
            LayerRecorder(dev, keep_images=True, keep_outputs=False) as rec:
        exe.run(x, device=dev, hook=rec.hook)
    counts = [layer.runs[0].image.insn_count for layer in rec.layers if layer.runs]
    add = counts[2]
    assert counts.count(add) == 1, counts
    cloudpickle.register_pickle_by_value(__import__(__name__))
    try:
        client.run(_register_corrupting_backend, add)
    finally:
        cloudpickle.unregister_pickle_by_value(__import__(__name__))
    bad = compare_sharded(exe, x, ["behavioral", "corrupt"], client=client, save_dir=d,
                          stem="digits", progress=False)
    index, name, run, report, saved = bad.divergences["corrupt"]
    assert (index, name, run) == (3, "vta_conv2d_add", 0)
    assert "DIFFER: first differing byte" in report and "(1 byte differ)" in report
    text = format_sharded(bad)
    assert "first diverging layer #3 vta_conv2d_add" in text and saved.exists()


def test_cli_compare_vtax_on_workers_against_verilator(client, digits_tiny, capsys):
    _, vtax, _, d = digits_tiny
    code = main(["compare", str(vtax), "--input", str(d / "x.npy"), "--backends",
                 "behavioral,verilator", "--scheduler", client.scheduler.address])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "every VTA kernel's final DRAM is equal" in out
    cycles = int(out.split("verilator: ")[1].split("cycles ")[1].split()[0].replace(",", ""))
    assert cycles > 0
    assert main(["compare", str(d / "x.npy"), "--backends", "behavioral,pysim",
                 "--workers", "2"]) == 2
    assert "are for a compiled model" in capsys.readouterr().err


def test_synth_resources_are_cached_per_config_and_target(tmp_path, monkeypatch):
    # The tools themselves are slow (bench/synth.py); here synth_config is replaced by a
    # counter to check the cache: one synthesis per (config, target). ECP5 is placed and
    # routed (a recorded nextpnr report: its Fmax), xilinx-7 only counted by Yosys.
    from types import SimpleNamespace

    from test_latency import _recorded
    from vtakit.boards import synth as synth_mod
    from vtakit.hw.config import load_config
    from vtakit.tools.resources import synth_resources
    calls = []

    def fake(cfg, target, **kw):
        calls.append((cfg.name, target, kw.get("place_and_route", True)))
        if target == "ecp5-85k":
            return _recorded()
        return SimpleNamespace(resources={"lut": 1000 * cfg.block_in, "ff": 7, "dsp": 16,
                                          "bram": 3}, fmax_mhz=None)
    monkeypatch.setattr(synth_mod, "synth_config", fake)
    monkeypatch.setenv("VTAKIT_CACHE", str(tmp_path))
    cj = json.dumps(load_config("tiny").to_dict(), sort_keys=True)
    first = synth_resources(cj, "ecp5-85k")
    again = synth_resources(cj, "ecp5-85k")
    other = synth_resources(cj, "xilinx-7")
    other2 = synth_resources(cj, "xilinx-7")
    assert calls == [(load_config("tiny").name, "ecp5-85k", True),
                     (load_config("tiny").name, "xilinx-7", False)]
    rec = _recorded()
    assert first["lut"] == again["lut"] == rec.resources["lut"]
    assert first["fmax_mhz"] == again["fmax_mhz"] == rec.fmax_mhz
    assert first["fmax_source"] == "synth ecp5-85k (nextpnr)"
    assert other["lut"] == other2["lut"] == 8000 and other["fmax_mhz"] is None
    assert again["wall_synth_s"] == other2["wall_synth_s"] == 0.0
    # Counts made from other hw/ sources or by another flow are not served: synthesized again.
    from dataclasses import replace

    from vtakit.boards import targets
    from vtakit.tools import latency
    monkeypatch.setattr(latency, "rtl_digest", lambda: "other-rtl")
    synth_resources(cj, "xilinx-7")
    xil = targets.TARGETS["xilinx-7"]
    monkeypatch.setitem(targets.TARGETS, "xilinx-7", replace(xil, synth=xil.synth + ("stat",)))
    synth_resources(cj, "xilinx-7")
    synth_resources(cj, "xilinx-7")
    assert calls[2:] == [(load_config("tiny").name, "xilinx-7", False)] * 2


def _layer_host(res, config):
    return [(r["where"], r["host_us"]) for r in res.layers.to_pylist()
            if r["config"] == config]


def test_verilator_sweep_latency_host_time_and_requant(client, tmp_path):
    """cycles measured on Verilator, VTA us at the given clock, the host steps per layer:
    every VTA layer of the base ISA requantizes on the host, the requant extension's
    layers between the first and the last have none; latency = VTA us + host us."""
    out = tmp_path / "s.parquet"
    res = sweep(["tiny"], [ANOMALY], grid=["EXTENSIONS=none,requant"], engine="verilator",
                fmax=100.0, client=client, progress=False, log=None, output=out,
                plot=tmp_path / "p.png")
    assert not res.failed, res.failed
    base, req = res.rows
    assert (base["config"], req["config"]) == ("tiny/EXTENSIONS=none", "tiny/EXTENSIONS=requant")
    for r in (base, req):
        assert r["matches_interpreter"] and r["cycles_source"] == "rtl"
        assert r["fmax_mhz"] == 100.0 and r["fmax_source"] == "--fmax"
        assert r["vta_us"] == pytest.approx(r["cycles"] / 100.0)
        assert r["latency_us"] == pytest.approx(r["vta_us"] + r["host_us"])
        layers = [x for x in res.layers.to_pylist() if x["config"] == r["config"]]
        assert r["host_us"] == pytest.approx(sum(x["host_us"] for x in layers))
        assert r["host"] == "measured" and r["lut"] is None
    vta_base = [h for w, h in _layer_host(res, base["config"]) if w == "VTA"]
    vta_req = [h for w, h in _layer_host(res, req["config"]) if w == "VTA"]
    assert len(vta_base) == 10
    assert all(h > 0 for h in vta_base)
    # with the extension the ten layers hand device tensors over: one chain, one row
    # (its host time is the first layer's packing and the last one's unpacking)
    assert len(vta_req) == 1 and vta_req[0] > 0
    (chain,) = [x for x in res.layers.to_pylist()
                if x["config"] == req["config"] and x["where"] == "VTA"]
    assert chain["calls"] == 10 and chain["cycles"] == req["cycles"]
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    table = pq.read_table(out).to_pylist()
    assert [r["latency_us"] for r in table] == [base["latency_us"], req["latency_us"]]
    # the model engine runs nothing: cycles and VTA us, no host time, no latency
    model = sweep(["tiny"], [ANOMALY], engine="model", fmax=100.0, client=client,
                  progress=False, log=None).rows[0]
    assert model["host_us"] is None and model["latency_us"] is None
    assert model["vta_us"] == pytest.approx(model["cycles"] / 100.0)


def test_synth_sweep_latency_and_pareto_axes(tmp_path, monkeypatch):
    """--synth with a cached (recorded) ECP5 report: LUT, DSP and Fmax of the config fill
    the row, latency = cycles / Fmax + host, estimated for the Cortex-A9; the Pareto plot
    is latency against LUTs and DSPs."""
    from test_latency import _recorded
    from vtakit.tools import latency
    from vtakit.tools.pareto import best_points, cost_column, metric_column
    monkeypatch.setenv("VTAKIT_CACHE", str(tmp_path / "cache"))
    rec = _recorded()
    latency.store_report("tiny", rec)
    res = sweep(["tiny"], [ANOMALY], engine="behavioral", synth="ecp5-85k", host="cortex-a9",
                workers=1, progress=False, log=None, plot=tmp_path / "p.png")
    row, = res.rows
    assert row["status"] == "ok", row["error"]
    assert (row["lut"], row["dsp"], row["fmax_mhz"]) == \
        (rec.resources["lut"], rec.resources["dsp"], rec.fmax_mhz)
    assert row["fmax_source"] == "synth ecp5-85k (nextpnr)" and row["wall_synth_s"] == 0.0
    host = latency.load_host("cortex-a9")
    assert row["host"] == "cortex-a9" and row["host_us"] > 0
    assert row["latency_us"] == pytest.approx(row["cycles"] / rec.fmax_mhz + row["host_us"])
    rows = res.table.to_pylist()
    assert (cost_column(rows), metric_column(rows)) == ("lut", "latency_us")
    assert best_points(res.table) == [row]
    assert host.clock_mhz == 650
    import matplotlib.image
    h, w = matplotlib.image.imread(tmp_path / "p.png").shape[:2]
    assert w > 1.8 * h             # two panels: LUTs and DSPs


def test_float_model_calibrated_from_a_npy_file(client, tmp_path):
    # The shipped ONNX file given by path with the demo's calibration images as a .npy of
    # shape (N, *input shape): the same int8 model as "demo", so the same cycles.
    from vtakit.tools.demo import CALIBRATION_SAMPLES
    from vtakit.compiler.models import digits_cnn_path, load_digits_split
    x_train = load_digits_split()[0]
    np.save(tmp_path / "cal.npy", x_train[:CALIBRATION_SAMPLES, None])
    res = sweep(["tiny"], ["demo", str(digits_cnn_path())], engine="behavioral",
                calibrate=tmp_path / "cal.npy", client=client, progress=False, log=None)
    demo, onnx = res.rows
    assert (demo["model"], onnx["model"]) == ("demo", "digits_cnn")
    assert onnx["status"] == "ok", onnx["error"]
    assert onnx["matches_interpreter"] and onnx["cycles"] == demo["cycles"]


def test_cli_sweep_prints_host_time_and_latency(client, tmp_path, capsys):
    out = tmp_path / "s.parquet"
    code = main(["sweep", "--configs", "tiny", "--models", ANOMALY, "--engine", "behavioral",
                 "--fmax", "50", "--host", "cortex-a9", "--scheduler", client.scheduler.address,
                 "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    row, = pq.read_table(out).to_pylist()
    assert row["host"] == "cortex-a9" and row["fmax_mhz"] == 50.0
    line = next(l for l in text.splitlines() if l.startswith("  tiny ") and "GEMM" in l)
    assert f"host {row['host_us']:>9,.1f} us" in line
    assert f"latency {row['latency_us']:>10,.1f} us" in line and "Fmax   50.0 MHz" in line
    assert f"{row['latency_us']:,.1f} us at 50 MHz with the host" in text
    assert main(["sweep", "--host", "pentium", "-o", str(out)]) == 2
    assert "host 'pentium'" in capsys.readouterr().err
