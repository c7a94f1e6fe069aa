"""VM dispatch overhead on a small int8 CNN whose convolutions run on VTA.

The model: four quantized conv layers (conv2d int8 -> int32, VTA rounding shift,
clip, cast int8), each a fused primitive function, plus a host max-pool. A
lowerer defined here claims the conv primitives: each becomes the operator
library's plan as a kernel-table Program plus its packed weight in the constant
pool, and a primitive factory (kind ``bench_vta_conv2d``) binds the Program to
device buffers at run time (``Runtime.bind``) on the chosen backend; the pool
stays a numpy host primitive. The model is compiled, saved, loaded and run.

Reported per run (the median of ``--repeat`` runs):

* ``total``: wall time of ``VirtualMachine.invoke``;
* ``packed``: time inside packed functions (kernels and host operators);
* ``device``: time inside the device's ``run`` (the behavioral model);
* ``dispatch`` = total - packed: the VM's own work (instruction dispatch,
  allocation of tensors, frames); its ratio to ``device`` must stay under 5 %.

Usage::

    python bench/vm_overhead.py [--backend behavioral] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vtakit.compiler import nn

from vtakit.compiler.ops import plan_conv2d
from vtakit.compiler.ops.layout import pack_activation, unpack_activation
from vtakit.hw import VTAConfig
from vtakit.compiler.codegen import LoweredPrimitive, compile_vm
from vtakit.compiler.ir import Call, Function, IRModule, Var, evaluate
from vtakit.runtime import Executable, get_global_func, register_func

KIND = "bench_vta_conv2d"
SHIFT = 8
CONFIG = VTAConfig.preset("default")
KERNELS: list = []


def qconv(x_type, w, stride, padding):
    """A fused primitive: cast(clip((conv(x, w) + 2^(s-1)) >> s, 0, 127), int8)."""
    p = Var("p", x_type)
    acc = nn.conv2d(p, nn.const(w), strides=(stride, stride), padding=padding, out_dtype="int32")
    y = nn.right_shift(nn.add(acc, nn.const(np.int32(1 << (SHIFT - 1)))),
                       nn.const(np.int32(SHIFT)))
    y = nn.cast(nn.clip(y, 0, 127), "int8")
    return Function([p], y, attrs={"Primitive": 1, "vta": {"stride": stride, "padding": padding}})


def small_cnn():
    rng = np.random.default_rng(0)
    shapes = [(32, 16, 1), (32, 32, 1), (32, 32, 2), (64, 32, 1)]
    x = nn.var("x", (1, 16, 16, 16), "int8")
    y, ty = x, x.type_annotation
    from vtakit.compiler.ir import infer_expr_type
    for i, (o, c, stride) in enumerate(shapes):
        w = rng.integers(-8, 8, (o, c, 3, 3), dtype=np.int8)
        f = qconv(ty, w, stride, 1)
        y = Call(f, [y])
        ty = infer_expr_type(y)
        if i == 1:
            p = Var("p", ty)
            y = Call(Function([p], nn.max_pool2d(p, pool_size=(2, 2), strides=(2, 2)),
                              attrs={"Primitive": 1}), [y])
            ty = infer_expr_type(y)
    return IRModule({"main": Function([x], y)})


def lowerer(func):
    """Claim the quantized conv primitives (marked by qconv) for VTA: the operator
    library's plan becomes a kernel-table Program, the packed weight a constant."""
    info = func.attrs.get("vta")
    if info is None:
        return None
    conv = func.body.args[0].args[0].args[0].args[0]    # cast(clip(rshift(add(conv))))
    x_shape, w = func.params[0].type_annotation.shape, conv.args[1].data
    plan = plan_conv2d(CONFIG, x_shape, w.shape, info["stride"], info["padding"], shift=SHIFT,
                       clip=(0, 127))
    packed_w = plan.pack(np.zeros(x_shape, np.int8), w)["weight"]
    name = f"conv2d_{len(KERNELS)}"
    KERNELS.append(name)
    operands = {n: [list(op.shape), op.dtype.name] for n, op in plan.operands.items()}
    return LoweredPrimitive(KIND, {"kernel": name, "operands": operands,
                                   "out_channels": int(w.shape[0])},
                            kernels=[(name, plan.program().to_bytes())], constants=[packed_w])


