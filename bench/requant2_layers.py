"""Per-layer event-model cycles of MLPerf Tiny models on two configs (each layer run alone).

Usage: python bench/requant2_layers.py [--models keyword_spotting] [--configs default,default+requant2]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import vtakit
from vtakit.compiler.frontend import from_tflite
from vtakit.testing import model_inputs
from vtakit.tools.profile import profile_model

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mltk"


def layers(name, config):
    path = DATA / f"{name}.tflite"
    exe = vtakit.compile(path, config=config)
    mod = from_tflite(path)
    x = model_inputs(mod["main"].params[0].type_annotation)[0]
    _, rows = profile_model(exe, [x], "behavioral", chain=False)
    return [r for r in rows if r.engine == "VTA"]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="keyword_spotting,image_classification")
    ap.add_argument("--configs", default="default,default+requant2")
    a = ap.parse_args(argv)
    cfgs = a.configs.split(",")
    for m in a.models.split(","):
        cols = [layers(m, c) for c in cfgs]
        print(f"## {m}")
        print("| layer | " + " | ".join(cfgs) + " | roofline (last) | kind | ratio |")
        for rs in zip(*cols):
            r = rs[-1]
            rl = r.roofline
            print(f"| {r.name} | " + " | ".join(f"{x.predicted_cycles:,}" for x in rs)
                  + f" | {rl.cycles if rl else 0:,} | {rl.kind if rl else ''} | "
                  f"{rs[-1].predicted_cycles / rs[0].predicted_cycles:.3f} |")
        print("| total | " + " | ".join(f"{sum(x.predicted_cycles for x in c):,}" for c in cols)
              + " |")


if __name__ == "__main__":
    main()
