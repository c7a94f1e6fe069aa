"""requant2 on COMPUTE_OVERLAP: the compiler's fill choices for REQ layers
(:attr:`~vtakit.compiler.ops.conv2d.Conv2dPlan.bank_copy`, resident weights by
:meth:`~vtakit.compiler.ops.conv2d.Conv2dPlan._try_req_resident`); every output equals
TFLite's arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from vtakit.compiler.ops.conv2d import Conv2dPlan, plan_conv2d
from vtakit.compiler.ops.cost.events import program_stream
from vtakit.compiler.ops.reference import group_conv2d_ref
from vtakit.compiler.quant import fixed_point as fp
from vtakit.hw.config import load_config
from vtakit.hw.isa import AluOp, MemType, Opcode
from vtakit.runtime import Runtime
from vtakit.sim import open_device

from test_requant2_compile import _requant2, _tflite

DEFAULT_RQ2 = load_config("default+requant2")
OVR = load_config("tiny+requant2+overlap")
PAD = -17


def _case(config, c, o, hw, groups, stride, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, c) + hw, dtype=np.int8)
    w = rng.integers(-128, 128, (o, c // groups, 3, 3), dtype=np.int8)
    bias = rng.integers(-5000, 5000, o).astype(np.int32)
    scale = rng.uniform(1, 2, o) * 2.0 ** rng.integers(-14, -6, o)
    rq, rows = _requant2(scale, 5, o, False)
    plan = plan_conv2d(config, x.shape, w.shape, stride, 1, groups=groups, bias=True,
                       requant=rq, border=True)
    return plan, (x, w, bias, scale, rows, stride, groups)


def _run(plan, data, backend):
    """The plan's output on ``backend`` == TFLite's arithmetic (padding of value PAD)."""
    from vtakit.compiler.vta.conv import border_correction
    x, w, bias, scale, rows, stride, groups = data
    plan._program = None
    packed = plan.pack(x, w, bias, requant=rows, border=border_correction(plan, w, PAD))
    dev = open_device(backend, plan.config)
    try:
        out, _ = plan.run(Runtime(dev), packed)
    finally:
        dev.close()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=PAD)
    acc = fp.wrap_int32(group_conv2d_ref(xp, w, stride, 0, groups).astype(np.int64)
                        + bias[:, None, None])
    np.testing.assert_array_equal(plan.unpack(out), _tflite(acc, scale, 5, False))


def _acc_loads_and_copy(plan):
    plan._program = None
    insns = program_stream(plan.program())
    loads = sum(1 for i in insns if i.opcode == Opcode.LOAD
                and i.fields["memory_type"] == MemType.ACC)
    adds = sum(1 for i in insns if i.opcode == Opcode.ALU
               and i.fields["alu_opcode"] == AluOp.ADD)
    return loads, adds


@pytest.mark.parametrize("backend", ["behavioral", "verilator"])
def test_bank_copy_makes_the_second_copy_on_chip(backend):
    """With :attr:`bank_rows`, ``bank_copy`` replaces the second DRAM load of the rows
    (bias, requantize and border rows: one LOAD ACC, :attr:`merged_rows`) by a GEMM reset
    and one ALU ADD from bank 1; the output equals TFLite's with and without it."""
    plan, data = _case(OVR, 32, 32, (10, 10), 1, 1, 9)
    plan.lane_zero, plan.out_slots, plan._program = False, None, None
    assert plan.folded_border and plan._bank_rows_fit()
    plan.bank_rows = True
    counts = {}
    for copy in (False, True):
        plan.bank_copy = copy
        _run(plan, data, backend)
        counts[copy] = _acc_loads_and_copy(plan)
    assert plan.merged_rows == ("bias", "requant", "border")
    assert counts[False] == (2, 0) and counts[True] == (1, 1), counts


def test_kws_depthwise_copies_its_rows_on_chip():
    """keyword spotting's 3x3 depthwise layer on ``default+requant2`` (64 channels,
    25x5, the border folded into 44 shared rows) picks ``bank_copy``: the event model
    predicts it faster than the second load; its output equals TFLite's."""
    plan, data = _case(DEFAULT_RQ2, 64, 64, (25, 5), 64, 1, 3)
    assert plan.bank_rows and plan.bank_copy
    fast = plan.inspect()["predicted_cycles"]
    plan.bank_copy, plan._program = False, None
    assert plan.inspect()["predicted_cycles"] > fast
    plan.bank_copy = True
    _run(plan, data, "behavioral")


def test_req_layer_keeps_its_weights_resident(monkeypatch):
    """image classification's 16 -> 32 3x3 stride-2 layer on ``default+requant2``: the
    plan keeps the weights resident with the first group's weights loaded row by row
    (``row_pieces``), predicted faster than the plan the search gives without it; its
    output equals TFLite's."""
    plan, data = _case(DEFAULT_RQ2, 16, 32, (32, 32), 1, 2, 5)
    assert plan.tiling.resident and plan.row_pieces, plan.tiling
    _run(plan, data, "behavioral")
    fast = plan.inspect()["predicted_cycles"]
    monkeypatch.setattr(Conv2dPlan, "_req_resident_fit", lambda self: False)
    other, _ = _case(DEFAULT_RQ2, 16, 32, (32, 32), 1, 2, 5)
    assert not other.tiling.resident and other.inspect()["predicted_cycles"] > fast


def test_req_layer_takes_a_runner_up(monkeypatch):
    """image classification's 32 -> 32 3x3 layer at 16x16 on ``default+requant2``:
    ``REQ_RUNNERS_UP`` plans the re-ranking's next tilings with their own REQ choices and
    takes one (th 6 x tw 16 instead of 8 x 8), predicted faster than the re-ranked plan
    with its choices; its output equals TFLite's."""
    plan, data = _case(DEFAULT_RQ2, 32, 32, (16, 16), 1, 1, 5)
    _run(plan, data, "behavioral")
    fast = plan.inspect()["predicted_cycles"]
    monkeypatch.setattr(Conv2dPlan, "REQ_RUNNERS_UP", 0)
    other, _ = _case(DEFAULT_RQ2, 32, 32, (16, 16), 1, 1, 5)
    assert other.tiling != plan.tiling and other.inspect()["predicted_cycles"] > fast
