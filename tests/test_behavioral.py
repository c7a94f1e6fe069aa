"""The behavioral model against independent numpy references.

Streams are hand-assembled with ``isa_for(cfg).encode``; GEMM and ALU results are
checked against :mod:`vtakit.sim.reference`, the plain sequential loops over (p, q, k)
written from reference section 3 and the lead's pins, independent of the model's
vectorized datapath (tests/test_reference.py diffs the two on random instructions).
"""

import numpy as np
import pytest
from alu_check import wrap32

from vtakit.hw.interfaces import DEFAULT_TOKEN_DEPTH, ErrorCode, Unit
from vtakit.hw.isa import AluOp, MemType, Opcode, insns_to_bytes, isa_for
from vtakit.cli.main import main
from vtakit.sim import DeviceError, DramImage, RunRecord, open_device
from vtakit.sim import reference
from vtakit.sim.behavioral import BehavioralDevice
from vtakit.sim.datapath import Counters, SRAMs
from vtakit.runtime.device import DeviceFault

PRESETS = ["default", "4x8", "tiny"]


# ---------------------------------------------------------------- stream builder

class Prog:
    """A hand-assembled stream on a fresh behavioral device."""

    def __init__(self, preset="default", **options):
        self.dev = BehavioralDevice(preset, **options)
        self.cfg = self.dev.config
        self.isa = isa_for(self.cfg)
        self.insns = []

    def data(self, array) -> int:
        array = np.ascontiguousarray(array)
        addr = self.dev.alloc(max(1, array.nbytes))
        self.dev.write(addr, array)
        return addr

    def emit(self, opcode, **fields) -> int:
        self.insns.append(self.isa.encode(opcode, **fields))
        return len(self.insns) - 1

    def load(self, mem, sram, addr, x, y=1, stride=None, pads=(0, 0, 0, 0), **deps):
        e = self.cfg.elem_bytes(mem)
        assert addr % e == 0
        y0, y1, x0, x1 = pads
        return self.emit(Opcode.LOAD, memory_type=mem, sram_base=sram, dram_base=addr // e,
                         x_size=x, y_size=y, x_stride=x if stride is None else stride,
                         y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1, **deps)

    def store(self, sram, addr, x, y=1, stride=None, **fields):
        e = self.cfg.out_elem_bytes
        fields.setdefault("memory_type", MemType.OUT)
        return self.emit(Opcode.STORE, sram_base=sram, dram_base=addr // e, x_size=x,
                         y_size=y, x_stride=x if stride is None else stride, **fields)

    def uops(self, triples, sram=0, **deps):
        words = np.array([self.isa.encode_uop(*t) for t in triples], np.uint32)
        return self.load(MemType.UOP, sram, self.data(words), len(words), **deps)

    def gemm(self, bgn, end, iters=(1, 1), dst=(0, 0), src=(0, 0), wgt=(0, 0), reset=0,
             **deps):
        return self.emit(Opcode.GEMM, reset_reg=reset, uop_bgn=bgn, uop_end=end,
                         iter_out=iters[0], iter_in=iters[1],
                         dst_factor_out=dst[0], dst_factor_in=dst[1],
                         src_factor_out=src[0], src_factor_in=src[1],
                         wgt_factor_out=wgt[0], wgt_factor_in=wgt[1], **deps)

    def alu(self, op, bgn, end, iters=(1, 1), dst=(0, 0), src=(0, 0), imm=None, **fields):
        return self.emit(Opcode.ALU, alu_opcode=op, uop_bgn=bgn, uop_end=end,
                         iter_out=iters[0], iter_in=iters[1],
                         dst_factor_out=dst[0], dst_factor_in=dst[1],
                         src_factor_out=src[0], src_factor_in=src[1],
                         use_imm=imm is not None, imm=imm or 0, **fields)

    def finish(self, **deps):
        return self.emit(Opcode.FINISH, **deps)

    def image(self) -> DramImage:
        addr = self.data(np.frombuffer(insns_to_bytes(self.insns), np.uint8))
        return DramImage(self.dev.dram.data.copy(), addr, len(self.insns))

    def run(self):
        addr = self.data(np.frombuffer(insns_to_bytes(self.insns), np.uint8))
        return self.dev.run(addr, len(self.insns))

    def disasm(self, index) -> str:
        return str(self.isa.decode(self.insns[index]))


def rand(rng, shape, dtype, lo=None, hi=None):
    info = np.iinfo(dtype)
    return rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1,
                        shape, dtype=np.int64).astype(dtype)


# --------------------------------------------------------- sequential references

def _spec(prog, before, uops, opcode, fields):
    """Run one instruction through the sequential spec (vtakit.sim.reference) on copies of
    the SRAMs ``before`` holds; returns (acc, out)."""
    srams = SRAMs(prog.dev.config)
    for name in ("inp", "wgt", "acc", "out"):
        getattr(srams, name)[:] = before[name]
    srams.uop[:len(uops)] = [0 if u is None else prog.isa.encode_uop(*u) for u in uops]
    reference.execute(srams, prog.isa.decode(prog.isa.encode(opcode, **fields)), None,
                      Counters())
    return srams.acc, srams.out


def ref_gemm(prog, before, uops, f):
    """Sequential GEMM of reference 3.4; returns (acc, out)."""
    f = dict(f)
    f["reset_reg"] = f.pop("reset")
    return _spec(prog, before, uops, Opcode.GEMM, f)


def ref_alu(prog, before, uops, f):
    """Sequential ALU of reference 3.5; returns (acc, out)."""
    f = dict(f)
    imm, use_imm = f.pop("imm"), int(f.pop("use_imm"))
    f.update(alu_opcode=int(f.pop("op")), use_imm=use_imm, imm=imm if use_imm else 0)
    return _spec(prog, before, uops, Opcode.ALU, f)


def fill_srams(dev, rng, acc_range=(-2**31, 2**31 - 1)):
    s = dev.srams
    s.inp[:] = rand(rng, s.inp.shape, np.int8)
    s.wgt[:] = rand(rng, s.wgt.shape, np.int8)
    s.acc[:] = rand(rng, s.acc.shape, np.int32, *acc_range)
    s.out[:] = rand(rng, s.out.shape, np.int8)
    return {k: getattr(s, k).copy() for k in ("inp", "wgt", "acc", "out")}


# ------------------------------------------------------------------- basics

def test_open_device_and_api():
    dev = open_device("behavioral", "tiny", token_depth=8, interleave_seed=1)
    assert isinstance(dev, BehavioralDevice) and dev.name == "behavioral"
    assert dev.token_depth == 8 and dev.interleave_seed == 1
    c = dev.config
    assert dev.srams.inp.shape == (c.inp_depth, c.batch, c.block_in)
    assert dev.srams.wgt.shape == (c.wgt_depth, c.block_out, c.block_in)
    assert dev.srams.acc.shape == (c.acc_depth, c.batch, c.block_out)
    assert dev.srams.acc.dtype == np.int32 and dev.srams.out.dtype == np.int8
    assert dev.srams.uop.shape == (c.uop_depth,) and dev.srams.uop.dtype == np.uint32
    assert BehavioralDevice("default").token_depth == DEFAULT_TOKEN_DEPTH
    with pytest.raises(DeviceError, match=r"^token_depth must be at least 1, got 0$"):
        BehavioralDevice("tiny", token_depth=0)


