"""Throughput of the behavioral model on GEMM workloads, next to numpy.

Usage: ``python bench/behavioral.py [--repeat N] [--json FILE]``

For each workload the runtime builds the tiled, double-buffered GEMM program of
``vtakit.testing.programs`` (int8 x int8 + int32 bias, shift, clip, int8 store) on the
default config (``build s``: the runtime building and finalizing the stream);
the model's ``run`` of the finalized stream is timed (best of ``--repeat``), and
its output is checked against numpy. The comparison is
numpy's int32 matmul of the same shapes in the same process (best of
``--repeat``). The figure is the ratio model time / numpy time.

Workloads: the tiled 128 x 128 x 128 GEMM, and a GEMM of the arithmetic size of
ResNet-18's C2 layer as im2col (M = 56*56 = 3136, K = 3*3*64 = 576, N = 64).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from vtakit.runtime import Runtime
from vtakit.sim import open_device
from vtakit.testing.programs import (Check, build_gemm_program, gemm_reference, pack_acc,
                                     requant_ops, verify)

WORKLOADS = {"gemm_tiled_128": (128, 128, 128), "resnet18_c2_im2col": (3136, 576, 64)}


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(name: str, shape, repeat: int, preset: str = "default") -> dict:
    m, k, n = shape
    dev = open_device("behavioral", preset)
    rt = Runtime(dev)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
    w = rng.integers(-128, 128, size=(n, k), dtype=np.int8)
    bias = rng.integers(-(1 << 16), 1 << 16, size=(m, n), dtype=np.int32)
    ops = requant_ops(k)
    t0 = time.perf_counter()
    out = build_gemm_program(rt, a, w, bias, ops, vthreads=2)
    image = rt.finalize()
    build_s = time.perf_counter() - t0
    model_s = best_of(lambda: dev.run(image.insn_addr, image.insn_count), repeat)
    expected = pack_acc(dev.config, gemm_reference(a, w, bias, ops))
    verify(rt, [Check("out", out, expected)])     # the timed runs computed the right result
    rt.reset()

    a32, wt32 = a.astype(np.int32), np.ascontiguousarray(w.T.astype(np.int32))
    numpy_s = best_of(lambda: a32 @ wt32, repeat)
    macs = m * k * n
    return dict(workload=name, config=dev.config.name, m=m, k=k, n=n, macs=macs,
                insn_count=image.insn_count, build_s=build_s, model_s=model_s,
                numpy_s=numpy_s, model_macs_per_s=macs / model_s,
                numpy_macs_per_s=macs / numpy_s, ratio=model_s / numpy_s)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="behavioral-model GEMM throughput vs numpy")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per measurement")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    rows = [measure(name, shape, args.repeat) for name, shape in WORKLOADS.items()]
    head = (f"{'workload':<20} {'M x K x N':>16} {'insns':>6} {'build s':>8} {'model s':>8} "
            f"{'model GMAC/s':>12} {'numpy s':>8} {'numpy GMAC/s':>12} {'model/numpy':>11}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['workload']:<20} {r['m']:>5}x{r['k']:>4}x{r['n']:>4} {r['insn_count']:>6} "
              f"{r['build_s']:>8.4f} {r['model_s']:>8.4f} {r['model_macs_per_s'] / 1e9:>12.3f} "
              f"{r['numpy_s']:>8.4f} {r['numpy_macs_per_s'] / 1e9:>12.3f} {r['ratio']:>10.2f}x")
    if args.json:
        meta = dict(python=platform.python_version(), numpy=np.__version__,
                    machine=platform.machine(), repeat=args.repeat)
        Path(args.json).write_text(json.dumps(dict(meta=meta, results=rows), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
