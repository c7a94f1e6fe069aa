"""Unit tests of the memory system: LoadEngine, DMA arbiters, token and command queues,
fetch dispatch, load and store modules. Each is checked against a plain-Python reference."""

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import memory, wiring

from rtl_util import DramPortModel, padded_load_ref, rng_bytes, run_sim, send
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import MemType, Opcode, isa_for
from vtakit.hw.load_engine import LoadEngine

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


def test_load_engine_read_latency():
    """Results do not depend on DRAM latency."""
    cmd = dict(sram_base=1, dram_base=200, x_size=3, y_size=2, x_stride=4, y_pad_0=1, x_pad_1=1)
    _run_engine(DEFAULT, DEFAULT.acc_elem_bits, 32, [cmd], latency=7)