# ------------------------------------------------------------- padded loads

PAD_CASES = {  # (y_pad_0, y_pad_1, x_pad_0, x_pad_1): reference 6.1 and a mix
    "y_before": (2, 0, 0, 0), "y_after": (0, 2, 0, 0), "x_before": (0, 0, 2, 0),
    "x_after": (0, 0, 0, 2), "all": (1, 1, 1, 1), "mixed": (3, 1, 0, 2)}

ELEM = {MemType.INP: ("inp", np.int8), MemType.WGT: ("wgt", np.int8),
        MemType.ACC: ("acc", np.int32)}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("mem", [MemType.INP, MemType.WGT, MemType.ACC], ids=lambda m: m.name)
@pytest.mark.parametrize("pads", PAD_CASES.values(), ids=PAD_CASES.keys())
def test_padded_load(preset, mem, pads):
    rng = np.random.default_rng([PRESETS.index(preset), int(mem), *pads])
    prog = Prog(preset)
    name, dtype = ELEM[mem]
    sram = getattr(prog.dev.srams, name)
    elem = sram.shape[1:]
    rows, cols, stride = 3, 5, 7
    dram = rand(rng, (rows, stride) + elem, dtype)     # a strided sub-matrix of 3 x 5
    sram[:] = rand(rng, sram.shape, dtype)              # garbage that must be overwritten
    before = sram.copy()
    base = 4
    prog.load(mem, base, prog.data(dram), cols, rows, stride, pads)
    prog.finish()
    stats = prog.run().stats
    y0, y1, x0, x1 = pads
    want = np.pad(dram[:, :cols], ((y0, y1), (x0, x1)) + ((0, 0),) * len(elem))
    n = want.shape[0] * want.shape[1]
    np.testing.assert_array_equal(sram[base:base + n], want.reshape((n,) + elem))
    np.testing.assert_array_equal(sram[:base], before[:base])
    np.testing.assert_array_equal(sram[base + n:], before[base + n:])
    assert stats[f"{name}_load_nbytes"] == rows * cols * prog.cfg.elem_bytes(mem)
    assert (stats["load_insn_count"], stats["compute_insn_count"]) == (
        (0, 2) if mem == MemType.ACC else (1, 1))      # FINISH runs in compute


def test_padded_load_overlapping_rows_and_y_size_zero():
    rng = np.random.default_rng(1)
    prog = Prog("tiny")
    flat = rand(rng, (20, 1, 8), np.int8)
    prog.load(MemType.INP, 0, prog.data(flat), 4, 3, 2)          # stride 2 < x_size 4
    prog.load(MemType.INP, 100, prog.data(flat), 3, 0, 3, (1, 1, 1, 0))  # only pad rows
    prog.dev.srams.inp[100:110] = 9
    prog.finish()
    prog.run()
    want = np.stack([flat[r * 2:r * 2 + 4] for r in range(3)]).reshape(12, 1, 8)
    np.testing.assert_array_equal(prog.dev.srams.inp[:12], want)
    assert not prog.dev.srams.inp[100:108].any()   # (1+0+1) rows x (1+3+0) cols of zeros
    assert (prog.dev.srams.inp[108] == 9).all()


def test_strided_rows_ending_at_the_image_end():
    """The last row's pitch would run past the image; only its x_size elements are used."""
    rng = np.random.default_rng(8)
    prog = Prog("tiny")
    prog.finish()
    addr = prog.data(np.frombuffer(insns_to_bytes(prog.insns), np.uint8))
    size = prog.dev.dram.size
    span = 2 * 5 + 3                                   # ys=3, stride=5, xs=3
    base = size // 8 - span
    data = rand(rng, (span, 1, 8), np.int8)
    prog.dev.write(base * 8, data)
    prog.dev.srams.out[:9] = rand(rng, (9, 1, 8), np.int8)
    load = [prog.isa.encode(Opcode.LOAD, memory_type=MemType.INP, sram_base=0,
                            dram_base=base, x_size=3, y_size=3, x_stride=5),
            prog.isa.encode(Opcode.FINISH)]
    prog.dev.write(addr, np.frombuffer(insns_to_bytes(load), np.uint8))
    prog.dev.run(addr, 2)
    np.testing.assert_array_equal(prog.dev.srams.inp[:9],
                                  np.concatenate([data[0:3], data[5:8], data[10:13]]))
    store = [prog.isa.encode(Opcode.STORE, memory_type=MemType.OUT, sram_base=0,
                             dram_base=base, x_size=3, y_size=3, x_stride=5, push_prev_dep=1),
             prog.isa.encode(Opcode.FINISH, pop_next_dep=1)]
    prog.dev.write(addr, np.frombuffer(insns_to_bytes(store), np.uint8))
    prog.dev.run(addr, 2)
    got = prog.dev.read(base * 8, span * 8).view(np.int8).reshape(span, 1, 8)
    for r in range(3):
        np.testing.assert_array_equal(got[5 * r:5 * r + 3], prog.dev.srams.out[3 * r:3 * r + 3])
    np.testing.assert_array_equal(got[3:5], data[3:5])          # the gaps are untouched
    np.testing.assert_array_equal(got[8:10], data[8:10])


@pytest.mark.parametrize("preset", PRESETS)
def test_uop_load_unaligned(preset):
    prog = Prog(preset)
    words = np.arange(1, 12, dtype=np.uint32) * 0x01010101
    addr = prog.data(words)
    prog.emit(Opcode.LOAD, memory_type=MemType.UOP, sram_base=5, dram_base=addr // 4 + 3,
              x_size=7, y_size=1, x_stride=1)       # odd word address, stride ignored
    prog.finish()
    stats = prog.run().stats
    np.testing.assert_array_equal(prog.dev.srams.uop[5:12], words[3:10])
    assert prog.dev.srams.uop[4] == 0 and prog.dev.srams.uop[12] == 0
    assert stats["uop_load_nbytes"] == 28


# ------------------------------------------------------------------ GEMM

def run_compute(prog, emit):
    """Emit one compute instruction plus FINISH and run; returns stats."""
    emit()
    prog.finish()
    return prog.run().stats


