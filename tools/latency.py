"""Latency per inference on a target: VTA's cycles at the config's Fmax, plus the host.

``latency = cycles / Fmax + host time``. The pieces:

Fmax
    The place-and-route Fmax of *that config on that target*, from a ``vtakit synth``
    report cached under ``$VTAKIT_CACHE/fmax`` (``~/.cache/vtakit/fmax``), one file per
    config and target (:func:`store_report`, :func:`cached_report`; ``vtakit synth`` and
    ``vtakit sweep --synth`` fill it), or a clock given by hand (``--fmax MHZ``). A
    report records the hash of the design it was made from (:func:`design_digest`: the
    RTLIL ``vtakit synth`` feeds Yosys); a report of another design is *stale* and
    refused (the clock moves with the RTL), with the command that refreshes it. An edit
    of ``hw/`` that leaves the elaborated design byte-identical keeps every report.
host
    Every host step of the run (:mod:`vtakit.runtime.hosttime`: the host primitives and,
    inside VTA layers, pack, upload, download, requantize, unpack, tail) timed on the
    machine that runs the model (``measured``), or estimated for an embedded host from a
    per-operation cost table (:class:`HostModel`, a JSON file: ``cortex-a9`` ships, a
    Cortex-A9 at 650 MHz like the PYNQ-Z1's, each figure with its source).

Not counted: the driver's work to bind and launch a kernel (the Python runtime's is not an
embedded runtime's) and the one-time upload of the resident weights.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..hw.errors import InputError

__all__ = ["HostModel", "load_host", "host_seconds", "HOSTS", "MEASURED",
           "store_report", "cached_report", "fmax_mhz", "synth_fmax", "report_path",
           "rtl_digest", "design_digest", "StaleReport", "vta_seconds"]

#: The host model that times the steps on this machine.
MEASURED = "measured"
_HOSTS_DIR = Path(__file__).resolve().parent / "hosts"
#: Shipped host cost tables, by name (``tools/hosts/NAME.json``).
HOSTS = tuple(sorted(p.stem for p in _HOSTS_DIR.glob("*.json")))


# ------------------------------------------------------------------ the host
@dataclass(frozen=True)
class OpCost:
    """Cycles of one host operation: ``per_call + per_element * elements + per_byte * bytes``."""

    per_call: float
    per_element: float
    per_byte: float
    source: str = ""

    def cycles(self, elements: int, nbytes: int) -> float:
        return self.per_call + self.per_element * elements + self.per_byte * nbytes


@dataclass(frozen=True)
class HostModel:
    """An embedded host's per-operation cost table (see ``tools/hosts/cortex-a9.json``).

    Attributes
    ----------
    name, description : str
    clock_mhz : float
    ops : dict
        ``{op name: OpCost}``; ``"default"`` costs every operation not listed.
    path : str
        The file it was read from.
    """

    name: str
    description: str
    clock_mhz: float
    ops: dict = field(default_factory=dict)
    path: str = ""

    def cost(self, op: str) -> OpCost:
        return self.ops.get(op) or self.ops["default"]

    def seconds(self, span) -> float:
        """Estimated seconds of one :class:`~vtakit.runtime.hosttime.HostSpan`."""
        return self.cost(span.op).cycles(span.elements, span.nbytes) / (self.clock_mhz * 1e6)

    @classmethod
    def from_file(cls, path) -> "HostModel":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{path}: cannot read the host cost table ({e})") from None
        where = f"{path}"
        try:
            ops = {}
            for op, c in data["ops"].items():
                ops[op] = OpCost(float(c.get("cycles_per_call", 0)),
                                 float(c.get("cycles_per_element", 0)),
                                 float(c.get("cycles_per_byte", 0)), str(c.get("source", "")))
            clock = float(data["clock_mhz"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"{where}: a host cost table needs clock_mhz and ops {{name: "
                             f"{{cycles_per_call, cycles_per_element, cycles_per_byte, "
                             f"source}}}} ({type(e).__name__}: {e})") from None
        if "default" not in ops:
            raise InputError(f"{where}: the host cost table has no 'default' operation (it "
                             "costs every operation the table does not list)")
        if clock <= 0:
            raise InputError(f"{where}: clock_mhz={clock:g}; must be > 0")
        return cls(str(data.get("name", path.stem)), str(data.get("description", "")), clock,
                   ops, str(path))


def load_host(spec: str | None):
    """``None`` for ``"measured"`` (or None), else the :class:`HostModel` of a shipped
    table's name (:data:`HOSTS`) or of a JSON file."""
    if spec is None or spec == MEASURED:
        return None
    if spec in HOSTS:
        return HostModel.from_file(_HOSTS_DIR / f"{spec}.json")
    if spec.endswith(".json"):
        return HostModel.from_file(spec)
    raise InputError(f"host {spec!r}: give {MEASURED!r} (time the host steps on this "
                     f"machine), a shipped cost table ({', '.join(HOSTS)}) or a .json file")


