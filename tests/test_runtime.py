"""The runtime driver: stream construction (dependency folding, NOPs, fences), the uop
cache, argument and kernel rule errors, and (on the behavioral model) results that
depend on them: uop-ring wrap-around, FORCE_SERIAL, auto-synchronize."""

import io

import numpy as np
import pytest

from vtakit.hw.isa import AluOp, MemType, Opcode
from vtakit.runtime import (BufferHandleError, DebugFlag, DramRangeError, InvalidArgumentError,
                            KernelError, Runtime, SramRangeError, Unit, StageError,
                            StreamStateError, UopKernel)
from vtakit.sim import Device, RunResult, open_device

L, C, S = Unit.LOAD, Unit.COMPUTE, Unit.STORE


class RecordingDevice(Device):
    """A device that only records runs (stream construction needs no model)."""

    name = "recording"

    def __init__(self, config):
        super().__init__(config)
        self.runs = []

    def run(self, insn_addr, insn_count):
        self.runs.append((insn_addr, insn_count, self.read(insn_addr, 16 * insn_count)))
        return RunResult(cycles=0)


def make_rt(preset="default", **kw):
    return Runtime(RecordingDevice(preset), **kw)


def flags(insn):
    return tuple(n for n in ("pop_prev", "pop_next", "push_prev", "push_next")
                 if getattr(insn, n + "_dep"))


def summary(rt):
    """(opcode name, memory type or '', is_nop, dep flags) per pending instruction."""
    out = []
    for i in rt.instructions:
        mt = MemType(i.memory_type).name if i.opcode in (Opcode.LOAD, Opcode.STORE) else ""
        out.append((i.opcode.name, mt, i.is_nop, flags(i)))
    return out


@pytest.fixture
def rt():
    return make_rt()


@pytest.fixture
def bufs(rt):
    return rt.alloc(1 << 16), rt.alloc(1 << 16)


# ------------------------------------------------------------ dependency folding

def test_push_folds_into_previous_instruction_of_the_stage(rt, bufs):
    rt.load_2d(MemType.INP, 0, bufs[0], 0, 4, 1, 4)
    rt.dep_push(L, C)
    assert summary(rt) == [("LOAD", "INP", False, ("push_next",))]
    rt.dep_push(L, C)   # the flag is taken: a NOP carries the second token
    assert summary(rt)[1:] == [("LOAD", "INP", True, ("push_next",))]


def test_push_after_other_stage_becomes_nop(rt, bufs):
    rt.load_2d(MemType.ACC, 0, bufs[0], 0, 4, 1, 4)      # compute stage
    rt.dep_push(L, C)
    rt.dep_push(S, C)
    rt.dep_push(C, L)                                     # last is a STORE NOP: not compute
    assert summary(rt) == [("LOAD", "ACC", False, ()),
                           ("LOAD", "INP", True, ("push_next",)),
                           ("STORE", "UOP", True, ("push_prev",)),
                           ("LOAD", "UOP", True, ("push_prev",))]


def test_nop_encodings(rt):
    """Reference 2.7/4.3: all fields zero but the flags (store NOP memory type 0)."""
    rt.dep_push(C, L)
    rt.dep_push(L, C)
    rt.dep_push(S, C)
    words = [i.word for i in rt.instructions]
    assert words == [0x20, 0x40 | (int(MemType.INP) << 7), 0x21]


def test_pending_pops_are_absorbed(rt, bufs):
    rt.dep_pop(L, C)
    rt.dep_pop(S, C)
    rt.load_2d(MemType.INP, 0, bufs[0], 0, 4, 1, 4)      # load stage: does not absorb
    k = UopKernel.gemm([(0, 0, 0)])
    rt.push_gemm(k)                                       # LOAD UOP absorbs both
    rt.dep_pop(L, C)
    rt.push_gemm(k)                                       # resident: the GEMM absorbs it
    assert summary(rt) == [("LOAD", "INP", False, ()),
                           ("LOAD", "UOP", False, ("pop_prev", "pop_next")),
                           ("GEMM", "", False, ()),
                           ("GEMM", "", False, ("pop_prev",))]


