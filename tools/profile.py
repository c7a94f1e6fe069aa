"""Per-layer profile of a compiled model run (``vtakit run --profile``).

Each layer (a packed call of the VM) is listed with the engine it ran on (VTA when it
ran instructions on the device, else the host), the cycles measured by the backend
(RTL backends; the behavioral model has no clock), the cycles the event model of
:mod:`vtakit.compiler.ops.perfmodel` predicts for the very stream that ran, the GEMM
utilization (the layer's useful multiply-accumulates, as compiled, over
``cycles x BATCH x BLOCK_IN x BLOCK_OUT``; predicted cycles stand in where none were
measured), and the DRAM bytes its loads and stores moved (from the stream).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LayerProfile", "profile_model", "format_profile", "layer_info"]


@dataclass
class LayerProfile:
    """One row of the profile."""

    index: int
    name: str
    engine: str
    cycles: int                  # measured; -1 without a clock, 0 on the host
    predicted_cycles: int
    macs: int
    gemm_utilization: float | None
    dram_bytes: int
    wall: float
    # Modelled per-unit timeline of the layer's runs, back to back: {unit: [UnitInterval]}
    # in model cycles (0 .. predicted_cycles); empty on the host.
    units: dict = field(default_factory=dict)
    #: the layer's :class:`~vtakit.compiler.ops.roofline.Roofline` (None on the host)
    roofline: object = None

    @property
    def roofline_ratio(self) -> float | None:
        """Measured cycles (predicted without a clock) over the roofline."""
        basis = self.cycles if self.cycles > 0 else self.predicted_cycles
        r = self.roofline
        return basis / r.cycles if r is not None and r.cycles and basis > 0 else None


def layer_info(exe, *, roofline: bool = True) -> dict:
    """``{primitive name: (MACs, Roofline or None)}`` of the VTA layers, as the compiler
    planned them (recorded in each layer's metadata); with ``roofline=False`` the
    rooflines are None."""
    from ..compiler.ops.roofline import Roofline
    out = {}
    for p in exe.primitives:
        layer = p.meta_dict.get("layer")
        if layer is not None:
            r = layer.get("roofline")
            out[p.name] = (int(layer["macs"]),
                           Roofline(**r) if roofline and r is not None else None)
    return out


def profile_model(exe, inputs, backend: str = "behavioral", *, device=None, hook=None,
                  roofline: bool = True):
    """Run ``exe`` once on ``backend`` and profile every layer.

    ``device`` is an open device to use instead of a new one; ``hook`` another VM layer
    hook, called after the profile's own (e.g. an outer recorder's).

    Returns
    -------
    tuple
        ``(outputs, rows)``: the model's outputs by name (as :meth:`Executable.run_named`)
        and one :class:`LayerProfile` per layer.
    """
    from ..hw.isa import bytes_to_words, isa_for
    from ..hw.spec import INSN_BYTES
    from ..runtime.device import open_device
    from ..runtime.recorder import LayerRecorder
    from dataclasses import replace

    from ..compiler.ops.perfmodel import predict_stream, stream_traffic
    cfg = exe.config
    isa = isa_for(cfg)
    peak = cfg.batch * cfg.block_in * cfg.block_out
    info = layer_info(exe, roofline=roofline)
    dev = device if device is not None else open_device(backend, cfg)
    try:
        with LayerRecorder(dev, keep_outputs=False, keep_streams=True) as rec:
            def both(name, output):
                rec.hook(name, output)
                if hook is not None:
                    hook(name, output)
            y = exe.run_named(inputs, device=dev, hook=both)
    finally:
        if device is None:
            dev.close()
    rows = []
    for layer in rec.layers:
        predicted = dram = 0
        units = {}
        for run in layer.runs:
            insns = [isa.decode(w) for w in bytes_to_words(run.insns, INSN_BYTES)]
            pred = predict_stream(insns, cfg, intervals=True)
            for unit, spans in pred.intervals.items():   # runs follow one another
                units.setdefault(unit, []).extend(
                    replace(i, start=i.start + predicted, end=i.end + predicted) for i in spans)
            predicted += pred.cycles
            dram += sum(stream_traffic(insns, cfg).values())
        cycles = layer.cycles
        basis = cycles if cycles > 0 else predicted
        m, roof = info.get(layer.name, (0, None))
        rows.append(LayerProfile(layer.index, layer.name, layer.engine, cycles, int(predicted),
                                 m, m / (basis * peak) if m and basis > 0 else None,
                                 int(dram), layer.wall, units,
                                 roof if layer.engine == "VTA" else None))
    return y, rows


def format_profile(rows, backend: str = "") -> str:
    """The profile as a text table with a total line. ``bound`` and ``roofline`` are the
    layer's :mod:`~vtakit.compiler.ops.roofline` (binding bound, cycles); ``x roof`` is the
    measured cycles (predicted without a clock) over the roofline."""
    head = (f"{'#':>3} {'layer':<26} {'engine':<6} {'cycles':>10} {'predicted':>10} "
            f"{'bound':<5} {'roofline':>10} {'x roof':>6} "
            f"{'GEMM util':>9} {'DRAM B':>10} {'wall ms':>8}")
    lines = [head]

    def fmt(r_cycles, pred, kind, roof, ratio, util, dram, wall, name, engine, idx):
        cyc = "-" if r_cycles <= 0 else f"{r_cycles:,}"
        return (f"{idx:>3} {name:<26} {engine:<6} {cyc:>10} "
                f"{(f'{pred:,}' if pred else '-'):>10} {kind:<5} "
                f"{(f'{roof:,}' if roof else '-'):>10} "
                f"{('-' if ratio is None else f'{ratio:.2f}'):>6} "
                f"{('-' if util is None else f'{100 * util:.1f}%'):>9} {dram:>10,} "
                f"{1e3 * wall:>8.2f}")
    for r in rows:
        rl = r.roofline
        lines.append(fmt(r.cycles, r.predicted_cycles, rl.kind if rl else "",
                         rl.cycles if rl else 0, r.roofline_ratio, r.gemm_utilization,
                         r.dram_bytes, r.wall, r.name[:26], r.engine, r.index))
    measured = [r.cycles for r in rows if r.engine == "VTA"]
    total_cycles = sum(measured) if measured and all(c > 0 for c in measured) else -1
    predicted = sum(r.predicted_cycles for r in rows)
    roof = sum(r.roofline.cycles for r in rows if r.roofline is not None)
    basis = total_cycles if total_cycles > 0 else predicted
    lines.append(fmt(total_cycles, predicted, "", roof, basis / roof if roof else None,
                     None, sum(r.dram_bytes for r in rows), sum(r.wall for r in rows),
                     "total" + (f" ({backend})" if backend else ""), "", ""))
    vta = [r for r in rows if r.engine == "VTA"]
    lines.append(f"{len(vta)} layer(s) on VTA, {len(rows) - len(vta)} on the host; "
                 "predicted = event model of the stream that ran (vtakit.compiler.ops.perfmodel); "
                 "roofline = max(GEMM + ALU micro-ops, DRAM beats) (vtakit.compiler.ops.roofline)")
    return "\n".join(lines)