@pytest.mark.parametrize("preset", PRESETS)
def test_gemm_two_loops_multi_uop(preset):
    rng = np.random.default_rng(7)
    prog = Prog(preset)
    before = fill_srams(prog.dev, rng)
    uops = [(0, 0, 0), (1, 3, 2), (2, 1, 1), (5, 7, 9), (0, 2, 3)]   # dst 0 twice
    prog.dev.srams.uop[:len(uops)] = [prog.isa.encode_uop(*u) for u in uops]
    f = dict(uop_bgn=0, uop_end=5, iter_out=3, iter_in=4, dst_factor_out=16, dst_factor_in=3,
             src_factor_out=20, src_factor_in=5, wgt_factor_out=1, wgt_factor_in=11, reset=0)
    stats = run_compute(prog, lambda: prog.gemm(0, 5, (3, 4), (16, 3), (20, 5), (1, 11)))
    acc, out = ref_gemm(prog, before, uops, f)
    np.testing.assert_array_equal(prog.dev.srams.acc, acc)
    np.testing.assert_array_equal(prog.dev.srams.out, out)
    assert stats["gemm_counter"] == 60 and stats["alu_counter"] == 0


@pytest.mark.parametrize("seed", range(6))
def test_gemm_random_aliasing(seed):
    """Random loop nests with heavy dst aliasing, on a small config."""
    rng = np.random.default_rng(100 + seed)
    prog = Prog(["tiny", "4x8"][seed % 2])
    before = fill_srams(prog.dev, rng)
    n = int(rng.integers(1, 9))
    uops = [tuple(int(v) for v in rng.integers(0, 8, 3)) for _ in range(n)]
    prog.dev.srams.uop[10:10 + n] = [prog.isa.encode_uop(*u) for u in uops]
    uops = [None] * 10 + uops
    it = [int(v) for v in rng.integers(1, 6, 2)]
    fac = [int(v) for v in rng.integers(0, 4, 6)]
    f = dict(uop_bgn=10, uop_end=10 + n, iter_out=it[0], iter_in=it[1],
             dst_factor_out=fac[0], dst_factor_in=fac[1], src_factor_out=fac[2],
             src_factor_in=fac[3], wgt_factor_out=fac[4], wgt_factor_in=fac[5], reset=0)
    run_compute(prog, lambda: prog.gemm(10, 10 + n, it, fac[:2], fac[2:4], fac[4:]))
    acc, out = ref_gemm(prog, before, uops, f)
    np.testing.assert_array_equal(prog.dev.srams.acc, acc)
    np.testing.assert_array_equal(prog.dev.srams.out, out)


@pytest.mark.parametrize("wgts", [[0, 0, 0, 1], [0, 1, 2, 3], [5, 9, 5, 9]],
                         ids=["unequal_use", "four_tiles", "two_tiles"])
@pytest.mark.parametrize("preset", ["default", "4x8"])
def test_gemm_weight_grouping(preset, wgts):
    """Large and small weight-tile groups, equal and unequal use, against the reference."""
    rng = np.random.default_rng(len(preset) + sum(wgts))
    prog = Prog(preset)
    before = fill_srams(prog.dev, rng)
    uops = [(k % 3, 2 * k, w) for k, w in enumerate(wgts)]
    prog.dev.srams.uop[:4] = [prog.isa.encode_uop(*u) for u in uops]
    f = dict(uop_bgn=0, uop_end=4, iter_out=30, iter_in=7, dst_factor_out=7, dst_factor_in=1,
             src_factor_out=9, src_factor_in=1, wgt_factor_out=0, wgt_factor_in=0, reset=0)
    run_compute(prog, lambda: prog.gemm(0, 4, (30, 7), (7, 1), (9, 1)))
    acc, out = ref_gemm(prog, before, uops, f)
    np.testing.assert_array_equal(prog.dev.srams.acc, acc)
    np.testing.assert_array_equal(prog.dev.srams.out, out)


@pytest.mark.parametrize("preset", PRESETS)
def test_gemm_reset_leaves_out(preset):
    rng = np.random.default_rng(3)
    prog = Prog(preset)
    before = fill_srams(prog.dev, rng)
    prog.dev.srams.uop[0:2] = [prog.isa.encode_uop(1, 4000 % prog.cfg.inp_depth, 0),
                               prog.isa.encode_uop(6)]
    stats = run_compute(prog, lambda: prog.gemm(0, 2, (2, 3), (10, 2), reset=1))
    touched = sorted({d + p * 10 + q * 2 for d in (1, 6) for p in range(2) for q in range(3)})
    want = before["acc"].copy()
    want[touched] = 0
    np.testing.assert_array_equal(prog.dev.srams.acc, want)
    np.testing.assert_array_equal(prog.dev.srams.out, before["out"])
    assert stats["gemm_counter"] == 0


def test_gemm_wraps_at_2_31():
    prog = Prog("tiny")
    s = prog.dev.srams
    s.inp[0] = 127
    s.wgt[0] = 127                                    # each lane: 8 * 127 * 127 = 129032
    s.acc[0] = 2**31 - 100
    s.acc[1] = -2**31 + 5
    s.wgt[1] = -128
    s.inp[1] = 127                                    # 8 * 127 * -128 = -130048
    prog.dev.srams.uop[0:2] = [prog.isa.encode_uop(0, 0, 0), prog.isa.encode_uop(1, 1, 1)]
    run_compute(prog, lambda: prog.gemm(0, 2, (1, 3)))    # three times each, same dst
    assert (s.acc[0] == wrap32(2**31 - 100 + 3 * 129032)).all()
    assert (s.acc[1] == wrap32(-2**31 + 5 - 3 * 130048)).all()
    assert (s.acc[0] < 0).all() and (s.acc[1] > 0).all()
    assert (s.out[0] == wrap32(2**31 - 100 + 3 * 129032).astype(np.int8)).all()
    assert (s.out[1] == wrap32(-2**31 + 5 - 3 * 130048).astype(np.int8)).all()


def test_gemm_empty_does_nothing_but_syncs():
    prog = Prog("tiny")
    rng = np.random.default_rng(0)
    before = fill_srams(prog.dev, rng)
    prog.load(MemType.INP, 0, prog.data(np.zeros(8, np.int8)), 0, push_next_dep=1)
    prog.gemm(3, 3, (5, 5), pop_prev_dep=1)                    # uop_bgn == uop_end
    prog.gemm(0, 4, (0, 5), push_prev_dep=1)                   # zero iterations
    prog.load(MemType.INP, 0, 0, 0, pop_next_dep=1, push_next_dep=1)
    prog.finish(pop_prev_dep=1)
    stats = prog.run().stats
    for k in ("inp", "wgt", "acc", "out"):
        np.testing.assert_array_equal(getattr(prog.dev.srams, k), before[k])
    assert stats["gemm_counter"] == 0 and stats["inp_load_nbytes"] == 0
    assert stats["load_insn_count"] == 2 and stats["compute_insn_count"] == 3


# ------------------------------------------------------------------- ALU

