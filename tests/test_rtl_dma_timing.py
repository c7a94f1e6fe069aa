"""Exact cycle counts of the STORE module (simulated cycles, not wall time).

The cost model of the compiler is fitted to these counts, so a change of the
store pipeline must show up here. A STORE of ``y`` rows of ``B`` beats in all
takes ``3 + B + (bursts - 1)`` cycles from its acceptance to the acceptance of the
next command (accept, pop + checks + first SRAM read, burst request, the beats, push
+ accept; one more cycle per extra burst, i.e. per extra row and per
:data:`~vtakit.hw.load_engine.MAX_BURST` beats of a row); a NOP (``x_size == 0``)
takes 2.
"""

import numpy as np
import pytest

from rtl_util import DramPortModel, run_sim
from test_rtl_memory import StoreBench
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import MemType, Opcode, isa_for
from vtakit.hw.load_engine import MAX_BURST


def _run_stores(config, cmds):
    """Offer ``cmds`` back to back (command valid all the time, tokens always there);
    return the cycle each one was accepted, the cycle of the last completion and the
    DRAM image."""
    rng = np.random.default_rng(7)
    init = [int(v) for v in rng.integers(0, 1 << 63, config.out_depth)]
    init = [v | (v << 64) for v in init] if config.out_elem_bits > 64 else init
    init = [v & ((1 << config.out_elem_bits) - 1) for v in init]
    bench = StoreBench(config, init)
    st = bench.store
    dram = np.zeros(1 << 15, np.uint8)
    model = DramPortModel(dram, config.bus_bytes)
    accepted, done = [], []
    words = [isa_for(config).encode(Opcode.STORE, memory_type=MemType.OUT, **f) for f in cmds]

    async def tb(ctx):
        ctx.set(st.g2s.valid, 1)
        ctx.set(st.s2g.ready, 1)
        cycle, count = 0, 0
        while len(done) < len(cmds):
            i = len(accepted)
            ctx.set(st.cmd.valid, i < len(words))
            if i < len(words):
                ctx.set(st.cmd.payload.insn, words[i])
                ctx.set(st.cmd.payload.index, i)
            _, _, ready, valid, n = await ctx.tick().sample(st.cmd.ready, st.cmd.valid,
                                                            st.count)
            if ready and valid:
                accepted.append(cycle)
            if n != count:
                done.append(cycle)      # the count register changed at this edge
                count = n
            cycle += 1
            assert cycle < 10_000
        assert not ctx.get(st.error.valid)

    run_sim(bench, tb, processes=[model.process(None, st.dma)])
    e = config.out_elem_bytes
    expected = np.zeros_like(dram)
    for f in cmds:
        for r in range(f["y_size"]):
            for c in range(f["x_size"]):
                a = (f["dram_base"] + r * f["x_stride"] + c) * e
                expected[a:a + e] = np.frombuffer(
                    init[f["sram_base"] + r * f["x_size"] + c].to_bytes(e, "little"), np.uint8)
    np.testing.assert_array_equal(dram, expected)
    return accepted, done


def _cost(config, f):
    """The designed cycles of one STORE, acceptance to acceptance of the next."""
    if f["x_size"] == 0:
        return 2
    row = f["x_size"] * config.out_axi_ratio
    bursts = f["y_size"] * -(-row // MAX_BURST)
    return 3 + row * f["y_size"] + (bursts - 1)


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_store_cycles_back_to_back(preset):
    config = VTAConfig.preset(preset)
    cmds = [dict(sram_base=0, dram_base=100, x_size=10, y_size=1, x_stride=10),   # one row
            dict(sram_base=20, dram_base=300, x_size=3, y_size=4, x_stride=5),    # 4 rows
            dict(sram_base=0, dram_base=0, x_size=0, y_size=0, x_stride=0,        # NOP
                 pop_prev_dep=1, push_prev_dep=1),
            dict(sram_base=40, dram_base=500, x_size=1, y_size=1, x_stride=1,     # 1 element
                 push_prev_dep=1),
            dict(sram_base=50, dram_base=600, x_size=130, y_size=2, x_stride=140)]  # long rows
    accepted, done = _run_stores(config, cmds)
    assert accepted[0] == 0
    got = [b - a for a, b in zip(accepted, accepted[1:])]
    assert got == [_cost(config, f) for f in cmds[:-1]], got
    # Each one completes (token pushed, count incremented) in the cycle the next one
    # is accepted, the last one included; ``done`` is the first cycle seeing the count.
    assert done == [a + _cost(config, f) + 1 for a, f in zip(accepted, cmds)], (accepted, done)
