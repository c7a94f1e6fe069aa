"""The event model (:mod:`vtakit.compiler.ops.cost.events`) with the streamed LOAD UOP
(``UOP_STREAM``, ``tiny+uopstream``): a directed program of ``tests/test_rtl_uop_stream.py``
predicted against its Verilator cycles, the stream's waits, and the key off leaving the
prediction as it was."""

import dataclasses

import numpy as np

from test_cost_overlap import _stream
from test_rtl_overlap import Program
from test_rtl_uop_stream import BASE, US, USOV, data_loads, first_and_last
from vtakit.compiler.ops.cost.events import predict_stream
from vtakit.compiler.ops.cost.params import RTL_COST
from vtakit.hw.isa import MemType


def _predict(p, config, cost=RTL_COST):
    return predict_stream(_stream(p), config, cost, uops=np.array(p.uops, np.uint32)).cycles


def test_key_off_predicts_as_before():
    """Without the key the stream's parameters are not read."""
    p = first_and_last(US)
    odd = dataclasses.replace(RTL_COST, uop_stream_cycles=50, uop_stream_wait_cycles=50)
    for config in BASE.values():
        assert _predict(p, config, odd) == _predict(p, config)


def test_streamed_kernel_predicted_as_verilator_runs_it():
    """The first/last kernel (GEMMs reading a 320-micro-op kernel's first micro-ops while it
    streams in): predicted within 3% of Verilator with the key, and fewer cycles than the
    key off predicts, as the RTL runs it."""
    p = first_and_last(US)
    for config in (US, USOV):
        on, off = _predict(p, config), _predict(p, BASE[config])
        rtl, rtl_off = p.run(config, "verilator")[2], p.run(BASE[config], "verilator")[2]
        assert abs(on - rtl) <= 0.03 * rtl, (config.name, on, rtl)
        assert on < off and rtl < rtl_off, (config.name, on, off, rtl, rtl_off)


def test_gemm_waits_for_the_beats_of_its_last_micro_op():
    """A GEMM reading micro-op k of the stream starts later the larger k is, the same
    after the stream whatever k; a GEMM with a push flag waits for the whole load."""
    def program(k, **flags):
        p = Program(1)
        for i in range(400):
            p.uop(i % 64, i % 32, i % 8)
        data_loads(p)
        p.load(MemType.UOP, 0, 0, 400)
        p.gemm(k, ((4, 1, 1, 0), (1, 0, 0, 0)), **flags)
        p.finish()
        return p

    def gemm_start(p, config):
        spans = predict_stream(_stream(p), config, intervals=True,
                               uops=np.array(p.uops, np.uint32)).intervals["compute"]
        return [s.start for s in spans if s.kind == "busy" and s.what == "GEMM"][-1]

    got = [gemm_start(program(k), US) for k in (0, 100, 200, 399)]
    assert got[0] < got[1] < got[2] < got[3], got
    assert gemm_start(program(0), BASE[US]) >= got[3]
    assert gemm_start(program(0, push_prev_dep=1), US) >= got[3]
