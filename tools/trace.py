"""Layer timelines of a profiled run: Chrome/Perfetto trace JSON and a matplotlib picture.

The timeline has one track per engine (``VTA`` and ``host``); each layer is a slice
as long as its wall time on the simulating machine, with its cycles, predicted cycles,
GEMM utilization and DRAM bytes as arguments.

Below them, four tracks ``fetch/load/compute/store (modelled)`` show each VTA layer's
units busy on an instruction (category ``busy``) or waiting for a dependency token
(category ``wait``). The backends do not measure these, so they come from the event
model (:func:`~vtakit.compiler.ops.perfmodel.predict_stream` of the stream that ran),
stretched to fill the layer's slice: when the layer's cycles were measured the model's
cycles are scaled to them (the ``measured_cycles`` argument), else they are the
model's own. Open the JSON in https://ui.perfetto.dev or chrome://tracing (zoom).

The picture (:func:`plot_trace`, ``vtakit plot trace``) lays the layers out on a VTA
cycle axis when the trace has measured cycles (wall time otherwise, or ``axis=``),
labels each block with its layer number and leaves out tracks without events.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..hw.errors import InputError

__all__ = ["trace_events", "write_trace", "plot_trace", "trace_figure", "TRACKS", "UNIT_TRACKS"]

#: Track (thread) id of each engine in the trace.
TRACKS = {"VTA": 1, "host": 2}
#: Track id of each unit's modelled timeline (keyed by the perfmodel's unit names).
UNIT_TRACKS = {"fetch": 3, "load": 4, "compute": 5, "store": 6}


def _unit_events(r, t0: float, dur: float) -> list:
    """The modelled unit intervals of row ``r``, mapped into its slice [t0, t0 + dur]."""
    if not r.units:
        return []
    span = max([r.predicted_cycles] + [i.end for spans in r.units.values() for i in spans])
    if span <= 0:
        return []
    us = dur / span                              # wall microseconds per model cycle
    scale = r.cycles / r.predicted_cycles if r.cycles > 0 and r.predicted_cycles else None
    out = []
    for unit, spans in r.units.items():
        for i in spans:
            args = {"layer": r.index, "model_cycles": [i.start, i.end], "modelled": True}
            if scale is not None:
                args["measured_cycles"] = [round(i.start * scale, 1), round(i.end * scale, 1)]
            out.append({"name": i.what if i.kind == "busy" else f"wait {i.what}",
                        "cat": i.kind, "ph": "X", "pid": 1, "tid": UNIT_TRACKS[unit],
                        "ts": round(t0 + i.start * us, 3),
                        "dur": round((i.end - i.start) * us, 3), "args": args})
    return out


def trace_events(rows) -> dict:
    """The Chrome trace (``{"traceEvents": [...]}``) of :class:`LayerProfile` rows;
    timestamps in microseconds of wall time from the first layer."""
    events = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
               "args": {"name": engine}} for engine, tid in TRACKS.items()]
    if any(getattr(r, "units", None) for r in rows):
        events += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                    "args": {"name": f"{unit} (modelled)"}} for unit, tid in UNIT_TRACKS.items()]
    t = 0.0
    for r in rows:
        dur = r.wall * 1e6
        events.append({"name": r.name, "cat": r.engine, "ph": "X", "pid": 1,
                       "tid": TRACKS[r.engine], "ts": round(t, 3), "dur": round(dur, 3),
                       "args": {"layer": r.index, "layers": list(r.layers or (r.name,)),
                                "cycles": r.cycles,
                                "predicted_cycles": r.predicted_cycles,
                                "gemm_utilization": r.gemm_utilization,
                                "dram_bytes": r.dram_bytes}})
        events += _unit_events(r, t, dur)
        t += dur
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_trace(rows, path) -> Path:
    """Write :func:`trace_events` as JSON; returns the path."""
    path = Path(path)
    path.write_text(json.dumps(trace_events(rows), indent=1))
    return path


#: Colors of the picture, by event category.
_COLORS = {"VTA": "tab:blue", "host": "tab:orange", "busy": "tab:green", "wait": "tab:red"}
_LEGEND = {"VTA": "VTA layer", "host": "host layer", "busy": "unit busy (modelled)",
           "wait": "unit waits for a token (modelled)"}


def _read_trace(trace_path):
    """(layer events, unit events, track names) of a trace JSON."""
    if not Path(trace_path).is_file():
        raise InputError(f"{trace_path}: no such file (vtakit run --trace FILE.json "
                         "writes a trace)")
    try:
        data = json.loads(Path(trace_path).read_text())
        events = [e for e in data["traceEvents"] if e.get("ph") == "X"]
        names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"] if e.get("ph") == "M"}
        layers = sorted((e for e in events if e.get("cat") in TRACKS), key=lambda e: e["ts"])
        for e in layers:
            e["args"]["layer"], e["args"]["cycles"], e["args"]["predicted_cycles"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError(f"{trace_path}: not a vtakit trace JSON ({e})") from None
    units = [e for e in events if e.get("cat") not in TRACKS]
    return layers, units, names


def _cycle_spans(layers, units, measured: bool):
    """Layer and unit intervals on a cycle axis: VTA layers one after the other, each as
    long as its cycles (measured, or the event model's prediction); host layers take no
    VTA cycle (width 0, drawn as ticks); a unit interval sits inside its layer."""
    key = "cycles" if measured else "predicted_cycles"
    start, t, spans = {}, 0.0, []
    for e in layers:
        width = max(e["args"][key], 0) if e["cat"] == "VTA" else 0
        start[e["args"]["layer"]] = t
        spans.append((e, t, width))
        t += width
    unit_spans = []
    for e in units:
        a = e.get("args", {})
        lo, hi = a.get("measured_cycles") if measured and "measured_cycles" in a else \
            a.get("model_cycles", (0, 0))
        unit_spans.append((e, start.get(a.get("layer"), 0.0) + lo, hi - lo))
    return spans, unit_spans


def plot_trace(trace_path, out_path, *, axis: str = "auto") -> Path:
    """Draw a trace JSON written by :func:`write_trace` as a PNG (see :func:`trace_figure`);
    returns the PNG's path."""
    import matplotlib.pyplot as plt
    fig = trace_figure(trace_path, axis=axis)
    out = Path(out_path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def trace_figure(trace_path, *, axis: str = "auto"):
    """The matplotlib figure of a trace JSON written by :func:`write_trace`: one row per track that
    has events (engines on top, the modelled units below), every layer block labelled
    with its number (the ``#`` of ``vtakit run --profile``), the legend beside the plot.

    ``axis``: ``"cycles"`` (VTA cycles: measured, else the event model's prediction),
    ``"wall"`` (the simulating machine's milliseconds), or ``"auto"`` (cycles when the
    trace has measured cycles, else wall time).
    """
    import matplotlib
    matplotlib.use("Agg")           # no display needed
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    if axis not in ("auto", "cycles", "wall"):
        raise InputError(f"axis {axis!r}; axes are auto, cycles, wall")
    layers, units, names = _read_trace(trace_path)
    measured = any(e["cat"] == "VTA" and e["args"]["cycles"] > 0 for e in layers)
    if axis == "auto":
        axis = "cycles" if measured else "wall"
    if axis == "cycles":
        spans, unit_spans = _cycle_spans(layers, units, measured)
        xlabel = "VTA cycles" + ("" if measured else " (predicted by the event model)")
    else:
        spans = [(e, e["ts"] / 1e3, e["dur"] / 1e3) for e in layers]
        unit_spans = [(e, e["ts"] / 1e3, e["dur"] / 1e3) for e in units]
        xlabel = "wall time on the simulating machine (ms)"
    tids = sorted({e["tid"] for e, _, _ in spans + unit_spans})     # empty tracks left out
    row = {tid: len(tids) - 1 - i for i, tid in enumerate(tids)}    # engines on top
    fig, ax = plt.subplots(figsize=(11, 1.3 + 0.55 * len(tids)))
    bars = {}                        # one broken_barh per (row, category): fast for many bars
    for e, x, w in spans + unit_spans:
        bars.setdefault((e["tid"], e.get("cat")), []).append((x, w))
    for (tid, cat), xs in bars.items():
        unit = cat not in TRACKS
        ax.broken_barh(xs, (row[tid] - 0.35, 0.7), facecolors=_COLORS.get(cat, "tab:gray"),
                       edgecolor="none" if unit else "black", linewidth=0.4)
    end = max([x + w for _, x, w in spans + unit_spans] + [1e-9])
    for e, x, w in spans:
        y = row[e["tid"]]
        if w <= 0:                   # a host layer on the cycle axis: a tick
            ax.plot([x, x], [y - 0.35, y + 0.35], color=_COLORS["host"], linewidth=2)
        if w <= 0:
            ax.text(x + 0.004 * end, y, f"#{e['args']['layer']}", ha="left", va="center",
                    fontsize=8)
        elif w >= 0.015 * end:
            ax.text(x + w / 2, y, f"#{e['args']['layer']}", ha="center", va="center",
                    fontsize=8, color="white", clip_on=True)
    ax.set_yticks([row[t] for t in tids], [names.get(t, str(t)) for t in tids])
    ax.set_ylim(-0.6, len(tids) - 0.2)
    ax.set_xlim(-0.01 * end, end * 1.01)
    ax.set_xlabel(xlabel)
    ax.set_title(f"layer timeline ({len(layers)} layers; #N = layer N of vtakit run --profile)",
                 fontsize=10)
    cats = [c for c in _COLORS if any(cat == c for _, cat in bars)]
    labels = [_LEGEND[c] + (" (no VTA cycles: a tick)" if c == "host" and axis == "cycles"
                            else "") for c in cats]
    ax.legend([Patch(facecolor=_COLORS[c]) for c in cats], labels,
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig
