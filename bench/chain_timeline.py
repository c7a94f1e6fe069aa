"""Where a model's chained VTA rows spend their cycles: the event model's per-unit
timelines (:func:`vtakit.tools.profile.profile_model`, behavioral, ``.units``).

For each VTA row: predicted cycles, roofline, and each unit's busy / wait cycles by
instruction or token queue; with ``--timeline`` also the compute module's timeline,
consecutive intervals of one kind merged, the spans of at least ``--min`` cycles
(the layer boundaries of a chain show as compute LOAD blocks, the next layer's LOAD
ACC / LOAD UOP, followed by an ``l2g`` wait for its first inputs).

Usage: python bench/chain_timeline.py [--models keyword_spotting] [--config default+requant2]
       [--timeline] [--min 40]
"""
from __future__ import annotations

import argparse
import collections
from pathlib import Path

import vtakit
from vtakit.compiler.frontend import from_tflite
from vtakit.testing import model_inputs
from vtakit.tools.profile import profile_model

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mltk"


def rows_of(name, config):
    path = DATA / f"{name}.tflite"
    exe = vtakit.compile(path, config=config)
    x = model_inputs(from_tflite(path)["main"].params[0].type_annotation)[0]
    _, rows = profile_model(exe, [x], "behavioral")
    return [r for r in rows if r.engine == "VTA"]


def merged(intervals):
    """``[(start, end, kind, what, count)]``: consecutive intervals of one kind joined."""
    out = []
    for i in intervals:
        if out and out[-1][2:4] == [i.kind, i.what] and out[-1][1] == i.start:
            out[-1][1] = i.end
            out[-1][4] += 1
        else:
            out.append([i.start, i.end, i.kind, i.what, 1])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="keyword_spotting")
    ap.add_argument("--config", default="default+requant2")
    ap.add_argument("--timeline", action="store_true")
    ap.add_argument("--min", type=float, default=40)
    a = ap.parse_args(argv)
    for m in a.models.split(","):
        print(f"## {m} ({a.config})")
        for r in rows_of(m, a.config):
            rl = r.roofline.cycles if r.roofline is not None else 0
            print(f"{r.name}: predicted {r.predicted_cycles:,}, roofline {rl:,}, "
                  f"{len(r.layers)} layer(s)")
            for unit in ("load", "compute", "store"):
                busy, wait = collections.Counter(), collections.Counter()
                for i in r.units.get(unit, []):
                    (busy if i.kind == "busy" else wait)[i.what] += i.end - i.start
                print(f"  {unit:8} busy {dict(busy)} wait {dict(wait)}")
            if a.timeline and len(r.layers) > 1:
                for s, e, kind, what, n in merged(r.units["compute"]):
                    if e - s >= a.min:
                        print(f"    {s:8.0f} {e:8.0f} {e - s:6.0f} {kind:4} {what:6} x{n}")


if __name__ == "__main__":
    main()
