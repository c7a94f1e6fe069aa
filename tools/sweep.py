"""Design-space sweeps on Dask: ``vtakit sweep`` and ``vtakit.sweep(...)``.

Every (config, model) point (:func:`~.grid.make_points`) is one Dask task
(:func:`~.point.run_point`, submitted with ``retries``), run on a ``LocalCluster`` of
one-thread worker processes or on an existing cluster (:func:`~.cluster.open_client`).
Results arrive in any order; the table is written in the points' order (config label,
then model label), so 1 and N workers give the same table except the ``wall_*``
timing columns. A point that fails is a row with its error; the sweep goes on.

Outputs of ``output="s.parquet"``: ``s.parquet`` and ``s.csv`` (one row per point,
columns :data:`~.point.COLUMNS`), ``s.layers.parquet`` (one row per layer call of each
successful point, :data:`~.point.LAYER_COLUMNS`). While the sweep runs, finished points
are appended to ``s.parquet.partial.jsonl``; running the same sweep again with the same
output keeps the rows of successful points (from the table and that journal) and runs
only the others (failed points are retried).

Latency columns (:mod:`~.latency`): ``fmax_mhz`` is the place-and-route Fmax of the
point's config on the ``synth`` target (nextpnr: ECP5, iCE40) or the ``fmax`` given;
``vta_us`` = ``cycles`` / ``fmax_mhz``; ``host_us`` the point's host steps (simulating
engines only); ``latency_us`` = ``vta_us`` + ``host_us``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .grid import make_points
from .point import COLUMNS, LAYER_COLUMNS, error_row, run_point
from ..hw.errors import InputError

__all__ = ["sweep", "SweepResult", "to_arrow", "output_paths", "add_latency"]


@dataclass
class SweepResult:
    """What :func:`sweep` produced: the tables (``pyarrow.Table``), the grid combinations
    skipped with the config loader's error, how many points ran now (the rest were
    already done), and the files written."""

    table: object
    layers: object
    skipped: list = field(default_factory=list)
    ran: int = 0
    paths: dict = field(default_factory=dict)

    @property
    def rows(self) -> list[dict]:
        return self.table.to_pylist()

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.rows if r["status"] != "ok"]


def _schema(columns: dict):
    import pyarrow as pa
    types = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(),
             "bool": pa.bool_()}
    return pa.schema([(name, types[t]) for name, t in columns.items()])


def to_arrow(rows, columns=COLUMNS):
    """Rows (dicts) as a ``pyarrow.Table`` with the fixed schema of ``columns``."""
    import pyarrow as pa
    return pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows],
                                schema=_schema(columns))


def output_paths(output) -> dict:
    """The files of a sweep written to ``output`` (a ``.parquet`` path)."""
    out = Path(output)
    if out.suffix != ".parquet":
        raise InputError(f"{out}: the sweep output is a .parquet file (the CSV and the "
                         "per-layer table are written next to it)")
    stem = out.with_suffix("")
    return {"parquet": out, "csv": stem.with_suffix(".csv"),
            "layers": Path(f"{stem}.layers.parquet"), "journal": Path(f"{out}.partial.jsonl")}


def _done(paths: dict, points) -> dict:
    """Point key -> (row, layer rows) of the successful points already in ``paths``."""
    import pyarrow.parquet as pq
    wanted = {p.key: p for p in points}
    found = []
    if paths["parquet"].exists():
        layers = {}
        if paths["layers"].exists():
            for r in pq.read_table(paths["layers"]).to_pylist():
                layers.setdefault((r["config"], r["model"], r["engine"]), []).append(r)
        for row in pq.read_table(paths["parquet"]).to_pylist():
            found.append((row, layers.get((row["config"], row["model"], row["engine"]), [])))
    if paths["journal"].exists():
        for line in paths["journal"].read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:        # a line cut short by an interruption
                continue
            found.append((entry["row"], entry["layers"]))
    done = {}
    for row, layers in found:
        key = (row["config"], row["config_json"], row["model"], row["model_path"],
               row["engine"], row["synth"] or "", row.get("host") or "measured")
        if key in wanted and row["status"] == "ok":
            done[key] = (row, layers)
    return done


def _progress(total: int, progress, log):
    """A callable ``step(row)``: a tqdm bar on a terminal, else one plain line per point."""
    tty = sys.stderr.isatty() if progress is None else bool(progress)
    if tty and total:
        from tqdm import tqdm
        bar = tqdm(total=total, desc="sweep", unit="pt", file=sys.stderr)

        def step(row):
            bar.update(1)
            bar.set_postfix_str(f"{row['config']} x {row['model']}: {row['status']}")
        return step, bar.close
    count = [0]

    def line(row):
        count[0] += 1
        what = (f"{row['cycles']:,} cycles" if row["status"] == "ok" else row["error"])
        log(f"[{count[0]}/{total}] {row['config']} x {row['model']} ({row['engine']}): "
            f"{row['status']}, {what}")
    return line, lambda: None


def _run(points, client, *, synth, retries, task, step, journal):
    """Run the points on ``client``; returns key -> (row, layers)."""
    from distributed import as_completed
    futures = {client.submit(task, p, retries=retries, pure=False): p for p in points}
    synth_futures = {}
    if synth:
        from .resources import synth_resources
        for cj in sorted({p.config_json for p in points}):
            synth_futures[cj] = client.submit(synth_resources, cj, synth, retries=retries,
                                              pure=False)
    results = {}
    synth_results = {}
    for fut in as_completed(list(futures)):
        p = futures.pop(fut)
        try:
            row, layers = fut.result()
        except Exception as e:  # noqa: BLE001 - e.g. KilledWorker after the retries
            row, layers = error_row(p, e), []
        if synth and row["status"] == "ok":
            cj = p.config_json
            if cj not in synth_results:
                try:
                    synth_results[cj] = synth_futures[cj].result()
                except Exception as e:  # noqa: BLE001
                    synth_results[cj] = e
            res = synth_results[cj]
            if isinstance(res, Exception):
                row = {**error_row(p, res), "error": f"synth {synth}: {error_row(p, res)['error']}"}
                layers = []
            else:
                row.update(res)
        results[p.key] = (row, layers)
        if journal is not None:
            with open(journal, "a") as f:
                f.write(json.dumps({"row": row, "layers": layers}) + "\n")
        step(row)
    return results


def add_latency(row: dict, fmax: float | None = None) -> dict:
    """Fill ``row``'s ``fmax_mhz`` (``fmax`` when given, else the one its synthesis
    found), ``vta_us`` and ``latency_us`` (None where a figure is missing)."""
    if row.get("status") != "ok":
        return row
    if fmax is not None:
        row.update(fmax_mhz=float(fmax), fmax_source="--fmax")
    f = row.get("fmax_mhz")
    row["vta_us"] = row["cycles"] / f if f and row["cycles"] is not None else None
    row["latency_us"] = (row["vta_us"] + row["host_us"]
                         if row["vta_us"] is not None and row.get("host_us") is not None
                         else None)
    return row


def sweep(configs=("default",), models=None, *, grid=None, engine: str = "model",
          synth: str | None = None, fmax: float | None = None, host: str = "measured",
          calibrate=None, workers: int | None = None,
          scheduler: str | None = None, client=None, output=None, plot=None,
          retries: int = 2, progress=None, log=print, task=run_point) -> SweepResult:
    """Sweep configs x models on Dask; see the module docstring.

    Parameters
    ----------
    configs : list
        Preset names, ``vta_config.json`` paths or VTAConfigs (the bases of the grid).
    models : list of str, optional
        ``.tflite``/``.onnx`` paths; default ``["demo"]``, the shipped digits CNN
        calibrated as ``vtakit demo`` does.
    grid : list of "KEY=v1,v2" or dict, optional
        Config keys to vary over every base config; illegal combinations are skipped
        (``SweepResult.skipped``).
    engine : str
        ``model`` (event model, no simulation), ``behavioral``, ``verilator``, ``cxxrtl``.
    synth : str, optional
        FPGA target (e.g. ``ecp5-85k``, ``xilinx-7``) whose counts fill
        ``lut/ff/dsp/bram`` and, where nextpnr places and routes it (ECP5, iCE40),
        ``fmax_mhz`` (one synthesis per config, cached on disk: :mod:`~.resources`).
    fmax : float, optional
        VTA's clock in MHz for every point (overrides the synthesized Fmax).
    host : str
        Host time of the simulating engines: ``measured`` on the worker, or a host cost
        table (``cortex-a9`` or a JSON file, :func:`~.latency.load_host`).
    calibrate : path, optional
        ``.npy`` samples quantizing the float models (not the demo model).
    workers, scheduler, client :
        A LocalCluster of ``workers`` processes (default: one per core), or the cluster at
        ``scheduler`` (``tcp://HOST:PORT``), or an open ``dask.distributed.Client``.
    output : path, optional
        ``.parquet`` file (and the CSV and per-layer table next to it); resumable.
    plot : path, optional
        A PNG of the Pareto sets (:func:`vtakit.tools.pareto.plot_pareto`).
    retries : int
        Dask retries of a point whose task raises or whose worker dies.
    progress : bool, optional
        A tqdm bar (default: when stderr is a terminal; else one line per point via ``log``).
    task : callable
        The function run per point (tests wrap :func:`~.point.run_point`).

    Returns
    -------
    SweepResult
    """
    from .cluster import open_client
    from .latency import fmax_mhz, load_host
    log = log or (lambda *_: None)
    load_host(host)                         # a bad table fails before any work
    fmax_mhz(None, None, fmax)              # a bad clock too
    if host.endswith(".json"):
        host = str(Path(host).resolve())    # the workers read it
    points, skipped = make_points(list(configs), models, grid=grid, engine=engine,
                                  calibrate=calibrate, synth=synth, host=host)
    for label, err in skipped:
        log(f"skipped {err}" if err.startswith(label) else f"skipped {label}: {err}")
    if not points:
        raise InputError("the sweep has no points: every config combination was rejected "
                         "(see the skipped lines)")
    paths = output_paths(output) if output is not None else {}
    done = _done(paths, points) if paths else {}
    todo = [p for p in points if p.key not in done]
    if done:
        log(f"resuming {paths['parquet']}: {len(done)} point(s) done, {len(todo)} to run")
    results = dict(done)
    if todo:
        step, close = _progress(len(todo), progress, log)
        try:
            with open_client(workers, scheduler, client) as c:
                results.update(_run(todo, c, synth=synth, retries=retries, task=task, step=step,
                                    journal=paths.get("journal")))
        finally:
            close()
    rows = [add_latency(dict(results[p.key][0]), fmax) for p in points]
    layer_rows = [r for p in points for r in results[p.key][1]]
    result = SweepResult(to_arrow(rows), to_arrow(layer_rows, LAYER_COLUMNS), skipped,
                         len(todo))
    if paths:
        _write(result, paths)
    if plot is not None:
        from .pareto import plot_pareto
        result.paths["plot"] = plot_pareto(result.table, plot)
    return result


def _write(result: SweepResult, paths: dict) -> None:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq
    from ..runtime.image import write_atomic
    paths["parquet"].parent.mkdir(parents=True, exist_ok=True)
    write_atomic(paths["parquet"], lambda f: pq.write_table(result.table, f))
    write_atomic(paths["layers"], lambda f: pq.write_table(result.layers, f))
    write_atomic(paths["csv"], lambda f: pcsv.write_csv(result.table, f))
    paths["journal"].unlink(missing_ok=True)
    result.paths.update({k: v for k, v in paths.items() if k != "journal"})
