"""Unit tests of the memory system: LoadEngine, DMA arbiters, token and command queues,
fetch dispatch, load and store modules. Each is checked against a plain-Python reference."""

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import memory, wiring

from rtl_util import (DramPortModel, padded_load_ref, recv, rng_bytes, run_sim, send,
                      store_ref)
from vtakit.hw.config import VTAConfig
from vtakit.hw.dma import DmaReadArbiter, DmaWriteArbiter
from vtakit.hw.fetch import Fetch
from vtakit.hw.interfaces import ErrorCode
from vtakit.hw.isa import MemType, Opcode, isa_for
from vtakit.hw.load_engine import LoadEngine
from vtakit.hw.queues import CommandQueue, TokenQueue
from vtakit.hw.store import Store

DEFAULT = VTAConfig.preset("default")
ULTRA96 = VTAConfig.preset("ultra96")   # 128-bit bus


class EngineBench(wiring.Component):
    """A LoadEngine writing into a small Memory (so the test reads back real SRAM)."""

    def __init__(self, config, elem_bits, depth, init):
        self.engine = LoadEngine(config, elem_bits=elem_bits, addr_width=depth.bit_length() - 1)
        self.mem = memory.Memory(shape=elem_bits, depth=depth, init=init)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = self.engine
        m.submodules.mem = self.mem
        wiring.connect(m, self.engine.sram, self.mem.write_port())
        return m


def _mem_cmd(config, **f):
    return isa_for(config).mem.encode(opcode=Opcode.LOAD, **f)


