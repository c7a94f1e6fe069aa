"""The result of a synthesis run: resources, Fmax, fit, and how to print them."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .targets import RESOURCES

__all__ = ["Overflow", "SynthReport", "format_table", "reports_to_json"]


@dataclass(frozen=True)
class Overflow:
    """One resource a design needs more of than the target has."""

    resource: str
    used: float
    available: float

    @property
    def excess(self) -> float:
        return self.used - self.available

    def __str__(self) -> str:
        return (f"{self.resource} {_num(self.used)} > {_num(self.available)} "
                f"(+{_num(self.excess)}, {100 * self.used / self.available:.0f}% of the device)")


@dataclass
class SynthReport:
    """Resources and speed of one design on one target.

    Attributes
    ----------
    design : str
        Config name (``1x8_i8w8a32_12_12_14_14``) or a component's name.
    target, device : str
    resources : dict
        ``{lut, ff, dsp, bram}`` used (nextpnr's count after placement where it ran,
        else Yosys's cell count).
    capacity : dict
        Available count of each resource on the device.
    fmax_mhz : float or None
        nextpnr's achieved maximum frequency of ``clk`` (None: not placed and routed).
    source : str
        ``"nextpnr"`` or ``"yosys"`` (where the resource counts come from).
    harness : dict
        Resources of the I/O harness included in the counts (``IOHarness.cost``).
    overflow : list of Overflow
        Resources that do not fit (empty if the design fits).
    suggestion : str or None
        For a design that does not fit: the largest config estimated to fit.
    seconds : dict
        Wall time of each stage (``rtlil``, ``yosys``, ``nextpnr``).
    tools : dict
        Package versions of the tools that ran.
    """

    design: str
    target: str
    device: str
    resources: dict
    capacity: dict
    fmax_mhz: float | None = None
    source: str = "yosys"
    harness: dict = field(default_factory=dict)
    overflow: list = field(default_factory=list)
    suggestion: str | None = None
    seconds: dict = field(default_factory=dict)
    tools: dict = field(default_factory=dict)
    cells: dict = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return not self.overflow

    def utilization(self) -> dict:
        """``{resource: fraction of the device}``."""
        return {r: self.resources[r] / self.capacity[r] for r in RESOURCES}

    def overflow_message(self) -> str:
        """``"<design> does not fit <target>: lut 14700 > 5280 (...); ..."`` plus the suggestion."""
        if self.fits:
            return f"{self.design} fits {self.target}"
        text = (f"{self.design} does not fit {self.target} ({self.device}): "
                + "; ".join(str(o) for o in self.overflow))
        if self.suggestion:
            text += f"\n{self.suggestion}"
        return text

    def to_dict(self) -> dict:
        out = asdict(self)
        out["overflow"] = [{**asdict(o), "excess": o.excess} for o in self.overflow]
        out["fits"] = self.fits
        out["utilization"] = {k: round(v, 4) for k, v in self.utilization().items()}
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "SynthReport":
        values = {k: v for k, v in values.items() if k not in ("fits", "utilization")}
        values["overflow"] = [Overflow(o["resource"], o["used"], o["available"])
                              for o in values.get("overflow", [])]
        return cls(**values)


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def format_table(reports, *, markdown: bool = False) -> str:
    """A fixed-width (or Markdown) table: one row per report, ``used/available (pct)`` per
    resource, ``!`` marking an overflow."""
    head = ["design", "target", *RESOURCES, "Fmax MHz", "from"]
    rows = []
    for r in reports:
        cells = [r.design, r.target]
        for res in RESOURCES:
            used, cap = r.resources[res], r.capacity[res]
            mark = "!" if any(o.resource == res for o in r.overflow) else ""
            cells.append(f"{_num(used)}/{_num(cap)} ({100 * used / cap:.0f}%){mark}")
        cells.append(f"{r.fmax_mhz:.1f}" if r.fmax_mhz else "-")
        cells.append(r.source)
        rows.append(cells)
    if markdown:
        return "\n".join(["| " + " | ".join(map(str, row)) + " |" for row in
                          [head, ["---"] * len(head), *rows]])
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
             for row in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def reports_to_json(reports) -> str:
    """Deterministic JSON of a list of reports."""
    return json.dumps([r.to_dict() for r in reports], indent=2, sort_keys=True) + "\n"
