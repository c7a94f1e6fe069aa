"""Every operator on the RTL (Verilator, the fastest backend here) against its numpy reference.

One shape per operator on `tiny` and `default`, bit for bit. The Verilator builds are
shared with tests/test_fast_backends.py through the build cache. The randomized shape
sweeps run on the behavioral model in tests/test_ops.py.
"""

import numpy as np
import pytest

from vtakit.compiler.ops import (add, conv2d, dense, global_avg_pool2d, avg_pool2d, max_pool2d,
                                 reference as ref)
from vtakit.hw.config import load_config
from vtakit.runtime import Runtime
from vtakit.sim import open_device

BACKEND = "verilator"


@pytest.fixture(scope="module", params=["tiny", "default"])
def rt(request):
    dev = open_device(BACKEND, request.param)
    yield Runtime(dev)
    dev.close()


def i8(rng, *shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def test_conv2d_bias_shift_clip(rt):
    rng = np.random.default_rng(1)
    x, w = i8(rng, 1, 20, 9, 7), i8(rng, 24, 20, 3, 3)          # channels not block multiples
    bias = rng.integers(-4000, 4000, size=24, dtype=np.int32)
    y = conv2d(rt, x, w, stride=2, padding=1, bias=bias, shift=7, clip=(-100, 100))
    want = ref.epilogue_ref(ref.conv2d_ref(x, w, 2, 1), bias=bias, shift=7, clip=(-100, 100))
    np.testing.assert_array_equal(y, want)
    assert rt.device.name == BACKEND and rt.stats["syncs"] >= 1


def test_conv2d_residual_relu(rt):
    rng = np.random.default_rng(2)
    x, w = i8(rng, 1, 16, 6, 6), i8(rng, 16, 16, 1, 1)
    res = i8(rng, 1, 16, 6, 6)
    y = conv2d(rt, x, w, residual=res, shift=6, relu=True)
    want = ref.epilogue_ref(ref.conv2d_ref(x, w), residual=res, shift=6, relu=True)
    np.testing.assert_array_equal(y, want)


def test_depthwise_conv2d(rt):
    rng = np.random.default_rng(3)
    x, w = i8(rng, 1, 8, 7, 7), i8(rng, 8, 1, 3, 3)
    y = conv2d(rt, x, w, 1, 1, groups=8, shift=5, clip=(-128, 127))
    want = ref.epilogue_ref(ref.group_conv2d_ref(x, w, 1, 1, groups=8), shift=5,
                            clip=(-128, 127))
    np.testing.assert_array_equal(y, want)


def test_dense(rt):
    rng = np.random.default_rng(4)
    x, w = i8(rng, 3, 40), i8(rng, 21, 40)
    bias = rng.integers(-1000, 1000, size=21, dtype=np.int32)
    y = dense(rt, x, w, bias=bias, shift=6, clip=(-128, 127))
    np.testing.assert_array_equal(
        y, ref.epilogue_ref(ref.dense_ref(x, w), bias=bias, shift=6, clip=(-128, 127)))


@pytest.mark.parametrize("opts", [dict(out_dtype=np.int32, result_bytes=3),
                                  dict(bias=True, shift=6, clip=(-128, 127))])
def test_dense_streamed(rt, opts):
    """The streamed schedule (whole weight resident, a tile's planes stored right after
    its GEMM, a small last tile) with int32 planes and an int8 epilogue."""
    from vtakit.compiler.ops.dense import plan_dense
    rng = np.random.default_rng(9)
    x, w = i8(rng, 1, 96), i8(rng, 40, 96)
    bias = rng.integers(-1000, 1000, size=40, dtype=np.int32) if opts.get("bias") else None
    ob = -(-40 // rt.config.block_out)
    plan = plan_dense(rt.config, x.shape, w.shape, stream=(ob - 1, 1), **opts)
    out, _ = plan.run(rt, plan.pack(x, w, bias))
    acc = ref.dense_ref(x, w)
    want = (acc.astype(np.int64) if "result_bytes" in opts else
            ref.epilogue_ref(acc, bias=bias, shift=6, clip=(-128, 127)))
    np.testing.assert_array_equal(plan.unpack(out), want)


@pytest.mark.parametrize("engine", ["gemm", "alu"])
def test_add(rt, engine):
    rng = np.random.default_rng(5)
    a, b = i8(rng, 1, 12, 5, 5), i8(rng, 1, 12, 5, 5)
    y = add(rt, a, b, shift=1, relu=True, engine=engine)
    np.testing.assert_array_equal(y, ref.add_ref(a, b, shift=1, relu=True))


def test_max_pool(rt):
    rng = np.random.default_rng(6)
    x = i8(rng, 1, 10, 9, 9)
    np.testing.assert_array_equal(max_pool2d(rt, x, 3, 2, 1), ref.max_pool2d_ref(x, 3, 2, 1))


@pytest.mark.parametrize("case", [
    ((2, 12, 13, 11), 3, 2, 1, (1, 1, 3, 2), True),       # separable, output rows apart
    ((1, 16, 12, 12), 2, 2, 0, (1, 1, 2, 3), True),       # separable, outputs contiguous
    ((1, 8, 10, 11), (1, 3), (2, 2), (0, 1, 0, 1), (1, 1, 2, 5), True),  # rows none reads
    ((1, 16, 8, 8), 3, 2, 1, None, False),     # one small tile: the direct schedule costs less
    ((1, 8, 7, 7), 3, 1, 1, None, False),      # overlapping by more than a stride: direct
    ((1, 8, 9, 9), 3, 3, 0, None, False),      # stride 3: direct
], ids=str)
def test_max_pool_schedules_match_behavioral(case):
    """The separable max-pool schedule (polyphase copy, in-place row then column maxima)
    and the direct one on tiny: RTL == behavioral model == reference, bit for bit."""
    from vtakit.compiler.ops import plan_pool2d
    shape, k, s, p, tile, separable = case
    x = i8(np.random.default_rng(8), *shape)
    x[0, 0] = -np.abs(x[0, 0]) - 1           # an all-negative channel: padding never wins
    plan = plan_pool2d(load_config("tiny"), shape, "max", k, s, p, tile=tile)
    assert plan.separable == separable
    outs = []
    for backend in ("behavioral", BACKEND):
        dev = open_device(backend, "tiny")
        try:
            outs.append(plan.unpack(plan.run(Runtime(dev), plan.pack(x))[0]))
        finally:
            dev.close()
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[1], ref.max_pool2d_ref(x, k, s, p))


def test_avg_pools(rt):
    rng = np.random.default_rng(7)
    x = i8(rng, 1, 16, 8, 8)
    np.testing.assert_array_equal(avg_pool2d(rt, x, 2, 2), ref.avg_pool2d_ref(x, 2, 2))
    x = i8(rng, 1, 16, 7, 7)
    np.testing.assert_array_equal(global_avg_pool2d(rt, x), ref.global_avg_pool2d_ref(x))


@pytest.mark.parametrize("shape,tiling", [
    ((1, 12, 9, 7, 20, 3, 1), (1, 1, 2, 4, 1)),     # 3x3, padding: 15 tiles over 5 acc slots
    ((2, 16, 6, 6, 24, 1, 0), (1, 2, 2, 6, 2)),     # 1x1, full-width tiles, 2 input chunks
])
def test_conv2d_int32_two_threads(shape, tiling):
    """An int32 result stored as byte planes with two threads (plane shifts skewed behind
    the GEMMs over five acc slots, :class:`~vtakit.compiler.ops.tokens.PlanePipeline`):
    Verilator equals the behavioral model and the reference bit for bit (tiny config)."""
    from vtakit.compiler.ops import ConvTiling
    n, c, h, w, o, k, pad = shape
    rng = np.random.default_rng(8)
    x, wt = i8(rng, n, c, h, w), i8(rng, o, c, k, k)
    bias = rng.integers(-30000, 30000, size=o, dtype=np.int32)
    t = ConvTiling(*tiling, "co_outer", 2)
    want = ref.epilogue_ref(ref.conv2d_ref(x, wt, 1, pad), bias=bias, out_dtype=np.int32)
    for backend in ("behavioral", BACKEND):
        with open_device(backend, "tiny") as dev:
            y = conv2d(Runtime(dev), x, wt, 1, pad, bias=bias, out_dtype=np.int32, tiling=t)
        np.testing.assert_array_equal(y, want, err_msg=backend)


@pytest.mark.parametrize("shape, groups, tiling, split", [
    ((1, 48, 6, 5, 32, 1, 0), 1, (1, 1, 2, 5, 6, "sp_outer"), False),   # 1x1, inputs x 4
    ((1, 32, 7, 6, 40, 3, 1), 1, (1, 2, 3, 6, 4, "sp_outer"), False),   # 2 + 2 + 1 blocks
    ((1, 32, 7, 6, 32, 3, 1), 32, (1, 1, 3, 6, 1, "co_outer"), False),  # depthwise
    ((1, 32, 7, 6, 32, 3, 1), 32, (1, 1, 4, 6, 1, "co_outer"), True),   # last tile halved
])
def test_conv2d_int32_resident_weights(shape, groups, tiling, split):
    """Resident weights (each output tile's weight rows loaded once, inputs switching
    slot only when they change; a depthwise first group loading its weight row by row):
    Verilator and the behavioral model under eight module interleavings (a missing
    token between two rows shows in several of them) equal the reference bit for bit
    (tiny config), and the weight is read from DRAM exactly once."""
    from vtakit.compiler.ops import ConvTiling, plan_conv2d
    from vtakit.compiler.ops.perfmodel import program_prediction
    n, c, h, w, o, k, pad = shape
    rng = np.random.default_rng(12)
    x, wt = i8(rng, n, c, h, w), i8(rng, o, c // groups, k, k)
    plan = plan_conv2d(load_config("tiny"), x.shape, wt.shape, 1, pad, groups=groups,
                       out_dtype=np.int32, tiling=ConvTiling(*tiling, 2, True))
    if split:
        plan.split_last = True
        assert [t[5] for t in plan.tiles()][-4:] == [3, 4, 2, 1]    # rows 4 + 3, 4 + 2 + 1
    traffic = program_prediction(plan.program())[1]
    assert traffic["wgt_load_nbytes"] == plan.operands["weight"].nbytes
    want = ref.group_conv2d_ref(x, wt, 1, pad, groups=groups)
    for backend, opts in [("behavioral", dict(interleave_seed=s)) for s in range(8)] + [
            (BACKEND, {})]:
        with open_device(backend, "tiny", **opts) as dev:
            out, _ = plan.run(Runtime(dev), plan.pack(x, wt))
        np.testing.assert_array_equal(plan.unpack(out), want, err_msg=f"{backend} {opts}")


@pytest.mark.parametrize("resident", [False, True])
def test_conv2d_int32_last_tile_halved_from_a_whole_image_tile(resident):
    """``split_last`` on a tiling whose tiles are the whole image (one per output block):
    the last one becomes two row halves, each stored by rows, not as a whole image.
    Verilator and the behavioral model equal the reference (tiny config)."""
    from vtakit.compiler.ops import ConvTiling, plan_conv2d
    rng = np.random.default_rng(13)
    x, wt = i8(rng, 1, 16, 4, 5), i8(rng, 16, 1, 3, 3)
    plan = plan_conv2d(load_config("tiny"), x.shape, wt.shape, 1, 1, groups=16,
                       out_dtype=np.int32,
                       tiling=ConvTiling(1, 1, 4, 5, 1, "co_outer", 2, resident))
    plan.split_last = True
    assert [t[5] for t in plan.tiles()] == [4, 2, 2]
    want = ref.group_conv2d_ref(x, wt, 1, 1, groups=16)
    for backend in ("behavioral", BACKEND):
        with open_device(backend, "tiny") as dev:
            out, _ = plan.run(Runtime(dev), plan.pack(x, wt))
        np.testing.assert_array_equal(plan.unpack(out), want, err_msg=backend)


def test_conv2d_int32_two_threads_border_rows():
    """The same schedule with ALU border rows (padding with -128 corrected per border
    rectangle) and the bias, both kept once per kernel at the top of the acc SRAM:
    Verilator equals the behavioral model and the reference (tiny config)."""
    from vtakit.compiler.ops import ConvTiling, plan_conv2d
    from vtakit.compiler.quant import fixed_point as fp
    from vtakit.hw.config import load_config
    rng = np.random.default_rng(9)
    x, w = i8(rng, 1, 16, 10, 8), i8(rng, 16, 16, 10, 4)
    bias = rng.integers(-3000, 3000, 16).astype(np.int32)
    pad = (4, 1, 5, 2)
    xv = np.pad(x, ((0, 0), (0, 0), (4, 5), (1, 2)), constant_values=-128)
    want = ref.conv2d_ref(xv, w, 2, 0).astype(np.int64)
    corr = fp.wrap_int32(want - ref.conv2d_ref(x, w, 2, pad))
    plan = plan_conv2d(load_config("tiny"), x.shape, w.shape, 2, pad, bias=True,
                       out_dtype=np.int32, border=True,
                       tiling=ConvTiling(1, 1, 1, 4, 1, "co_outer", 2))
    assert len(plan.border_cases) > 1
    for backend in ("behavioral", BACKEND):
        with open_device(backend, "tiny") as dev:
            out, _ = plan.run(Runtime(dev), plan.pack(x, w, bias, border=corr))
        np.testing.assert_array_equal(plan.unpack(out), ref.epilogue_ref(
            fp.wrap_int32(want), bias=bias, out_dtype=np.int32), err_msg=backend)


@pytest.mark.parametrize("nbytes", [2, 3])
def test_conv2d_int32_fewer_byte_planes(nbytes):
    """An int32 result known to fit ``nbytes`` bytes stores that many planes (one SHR
    less per plane left out) and reads back sign-extended: Verilator equals the
    behavioral model and the reference (tiny config), and stores ``nbytes`` planes."""
    from vtakit.compiler.ops import ConvTiling, plan_conv2d
    from vtakit.compiler.ops.epilogue import result_bytes_for
    from vtakit.hw.config import load_config
    rng = np.random.default_rng(10)
    lim = 15 if nbytes == 2 else 100               # sum |w| x 128 within 2^15 or 2^23
    x = i8(rng, 1, 16, 6, 6)
    w = rng.integers(-lim, lim + 1, (16, 16, 1, 1)).astype(np.int8)
    x[0, :, 0, 0], w[0] = 127, lim                 # one output near the bound
    bound = 128 * int(np.abs(w.astype(np.int64)).reshape(16, -1).sum(axis=1).max())
    assert result_bytes_for(bound) == nbytes
    plan = plan_conv2d(load_config("tiny"), x.shape, w.shape, 1, 0, out_dtype=np.int32,
                       result_bytes=nbytes, tiling=ConvTiling(1, 1, 2, 6, 1, "co_outer", 2))
    assert plan.operands["out"].shape[0] == nbytes
    want = ref.conv2d_ref(x, w, 1, 0)
    assert np.abs(want).max() >= 1 << (8 * (nbytes - 1))  # the top plane carries bits
    for backend in ("behavioral", BACKEND):
        with open_device(backend, "tiny") as dev:
            out, _ = plan.run(Runtime(dev), plan.pack(x, w))
        np.testing.assert_array_equal(plan.unpack(out), want, err_msg=backend)


@pytest.mark.parametrize("groups", [1, 8])
def test_conv2d_whole_image_tile_lists_the_taps_inside(groups):
    """A tile that is the whole (small, padded) image runs one GEMM kernel listing the
    (output, tap) pairs inside the data: Verilator equals the behavioral model and the
    reference bit for bit (tiny config)."""
    from vtakit.compiler.ops import ConvTiling, plan_conv2d
    from vtakit.hw.config import load_config
    rng = np.random.default_rng(11)
    c = 64 if groups == 1 else 8                   # 8 input blocks: a kernel used 8 times
    x, w = i8(rng, 1, c, 5, 6), i8(rng, 16 if groups == 1 else 8, c // groups, 3, 3)
    plan = plan_conv2d(load_config("tiny"), x.shape, w.shape, 1, 1, groups=groups, shift=7,
                       clip=(-100, 120), tiling=ConvTiling(1, 1, 5, 6, 1, "co_outer", 1))
    want = ref.epilogue_ref(ref.group_conv2d_ref(x, w, 1, 1, groups=groups), shift=7,
                            clip=(-100, 120))
    gemms = [i for i in plan.program().insns if i.opcode.name == "GEMM" and not i.reset_reg]
    assert len(gemms) == plan.estimate.groups or groups > 1    # one listed kernel a group
    for backend in ("behavioral", BACKEND):
        with open_device(backend, "tiny") as dev:
            out, _ = plan.run(Runtime(dev), plan.pack(x, w))
        np.testing.assert_array_equal(plan.unpack(out), want, err_msg=backend)