def host_seconds(spans, host=None) -> float:
    """Host seconds of a layer's spans: measured (``host`` None) or estimated by ``host``."""
    if host is None:
        return sum(s.seconds for s in spans)
    return sum(host.seconds(s) for s in spans)


def vta_seconds(cycles: int, fmax: float | None) -> float | None:
    """``cycles / Fmax`` in seconds (None without a clock or without cycles)."""
    if fmax is None or cycles is None or cycles < 0:
        return None
    return cycles / (fmax * 1e6)


# ------------------------------------------------------------------ Fmax
class StaleReport(InputError):
    """A cached synthesis report of another design than the running sources elaborate to."""


def rtl_digest() -> str:
    """A hash of the ``hw/`` sources this process imported."""
    from ..sim.rtl_build import SOURCE_DIGESTS
    return hashlib.sha256(json.dumps(SOURCE_DIGESTS, sort_keys=True).encode()).hexdigest()[:16]


#: The files of the synthesis front end besides ``hw/`` that shape the RTLIL.
_FRONT_END = ("synth.py", "harness.py", "targets.py")


def _design_key(cfg, target: str) -> str:
    """What the RTLIL of ``cfg`` on ``target`` is made from: the ``hw/`` sources this
    process imported, the synthesis front end, the Amaranth version, config and target."""
    from importlib.metadata import version
    from ..sim.rtl_build import SOURCE_DIGESTS
    boards = Path(__file__).resolve().parent.parent / "boards"
    front = {n: hashlib.sha256((boards / n).read_bytes()).hexdigest() for n in _FRONT_END}
    text = json.dumps({"hw": SOURCE_DIGESTS, "boards": front, "amaranth": version("amaranth"),
                       "config": cfg.to_dict(), "target": target}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _rtlil(cfg, target: str) -> str:
    from ..boards.synth import config_rtlil
    return config_rtlil(cfg, target)


@lru_cache(maxsize=None)
def _design_digest(key: str, config_json: str, target: str) -> str:
    from ..hw.config import VTAConfig
    from ..runtime.image import write_atomic
    from ..sim.rtl_build import cache_root
    path = cache_root() / "fmax" / "designs" / f"{key}.txt"
    try:
        digest = path.read_text().strip()
        if len(digest) == 16:
            return digest
    except OSError:
        pass
    text = _rtlil(VTAConfig.from_dict(json.loads(config_json)), target)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda f: f.write(f"{digest}\n".encode()))
    return digest


def design_digest(config, target: str) -> str:
    """A hash (16 hex digits) of the design ``vtakit synth`` places for ``config`` on
    ``target``: the RTLIL it feeds Yosys (:func:`~vtakit.boards.synth.config_rtlil`).

    Elaborating takes seconds (tiny about 12 s, default about 40 s), so the digest is
    kept per process and on disk (``$VTAKIT_CACHE/fmax/designs``), keyed by what the
    RTLIL is made from (:func:`_design_key`): only the first call after an edit of
    ``hw/`` (or of the synthesis front end, or Amaranth) elaborates again."""
    cfg = _config(config)
    return _design_digest(_design_key(cfg, target), json.dumps(cfg.to_dict(), sort_keys=True),
                          target)


def _config(config):
    from ..hw.config import VTAConfig, load_config
    return config if isinstance(config, VTAConfig) else load_config(config)


def report_path(config, target: str) -> Path:
    """The cache file of ``config`` on ``target`` (whether it exists or not)."""
    from ..sim.rtl_build import cache_root
    cfg = _config(config)
    text = json.dumps(cfg.to_dict(), sort_keys=True)
    key = hashlib.sha256(f"{target}\n{text}".encode()).hexdigest()[:16]
    return cache_root() / "fmax" / f"{target}-{cfg.name}-{key}.json"


