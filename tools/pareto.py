"""Pareto sets of a sweep table, their plot (PNG) and the per-layer breakdown of the best
points.

A point is on its model's Pareto set when no other successful point of the same model
has a smaller or equal figure *and* a smaller or equal cost with one of them strictly
smaller. The figure is the latency per inference (``latency_us``: cycles at the config's
Fmax plus the host, :mod:`~.latency`) when every successful point has one, else the
cycles. The cost is the LUT count (and, in a second panel, the DSP count) when the sweep
synthesized (``--synth``), else the config's peak MACs per cycle (``BATCH x BLOCK_IN x
BLOCK_OUT``, the GEMM core's size).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["cost_column", "metric_column", "pareto_front", "plot_pareto", "best_points",
           "format_layers"]

_LABELS = {"lut": "LUTs", "dsp": "DSPs",
           "macs_per_cycle": "peak MACs/cycle (BATCH x BLOCK_IN x BLOCK_OUT)"}


def _ok(rows):
    return [r for r in rows if r["status"] == "ok" and r["cycles"] is not None]


def cost_column(rows) -> str:
    """``"lut"`` when every successful row has a LUT count, else ``"macs_per_cycle"``."""
    ok = _ok(rows)
    return "lut" if ok and all(r.get("lut") is not None for r in ok) else "macs_per_cycle"


def metric_column(rows) -> str:
    """``"latency_us"`` when every successful row has a latency, else ``"cycles"``."""
    ok = _ok(rows)
    return ("latency_us" if ok and all(r.get("latency_us") is not None for r in ok)
            else "cycles")


def pareto_front(rows, cost: str, metric: str = "cycles") -> list[dict]:
    """The non-dominated rows (the smallest ``metric`` for their cost), by increasing cost."""
    front = []
    for r in sorted(rows, key=lambda r: (r[cost], r[metric], r["config"])):
        if not front or r[metric] < front[-1][metric]:
            front.append(r)
    return front


def _panel(ax, rows, cost, metric):
    for k, model in enumerate(sorted({r["model"] for r in rows})):
        mine = [r for r in rows if r["model"] == model]
        colour = f"C{k % 10}"
        ax.scatter([r[cost] for r in mine], [r[metric] for r in mine], s=22, alpha=0.45,
                   color=colour)
        front = pareto_front(mine, cost, metric)
        ax.plot([r[cost] for r in front], [r[metric] for r in front], "o-", color=colour,
                label=f"{model} ({len(front)} on the Pareto set of {len(mine)})")
        for r in mine:
            on = any(r is f for f in front)
            ax.annotate(r["config"], (r[cost], r[metric]), fontsize=7 if on else 6,
                        xytext=(4, 4), textcoords="offset points", color=colour,
                        alpha=1.0 if on else 0.5)
    if len({r[cost] for r in rows}) > 1 and all(r[cost] > 0 for r in rows):
        ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    targets = sorted({r.get("synth") or "" for r in rows} - {""})
    where = f" ({', '.join(targets)})" if cost in ("lut", "dsp") and targets else ""
    ax.set_xlabel(_LABELS[cost] + where)
    engines = sorted({r["engine"] for r in rows})
    if metric == "latency_us":
        hosts = sorted({r.get("host") or "measured" for r in rows})
        ax.set_ylabel(f"latency per inference, us (cycles / Fmax + host {', '.join(hosts)}; "
                      f"{', '.join(engines)})", fontsize=8)
    else:
        ax.set_ylabel(f"cycles per inference ({', '.join(engines)})")
    ax.grid(True, which="both", alpha=0.3)
    if rows:
        ax.legend(fontsize=8)


def plot_pareto(table, path) -> Path:
    """The figure (latency, else cycles) against cost, one colour per model, the Pareto
    set joined and labelled with its configs; log-scaled axes. With LUT counts and a
    latency, a second panel draws latency against DSPs. Returns the path written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = _ok(table.to_pylist())
    cost, metric = cost_column(rows), metric_column(rows)
    costs = [cost]
    if cost == "lut" and all(r.get("dsp") is not None for r in rows):
        costs.append("dsp")
    fig, axes = plt.subplots(1, len(costs), figsize=(9 * len(costs), 6), dpi=110,
                             squeeze=False)
    for ax, c in zip(axes[0], costs):
        _panel(ax, rows, c, metric)
    what = "latency" if metric == "latency_us" else "cycles"
    fig.suptitle(f"vtakit sweep: {what} vs hardware cost (lines: Pareto sets)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def best_points(table) -> list[dict]:
    """Per model, the successful row with the smallest latency (the fewest cycles when a
    row has no latency; ties: the first config)."""
    rows = _ok(table.to_pylist())
    metric = metric_column(rows)
    best = {}
    for r in rows:
        b = best.get(r["model"])
        if b is None or r[metric] < b[metric]:
            best[r["model"]] = r
    return [best[m] for m in sorted(best)]


def format_layers(layers, row, top: int = 12) -> str:
    """The per-layer breakdown of one point: its ``top`` costliest layer calls."""
    mine = [r for r in layers.to_pylist() if (r["config"], r["model"], r["engine"]) ==
            (row["config"], row["model"], row["engine"])]
    mine.sort(key=lambda r: (-r["cycles"], r["index"]))
    total = sum(r["cycles"] for r in mine) or 1
    lat = "" if row.get("latency_us") is None else \
        f", {row['latency_us']:,.1f} us at {row['fmax_mhz']:g} MHz with the host"
    lines = [f"{row['model']} on {row['config']} ({row['engine']}): {row['cycles']:,} cycles"
             f"{lat}; costliest layers:",
             f"  {'#':>3} {'layer':<28} {'where':<5} {'cycles':>11} {'share':>6} "
             f"{'GEMM util':>9} {'DRAM B':>10} {'host us':>9}"]
    for r in mine[:top]:
        util = "-" if r["gemm_utilization"] is None else f"{100 * r['gemm_utilization']:.1f}%"
        host = "-" if r.get("host_us") is None else f"{r['host_us']:,.1f}"
        lines.append(f"  {r['index']:>3} {r['layer'][:28]:<28} {r['where']:<5} "
                     f"{r['cycles']:>11,} {100 * r['cycles'] / total:>5.1f}% {util:>9} "
                     f"{r['dram_bytes']:>10,} {host:>9}")
    return "\n".join(lines)
