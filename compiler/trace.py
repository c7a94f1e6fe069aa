"""Layer timelines of a profiled run: Chrome/Perfetto trace JSON and a matplotlib picture.

The timeline has one track per engine (``VTA`` and ``host``); each layer is a slice
as long as its wall time on the simulating machine, with its cycles, predicted cycles,
GEMM utilization and DRAM bytes as arguments. (Per-unit busy/wait intervals of
load, compute and store are not recorded by the backends yet: this is the layer
level of the timeline.) Open the JSON in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["trace_events", "write_trace", "plot_trace", "TRACKS"]

#: Track (thread) id of each engine in the trace.
TRACKS = {"VTA": 1, "host": 2}


def trace_events(rows) -> dict:
    """The Chrome trace (``{"traceEvents": [...]}``) of :class:`LayerProfile` rows;
    timestamps in microseconds of wall time from the first layer."""
    events = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
               "args": {"name": engine}} for engine, tid in TRACKS.items()]
    t = 0.0
    for r in rows:
        dur = r.wall * 1e6
        events.append({"name": r.name, "cat": r.engine, "ph": "X", "pid": 1,
                       "tid": TRACKS[r.engine], "ts": round(t, 3), "dur": round(dur, 3),
                       "args": {"layer": r.index, "cycles": r.cycles,
                                "predicted_cycles": r.predicted_cycles,
                                "gemm_utilization": r.gemm_utilization,
                                "dram_bytes": r.dram_bytes}})
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
        raise ValueError(f"{trace_path}: not a vtakit trace JSON ({e})") from None
    names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"] if e.get("ph") == "M"}
    tids = sorted(names)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * len(tids)))
    colors = {"VTA": "tab:blue", "host": "tab:orange"}
    for e in events:
        y = tids.index(e["tid"])
        ax.broken_barh([(e["ts"] / 1e3, e["dur"] / 1e3)], (y - 0.35, 0.7),
                       facecolors=colors.get(e.get("cat"), "tab:gray"), edgecolor="black",
                       linewidth=0.3)
    ax.set_yticks(range(len(tids)), [names[t] for t in tids])
    ax.set_xlabel("wall time (ms)")
    ax.set_title(f"layer timeline ({len(events)} layers)")
    fig.tight_layout()
    out = Path(out_path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
