"""Exact cycle counts of the STORE and LOAD modules (simulated cycles, not wall time).

The cost model of the compiler is fitted to these counts, so a change of either
pipeline must show up here. Commands are offered back to back (tokens always
available, DRAM reads answered after 1 cycle) and the tests pin the cycles from
the acceptance of one command to the acceptance of the next:

* STORE of ``B`` beats (in one or more bursts per row, at most
  :data:`~vtakit.hw.load_engine.MAX_BURST` beats each): the store accepts, pops and
  starts reading the next command while its writer still sends the previous one's
  beats, and its writer requests each burst while the previous one's beats stream
  (request-ahead, :data:`~vtakit.hw.spec.WRITE_AHEAD`), so the tests pin the cycles
  from one completion (count) to the next: ``B`` behind another STORE that moves data
  (the bursts need no request cycles of their own), ``3 + B`` otherwise (accept, pop +
  checks + first OUT SRAM read, the first burst's request, the beats, push); a NOP
  completes 1 cycle after the STORE before it (it waits for it), 2 after an acceptance
  (see :func:`_store_gaps`);
* LOAD INP/WGT writing ``E`` SRAM elements (padding included) of ``B`` beats:
  see :func:`_load_cost`;
* a NOP (``x_size == 0``) of either: 2 (accept, pop + checks, push + accept).

The range checks run two registered stages ahead, on the command at the head of the
queue (``hw.load_engine.lookahead_checks``): a command that waited there a cycle (each
one here but the first, offered while the previous one runs) is checked when it is
accepted; the first one, accepted in the cycle it arrives, takes one cycle more
(:data:`FRESH`).
"""

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import memory, wiring

from rtl_util import DramPortModel, padded_load_ref, rng_bytes, run_sim, store_ref
from test_rtl_memory import StoreBench
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import MemType, Opcode, isa_for
from vtakit.hw.load import Load
from vtakit.hw.load_engine import MAX_BURST


def _run_back_to_back(bench, unit, words, processes, final=None, push_from=0):
    """Offer ``words`` back to back on ``unit.cmd`` with every token available; return
    the cycle each was accepted and the first cycle seeing each completion (count).
    ``final(ctx)`` runs at the end (to check the SRAMs); the pushed token queue is
    full (not ready) before cycle ``push_from``."""
    accepted, done = [], []
    tokens_in = [p for p in ("g2s", "g2l") if hasattr(unit, p)]
    tokens_out = [p for p in ("s2g", "l2g") if hasattr(unit, p)]

    async def tb(ctx):
        for p in tokens_in:
            ctx.set(getattr(unit, p).valid, 1)
        cycle, count = 0, 0
        while len(done) < len(words):
            for p in tokens_out:
                ctx.set(getattr(unit, p).ready, cycle >= push_from)
            i = len(accepted)
            ctx.set(unit.cmd.valid, i < len(words))
            if i < len(words):
                ctx.set(unit.cmd.payload.insn, words[i])
                ctx.set(unit.cmd.payload.index, i)
            _, _, ready, valid, n = await ctx.tick().sample(unit.cmd.ready, unit.cmd.valid,
                                                            unit.count)
            if ready and valid:
                accepted.append(cycle)
            if n != count:
                done.append(cycle)
                count = n
            cycle += 1
            assert cycle < 10_000
        assert not ctx.get(unit.error.valid)
        if final is not None:
            final(ctx)

    run_sim(bench, tb, processes=processes)
    return accepted, done


#: Extra cycles of a command accepted in the cycle it reached the head of the queue.
FRESH = 1


def _check_timing(accepted, done, costs):
    costs = [costs[0] + FRESH, *costs[1:]] if costs[0] != 2 else costs    # (a NOP needs no checks)
    assert accepted[0] == 0
    got = [b - a for a, b in zip(accepted, accepted[1:])]
    assert got == costs[:-1], got
    # Each one completes (token pushed, count incremented) in the cycle the next one is
    # accepted, the last one included; ``done`` is the first cycle seeing the count.
    assert done == [a + n + 1 for a, n in zip(accepted, costs)], (accepted, done)


# ------------------------------------------------------------------------ store

def _moves(f):
    return f["x_size"] != 0 and f["y_size"] != 0


def _store_gaps(config, cmds):
    """Cycles from the first acceptance to the first completion, then from each
    completion to the next, of STOREs offered back to back (every token available).

    Behind a STORE that moves data, ``B``; except behind one that was accepted only
    when a NOP before it completed (or was the first): the next command reaches the
    head of the queue as that one is accepted and is accepted in the next cycle, so its
    range checks take a cycle more (:data:`FRESH`) and its first beat comes no earlier
    than 2 cycles after that STORE's first beat (a gap after a 1-beat STORE on
    ``tiny``)."""
    gaps, prev, prev_fresh, prev_beats = [], None, False, 0
    for f in cmds:
        moves = _moves(f)
        beats = f["x_size"] * config.out_axi_ratio * f["y_size"] if moves else 0
        if not moves:
            gap = 1 if prev is not None and _moves(prev) else 2
        elif prev is not None and _moves(prev):
            gap = beats + (max(0, 2 - prev_beats) if prev_fresh else 0)
        else:
            gap = 3 + beats
        gaps.append(gap)
        prev_fresh = moves and (prev is None or not _moves(prev))
        prev, prev_beats = f, beats
    if _moves(cmds[0]):
        gaps[0] += FRESH
    return gaps


