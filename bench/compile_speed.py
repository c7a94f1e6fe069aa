"""Compile speed: ResNet-18 (builder, random weights) through the default pipeline.

Prints one row per pass (wall time) and the totals; ``--json FILE`` writes them.
The pipeline is ``default_pipeline()`` (opt_level 3: SimplifyInference,
FoldConstant, FoldScaleAxis, CSE, DCE, FuseOps) then ``vm_pipeline()``.

    python bench/compile_speed.py [--image 224] [--check] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from vtakit.compiler import nn
from vtakit.compiler.ir import Function, astext, evaluate, post_order
from vtakit.compiler.passes import (PassContext, PassTimingInstrument, default_pipeline,
                                    vm_pipeline)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224, help="input height and width")
    ap.add_argument("--opt-level", type=int, default=3)
    ap.add_argument("--check", action="store_true",
                    help="also run the interpreter before and after (slow at 224)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    mod = nn.resnet18(image_shape=(3, args.image, args.image))
    build_s = time.perf_counter() - t0

    timing = PassTimingInstrument()
    t0 = time.perf_counter()
    with PassContext(opt_level=args.opt_level, instruments=[timing]):
        fused = default_pipeline()(mod)
        lowered = vm_pipeline()(fused)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    text = astext(lowered, show_meta_data=False)
    print_s = time.perf_counter() - t0
    prims = sum(1 for n in post_order(lowered["main"]) if type(n) is Function
                and n.is_primitive())

    print(f"ResNet-18, 1x3x{args.image}x{args.image}, opt_level {args.opt_level}")
    print(timing.render())
    print(f"{'build (random weights)':<24} {build_s * 1e3:9.1f} ms")
    print(f"{'compile (all passes)':<24} {compile_s * 1e3:9.1f} ms")
    print(f"{'print (no metadata)':<24} {print_s * 1e3:9.1f} ms")
    print(f"primitive functions: {prims}, text lines: {text.count(chr(10))}")
    result = {"image": args.image, "opt_level": args.opt_level, "build_s": build_s,
              "compile_s": compile_s, "print_s": print_s, "primitive_functions": prims,
              "passes": [{"name": n, "seconds": t} for n, t in timing.timings]}
    if args.check:
        x = np.random.default_rng(0).normal(size=(1, 3, args.image, args.image))
        x = x.astype(np.float32)
        err = float(np.abs(evaluate(lowered, x) - evaluate(mod, x)).max())
        print(f"max |compiled - reference| = {err:.3g}")
        result["max_abs_error"] = err
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
