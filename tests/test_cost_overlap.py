"""The event model (:mod:`vtakit.compiler.ops.cost.events`) with the compute module's ALU
lane (``COMPUTE_OVERLAP``, ``tiny+overlap``): directed programs of
``tests/test_rtl_overlap.py`` predicted against their Verilator cycles, and the key off
leaving the prediction as it was."""

import numpy as np
import pytest

from test_rtl_overlap import ISA, OV, TINY, _conv_on, epilogue_program
from vtakit.compiler.ops.cost.events import _lane_plan, predict_stream
from vtakit.hw.isa import MemType, Opcode
from vtakit.hw.spec import Unit, dispatch_unit


def _stream(p):
    """The decoded instructions of a test_rtl_overlap Program, every region at DRAM 0
    (the model reads LOAD UOPs' ``dram_base`` as an index into ``p.uops``)."""
    offsets = np.cumsum([0] + [n for _, n in p.stores])
    words = []
    for w in p.words:
        if isinstance(w, tuple) and w[0] == "load":
            _, mt, sram, dram, n, flags = w
            w = ISA.encode(Opcode.LOAD, memory_type=mt, sram_base=sram, dram_base=dram,
                           y_size=1, x_size=n, x_stride=n, **flags)
        elif isinstance(w, tuple):
            _, sram, k, n, flags = w
            w = ISA.encode(Opcode.STORE, memory_type=MemType.OUT, sram_base=sram,
                           dram_base=int(offsets[k]), y_size=1, x_size=n, x_stride=n, **flags)
        words.append(w)
    return [ISA.decode(int(w)) for w in words]


def test_lane_plan_follows_the_footprint_rules():
    """The epilogue ALUs (one micro-op, one bank) go to the lane, in the bank of their
    rows; each GEMM's dst bank is known; LOADs and FINISH wait for the lane to drain."""
    p = epilogue_program()
    insns = _stream(p)
    queue = [i for i in insns if dispatch_unit(i.opcode, i.fields.get("memory_type"))
             == Unit.COMPUTE]
    plan = _lane_plan(queue, OV, np.array(p.uops, np.uint32))
    kinds = [k for k, _ in plan]
    assert kinds == ["drain"] * 2 + (["gemm"] * 2 + ["lane"] * 4) * 4 + ["drain"]
    assert [b for k, b in plan if k == "lane"] == [0] * 4 + [1] * 4 + [0] * 4 + [1] * 4
    assert [b for k, b in plan if k == "gemm"] == [frozenset({t % 2}) for t in range(4)
                                                   for _ in range(2)]


def test_key_off_ignores_the_uops():
    """Without the key the uop staging changes nothing (bit-identical predictions)."""
    p = epilogue_program()
    insns = _stream(p)
    uops = np.array(p.uops, np.uint32)
    assert predict_stream(insns, TINY, uops=uops) == predict_stream(insns, TINY)


def test_epilogue_beside_gemms_predicted_as_verilator_runs_it():
    """Tiles alternating between the banks, each ALU epilogue beside the next tile's
    GEMMs: the lane model predicts the ``tiny+overlap`` Verilator cycles within 3%, and
    fewer cycles than the one-pipeline model (the key off) predicts."""
    p = epilogue_program()
    insns = _stream(p)
    uops = np.array(p.uops, np.uint32)
    rtl = p.run(OV, "verilator")[2]
    rtl_off = p.run(TINY, "verilator")[2]
    lane = predict_stream(insns, OV, uops=uops).cycles
    off = predict_stream(insns, TINY, uops=uops).cycles
    assert abs(lane - rtl) <= 0.03 * rtl, (lane, rtl)
    assert abs(off - rtl_off) <= 0.03 * rtl_off, (off, rtl_off)
    assert lane < off and rtl < rtl_off
    # the saving itself within a fifth of the RTL's
    assert abs((off - lane) - (rtl_off - rtl)) <= 0.2 * (rtl_off - rtl), (off - lane,
                                                                          rtl_off - rtl)


def test_compiled_conv2d_predicted_on_the_lane():
    """A compiled 3x3 convolution on ``tiny+overlap`` (the next tile's start before each
    epilogue): the runtime's stream with its uop staging predicted within 3% of Verilator."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (1, 16, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    b = rng.integers(-16384, 16384, 32).astype(np.int32)
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.compiler.ops.cost.events import program_prediction
    cycles = {}
    for cfg in (OV, TINY):
        _, rtl, _, _ = _conv_on(cfg, "verilator", x, w, b)
        plan = plan_conv2d(cfg, x.shape, w.shape, 1, 1, bias=True, shift=8, clip=(0, 127))
        model = program_prediction(plan.program())[0].cycles
        assert abs(model - rtl) <= 0.03 * rtl, (cfg, model, rtl)
        cycles[cfg] = model
    assert cycles[OV] < cycles[TINY]
