"""GlobalSumPlan: a global average pool's window sums streamed in chunks (compiler/ops/pool.py).

Results bit for bit against numpy (behavioral model, also with a random interleaving of
the modules, which a missing token would show), and the structure the speed comes from:
several input LOADs with GEMMs between them, one weight tile, and a next layer's first
loads free to start after the pool's first chunk, not its last GEMM.
"""

import numpy as np
import pytest

from vtakit.compiler.ops import TilingError, plan_avg_pool_gemm, plan_dense
from vtakit.compiler.ops import reference as R
from vtakit.compiler.ops.pool import GlobalSumPlan
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import MemType, Opcode
from vtakit.runtime import Runtime
from vtakit.runtime.chain import sram_free_point
from vtakit.sim import open_device

CONFIGS = {name: VTAConfig.preset(name) for name in ("default", "tiny")}


def run(plan, x, seed=None):
    opts = {} if seed is None else {"interleave_seed": seed}
    dev = open_device("behavioral", plan.config, **opts)
    try:
        out, _ = plan.run(Runtime(dev), plan.pack(x))
    finally:
        dev.close()
    return plan.unpack(out)


def loads(program, mem):
    return [k for k, i in enumerate(program.insns)
            if i.opcode == Opcode.LOAD and not i.is_nop and i.memory_type == mem]


def gemms(program):
    return [k for k, i in enumerate(program.insns)
            if i.opcode == Opcode.GEMM and not i.fields["reset_reg"]]


# the MLPerf Tiny pools (keyword spotting, image classification, visual wake words), a
# batch of three, a 1x1 plane, and given chunk sizes cutting blocks in odd places
CASES = [("default", (1, 64, 25, 5), None), ("default", (1, 64, 8, 8), None),
         ("default", (1, 256, 3, 3), None), ("tiny", (1, 64, 25, 5), None),
         ("tiny", (3, 20, 4, 4), None), ("default", (2, 40, 1, 1), None),
         ("default", (1, 48, 5, 5), (30, 7, 31, 7)), ("tiny", (1, 24, 3, 3), (5, 13, 9))]


@pytest.mark.parametrize("seed", [None, 7])
@pytest.mark.parametrize("config,shape,sizes", CASES, ids=str)
def test_sums_match_numpy(config, shape, sizes, seed):
    x = np.random.default_rng(shape[1]).integers(-128, 128, shape, dtype=np.int8)
    area = shape[2] * shape[3]
    plan = GlobalSumPlan(CONFIGS[config], shape, planes=2 if area > 1 else 1, sizes=sizes)
    want = x.astype(np.int32).sum(axis=(2, 3), keepdims=True)
    np.testing.assert_array_equal(run(plan, x, seed), want if area > 1 else x)


@pytest.mark.parametrize("shape", [(1, 32, 4, 4), (1, 64, 8, 8), (2, 16, 2, 4)], ids=str)
def test_power_of_two_mean_on_vta(shape):
    """The op API takes the plan for a global pool and rounds the mean on VTA."""
    cfg = CONFIGS["default"]
    x = np.random.default_rng(3).integers(-128, 128, shape, dtype=np.int8)
    plan = plan_avg_pool_gemm(cfg, shape, shape[2:])
    assert isinstance(plan, GlobalSumPlan) and plan.planes == 1 and plan.shift
    np.testing.assert_array_equal(run(plan, x), R.global_avg_pool2d_ref(x))


@pytest.mark.parametrize("shape", [(1, 64, 25, 5), (1, 256, 3, 3), (1, 64, 8, 8)], ids=str)
def test_streams_chunks_and_frees_the_sram_early(shape):
    cfg = CONFIGS["default"]
    plan = GlobalSumPlan(cfg, shape, planes=2)
    p = plan.program()
    inp, wgt, g = loads(p, MemType.INP), loads(p, MemType.WGT), gemms(p)
    assert len(plan.sizes) >= 3 and len(inp) == len(plan.sizes)
    assert len(wgt) == 1                                     # one identity tile
    assert g[0] < inp[-1]                   # GEMMs start before the last input arrives
    data = plan.operands["data"]
    assert sum(p.insns[k].fields["x_size"] for k in inp) * cfg.inp_elem_bytes == data.nbytes
    # the next layer's first weights and inputs (a dense layer's, at the bottom of the
    # SRAMs) may load once the pool's first chunk is summed, long before its last GEMM
    dense = plan_dense(cfg, (1, shape[1]), (12, shape[1])).program()
    free = sram_free_point(p, dense)
    assert free is not None and free < g[-1] and free <= inp[-1]


def test_model_layers_take_it():
    """A model's global average pool (its stream ends with the next layer's warm head)."""
    from vtakit.compiler.vta.pool import _avg_spec
    from vtakit.compiler.vta.registry import VTALayer
    cfg = CONFIGS["tiny"]
    layer = VTALayer("avg_pool2d", None, None, {
        "pool_size": (3, 3), "strides": (1, 1), "padding": (0, 0, 0, 0),
        "rounding": "tflite", "clip": (-128, 127), "out_dtype": "int8"})
    spec = _avg_spec(layer, (1, 256, 3, 3), None, cfg)
    assert isinstance(spec.plan, GlobalSumPlan) and spec.plan.planes == 2
    assert spec.plan.operands["out"].shape == (2, 1, 32, 1, 1, 1, 8)


def test_layer_report_names_the_chunks():
    """The compile report's tiling column of a global pool: its chunks and planes."""
    from vtakit.compiler.vta.layers import _describe_tiling
    plan = GlobalSumPlan(CONFIGS["default"], (1, 48, 5, 5), planes=2, sizes=(30, 7, 31, 7))
    assert _describe_tiling(plan) == ("streamed: 4 chunks of [30, 7, 31, 7] input vectors, "
                                      "2 byte planes")
    plan = GlobalSumPlan(CONFIGS["tiny"], (1, 8, 4, 4), shift=4)
    assert _describe_tiling(plan) == (f"streamed: {len(plan.sizes)} chunk"
                                      f"{'s' * (len(plan.sizes) > 1)} of {list(plan.sizes)} "
                                      "input vectors, shift 4, int8")


def test_chunk_errors():
    cfg = CONFIGS["tiny"]
    with pytest.raises(TilingError, match="must add up to 200"):
        GlobalSumPlan(cfg, (1, 8, 10, 20), planes=2, sizes=(100, 99))
    with pytest.raises(TilingError, match="the inp buffer"):
        GlobalSumPlan(cfg, (1, 64, 25, 5), planes=2, sizes=(200, 200, 200, 200, 200))


@pytest.mark.parametrize("config,shape,sizes", [CASES[0], CASES[3], CASES[6]], ids=str)
def test_rtl_matches_numpy(config, shape, sizes):
    """On Verilator (the MLPerf Tiny keyword spotting pool on default and tiny, odd cuts)."""
    x = np.random.default_rng(5).integers(-128, 128, shape, dtype=np.int8)
    plan = GlobalSumPlan(CONFIGS[config], shape, planes=2, sizes=sizes)
    dev = open_device("verilator", plan.config)
    try:
        out, _ = plan.run(Runtime(dev), plan.pack(x))
    finally:
        dev.close()
    np.testing.assert_array_equal(plan.unpack(out),
                                  x.astype(np.int32).sum(axis=(2, 3), keepdims=True))
