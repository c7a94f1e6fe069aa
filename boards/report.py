"""The result of a synthesis run: resources, Fmax, fit, and how to print them."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from .targets import RESOURCES

__all__ = ["Overflow", "SynthReport", "CriticalPath", "critical_paths", "format_paths",
           "format_table", "reports_to_json"]

#: Critical paths a report keeps (nextpnr reports the worst path of each clock pair).
MAX_PATHS = 3

# Yosys's ``autoname`` names a cell after the net it drives plus ``_<CELL>_<PORT>`` (and
# a ``_<n>`` for duplicates); flattening joins the Amaranth hierarchy with dots.
_AUTONAME = re.compile(r"(_[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_[A-Z]+[0-9]*)+(_\d+)?$")


def hierarchy_name(cell: str) -> str:
    """The Amaranth hierarchy name of a netlist cell: ``dut.compute.gemm.dot_3`` for
    ``dut.compute.gemm.dot_3_TRELLIS_FF_Q`` (the harness's ``dut.`` prefix removed; a
    Yosys-internal ``$...`` name is kept as it is)."""
    name = re.sub(r"\$[A-Z][A-Z0-9_]*$", "", cell.lstrip("\\"))   # nextpnr's "$CCU2_COMB0"
    if not name.startswith("$"):
        name = _AUTONAME.sub("", name) or name
    return name[4:] if name.startswith("dut.") else name


@dataclass(frozen=True)
class CriticalPath:
    """One register-to-register path from nextpnr's timing report.

    Attributes
    ----------
    delay_ns : float
        Total delay (clock-to-out, logic, routing and setup).
    logic_ns, routing_ns : float
        Cell delays (clock-to-out and setup included) and net delays.
    source, sink : str
        Hierarchy names (:func:`hierarchy_name`) of the launching and capturing cells.
    through : list of str
        Hierarchy names of the cells in between, in order, repeats merged.
    clocks : str
        ``"<from> -> <to>"`` clock events (``<async>`` for ports).
    """

    delay_ns: float
    logic_ns: float
    routing_ns: float
    source: str
    sink: str
    through: tuple = ()
    clocks: str = ""

    def __str__(self) -> str:
        via = f" via {len(self.through)} cells" if self.through else ""
        return (f"{self.delay_ns:.2f} ns ({self.logic_ns:.2f} logic, {self.routing_ns:.2f} "
                f"routing): {self.source} -> {self.sink}{via}")


def critical_paths(pnr_report: dict, limit: int = MAX_PATHS) -> list:
    """The worst ``limit`` paths of a nextpnr ``--report`` JSON: the clock-to-clock paths
    (which set Fmax), then those from or to an I/O port (``<async>``), longest first."""
    out = []
    for entry in pnr_report.get("critical_paths", []):
        segments = entry.get("path", [])
        if not segments:
            continue
        logic = sum(s.get("delay", 0.0) for s in segments if s.get("type") != "routing")
        routing = sum(s.get("delay", 0.0) for s in segments if s.get("type") == "routing")
        cells = [hierarchy_name(s["from"]["cell"]) for s in segments] + [
            hierarchy_name(segments[-1]["to"]["cell"])]
        merged = [c for i, c in enumerate(cells) if i == 0 or c != cells[i - 1]]
        out.append(CriticalPath(delay_ns=round(logic + routing, 3), logic_ns=round(logic, 3),
                                routing_ns=round(routing, 3), source=merged[0],
                                sink=merged[-1], through=tuple(merged[1:-1]),
                                clocks=f"{entry.get('from', '?')} -> {entry.get('to', '?')}"))
    # register-to-register paths first (they set Fmax), then the I/O paths, longest first
    out.sort(key=lambda p: ("<async>" in p.clocks, -p.delay_ns))
    return out[:limit]


def format_paths(report) -> str:
    """The critical paths of a report, one per line (empty without place and route)."""
    lines = []
    for i, path in enumerate(report.critical_paths, 1):
        p = path if isinstance(path, CriticalPath) else CriticalPath(**path)
        lines.append(f"critical path {i}: {p}")
    return "\n".join(lines)


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
    cells : dict
        Yosys's cell counts by type.
    critical_paths : list of dict
        The worst paths of nextpnr's timing report (:class:`CriticalPath` fields),
        longest first.
    dsp_budget : int or None
        Products of the GEMM built as hard multipliers (None: all of them).
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
    critical_paths: list = field(default_factory=list)
    dsp_budget: int | None = None

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


def format_table(reports, *, markdown: bool = False, revisions=None) -> str:
    """A fixed-width (or Markdown) table: one row per report, ``used/available (pct)`` per
    resource, ``!`` marking an overflow; ``revisions`` (one per report) adds the source
    revision each row was measured on."""
    head = ["design", "target", *RESOURCES, "Fmax MHz", "from", *(["revision"] if revisions else [])]
    rows = []
    for i, r in enumerate(reports):
        cells = [r.design, r.target]
        for res in RESOURCES:
            used, cap = r.resources[res], r.capacity[res]
            mark = "!" if any(o.resource == res for o in r.overflow) else ""
            cells.append(f"{_num(used)}/{_num(cap)} ({100 * used / cap:.0f}%){mark}")
        cells.append(f"{r.fmax_mhz:.1f}" if r.fmax_mhz else "-")
        cells.append(r.source)
        if revisions:
            cells.append(revisions[i])
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