def test_repeated_pop_commits_the_old_one(rt):
    rt.dep_pop(C, L)
    rt.dep_pop(C, L)
    assert summary(rt) == [("LOAD", "INP", True, ("pop_next",))]
    rt.dep_pop(C, S)
    rt.dep_push(S, C)   # pending pop committed as a STORE NOP, which then takes the push
    assert summary(rt)[1:] == [("STORE", "UOP", True, ("pop_prev", "push_prev"))]


def test_push_never_folds_into_a_load_nop(rt):
    rt.dep_pop(L, C)
    rt.dep_push(C, S)   # compute's pending pop becomes a LOAD UOP NOP; the push needs another
    assert summary(rt) == [("LOAD", "UOP", True, ("pop_prev",)),
                           ("LOAD", "UOP", True, ("push_next",))]


def test_fences_and_finish_last(rt, bufs):
    rt.load_2d(MemType.ACC, 0, bufs[0], 0, 36, 1, 36)
    rt.push_alu(UopKernel.alu(AluOp.SHR, [(0, 0)], [(36, 1, 1)], imm=0))
    rt.dep_push(C, S)
    rt.dep_pop(C, S)
    rt.store_2d(0, bufs[1], 0, 36, 1, 36)
    image = rt.finalize()
    assert summary(rt) == [("LOAD", "ACC", False, ()),
                           ("LOAD", "UOP", False, ()),
                           ("ALU", "", False, ("push_next",)),
                           ("STORE", "OUT", False, ("pop_prev", "push_prev")),
                           ("LOAD", "INP", True, ("push_next",)),
                           ("LOAD", "UOP", True, ("pop_prev", "pop_next")),
                           ("FINISH", "", False, ())]
    alu = rt.instructions[2]
    assert (alu.iter_out, alu.iter_in, alu.dst_factor_in, alu.use_imm, alu.imm) == (1, 36, 1, 1, 0)
    assert image.insn_count == 7
    assert image.instructions() == b"".join(i.word.to_bytes(16, "little")
                                             for i in rt.instructions)


@pytest.mark.parametrize("call", ["dep_push", "dep_pop"])
@pytest.mark.parametrize("pair", [(L, S), (S, L), (C, C), (0, 1)])
def test_illegal_stage_pairs(rt, call, pair):
    with pytest.raises(StageError, match=rf"^{call}\("):
        getattr(rt, call)(*pair)


def test_stage_error_message(rt):
    with pytest.raises(StageError, match=r"^dep_push\(LOAD, STORE\): tokens only flow between "
                                         r"neighbouring stages"):
        rt.dep_push(L, S)
    with pytest.raises(StageError, match=r"^dep_pop\(4, 2\): stages are Unit.LOAD=1"):
        rt.dep_pop(4, 2)


def test_force_serial_chains_every_transition(bufs):
    rt = make_rt(debug=DebugFlag.FORCE_SERIAL)
    a, b = rt.alloc(4096), rt.alloc(4096)
    rt.dep_pop(C, L)                                      # dropped by the rewrite
    rt.load_2d(MemType.INP, 0, a, 0, 4, 1, 4)
    rt.push_gemm(UopKernel.gemm([(0, 0, 0)], reset=True))
    rt.store_2d(0, b, 0, 1, 1, 1)
    rt.load_2d(MemType.WGT, 0, a, 0, 1, 1, 1)             # store -> load: via a compute NOP
    rt.finalize()
    assert summary(rt) == [("LOAD", "INP", False, ("push_next",)),
                           ("LOAD", "UOP", False, ("pop_prev",)),
                           ("GEMM", "", False, ("push_next",)),
                           ("STORE", "OUT", False, ("pop_prev", "push_prev")),
                           ("LOAD", "UOP", True, ("pop_next", "push_prev")),
                           ("LOAD", "WGT", False, ("pop_next",)),
                           ("STORE", "UOP", True, ("push_prev",)),   # end-of-stream fences
                           ("LOAD", "INP", True, ("push_next",)),
                           ("LOAD", "UOP", True, ("pop_prev", "pop_next")),
                           ("FINISH", "", False, ())]


