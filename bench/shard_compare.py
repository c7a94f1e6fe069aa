"""Sharded RTL check of ResNet-18: ``vtakit compare --workers N`` against the serial compare.

Builds ResNet-18 as bench/costmodel.py (random weights, calibrated), then checks it
behavioral vs an RTL backend three ways, timing each (wall seconds, cluster start-up
excluded): the serial layer-by-layer compare (:func:`vtakit.runtime.layer_compare.compare_layers`)
and the sharded one (:func:`vtakit.tools.shard.compare_sharded`) on a LocalCluster of
1 and of 2 worker processes. All must agree that every layer is equal.

Usage::

    python bench/shard_compare.py [--backend verilator] [--size 224] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import time

from costmodel import resnet18_model

from vtakit.compiler.build_model import compile_model
from vtakit.runtime.layer_compare import compare_layers
from vtakit.tools.cluster import open_client
from vtakit.tools.shard import compare_sharded


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="verilator")
    ap.add_argument("--config", default="default")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args(argv)
    mod, x = resnet18_model(args.size)
    exe = compile_model(mod, args.config)
    backends = ["behavioral", args.backend]
    t = time.perf_counter()
    serial = compare_layers(exe, x, backends)
    rows = [("serial compare_layers", time.perf_counter() - t, serial.equal)]
    for n in [int(w) for w in args.workers.split(",")]:
        with open_client(workers=n) as client:
            client.submit(sum, [1]).result()         # workers up
            t = time.perf_counter()
            sharded = compare_sharded(exe, x, backends, client=client, progress=False)
            rows.append((f"sharded, {n} worker(s)", time.perf_counter() - t, sharded.equal))
            kernels = len(sharded.checks)
            rtl_cycles = sum(k.cycles[args.backend] for k in sharded.checks)
            reference = sharded.wall["reference"]
    print(f"ResNet-18 at {args.size}, {args.config}, behavioral vs {args.backend}: "
          f"{kernels} kernels, {rtl_cycles:,} cycles; reference run with image snapshots "
          f"{reference:.1f} s")
    print("| run | wall | all layers equal |\n|---|---|---|")
    for name, wall, equal in rows:
        print(f"| {name} | {wall:.1f} s | {equal} |")


if __name__ == "__main__":
    main()