def factory(entry, ctx):
    """Load time: a packed function that binds the kernel's Program to device buffers."""
    meta = entry.meta_dict
    weight = ctx.constants[meta["constants"][0]]
    state = {}

    def buffers():
        if not state:                 # first call: allocate operands, upload the weight once
            rt = ctx.runtime
            for n, (shape, dtype) in meta["operands"].items():
                state[n] = rt.alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize)
            rt.upload(state["weight"], weight)
            ctx.on_close(lambda: [rt.free(b) for b in state.values()])
        return state

    def run(x, out):
        rt, bufs = ctx.runtime, buffers()
        rt.upload(bufs["data"], pack_activation(x, ctx.config))
        rt.bind(ctx.program(meta["kernel"]), bufs)
        rt.synchronize()
        shape, dtype = meta["operands"]["out"]
        packed = rt.download(bufs["out"], dtype, tuple(shape))
        out[...] = unpack_activation(packed[0], ctx.config, x.shape[0], meta["out_channels"])
    return run


def measure(exe, x, backend, repeat):
    vm = exe.vm(backend)
    packed_time = [0.0]

    def timed(f):
        def call(*args):
            t = time.perf_counter()
            f(*args)
            packed_time[0] += time.perf_counter() - t
        return call

    vm._packed = [timed(f) for f in vm._packed]
    rows = []
    try:
        vm.invoke("main", x)                  # warm-up: device start, tiling searches
        dev = vm.context.device
        run = dev.run
        dev_time = [0.0]

        def dev_run(*a, **k):
            t = time.perf_counter()
            try:
                return run(*a, **k)
            finally:
                dev_time[0] += time.perf_counter() - t
        dev.run = dev_run
        for _ in range(repeat):
            packed_time[0] = dev_time[0] = 0.0
            t = time.perf_counter()
            out = vm.invoke("main", x)
            total = time.perf_counter() - t
            rows.append({"total": total, "packed": packed_time[0], "device": dev_time[0],
                         "dispatch": total - packed_time[0]})
    finally:
        vm.close()
    return rows, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="behavioral")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = ap.parse_args(argv)
    if get_global_func("vtakit.vm.primitive." + KIND, allow_missing=True) is None:
        register_func("vtakit.vm.primitive." + KIND, factory)

    mod = small_cnn()
    KERNELS.clear()
    exe = compile_vm(mod, lowerer=lowerer, config=CONFIG)
    with tempfile.TemporaryDirectory() as tmp:
        exe = Executable.load(exe.save(Path(tmp) / "cnn.vtax"))
    x = np.random.default_rng(1).integers(-128, 128, (1, 16, 16, 16), dtype=np.int8)
    rows, out = measure(exe, x, args.backend, args.repeat)
    want = evaluate(mod, x)
    exact = bool(np.array_equal(out, want))
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    n_instr = sum(len(f.code) for f in exe.functions)
    ratio = med["dispatch"] / med["device"] if med["device"] else float("inf")
    print(f"small int8 CNN ({len(exe.primitives)} primitives, {n_instr} instructions, "
          f"peak planned host memory {exe.peak_host_bytes} B), backend {args.backend}, "
          f"median of {args.repeat}")
    print(f"{'total':>10} {'packed':>10} {'device':>10} {'dispatch':>10} {'dispatch/device':>16}")
    print(f"{med['total'] * 1e3:9.2f}ms {med['packed'] * 1e3:9.2f}ms {med['device'] * 1e3:9.2f}ms "
          f"{med['dispatch'] * 1e6:8.1f}us {ratio * 100:15.3f}%")
    print(f"result bit-exact with the reference interpreter: {exact}")
    result = {"backend": args.backend, "repeat": args.repeat, "median_s": med, "runs": rows,
              "dispatch_over_device": ratio, "exact": exact, "instructions": n_instr,
              "primitives": len(exe.primitives), "peak_host_bytes": exe.peak_host_bytes}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if exact and ratio < 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
