"""Speed of one ``--engine model`` sweep point: ResNet-18 (224x224, calibrated on two
random images) compiled for a config, then its layers predicted by the event model.

A point is what :func:`vtakit.tools.point.run_point` times: ``compile_model`` (the
``wall_compile_s`` column) then :func:`~vtakit.tools.point.predict_layers`
(``wall_run_s``). The first point of the process is cold (imports and every cache
empty); each repeat first empties the caches of tiling searches (and the event model's
re-rankings of int32 layers' tilings) and emitted programs, so it costs what a point
whose layers the worker never saw costs (a new config, say). ``--warm-searches`` keeps
the tiling searches of the earlier points (the protocol of the issue's first figures:
only the emitted programs are forgotten).
Prints one row per point (wall seconds, and the process's CPU seconds, which another
job on a shared machine disturbs less) and the minimum and median over the repeats;
``--json FILE`` writes them.

    python bench/point_speed.py [--config default] [--repeat 5] [--warm-searches] [--json F]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time

import numpy as np

from vtakit.compiler.build_model import compile_model
from vtakit.compiler.nn import resnet18
from vtakit.compiler.ops import plan as plan_module, tiling
from vtakit.compiler.quant.calibrate import calibrate
from vtakit.hw.config import load_config
from vtakit.tools.point import predict_layers


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="default")
    ap.add_argument("--image", type=int, default=224, help="input height and width")
    ap.add_argument("--repeat", type=int, default=5, help="points after the cold one")
    ap.add_argument("--warm-searches", action="store_true",
                    help="repeats keep the tiling searches of earlier points")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = ap.parse_args(argv)

    cfg = load_config(args.config)
    rng = np.random.default_rng(0)
    shape = (3, args.image, args.image)
    images = [rng.uniform(-1, 1, (1, *shape)).astype(np.float32) for _ in range(2)]
    mod = calibrate(resnet18(image_shape=shape), images)
    # older checkouts have no program cache: the bench runs on them too (before/after)
    clear_programs = getattr(plan_module, "clear_program_cache", lambda: None)
    reranked = getattr(importlib.import_module("vtakit.compiler.ops.conv2d"), "_RERANKED", {})
    points = []
    for k in range(args.repeat + 1):
        clear_programs()
        if not args.warm_searches:
            tiling._search_tiles.cache_clear()
            reranked.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        exe = compile_model(mod, cfg, report=[])
        t1 = time.perf_counter()
        rows = predict_layers(exe)
        t2, c2 = time.perf_counter(), time.process_time()
        points.append({"compile_s": t1 - t0, "predict_s": t2 - t1, "total_s": t2 - t0,
                       "cpu_s": c2 - c0, "cycles": sum(r["cycles"] for r in rows)})
        p = points[-1]
        print(f"{'cold' if k == 0 else f'point {k}':<8} compile {p['compile_s']:.3f} s  "
              f"predict {p['predict_s']:.3f} s  total {p['total_s']:.3f} s  "
              f"(cpu {p['cpu_s']:.3f} s)", flush=True)
    warm = points[1:] or points
    for what in ("compile_s", "predict_s", "total_s", "cpu_s"):
        values = [p[what] for p in warm]
        print(f"{what[:-2]:<8} min {min(values):.3f} s  median {statistics.median(values):.3f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "image": args.image,
                       "warm_searches": args.warm_searches, "points": points}, f, indent=2)


if __name__ == "__main__":
    main()
