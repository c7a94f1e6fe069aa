"""Loading a saved ResNet-18 executable against compiling it.

Builds ResNet-18 as ``bench/resnet18.py`` does (random weights, calibrated to int8 on
random images), compiles it (timed), saves the ``.vtax``, then loads it back (timed:
reading and verifying the file, and resolving its primitives as a VM does: parsing the
kernel Programs, decoding the host steps). A ``.vtax`` holds its weights packed and its
host steps as data, so loading plans nothing. With ``--run`` it also runs one image on
the behavioral model from the loaded file and from the compiled executable and checks
they agree bit for bit.

Usage::

    python bench/vtax_load.py [--config default] [--size 224] [--run] [--json F]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

import vtakit
from vtakit.compiler.build_model import compile_model
from vtakit.compiler.nn import resnet18
from vtakit.compiler.quant.calibrate import calibrate
from vtakit.hw.config import load_config


def _best(f, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


def measure(config="default", size=224, calibration=2, run=False, repeat=3):
    cfg = load_config(config)
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)
              for _ in range(calibration + 1)]
    q = calibrate(resnet18(image_shape=(3, size, size)), images[:calibration])
    compile_s, exe = _best(lambda: compile_model(q, cfg), 1)
    with tempfile.TemporaryDirectory() as d:
        path = exe.save(Path(d) / "resnet18.vtax")
        size_bytes = Path(path).stat().st_size
        read_s, loaded = _best(lambda: vtakit.load(path), repeat)

        def open_vm():
            back = vtakit.load(path)
            with back.vm("behavioral") as vm:
                assert len(vm.packed_names) == len(back.primitives)   # resolved on open
            return back
        load_s, _ = _best(open_vm, repeat)
    out = {"config": cfg.name, "image": size, "compile_s": compile_s, "vtax_bytes": size_bytes,
           "read_s": read_s, "load_s": load_s, "load_over_compile": load_s / compile_s,
           "vta_layers": sum(p.kind == "vta_layer" for p in exe.primitives),
           "constants_bytes": sum(c.nbytes for c in exe.constants)}
    if run:
        x = images[-1].astype(np.float32)
        t = time.perf_counter()
        y = np.asarray(loaded.run(x))
        out["loaded_run_s"] = time.perf_counter() - t
        out["loaded_equals_compiled"] = bool(np.array_equal(y, np.asarray(exe.run(x))))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="default")
    ap.add_argument("--size", type=int, default=224, help="image height and width")
    ap.add_argument("--run", action="store_true", help="also run one image from the file")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    r = measure(args.config, args.size, run=args.run)
    print(f"ResNet-18 {r['image']}x{r['image']} for {r['config']}: {r['vta_layers']} VTA layers")
    print(f"  compile      {r['compile_s']:8.2f} s")
    print(f"  .vtax        {r['vtax_bytes'] / 1e6:8.2f} MB "
          f"(constants {r['constants_bytes'] / 1e6:.2f} MB)")
    print(f"  read         {r['read_s']:8.3f} s   (vtakit.load: sections, checks, decoding)")
    print(f"  load         {r['load_s']:8.3f} s   (read + primitives resolved as a VM opens)")
    print(f"  load/compile {r['load_over_compile']:8.1%}")
    if args.run:
        print(f"  run from file {r['loaded_run_s']:.2f} s, equal to the compiled executable: "
              f"{r['loaded_equals_compiled']}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2) + "\n")
    return 0 if r["load_over_compile"] < 0.1 and r.get("loaded_equals_compiled", True) else 1


if __name__ == "__main__":
    raise SystemExit(main())