def store_report(config, report) -> Path:
    """Cache a placed-and-routed :class:`~vtakit.boards.report.SynthReport` of ``config``
    (its ``target``); a report without Fmax (not placed and routed) is refused."""
    from ..runtime.image import write_atomic
    if report.fmax_mhz is None:
        raise InputError(f"the report of {report.design} on {report.target} has no Fmax (not "
                         "placed and routed); only a nextpnr report gives a clock")
    cfg = _config(config)
    path = report_path(cfg, report.target)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"config": cfg.to_dict(), "target": report.target,
            "design": design_digest(cfg, report.target), "rtl": rtl_digest(),
            "report": report.to_dict()}
    write_atomic(path, lambda f: f.write((json.dumps(data, indent=1, sort_keys=True)
                                          + "\n").encode()))
    return path


def cached_report(config, target: str, *, stale_ok: bool = False):
    """The cached report of ``config`` on ``target``, or None when there is none.

    A report is current when its design (:func:`design_digest`) is the one the running
    ``hw/`` sources elaborate to; a report written before reports recorded their design
    (only the ``hw/`` sources' hash, ``rtl``) is current while those sources are.

    Raises
    ------
    StaleReport
        The report was made from another design (unless ``stale_ok``).
    """
    from ..boards.report import SynthReport
    cfg = _config(config)
    path = report_path(cfg, target)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if not stale_ok:
        if "design" in data:
            was, now, what = data["design"], design_digest(cfg, target), "RTLIL"
        else:
            was, now, what = data.get("rtl"), rtl_digest(), "hw/ sources"
        if was != now:
            raise StaleReport(
                f"{path}: the cached {target} report of {cfg.name} was made from another "
                f"design ({what} {was}, now {now}: the RTL changed); run `vtakit synth "
                f"--config {_config_arg(cfg)} --target {target}` to refresh it, or give the "
                "clock with --fmax MHZ")
    return SynthReport.from_dict(data["report"])


def _config_arg(cfg) -> str:
    """What to pass to ``vtakit synth --config``: the preset's name when ``cfg`` is one,
    else a JSON file of it."""
    from importlib import resources
    from ..hw.config import load_config
    for entry in sorted(resources.files("vtakit.hw").joinpath("presets").iterdir(),
                        key=lambda e: e.name):
        name = entry.name.removesuffix(".json")
        if entry.name.endswith(".json") and load_config(name) == cfg:
            return name
    return "FILE.json"


def fmax_mhz(config, target: str | None = None, fmax: float | None = None) -> tuple:
    """``(Fmax MHz, where it came from)``: ``fmax`` when given, else the cached report of
    ``config`` on ``target``; ``(None, "")`` with neither."""
    if fmax is not None:
        if fmax <= 0:
            raise InputError(f"--fmax {fmax:g}: a clock must be > 0 MHz")
        return float(fmax), "--fmax"
    if target is None:
        return None, ""
    cfg = _config(config)
    report = cached_report(cfg, target)
    if report is None:
        raise InputError(f"no cached {target} synthesis report of config {cfg.name}; run "
                         f"`vtakit synth --config {_config_arg(cfg)} --target {target}` once "
                         f"(it is cached in {report_path(cfg, target).parent}), or give the "
                         "clock with --fmax MHZ")
    return float(report.fmax_mhz), f"vtakit synth {target} (nextpnr)"


def synth_fmax(config, target: str, **kwargs):
    """The cached report of ``config`` on ``target``, placed and routed now (and cached)
    when missing or stale. Returns ``(report, seconds spent synthesizing)``."""
    import fcntl
    import time
    from ..boards.synth import synth_config
    cfg = _config(config)
    path = report_path(cfg, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # one synthesis per key at a time
        try:
            report = cached_report(cfg, target)
        except StaleReport:
            report = None
        if report is not None:
            return report, 0.0
        t = time.perf_counter()
        report = synth_config(cfg, target, suggest=False, **kwargs)
        if report.fmax_mhz is not None:
            store_report(cfg, report)
        return report, time.perf_counter() - t
