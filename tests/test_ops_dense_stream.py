"""The streamed schedule of dense layers (:attr:`vtakit.compiler.ops.dense.DensePlan.stream`):
results against the numpy references for every epilogue kind and tile list on the
behavioral model (the RTL runs are in tests/test_ops_rtl.py and
tests/test_requant2_compile.py), its instruction stream, and when the plan takes it."""

import numpy as np
import pytest

from vtakit.compiler.ops import reference as R
from vtakit.compiler.ops.cost.events import program_stream
from vtakit.compiler.ops.dense import plan_dense, stream_candidates
from vtakit.compiler.ops.epilogue import Requant2
from vtakit.compiler.quant import fixed_point as fp
from vtakit.hw.config import load_config
from vtakit.hw.isa import MemType, Opcode
from vtakit.runtime import Runtime
from vtakit.sim import open_device

DEFAULT = load_config("default")
DEFAULT_RQ2 = DEFAULT.replace(extensions=("requant2",))


def _run(plan, *args, **kwargs):
    out, _ = plan.run(Runtime(open_device("behavioral", plan.config)),
                      plan.pack(*args, **kwargs))
    return plan.unpack(out)


def _operands(rng, n, k, o, bias=True):
    x = rng.integers(-128, 128, (n, k), dtype=np.int8)
    w = rng.integers(-128, 128, (o, k), dtype=np.int8)
    b = rng.integers(-5000, 5000, o).astype(np.int32) if bias else None
    return x, w, b


def test_stream_candidates_cover_the_blocks():
    """Every candidate covers the blocks once: 1 to 4 even tiles, with a last tile of 1
    or 2 blocks split off."""
    cands = stream_candidates(8)
    assert all(sum(c) == 8 and min(c) >= 1 for c in cands)
    assert len(set(cands)) == len(cands) == 10
    assert {(8,), (4, 4), (3, 3, 2), (7, 1), (4, 3, 1), (6, 2), (2, 2, 2, 2)} <= set(cands)
    assert stream_candidates(2) == [(2,), (1, 1)]
    assert (20, 19, 1) in stream_candidates(40)


