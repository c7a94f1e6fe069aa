"""Per-layer profile of a compiled model run (``vtakit run --profile``).

Each layer (a packed call of the VM) is listed with the engine it ran on (VTA when it
ran instructions on the device, else the host), the cycles measured by the backend
(RTL backends; the behavioral model has no clock), the cycles the event model of
:mod:`vtakit.compiler.ops.perfmodel` predicts for the very stream that ran, the GEMM
utilization (the layer's useful multiply-accumulates, as compiled, over
``cycles x BATCH x BLOCK_IN x BLOCK_OUT``; predicted cycles stand in where none were
measured), and the DRAM bytes its loads and stores moved (from the stream).

Layers that ran chained (:mod:`vtakit.runtime.chain`: one instruction stream, one
synchronize) are one row, named after its first layer and the number of layers
(``vta_conv2d +7``, :attr:`LayerProfile.layers` lists them): their device run is one,
measured as a whole; its roofline is the sum of the layers' rooflines, its MACs
theirs. The rows' cycles still sum to the device's.

Each row also carries the layer's host steps (:mod:`vtakit.runtime.hosttime`: a host
primitive's operations; inside a VTA layer pack, upload, download, requantize, unpack and
tail), timed on this machine; :func:`format_profile` turns cycles and host steps into
microseconds on a target (:mod:`vtakit.tools.latency`: ``cycles / Fmax`` plus the host,
measured or estimated from an embedded host's cost table).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LayerProfile", "SummedRoofline", "profile_model", "format_profile", "layer_info",
           "latency_totals"]


@dataclass(frozen=True)
class SummedRoofline:
    """The roofline of a chain of layers: the sum of its layers' rooflines."""

    parts: tuple

    @property
    def cycles(self) -> int:
        return sum(p.cycles for p in self.parts)

    @property
    def macs(self) -> int:
        return sum(p.macs for p in self.parts)

    @property
    def kind(self) -> str:
        return "sum"


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
    #: the layer's host steps (:class:`~vtakit.runtime.hosttime.HostSpan`), in call order
    host_spans: list = field(default_factory=list)
    #: the packed calls the row covers: one, or every layer of a chain (in call order)
    layers: tuple = ()

    @property
    def vta_cycles(self) -> int:
        """The cycles its VTA time is counted from: measured, else predicted (no clock)."""
        return self.cycles if self.cycles > 0 else self.predicted_cycles

    def vta_us(self, fmax_mhz: float | None) -> float | None:
        """VTA microseconds at ``fmax_mhz`` (None without a clock; 0 on the host)."""
        return None if fmax_mhz is None else self.vta_cycles / fmax_mhz

    def host_us(self, host=None) -> float:
        """Host microseconds: measured on this machine, or estimated by ``host`` (a
        :class:`~vtakit.tools.latency.HostModel`)."""
        from .latency import host_seconds
        return 1e6 * host_seconds(self.host_spans, host)

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
                  roofline: bool = True, chain: bool = True):
    """Run ``exe`` once on ``backend`` and profile every layer.

    ``device`` is an open device to use instead of a new one; ``hook`` another VM layer
    hook, called after the profile's own (e.g. an outer recorder's; it sees outputs, so
    the layers then run unchained); ``chain=False`` runs every layer on its own.

    A row's cycles are its runs' (its stream's): when a layer's stream ends with the
    warm-start head of the next layer (:meth:`vtakit.runtime.chain.Chain.follow`: that
    layer's first weight LOADs and LOAD UOP/ACC, after a host step), those loads count
    in the row of the layer before, and the next layer's row is its warm kernel only.

    Returns
    -------
    tuple
        ``(outputs, rows)``: the model's outputs by name (as :meth:`Executable.run_named`)
        and one :class:`LayerProfile` per layer.
    """
    from ..hw.isa import bytes_to_words, isa_for
    from ..hw.spec import INSN_BYTES
    from ..runtime.device import open_device
    from ..runtime.hosttime import HostTimer
    from ..runtime.recorder import LayerRecorder
    from dataclasses import replace

    from ..compiler.ops.perfmodel import predict_stream, stream_traffic
    cfg = exe.config
    isa = isa_for(cfg)
    peak = cfg.batch * cfg.block_in * cfg.block_out
    info = layer_info(exe, roofline=roofline)
    dev = device if device is not None else open_device(backend, cfg)
    host_spans = []
    # with COMPUTE_OVERLAP the event model follows the ALU lane from the micro-ops the
    # stream's LOAD UOPs read: kept per run (in run order) as it starts
    staged = [] if getattr(cfg, "compute_overlap", 0) else None
    own_run = "run" in vars(dev)
    if staged is not None:
        dev_run = dev.run

        def run_keeping_uops(insn_addr, insn_count):
            staged.append(_uop_staging(dev, cfg, isa, insn_addr, insn_count))
            return dev_run(insn_addr, insn_count)
        dev.run = run_keeping_uops
    try:
        with LayerRecorder(dev, keep_outputs=False, keep_streams=True) as rec, \
                HostTimer() as timer:
            def both(name, output):
                rec.hook(name, output)
                host_spans.append(timer.take())
                if hook is not None:
                    hook(name, output)
            y = exe.run_named(inputs, device=dev, hook=both, hook_outputs=hook is not None,
                              chain=chain)
    finally:
        if staged is not None:
            if own_run:
                dev.run = dev_run
            else:
                del dev.run
        if device is None:
            dev.close()
    staged = iter(staged) if staged is not None else None
    from ..compiler.ops.cost.events import uop_sram
    sram = None         # the uop SRAM the last run left (a warm start's kernel reads it)
    vta_kinds = {p.name for p in exe.primitives if p.kind == "vta_layer"}
    rows, group = [], []
    for layer in rec.layers:
        if layer.name in vta_kinds and not layer.runs:
            group.append(layer)         # left its chain open: the run comes later
            continue
        members, group = group + [layer], []
        runs = [r for m in members for r in m.runs]
        predicted = dram = 0
        units = {}
        for run in runs:
            insns = [isa.decode(w) for w in bytes_to_words(run.insns, INSN_BYTES)]
            uops = None
            if staged is not None:
                insns, uops = _rebased(cfg, insns, next(staged))
            pred = predict_stream(insns, cfg, intervals=True, uops=uops, sram=sram)
            if uops is not None:
                sram = uop_sram(insns, cfg, uops, sram)
            for unit, spans in pred.intervals.items():   # runs follow one another
                units.setdefault(unit, []).extend(
                    replace(i, start=i.start + predicted, end=i.end + predicted) for i in spans)
            predicted += pred.cycles
            dram += sum(stream_traffic(insns, cfg).values())
        cycles = (-1 if any(r.cycles < 0 for r in runs) else sum(r.cycles for r in runs))
        basis = cycles if cycles > 0 else predicted
        m = sum(info.get(x.name, (0, None))[0] for x in members)
        roofs = [info.get(x.name, (0, None))[1] for x in members]
        roof = roofs[0] if len(members) == 1 else (
            SummedRoofline(tuple(roofs)) if all(r is not None for r in roofs) else None)
        engine = "VTA" if runs else "host"
        name = layer.name if len(members) == 1 else f"{members[0].name} +{len(members) - 1}"
        rows.append(LayerProfile(members[0].index, name, engine, cycles, int(predicted),
                                 m, m / (basis * peak) if m and basis > 0 else None,
                                 int(dram), sum(x.wall for x in members), units,
                                 roof if engine == "VTA" else None,
                                 [s for x in members for s in host_spans[x.index]],
                                 tuple(x.name for x in members)))
    return y, rows