STORES = [dict(sram_base=0, dram_base=100, x_size=10, y_size=1, x_stride=10),   # one row
          dict(sram_base=20, dram_base=300, x_size=3, y_size=4, x_stride=5),    # 4 rows
          dict(sram_base=0, dram_base=0, x_size=0, y_size=0, x_stride=0,        # NOP
               pop_prev_dep=1, push_prev_dep=1),
          dict(sram_base=40, dram_base=500, x_size=1, y_size=1, x_stride=1,     # 1 element
               push_prev_dep=1),
          dict(sram_base=50, dram_base=600, x_size=130, y_size=2, x_stride=140),  # long rows
          dict(sram_base=7, dram_base=900, x_size=1, y_size=1, x_stride=1,     # 1 element
               push_prev_dep=1),
          dict(sram_base=9, dram_base=910, x_size=2, y_size=3, x_stride=2,
               push_prev_dep=1)]


def _store_bench(config, cmds):
    rng = np.random.default_rng(7)
    mask = (1 << config.out_elem_bits) - 1
    init = [(int(v) * 0x9E3779B97F4A7C15) & mask for v in rng.integers(0, 1 << 63, config.out_depth)]
    bench = StoreBench(config, init)
    dram = np.zeros(1 << 15, np.uint8)
    model = DramPortModel(dram, config.bus_bytes)
    words = [isa_for(config).encode(Opcode.STORE, memory_type=MemType.OUT, **f) for f in cmds]
    return bench, dram, [model.process(None, bench.store.dma)], words, init


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_store_cycles_back_to_back(preset):
    config = VTAConfig.preset(preset)
    bench, dram, procs, words, init = _store_bench(config, STORES)
    accepted, done = _run_back_to_back(bench, bench.store, words, procs)
    np.testing.assert_array_equal(dram, store_ref(len(dram), config.out_elem_bytes, init, STORES))
    assert accepted[0] == 0
    # A command is accepted before the previous one completed (the next two here: the
    # writer takes a STORE once the one before it has requested its last burst).
    assert all(a < d for a, d in zip(accepted[1:], done)), (accepted, done)
    assert accepted[2] < done[0], (accepted, done)
    got = [done[0] - 1] + [b - a for a, b in zip(done, done[1:])]
    assert got == _store_gaps(config, STORES), (accepted, done)


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_store_completions_wait_for_a_full_token_queue(preset):
    """While the s2g queue is full, the first STORE waits to push and the writer holds
    the next one's last burst, so none completes (pushes, counts) before it: all
    complete in order once the queue has room, and the DRAM is written as the model
    does."""
    config = VTAConfig.preset(preset)
    cmds = [dict(f, push_prev_dep=1) for f in STORES if _moves(f)]
    bench, dram, procs, words, init = _store_bench(config, cmds)
    accepted, done = _run_back_to_back(bench, bench.store, words, procs, push_from=600)
    np.testing.assert_array_equal(dram, store_ref(len(dram), config.out_elem_bytes, init, cmds))
    assert done[0] == 601 and done == sorted(set(done)), done
    # The second one's last (only) burst waited for the room (its request was accepted
    # meanwhile): its beats from the cycle of the first one's push, then its push.
    row = cmds[1]["x_size"] * config.out_axi_ratio
    assert done[1] == 600 + row + 1, done


# ------------------------------------------------------------------------ load

class LoadBench(wiring.Component):
    def __init__(self, config):
        self.load = Load(config)
        self.inp = memory.Memory(shape=config.inp_elem_bits, depth=config.inp_depth, init=[])
        self.wgt = memory.Memory(shape=config.wgt_elem_bits, depth=config.wgt_depth, init=[])
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.load, m.submodules.inp, m.submodules.wgt = self.load, self.inp, self.wgt
        wiring.connect(m, self.load.inp_wr, self.inp.write_port())
        wiring.connect(m, self.load.wgt_wr, self.wgt.write_port())
        return m


