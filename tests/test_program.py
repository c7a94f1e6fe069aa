"""Programs: operator plans lowered without a device, bound anywhere in DRAM, serialized
deterministically, composed, and rejected with one clear error when corrupt."""

import hashlib
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import vtakit.sim
from vtakit.compiler.ops import plan_add, plan_avg_pool_gemm, plan_conv2d, plan_dense, plan_pool2d
from vtakit.compiler.ops import reference as R
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import AluOp, IsaError, MemType, Opcode, isa_for
from vtakit.runtime import (UOPS, BufferHandleError, DramRangeError, InvalidArgumentError,
                            Program, ProgramBuilder, ProgramFormatError, Relocation, Runtime,
                            Unit, StreamStateError, UopKernel)
from vtakit.runtime.program import make_insn
from vtakit.sim import Device, open_device

DEFAULT = VTAConfig.preset("default")
TINY = VTAConfig.preset("tiny")


def conv_plan(cfg=DEFAULT):
    return plan_conv2d(cfg, (1, 20, 9, 7), (35, 20, 3, 3), 2, 1, bias=True, shift=9, relu=True)


def all_plans(cfg):
    return [conv_plan(cfg),
            plan_conv2d(cfg, (1, 24, 7, 9), (17, 24, 1, 1), 2, 0, residual="int8", shift=4),
            plan_dense(cfg, (4, 40), (20, 40), out_dtype=np.int32),
            plan_add(cfg, (1, 18, 5, 5), shift=1, clip=(-100, 100)),
            plan_pool2d(cfg, (1, 16, 9, 9), "max", 3, 2, 1),
            plan_avg_pool_gemm(cfg, (1, 16, 8, 8), 2)]


def conv_inputs(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, 20, 9, 7), dtype=np.int8)
    w = rng.integers(-128, 128, (35, 20, 3, 3), dtype=np.int8)
    b = rng.integers(-5000, 5000, 35, dtype=np.int32)
    ref = R.epilogue_ref(R.conv2d_ref(x, w, 2, 1), bias=b, shift=9, clip=(0, None))
    return (x, w, b), ref


def run_bound(rt, plan, packed):
    """Allocate, upload, bind the plan's program, run; the packed out and the buffers."""
    bufs = {name: rt.alloc(op.nbytes) for name, op in plan.operands.items()}
    for name, buf in bufs.items():
        if name != "out":
            rt.upload(buf, packed[name])
    rt.bind(plan.program(), bufs)
    rt.synchronize()
    out = plan.operands["out"]
    return rt.download(bufs["out"], out.dtype, out.shape), bufs


# ------------------------------------------------------------- no device needed

def test_plans_lower_without_a_device(monkeypatch):
    def no_device(*args, **kwargs):
        raise AssertionError("a device was opened")
    monkeypatch.setattr(vtakit.sim, "open_device", no_device)
    monkeypatch.setattr(Device, "__init__", no_device)
    for plan in all_plans(DEFAULT):
        program = plan.program()
        assert isinstance(program, Program) and program.config == DEFAULT
        assert list(program.slots) == list(plan.operands)
        assert program.slots == {n: op.nbytes for n, op in plan.operands.items()}
        info = plan.inspect()
        # the inspected stream is the program plus the end-of-stream fences (up to four
        # sync-only instructions) and FINISH
        assert len(program) < info["instructions"] <= len(program) + 5
        assert info["uops"] == len(program.uops) > 0
        assert program is plan.program()          # built once


def test_one_representation():
    """The program's instructions are ISA values whose words decode to the same fields."""
    program = conv_plan().program()
    isa = isa_for(DEFAULT)
    assert all(isa.decode(i.word).fields == i.fields for i in program.insns)
    relocated = {r.insn for r in program.relocations}
    moving = {k for k, i in enumerate(program.insns)
              if i.opcode in (Opcode.LOAD, Opcode.STORE) and not i.is_nop}
    assert relocated == moving                    # every DRAM access is relocated, only those
    slots = {r.slot for r in program.relocations}
    assert slots == set(program.slots) | {UOPS}
    # the fence every operator ends with leaves the load stage's pop pending
    assert program.pending_pops == ((int(Unit.LOAD), "pop_next_dep"),)