def _uop_staging(dev, cfg, isa, insn_addr, insn_count) -> dict:
    """``{dram_base: words}`` of every LOAD UOP of the stream a device is about to run,
    read from its DRAM (the runtime frees the staging after the run)."""
    import numpy as np
    from ..hw.isa import MemType, Opcode, bytes_to_words
    from ..hw.spec import INSN_BYTES
    raw = bytes(np.asarray(dev.read(int(insn_addr), int(insn_count) * INSN_BYTES)))
    out = {}
    for w in bytes_to_words(raw, INSN_BYTES):
        i = isa.decode(w)
        f = i.fields
        if (i.opcode == Opcode.LOAD and f["memory_type"] == MemType.UOP and f["x_size"]
                and f["dram_base"] not in out):
            n, size = f["x_size"], cfg.uop_elem_bytes
            out[f["dram_base"]] = np.frombuffer(bytes(np.asarray(
                dev.read(f["dram_base"] * size, n * size))), dtype=np.uint32).copy()
    return out


def _rebased(cfg, insns, staging: dict) -> tuple:
    """``(insns, uops)`` for :func:`~vtakit.compiler.ops.perfmodel.predict_stream`: the
    words of ``staging`` (:func:`_uop_staging`) in one array, each LOAD UOP's
    ``dram_base`` its offset there."""
    import numpy as np
    from ..hw.isa import MemType, Opcode
    from ..runtime.program import make_insn
    at, words, n = {}, [], 0
    for base, w in staging.items():
        at[base] = n
        words.append(w)
        n += len(w)
    out = []
    for i in insns:
        f = i.fields
        if i.opcode == Opcode.LOAD and f["memory_type"] == MemType.UOP and f["dram_base"] in at:
            i = make_insn(cfg, i.opcode, {**{k: v for k, v in f.items() if k != "opcode"},
                                          "dram_base": at[f["dram_base"]]})
        out.append(i)
    return out, (np.concatenate(words) if words else np.zeros(0, np.uint32))