def _load_cost(config, f):
    """Unpadded: accept, pop + checks + engine start + first burst request, the first
    beat (DRAM latency 1), one more cycle per beat, and the last element's SRAM write
    (assembled by then) in the cycle of the push + accept, so ``2 + B``."""
    if f["x_size"] == 0:
        return 2
    assert not any(f.get(p, 0) for p in ("x_pad_0", "x_pad_1", "y_pad_0", "y_pad_1"))
    elem_bits = config.inp_elem_bits if f["memory_type"] == MemType.INP else config.wgt_elem_bits
    return 2 + f["x_size"] * f["y_size"] * (elem_bits // config.bus_width)


# A padded LOAD writes its 15 SRAM elements one per cycle from the cycle after the
# engine started (so at least 1 + 15 cycles), the zero pads while the DRAM data of the
# next data element is still arriving; on ``default`` the 2-beat elements delay it more.
PADDED = dict(memory_type=MemType.INP, sram_base=40, dram_base=200, x_size=3, y_size=2,
              x_stride=4, y_pad_0=1, x_pad_1=2, push_next_dep=1)
PADDED_COST = {"tiny": 16, "default": 20}


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_load_cycles_back_to_back(preset):
    config = VTAConfig.preset(preset)
    cmds = [dict(memory_type=MemType.INP, sram_base=0, dram_base=100, x_size=10, y_size=1,
                 x_stride=10),
            dict(memory_type=MemType.WGT, sram_base=4, dram_base=30, x_size=2, y_size=3,
                 x_stride=5),
            dict(memory_type=MemType.INP, sram_base=0, dram_base=0, x_size=0, y_size=0,
                 x_stride=0, pop_next_dep=1, push_next_dep=1),
            PADDED,
            dict(memory_type=MemType.INP, sram_base=100, dram_base=300, x_size=1, y_size=1,
                 x_stride=1)]
    bench = LoadBench(config)
    dram = rng_bytes(3, 1 << 15)
    model = DramPortModel(dram, config.bus_bytes)
    words = [isa_for(config).encode(Opcode.LOAD, **f) for f in cmds]
    accepted, done = _run_back_to_back(bench, bench.load, words,
                                       [model.process(bench.load.dma, None)],
                                       final=lambda ctx: _check_srams(ctx, config, bench, dram, cmds))
    _check_timing(accepted, done, [PADDED_COST[preset] if f is PADDED else _load_cost(config, f)
                                   for f in cmds])


def _check_srams(ctx, config, bench, dram, cmds):
    for mem_type, mem, bits in ((MemType.INP, bench.inp, config.inp_elem_bits),
                                (MemType.WGT, bench.wgt, config.wgt_elem_bits)):
        expected = {}
        for f in cmds:
            if f["memory_type"] == mem_type:
                expected.update(padded_load_ref(dram, bits // 8, **{k: v for k, v in f.items()
                                                                     if k in PAD_AND_MEM}))
        for a in range(mem.depth):
            assert ctx.get(mem.data[a]) == expected.get(a, 0), f"{mem_type.name} SRAM[{a}]"


PAD_AND_MEM = ("sram_base", "dram_base", "x_size", "y_size", "x_stride",
               "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")


def test_load_inp_far_in_dram_completes():
    """An INP LOAD whose DRAM range is legal for INP elements but would pass 2**32 bytes
    for the (wider) WGT elements completes: the module waits only for its own engine
    (it used to wait for both engines' ``cmd.ready`` and hang, reloading forever)."""
    config = VTAConfig.preset("default")
    bench = LoadBench(config)
    u = bench.load
    base = (1 << 32) // (config.wgt_elem_bits // 8)      # past the WGT range, not the INP one
    word = isa_for(config).encode(Opcode.LOAD, memory_type=MemType.INP, sram_base=3,
                                  dram_base=base, x_size=1, y_size=1, x_stride=1)
    beat = 0x0123456789ABCDEF

    async def tb(ctx):
        # A DRAM answering every read with the same beat (the image cannot be 4 GiB).
        ctx.set(u.dma.req.ready, 1)
        ctx.set(u.dma.data.valid, 1)
        ctx.set(u.dma.data.payload, beat)
        ctx.set(u.cmd.payload.insn, word)
        ctx.set(u.cmd.valid, 1)
        await ctx.tick()
        ctx.set(u.cmd.valid, 0)
        await ctx.tick().repeat(20)
        assert (ctx.get(u.count), ctx.get(u.busy), ctx.get(u.error.valid)) == (1, 0, 0)
        ratio = config.inp_elem_bits // config.bus_width
        assert ctx.get(bench.inp.data[3]) == sum(beat << (i * config.bus_width)
                                                 for i in range(ratio))

    run_sim(bench, tb)


@pytest.mark.parametrize("unit", ["store", "load"])
def test_push_waits_for_room_then_accepts(unit):
    """A full token queue holds the push (and the next command) until it has room."""
    config = VTAConfig.preset("tiny")
    isa = isa_for(config)
    if unit == "store":
        bench = StoreBench(config, [0] * config.out_depth)
        nop = isa.encode(Opcode.STORE, memory_type=MemType.OUT, push_prev_dep=1)
    else:
        bench = LoadBench(config)
        nop = isa.encode(Opcode.LOAD, memory_type=MemType.INP, push_next_dep=1)
    accepted, done = _run_back_to_back(bench, getattr(bench, unit), [nop, nop], [],
                                       push_from=9)
    assert (accepted, done) == ([0, 9], [10, 12])