def test_make_insn_matches_the_isa():
    isa = isa_for(DEFAULT)
    fields = dict(memory_type=int(MemType.WGT), sram_base=3, dram_base=77, y_size=2, x_size=5,
                  x_stride=9, x_pad_1=2, push_next_dep=1)
    insn = make_insn(DEFAULT, Opcode.LOAD, fields)
    assert insn.word == isa.encode(Opcode.LOAD, **fields)
    assert insn.fields == isa.decode(insn.word).fields
    with pytest.raises(IsaError, match=r"^MEM field x_size=65536 does not fit in 16 bits"):
        make_insn(DEFAULT, Opcode.LOAD, dict(fields, x_size=1 << 16))
    with pytest.raises(IsaError, match=r"^MEM instruction has no field 'imm'"):
        make_insn(DEFAULT, Opcode.LOAD, dict(fields, imm=1))


# ------------------------------------------------------------------- binding

def test_bound_at_two_bases_same_result():
    (x, w, b), ref = conv_inputs()
    plan = conv_plan()
    packed = plan.pack(x, w, b)
    rt = Runtime(open_device("behavioral", "default"))
    out1, bufs1 = run_bound(rt, plan, packed)
    rt.alloc(5 << 20)                             # every later buffer lands 5 MiB higher
    out2, bufs2 = run_bound(rt, plan, packed)
    assert all(bufs2[n].addr >= bufs1[n].addr + (5 << 20) for n in bufs1)
    assert np.array_equal(out1, out2)
    assert np.array_equal(plan.unpack(out2), ref)


def test_bind_patches_only_relocated_fields():
    plan = conv_plan()
    program = plan.program()
    rt = Runtime(open_device("behavioral", "default"))
    rt.alloc(12345)
    bufs = {name: rt.alloc(op.nbytes) for name, op in plan.operands.items()}
    rt.bind(program, bufs)
    bound = rt.instructions[:len(program)]
    targets = {r.insn: r.slot for r in program.relocations}
    for k, (mine, theirs) in enumerate(zip(program.insns, bound)):
        diff = {f for f in mine.fields if mine.fields[f] != theirs.fields[f]}
        if k not in targets:
            assert not diff, k
            continue
        assert diff <= {"dram_base"}
        mt = MemType.OUT if mine.opcode == Opcode.STORE else MemType(mine.memory_type)
        base = rt._uop_buf.addr if targets[k] == UOPS else bufs[targets[k]].addr
        assert theirs.dram_base == mine.dram_base + base // DEFAULT.elem_bytes(mt)
    rt.reset()


def test_two_programs_in_one_stream():
    """Kernels bound one after another share one run and give each its own result."""
    rng = np.random.default_rng(5)
    (x, w, b), ref = conv_inputs(2)
    conv = conv_plan()
    pool = plan_pool2d(DEFAULT, (1, 16, 9, 9), "max", 3, 2, 1)
    xp = rng.integers(-128, 128, (1, 16, 9, 9), dtype=np.int8)
    rt = Runtime(open_device("behavioral", "default", interleave_seed=3))
    all_bufs = []
    for plan, packed in ((conv, conv.pack(x, w, b)), (pool, pool.pack(xp)), (conv, None)):
        if packed is None:                        # the third reads the first's inputs again
            bufs, packed = {**all_bufs[0], "out": rt.alloc(plan.operands["out"].nbytes)}, {}
        else:
            bufs = {name: rt.alloc(op.nbytes) for name, op in plan.operands.items()}
        for name, value in packed.items():
            rt.upload(bufs[name], value)
        rt.bind(plan.program(), bufs)
        all_bufs.append(bufs)
    rt.synchronize()
    assert rt.stats["syncs"] == 1
    got = [rt.download(bf["out"], p.operands["out"].dtype, p.operands["out"].shape)
           for bf, p in zip(all_bufs, (conv, pool, conv))]
    assert np.array_equal(conv.unpack(got[0]), ref)
    assert np.array_equal(pool.unpack(got[1]), R.max_pool2d_ref(xp, 3, 2, 1))
    assert np.array_equal(conv.unpack(got[2]), ref)