def _run_engine(config, elem_bits, depth, cmds, *, dram_bytes=1 << 15, latency=1, seed=1):
    """Run LOAD commands through one engine; check SRAM against the reference after each.
    Returns the cycle counts (accept to done) of each command."""
    dram = rng_bytes(seed, dram_bytes)
    init = [int(v) & ((1 << elem_bits) - 1)
            for v in np.random.default_rng(seed + 1).integers(0, 1 << 62, depth)]
    bench = EngineBench(config, elem_bits, depth, init)
    eng = bench.engine
    model = DramPortModel(dram, config.bus_bytes, read_latency=latency)
    expected = dict(enumerate(init))
    cycles = []

    async def tb(ctx):
        for fields in cmds:
            await send(ctx, eng.cmd, _mem_cmd(config, **fields))
            n = 0
            while not ctx.get(eng.done):
                await ctx.tick()
                n += 1
            cycles.append(n)
            expected.update(padded_load_ref(dram, elem_bits // 8, **fields))
            for a in range(depth):
                assert ctx.get(bench.mem.data[a]) == expected[a] & ((1 << elem_bits) - 1), \
                    f"{fields}: SRAM[{a}]"
            assert not ctx.get(eng.busy)

    run_sim(bench, tb, processes=[model.process(eng.dma, None)])
    return cycles


PADS = list(itertools.product((0, 2), (0, 1), (0, 1), (0, 2)))   # y_pad_0, y_pad_1, x_pad_0, x_pad_1


@pytest.mark.parametrize("config,kind", [(DEFAULT, "inp"), (DEFAULT, "wgt"), (DEFAULT, "acc"),
                                         (ULTRA96, "inp"), (ULTRA96, "acc")])
def test_load_engine_every_pad_combination(config, kind):
    elem_bits = getattr(config, f"{kind}_elem_bits")
    eb = elem_bits // 8
    cmds = []
    for n, (yp0, yp1, xp0, xp1) in enumerate(PADS):
        cmds.append(dict(sram_base=n % 3, dram_base=(4096 // eb) + n, x_size=2 + n % 2,
                         y_size=1 + n % 3, x_stride=5, y_pad_0=yp0, y_pad_1=yp1,
                         x_pad_0=xp0, x_pad_1=xp1))
    # x_size == 0 writes nothing; y_size == 0 writes only the padding rows.
    cmds.append(dict(sram_base=1, dram_base=0, x_size=0, y_size=3, x_stride=0, y_pad_0=1))
    cmds.append(dict(sram_base=2, dram_base=3, x_size=2, y_size=0, x_stride=0, y_pad_0=1,
                     y_pad_1=1, x_pad_1=1))
    _run_engine(config, elem_bits, 64, cmds)


@pytest.mark.parametrize("config", [DEFAULT, ULTRA96])
def test_load_engine_unaligned_uops(config):
    per_beat = config.bus_width // 32
    cmds = [dict(sram_base=s, dram_base=1024 + d, x_size=x, y_size=1, x_stride=0)
            for s, d, x in [(0, 0, 1), (3, 1, 1), (5, 1, 2), (9, 3, 7), (20, 2, 5), (30, 1, 13),
                            (0, per_beat - 1, 1), (2, 0, 0)]]
    _run_engine(config, 32, 64, cmds)


def test_load_engine_one_beat_per_cycle():
    """A long unpadded WGT load (32 beats per element, 8 elements = 256 beats in one burst,
    then a second row) takes one cycle per beat plus a few cycles of latency."""
    cmd = dict(sram_base=0, dram_base=16, x_size=8, y_size=2, x_stride=8)
    beats = 2 * 8 * DEFAULT.wgt_axi_ratio
    (cycles,) = _run_engine(DEFAULT, DEFAULT.wgt_elem_bits, 16, [cmd], dram_bytes=1 << 14)
    assert beats <= cycles <= beats + 4, cycles
    # INP: 2 beats per element; 40 elements in one row.
    cmd = dict(sram_base=0, dram_base=300, x_size=40, y_size=1, x_stride=40)
    (cycles,) = _run_engine(DEFAULT, DEFAULT.inp_elem_bits, 64, [cmd])
    assert 80 <= cycles <= 84, cycles


@pytest.mark.parametrize("config,kind", [(DEFAULT, "inp"), (ULTRA96, "acc"), (DEFAULT, "uop")])
def test_load_engine_random_commands(config, kind):
    """Random sizes, strides, bases and pads over the full 4-bit pad range."""
    elem_bits = 32 if kind == "uop" else getattr(config, f"{kind}_elem_bits")
    eb, depth = elem_bits // 8, 512
    rng = np.random.default_rng({"inp": 1, "acc": 2, "uop": 3}[kind])
    cmds = []
    while sum(f["x_size"] > 0 for f in cmds) < 10:
        f = dict(x_size=int(rng.integers(0, 9)), y_size=int(rng.integers(0, 4)),
                 x_stride=int(rng.integers(0, 12)), dram_base=int(rng.integers(0, 4000 // eb)),
                 sram_base=int(rng.integers(0, depth)))
        if kind == "uop":
            f["y_size"] = 1
        else:
            f.update(zip(("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"),
                         (int(v) for v in rng.integers(0, 16, 4))))
        written = padded_load_ref(np.zeros(1 << 13, np.uint8), 1, **{**f, "dram_base": 0})
        if f["sram_base"] + len(written) <= depth:      # the caller's range check
            cmds.append(f)
    assert any(f["x_size"] == 0 for f in cmds) or kind == "uop"
    _run_engine(config, elem_bits, depth, cmds, dram_bytes=1 << 13)


def test_load_engine_read_latency():
    """Results do not depend on DRAM latency."""
    cmd = dict(sram_base=1, dram_base=200, x_size=3, y_size=2, x_stride=4, y_pad_0=1, x_pad_1=1)
    _run_engine(DEFAULT, DEFAULT.acc_elem_bits, 32, [cmd], latency=7)


# ------------------------------------------------------------------------ token queues

@pytest.mark.parametrize("depth", [1, 3])
def test_token_queue_full_and_empty(depth):
    """Against a counter model: push.ready falls at depth tokens, pop.valid at zero;
    simultaneous push and pop keep the level (also when full)."""
    q = TokenQueue(depth)
    rng = np.random.default_rng(depth)
    pattern = [(int(a), int(b)) for a, b in rng.integers(0, 2, (200, 2))]
    pattern = [(1, 0)] * (depth + 2) + [(1, 1)] * 3 + pattern + [(0, 1)] * (depth + 2)

    async def tb(ctx):
        level = 0
        seen_full = seen_empty = False
        for push, pop in pattern:
            ctx.set(q.push.valid, push)
            ctx.set(q.pop.ready, pop)
            assert ctx.get(q.push.ready) == (level < depth)
            assert ctx.get(q.pop.valid) == (level > 0)
            seen_full |= level == depth
            seen_empty |= level == 0
            level += (push and level < depth) - (pop and level > 0)
            await ctx.tick()
            assert ctx.get(q.level) == level
        assert seen_full and seen_empty and level == 0

    run_sim(q, tb)


def test_command_queue_order_and_capacity():
    q = CommandQueue(4)
    cmds = [(0x1234 + 7 * i, i) for i in range(10)]

    async def tb(ctx):
        for insn, index in cmds[:4]:
            await send(ctx, q.push, {"insn": insn, "index": index})
        assert not ctx.get(q.push.ready)            # full after 4
        assert ctx.get(q.level) == 4
        got = []
        for _ in range(4):
            got.append(await recv(ctx, q.pop))
        assert [(g & ((1 << 128) - 1), g >> 128) for g in got] == cmds[:4]
        assert not ctx.get(q.pop.valid)

    run_sim(q, tb)


def test_queue_depth_checked():
    with pytest.raises(ValueError, match=r"^token queue depth must be a positive integer, got 0$"):
        TokenQueue(0)
    with pytest.raises(ValueError, match=r"^command queue depth must be an integer >= 2, got 1$"):
        CommandQueue(1)


# ------------------------------------------------------------------------ DMA arbiters

def _read_clients(arb, reqs, seed, start=None):
    """Run ``arb`` against a DRAM model: client ``c`` sends its ``reqs[c]`` (byte address,
    beats) from cycle ``start[c]`` (default 0) and takes every beat at once. Checks that
    each client gets exactly its own data in order; returns the cycle each got its last."""
    cfg = DEFAULT
    dram = rng_bytes(seed, 1 << 14)
    model = DramPortModel(dram, cfg.bus_bytes)
    got, done_at = {c: [] for c in reqs}, {}

    def requester(c):
        async def tb(ctx):
            if (start or {}).get(c):
                await ctx.tick().repeat(start[c])
            for addr, beats in reqs[c]:
                await send(ctx, arb.clients[c].req, addr | beats << 32)
        return tb

    def receiver(c):
        async def tb(ctx):
            port = arb.clients[c].data
            ctx.set(port.ready, 1)
            n, cycle = sum(b for _, b in reqs[c]), 0
            async for _, _, valid, payload in ctx.tick().sample(port.valid, port.payload):
                cycle += 1
                assert cycle < 2000, f"client {c}: only {len(got[c])} of {n} beats arrived"
                if valid:
                    got[c].append(payload)
                    if len(got[c]) == n:
                        done_at[c] = cycle
                        return
        return tb

    run_sim(arb, [requester(c) for c in reqs] + [receiver(c) for c in reqs],
            processes=[model.process(arb.master, None)])
    nb = cfg.bus_bytes
    for c in reqs:
        assert got[c] == [int.from_bytes(dram[a + nb * i:a + nb * (i + 1)].tobytes(), "little")
                          for a, beats in reqs[c] for i in range(beats)], c
    return done_at


def test_read_arbiter_routes_bursts_at_one_beat_per_cycle():
    """Three clients issue four 8-beat bursts each at once; every client receives exactly
    its own data, in order, and the 96 beats take 96 cycles plus a small constant."""
    reqs = {c: [(4096 * c + 512 * k + 8 * c, 8) for k in range(4)] for c in range(3)}
    done_at = _read_clients(DmaReadArbiter(DEFAULT, 3, max_outstanding=4), reqs, 5)
    assert max(done_at.values()) <= 96 + 4, done_at


@pytest.mark.parametrize("max_beats", [None, 16])
def test_read_ahead_bounds_the_wait_behind_another_clients_bursts(max_beats):
    """Client 0 queues eight 64-beat bursts at once (the load module streaming weights);
    client 1 asks for one beat at cycle 20 (a compute-module LOAD). Beats return in
    request order, so without a read-ahead limit it waits behind every burst queued
    before it; with ``max_beats`` behind at most that many beats and one burst. Either
    way client 0's 512 beats stream at one per cycle and every beat reaches its owner."""
    arb = DmaReadArbiter(DEFAULT, 2, max_outstanding=8, max_beats=max_beats)
    reqs = {0: [(512 * k, 64) for k in range(8)], 1: [(8192 + 40, 1)]}
    done_at = _read_clients(arb, reqs, 6, start={1: 20})
    assert done_at[0] <= 512 + 1 + 8, done_at           # the stream keeps its pace
    if max_beats is None:
        assert done_at[1] > 20 + 6 * 64, done_at        # behind the queued bursts
    else:
        assert done_at[1] <= 20 + max_beats + 64 + 8, done_at


def test_write_arbiter_locks_per_burst():
    cfg = DEFAULT
    arb = DmaWriteArbiter(cfg, 2)
    dram = np.zeros(1 << 13, np.uint8)
    model = DramPortModel(dram, cfg.bus_bytes)
    bursts = {0: [(0, [1, 2, 3]), (64, [4])], 1: [(1024, [5, 6]), (2048, [7, 8, 9, 10])]}

    def writer(c):
        async def tb(ctx):
            for addr, beats in bursts[c]:
                await send(ctx, arb.clients[c].req, addr | len(beats) << 32)
                for b in beats:
                    await send(ctx, arb.clients[c].data, b)
        return tb

    async def drain(ctx):
        for _ in range(60):
            await ctx.tick()
        assert not ctx.get(arb.busy)

    run_sim(arb, [writer(0), writer(1), drain], processes=[model.process(None, arb.master)])
    words = dram.view(np.uint64)
    for c in bursts:
        for addr, beats in bursts[c]:
            assert list(words[addr // 8:addr // 8 + len(beats)]) == beats


def test_write_arbiter_requests_ahead():
    """Request-ahead (``WRITE_AHEAD``): a client offering its next request while its
    beats stream gets it accepted by the arbiter and the DRAM model, so the beats of its
    bursts follow each other with no cycle between them, and land where requested."""
    cfg = DEFAULT
    arb = DmaWriteArbiter(cfg, 1)
    dram = np.zeros(1 << 13, np.uint8)
    model = DramPortModel(dram, cfg.bus_bytes)
    bursts = [(0, [1, 2, 3]), (64, [4]), (128, [5, 6]), (512, [7, 8, 9, 10]), (1024, [11])]
    waits = []

    async def requests(ctx):
        for addr, beats in bursts:
            await send(ctx, arb.clients[0].req, addr | len(beats) << 32)

    async def beats(ctx):
        for _, words in bursts:
            for w in words:
                waits.append(await send(ctx, arb.clients[0].data, w))
        await ctx.tick()
        assert not ctx.get(arb.busy)

    run_sim(arb, [requests, beats], processes=[model.process(None, arb.master)])
    assert waits[0] == 1 and not any(waits[1:]), waits     # one per cycle after the first
    words = dram.view(np.uint64)
    for addr, beats in bursts:
        assert list(words[addr // 8:addr // 8 + len(beats)]) == beats


# ------------------------------------------------------------------------ fetch

def _route(word):
    op, mt = word & 7, (word >> 7) & 7
    if op == Opcode.STORE:
        return "store"
    if op == Opcode.LOAD:
        return "load" if mt in (MemType.INP, MemType.WGT) else "compute"
    return "compute" if op in (Opcode.GEMM, Opcode.ALU, Opcode.FINISH) else "illegal"


def _run_fetch(config, words, *, count=None, stall_compute=0):
    fetch = Fetch(config)
    dram = np.zeros(1 << 14, np.uint8)
    base = 0x1000
    dram[base:base + 16 * len(words)] = np.frombuffer(
        b"".join(w.to_bytes(16, "little") for w in words), np.uint8)
    model = DramPortModel(dram, config.bus_bytes)
    got = {"load": [], "compute": [], "store": []}
    result = {}

    def receiver(name):
        async def tb(ctx):
            port = getattr(fetch, f"{name}_cmd")
            cycle = 0
            async for _, _, valid, ready, payload in ctx.tick().sample(
                    port.valid, port.ready, port.payload.as_value()):
                cycle += 1
                if valid and ready:
                    got[name].append((payload & ((1 << 128) - 1), payload >> 128))
                # compute accepts only every few cycles: the other queues must not care
                ctx.set(port.ready, not stall_compute or name != "compute"
                        or cycle % stall_compute == 0)
        return tb

    async def tb(ctx):
        ctx.set(fetch.insn_addr, base)
        ctx.set(fetch.insn_count, len(words) if count is None else count)
        ctx.set(fetch.start, 1)
        await ctx.tick()
        ctx.set(fetch.start, 0)
        for n in range(2000):
            await ctx.tick()
            if not ctx.get(fetch.busy) or ctx.get(fetch.error.valid):
                break
        result["cycles"] = n
        result["busy"] = ctx.get(fetch.busy)
        result["error"] = (ctx.get(fetch.error.valid), ctx.get(fetch.error.code),
                           ctx.get(fetch.error.index))

    run_sim(fetch, tb, processes=[model.process(fetch.dma, None)],
            background=[receiver(n) for n in got])
    return got, result


@pytest.mark.parametrize("config", [DEFAULT, ULTRA96])
def test_fetch_dispatch_and_indices(config):
    isa = isa_for(config)
    rng = np.random.default_rng(2)
    words = []
    for i in range(40):
        kind = rng.integers(0, 5)
        if kind == 0:
            words.append(isa.encode(Opcode.LOAD, memory_type=int(rng.integers(0, 4)), x_size=i))
        elif kind == 1:
            words.append(isa.encode(Opcode.STORE, memory_type=MemType.OUT, x_size=i))
        elif kind == 2:
            words.append(isa.encode(Opcode.GEMM, uop_end=i))
        elif kind == 3:
            words.append(isa.encode(Opcode.ALU, uop_end=i, imm=-i))
        else:
            words.append(isa.encode(Opcode.LOAD, memory_type=MemType.INP, y_size=i))
    words += [isa.encode(Opcode.FINISH), isa.encode(Opcode.STORE, x_size=1), 6]  # dropped
    got, result = _run_fetch(config, words, stall_compute=3)
    want = {"load": [], "compute": [], "store": []}
    for i, w in enumerate(words[:41]):
        want[_route(w)].append((w, i))
    assert got == want
    assert result["error"] == (0, 0, 0)
    assert not result["busy"]           # the words after FINISH were fetched and dropped


def test_fetch_illegal_opcode_stops_with_index():
    isa = isa_for(DEFAULT)
    words = [isa.encode(Opcode.GEMM), isa.encode(Opcode.STORE), 0x5 | 1 << 100,
             isa.encode(Opcode.FINISH)]
    got, result = _run_fetch(DEFAULT, words)
    assert result["error"] == (1, ErrorCode.ILLEGAL_OPCODE, 2)
    assert got == {"load": [], "compute": [(words[0], 0)], "store": [(words[1], 1)]}


# ------------------------------------------------------------------------ store

class StoreBench(wiring.Component):
    def __init__(self, config, init):
        self.store = Store(config)
        self.mem = memory.Memory(shape=config.out_elem_bits, depth=config.out_depth, init=init)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.store, m.submodules.mem = self.store, self.mem
        wiring.connect(m, self.store.out_rd, self.mem.read_port())
        return m


def test_store_rows_bursts_and_throughput():
    cfg = VTAConfig.preset("tiny").replace(log_acc_buff_size=9)   # 16-entry OUT SRAM
    depth, eb = cfg.out_depth, cfg.out_elem_bytes
    init = [int(v) for v in np.random.default_rng(4).integers(0, 1 << 63, depth)]
    cfg_d = DEFAULT.replace(log_acc_buff_size=12)                 # 32 entries, 2 beats each
    cases = [(cfg, init, [dict(sram_base=2, dram_base=600, x_size=3, y_size=4, x_stride=5),
                          dict(sram_base=0, dram_base=700, x_size=16, y_size=1, x_stride=16),
                          dict(sram_base=5, dram_base=800, x_size=1, y_size=3, x_stride=2)]),
             (cfg_d, [v | (v << 64) for v in init * 2],
              [dict(sram_base=0, dram_base=300, x_size=32, y_size=1, x_stride=0),
               dict(sram_base=1, dram_base=400, x_size=2, y_size=3, x_stride=7)])]
    for config, mem_init, cmds in cases:
        bench = StoreBench(config, mem_init)
        st = bench.store
        dram = np.zeros(1 << 15, np.uint8)
        model = DramPortModel(dram, config.bus_bytes)
        cycles = []

        async def tb(ctx):
            ctx.set(st.g2s.valid, 1)
            ctx.set(st.s2g.ready, 1)
            for f in cmds:
                word = isa_for(config).encode(Opcode.STORE, memory_type=MemType.OUT, **f)
                await send(ctx, st.cmd, {"insn": word, "index": 0})
                n = 1
                while ctx.get(st.busy):
                    await ctx.tick()
                    n += 1
                cycles.append(n)
                assert ctx.get(st.count) == len(cycles)

        run_sim(bench, tb, processes=[model.process(None, st.dma)])
        np.testing.assert_array_equal(
            dram, store_ref(len(dram), config.out_elem_bytes, mem_init, cmds))
        if config is cfg_d:      # 64 beats in one burst: one beat per cycle
            assert cycles[0] <= 64 + 8, cycles


@pytest.mark.parametrize("priority", [(), (2,)])
def test_read_priority_serves_the_compute_loader_before_the_round(priority):
    """Clients 0 and 1 stream 64-beat bursts (fetch and the load module); client 2 (a
    compute-module LOAD) asks for one beat at cycle 20. With the read-ahead at 16 beats
    every request waits for room; then the round robin may pick a streaming client
    first, a priority client is picked at once. Every beat still reaches its owner and
    the streams keep their pace."""
    arb = DmaReadArbiter(DEFAULT, 3, max_outstanding=8, max_beats=16, priority=priority)
    reqs = {0: [(512 * k, 64) for k in range(4)], 1: [(4096 + 512 * k, 64) for k in range(4)],
            2: [(8192 + 40, 1)]}
    done_at = _read_clients(arb, reqs, 7, start={2: 20})
    assert max(done_at[0], done_at[1]) <= 512 + 1 + 8, done_at
    # behind the burst in flight at most; without the priority also behind the next one
    # of the round (66 and 130 cycles)
    bound = 20 + 64 + 16
    assert (done_at[2] <= bound) if priority else (done_at[2] > bound), done_at
