"""One point of a sweep: a model compiled for a config and measured on an engine.

:func:`run_point` is what a Dask worker runs. It compiles the model
(:func:`vtakit.compile`; a float model is calibrated first), then measures it on the
point's engine:

``model``
    no simulation: every VTA layer's kernel is the stream a :class:`~vtakit.Runtime`
    builds when the VM binds it (fences, micro-op load, FINISH; built without a device,
    :func:`~vtakit.compiler.ops.perfmodel.program_stream`) and its cycles predicted
    by the event model (:func:`~vtakit.compiler.ops.perfmodel.predict_stream`); no
    output, so no accuracy check.
``behavioral``
    the VM on the behavioral model; cycles are the event model's on the streams that ran.
``verilator`` / ``cxxrtl``
    the VM on the RTL; cycles are measured.

A simulating engine's outputs are compared element for element with the IR
interpreter's on the quantized model (``matches_interpreter``), and its host steps are
timed per layer (``host_us``: measured on the worker, or estimated by the point's host
cost table, :mod:`~vtakit.tools.latency`); the model engine runs nothing, so it has no
host time. The sweep adds the clock (``fmax_mhz``, from ``--synth`` or ``--fmax``) and
the latency (``vta_us`` = cycles / Fmax, ``latency_us`` = ``vta_us`` + ``host_us``). A point that raises
is a row with ``status="error"`` and the one-line error; the sweep goes on.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass

import numpy as np
from ..hw.errors import InputError

__all__ = ["PointSpec", "run_point", "predict_layers", "error_row", "DEMO", "ENGINES",
           "COLUMNS", "LAYER_COLUMNS", "TIMING_COLUMNS", "load_model_input"]

#: The model name that stands for the shipped demo CNN, calibrated as ``vtakit demo`` does.
DEMO = "demo"
#: Engines of a point.
ENGINES = ("model", "behavioral", "verilator", "cxxrtl")

#: Columns of the sweep table, in order, with their Arrow type names. ``wall_*`` columns
#: are timings (they vary from run to run); every other column is deterministic.
COLUMNS = {
    "config": "string", "model": "string", "engine": "string", "synth": "string",
    "status": "string", "error": "string",
    "config_name": "string", "config_json": "string", "model_path": "string",
    "macs_per_cycle": "int64", "cycles": "int64", "cycles_source": "string",
    "predicted_cycles": "int64", "macs": "int64", "gemm_utilization": "float64",
    "dram_bytes": "int64", "peak_dram_bytes": "int64", "vta_layers": "int64",
    "host_layers": "int64", "matches_interpreter": "bool", "mismatched_elements": "int64",
    "host": "string", "host_us": "float64",
    "lut": "int64", "ff": "int64", "dsp": "int64", "bram": "int64",
    "fmax_mhz": "float64", "fmax_source": "string", "vta_us": "float64", "latency_us": "float64",
    "wall_compile_s": "float64", "wall_run_s": "float64", "wall_synth_s": "float64",
}
TIMING_COLUMNS = tuple(c for c in COLUMNS if c.startswith("wall_"))
#: Columns of the per-layer table (one row per layer call of each successful point, or
#: per chain of layers run as one stream: ``calls`` is how many layer calls a row covers).
LAYER_COLUMNS = {
    "config": "string", "model": "string", "engine": "string", "index": "int64",
    "layer": "string", "where": "string", "calls": "int64", "cycles": "int64",
    "predicted_cycles": "int64", "macs": "int64", "gemm_utilization": "float64",
    "dram_bytes": "int64", "host_us": "float64",
}


@dataclass(frozen=True)
class PointSpec:
    """What one point runs. ``config_json`` is the full config (``VTAConfig.to_dict()``,
    sorted keys); ``config`` its label (preset, file stem, plus grid settings)."""

    config: str
    config_json: str
    model: str                  # label (file stem)
    model_path: str             # a .tflite/.onnx path, or DEMO
    engine: str = "model"
    calibrate: str | None = None
    synth: str | None = None    # FPGA target whose resources the sweep adds (not run here)
    host: str = "measured"      # host time: measured, or a host cost table (tools.latency)

    @property
    def key(self) -> tuple:
        """Identity of the point in a table (what resuming matches)."""
        return (self.config, self.config_json, self.model, self.model_path, self.engine,
                self.synth or "", self.host)


def _base_row(spec: PointSpec) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(config=spec.config, model=spec.model, engine=spec.engine,
               synth=spec.synth or "", config_json=spec.config_json,
               model_path=spec.model_path, host=spec.host)
    return row


def error_row(spec: PointSpec, error: BaseException | str) -> dict:
    """The row of a point that failed: its identity, ``status="error"`` and the message's
    first line."""
    row = _base_row(spec)
    text = str(error).strip().splitlines()
    name = type(error).__name__ if isinstance(error, BaseException) else "error"
    row.update(status="error", error=f"{name}: {text[0]}" if text else name)
    return row


@functools.lru_cache(maxsize=8)
def load_model_input(model_path: str, calibrate: str | None):
    """``(quantized IRModule, one input, the interpreter's outputs on it)`` of a model,
    cached per worker process. :data:`DEMO` is the digits CNN calibrated with the demo's
    64 training images; its input is the first test image."""
    from ..compiler.build_model import load_model, load_samples
    from ..compiler.ir import evaluate
    from ..compiler.quant.calibrate import calibrate as quantize
    from ..testing import model_inputs
    if model_path == DEMO:
        from .demo import CALIBRATION_SAMPLES
        from ..compiler.models import digits_cnn_path, load_digits_split
        x_train, _, x_test, _ = load_digits_split()
        mod = quantize(load_model(digits_cnn_path()), x_train[:CALIBRATION_SAMPLES, None])
        x = x_test[:1]
    else:
        mod = load_model(model_path)
        if calibrate:
            samples = load_samples(calibrate)
            mod = quantize(mod, samples)
            x = samples[0]                  # (N, *input shape): one input
        else:
            x = model_inputs(mod["main"].params[0].type_annotation)[0]
    ref = evaluate(mod, x)
    ref = [np.asarray(r) for r in (ref if isinstance(ref, tuple) else (ref,))]
    return mod, x, ref


def predict_layers(exe, *, chain: bool = True, runs=None) -> list[dict]:
    """The model engine: one dict per layer call (``layer``, ``where``, ``cycles`` = the
    event model's, ``macs``, ``dram_bytes``), without running anything. Layers the
    runtime chains (:mod:`vtakit.runtime.chain`; ``chain=False``: none) are one row, as
    in :func:`~vtakit.tools.profile.profile_model`, predicted as the one stream they run
    as (:class:`~vtakit.compiler.ops.cost.chain.ChainPredictor`); ``runs``, a list,
    receives the :class:`~vtakit.compiler.ops.cost.chain.StreamRun` of every VTA row."""
    from ..compiler.ops.cost.chain import ChainPredictor
    from .profile import layer_info
    macs = {name: m for name, (m, _) in layer_info(exe, roofline=False).items()}
    predictor = ChainPredictor(exe.config, chain=chain)
    rows, group = [], []

    def row(members, run):
        if run is not None and runs is not None:
            runs.append(run)
        names = [exe.primitives[p].name for p in members]
        cycles = run.cycles if run is not None else 0
        dram = sum(run.traffic.values()) if run is not None else 0
        name = names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1}"
        rows.append(dict(index=len(rows), layer=name, where="VTA" if run is not None else "host",
                         calls=len(names), cycles=int(cycles), predicted_cycles=int(cycles),
                         macs=sum(macs.get(n, 0) for n in names), dram_bytes=int(dram),
                         host_us=None))

    calls = _calls_with_args(exe)
    weights_at: dict = {}       # primitive -> where its resident weights are
    following = _next_vta_calls(exe, calls)
    for j, (p, args) in enumerate(calls):
        prim = exe.primitives[p]
        meta = prim.meta_dict
        if prim.kind != "vta_layer" or "kernel" not in meta:
            if predictor.chain is not None and predictor.chain.open:
                group.append(p)         # runs while a chain waits (its row's host time)
            else:
                row([p], None)
            continue
        program, bufs, direct = _launch_buffers(exe, prim, args, weights_at, p)
        prefetch = None
        if following.get(j) is not None:
            q, qargs = calls[following[j]]
            qprog, qbufs, _ = _launch_buffers(exe, exe.primitives[q], qargs, weights_at, q)
            qw = {slot: qbufs[slot] for slot, _ in exe.primitives[q].meta_dict["weights"]}
            prefetch = lambda rt, qprog=qprog, qw=qw: (qprog, qw)  # noqa: E731
        run = predictor.launch(program, bufs, direct, prefetch)
        group.append(p)
        if run is not None:
            row(group, run)
            group = []
    if group:
        row(group, predictor.close())
    return rows


class _Addr:
    """A buffer of the dry runtime: an address and a size."""

    __slots__ = ("addr", "nbytes")

    def __init__(self, addr, nbytes):
        self.addr, self.nbytes = int(addr), int(nbytes)


#: where the dry runtime puts the device arena and the staged operands
_ARENA, _STAGED, _PAGE = 1 << 24, 1 << 27, 4096
#: where it keeps the resident weights
_WEIGHTS = 1 << 29


def _next_vta_calls(exe, calls) -> dict:
    """``{call index: index of the next VTA layer call}`` as the VM guesses it
    (:func:`vtakit.runtime.vm.interpreter._next_layers`: a layer whose successor is the
    same at every call), for the warm starts the runtime makes."""
    vta = [j for j, (p, _) in enumerate(calls) if exe.primitives[p].kind == "vta_layer"
           and "kernel" in exe.primitives[p].meta_dict]
    seen: dict = {}
    for a, b in zip(vta, vta[1:]):
        seen.setdefault(calls[a][0], set()).add(calls[b][0])
    return {a: b for a, b in zip(vta, vta[1:]) if len(seen[calls[a][0]]) == 1}


def _launch_buffers(exe, prim, args, weights_at=None, key=None):
    """``(kernel, {slot: _Addr}, stores directly)`` of a ``vta_layer`` call as
    :class:`~vtakit.runtime.launch.LayerLaunch` stages it: a device-tensor argument of the
    slot's size read in place (at its arena offset), everything else staged; with
    ``weights_at`` (a dict kept across calls) the weights are resident, at addresses of
    their own per ``key`` (the primitive)."""
    meta = prim.meta_dict
    program = exe.program(meta["kernel"])
    slots = program.slots
    staged = [_STAGED]

    def stage(n):
        addr = staged[0]
        staged[0] += -(-n // _PAGE) * _PAGE
        return _Addr(addr, n)
    bufs = {}
    for slot, (kind, i) in meta["inputs"]:
        dev = args[int(i)] if kind == "p" else None
        pre = meta.get("pre") is not None and slot == "data"
        bufs[slot] = (_Addr(_ARENA + dev[0], dev[1]) if dev is not None and not pre
                      and dev[1] == slots[slot] else stage(slots[slot]))
    if weights_at is None:
        for slot, _ in meta["weights"]:
            bufs[slot] = stage(slots[slot])
    else:
        if key not in weights_at:
            base = weights_at.get(None, _WEIGHTS)
            at = weights_at[key] = {}
            for slot, _ in meta["weights"]:
                at[slot] = _Addr(base, slots[slot])
                base += -(-slots[slot] // _PAGE) * _PAGE
            weights_at[None] = base
        bufs.update(weights_at[key])
    out = args[-1]
    direct = (meta["post"] is None and not meta["tail"] and meta["out"]["shape"][0] == 1
              and out is not None and out[1] == slots["out"])
    bufs["out"] = _Addr(_ARENA + out[0], out[1]) if direct else stage(slots["out"])
    return program, bufs, direct


def _calls_with_args(exe):
    """``(packed index, [per argument: (arena offset, bytes) of a device tensor, else
    None])`` of every packed call of the entry function, in bytecode order (callees
    inlined; device tensors live in the entry function only)."""
    import math

    from ..runtime.layout import packed_activation_shape
    from ..runtime.vm.bytecode import DEVICES, Opcode
    vta = DEVICES.index("vta")
    funcs = {i: f for i, f in enumerate(exe.functions)}
    index = {f.name: i for i, f in funcs.items()}

    def walk(i, depth, device):
        if depth > 32:
            raise InputError("the executable's call graph is deeper than 32 (recursion?)")
        stores, regs = set(), {}
        for ins in funcs[i].code:
            op = ins[0]
            if op == Opcode.ALLOC_STORAGE and device and ins[4] == vta:
                stores.add(ins[3])
            elif op == Opcode.ALLOC_TENSOR:
                regs[ins[5]] = None
                if ins[1] in stores:
                    shape = packed_activation_shape(ins[3], exe.config)
                    regs[ins[5]] = (int(ins[2]),
                                    math.prod(shape) * np.dtype(ins[4]).itemsize)
            elif op == Opcode.RESHAPE_TENSOR:
                regs[ins[3]] = regs.get(ins[1])
            elif op == Opcode.MOVE:
                regs[ins[2]] = regs.get(ins[1])
            elif op == Opcode.INVOKE_PACKED:
                yield ins[1], [regs.get(r) for r in ins[3]]
            elif op == Opcode.INVOKE:
                yield from walk(ins[1], depth + 1, False)
                regs[ins[3]] = None
            elif op != Opcode.RET:
                for r in _dsts(ins):
                    regs[r] = None
    return list(walk(index[exe.entry], 0, True))


def _dsts(ins):
    """Registers an instruction other than the ones :func:`_calls_with_args` follows may
    write (conservatively: its last integer operand)."""
    last = ins[-1]
    return [last] if isinstance(last, int) else []


def _simulate(exe, x, engine, host="measured"):
    from .latency import load_host
    from .profile import profile_model
    model = load_host(host)
    outputs, profile = profile_model(exe, [x], engine, roofline=False)
    rows = [dict(index=r.index, layer=r.name, where=r.engine, calls=max(1, len(r.layers)),
                 cycles=int(r.cycles if engine != "behavioral" else r.predicted_cycles),
                 predicted_cycles=int(r.predicted_cycles), macs=r.macs,
                 dram_bytes=int(r.dram_bytes), host_us=r.host_us(model)) for r in profile]
    return list(outputs.values()), rows


def run_point(spec: PointSpec) -> tuple[dict, list]:
    """Compile and measure one point; returns ``(row, layer rows)``. Never raises for the
    point's own failure (that is a row with ``status="error"``)."""
    try:
        return _run(spec)
    except Exception as e:  # noqa: BLE001 - a failed point is a result
        return error_row(spec, e), []


def _run(spec: PointSpec):
    from ..compiler.build_model import compile_model
    from ..hw.config import VTAConfig
    if spec.engine not in ENGINES:
        raise InputError(f"engine {spec.engine!r}; engines are {', '.join(ENGINES)}")
    cfg = VTAConfig.from_dict(json.loads(spec.config_json), source=spec.config)
    mod, x, ref = load_model_input(spec.model_path, spec.calibrate)
    t = time.perf_counter()
    report = []
    exe = compile_model(mod, cfg, report=report)
    row = _base_row(spec)
    row["wall_compile_s"] = time.perf_counter() - t
    t = time.perf_counter()
    if spec.engine == "model":
        layers, outputs = predict_layers(exe), None
    else:
        outputs, layers = _simulate(exe, x, spec.engine, spec.host)
    row["wall_run_s"] = time.perf_counter() - t
    peak = cfg.batch * cfg.block_in * cfg.block_out
    vta = [r for r in layers if r["where"] == "VTA"]
    for r in layers:
        r.update(config=spec.config, model=spec.model, engine=spec.engine)
        r["gemm_utilization"] = (r["macs"] / (r["cycles"] * peak)
                                 if r["macs"] and r["cycles"] > 0 else None)
    cycles = sum(r["cycles"] for r in vta)
    macs = sum(r["macs"] for r in vta)
    row.update(status="ok", config_name=cfg.name, macs_per_cycle=peak, cycles=cycles,
               cycles_source="rtl" if spec.engine in ("verilator", "cxxrtl") else "model",
               predicted_cycles=sum(r["predicted_cycles"] for r in vta), macs=macs,
               gemm_utilization=macs / (cycles * peak) if cycles > 0 else None,
               dram_bytes=sum(r["dram_bytes"] for r in vta),
               peak_dram_bytes=exe.peak_dram_bytes,
               host_us=(None if outputs is None else sum(r["host_us"] for r in layers)),
               vta_layers=sum(r.where != "host" for r in report),
               host_layers=sum(r.where == "host" for r in report))
    if outputs is not None:
        bad = 0
        for a, b in zip(outputs, ref):
            a, b = np.asarray(a), np.asarray(b)
            bad += a.size if a.shape != b.shape else int(np.count_nonzero(a != b))
        bad += abs(len(outputs) - len(ref))
        row.update(matches_interpreter=bad == 0, mismatched_elements=bad)
    return row, layers