def test_programs_compose_into_one_program():
    """A builder includes programs with symbolic slots: the result is one relocatable
    Program (what a fused kernel of the graph compiler would be)."""
    rng = np.random.default_rng(9)
    a = rng.integers(-1000, 1000, (1, 18, 5, 5), dtype=np.int32)
    b = rng.integers(-1000, 1000, (1, 18, 5, 5), dtype=np.int32)
    plan = plan_add(DEFAULT, (1, 18, 5, 5), shift=1, clip=(-100, 100))
    builder = ProgramBuilder(DEFAULT, name="add_twice")
    slots = {n: builder.slot(n, op.nbytes) for n, op in plan.operands.items()}
    slots["out2"] = builder.slot("out2", plan.operands["out"].nbytes)
    builder.include(plan.program(), {"a": slots["a"], "b": slots["b"], "out": slots["out"]})
    builder.include(plan.program(), {"a": "b", "b": "a", "out": "out2"})
    fused = Program.from_bytes(builder.build().to_bytes())
    assert list(fused.slots) == ["a", "b", "out", "out2"] and len(fused.uops) == 2 * len(
        plan.program().uops)
    rt = Runtime(open_device("behavioral", "default"))
    packed = plan.pack(a, b)
    bufs = {n: rt.alloc(s) for n, s in fused.slots.items()}
    rt.upload(bufs["a"], packed["a"])
    rt.upload(bufs["b"], packed["b"])
    rt.bind(fused, bufs)
    rt.synchronize()
    ref = R.add_ref(a, b, shift=1, clip=(-100, 100))
    for name in ("out", "out2"):
        out = rt.download(bufs[name], np.int8, plan.operands["out"].shape)
        assert np.array_equal(plan.unpack(out), ref)


def test_bind_errors():
    plan = conv_plan()
    program = plan.program()
    rt = Runtime(open_device("behavioral", "default"))
    bufs = {name: rt.alloc(op.nbytes) for name, op in plan.operands.items()}
    with pytest.raises(InvalidArgumentError, match=r"^bind\(conv2d\): no buffer for slot 'bias'; "
                                                   r"the program's slots are data, weight, bias, "
                                                   r"out$"):
        rt.bind(program, {n: b for n, b in bufs.items() if n != "bias"})
    with pytest.raises(InvalidArgumentError, match=r"^bind\(conv2d\): no slot named 'extra'"):
        rt.bind(program, {**bufs, "extra": bufs["out"]})
    small = rt.alloc(100)
    with pytest.raises(DramRangeError, match=r"^bind\(conv2d\): slot 'out' needs \d+ bytes, the "
                                             r"100-byte buffer at 0x[0-9a-f]+ is smaller$"):
        rt.bind(program, {**bufs, "out": small})
    rt.free(small)
    with pytest.raises(BufferHandleError, match=r"^bind\(conv2d\) slot 'out': Buffer\("):
        rt.bind(program, {**bufs, "out": small})
    with pytest.raises(InvalidArgumentError, match=r"^bind\(conv2d\): the program was built for "
                                                   r"config 1x8_i8w8a32_12_12_14_14, this stream "
                                                   r"is for 1x16_i8w8a32_15_15_18_17\+overlap$"):
        rt.bind(conv_plan(TINY).program(), bufs)
    with pytest.raises(InvalidArgumentError, match=r"^bind: expected a Program, got dict$"):
        rt.bind({}, bufs)
    assert rt.instructions == []                  # nothing was queued by a failed bind
    tight = Runtime(open_device("behavioral", "default"), max_xfer=16 * 25)
    with pytest.raises(StreamStateError, match=r"^bind\(conv2d\): \d+ instructions and \d+ uops "
                                               r"do not fit one stream of max_xfer=400 bytes"):
        tight.bind(program, {n: tight.alloc(op.nbytes) for n, op in plan.operands.items()})