# ----------------------------------------------------------------- uop cache

def test_uop_cache_hits_and_misses(rt):
    k1 = UopKernel.gemm([(0, 0, 0), (1, 0, 1)])
    k2 = UopKernel.alu(AluOp.ADD, [(0, 1)], imm=3)
    for k in (k1, k2, k1, UopKernel.gemm([(0, 0, 0), (1, 0, 1)]), k2):
        (rt.push_gemm if k.mode == "gemm" else rt.push_alu)(k)
    insns = rt.instructions
    loads = [i for i in insns if i.opcode == Opcode.LOAD]
    assert [(i.sram_base, i.x_size) for i in loads] == [(0, 2), (2, 1)]
    assert [(i.uop_bgn, i.uop_end) for i in insns if i.opcode != Opcode.LOAD] == \
        [(0, 2), (2, 3), (0, 2), (0, 2), (2, 3)]
    assert rt.cache_stats == dict(hits=3, misses=2, evictions=0)
    rt.synchronize()                                      # invalidates the cache
    rt.push_gemm(k1)
    assert rt.instructions[0].opcode == Opcode.LOAD and rt.cache_stats["misses"] == 3


def test_uop_ring_wraps_with_own_staging_copies():
    """Tiny config, 1024 uops: the third kernel wraps to 0 and evicts the first; reloading
    the first must not redirect any earlier LOAD UOP (each keeps its own staging bytes)."""
    rt = make_rt("tiny")
    ks = [UopKernel.alu(AluOp.ADD, [(j, 0) for j in range(400)], imm=v) for v in (1, 2, 3)]
    for k in ks + [ks[0], ks[1]]:
        rt.push_alu(k)
    insns = rt.instructions
    loads = [i for i in insns if i.opcode == Opcode.LOAD]
    assert [i.sram_base for i in loads] == [0, 400, 0, 400, 0]
    assert rt.cache_stats == dict(hits=0, misses=5, evictions=3)
    staging = rt.uops
    base = rt._uop_buf.addr // 4
    owners = [0, 1, 2, 0, 1]
    for load, owner in zip(loads, owners):
        got = staging[load.dram_base - base:load.dram_base - base + load.x_size]
        assert np.array_equal(got, rt._words[ks[owner]])
    assert len(staging) == 3 * 400   # an identical kernel reuses its staging copy
    image = rt.finalize()
    for load, owner in zip(loads, owners):
        start = 4 * rt.instructions[insns.index(load)].dram_base
        dram_words = image.dram[start:start + 4 * 400].view(np.uint32)
        assert np.array_equal(dram_words, rt._words[ks[owner]])


def test_kernel_larger_than_uop_buffer():
    rt = make_rt("tiny")
    with pytest.raises(KernelError, match=r"^ALU ADD kernel: 1025 micro-ops do not fit the uop "
                                          r"buffer of 1024 entries$"):
        rt.push_alu(UopKernel.alu(AluOp.ADD, [(0, 0)] * 1025, imm=1))


# --------------------------------------------------------------- kernel rules

def test_kernel_loop_mapping(rt):
    rt.push_gemm(UopKernel.gemm([(0, 0, 0)], [(3, 1, 2, 0)]))
    rt.push_gemm(UopKernel.gemm([(0, 0, 0)], [(3, 5, 0, 1), (5, 1, 1, 0)]))
    rt.push_alu(UopKernel.alu(AluOp.MAX, [(0, 0)], [(7, 1, 1)], imm=0))
    rt.push_alu(UopKernel.alu(AluOp.MIN, [(0, 9)], imm=0))
    g1, g2, a1, a2 = [i for i in rt.instructions if i.opcode != Opcode.LOAD]
    assert (g1.iter_out, g1.iter_in, g1.dst_factor_out, g1.src_factor_out) == (3, 1, 1, 2)
    assert (g2.iter_out, g2.iter_in, g2.dst_factor_out, g2.wgt_factor_out,
            g2.dst_factor_in, g2.src_factor_in) == (3, 5, 5, 1, 1, 1)
    assert (a1.iter_out, a1.iter_in, a1.dst_factor_in, a1.alu_opcode) == (1, 7, 1, AluOp.MAX)
    assert (a2.iter_out, a2.iter_in) == (1, 1)


