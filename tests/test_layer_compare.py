"""``vtakit compare MODEL.vtax``: layer-by-layer comparison, a corrupted layer is named."""

import numpy as np
import pytest


from vtakit.cli.main import main  # noqa: E402
from vtakit.runtime.device import open_device  # noqa: E402
from vtakit.runtime.image import DramImage  # noqa: E402
from vtakit.runtime.layer_compare import compare_layers, format_comparison  # noqa: E402


class _Corrupting:
    """A behavioral device whose ``nth`` kernel run stores one wrong byte (one element
    of that layer's output is off by one)."""

    def __init__(self, nth):
        self.dev = open_device("behavioral", "default")
        self.nth, self.count = nth, 0
        self.run = self.dev.run
        self.dev.run = self._run

    def _run(self, addr, n):
        before = self.dev.dram.data.copy()
        result = self.run(addr, n)
        if self.count == self.nth:
            changed = np.flatnonzero(self.dev.dram.data[:len(before)] != before)
            self.dev.dram.data[changed[0]] += 1
        self.count += 1
        return result


def test_equal_backends(digits):
    exe, _, x, d = digits
    c = compare_layers(exe, x, ["behavioral", "behavioral2"],
                       devices={"behavioral2": open_device("behavioral", "default")},
                       save_dir=d)
    assert c.equal and len(c.layers["behavioral"]) == 8   # the add fused
    assert "every layer's output is equal" in format_comparison(c)


def test_corrupted_layer_is_named(digits):
    exe, _, x, d = digits
    bad = _Corrupting(2)        # the third VTA kernel run
    c = compare_layers(exe, x, ["behavioral", "bad"], devices={"bad": bad.dev}, save_dir=d)
    (div,) = c.divergences
    vta = [layer.index for layer in c.layers["behavioral"] if layer.engine == "VTA"]
    assert div.index == vta[2] and div.engine == "VTA"
    assert div.name == c.layers["behavioral"][vta[2]].name
    assert div.count == 1 and int(div.actual) == (int(div.expected) + 1 + 128) % 256 - 128
    got = c.layers["bad"][div.index].output
    assert got[div.element] == div.actual
    # The saved image is that layer's kernel: replaying it reproduces the reference's run.
    image = DramImage.load(div.image)
    with open_device("behavioral", "default") as dev:
        assert dev.run_image(image).dram.shape == image.dram.shape
    text = format_comparison(c)
    assert f"first diverging layer #{div.index} {div.name}" in text


def test_cli_compare_vtax(digits, capsys, monkeypatch):
    exe, path, x, d = digits
    monkeypatch.chdir(d)
    argv = ["compare", str(path), "--input", str(d / "x.npy"), "--backends"]
    assert main(argv + ["behavioral,behavioral"]) == 2           # a backend twice
    capsys.readouterr()
    # "verilator" stands for a backend that corrupts the second kernel's output.
    from vtakit.runtime import layer_compare
    real = layer_compare.open_device
    monkeypatch.setattr(layer_compare, "open_device",
                        lambda name, cfg: _Corrupting(1).dev if name == "verilator"
                        else real(name, cfg))
    assert main(argv + ["behavioral,verilator"]) == 1
    out = capsys.readouterr().out
    assert "behavioral vs verilator: DIFFER: first diverging layer #" in out
    saved = sorted(d.glob("digits.verilator.layer*.npz"))
    assert len(saved) == 1 and str(saved[0].name) in out


def test_profile_rows(digits):
    from vtakit.tools.profile import format_profile, profile_model
    from vtakit.runtime.recorder import LayerRecorder
    exe, _, x, _ = digits
    outputs, rows = profile_model(exe, x, chain=False)      # a row per layer
    np.testing.assert_array_equal(outputs["logits"], np.asarray(exe.run(x)))
    assert [r.engine for r in rows].count("VTA") == 7 and len(rows) == 8
    # chained: fewer rows, the same layers and DRAM bytes but for micro-ops a kernel
    # left resident in the uop SRAM for a later one (runtime/chain.py reuse_uops)
    chained = profile_model(exe, x)[1]
    assert len(chained) < len(rows)
    assert [n for r in chained for n in r.layers] == [r.name for r in rows]
    saved = sum(r.dram_bytes for r in rows) - sum(r.dram_bytes for r in chained)
    assert 0 <= saved and saved % exe.config.uop_elem_bytes == 0
    # The stream's DRAM bytes equal the behavioral model's load/store counters.
    with open_device("behavioral", "default") as dev, LayerRecorder(dev) as rec:
        exe.run(x, device=dev, hook=rec.hook)
    for r, layer in zip(rows, rec.layers):
        measured = sum(v for run in layer.runs for k, v in run.stats.items()
                       if k.endswith("_nbytes"))
        assert r.dram_bytes == measured and (r.predicted_cycles > 0) == (r.engine == "VTA")
        assert (r.gemm_utilization is not None) == (r.macs > 0)
    assert "total" in format_profile(rows, "behavioral").splitlines()[-2]


def test_cli_run_profile(digits, capsys, tmp_path):
    _, path, _, d = digits
    assert main(["run", str(path), "--input", str(d / "x.npy"), "-o", str(tmp_path / "o"),
                 "--profile"]) == 0
    out = capsys.readouterr().out
    assert "vta_conv2d" in out and "7 layer(s) on VTA, 1 on the host" in out


def test_trace_and_plot(digits, capsys, tmp_path):
    import json
    _, path, _, d = digits
    trace = tmp_path / "t.json"
    assert main(["run", str(path), "--input", str(d / "x.npy"), "-o", str(tmp_path / "o"),
                 "--trace", str(trace)]) == 0
    events = [e for e in json.loads(trace.read_text())["traceEvents"]
              if e["ph"] == "X" and e["cat"] in ("VTA", "host")]      # the layer tracks
    # one slice per layer, or per chain of layers run as one stream (naming its layers)
    vta = [e for e in events if e["cat"] == "VTA"]
    assert sum(len(e["args"]["layers"]) for e in vta) == 7 and len(events) == len(vta) + 1
    # Slices follow each other without overlap, in layer order.
    for a, b in zip(events, events[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3
        assert a["args"]["layer"] + len(a["args"]["layers"]) == b["args"]["layer"]
    png = tmp_path / "timeline.png"
    assert main(["plot", "trace", str(trace), "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", "trace", str(d / "x.npy"), "-o", str(png)]) == 2