def test_bind_checks_the_last_byte():
    class HighDevice(Device):
        name = "high"

        def alloc(self, nbytes):
            return (1 << 32) - 4096

        def run(self, insn_addr, insn_count):   # pragma: no cover - never run
            raise AssertionError

    builder = ProgramBuilder(TINY)
    s = builder.slot("s", 1 << 14)
    builder.load_2d(MemType.INP, 0, s, 4096 // TINY.inp_elem_bytes, 1, 1, 1)
    rt = Runtime(HighDevice("tiny"))
    with pytest.raises(DramRangeError, match=r"^bind\(program\) instruction 0 \('s'\): the "
                                             r"transfer's last DRAM byte 0x100000007 "):
        rt.bind(builder.build(), {"s": rt.alloc(1 << 14)})


# --------------------------------------------------------------- serialization

def test_round_trip():
    for plan in all_plans(DEFAULT) + all_plans(TINY):
        program = plan.program()
        data = plan.emit_program().to_bytes()   # its writer is gone: the bytes are decoded
        back = Program.from_bytes(data)
        assert back is not program and data == program.to_bytes()
        assert back == program and back.to_bytes() == data
        assert back.disasm() == program.disasm() and back.name == plan.name
        assert pickle.loads(pickle.dumps(program)) == program
    assert conv_plan().program() != conv_plan(TINY).program()


def test_bind_synchronizes_a_full_stream_first():
    rng = np.random.default_rng(4)
    plan = plan_add(DEFAULT, (1, 18, 5, 5), shift=1, clip=(-100, 100))
    n = len(plan.program())
    rt = Runtime(open_device("behavioral", "default"), max_xfer=(n + 6) * 16 + 8 * 16)
    outs = []
    for _ in range(2):
        a, b = (rng.integers(-1000, 1000, (1, 18, 5, 5), dtype=np.int32) for _ in range(2))
        bufs = {name: rt.alloc(op.nbytes) for name, op in plan.operands.items()}
        for name, value in plan.pack(a, b).items():
            rt.upload(bufs[name], value)
        rt.bind(plan.program(), bufs)
        outs.append((bufs["out"], R.add_ref(a, b, shift=1, clip=(-100, 100))))
    assert rt.stats["auto_syncs"] == 1           # the second bind ran the first program
    rt.synchronize()
    for buf, ref in outs:
        got = rt.download(buf, np.int8, plan.operands["out"].shape)
        assert np.array_equal(plan.unpack(got), ref)


_DIGEST = """
import hashlib
from vtakit.compiler.ops import plan_conv2d, plan_pool2d
from vtakit.hw.config import VTAConfig
cfg = VTAConfig.preset("default")
plans = [plan_conv2d(cfg, (1, 20, 9, 7), (35, 20, 3, 3), 2, 1, bias=True, shift=9, relu=True),
         plan_pool2d(cfg, (1, 16, 9, 9), "max", 3, 2, 1)]
print(hashlib.sha256(b"".join(p.program().to_bytes() for p in plans)).hexdigest())
"""


def test_bytes_identical_across_processes():
    here = hashlib.sha256(conv_plan().program().to_bytes() + plan_pool2d(
        DEFAULT, (1, 16, 9, 9), "max", 3, 2, 1).program().to_bytes()).hexdigest()
    digests = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", _DIGEST], env=env, capture_output=True,
                             text=True, check=True)
        digests.append(out.stdout.strip())
    assert digests == [here, here]


def _program_bytes():
    return plan_dense(DEFAULT, (4, 40), (20, 40), bias=True, shift=3).program().to_bytes()


def _with_crc(data):
    import zlib
    return data[:-4] + zlib.crc32(data[:-4]).to_bytes(4, "little")


@pytest.mark.parametrize("corrupt, message", [
    (lambda d: b"", r"0 bytes is too short for a Program \(at least 20\)"),
    (lambda d: b"PK\x03\x04" + d[4:], r"not a vtakit Program \(the bytes start with "
                                      r"b'PK\\x03\\x04PROG', expected b'VTAKPROG'\)"),
    (lambda d: d[:8] + b"\x07\x00" + d[10:], r"format version 7 is not supported \(this vtakit "
                                             r"reads version 1\)"),
    (lambda d: d[:-1], r"checksum mismatch over \d+ bytes \(stored 0x[0-9a-f]{8}, computed "
                       r"0x[0-9a-f]{8}\): the bytes are truncated or corrupt"),
    (lambda d: d[:200] + bytes([d[200] ^ 0x10]) + d[201:], r"checksum mismatch"),
    (lambda d: d[:len(d) - 40] + d[-4:], r"checksum mismatch"),
    (lambda d: _with_crc(d[:16] + b"#" + d[17:]), r"malformed header \(JSONDecodeError: "),
    (lambda d: _with_crc(d[:20] + b"{" + d[21:]), r"malformed header \(KeyError: 'config'\)$"),
    (lambda d: _with_crc(d[:-8]), r"the header declares \d+ instructions and \d+ uops "
                                  r"\(\d+ bytes in all\), the data has \d+ bytes"),
    (lambda d: _with_crc(d.replace(b'"out"', b'"o t"')), r"slot name 'o t' is not an "
                                                          r"identifier"),
    (lambda d: _with_crc(d.replace(b'[1,"<uops>"]', b'[1,"zzzzzz"]')),
     r"relocation Relocation\(insn=1, slot='zzzzzz'\): LOAD UOP instructions \(and only "
     r"they\) are relocated against <uops>"),
])
def test_corrupt_bytes_one_clear_error(corrupt, message):
    data = _program_bytes()
    assert b'[1,"<uops>"]' in data            # instruction 1 is a LOAD UOP
    with pytest.raises(ProgramFormatError, match=r"^(Program.from_bytes: |Program 'dense': )"
                                                 + message):
        Program.from_bytes(corrupt(data))


