"""The VTA top level end to end on pysim: fetch -> load/compute/store -> DRAM, tokens,
CSRs, restart, and error reporting (the error registers are set, nothing is corrupted).

Most tests use :class:`rtl_util.NopCompute` so they exercise only the memory system;
the last ones run the real Compute."""

import numpy as np
import pytest

from rtl_util import DramPortModel, NopCompute, padded_load_ref, run_sim
from vtakit.hw.config import VTAConfig
from vtakit.hw.interfaces import Reg
from vtakit.hw.top import VTA
from vtakit.hw.isa import MemType, Opcode, insns_to_bytes, isa_for
from vtakit.runtime.device import DeviceError
from vtakit.sim.pysim import PysimDevice

TINY = VTAConfig.preset("tiny")
ISA = isa_for(TINY)


def load(mt, **f):
    return ISA.encode(Opcode.LOAD, memory_type=mt, **f)


def store(**f):
    return ISA.encode(Opcode.STORE, memory_type=f.pop("memory_type", MemType.OUT), **f)


FINISH = ISA.encode(Opcode.FINISH)


def nop_device(**kw):
    return PysimDevice(TINY, compute=NopCompute, **kw)


def put_program(dev, words):
    addr = dev.alloc(16 * len(words))
    dev.write(addr, insns_to_bytes(words))
    return addr


def test_load_compute_store_end_to_end():
    dev = nop_device()
    rng = np.random.default_rng(3)
    src = dev.alloc(8192)
    dev.write(src, rng.integers(0, 256, 8192, dtype=np.uint8))
    dst = dev.alloc(4096)
    eb_inp, eb_wgt, eb_out = TINY.inp_elem_bytes, TINY.wgt_elem_bytes, TINY.out_elem_bytes
    out_vals = [int(v) for v in rng.integers(0, 1 << 62, 12)]
    dev.write_sram("out", 4, out_vals)
    inp_f = dict(sram_base=3, dram_base=src // eb_inp + 5, x_size=3, y_size=2, x_stride=7,
                 y_pad_0=1, y_pad_1=0, x_pad_0=1, x_pad_1=2)
    wgt_f = dict(sram_base=1, dram_base=src // eb_wgt + 2, x_size=2, y_size=2, x_stride=3,
                 x_pad_1=1)
    prog = [
        load(MemType.INP, **inp_f),
        load(MemType.WGT, push_next_dep=1, **wgt_f),
        # compute: wait for the loads, tell store the OUT buffer is ready
        load(MemType.UOP, pop_prev_dep=1, push_next_dep=1),
        store(pop_prev_dep=1, push_prev_dep=1, sram_base=4, dram_base=dst // eb_out + 1,
              x_size=3, y_size=4, x_stride=5),
        load(MemType.UOP, pop_next_dep=1),
        FINISH,
    ]
    res = dev.run(put_program(dev, prog), len(prog))
    assert res.stats == {"gemm_counter": 0, "alu_counter": 0, "load_insn_count": 2,
                         "store_insn_count": 1}
    assert 20 < res.cycles < 400
    dram = dev.dram.data
    for name, f, eb in (("inp", inp_f, eb_inp), ("wgt", wgt_f, eb_wgt)):
        for a, v in padded_load_ref(dram, eb, **f).items():
            assert dev.read_sram(name, a)[0] == v, (name, a)
    out = dram[dst:dst + 4096].view(np.uint64)
    expected = np.zeros(512, np.uint64)
    for r in range(4):
        for c in range(3):
            expected[1 + r * 5 + c] = out_vals[r * 3 + c]
    np.testing.assert_array_equal(out, expected)

    # A second run on the same device (SRAMs persist, modules restart).
    prog2 = [store(sram_base=4, dram_base=dst // eb_out + 100, x_size=2, y_size=1, x_stride=2,
                   push_prev_dep=1), load(MemType.UOP, pop_next_dep=1), FINISH]
    res2 = dev.run(put_program(dev, prog2), len(prog2))
    assert res2.stats["store_insn_count"] == 1 and res2.stats["load_insn_count"] == 0
    np.testing.assert_array_equal(out[100:102], out_vals[:2])


