"""The store module accepts, pops and starts the next STORE while its writer still
sends the previous one's beats: a fault of the next one is reported only after the
previous one completed (its beats written, its token pushed, counted), as the model
(reference 3.7) halts: every earlier STORE done, the faulting one's g2s token popped
(none for a ``pop_next_dep``/``push_next_dep`` fault, refused before the pop)."""

import numpy as np
import pytest

from rtl_util import DramPortModel, run_sim, store_ref
from test_rtl_memory import StoreBench
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import MemType, Opcode, isa_for
from vtakit.hw.spec import ErrorCode

FIRST = dict(sram_base=0, dram_base=100, x_size=40, y_size=2, x_stride=50, push_prev_dep=1)

FAULTS = {
    "next_dep": (dict(x_size=1, y_size=1, x_stride=1, pop_next_dep=1), ErrorCode.ILLEGAL_FIELD),
    "mem_type": (dict(x_size=1, y_size=1, x_stride=1, memory_type=MemType.INP),
                 ErrorCode.ILLEGAL_MEMORY_TYPE),
    "pad": (dict(x_size=1, y_size=1, x_stride=1, y_pad_0=1), ErrorCode.ILLEGAL_FIELD),
    "sram": (dict(sram_base=2, x_size=None, y_size=1, x_stride=1), ErrorCode.SRAM_OUT_OF_RANGE),
    "dram": (dict(dram_base=None, x_size=2, y_size=1, x_stride=2),      # passes 2**32 bytes
             ErrorCode.DRAM_OUT_OF_RANGE),
}


@pytest.mark.parametrize("preset", ["tiny", "default"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_after_a_running_store(preset, fault):
    config = VTAConfig.preset(preset)
    isa = isa_for(config)
    fields, code = FAULTS[fault]
    fields = dict(dict(memory_type=MemType.OUT, sram_base=0, dram_base=0, pop_prev_dep=1,
                       push_prev_dep=1), **fields)
    if fields["x_size"] is None:
        fields["x_size"] = config.out_depth - 1          # one past the end
    if fields["dram_base"] is None:
        fields["dram_base"] = (1 << 32) // config.out_elem_bytes - 1
    rng = np.random.default_rng(3)
    mask = (1 << config.out_elem_bits) - 1
    init = [(int(v) * 0x9E3779B97F4A7C15) & mask for v in rng.integers(0, 1 << 63, config.out_depth)]
    bench = StoreBench(config, init)
    st = bench.store
    dram = np.zeros(1 << 14, np.uint8)
    model = DramPortModel(dram, config.bus_bytes)
    words = [isa.encode(Opcode.STORE, memory_type=MemType.OUT, **FIRST),
             isa.encode(Opcode.STORE, **fields)]
    log = {}

    async def tb(ctx):
        ctx.set(st.g2s.valid, 1)
        ctx.set(st.s2g.ready, 1)
        sent, pops, pushes, cycle = 0, 0, 0, 0
        while not ctx.get(st.error.valid):
            ctx.set(st.cmd.valid, sent < 2)
            if sent < 2:
                ctx.set(st.cmd.payload.insn, words[sent])
                ctx.set(st.cmd.payload.index, 10 + sent)
            _, _, rdy, pop, push = await ctx.tick().sample(st.cmd.ready, st.g2s.ready,
                                                           st.s2g.valid)
            sent += bool(rdy and sent < 2)
            pops += bool(pop)
            pushes += bool(push)
            if sent == 2 and "accepted" not in log:
                log["accepted"] = cycle
            if ctx.get(st.count) == 1 and "done" not in log:
                log["done"] = cycle
            cycle += 1
            assert cycle < 1000
        log["error"] = cycle
        log.update(code=ctx.get(st.error.code), index=ctx.get(st.error.index),
                   count=ctx.get(st.count), pops=pops, pushes=pushes, busy=ctx.get(st.busy))
        await ctx.tick().repeat(5)
        log["later"] = (ctx.get(st.count), ctx.get(st.error.valid))

    run_sim(bench, tb, processes=[model.process(None, st.dma)])
    np.testing.assert_array_equal(dram, store_ref(len(dram), config.out_elem_bytes, init,
                                                  [FIRST]))
    # The faulting STORE was taken while the first one ran, reported after it completed.
    assert log["accepted"] < log["done"] < log["error"], log
    assert (log["code"], log["index"], log["count"], log["pushes"], log["busy"]) == \
        (code, 11, 1, 1, 0), log
    assert log["pops"] == (fault != "next_dep"), log      # (the first pops none)
    assert log["later"] == (1, 1), log