def test_kernels_are_values():
    a = UopKernel.gemm([(0, 1, 2)], [(2, 1, 0, 0)])
    b = UopKernel.gemm([[0, 1, 2]], [[2, 1, 0, 0]])
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != UopKernel.gemm([(0, 1, 2)], [(2, 1, 0, 0)], reset=True)
    assert UopKernel.alu(AluOp.ADD, [(0, 0)], imm=1) != UopKernel.alu(AluOp.ADD, [(0, 0)], imm=2)


def test_hazard_check_agrees_with_the_rule_on_every_iteration():
    """UopKernel.gemm's hazard check (a quick test, then the ordered search for the
    message) refuses exactly the kernels that write an accumulator one of the two uops
    before wrote, found by walking every iteration of the kernel."""
    rng = np.random.default_rng(7)
    for _ in range(3000):
        n = int(rng.integers(1, 6))
        uops = [(int(rng.integers(0, 6)), 0, 0) for _ in range(n)]
        loops = [(int(rng.integers(1, 5)), int(rng.integers(0, 4)), 0, 0)
                 for _ in range(int(rng.integers(0, 3)))]
        seq = [d for d, _, _ in uops]
        order = [0]
        for ext, f, _, _ in loops:
            order = [o + i * f for o in order for i in range(ext)]
        writes = [o + d for o in order for d in seq]
        hazard = any(writes[t] in writes[max(0, t - 2):t] for t in range(len(writes)))
        try:
            UopKernel.gemm(uops, loops)
            refused = False
        except KernelError as e:
            assert str(e).startswith("GEMM kernel: accumulate hazard")
            refused = True
        assert refused == hazard, (uops, loops)


@pytest.mark.parametrize("build, message", [
    (lambda: UopKernel.gemm([(0, 0, 0)], [(2, 1, 0, 0)] * 3),
     r"^GEMM kernel: 3 loops; at most 2 are allowed"),
    (lambda: UopKernel.gemm([]), r"^GEMM kernel: no micro-ops"),
    (lambda: UopKernel.gemm([(0, 0)]), r"^GEMM kernel: uop 0 is \(0, 0\); GEMM uops have 3"),
    (lambda: UopKernel.alu(AluOp.ADD, [(0, 0, 0)]), r"^ALU kernel: uop 0 is \(0, 0, 0\); ALU uops"),
    (lambda: UopKernel.gemm([(0, -1, 0)]), r"^GEMM kernel: uop 0 is \(0, -1, 0\); entries must"),
    (lambda: UopKernel.gemm([(0, 0, 0), (1, 0, 0), (0, 1, 1)]),
     r"^GEMM kernel: accumulate hazard: uop 2 \(dst_idx=0\) at iteration \(p=0, q=0\) writes "
     r"acc\[0\], which uop 0 \(dst_idx=0\) at \(p=0, q=0\) wrote 2 steps earlier"),
    (lambda: UopKernel.gemm([(0, 0, 0), (1, 0, 1)], [(4, 0, 1, 2)]),
     r"^GEMM kernel: accumulate hazard: uop 0 \(dst_idx=0\) at iteration \(p=1, q=0\)"),
    (lambda: UopKernel.gemm([(5, 0, 0)], [(2, 0, 1, 1), (2, 1, 0, 0)]),
     r"^GEMM kernel: accumulate hazard: uop 0 \(dst_idx=5\) at iteration \(p=1, q=0\) writes "
     r"acc\[5\], which uop 0 \(dst_idx=5\) at \(p=0, q=0\) wrote 2 steps earlier"),
    (lambda: UopKernel.gemm([(0, 0, 0)], [(2, 1, 0, 0), (2, 0, 0, 0)]),
     r"^GEMM kernel: accumulate hazard"),
    (lambda: UopKernel.alu(AluOp.SHR, [(0, 0)]),
     r"^ALU kernel: SHR needs use_imm=1 \(an immediate\); a tensor operand is not supported$"),
    (lambda: UopKernel.alu(AluOp.SHR, [(0, 0)], imm=32),
     r"^ALU kernel: SHR imm 32 is out of range; SHR immediates are -31..31$"),
    (lambda: UopKernel.alu(AluOp.ADD, [(0, 0)], imm=1 << 15),
     r"^ALU kernel: ADD imm 32768 is out of range; ADD immediates are -32768..32767$"),
    (lambda: UopKernel.alu(8, [(0, 0)], imm=1),
     r"^ALU kernel: opcode 8 is illegal; legal opcodes are MIN=0, MAX=1, ADD=2, SHR=3$"),
    (lambda: UopKernel.alu(4, [(0, 0)], imm=3),      # an extension opcode's own rules
     r"^ALU kernel: REQ imm 3 is out of range; REQ takes a tensor operand \(use_imm=0\) "
     r"and an imm field that is the mode 0..2"),
    (lambda: UopKernel.gemm([(0, 0, 0)], [(1 << 14, 1, 0, 0)]),
     r"^GEMM kernel: loop 0 extent 16384 exceeds the 14-bit iteration field"),
])
def test_kernel_rule_errors(build, message):
    with pytest.raises(KernelError, match=message):
        build()