ALU_CASES = [(AluOp.MIN, None), (AluOp.MAX, None), (AluOp.ADD, None),
             (AluOp.MIN, -7), (AluOp.MAX, 0), (AluOp.ADD, -32768), (AluOp.ADD, 32767),
             (AluOp.SHR, 0), (AluOp.SHR, 3), (AluOp.SHR, 31), (AluOp.SHR, -1),
             (AluOp.SHR, -5), (AluOp.SHR, -31)]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("op,imm", ALU_CASES, ids=lambda v: str(v))
def test_alu_ops(preset, op, imm):
    rng = np.random.default_rng(int(op) * 100 + (imm or 0) + 40000)
    prog = Prog(preset)
    before = fill_srams(prog.dev, rng)
    uops = [(0, 40, 0), (1, 41, 0), (2, 0, 0)]   # src 0 is written by uop 0 of p=0
    prog.dev.srams.uop[:3] = [prog.isa.encode_uop(*u) for u in uops]
    f = dict(uop_bgn=0, uop_end=3, iter_out=2, iter_in=5, dst_factor_out=17,
             dst_factor_in=3, src_factor_out=1, src_factor_in=2, op=op,
             use_imm=imm is not None, imm=imm)
    stats = run_compute(prog, lambda: prog.alu(op, 0, 3, (2, 5), (17, 3), (1, 2), imm))
    acc, out = ref_alu(prog, before, uops, f)
    np.testing.assert_array_equal(prog.dev.srams.acc, acc)
    np.testing.assert_array_equal(prog.dev.srams.out, out)
    assert stats["alu_counter"] == 30


def test_alu_max_pool_reduction_is_sequential():
    """3x3 max pool, stride 1, over a 6x6 map: dst repeats 9 times."""
    rng = np.random.default_rng(5)
    prog = Prog("default")
    before = fill_srams(prog.dev, rng, (-1000, 1000))
    # out (i, j) at acc[100 + 4 i + j] starts as the window's top-left element copy
    uops = [(100, 10 * dy + dx, 0) for dy in range(3) for dx in range(3)]
    prog.dev.srams.uop[:9] = [prog.isa.encode_uop(*u) for u in uops]
    prog.dev.srams.acc[100:116] = -2**31
    before["acc"][100:116] = -2**31
    stats = run_compute(prog, lambda: prog.alu(AluOp.MAX, 0, 9, (4, 4), (4, 1), (10, 1)))
    acc, out = ref_alu(prog, before, uops, dict(uop_bgn=0, uop_end=9, iter_out=4, iter_in=4,
                                          dst_factor_out=4, dst_factor_in=1,
                                          src_factor_out=10, src_factor_in=1, op=AluOp.MAX,
                                          use_imm=False, imm=None))
    np.testing.assert_array_equal(prog.dev.srams.acc, acc)
    np.testing.assert_array_equal(prog.dev.srams.out, out)
    grid = before["acc"][:60].reshape(6, 10, *before["acc"].shape[1:])[:, :6]
    pooled = np.max([grid[dy:dy + 4, dx:dx + 4] for dy in range(3) for dx in range(3)], axis=0)
    np.testing.assert_array_equal(prog.dev.srams.acc[100:116], pooled.reshape(16, 1, 16))
    assert stats["alu_counter"] == 144


