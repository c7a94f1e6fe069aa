"""Every operator of vtakit.compiler against its numpy reference, bit for bit.

Parametrized by backend and preset. ``BACKENDS`` lists device specs: a backend
name, optionally ``name:seed`` for the behavioral model's random interleaving
of the load/compute/store modules (a missing dependency token changes the
result under some seed). Adding an RTL backend is one entry here, or set
``VTAKIT_OP_BACKENDS=verilator,cxxrtl`` in the environment (``VTAKIT_OP_PRESETS=tiny,default``
chooses the presets).
"""

import os

import numpy as np
import pytest

from vtakit.compiler.ops import (ConvTiling, add, avg_pool2d, conv2d, dense, global_avg_pool2d,
                                 group_conv2d, max_pool2d, plan_conv2d)
from vtakit.compiler.ops import reference as R
from vtakit.runtime import Runtime
from vtakit.sim import open_device

BACKENDS = ["behavioral", "behavioral:7"] + [
    b for b in os.environ.get("VTAKIT_OP_BACKENDS", "").split(",") if b]
PRESETS = os.environ.get("VTAKIT_OP_PRESETS", "default,4x8").split(",")


def open_runtime(spec: str, preset: str) -> Runtime:
    name, _, seed = spec.partition(":")
    opts = {"interleave_seed": int(seed)} if seed else {}
    return Runtime(open_device(name, preset, **opts))


@pytest.fixture(scope="module", params=[(b, p) for b in BACKENDS for p in PRESETS],
                ids=lambda bp: f"{bp[0]}-{bp[1]}")
def rt(request):
    runtime = open_runtime(*request.param)
    yield runtime
    runtime.device.close()


def i8(rng, shape):
    return rng.integers(-128, 128, shape, dtype=np.int8)


# (N, C, H, W, O, k, stride, pad, options)
CONV_CASES = [
    (1, 16, 8, 8, 16, 3, 1, 1, dict(bias=True, shift=8, clip=(0, 127))),
    (1, 20, 9, 7, 35, 3, 2, 1, dict(bias=True, shift=9, relu=True)),
    (2, 5, 6, 6, 3, 5, 1, 2, dict()),                                   # plain int8 wrap
    (1, 24, 7, 9, 17, 1, 2, 0, dict(residual=np.int8, shift=4, clip=(-128, 127))),
    (3, 7, 5, 5, 9, 3, 2, 0, dict(residual=np.int32, bias=True, shift=6, relu=True)),
    (1, 9, 5, 4, 11, 3, 1, 1, dict(bias=True, out_dtype=np.int32)),
    (2, 33, 6, 5, 18, 3, 1, (0, 1, 2, 0), dict(shift=20, clip=(-50, 50))),  # round via bias tile
    (5, 3, 11, 10, 2, 5, 2, 2, dict(bias=True, shift=10, clip=(-128, 127))),
    (1, 40, 4, 4, 40, 1, 1, 0, dict(bias=True, shift=7, clip=(-128, 127))),
]


def _random_conv_cases(seed, count):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        k = int(rng.choice([1, 3, 5]))
        s = int(rng.choice([1, 2]))
        pad = int(rng.integers(0, min(k, 3)))
        h, w = int(rng.integers(k, 13)), int(rng.integers(k, 13))
        opts = dict(bias=bool(rng.integers(2)), shift=int(rng.integers(0, 12)),
                    clip=(-128, 127) if rng.integers(2) else None)
        cases.append((int(rng.integers(1, 6)), int(rng.integers(1, 45)), h, w,
                      int(rng.integers(1, 45)), k, s, pad, opts))
    return cases


def _conv_check(rt, case, seed, tiling=None):
    n, c, h, w, o, k, s, pad, opts = case
    rng = np.random.default_rng(seed)
    x, wt = i8(rng, (n, c, h, w)), i8(rng, (o, c, k, k))
    acc = R.conv2d_ref(x, wt, s, pad)
    bias = rng.integers(-20000, 20000, o).astype(np.int32) if opts.get("bias") else None
    res_t = opts.get("residual")
    residual = None
    if res_t is not None:
        lim = 128 if res_t == np.int8 else 1 << 20
        residual = rng.integers(-lim, lim, acc.shape).astype(res_t)
    kw = {key: opts[key] for key in ("shift", "clip", "relu", "out_dtype") if key in opts}
    y = conv2d(rt, x, wt, s, pad, bias=bias, residual=residual, tiling=tiling, **kw)
    ref = R.epilogue_ref(acc, bias=bias, residual=residual, **kw)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[:6])))