def test_hazard_rule_accepts_legal_kernels():
    # same dst after two other writes is fine; reset kernels and opt-out are not checked
    UopKernel.gemm([(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 1)])
    UopKernel.gemm([(5, 0, 0)], [(2, 0, 1, 1), (3, 1, 0, 0)])
    UopKernel.gemm([(0, 0, 0)], [(2, 1, 0, 0), (3, 2, 0, 0)])
    UopKernel.gemm([(0, 0, 0), (0, 0, 0)], reset=True)
    UopKernel.gemm([(0, 0, 0)], [(4, 0, 1, 1)], check_hazard=False)


def _brute_force_hazard(uops, loops):
    """True if some write in the flattened (p, q, k) order repeats one of the two before."""
    loops = list(loops) + [(1, 0, 0, 0)] * (2 - len(loops))
    (n_out, fo, *_), (n_in, fi, *_) = loops
    seq = [d + p * fo + q * fi for p in range(n_out) for q in range(n_in) for d, _, _ in uops]
    return any(seq[t] in seq[max(0, t - 2):t] for t in range(len(seq)))


def test_hazard_rule_equals_brute_force():
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(600):
        uops = [(int(rng.integers(0, 4)), 0, 0) for _ in range(int(rng.integers(1, 4)))]
        loops = [(int(rng.integers(0, 8)), int(rng.integers(0, 4)), 0, 0)
                 for _ in range(int(rng.integers(0, 3)))]
        expected = _brute_force_hazard(uops, loops)
        try:
            UopKernel.gemm(uops, loops)
            raised = False
        except KernelError:
            raised = True
        assert raised == expected, (uops, loops)
        outcomes.add(raised)
    assert outcomes == {True, False}


def test_kernel_config_errors(rt):
    with pytest.raises(KernelError, match=r"^push_alu: got a GEMM kernel; use push_gemm for it$"):
        rt.push_alu(UopKernel.gemm([(0, 0, 0)]))
    with pytest.raises(KernelError, match=r"^GEMM kernel: uop 0 \(dst=2048, src=0, wgt=0\): UOP "
                                          r"field dst_idx=2048 does not fit in 11 bits"):
        rt.push_gemm(UopKernel.gemm([(2048, 0, 0)]))
    with pytest.raises(KernelError, match=r"^GEMM kernel: loop 0 wgt_factor=1024 does not fit "
                                          r"the 10-bit wgt factor field"):
        rt.push_gemm(UopKernel.gemm([(0, 0, 0)], [(2, 1, 0, 1024)]))
    with pytest.raises(SramRangeError, match=r"^GEMM kernel: wgt index reaches 1026 \(largest "
                                             r"uop wgt_idx plus the loop offsets\), past the "
                                             r"weight buffer depth 1024"):
        rt.push_gemm(UopKernel.gemm([(0, 0, 1000)], [(3, 1, 0, 13)]))
    with pytest.raises(SramRangeError, match=r"^ALU ADD kernel: src index reaches 2048"):
        rt.push_alu(UopKernel.alu(AluOp.ADD, [(0, 2000)], [(49, 1, 1)]))
    # reset GEMMs read no input/weight, immediate ALU ops no source: not range-checked
    rt.push_gemm(UopKernel.gemm([(0, 2047, 1023)], [(2, 1, 1, 1)], reset=True))
    rt.push_alu(UopKernel.alu(AluOp.ADD, [(0, 2047)], [(2, 1, 1)], imm=1))
    assert rt.instructions[-1].opcode == Opcode.ALU