def latency_totals(rows, fmax_mhz=None, host=None) -> dict:
    """Per-model sums of the rows: ``cycles`` (the VTA layers' measured cycles, predicted
    without a clock), ``vta_us`` (None without ``fmax_mhz``), ``host_us`` (measured, or
    estimated by ``host``), ``total_us`` (None without ``fmax_mhz``) and ``dram_bytes``."""
    cycles = sum(r.vta_cycles for r in rows if r.engine == "VTA")
    host_us = sum(r.host_us(host) for r in rows)
    vta_us = None if fmax_mhz is None else cycles / fmax_mhz
    return {"cycles": cycles, "vta_us": vta_us, "host_us": host_us,
            "total_us": None if vta_us is None else vta_us + host_us,
            "dram_bytes": sum(r.dram_bytes for r in rows)}


def format_profile(rows, backend: str = "", *, fmax_mhz: float | None = None, host=None,
                   fmax_source: str = "") -> str:
    """The profile as a text table with a total line. ``bound`` and ``roofline`` are the
    layer's :mod:`~vtakit.compiler.ops.roofline` (binding bound, cycles); ``x roof`` is the
    measured cycles (predicted without a clock) over the roofline. ``VTA us`` is the cycles
    at ``fmax_mhz`` (``-`` without a clock), ``host us`` the layer's host steps, measured on
    this machine or estimated by ``host`` (a :class:`~vtakit.tools.latency.HostModel`),
    ``total us`` their sum."""
    head = (f"{'#':>3} {'layer':<26} {'engine':<6} {'cycles':>10} {'predicted':>10} "
            f"{'bound':<5} {'roofline':>10} {'x roof':>6} "
            f"{'GEMM util':>9} {'DRAM B':>10} {'wall ms':>8} "
            f"{'VTA us':>9} {'host us':>9} {'total us':>9}")
    lines = [head]

    def us(v):
        return "-" if v is None else f"{v:,.1f}"

    def fmt(r_cycles, pred, kind, roof, ratio, util, dram, wall, name, engine, idx,
            vta_us, host_us):
        cyc = "-" if r_cycles <= 0 else f"{r_cycles:,}"
        return (f"{idx:>3} {name:<26} {engine:<6} {cyc:>10} "
                f"{(f'{pred:,}' if pred else '-'):>10} {kind:<5} "
                f"{(f'{roof:,}' if roof else '-'):>10} "
                f"{('-' if ratio is None else f'{ratio:.2f}'):>6} "
                f"{('-' if util is None else f'{100 * util:.1f}%'):>9} {dram:>10,} "
                f"{1e3 * wall:>8.2f} {us(vta_us):>9} {us(host_us):>9} "
                f"{us(None if vta_us is None else vta_us + host_us):>9}")
    for r in rows:
        rl = r.roofline
        lines.append(fmt(r.cycles, r.predicted_cycles, rl.kind if rl else "",
                         rl.cycles if rl else 0, r.roofline_ratio, r.gemm_utilization,
                         r.dram_bytes, r.wall, r.name[:26], r.engine, r.index,
                         None if fmax_mhz is None else
                         (r.vta_us(fmax_mhz) if r.engine == "VTA" else 0.0), r.host_us(host)))
    measured = [r.cycles for r in rows if r.engine == "VTA"]
    total_cycles = sum(measured) if measured and all(c > 0 for c in measured) else -1
    predicted = sum(r.predicted_cycles for r in rows)
    roof = sum(r.roofline.cycles for r in rows if r.roofline is not None)
    basis = total_cycles if total_cycles > 0 else predicted
    totals = latency_totals(rows, fmax_mhz, host)
    lines.append(fmt(total_cycles, predicted, "", roof, basis / roof if roof else None,
                     None, totals["dram_bytes"], sum(r.wall for r in rows),
                     "total" + (f" ({backend})" if backend else ""), "", "",
                     totals["vta_us"], totals["host_us"]))
    vta = [r for r in rows if r.engine == "VTA"]
    if fmax_mhz is None:
        clock = "VTA us needs a clock (--fmax MHZ or --target T)"
    else:
        clock = (f"VTA us = {'measured' if total_cycles > 0 else 'predicted'} cycles at "
                 f"{fmax_mhz:g} MHz" + (f" ({fmax_source})" if fmax_source else ""))
    where = ("measured on this machine" if host is None
             else f"estimated for {host.name} at {host.clock_mhz:g} MHz ({host.path})")
    chains = [r for r in vta if len(r.layers) > 1]
    n_vta = sum(max(1, len(r.layers)) for r in vta)
    chained = (f" ({sum(len(r.layers) for r in chains)} of them in {len(chains)} chain(s), "
               "each one stream)" if chains else "")
    lines.append(f"{n_vta} layer(s) on VTA, {len(rows) - len(vta)} on the host{chained}; "
                 "predicted = event model of the stream that ran (vtakit.compiler.ops.perfmodel); "
                 "roofline = max(GEMM + ALU micro-ops, DRAM beats) (vtakit.compiler.ops.roofline); "
                 "GEMM util = the layer's nominal MACs (every kernel tap, padding included) over "
                 "cycles x the MACs per cycle: above 100% where the GEMMs skip taps that read "
                 "only padding; "
                 f"{clock}; host us = the host steps {where} (vtakit.tools.latency)")
    return "\n".join(lines)