def test_conv2d_cases(rt, case):
    _conv_check(rt, case, seed=sum(map(hash, map(str, case[:8]))) & 0xFFFF)


@pytest.mark.parametrize("case", _random_conv_cases(11, 8), ids=lambda c: "x".join(map(str, c[:6])))
def test_conv2d_random(rt, case):
    _conv_check(rt, case, seed=case[1] * 100 + case[4])


@pytest.mark.parametrize("tiling", [
    ConvTiling(1, 1, 1, 3, 1, "co_outer", 2),
    ConvTiling(1, 1, 2, 4, 1, "sp_outer", 2),
    ConvTiling(2, 2, 3, 2, 2, "co_outer", 2),
    ConvTiling(1, 2, 1, 7, 2, "sp_outer", 1),
], ids=str)
def test_conv2d_forced_tilings(rt, tiling):
    """Many small tiles: partial edge tiles on every axis, both orders, weight/input
    reuse across groups, reduction split into chunks, one and two buffers."""
    _conv_check(rt, (2, 40, 9, 7, 37, 3, 1, 1, dict(bias=True, shift=8, relu=True)), 3,
                tiling=tiling)


@pytest.mark.parametrize("n, k, o, opts", [
    (1, 100, 10, dict(bias=True, shift=7, clip=(-128, 127))),
    (7, 33, 70, dict(shift=3)),
    (16, 512, 64, dict(bias=True, shift=10, relu=True, clip=(0, 127))),
    (5, 20, 19, dict(bias=True, out_dtype=np.int32)),
    (3, 48, 40, dict(residual=True, shift=2, clip=(-128, 127))),
])
def test_dense(rt, n, k, o, opts):
    rng = np.random.default_rng(n * 1000 + k)
    x, w = i8(rng, (n, k)), i8(rng, (o, k))
    bias = rng.integers(-5000, 5000, o).astype(np.int32) if opts.pop("bias", False) else None
    residual = i8(rng, (n, o)) if opts.pop("residual", False) else None
    y = dense(rt, x, w, bias=bias, residual=residual, **opts)
    np.testing.assert_array_equal(
        y, R.epilogue_ref(R.dense_ref(x, w), bias=bias, residual=residual, **opts))


@pytest.mark.parametrize("engine", ["auto", "alu"])
@pytest.mark.parametrize("shape, dtype, opts", [
    ((1, 16, 4, 4), np.int8, dict()),
    ((3, 21, 5, 7), np.int8, dict(shift=1, relu=True)),
    ((2, 70), np.int8, dict(clip=(-20, 20))),
    ((4, 40, 9, 9), np.int8, dict(shift=2, out_dtype=np.int32)),
    ((2, 8, 3, 3), np.int32, dict(shift=4, clip=(-128, 127))),
    ((2, 24, 5, 5), np.int8, dict(shift=18, clip=(-128, 127))),   # rounding above 2^14
])
def test_add(rt, shape, dtype, opts, engine):
    rng = np.random.default_rng(len(shape) * 31 + shape[1])
    lim = (1 << 24) if dtype == np.int32 else 128
    a = rng.integers(-lim, lim, shape).astype(dtype)
    b = rng.integers(-lim, lim, shape).astype(dtype)
    if engine == "alu" and opts.get("shift", 0) > 15:
        with pytest.raises(ValueError, match=r"^add\[2, 24, 5, 5\]: shift=18 needs a rounding"):
            add(rt, a, b, engine=engine, **opts)
        return
    np.testing.assert_array_equal(add(rt, a, b, engine=engine, **opts), R.add_ref(a, b, **opts))