# -------------------------------------------------------------- DMA arguments

def test_load_store_range_errors(rt, bufs):
    a, _ = bufs
    with pytest.raises(SramRangeError, match=r"^load_2d\(INP\): SRAM range \[2040, 2056\) \(4 x "
                                             r"4 elements with padding\) exceeds the input "
                                             r"buffer depth 2048$"):
        rt.load_2d(MemType.INP, 2040, a, 0, 2, 2, 2, 1, 1, 1, 1)
    with pytest.raises(SramRangeError, match=r"^store_2d: SRAM range \[2000, 2064\) \(16 x 4 "
                                             r"elements\) exceeds the output buffer depth 2048$"):
        rt.store_2d(2000, a, 0, 16, 4, 16)
    with pytest.raises(DramRangeError, match=r"^load_2d\(WGT\): DRAM elements \[250, 257\) of 256 "
                                             r"bytes \(elem_offset=250, y_size=2, x_stride=4, "
                                             r"x_size=3\) end at byte 65792, past the 65536-byte "
                                             r"buffer at 0x"):
        rt.load_2d(MemType.WGT, 0, a, 250, 3, 2, 4)
    with pytest.raises(DramRangeError, match=r"^store_2d: DRAM elements \[4095, 4097\)"):
        rt.store_2d(0, a, 4095, 2, 1, 2)
    with pytest.raises(InvalidArgumentError, match=r"^load_2d: memory type <MemType.OUT: 4> "
                                                   r"cannot be loaded"):
        rt.load_2d(MemType.OUT, 0, a, 0, 1, 1, 1)
    with pytest.raises(InvalidArgumentError, match=r"^load_2d\(ACC\): y_pad_after=16 must be in "
                                                   r"0..15"):
        rt.load_2d(MemType.ACC, 0, a, 0, 1, 1, 1, y_pad_after=16)
    with pytest.raises(InvalidArgumentError, match=r"^store_2d: x_size=0 must be in 1..65535"):
        rt.store_2d(0, a, 0, 0, 1, 1)
    assert rt.instructions == []