def test_program_validation():
    builder = ProgramBuilder(TINY, name="t")
    s = builder.slot("s", 4096)
    builder.load_2d(MemType.INP, 0, s, 0, 1, 1, 1)
    p = builder.build()
    assert p.relocations == (Relocation(0, "s"),)
    with pytest.raises(ProgramFormatError, match=r"^Program 't': relocation Relocation\(insn=0, "
                                                 r"slot='q'\) names slot 'q'; the slots are s$"):
        Program(TINY, p.insns, p.uops, p.slots, [(0, "q")], name="t")
    with pytest.raises(ProgramFormatError, match=r"^Program 't': relocation Relocation\(insn=3, "
                                                 r"slot='s'\) names instruction 3 of 1$"):
        Program(TINY, p.insns, p.uops, p.slots, [(3, "s")], name="t")
    with pytest.raises(ProgramFormatError, match=r"^link: 's' at byte 0x4 is not aligned to the "
                                                 r"8-byte elements of instruction 0$"):
        p.link({"s": 4})
    assert p.link({"s": 8 * 100})[0].dram_base == 100


# ------------------------------------------------------------------- builder

@pytest.mark.parametrize("repeat_pop", [False, True], ids=["merged", "nop"])
def test_builder_carries_pending_pops_like_the_runtime(repeat_pop):
    """A stream built from programs equals the same calls queued directly: pops pending
    at the end of one program merge into the next one's first compute instruction, or
    become a sync-only NOP when that instruction pops the same queue."""
    k = UopKernel.alu(AluOp.ADD, [(0, 0)], [(16, 1, 1)], imm=3)

    def part1(q, a):
        q.load_2d(MemType.ACC, 0, a, 0, 16, 1, 16)
        q.dep_pop(Unit.STORE, Unit.COMPUTE)      # pending at the program's end
        q.dep_pop(Unit.LOAD, Unit.COMPUTE)

    def part2(q, o):
        if repeat_pop:
            q.dep_pop(Unit.STORE, Unit.COMPUTE)
        q.push_alu(k)
        q.dep_push(Unit.COMPUTE, Unit.STORE)
        q.dep_pop(Unit.COMPUTE, Unit.STORE)
        q.store_2d(0, o, 0, 16, 1, 16)

    direct = Runtime(open_device("behavioral", "default"))
    a, o = direct.alloc(16 * 64), direct.alloc(16 * 16)
    bound = Runtime(open_device("behavioral", "default"))
    a2, o2 = bound.alloc(16 * 64), bound.alloc(16 * 16)
    for rt in (direct, bound):                     # tokens for the pops
        for _ in range(1 + repeat_pop):
            rt.dep_push(Unit.STORE, Unit.COMPUTE)
        rt.dep_push(Unit.LOAD, Unit.COMPUTE)
    part1(direct, a)
    part2(direct, o)
    programs = []
    for part, name, nbytes in ((part1, "a", 16 * 64), (part2, "o", 16 * 16)):
        b = ProgramBuilder(DEFAULT)
        part(b, b.slot(name, nbytes))
        programs.append(b.build())
    assert programs[0].pending_pops == ((2, "pop_next_dep"), (2, "pop_prev_dep"))
    bound.bind(programs[0], {"a": a2})
    bound.bind(programs[1], {"o": o2})
    assert [i.word for i in bound.instructions] == [i.word for i in direct.instructions]
    nops = [i for i in bound.instructions if i.is_nop and i.pop_prev_dep and i.pop_next_dep]
    assert len(nops) == repeat_pop
    for rt in (direct, bound):
        rt.synchronize()                           # no deadlock


# ------------------------------------------------------------ uop load merging

def _uop_loads(program):
    return [(i.sram_base, i.dram_base, i.x_size) for i in program.insns
            if i.opcode == Opcode.LOAD and i.memory_type == MemType.UOP and i.x_size]


def _add_kernels(builder, acc, out, n):
    """n ALU ADD kernels of 16 uops each on ACC entries 16k.., each then stored."""
    builder.load_2d(MemType.ACC, 0, acc, 0, 16 * n, 1, 16 * n)
    for k in range(n):
        builder.push_alu(UopKernel.alu(AluOp.ADD, [(16 * k + j, 0) for j in range(16)],
                                       imm=k + 1))
    builder.dep_push(Unit.COMPUTE, Unit.STORE)
    builder.dep_pop(Unit.COMPUTE, Unit.STORE)
    builder.store_2d(0, out, 0, 16 * n, 1, 16 * n)