@pytest.mark.parametrize("config", ["tiny", "default"])
@pytest.mark.parametrize("n, k, o, planes", [(1, 128, 128, 3), (3, 40, 70, 4), (1, 640, 24, 2)])
def test_stream_int32_planes(config, n, k, o, planes):
    """int32 results (the base ISA's TFLite layers): every byte plane, every tile list."""
    cfg = load_config(config)
    rng = np.random.default_rng(n * 100 + o)
    x, w, _ = _operands(rng, n, k, o, bias=False)
    acc = R.dense_ref(x, w).astype(np.int64)
    want = acc & ((1 << (8 * planes)) - 1)
    want = np.where(want >= 1 << (8 * planes - 1), want - (1 << (8 * planes)), want)
    ob = -(-o // cfg.block_out)
    for stream in ((ob,), (1,) * ob, stream_candidates(ob)[-1]):
        plan = plan_dense(cfg, x.shape, w.shape, out_dtype=np.int32, result_bytes=planes,
                          stream=stream)
        assert plan.stream == stream
        np.testing.assert_array_equal(_run(plan, x, w), want)


@pytest.mark.parametrize("opts", [dict(shift=7, clip=(-100, 100)), dict(shift=9, relu=True),
                                  dict(shift=0, clip=(-128, 127))])
@pytest.mark.parametrize("min_init", [False, True])
def test_stream_int8_epilogue(opts, min_init):
    """int8 results with a bias tile, shift and clip (and the MIN init of the bias)."""
    rng = np.random.default_rng(len(opts) + 7 * min_init)
    x, w, b = _operands(rng, 2, 96, 56)
    for stream in ((2, 1, 1), (4,), (1, 3)):
        plan = plan_dense(DEFAULT, x.shape, w.shape, bias=True, stream=stream,
                          min_init=(b, w) if min_init else None, **opts)
        got = _run(plan, x, w, b)
        np.testing.assert_array_equal(got, R.epilogue_ref(R.dense_ref(x, w), bias=b, **opts))


@pytest.mark.parametrize("per_channel", [True, False])
def test_stream_requant2(per_channel):
    """The REQ epilogue (uniform rows: REQ.M and REQ.P once) equals TFLite's single
    rounding."""
    rng = np.random.default_rng(11)
    x, w, b = _operands(rng, 1, 128, 72)
    scale = rng.uniform(0.0005, 0.003, 72) if per_channel else 0.0011
    m, s = fp.quantize_multiplier(np.broadcast_to(scale, (72,)), single_rounding=True)
    rq, rows = Requant2.make(m, s, -3, (-128, 127), single_rounding=True)
    acc = fp.wrap_int32(x.astype(np.int64) @ w.T.astype(np.int64) + b)
    want = np.clip(fp.requantize_tflite(acc, scale, -3, axis=1, single_rounding=True)
                   .astype(np.int64), -128, 127).astype(np.int8)
    for stream in ((5,), (3, 1, 1), (2, 2, 1)):
        plan = plan_dense(DEFAULT_RQ2, x.shape, w.shape, bias=True, requant=rq, stream=stream)
        np.testing.assert_array_equal(_run(plan, x, w, b, requant=rows), want)


def test_stream_program_loads_each_operand_once():
    """One LOAD of the input, one weight LOAD per tile (the whole weight, no byte
    twice), one store per tile and plane, and no token between load and compute but
    the tiles' l2g (the weights stay resident)."""
    plan = plan_dense(DEFAULT, (1, 128), (128, 128), out_dtype=np.int32, result_bytes=3,
                      stream=(5, 2, 1))
    insns = program_stream(plan.program())
    loads = [i.fields for i in insns if i.opcode == Opcode.LOAD and i.fields["x_size"]]
    wgt = [f for f in loads if f["memory_type"] == MemType.WGT]
    assert [f["x_size"] for f in wgt] == [5 * 8, 2 * 8, 8]
    assert [f["dram_base"] for f in wgt] == [0, 40, 56]
    assert sum(f["memory_type"] == MemType.INP for f in loads) == 1
    stores = [i for i in insns if i.opcode == Opcode.STORE and i.fields["x_size"]]
    assert len(stores) == 3 * 3
    # g2l: only the fences'
    assert sum(bool(i.fields.get("push_prev_dep")) for i in insns
               if i.opcode == Opcode.GEMM or i.opcode == Opcode.ALU) == 0


@pytest.mark.parametrize("config, epilogue", [
    (DEFAULT, dict(out_dtype=np.int32, result_bytes=3)),
    (DEFAULT_RQ2, "requant2")])
@pytest.mark.parametrize("k, o", [(128, 128), (640, 128), (128, 640)])
def test_dram_bound_layers_take_the_stream(config, epilogue, k, o):
    """The anomaly detection model's layers: the event model predicts the streamed
    schedule faster than the tiled one, and the plan takes it."""
    if epilogue == "requant2":
        m, s = fp.quantize_multiplier(np.full(o, 0.001), single_rounding=True)
        rq, _ = Requant2.make(m, s, -128, single_rounding=True)
        epilogue = dict(bias=True, requant=rq)
    plan = plan_dense(config, (1, k), (o, k), **epilogue)
    tiled = plan_dense(config, (1, k), (o, k), stream=(), **epilogue)
    assert plan.stream and tiled.stream == ()
    assert plan.predicted() < tiled.predicted()


def test_stream_errors():
    with pytest.raises(ValueError, match=r"streamed tiles \[3, 3\] must be positive and cover "
                                         r"the 8 output blocks$"):
        plan_dense(DEFAULT, (1, 128), (128, 128), stream=(3, 3))
    tiny = load_config("tiny")
    with pytest.raises(ValueError, match=r"the streamed schedule does not fit config "):
        plan_dense(tiny, (1, 1024), (1024, 1024), out_dtype=np.int32,
                   stream=(1024 // tiny.block_out,))
    with pytest.raises(ValueError, match=r"the streamed schedule does not fit config "):
        plan_dense(DEFAULT, (1, 64), (16, 64), bias=True, shift=3, residual="int8",
                   stream=(1,))


def _rq2(rng, o, per_channel, zero_point=-3):
    scale = rng.uniform(0.0005, 0.003, o) if per_channel else 0.0011
    m, s = fp.quantize_multiplier(np.broadcast_to(scale, (o,)), single_rounding=True)
    rq, rows = Requant2.make(m, s, zero_point, (-128, 127), single_rounding=True)
    return scale, rq, rows


def _rq2_want(x, w, b, scale, zero_point=-3):
    acc = fp.wrap_int32(x.astype(np.int64) @ w.T.astype(np.int64) + b)
    return np.clip(fp.requantize_tflite(acc, scale, zero_point, axis=1, single_rounding=True)
                   .astype(np.int64), -128, 127).astype(np.int8)


def test_stream_requant2_bias_start_program():
    """Uniform REQ rows, one batch block: the rows and the accumulators' start (bias - P)
    are one DRAM operand and one LOAD ACC into acc 0.., no reset GEMM, and REQ's
    registers are loaded before the first GEMM (whose weights it waits for)."""
    rng = np.random.default_rng(3)
    _, rq, _ = _rq2(rng, 128, False)
    plan = plan_dense(DEFAULT_RQ2, (1, 128), (128, 128), bias=True, requant=rq, stream=(7, 1))
    assert plan.bias_start and "bias" not in plan.operands
    assert plan.operands["requant"].shape == (2 + 8, 1, 16)
    insns = program_stream(plan.program())
    acc = [i.fields for i in insns if i.opcode == Opcode.LOAD and i.fields["x_size"]
           and i.fields["memory_type"] == MemType.ACC]
    assert [(f["sram_base"], f["x_size"], f["y_size"]) for f in acc] == [(0, 10, 1)]
    assert not any(i.fields["reset_reg"] for i in insns if i.opcode == Opcode.GEMM)
    first_gemm = next(k for k, i in enumerate(insns) if i.opcode == Opcode.GEMM)
    assert [i.fields["imm"] for i in insns[:first_gemm] if i.opcode == Opcode.ALU] == [1, 2]
    # the tiled schedule and per-channel rows keep the bias operand
    tiled = plan_dense(DEFAULT_RQ2, (1, 128), (128, 128), bias=True, requant=rq, stream=())
    assert not tiled.bias_start and "bias" in tiled.operands
    _, rq_pc, _ = _rq2(rng, 128, True)
    assert not rq_pc.uniform
    pc = plan_dense(DEFAULT_RQ2, (1, 128), (128, 128), bias=True, requant=rq_pc, stream=(7, 1))
    assert not pc.bias_start and "bias" in pc.operands


@pytest.mark.parametrize("n, stream", [(1, (5,)), (1, (3, 1, 1)), (2, (2, 2, 1))])
def test_stream_requant2_bias_start_wraps(n, stream):
    """bias - P wraps in int32 and REQ's add of P wraps back: biases at the int32 ends
    give TFLite's result (and with two batch blocks the bias row as before)."""
    rng = np.random.default_rng(5 + n)
    x, w, b = _operands(rng, n, 128, 72)
    b[:4] = [2**31 - 1, -2**31, 2**31 - 300, -2**31 + 7]
    scale, rq, rows = _rq2(rng, 72, False, zero_point=5)
    plan = plan_dense(DEFAULT_RQ2, x.shape, w.shape, bias=True, requant=rq, stream=stream)
    assert plan.bias_start == (n == 1)
    np.testing.assert_array_equal(_run(plan, x, w, b, requant=rows),
                                  _rq2_want(x, w, b, scale, zero_point=5))


def test_bias_start_layers_take_the_stream_when_faster():
    """A one-block requant2 layer (keyword spotting's 64 -> 12) whose streamed schedule
    the event model predicts only ~1% faster takes it (BIAS_START_GAIN); the same layer
    with per-channel rows (no bias start) keeps the tiled schedule (STREAM_GAIN)."""
    rng = np.random.default_rng(9)
    _, rq, _ = _rq2(rng, 12, False)
    plan = plan_dense(DEFAULT_RQ2, (1, 64), (12, 64), bias=True, requant=rq)
    tiled = plan_dense(DEFAULT_RQ2, (1, 64), (12, 64), bias=True, requant=rq, stream=())
    assert plan.stream == (1,) and plan.bias_start
    assert tiled.predicted() * plan.STREAM_GAIN < plan.predicted() < tiled.predicted()
    _, rq_pc, _ = _rq2(rng, 12, True)
    assert plan_dense(DEFAULT_RQ2, (1, 64), (12, 64), bias=True, requant=rq_pc).stream == ()


def test_req_setup_needs_uniform_rows():
    from vtakit.compiler.ops.epilogue import Epilogue, EpilogueError
    rng = np.random.default_rng(1)
    _, rq, _ = _rq2(rng, 32, True)
    epi = Epilogue.make(bias=True, requant=rq, op="dense")
    with pytest.raises(EpilogueError, match="uniform Requant2 rows"):
        epi.emit_req_setup(None, 0, [None])