def test_instructions_after_finish_are_not_executed():
    dev = nop_device()
    dst = dev.alloc(4096)
    dev.write_sram("out", 0, [0x1122334455667788])
    prog = [FINISH, store(sram_base=0, dram_base=dst // 8, x_size=1, y_size=1, x_stride=1)]
    res = dev.run(put_program(dev, prog), len(prog))
    assert res.stats["store_insn_count"] == 0
    assert not dev.dram.data[dst:dst + 8].any()


WAIT_LOAD = load(MemType.UOP, pop_prev_dep=1)     # compute waits for a load token
WAIT_STORE = load(MemType.UOP, pop_next_dep=1)    # compute waits for a store token


@pytest.mark.parametrize("words,module,code,index", [
    # LOAD INP range: 508 + 3*2 elements > inp depth 512
    ([load(MemType.INP, sram_base=508, dram_base=512, x_size=3, y_size=2, x_stride=3,
           push_next_dep=1), WAIT_LOAD, FINISH], "load", "SRAM_OUT_OF_RANGE", 0),
    ([FINISH & ~7 | 5], "fetch", "ILLEGAL_OPCODE", 0),
    ([load(MemType.INP), 7, FINISH], "fetch", "ILLEGAL_OPCODE", 1),
    ([store(sram_base=0, dram_base=512, x_size=1, y_size=1, x_stride=1, x_pad_0=1,
            push_prev_dep=1), WAIT_STORE, FINISH], "store", "ILLEGAL_FIELD", 0),
    ([store(memory_type=MemType.ACC, sram_base=0, dram_base=512, x_size=1, y_size=1,
            x_stride=1, push_prev_dep=1), WAIT_STORE, FINISH], "store", "ILLEGAL_MEMORY_TYPE", 0),
    ([load(MemType.INP), store(sram_base=510, dram_base=512, x_size=2, y_size=2, x_stride=2,
                               push_prev_dep=1), WAIT_STORE, FINISH],
     "store", "SRAM_OUT_OF_RANGE", 1),
])
def test_errors_are_latched_and_reported(words, module, code, index):
    dev = nop_device()
    before = dev.read_sram("inp", 508, 4)
    addr = put_program(dev, words)
    disasm = str(ISA.decode(words[index]))
    with pytest.raises(DeviceError) as e:
        dev.run(addr, len(words))
    assert str(e.value) == (f"pysim ({TINY.name}): {module} module, instruction {index}: "
                            f"{code} [{disasm}]")
    assert dev.read_sram("inp", 508, 4) == before       # nothing written
    # The device recovers: the next run starts from a clean state.
    res = dev.run(put_program(dev, [FINISH]), 1)
    assert res.stats["load_insn_count"] == 0


def test_deadlock_is_reported_with_module_state():
    dev = nop_device(stall_cycles=500)
    prog = [load(MemType.INP, pop_next_dep=1, push_next_dep=1), WAIT_LOAD, FINISH]  # no g2l
    with pytest.raises(DeviceError, match=r"^pysim \(1x8_i8w8a32_12_12_14_14\): deadlock: no "
                       r"progress for 500 cycles before FINISH running 3 instructions at "
                       r"0x[0-9a-f]+ \(.*; fetch idle, load busy, store idle, load queue 0, "
                       r"compute queue 1, store queue 0, l2g tokens 0/256, g2l tokens 0/256"):
        dev.run(put_program(dev, prog), len(prog))
    # The device recovers: a deadlocked design would ignore the next start.
    res = dev.run(put_program(dev, [FINISH]), 1)
    assert res.stats["load_insn_count"] == 0 and res.cycles > 0


def test_max_cycles_and_missing_finish():
    dev = nop_device(max_cycles=200)
    src = dev.alloc(8192)
    prog = [load(MemType.INP, sram_base=0, dram_base=src // 8, x_size=500, y_size=1,
                 x_stride=500, push_next_dep=1), WAIT_LOAD, FINISH]
    with pytest.raises(DeviceError, match=r"^pysim \(\S+\): no FINISH after 200 cycles running "
                       r"3 instructions at 0x[0-9a-f]+ \(gemm_counter=0, .*load busy"):
        dev.run(put_program(dev, prog), len(prog))
    with pytest.raises(DeviceError, match=r"^pysim \(\S+\): the stream of 1 instructions at "
                       r"0x[0-9a-f]+ has no FINISH; a run ends only when compute executes FINISH$"):
        dev.run(put_program(dev, [load(MemType.INP)]), 1)


def test_full_token_queue_stalls_producer_and_load_streams():
    """Direct testbench on VTA (token_depth 2): load pushes 5 l2g tokens while compute waits
    for a long store; load stalls with the queue full (never more than 2 tokens held), then
    everything completes. The 400-element store streams at one beat per cycle, and a start
    written while busy changes nothing."""
    top = VTA(TINY, token_depth=2, compute=NopCompute(TINY))
    dram = np.zeros(1 << 16, np.uint8)
    words = [load(MemType.INP, push_next_dep=1)] * 5 + [
        store(sram_base=0, dram_base=0x4000 // 8, x_size=400, y_size=1, x_stride=400,
              push_prev_dep=1),
        WAIT_STORE] + [WAIT_LOAD] * 5 + [FINISH]
    dram[0x1000:0x1000 + 16 * len(words)] = np.frombuffer(insns_to_bytes(words), np.uint8)
    model = DramPortModel(dram, TINY.bus_bytes)
    seen = {"max_level": 0, "stalled": 0, "cycles": 0}

    async def tb(ctx):
        for reg, value in ((Reg.INSN_COUNT, len(words)), (Reg.INSN_ADDR, 0x1000), (Reg.CTRL, 1)):
            ctx.set(top.csr.addr, reg)
            ctx.set(top.csr.w_data, value)
            ctx.set(top.csr.w_en, 1)
            await ctx.tick()
        ctx.set(top.csr.w_en, 0)
        ctx.set(top.csr.addr, Reg.CYCLES)
        q, push = top.tokens["l2g"], top.load.l2g
        for n in range(2000):
            # A start while busy is ignored (the run goes on undisturbed).
            ctx.set(top.csr.addr, Reg.CTRL if n == 100 else Reg.CYCLES)
            ctx.set(top.csr.w_data, 1)
            ctx.set(top.csr.w_en, n == 100)
            _, _, level, valid, ready, irq = await ctx.tick().sample(
                q.level, push.valid, push.ready, top.irq)
            seen["max_level"] = max(seen["max_level"], level)
            seen["stalled"] += valid and not ready
            if irq:
                break
        ctx.set(top.csr.w_en, 0)
        ctx.set(top.csr.addr, Reg.CYCLES)
        seen["cycles"] = ctx.get(top.csr.r_data)
        ctx.set(top.csr.addr, Reg.CTRL)
        assert ctx.get(top.csr.r_data) == 0b010        # done, no error, not busy

    run_sim(top, tb, processes=[model.process(top.dram_rd, top.dram_wr)])
    assert seen["max_level"] == 2 and seen["stalled"] > 300
    assert model.writes == 400 and 400 < seen["cycles"] < 400 + 60, seen


def test_load_streams_one_beat_per_cycle_through_the_top():
    """A 64-element WGT load (8 beats per element on tiny) and a 256-element INP load run
    at one DRAM beat per cycle through fetch, the read arbiter and the load engines."""
    dev = nop_device()
    src = dev.alloc(1 << 15)
    beats = 64 * TINY.wgt_axi_ratio + 256 * TINY.inp_axi_ratio
    prog = [load(MemType.WGT, sram_base=0, dram_base=src // TINY.wgt_elem_bytes, x_size=64,
                 y_size=1, x_stride=64),
            load(MemType.INP, sram_base=0, dram_base=src // TINY.inp_elem_bytes, x_size=256,
                 y_size=1, x_stride=256, push_next_dep=1),
            WAIT_LOAD, FINISH]
    res = dev.run(put_program(dev, prog), len(prog))
    assert beats < res.cycles < beats + 40, res.cycles


def test_real_compute_error_reports_compute_module():
    dev = PysimDevice(TINY)
    # LOAD ACC beyond the acc SRAM (depth 512).
    prog = [load(MemType.ACC, sram_base=511, dram_base=64, x_size=2, y_size=1, x_stride=2),
            FINISH]
    with pytest.raises(DeviceError, match=r"^pysim \(\S+\): compute module, instruction 0: "
                       r"SRAM_OUT_OF_RANGE \[LOAD   ACC "):
        dev.run(put_program(dev, prog), len(prog))


def test_banked_out_sram_reads_as_one():
    """With ``COMPUTE_OVERLAP`` the out SRAM is two banks (``out0``/``out1``); ``out`` still
    addresses the whole of it: what write_sram puts across the bank border, read_sram and a
    STORE read back in order."""
    from vtakit.hw.config import load_config
    cfg = load_config("tiny+overlap")
    isa = isa_for(cfg)
    dev = PysimDevice(cfg)
    half = cfg.out_depth // 2
    vals = [(0x0102030405060708 * (i + 1)) & ((1 << 64) - 1) for i in range(6)]
    dev.write_sram("out", half - 3, vals)
    assert dev.read_sram("out", half - 3, 6) == vals
    assert dev.read_sram("out1", 0, 3) == vals[3:]
    dst = dev.alloc(4096)
    prog = [isa.encode(Opcode.STORE, memory_type=MemType.OUT, sram_base=half - 3,
                       dram_base=dst // cfg.out_elem_bytes, x_size=6, y_size=1, x_stride=6,
                       push_prev_dep=1),
            isa.encode(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1),
            isa.encode(Opcode.FINISH)]
    dev.run(put_program(dev, prog), len(prog))
    got = dev.dram.data[dst:dst + 6 * cfg.out_elem_bytes].view(np.uint64)
    np.testing.assert_array_equal(got, np.array(vals, np.uint64))
    with pytest.raises(DeviceError, match=f"outside its {cfg.out_depth} rows"):
        dev.read_sram("out", cfg.out_depth - 1, 2)