def test_uop_loads_merge_into_runs_and_run_the_same():
    """Consecutive kernels, contiguous in the uop SRAM and the staging, load with one LOAD
    per run of at most max_uops micro-ops, and the program computes the same."""
    results = []
    for cap in (None, 48, 64, 10_000):
        b = ProgramBuilder(DEFAULT)
        acc, out = b.slot("acc", 5 * 16 * 64), b.slot("out", 5 * 16 * 16)
        _add_kernels(b, acc, out, 5)
        merged = b.coalesce_uop_loads(cap) if cap else 0
        program = b.build()
        loads = _uop_loads(program)
        assert merged == {None: 0, 48: 3, 64: 3, 10_000: 4}[cap]
        assert [n for _, _, n in loads] == {None: [16] * 5, 48: [48, 32], 64: [64, 16],
                                            10_000: [80]}[cap]
        assert [(s, d) for s, d, _ in loads] == ([(16 * k, 16 * k) for k in range(5)]
                                                 if cap is None else
                                                 [(0, 0), (48, 48)] if cap == 48 else
                                                 [(0, 0), (64, 64)] if cap == 64 else [(0, 0)])
        rt = Runtime(open_device("behavioral", "default"))
        a, o = rt.alloc(5 * 16 * 64), rt.alloc(5 * 16 * 16)
        rt.upload(a, np.arange(5 * 16 * 16, dtype=np.int32).reshape(80, 1, 16) % 50)
        rt.bind(program, {"acc": a, "out": o})
        rt.synchronize()
        results.append(rt.download(o, "int8", (80, 16)))
    want = (np.arange(80 * 16).reshape(80, 16) % 50 + np.repeat(np.arange(1, 6), 16)[:, None])
    for got in results:
        assert np.array_equal(got, want.astype(np.int8))


def test_uop_load_merge_keeps_a_kernel_an_earlier_instruction_still_reads():
    """Tiny config (1024 uops): the third kernel wraps to SRAM 0, over the first, which
    the instruction between them still runs, so that LOAD must stay where it is; pops of
    a merged LOAD move to its own ALU instruction."""
    b = ProgramBuilder(TINY)
    ks = [UopKernel.alu(AluOp.ADD, [(j, 0) for j in range(400)], imm=v) for v in (1, 2, 3)]
    b.push_alu(ks[0])
    b.dep_pop(Unit.LOAD, Unit.COMPUTE)           # absorbed by the second kernel's LOAD
    b.push_alu(ks[1])
    b.push_alu(ks[0])                            # resident: reads SRAM 0..399
    b.push_alu(ks[2])                            # wraps to 0: must not move before it
    assert b.coalesce_uop_loads(10_000) == 1
    insns = b.build().insns
    assert [(i.opcode.name, i.sram_base if i.opcode == Opcode.LOAD else i.uop_bgn,
             i.pop_prev_dep) for i in insns] == [
        ("LOAD", 0, 0), ("ALU", 0, 0), ("ALU", 400, 1), ("ALU", 0, 0), ("LOAD", 0, 0),
        ("ALU", 0, 0)]
    assert insns[0].x_size == 800 and insns[4].x_size == 400
    with pytest.raises(InvalidArgumentError, match=r"max_uops must be at least 1"):
        b.coalesce_uop_loads(0)


_PICKLED_KERNEL = """
import pickle, sys
from vtakit.hw.isa import AluOp
from vtakit.runtime import UopKernel
sys.stdout.buffer.write(pickle.dumps(UopKernel.alu(AluOp.MAX, [(0, 0), (1, 1)], imm=-3)))
"""


def test_a_kernel_pickled_in_another_process_is_found_here():
    """A kernel's hash covers its opcode (an enum: hashed by name, a str, whose hash
    each process seeds): an unpickled kernel hashes as this process's equal kernel."""
    from vtakit.runtime import UopKernel
    here = UopKernel.alu(AluOp.MAX, [(0, 0), (1, 1)], imm=-3)
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", _PICKLED_KERNEL], env=env,
                             capture_output=True, check=True)
        there = pickle.loads(out.stdout)
        assert there == here and hash(there) == hash(here)
        assert {here: "found"}.get(there) == "found"
