"""Pareto sets of a sweep table, their plot (PNG) and the per-layer breakdown of the best
points.

A point is on its model's Pareto set when no other successful point of the same model
has fewer or equal cycles *and* a smaller or equal cost with one of them strictly
smaller. The cost is the LUT count when the sweep synthesized (``--synth``), else the
config's peak MACs per cycle (``BATCH x BLOCK_IN x BLOCK_OUT``, the GEMM core's size).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["cost_column", "pareto_front", "plot_pareto", "best_points", "format_layers"]


def _ok(rows):
    return [r for r in rows if r["status"] == "ok" and r["cycles"] is not None]


def cost_column(rows) -> str:
    """``"lut"`` when every successful row has a LUT count, else ``"macs_per_cycle"``."""
    ok = _ok(rows)
    return "lut" if ok and all(r["lut"] is not None for r in ok) else "macs_per_cycle"


def pareto_front(rows, cost: str) -> list[dict]:
    """The non-dominated rows (fewest cycles for their cost), by increasing cost."""
    front = []
    for r in sorted(rows, key=lambda r: (r[cost], r["cycles"], r["config"])):
        if not front or r["cycles"] < front[-1]["cycles"]:
            front.append(r)
    return front


def plot_pareto(table, path) -> Path:
    """Cycles against cost, one colour per model, the Pareto set joined and labelled with
    its configs; log-scaled axes. Returns the path written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = _ok(table.to_pylist())
    cost = cost_column(rows)
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    for k, model in enumerate(sorted({r["model"] for r in rows})):
        mine = [r for r in rows if r["model"] == model]
        colour = f"C{k % 10}"
        ax.scatter([r[cost] for r in mine], [r["cycles"] for r in mine], s=22, alpha=0.45,
                   color=colour)
        front = pareto_front(mine, cost)
        ax.plot([r[cost] for r in front], [r["cycles"] for r in front], "o-", color=colour,
                label=f"{model} ({len(front)} on the Pareto set of {len(mine)})")
        for r in mine:
            on = any(r is f for f in front)
            ax.annotate(r["config"], (r[cost], r["cycles"]), fontsize=7 if on else 6,
                        xytext=(4, 4), textcoords="offset points", color=colour,
                        alpha=1.0 if on else 0.5)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("LUTs (Yosys)" if cost == "lut" else "peak MACs/cycle (BATCH x BLOCK_IN x "
                  "BLOCK_OUT)")
    engines = sorted({r["engine"] for r in rows})
    ax.set_ylabel(f"cycles per inference ({', '.join(engines)})")
    ax.set_title("vtakit sweep: cycles vs hardware cost (lines: Pareto sets)")
    ax.grid(True, which="both", alpha=0.3)
    if rows:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def best_points(table) -> list[dict]:
    """Per model, the successful row with the fewest cycles (ties: the first config)."""
    best = {}
    for r in _ok(table.to_pylist()):
        b = best.get(r["model"])
        if b is None or r["cycles"] < b["cycles"]:
            best[r["model"]] = r
    return [best[m] for m in sorted(best)]


def format_layers(layers, row, top: int = 12) -> str:
    """The per-layer breakdown of one point: its ``top`` costliest layer calls."""
    mine = [r for r in layers.to_pylist() if (r["config"], r["model"], r["engine"]) ==
            (row["config"], row["model"], row["engine"])]
    mine.sort(key=lambda r: (-r["cycles"], r["index"]))
    total = sum(r["cycles"] for r in mine) or 1
    lines = [f"{row['model']} on {row['config']} ({row['engine']}): {row['cycles']:,} cycles; "
             f"costliest layers:",
             f"  {'#':>3} {'layer':<28} {'where':<5} {'cycles':>11} {'share':>6} "
             f"{'GEMM util':>9} {'DRAM B':>10}"]
    for r in mine[:top]:
        util = "-" if r["gemm_utilization"] is None else f"{100 * r['gemm_utilization']:.1f}%"
        lines.append(f"  {r['index']:>3} {r['layer'][:28]:<28} {r['where']:<5} "
                     f"{r['cycles']:>11,} {100 * r['cycles'] / total:>5.1f}% {util:>9} "
                     f"{r['dram_bytes']:>10,}")
    return "\n".join(lines)