@pytest.mark.parametrize("op,imm", [(AluOp.ADD, None), (AluOp.MIN, None), (AluOp.MAX, None),
                                    (AluOp.ADD, 3), (AluOp.SHR, 1), (AluOp.SHR, -2)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("seed", range(4))
def test_alu_random_chains(op, imm, seed):
    """Aliasing dst/src (src == dst, reads of earlier writes, repeated dst), exact."""
    rng = np.random.default_rng(seed * 31 + int(op))
    prog = Prog("tiny")
    before = fill_srams(prog.dev, rng, (-50, 50))
    n = int(rng.integers(1, 7))
    uops = [(int(rng.integers(0, 6)), int(rng.integers(0, 6)), 0) for _ in range(n)]
    prog.dev.srams.uop[:n] = [prog.isa.encode_uop(*u) for u in uops]
    it = [int(v) for v in rng.integers(1, 5, 2)]
    fac = [int(v) for v in rng.integers(0, 3, 4)]
    f = dict(uop_bgn=0, uop_end=n, iter_out=it[0], iter_in=it[1], dst_factor_out=fac[0],
             dst_factor_in=fac[1], src_factor_out=fac[2], src_factor_in=fac[3], op=op,
             use_imm=imm is not None, imm=imm)
    run_compute(prog, lambda: prog.alu(op, 0, n, it, fac[:2], fac[2:], imm))
    acc, out = ref_alu(prog, before, uops, f)
    np.testing.assert_array_equal(prog.dev.srams.acc, acc)
    np.testing.assert_array_equal(prog.dev.srams.out, out)


def test_alu_src_dst_chain_prefix_sum():
    """acc[i] += acc[i-1] for i = 1..7 in order: a running sum, not pairwise sums."""
    prog = Prog("tiny")
    prog.dev.srams.acc[:8] = np.arange(1, 9)[:, None, None]
    prog.dev.srams.uop[0] = prog.isa.encode_uop(1, 0)
    run_compute(prog, lambda: prog.alu(AluOp.ADD, 0, 1, (1, 7), (0, 1), (0, 1)))
    np.testing.assert_array_equal(prog.dev.srams.acc[:8, 0, 0], np.cumsum(np.arange(1, 9)))


# ------------------------------------------------------ OUT and STORE semantics

@pytest.mark.parametrize("preset", PRESETS)
def test_load_acc_then_store_is_stale_until_alu(preset):
    rng = np.random.default_rng(11)
    prog = Prog(preset)
    c = prog.cfg
    shape = (6, c.batch, c.block_out)
    x = rand(rng, shape, np.int32, -300, 300)
    xa = prog.data(x)
    stale = rand(rng, shape, np.int8)
    prog.dev.srams.out[:6] = stale
    oa = prog.dev.alloc(2 * 6 * c.out_elem_bytes)
    prog.dev.srams.uop[0] = prog.isa.encode_uop(0, 0)
    prog.load(MemType.ACC, 0, xa, 6)
    prog.emit(Opcode.LOAD, memory_type=MemType.UOP, push_next_dep=1)        # compute NOP
    prog.store(0, oa, 6, pop_prev_dep=1, push_prev_dep=1)                    # stale OUT
    prog.alu(AluOp.SHR, 0, 1, (1, 6), (0, 1), (0, 1), 0, pop_next_dep=1, push_next_dep=1)
    prog.store(0, oa + 6 * c.out_elem_bytes, 6, pop_prev_dep=1, push_prev_dep=1)
    prog.emit(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1)
    prog.finish()
    stats = prog.run().stats
    got = prog.dev.read(oa, 12 * c.out_elem_bytes).view(np.int8).reshape((12,) + shape[1:])
    np.testing.assert_array_equal(got[:6], stale)
    np.testing.assert_array_equal(got[6:], x.astype(np.int8))
    assert stats["out_store_nbytes"] == 12 * c.batch * c.block_out
    assert stats["acc_load_nbytes"] == 6 * c.acc_elem_bytes
    assert stats["store_insn_count"] == 2


def test_store_2d_strided():
    rng = np.random.default_rng(2)
    prog = Prog("4x8")
    c = prog.cfg
    prog.dev.srams.out[:12] = rand(rng, (12, c.batch, c.block_out), np.int8)
    oa = prog.dev.alloc(3 * 7 * c.out_elem_bytes)
    prog.store(0, oa, 4, 3, 7, push_prev_dep=1)
    prog.finish(pop_next_dep=1)          # without it FINISH may complete before the store
    prog.run()
    got = prog.dev.read(oa, 21 * c.out_elem_bytes).view(np.int8).reshape(3, 7, c.batch,
                                                                          c.block_out)
    np.testing.assert_array_equal(got[:, :4], prog.dev.srams.out[:12].reshape(3, 4, c.batch,
                                                                              c.block_out))
    assert not got[:, 4:].any()


def test_end_to_end_gemm_requant_through_dram():
    """LOAD -> GEMM -> ALU requantize -> STORE, result read back from DRAM."""
    rng = np.random.default_rng(9)
    prog = Prog("4x8")
    c = prog.cfg
    B, BI, BO = c.batch, c.block_in, c.block_out
    M, K, N = 8, 32, 16                  # rows, in, out
    x = rand(rng, (M, K), np.int8)
    w = rand(rng, (N, K), np.int8)
    MB, KB, NB = M // B, K // BI, N // BO
    xa = prog.data(x.reshape(MB, B, KB, BI).transpose(0, 2, 1, 3))
    wa = prog.data(w.reshape(NB, BO, KB, BI).transpose(0, 2, 1, 3))
    oa = prog.dev.alloc(M * N)
    prog.uops([(nb, kb, nb * KB + kb) for kb in range(KB) for nb in range(NB)])
    prog.load(MemType.INP, 0, xa, MB * KB)
    prog.load(MemType.WGT, 0, wa, NB * KB, push_next_dep=1)
    prog.gemm(0, NB, (MB, 1), (NB, 0), reset=1)
    prog.gemm(0, NB * KB, (MB, 1), (NB, 0), (KB, 0), pop_prev_dep=1)
    requant = ((AluOp.ADD, 1 << 6), (AluOp.SHR, 7), (AluOp.MIN, 127), (AluOp.MAX, -127))
    for i, (op, imm) in enumerate(requant):
        prog.alu(op, 0, NB, (MB, 1), (NB, 0), (NB, 0), imm, push_next_dep=int(i == 3))
    prog.store(0, oa, MB * NB, pop_prev_dep=1, push_prev_dep=1)
    prog.emit(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1)
    prog.finish()
    stats = prog.run().stats
    y = x.astype(np.int64) @ w.T.astype(np.int64)
    want = np.clip((y + 64) >> 7, -127, 127).astype(np.int8)
    got = prog.dev.read(oa, M * N).view(np.int8).reshape(MB, NB, B, BO).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(got.reshape(M, N), want)
    assert stats == {"inp_load_nbytes": M * K, "wgt_load_nbytes": N * K, "acc_load_nbytes": 0,
                     "uop_load_nbytes": 4 * NB * KB, "out_store_nbytes": M * N,
                     "gemm_counter": MB * NB * KB, "alu_counter": 4 * MB * NB,
                     "load_insn_count": 2, "compute_insn_count": 9, "store_insn_count": 1,
                     "insn_count": 12}


def test_sram_persists_across_runs():
    prog = Prog("tiny")
    prog.load(MemType.INP, 3, prog.data(np.full(8, 5, np.int8)), 1)
    prog.finish()
    prog.run()
    prog.insns = []
    prog.finish()
    prog.run()
    assert (prog.dev.srams.inp[3] == 5).all()


# ---------------------------------------------------------- x_size == 0 NOPs

def test_sync_only_nops_skip_every_check():
    prog = Prog("tiny")
    rng = np.random.default_rng(4)
    before = fill_srams(prog.dev, rng)
    # illegal memory types, huge addresses, pads, y_size: all ignored at x_size 0
    prog.emit(Opcode.LOAD, memory_type=MemType.OUT, sram_base=65535, dram_base=2**32 - 1,
              y_size=9, y_pad_0=3, push_next_dep=1)                       # compute
    prog.emit(Opcode.LOAD, memory_type=7, x_pad_1=15, push_prev_dep=1)   # compute
    prog.emit(Opcode.LOAD, memory_type=MemType.INP, sram_base=65535, y_size=4,
              pop_next_dep=1, push_next_dep=1)                            # load
    prog.emit(Opcode.STORE, memory_type=MemType.UOP, y_pad_0=1, dram_base=2**32 - 1,
              pop_prev_dep=1, push_prev_dep=1)                            # store
    prog.emit(Opcode.LOAD, memory_type=MemType.UOP, y_size=5, pop_prev_dep=1,
              pop_next_dep=1)
    prog.finish()
    stats = prog.run().stats
    for k in ("inp", "wgt", "acc", "out"):
        np.testing.assert_array_equal(getattr(prog.dev.srams, k), before[k])
    assert all(stats[k] == 0 for k in ("inp_load_nbytes", "uop_load_nbytes", "acc_load_nbytes",
                                       "out_store_nbytes"))
    assert (stats["load_insn_count"], stats["compute_insn_count"],
            stats["store_insn_count"]) == (1, 4, 1)


def test_instructions_after_finish_never_run():
    """Fetch stops at FINISH: nothing after it is dispatched, to any module."""
    prog = Prog("tiny")
    prog.finish()
    prog.gemm(0, 1, (1, 20), (0, 1), reset=1)
    prog.dev.srams.uop[0] = prog.isa.encode_uop(500)           # 519 would be out of range
    prog.store(0, 0, 1, 2, stride=2**16 - 1)                   # would write outside DRAM
    prog.load(MemType.INP, 0, prog.data(np.ones(8, np.int8)), 1)
    prog.insns.append(7)                                        # illegal opcode
    prog.dev.srams.acc[:] = 1
    stats = prog.run().stats
    assert (prog.dev.srams.acc == 1).all() and not prog.dev.srams.inp.any()
    assert (stats["load_insn_count"], stats["compute_insn_count"],
            stats["store_insn_count"]) == (0, 1, 0)


# ---------------------------------------------------------------- errors

def expect_error(prog, pattern, code, module, index):
    with pytest.raises(DeviceFault, match=pattern) as info:
        prog.run()
    e = info.value
    assert (e.code, e.module, e.index) == (code, module, index)
    if index is not None:
        assert str(e).endswith(f"[{prog.disasm(index)}]")
    return e


def test_error_sram_out_of_range_load():
    prog = Prog("tiny")                       # inp depth 512
    prog.load(MemType.INP, 500, prog.data(np.zeros(8 * 20, np.int8)), 4, 3, 4, (1, 0, 0, 0))
    prog.finish()
    expect_error(prog, r"^load module, instruction 0: SRAM_OUT_OF_RANGE: inp index 515 out of "
                       r"range \(depth 512\): LOAD INP of 4 rows x 4 elements covers "
                       r"inp\[500, 516\) \[LOAD",
                 ErrorCode.SRAM_OUT_OF_RANGE, Unit.LOAD, 0)


def test_error_sram_out_of_range_store_and_uop():
    prog = Prog("tiny")                       # out depth 512
    prog.store(510, prog.dev.alloc(64), 3, push_prev_dep=1)
    prog.finish(pop_next_dep=1)
    expect_error(prog, r"^store module, instruction 0: SRAM_OUT_OF_RANGE: out index 512 out of "
                       r"range \(depth 512\): STORE of 1 rows x 3 elements covers out\[510, 513\)",
                 ErrorCode.SRAM_OUT_OF_RANGE, Unit.STORE, 0)
    prog = Prog("tiny")                       # uop depth 1024
    prog.uops([(0, 0, 0)] * 2, sram=1023)
    prog.finish()
    expect_error(prog, r"^compute module, instruction 0: SRAM_OUT_OF_RANGE: uop index 1024 out "
                       r"of range \(depth 1024\)", ErrorCode.SRAM_OUT_OF_RANGE, Unit.COMPUTE, 0)


@pytest.mark.parametrize("field,uop,pattern", [
    ("dst", (500, 0, 0), r"acc index 512 out of range \(depth 512\) at iteration p=1 q=0 "
                         r"uop 1 \(dst_idx\)"),
    ("src", (0, 506, 0), r"inp index 512 out of range \(depth 512\) at iteration p=1 q=0 "
                         r"uop 1 \(src_idx\)"),
    ("wgt", (0, 0, 250), r"wgt index 256 out of range \(depth 256\) at iteration p=1 q=0 "
                         r"uop 1 \(wgt_idx\)"),
])
def test_error_gemm_index(field, uop, pattern):
    prog = Prog("tiny")
    prog.dev.srams.uop[:2] = [prog.isa.encode_uop(0, 0, 0), prog.isa.encode_uop(*uop)]
    prog.gemm(0, 2, (2, 1), (12, 0), (6, 0), (6, 0))
    prog.finish()
    expect_error(prog, r"^compute module, instruction 0: SRAM_OUT_OF_RANGE: " + pattern,
                 ErrorCode.SRAM_OUT_OF_RANGE, Unit.COMPUTE, 0)


def test_error_gemm_reset_checks_only_dst():
    prog = Prog("tiny")
    prog.dev.srams.uop[0] = prog.isa.encode_uop(0, 511, 255)
    prog.gemm(0, 1, (1, 3), (0, 0), (0, 7), (0, 7), reset=1)   # src/wgt out of range: fine
    prog.gemm(0, 1, (1, 3), (0, 256), reset=1)
    prog.finish()
    expect_error(prog, r"^compute module, instruction 1: SRAM_OUT_OF_RANGE: acc index 512 out "
                       r"of range \(depth 512\) at iteration p=0 q=2 uop 0 \(dst_idx\)",
                 ErrorCode.SRAM_OUT_OF_RANGE, Unit.COMPUTE, 1)


def test_error_alu_src_index_only_for_tensor():
    prog = Prog("tiny")
    prog.dev.srams.uop[0] = prog.isa.encode_uop(0, 511)
    prog.alu(AluOp.ADD, 0, 1, (1, 2), (0, 1), (0, 1), 5)      # imm: src ignored
    prog.alu(AluOp.ADD, 0, 1, (1, 2), (0, 1), (0, 1))
    prog.finish()
    expect_error(prog, r"^compute module, instruction 1: SRAM_OUT_OF_RANGE: acc index 512 out "
                       r"of range \(depth 512\) at iteration p=0 q=1 uop 0 \(src_idx\)",
                 ErrorCode.SRAM_OUT_OF_RANGE, Unit.COMPUTE, 1)


def test_error_dram_out_of_range():
    prog = Prog("tiny")
    prog.emit(Opcode.LOAD, memory_type=MemType.WGT, dram_base=1 << 20, x_size=2,
              y_size=1, x_stride=2)
    prog.finish()
    expect_error(prog, r"^load module, instruction 0: DRAM_IMAGE: LOAD reads DRAM bytes "
                       r"\[0x4000000, 0x4000080\) outside the image \[0, 0x2000\) \[LOAD",
                 ErrorCode.DRAM_IMAGE, Unit.LOAD, 0)
    prog = Prog("tiny")
    prog.store(0, 0, 1, 2, stride=2**16 - 1, push_prev_dep=1)
    prog.finish(pop_next_dep=1)
    expect_error(prog, r"^store module, instruction 0: DRAM_IMAGE: STORE writes DRAM bytes",
                 ErrorCode.DRAM_IMAGE, Unit.STORE, 0)
    prog = Prog("tiny")
    with pytest.raises(DeviceFault, match=r"^fetch module: DRAM_IMAGE: 3 instructions at "
                                         r"0x1000 end at 0x1030, outside the image "
                                         r"\[0, 0x1000\)$"):
        prog.dev.run(0x1000, 3)


def test_error_illegal_opcode():
    prog = Prog("tiny")
    prog.finish()
    word = 6 | (1 << 70)
    prog.insns.insert(0, word)
    with pytest.raises(DeviceFault, match=r"^fetch module, instruction 0: ILLEGAL_OPCODE: opcode 6 "
                                         r"is illegal; legal opcodes are LOAD=0, STORE=1, GEMM=2, "
                                         rf"FINISH=3, ALU=4 \[ILLEGAL opcode=6 word=0x{word:032x}"
                                         r"\]$") as info:
        prog.run()
    assert (info.value.code, info.value.module, info.value.index) == (
        ErrorCode.ILLEGAL_OPCODE, Unit.FETCH, 0)


@pytest.mark.parametrize("mem", [4, 5, 6, 7])
def test_error_illegal_load_memory_type(mem):
    prog = Prog("tiny")
    prog.emit(Opcode.LOAD, memory_type=mem, x_size=1, y_size=1, x_stride=1)
    prog.finish()
    expect_error(prog, rf"^compute module, instruction 0: ILLEGAL_MEMORY_TYPE: LOAD memory_type "
                       rf"{mem}( \(OUT\))? is illegal; a LOAD with x_size > 0 moves UOP \(0\), "
                       r"WGT \(1\), INP \(2\) or ACC \(3\)",
                 ErrorCode.ILLEGAL_MEMORY_TYPE, Unit.COMPUTE, 0)


def test_error_store_memory_type_and_pads():
    prog = Prog("tiny")
    prog.store(0, prog.dev.alloc(64), 1, memory_type=MemType.ACC, push_prev_dep=1)
    prog.finish(pop_next_dep=1)
    expect_error(prog, r"^store module, instruction 0: ILLEGAL_MEMORY_TYPE: STORE memory_type 3 "
                       r"is illegal; a STORE with x_size > 0 must read OUT \(4\)",
                 ErrorCode.ILLEGAL_MEMORY_TYPE, Unit.STORE, 0)
    prog = Prog("tiny")
    prog.store(0, prog.dev.alloc(64), 1, x_pad_1=2, push_prev_dep=1)
    prog.finish(pop_next_dep=1)
    expect_error(prog, r"^store module, instruction 0: ILLEGAL_FIELD: STORE pads must be 0, got "
                       r"y=0,0 x=0,2", ErrorCode.ILLEGAL_FIELD, Unit.STORE, 0)


@pytest.mark.parametrize("kwargs,pattern", [
    (dict(y_size=2), r"y_size=2 pads y=0,0 x=0,0"),
    (dict(x_pad_0=1), r"y_size=1 pads y=0,0 x=1,0"),
])
def test_error_uop_load_shape(kwargs, pattern):
    prog = Prog("tiny")
    prog.emit(Opcode.LOAD, **{**dict(memory_type=MemType.UOP, x_size=1, y_size=1,
                                     x_stride=1), **kwargs})
    prog.finish()
    expect_error(prog, r"^compute module, instruction 0: ILLEGAL_FIELD: LOAD UOP needs y_size=1 "
                       r"and all pads 0, got " + pattern,
                 ErrorCode.ILLEGAL_FIELD, Unit.COMPUTE, 0)


@pytest.mark.parametrize("emit,pattern", [
    (lambda p: p.alu(4, 0, 1, imm=1), r"ALU opcode 4 is illegal; legal opcodes are MIN=0, MAX=1, "
                                      r"ADD=2, SHR=3"),
    (lambda p: p.alu(7, 0, 1), r"ALU opcode 7 is illegal"),
    (lambda p: p.alu(AluOp.SHR, 0, 1), r"ALU SHR needs use_imm=1"),
    (lambda p: p.alu(AluOp.SHR, 0, 1, imm=32), r"ALU SHR imm 32 is out of range; SHR immediates "
                                               r"are -31..31"),
    (lambda p: p.alu(AluOp.SHR, 0, 1, imm=-32), r"ALU SHR imm -32 is out of range"),
    (lambda p: p.gemm(5, 4), r"uop range \[5, 4\) is illegal; need uop_bgn <= uop_end <= 1024 "
                             r"\(uop depth\)"),
    (lambda p: p.alu(AluOp.ADD, 0, 1025, imm=1), r"uop range \[0, 1025\) is illegal"),
])
def test_error_illegal_fields(emit, pattern):
    prog = Prog("tiny")
    emit(prog)
    prog.finish()
    expect_error(prog, r"^compute module, instruction 0: ILLEGAL_FIELD: " + pattern,
                 ErrorCode.ILLEGAL_FIELD, Unit.COMPUTE, 0)


@pytest.mark.parametrize("emit,module,pattern", [
    (lambda p: p.emit(Opcode.LOAD, memory_type=MemType.INP, pop_prev_dep=1), "load",
     r"pop_prev_dep is set but the load module has no previous stage; it must be 0"),
    (lambda p: p.emit(Opcode.LOAD, memory_type=MemType.WGT, push_prev_dep=1), "load",
     r"push_prev_dep is set but the load module has no previous stage"),
    (lambda p: p.emit(Opcode.STORE, memory_type=MemType.OUT, push_next_dep=1,
                      push_prev_dep=1), "store",
     r"push_next_dep is set but the store module has no next stage"),
])
def test_error_dep_flag_without_neighbour(emit, module, pattern):
    prog = Prog("tiny")
    emit(prog)
    prog.finish(pop_next_dep=int(module == "store"))
    expect_error(prog, rf"^{module} module, instruction 0: ILLEGAL_FIELD: " + pattern,
                 ErrorCode.ILLEGAL_FIELD, Unit[module.upper()], 0)


def test_error_no_finish():
    prog = Prog("tiny")
    prog.load(MemType.INP, 0, 0, 0)
    with pytest.raises(DeviceFault, match=r"^fetch module: the stream of 1 instructions at 0x\w+ "
                                         r"has no FINISH; a run ends only when compute executes "
                                         r"FINISH$"):
        prog.run()


def test_error_deadlock_report():
    prog = Prog("tiny")
    prog.emit(Opcode.LOAD, memory_type=MemType.INP, pop_next_dep=1)     # waits on g2l
    prog.gemm(0, 0, pop_prev_dep=1)                                      # waits on l2g
    prog.store(0, 0, 0)
    prog.finish()
    e = expect_error(prog, r"^deadlock: no module can proceed before FINISH: "
                           r"load waits to pop from g2l \(empty, 0/256 tokens\) at instruction 0 "
                           r"\[LOAD +INP +\[pop_next\].*\]; "
                           r"compute waits to pop from l2g \(empty, 0/256 tokens\) at instruction 1 "
                           r"\[GEMM .*\]; store has no instructions left$", ErrorCode.DEADLOCK, None, None)
    assert "\n" not in str(e)


def test_error_token_overflow_deadlock():
    prog = Prog("tiny", token_depth=2)
    for _ in range(3):
        prog.emit(Opcode.LOAD, memory_type=MemType.INP, push_next_dep=1)
    prog.gemm(0, 0, pop_next_dep=1)                  # waits for a store token forever
    prog.finish(pop_prev_dep=1)
    expect_error(prog, r"^deadlock: no module can proceed before FINISH: load waits to push into "
                       r"l2g \(full, 2/2 tokens\) at instruction 2 \[LOAD .*\]; compute waits to "
                       r"pop from s2g \(empty, 0/2 tokens\) at instruction 3 \[GEMM .*\]; "
                       r"store has no instructions left$", ErrorCode.DEADLOCK, None, None)


def non_causal(prog):
    """Compute waits for a token that a later LOAD pushes, behind three compute NOPs."""
    prog.gemm(0, 0, pop_prev_dep=1)
    for _ in range(3):
        prog.emit(Opcode.LOAD, memory_type=MemType.UOP)
    prog.emit(Opcode.LOAD, memory_type=MemType.INP, push_next_dep=1)
    prog.finish()


def test_error_command_queue_full_deadlock():
    prog = Prog("tiny", cmd_depth=2)
    non_causal(prog)
    expect_error(prog, r"^deadlock: no module can proceed before FINISH: fetch waits to dispatch "
                       r"instruction 3 \[LOAD +UOP .*\] into the compute command queue \(full, "
                       r"2/2 commands\); load waits for its next instruction from fetch; compute "
                       r"waits to pop from l2g \(empty, 0/256 tokens\) at instruction 0 "
                       r"\[GEMM .*\]; store has no instructions left$", ErrorCode.DEADLOCK, None, None)


@pytest.mark.parametrize("cmd_depth", [None, 3, 64])
@pytest.mark.parametrize("seed", [None, 5])
def test_command_queue_room_or_unbounded(cmd_depth, seed):
    prog = Prog("tiny", cmd_depth=cmd_depth, interleave_seed=seed)
    non_causal(prog)
    stats = prog.run().stats
    assert (stats["load_insn_count"], stats["compute_insn_count"]) == (1, 5)


def test_cmd_depth_validation():
    assert BehavioralDevice("tiny").cmd_depth == 64 and BehavioralDevice(
        "tiny", cmd_depth=None).cmd_depth is None
    with pytest.raises(DeviceError, match=r"^cmd_depth must be at least 1 \(or None\), got 0$"):
        BehavioralDevice("tiny", cmd_depth=0)


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_full_token_queue_stalls_without_deadlock(seed):
    prog = Prog("tiny", token_depth=1, interleave_seed=seed)
    rng = np.random.default_rng(0)
    data = rand(rng, (10, 1, 8), np.int8)
    addr = prog.data(data)
    for i in range(10):
        prog.load(MemType.INP, i, addr + 8 * i, 1, push_next_dep=1)
    for i in range(10):
        prog.emit(Opcode.LOAD, memory_type=MemType.UOP, pop_prev_dep=1)
    prog.finish()
    prog.run()
    np.testing.assert_array_equal(prog.dev.srams.inp[:10], data)


# ------------------------------------------------------------- interleaving

def double_buffered(preset, seed, *, missing_dep=False):
    """Two input tiles through one INP slot; the second load must wait for the GEMM."""
    prog = Prog(preset, interleave_seed=seed)
    c = prog.cfg
    rng = np.random.default_rng(42)
    tiles = rand(rng, (2, c.batch, c.block_in), np.int8)
    prog.dev.srams.wgt[0] = rand(rng, (c.block_out, c.block_in), np.int8)
    ta, tb = prog.data(tiles[0]), prog.data(tiles[1])
    oa = prog.dev.alloc(2 * c.out_elem_bytes)
    prog.dev.srams.uop[:2] = [prog.isa.encode_uop(0), prog.isa.encode_uop(1)]
    prog.load(MemType.INP, 0, ta, 1, push_next_dep=1)
    prog.gemm(0, 1, reset=1)
    prog.gemm(0, 1, pop_prev_dep=1, push_prev_dep=1)
    prog.load(MemType.INP, 0, tb, 1, pop_next_dep=0 if missing_dep else 1, push_next_dep=1)
    prog.gemm(1, 2, reset=1)
    prog.gemm(1, 2, pop_prev_dep=1, push_next_dep=1)       # uop 1: acc[1] += inp[0] . wgt[0]
    prog.store(0, oa, 2, pop_prev_dep=1, push_prev_dep=1)
    prog.emit(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1)
    prog.finish()
    prog.run()
    got = prog.dev.read(oa, 2 * c.out_elem_bytes).view(np.int8)
    w = prog.dev.srams.wgt[0].astype(np.int64)
    want = np.concatenate([(t.astype(np.int64) @ w.T).astype(np.int8).ravel() for t in tiles])
    return got, want


@pytest.mark.parametrize("preset", ["default", "4x8"])
def test_interleaving_synchronized_stream_is_deterministic(preset):
    results = set()
    for seed in [None] + list(range(25)):
        got, want = double_buffered(preset, seed)
        np.testing.assert_array_equal(got, want)
        results.add(got.tobytes())
    assert len(results) == 1


def test_interleaving_exposes_missing_dependency():
    got, want = double_buffered("tiny", None, missing_dep=True)
    assert got.tobytes() != want.tobytes()     # in order: both loads run before the GEMM
    outcomes = {double_buffered("tiny", seed, missing_dep=True)[0].tobytes()
                for seed in range(40)}
    assert want.tobytes() in outcomes and len(outcomes) > 1


def test_interleave_seed_is_reproducible():
    a = [double_buffered("tiny", 7, missing_dep=True)[0].tobytes() for _ in range(3)]
    assert len(set(a)) == 1


# ---------------------------------------------------------------------- CLI

def test_exec_cli_round_trip(tmp_path, capsys):
    prog = Prog("tiny")
    data = np.arange(16, dtype=np.int32).reshape(2, 1, 8)
    oa = prog.dev.alloc(64)
    prog.load(MemType.ACC, 0, prog.data(data), 2)
    prog.uops([(0, 0, 0)], sram=0)
    prog.alu(AluOp.ADD, 0, 1, (1, 2), (0, 1), (0, 1), 100, push_next_dep=1)
    prog.store(0, oa, 2, pop_prev_dep=1, push_prev_dep=1)
    prog.emit(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1)
    prog.finish()
    image = prog.image()
    path, out = tmp_path / "img.npz", tmp_path / "res.npz"
    image.save(path)
    code = main(["exec", str(path), "--config", "tiny", "--backend", "behavioral", "-o", str(out),
                 "--token-depth", "4", "--seed", "3", "-O", "token_depth=2"])
    stdout = capsys.readouterr().out
    assert code == 0
    assert stdout.startswith(f"behavioral: {len(prog.insns)} instructions, cycles n/a, wall ")
    rec = RunRecord.load(out)
    assert rec.cycles == -1 and len(rec.dram) == len(image.dram)
    np.testing.assert_array_equal(rec.dram[oa:oa + 16].view(np.int8), (data + 100).ravel())
    assert rec.stats["alu_counter"] == 2 and rec.stats["out_store_nbytes"] == 16


def test_exec_cli_error_one_line(tmp_path, capsys):
    prog = Prog("tiny")
    prog.gemm(0, 0, pop_prev_dep=1)
    prog.finish()
    path = tmp_path / "img.npz"
    prog.image().save(path)
    code = main(["exec", str(path), "--config", "tiny", "-o", str(tmp_path / "r.npz")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("vtakit exec: error: deadlock: no module can proceed before FINISH: ")
    assert err.count("\n") == 1
    assert not (tmp_path / "r.npz").exists()
    code = main(["exec", str(path), "-o", str(tmp_path / "r.npz"), "--backend", "pysim",
                 "--seed", "1"])
    assert code == 2
    assert capsys.readouterr().err == ("vtakit exec: error: --seed (random module interleaving) "
                                       "is an option of the behavioral backend, not of "
                                       "'pysim'\n")
    with pytest.raises(SystemExit) as info:      # argparse: usage error
        main(["exec", str(path), "-o", str(tmp_path / "r.npz"), "-O", "nonsense"])
    assert info.value.code == 2
    assert "backend option 'nonsense' is not KEY=VALUE" in capsys.readouterr().err
