"""Layer timelines of a profiled run: Chrome/Perfetto trace JSON and a matplotlib picture.

The timeline has one track per engine (``VTA`` and ``host``); each layer is a slice
as long as its wall time on the simulating machine, with its cycles, predicted cycles,
GEMM utilization and DRAM bytes as arguments.

Below them, four tracks ``fetch/load/compute/store (modelled)`` show each VTA layer's
units busy on an instruction (category ``busy``) or waiting for a dependency token
(category ``wait``). The backends do not measure these, so they come from the event
model (:func:`~vtakit.compiler.perfmodel.predict_stream` of the stream that ran),
stretched to fill the layer's slice: when the layer's cycles were measured the model's
cycles are scaled to them (the ``measured_cycles`` argument), else they are the
model's own. Open the JSON in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..hw.errors import InputError

__all__ = ["trace_events", "write_trace", "plot_trace", "TRACKS", "UNIT_TRACKS"]

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
                       "args": {"layer": r.index, "cycles": r.cycles,
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


def plot_trace(trace_path, out_path) -> Path:
    """Draw a trace JSON written by :func:`write_trace` as a PNG (one row per engine)."""
    import matplotlib
    matplotlib.use("Agg")           # no display needed
    import matplotlib.pyplot as plt
    try:
        data = json.loads(Path(trace_path).read_text())
        events = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{trace_path}: not a vtakit trace JSON ({e})") from None
    names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"] if e.get("ph") == "M"}
    tids = sorted(names)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * len(tids)))
    colors = {"VTA": "tab:blue", "host": "tab:orange", "busy": "tab:green", "wait": "tab:red"}
    bars = {}                        # one broken_barh per (row, category): fast for many bars
    for e in events:
        bars.setdefault((e["tid"], e.get("cat")), []).append((e["ts"] / 1e3, e["dur"] / 1e3))
    for (tid, cat), xs in bars.items():
        y = len(tids) - 1 - tids.index(tid)        # engines on top, units below
        unit = cat in ("busy", "wait")
        ax.broken_barh(xs, (y - 0.35, 0.7), facecolors=colors.get(cat, "tab:gray"),
                       edgecolor="none" if unit else "black", linewidth=0.3,
                       label=f"{cat} (modelled)" if unit else None)
    ax.set_yticks(range(len(tids)), [names[t] for t in reversed(tids)])
    ax.set_xlabel("wall time (ms)")
    n_layers = sum(e.get("cat") in TRACKS for e in events)
    ax.set_title(f"layer timeline ({n_layers} layers)")
    if any(tid in UNIT_TRACKS.values() for tid in tids):
        handles, labels = ax.get_legend_handles_labels()
        seen = dict(zip(labels, handles))
        ax.legend(seen.values(), seen.keys(), loc="upper right", fontsize="small")
    fig.tight_layout()
    out = Path(out_path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