POOL_CASES = [  # (N, C, H, W, kernel, stride, pad)
    (1, 16, 8, 8, 3, 2, 1),      # ResNet stem max-pool shape
    (2, 20, 7, 9, 2, 2, 0),
    (3, 5, 6, 5, 3, 1, 1),
    (1, 33, 5, 5, 5, 2, 2),
    (2, 17, 9, 6, (2, 3), (1, 2), (1, 0, 0, 2)),
    (1, 16, 11, 10, 2, 3, 0),    # windows skip rows and columns
    (1, 24, 40, 37, 3, 2, 1),    # several tiles of the separable schedule
]


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_max_pool2d(rt, case):
    n, c, h, w, k, s, p = case
    rng = np.random.default_rng(c)
    x = i8(rng, (n, c, h, w))
    x[0, 0] = -np.abs(x[0, 0]) - 1     # an all-negative channel: padding must never win
    np.testing.assert_array_equal(max_pool2d(rt, x, k, s, p), R.max_pool2d_ref(x, k, s, p))


@pytest.mark.parametrize("engine", ["gemm", "alu"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_avg_pool2d(rt, case, engine):
    n, c, h, w, k, s, p = case
    x = i8(np.random.default_rng(c + 1), (n, c, h, w))
    np.testing.assert_array_equal(avg_pool2d(rt, x, k, s, p, engine=engine),
                                  R.avg_pool2d_ref(x, k, s, p))


@pytest.mark.parametrize("engine", ["gemm", "alu"])
@pytest.mark.parametrize("shape", [(1, 64, 7, 7), (3, 20, 4, 4), (2, 9, 1, 1)], ids=str)
def test_global_avg_pool2d(rt, shape, engine):
    x = i8(np.random.default_rng(shape[1]), shape)
    np.testing.assert_array_equal(global_avg_pool2d(rt, x, engine=engine),
                                  R.global_avg_pool2d_ref(x))


# (N, C, H, W, O, k, stride, pad, groups); C and O in units of the config's block when
# given as a string "<m>b"; the mapping each case exercises is in the id
GROUP_CASES = [
    ((1, 32, 8, 8, 32, 3, 1, 1, 32), "diag"),       # depthwise
    ((2, 20, 7, 6, 20, 3, 2, 1, 20), "diag"),       # depthwise, partial block, stride 2
    ((1, 24, 5, 5, 24, 5, 1, 2, 12), "diag"),       # 2 channels per group
    ((1, "2b", 6, 6, "4b", 3, 1, 1, 2), "blocks"),  # whole blocks per group
    ((3, "4b", 5, 4, "2b", 1, 1, 0, 2), "blocks"),
    ((1, 12, 6, 6, 18, 3, 1, 1, 6), "per-group"),   # 2 in / 3 out per group: fallback
]


@pytest.mark.parametrize("case, mapping", GROUP_CASES, ids=lambda v: str(v))
def test_grouped_conv2d(rt, case, mapping):
    blk = rt.config.block
    n, c, h, w, o, k, s, p, g = [blk * int(v[:-1]) if isinstance(v, str) else v for v in case]
    rng = np.random.default_rng(c * 7 + o)
    x, wt = i8(rng, (n, c, h, w)), i8(rng, (o, c // g, k, k))
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    if mapping == "per-group":
        with pytest.raises(ValueError, match=r"^conv2d .* groups 6: 2 input and 3 output "
                                             r"channels per group neither fill"):
            plan_conv2d(rt.config, x.shape, wt.shape, s, p, groups=g)
    else:
        plan = plan_conv2d(rt.config, x.shape, wt.shape, s, p, groups=g)
        assert plan.problem.diag == (mapping == "diag")
    y = conv2d(rt, x, wt, s, p, groups=g, bias=bias, shift=6, clip=(-128, 127))
    ref = R.epilogue_ref(R.group_conv2d_ref(x, wt, s, p, g), bias=bias, shift=6,
                         clip=(-128, 127))
    np.testing.assert_array_equal(y, ref)


def test_group_conv2d_fallback_with_residual(rt):
    rng = np.random.default_rng(5)
    x, w = i8(rng, (1, 12, 6, 6)), i8(rng, (12, 3, 3, 3))
    res = i8(rng, (1, 12, 6, 6))
    y = group_conv2d(rt, x, w, 1, 1, groups=4, residual=res, shift=6, clip=(-128, 127))
    ref = R.epilogue_ref(R.group_conv2d_ref(x, w, 1, 1, 4), residual=res, shift=6,
                         clip=(-128, 127))
    np.testing.assert_array_equal(y, ref)


def test_plan_is_reusable(rt):
    """A plan lowered twice into one stream with different buffers gives both results."""
    rng = np.random.default_rng(9)
    plan = plan_conv2d(rt.config, (1, 18, 6, 6), (20, 18, 3, 3), 1, 1, bias=True, shift=8,
                       relu=True)
    outs, bufs_all, refs = [], [], []
    for _ in range(2):
        x, w = i8(rng, (1, 18, 6, 6)), i8(rng, (20, 18, 3, 3))
        b = rng.integers(-4000, 4000, 20).astype(np.int32)
        packed = plan.pack(x, w, b)
        bufs = {name: rt.alloc(op.nbytes) for name, op in plan.operands.items()}
        for name, arr in packed.items():
            rt.upload(bufs[name], arr)
        plan.lower(rt, bufs)
        bufs_all.append(bufs)
        refs.append(R.epilogue_ref(R.conv2d_ref(x, w, 1, 1), bias=b, shift=8, relu=True))
    rt.synchronize()
    out = plan.operands["out"]
    for bufs, ref in zip(bufs_all, refs):
        y = plan.unpack(rt.download(bufs["out"], out.dtype, out.shape))
        for buf in bufs.values():
            rt.free(buf)
        np.testing.assert_array_equal(y, ref)


def test_chained_kernels_in_one_stream(rt):
    """conv1 -> conv2 in one stream, conv2 reading conv1's output buffer in place (the
    packed int8 out layout is the next op's data layout), with a max-pool kernel
    between them: the kernel fences order every DRAM write before the next kernel's
    reads and keep the SRAM slots of consecutive kernels apart."""
    from vtakit.compiler.ops import plan_pool2d
    rng = np.random.default_rng(12)
    x = i8(rng, (1, 20, 9, 9))
    w1, w2 = i8(rng, (24, 20, 3, 3)), i8(rng, (18, 24, 1, 1))
    b1 = rng.integers(-5000, 5000, 24).astype(np.int32)
    p1 = plan_conv2d(rt.config, x.shape, w1.shape, 1, 1, bias=True, shift=8, relu=True)
    pool = plan_pool2d(rt.config, (1, 24, 9, 9), "max", 3, 2, 1)
    p2 = plan_conv2d(rt.config, (1, 24, 9, 9), w2.shape, 1, 0, shift=6, clip=(-128, 127))
    y1_ref = R.epilogue_ref(R.conv2d_ref(x, w1, 1, 1), bias=b1, shift=8, relu=True)
    bufs1 = {nm: rt.alloc(op.nbytes) for nm, op in p1.operands.items()}
    for nm, arr in p1.pack(x, w1, b1).items():
        rt.upload(bufs1[nm], arr)
    pbufs = {nm: rt.alloc(op.nbytes) for nm, op in pool.operands.items()}
    for nm, arr in pool.pack(y1_ref).items():              # the pool's own copy of y1
        rt.upload(pbufs[nm], arr)
    bufs2 = {"data": bufs1["out"], "weight": rt.alloc(p2.operands["weight"].nbytes),
             "out": rt.alloc(p2.operands["out"].nbytes)}
    rt.upload(bufs2["weight"], p2.pack(y1_ref, w2)["weight"])
    p1.lower(rt, bufs1)
    pool.lower(rt, pbufs)
    p2.lower(rt, bufs2)
    rt.synchronize()
    y1 = p1.unpack(rt.download(bufs1["out"], np.int8, p1.operands["out"].shape))
    yp = pool.unpack(rt.download(pbufs["out"], np.int8, pool.operands["out"].shape))
    y2 = p2.unpack(rt.download(bufs2["out"], np.int8, p2.operands["out"].shape))
    for buf in [*bufs1.values(), *pbufs.values(), bufs2["weight"], bufs2["out"]]:
        rt.free(buf)
    np.testing.assert_array_equal(y1, y1_ref)
    np.testing.assert_array_equal(yp, R.max_pool2d_ref(y1_ref, 3, 2, 1))
    np.testing.assert_array_equal(
        y2, R.epilogue_ref(R.conv2d_ref(y1_ref, w2, 1, 0), shift=6, clip=(-128, 127)))
