"""What a newcomer meets first (issue 25): every message below is pinned by its new text.

Early rejection before any work, inputs recognized by their magic bytes, quiet ends on a
closed pipe, partial config files rejected, hints for a float model, aligned reports.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vtakit.cli.main import main
from vtakit.compiler.build_model import format_report
from vtakit.compiler.vta.lower import LayerRecord
from vtakit.compiler.models import digits_cnn_path
from vtakit.hw.config import ConfigError, PRESETS, VTAConfig, load_config


@pytest.fixture(scope="module")
def float_vtax(tmp_path_factory):
    """The shipped digits CNN compiled without calibration (all on the host, 0.2 s)."""
    path = tmp_path_factory.mktemp("ux") / "digits_float.vtax"
    assert main(["compile", str(digits_cnn_path()), "-o", str(path)]) == 0
    return path


# ------------------------------------------------------------------ validate before working

def test_demo_unknown_backend_fails_before_the_behavioral_phase(run_cli, capsys):
    code, out, err = run_cli("demo", "--backend", "gpu")
    assert code == 2
    assert err.strip() == ("vtakit demo: error: unknown backend 'gpu'; backends are "
                           "behavioral, pysim, cxxrtl, verilator, board, netlist")
    assert "behavioral" not in out and "img" not in err    # no image ran, no progress bar


def test_output_into_missing_folder_rejected_up_front(run_cli, tmp_path, capsys):
    out = tmp_path / "nodir" / "m.vtax"
    code, _, err = run_cli("compile", digits_cnn_path(), "-o", out)
    assert code == 2
    assert re.search(r"^vtakit compile: error: argument -o/--output: folder '.*nodir' of "
                     r"'.*m\.vtax' does not exist \(create it first: mkdir -p .*nodir\)$",
                     err.strip()), err
    code, _, err = run_cli("verilog", "--config", "tiny", "-o", tmp_path)
    assert code == 2 and "is a folder; give a file name in it" in err


def test_input_recognized_by_magic_bytes(run_cli, float_vtax, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    code, _, err = run_cli("run", float_vtax, "--input", notes, "-o", tmp_path / "o.npz")
    assert code == 2
    assert err.strip().endswith(
        "notes.txt: not a .npy or .npz file (it starts with b'hello\\n', not "
        "b'\\x93NUMPY' or b'PK'); write arrays with numpy.save or numpy.savez"), err
    assert "pickle" not in err


def test_run_without_input_names_the_inputs(run_cli, float_vtax, tmp_path, capsys):
    code, _, err = run_cli("run", float_vtax, "-o", tmp_path / "o.npz")
    assert code == 2
    assert err.strip() == ("vtakit run: error: the model takes 1 input(s) "
                           "(input: float32[1, 1, 8, 8]); give them with --input [NAME=]X.npy "
                           "(repeatable) or one --input X.npz")
    # A .npz that lacks an input is named too.
    np.savez(tmp_path / "other.npz", other=np.zeros(3))
    code, _, err = run_cli("run", float_vtax, "--input", tmp_path / "other.npz", "-o",
                            tmp_path / "o.npz")
    assert code == 2 and "no array for input(s) input; the model takes input: float32" in err


def test_plot_trace_missing_file(run_cli, tmp_path, capsys):
    code, _, err = run_cli("plot", "trace", tmp_path / "missing.json", "-o",
                            tmp_path / "t.png")
    assert code == 2
    assert err.strip().endswith("missing.json: no such file (vtakit run --trace FILE.json "
                                "writes a trace)"), err


# ------------------------------------------------------------------ partial config files

def test_partial_config_rejected_naming_the_missing_keys(run_cli, tmp_path, capsys):
    part = tmp_path / "part.json"
    part.write_text(json.dumps({"LOG_BATCH": 0}))
    with pytest.raises(ConfigError, match=re.escape(
            f"{part}: missing keys TARGET, HW_VER, LOG_INP_WIDTH, LOG_WGT_WIDTH, "
            "LOG_ACC_WIDTH, LOG_BLOCK, LOG_UOP_BUFF_SIZE, LOG_INP_BUFF_SIZE, "
            "LOG_WGT_BUFF_SIZE, LOG_ACC_BUFF_SIZE; a vta_config.json sets all 11 keys")):
        load_config(part)
    one = {k: v for k, v in VTAConfig().to_dict().items() if k != "LOG_BLOCK"}
    with pytest.raises(ConfigError, match=r"^config: missing key LOG_BLOCK; "):
        VTAConfig.from_dict(one)
    code, out, err = run_cli("config", "show", part)
    assert code == 2 and out == "" and "missing keys TARGET" in err
    for name in PRESETS:              # every shipped preset names every key
        assert isinstance(load_config(name), VTAConfig)


# ------------------------------------------------------------------ SIGPIPE

def test_closed_pipe_ends_quietly(tmp_path):
    raw = tmp_path / "big.bin"
    raw.write_bytes(bytes(16 * 20000))        # 20,000 instructions: far more than a pipe holds
    p = subprocess.Popen([sys.executable, "-m", "vtakit", "disasm", str(raw)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()                          # as `| head -1` does
    err = p.stderr.read().decode()
    code = p.wait()
    assert first.strip()
    assert code in (0, 141), err
    assert err == ""


# ------------------------------------------------------------------ hints and reports

def test_float_model_without_calibrate_gets_a_hint(run_cli, tmp_path, capsys):
    code, out, err = run_cli("compile", digits_cnn_path(), "-o", tmp_path / "f.vtax")
    assert code == 0 and "0 layer(s) on VTA" in out
    assert err.strip() == ("hint: the model is float (input 'input': float32), so every layer "
                           "runs on the host; --calibrate SAMPLES.npy quantizes it to int8 "
                           "for VTA")


def test_report_aligns_long_names_and_footnotes_repeated_reasons():
    why = "not a quantized conv/dense/pool layer: numpy on the host"
    records = [LayerRecord("nn.conv2d+nn.bias_add+multiply+add+nn.relu", (1, 1, 8, 8), "host",
                           why),
               LayerRecord("dense", (1, 64), "vta", "int8 dense", "1x4 tiles", 1234.0, 5678),
               LayerRecord("nn.max_pool2d", (1, 8, 8, 8), "host", why)]
    lines = format_report(records).splitlines()
    assert len(lines) == 5 and lines[-1] == f"[1] {why}"
    cols = [ln.index(" host ") if " host " in ln else ln.index(" vta ") for ln in lines[1:4]]
    assert len(set(cols)) == 1 and lines[0].index(" where ") == cols[0]
    assert lines[1].endswith("  [1]") and lines[3].endswith("  [1]")
    assert lines[2].endswith("  int8 dense; 1x4 tiles") and " 1,234 " in lines[2]
    assert sum(why in ln for ln in lines) == 1


def test_help_names_vtax_for_compare_and_disasm(run_cli, capsys):
    code, out, _ = run_cli("--help")
    assert code == 0
    for cmd in ("compare", "disasm"):
        entry = out[out.index(f"    {cmd} "):].split("\n    ")[0]
        assert ".vtax" in entry, entry


# ------------------------------------------------------------------ progress

def test_stage_lines_and_heartbeat(capsys):
    from vtakit.runtime.progress import Stages
    stages = Stages("job", 2, heartbeat=0.0)
    with stages.stage("first", "log /x.log"):
        stages.tick("Info: at iteration #4\n")
    with stages.stage("second"):
        pass
    silent = Stages("quiet", enable=False)
    with silent.stage("x"):
        silent.tick()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "job: [1/2] first ... log /x.log"
    assert re.fullmatch(r"job: \[1/2\] first still running \(0 s\): Info: at iteration #4",
                        err[1])
    assert re.fullmatch(r"job: \[1/2\] first done in \d+\.\d s", err[2])
    assert err[3] == "job: [2/2] second ..." and err[4].startswith("job: [2/2] second done in")
    assert len(err) == 5 and set(stages.seconds) == {"first", "second"}
    with pytest.raises(RuntimeError):
        with Stages("job", heartbeat=0.0).stage("third"):
            raise RuntimeError("tool failed")
    assert re.fullmatch(r"job: third \.\.\.\njob: third failed after \d+\.\d s\n",
                        capsys.readouterr().err)


def test_progress_bar_is_plain_lines_off_a_terminal(capsys):
    from vtakit.runtime.progress import bar
    for _ in bar(range(5), desc="images", unit="img", interval=0.0):
        pass
    err = capsys.readouterr().err          # pytest's capture is not a terminal
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) >= 2 and all(ln.startswith("images:") for ln in lines)
    assert "5/5" in lines[-1]


def test_cold_rtl_build_prints_its_stages(tmp_path, monkeypatch, capsys):
    """A cold build (the path of open_device) prints each stage with its time; the tools
    are stubbed here: the real build takes minutes."""
    from vtakit.sim import rtl_build
    monkeypatch.setenv("VTAKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(rtl_build, "generate_source", lambda *a, **k: "module vta_top; endmodule")
    ran = []

    def fake_run(cmd, *, cwd, env=None, stages=None, what=""):
        ran.append(Path(cmd[0]).name)
        (cwd / "obj").mkdir(exist_ok=True)
        if "-o" in cmd:                         # the link writes the library
            Path(cmd[cmd.index("-o") + 1]).write_bytes(b"\x7fELF")
        stages.tick()
        return ""

    monkeypatch.setattr(rtl_build, "_run", fake_run)
    build = rtl_build.get_build("verilator", "tiny")
    assert not build.cached and build.library.exists() and ran == ["verilator", "make", "g++"]
    err = capsys.readouterr().err.splitlines()
    starts = [ln.split("] ", 1)[1].removesuffix(" ...") for ln in err if ln.endswith(" ...")]
    assert [re.sub(r" \(.*", "", st) for st in starts] == [
        "elaborate + generate Verilog", "verilate", "compile the verilated C++", "link the harness"]
    assert all(ln.startswith(f"building verilator {load_config('tiny').name}: ") for ln in err)
    assert sum(bool(re.search(r"\] .* done in \d+\.\d s$", ln)) for ln in err) == 4
    assert re.search(r"built in \d+ s$", err[-1])
    assert list(build.meta["stage_seconds"]) == starts
    assert rtl_build.get_build("verilator", "tiny").cached      # then a cache hit, silent
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------ the timeline picture

def _trace(tmp_path, cycles=(1000, 3000)):
    """A trace of a host layer then two VTA layers, with modelled load/compute units only
    (the fetch and store tracks are named but empty)."""
    ev = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
          for tid, name in ((1, "VTA"), (2, "host"), (3, "fetch (modelled)"),
                            (4, "load (modelled)"), (5, "compute (modelled)"),
                            (6, "store (modelled)"))]
    ev.append({"name": "quantize", "cat": "host", "ph": "X", "pid": 1, "tid": 2, "ts": 0,
               "dur": 500, "args": {"layer": 0, "cycles": 0, "predicted_cycles": 0}})
    t = 500
    for i, c in enumerate(cycles, start=1):
        ev.append({"name": f"vta_{i}", "cat": "VTA", "ph": "X", "pid": 1, "tid": 1, "ts": t,
                   "dur": 100, "args": {"layer": i, "cycles": c, "predicted_cycles": 2000}})
        for tid, (lo, hi) in ((4, (0, 500)), (5, (500, 2000))):
            ev.append({"name": "x", "cat": "busy", "ph": "X", "pid": 1, "tid": tid, "ts": t,
                       "dur": 10, "args": {"layer": i, "model_cycles": [lo, hi],
                                           "measured_cycles": [lo * c / 2000, hi * c / 2000]}})
        t += 100
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_timeline_on_cycles_with_labels_no_empty_tracks(tmp_path):
    from vtakit.tools.trace import trace_figure
    fig = trace_figure(_trace(tmp_path))
    ax = fig.axes[0]
    assert ax.get_xlabel() == "VTA cycles"                       # measured: cycles by default
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "VTA", "host", "load (modelled)", "compute (modelled)"]  # fetch, store: no events
    assert {t.get_text() for t in ax.texts} == {"#0", "#1", "#2"}
    assert ax.get_xlim()[1] == pytest.approx(4000 * 1.01)        # 1000 + 3000 cycles
    label2 = next(t for t in ax.texts if t.get_text() == "#2")
    assert label2.get_position()[0] == pytest.approx(1000 + 3000 / 2)
    legend = ax.get_legend()
    anchor = legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.x0 > 1.0                                       # beside the data, not on it
    assert [t.get_text() for t in legend.get_texts()][:2] == [
        "VTA layer", "host layer (no VTA cycles: a tick)"]


def test_timeline_wall_axis_without_measured_cycles(tmp_path):
    from vtakit.tools.trace import trace_figure
    path = _trace(tmp_path, cycles=(-1, -1))                     # behavioral: no clock
    assert trace_figure(path).axes[0].get_xlabel() == "wall time on the simulating machine (ms)"
    ax = trace_figure(path, axis="cycles").axes[0]
    assert ax.get_xlabel() == "VTA cycles (predicted by the event model)"
    assert ax.get_xlim()[1] == pytest.approx(4000 * 1.01)        # 2 x 2000 predicted


# ------------------------------------------------------------------ synthesis tools, demo build

def test_tool_runner_heartbeat_and_verbose(tmp_path, monkeypatch, capsys):
    """While a tool works, a line with its log's last line (every 25 s in vtakit synth;
    every poll here); --verbose copies the log to stderr."""
    from vtakit.boards import tools
    from vtakit.runtime.progress import Stages
    (tmp_path / "faketool.py").write_text(
        "import time\n"
        "def run(argv):\n"
        "    for i in range(3):\n"
        "        print(f'Info: iteration {i}', flush=True)\n"
        "        time.sleep(0.6)\n"
        "    return 0\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setitem(tools.TOOLS, "fake", ("numpy", "faketool", "run"))
    stages = Stages("synth x", 1, heartbeat=0.0)
    with stages.stage("fake tool"):
        tools.run_tool("fake", [], cwd=tmp_path, log=tmp_path / "fake.log", stages=stages,
                       verbose=True)
    err = capsys.readouterr().err.splitlines()
    assert [ln for ln in err if ln.startswith("  fake| ")] == [
        f"  fake| Info: iteration {i}" for i in range(3)]
    beats = [ln for ln in err if "still running" in ln]
    assert beats and all(ln.startswith("synth x: [1/1] fake tool still running (") for ln in beats)
    assert any(ln.endswith("): Info: iteration 0") or ln.endswith("): Info: iteration 1")
               for ln in beats)
    assert (tmp_path / "fake.log").read_text().count("Info: iteration") == 3


def fake_get_build(backend, cfg, progress=True):
    return f"built {backend} {cfg.name}"


def test_demo_starts_the_rtl_build_in_the_background(monkeypatch):
    from vtakit.tools import demo
    from vtakit.sim import rtl_build
    monkeypatch.setattr(demo, "rtl_build_cached", lambda backend, cfg: False)
    monkeypatch.setattr(rtl_build, "get_build", fake_get_build)
    logged = []
    future = demo._start_build("verilator", load_config("tiny"), False, logged.append)
    assert future.result(timeout=60) == f"built verilator {load_config('tiny').name}"
    assert logged[0].startswith("building the verilator simulator of 1x8_i8w8a32_12_12_14_14 "
                                "in the background")
    monkeypatch.setattr(demo, "rtl_build_cached", lambda backend, cfg: True)
    assert demo._start_build("verilator", load_config("tiny"), False, logged.append) is None