def test_dram_base_rule(rt):
    buf = rt.alloc(8192)
    rt.load_2d(MemType.WGT, 3, buf, 5, 2, 3, 8, 1, 2, 0, 1)
    rt.store_2d(7, buf, 9, 4, 2, 6)
    ld, st = rt.instructions
    assert (ld.memory_type, ld.sram_base, ld.dram_base) == (MemType.WGT, 3, buf.addr // 256 + 5)
    assert (ld.x_size, ld.y_size, ld.x_stride, ld.x_pad_0, ld.y_pad_0, ld.x_pad_1, ld.y_pad_1) == \
        (2, 3, 8, 1, 2, 0, 1)
    assert (st.memory_type, st.sram_base, st.dram_base, st.x_size, st.y_size, st.x_stride) == \
        (MemType.OUT, 7, buf.addr // 16 + 9, 4, 2, 6)


def test_buffers(rt):
    buf = rt.alloc(100)
    assert buf.addr % 4096 == 0 and buf.nbytes == 100
    rt.upload(buf, np.arange(25, dtype=np.int32))
    assert np.array_equal(rt.download(buf, np.int32, (5, 5)), np.arange(25).reshape(5, 5))
    rt.upload(buf, np.int8([-1, -2]), offset=98)
    assert list(rt.download(buf, np.int8, 2, offset=98)) == [-1, -2]
    with pytest.raises(DramRangeError, match=r"^upload of 4 bytes at offset 97 overruns the "
                                             r"100-byte buffer"):
        rt.upload(buf, np.int32([1]), offset=97)
    rt.free(buf)
    with pytest.raises(BufferHandleError, match=r"^free: Buffer\(addr=\d+, nbytes=100\) is not a "
                                                r"live buffer of this runtime"):
        rt.free(buf)
    with pytest.raises(BufferHandleError, match=r"^load_2d\(INP\): "):
        rt.load_2d(MemType.INP, 0, buf, 0, 1, 1, 1)


# ----------------------------------------------------------- synchronize

def test_synchronize_runs_and_resets(rt, bufs):
    assert rt.synchronize().cycles == -1 and rt.device.runs == []   # empty stream: no run
    rt.load_2d(MemType.INP, 0, bufs[0], 0, 1, 1, 1)
    image = rt.finalize()
    with pytest.raises(StreamStateError, match=r"^the stream is finalized; call synchronize"):
        rt.load_2d(MemType.INP, 0, bufs[0], 0, 1, 1, 1)
    rt.synchronize()
    (addr, count, data), = rt.device.runs
    assert (addr, count) == (image.insn_addr, image.insn_count)
    assert data.tobytes() == image.instructions()
    assert rt.instructions == [] and rt.stats["syncs"] == 1


def test_device_buffers_are_reused(rt, bufs):
    k = UopKernel.gemm([(j, 0, 0) for j in range(64)], reset=True)
    sizes = set()
    for _ in range(20):
        rt.load_2d(MemType.INP, 0, bufs[0], 0, 1, 1, 1)
        rt.push_gemm(k)
        rt.synchronize()
        sizes.add(rt.device.dram.size)
    assert len(sizes) == 1
    assert len({run[0] for run in rt.device.runs}) == 1


def test_auto_synchronize_on_max_xfer(bufs):
    rt = make_rt(max_xfer=16 * 20)
    buf = rt.alloc(4096)
    for j in range(40):
        rt.load_2d(MemType.INP, j, buf, j, 1, 1, 1)
    rt.synchronize()
    counts = [run[1] for run in rt.device.runs]
    assert rt.stats["auto_syncs"] == len(counts) - 1 >= 2
    assert all(16 * c <= 16 * 20 for c in counts)
    loads = sum(1 for *_, data in rt.device.runs for k in range(0, len(data), 16)
                if data[k] & 7 == Opcode.LOAD and data[k + 10] != 0)
    assert loads == 40


def test_auto_synchronize_refuses_to_split_tokens():
    rt = make_rt(max_xfer=16 * 20)
    buf = rt.alloc(4096)
    rt.load_2d(MemType.INP, 0, buf, 0, 1, 1, 1)
    rt.dep_push(L, C)
    rt.dep_pop(S, C)
    with pytest.raises(StreamStateError, match=r"^the stream reached max_xfer=320 bytes at "
                                               r"instruction 15, where it cannot be cut: token "
                                               r"queues are unbalanced \(pushes - pops: l2g \+1, "
                                               r"s2g -1\)"):
        for j in range(40):
            rt.load_2d(MemType.INP, j, buf, j, 1, 1, 1)
    assert rt.device.runs == []


def test_dumps(bufs):
    out = io.StringIO()
    rt = make_rt(debug=DebugFlag.DUMP_INSN | DebugFlag.DUMP_UOP, dump_file=out)
    rt.push_gemm(UopKernel.gemm([(5, 3, 2)], reset=True))
    rt.synchronize()
    text = out.getvalue().splitlines()
    assert text[0] == "There are 6 instructions"
    assert text[1].startswith("     0: LOAD   UOP  [] memory_type=0 sram_base=0")
    assert text[-2:] == ["There are 1 uops", "     0: UOP dst_idx=5 src_idx=3 wgt_idx=2"]


# ------------------------------------------------- end to end on the behavioral model

def _acc_program(rt, rng, rows):
    """LOAD ACC of ``rows`` int32 elements; returns (input, output buffer)."""
    c = rt.config
    a = rng.integers(-100, 100, size=(rows, c.batch, c.block_out), dtype=np.int32)
    ab, ob = rt.alloc(a.nbytes), rt.alloc(a.size)
    rt.upload(ab, a)
    rt.load_2d(MemType.ACC, 0, ab, 0, rows, 1, rows)
    return a, ob


def _store(rt, ob, rows):
    rt.dep_push(C, S)
    rt.dep_pop(C, S)
    rt.store_2d(0, ob, 0, rows, 1, rows)


def test_uop_ring_wraparound_result():
    """Five 400-uop kernels in a 1024-entry uop buffer within one synchronize: the ring
    wraps twice and kernels are evicted and reloaded; each must still run its own uops."""
    rt = Runtime(open_device("behavioral", "tiny"))
    rng = np.random.default_rng(5)
    a, ob = _acc_program(rt, rng, 440)
    kernels = {v: UopKernel.alu(AluOp.ADD, [(10 * v + j, 0) for j in range(400)], imm=v)
               for v in (1, 2, 3)}
    expected = a.copy()
    for v in (1, 2, 3, 1, 2):
        rt.push_alu(kernels[v])
        expected[10 * v:10 * v + 400] += v
    assert rt.cache_stats["evictions"] == 3
    rt.push_alu(UopKernel.alu(AluOp.SHR, [(0, 0)], [(440, 1, 1)], imm=0))   # OUT for all
    _store(rt, ob, 440)
    rt.synchronize()
    assert np.array_equal(rt.download(ob, np.int8, a.shape), expected.astype(np.int8))


def test_auto_synchronize_result():
    rt = Runtime(open_device("behavioral", "default"), max_xfer=16 * 12)
    a, ob = _acc_program(rt, np.random.default_rng(6), 32)
    for v in range(1, 21):
        rt.push_alu(UopKernel.alu(AluOp.ADD, [(0, 0)], [(32, 1, 1)], imm=v))
    _store(rt, ob, 32)
    rt.synchronize()
    assert rt.stats["auto_syncs"] >= 3
    assert np.array_equal(rt.download(ob, np.int8, a.shape), (a + 210).astype(np.int8))


@pytest.mark.parametrize("name", ["save_load_out", "padded_load_all", "gemm_default",
                                  "gemm_smt", "alu_add_tensor", "relu", "gemm_tiled"])
@pytest.mark.parametrize("preset", ["default", "tiny"])
def test_force_serial_same_results(name, preset):
    from vtakit.testing.programs import PROGRAMS, verify
    outputs = []
    for debug in (DebugFlag(0), DebugFlag.FORCE_SERIAL):
        rt = Runtime(open_device("behavioral", preset), debug=debug)
        checks = PROGRAMS[name](rt, np.random.default_rng(3))
        rt.synchronize()
        verify(rt, checks)
        outputs.append([rt.download(c.buf, np.uint8, c.buf.nbytes) for c in checks])
    assert all(np.array_equal(x, y) for x, y in zip(*outputs))


def test_auto_synchronize_on_uop_staging():
    """Distinct kernels whose uops overflow max_xfer split the stream between kernels."""
    rt = Runtime(open_device("behavioral", "default"), max_xfer=16 * 40)
    a, ob = _acc_program(rt, np.random.default_rng(8), 100)
    for v in (1, 2, 3):
        rt.push_alu(UopKernel.alu(AluOp.ADD, [(j, 0) for j in range(100)], imm=v))
    _store(rt, ob, 100)
    rt.synchronize()
    assert rt.stats["auto_syncs"] == 2
    assert np.array_equal(rt.download(ob, np.int8, a.shape), (a + 6).astype(np.int8))


def test_finalized_image_records_its_config(tmp_path):
    from vtakit.hw.config import VTAConfig
    from vtakit.runtime import Runtime
    from vtakit.sim import DramImage
    rt = Runtime(open_device("behavioral", "tiny"))
    buf = rt.alloc(4096)
    rt.load_2d(MemType.INP, 0, buf, 0, 1, 1, 1)
    rt.finalize().save(tmp_path / "prog")
    image = DramImage.load(tmp_path / "prog.npz")
    assert VTAConfig.from_dict(image.config) == VTAConfig.preset("tiny")
