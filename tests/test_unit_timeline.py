"""Modelled per-unit timelines (busy/wait of fetch, load, compute, store) in traces."""

import json

import pytest

from vtakit.compiler.ops.perfmodel import predict_stream
from vtakit.tools.trace import UNIT_TRACKS, trace_events

UNITS = ("fetch", "load", "compute", "store")


def _check_busy(intervals, busy, cycles_end):
    for unit in UNITS:
        spans = sorted(intervals[unit], key=lambda i: i.start)
        for a, b in zip(spans, spans[1:]):          # one instruction at a time per unit
            assert a.end <= b.start + 1e-9, (unit, a, b)
        assert all(0 <= i.start < i.end <= cycles_end + 1e-9 for i in spans)
        total = sum(i.end - i.start for i in spans if i.kind == "busy")
        assert total == pytest.approx(busy[unit])


def test_stream_intervals_match_busy_cycles():
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.runtime import Runtime
    from vtakit.sim import open_device
    rt = Runtime(open_device("behavioral", "default"))
    plan = plan_conv2d(rt.config, (1, 32, 14, 14), (32, 32, 3, 3), 1, 1, bias=True, shift=8)
    plan.lower(rt, {nm: rt.alloc(op.nbytes) for nm, op in plan.operands.items()})
    rt.finalize()
    plain = predict_stream(rt.instructions, rt.config)
    pred = predict_stream(rt.instructions, rt.config, intervals=True)
    assert pred.cycles == plain.cycles and plain.intervals is None   # same model
    assert {u: pred.busy[u] for u in plain.busy} == plain.busy
    _check_busy(pred.intervals, pred.busy, max(pred.cycles, pred.busy["fetch"]))
    # Every unit but fetch ends by the predicted cycles; waits name token queues.
    assert max(i.end for u in UNITS[1:] for i in pred.intervals[u]) == pred.cycles
    waits = {i.what for u in UNITS for i in pred.intervals[u] if i.kind == "wait"}
    assert waits and waits <= {"l2g", "g2l", "g2s", "s2g", "l2g+s2g", "s2g+l2g"}
    assert sum(1 for i in pred.intervals["fetch"]) == len(rt.instructions)
    rt.reset()


@pytest.fixture(scope="module")
def digits_rows():
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend.onnx import from_onnx
    from vtakit.compiler.models import digits_cnn_path, load_digits_split
    from vtakit.tools.profile import profile_model
    from vtakit.compiler.quant.calibrate import calibrate
    x_train, _, x_test, _ = load_digits_split()
    exe = compile_model(calibrate(from_onnx(digits_cnn_path()), x_train[:16, None]), "default")
    _, rows = profile_model(exe, x_test[:1])
    return rows


def test_layer_units_are_consistent(digits_rows):
    vta = [r for r in digits_rows if r.engine == "VTA"]
    # 7 layers (the residual add fused into its convolution), chained where they hand
    # device tensors over: a chain is one row
    assert sum(len(r.layers) for r in vta) == 7 and len(vta) < 7
    for r in vta:
        assert set(r.units) == set(UNITS)
        end = max(i.end for spans in r.units.values() for i in spans)
        busy = {u: sum(i.end - i.start for i in s if i.kind == "busy") for u, s in r.units.items()}
        _check_busy(r.units, busy, end)
        # Compute waits for loads somewhere in every layer (the tokens are modelled).
        assert any(i.kind == "wait" for i in r.units["compute"])
    assert all(not r.units for r in digits_rows if r.engine == "host")


def test_trace_has_four_unit_tracks_inside_layers(digits_rows):
    trace = json.loads(json.dumps(trace_events(digits_rows)))
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    for unit, tid in UNIT_TRACKS.items():
        assert names[tid] == f"{unit} (modelled)"
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    layers = {e["args"]["layer"]: e for e in slices if e["cat"] in ("VTA", "host")}
    units = [e for e in slices if e["cat"] in ("busy", "wait")]
    assert {e["tid"] for e in units} == set(UNIT_TRACKS.values())
    for e in units:
        layer = layers[e["args"]["layer"]]
        assert layer["cat"] == "VTA" and e["args"]["modelled"]
        assert layer["ts"] - 1e-3 <= e["ts"]
        assert e["ts"] + e["dur"] <= layer["ts"] + layer["dur"] + 2e-3


def test_recorder_keeps_images_of_chosen_layers():
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend.onnx import from_onnx
    from vtakit.compiler.models import digits_cnn_path, load_digits_split
    from vtakit.compiler.quant.calibrate import calibrate
    from vtakit.runtime.device import DeviceError, open_device
    from vtakit.runtime.layer_vcd import write_layer_vcd
    from vtakit.runtime.recorder import LayerRecorder
    x_train, _, x_test, _ = load_digits_split()
    exe = compile_model(calibrate(from_onnx(digits_cnn_path()), x_train[:16, None]), "default")
    with open_device("behavioral", "default") as dev, \
            LayerRecorder(dev, keep_images={2}, keep_outputs=False) as rec:
        exe.run(x_test[:1], device=dev, hook=rec.hook)
    kept = [layer.index for layer in rec.layers for r in layer.runs if r.image is not None]
    assert kept == [2]
    with pytest.raises(DeviceError, match="did not keep the kernel images of layer 3"):
        write_layer_vcd(rec.layers, 3, "pysim", "default", "unused.vcd")


def test_loads_of_two_modules_share_the_read_port():
    """An INP load (load module) and an ACC load (compute module) with no token between
    them: the RTL moves their beats through one read port, so the calibrated model
    (``RTL_COST``) serializes the beats while the tile search's model lets them overlap."""
    from vtakit.compiler.ops.tiling import RTL_COST, EventCost
    from vtakit.hw.config import load_config
    from vtakit.hw.isa import MemType, Opcode, isa_for

    cfg = load_config("default")
    isa = isa_for(cfg)
    load = dict(sram_base=0, dram_base=0, y_size=1, x_stride=64)
    insns = [isa.decode(isa.encode(Opcode.LOAD, memory_type=MemType.INP, x_size=64, **load)),
             isa.decode(isa.encode(Opcode.LOAD, memory_type=MemType.ACC, x_size=64, **load)),
             isa.decode(isa.encode(Opcode.FINISH))]
    inp_beats = 64 * cfg.elem_bytes(MemType.INP) // cfg.bus_bytes     # 64 x 16 B / 8 B = 128
    acc_beats = 64 * cfg.elem_bytes(MemType.ACC) // cfg.bus_bytes     # 64 x 64 B / 8 B = 512
    assert (inp_beats, acc_beats) == (128, 512)
    shared = predict_stream(insns, cfg).cycles
    d, r = RTL_COST.dma_insn_cycles, RTL_COST.dma_row_cycles
    free = predict_stream(insns, cfg, cost=EventCost(alu_tensor_cycles=1.0, dma_insn_cycles=d,
                                                     dma_row_cycles=r)).cycles
    assert RTL_COST.shared_read_port
    # overlapping: the ACC load alone (d + 512 + r per row) and the FINISH
    assert free == d + acc_beats + r + 1
    # shared: the ACC beats wait for the INP beats that took the port first
    assert shared >= d + inp_beats + acc_beats + 1
