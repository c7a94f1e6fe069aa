"""The ``requant`` ISA extension (issue 22): SRDHM, RSHR and MULSHR in the ALU table, legal
only with ``"EXTENSIONS": ["requant"]``; lanes against independent references of the
gemmlowp/TFLite formulas, the fast datapath against the sequential spec, the config
round trip, and the opcodes' illegality without the extension."""

import json

import numpy as np
import pytest

from vtakit.hw.config import ConfigError, VTAConfig, load_config
from vtakit.hw.isa import (AluOp, MemType, Opcode, alu_ops, alu_opcode_bits, alu_semantics,
                           alu_violation, illegal_alu_opcodes, isa_for, mul_shift,
                           rounding_shift, srdhm)
from vtakit.hw.spec import ErrorCode
from vtakit.runtime.errors import KernelError
from vtakit.runtime.kernel import UopKernel
from vtakit.sim import reference
from vtakit.sim.datapath import Counters, Fault, SRAMs

from alu_check import alu_insn, assert_datapath_equals_spec, random_loops

TINY = load_config("tiny")
RQ = TINY.replace(extensions=("requant",))
I32_MIN, I32_MAX = -2**31, 2**31 - 1
EDGES = np.array([I32_MIN, I32_MIN + 1, -2**30, -65537, -3, -2, -1, 0, 1, 2, 3, 5, 6, 7,
                  2**30, 2**30 + 1, I32_MAX - 1, I32_MAX], np.int64)


# ------------------------------------------------ references, written from the formulas

def _ref_srdhm(a: int, b: int) -> int:
    """gemmlowp fixedpoint.h, with Python integers (exact)."""
    if a == b == I32_MIN:
        return I32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    v = ab + nudge
    q = abs(v) // (1 << 31)                 # C division truncates toward zero
    return q if v >= 0 else -q


def _wrap(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def _ref_rshr(a: int, e: int) -> int:
    if e < 0:
        return 0 if -e >= 32 else _wrap(a << -e)
    e = min(e, 31)
    # round half away from zero, from the real quotient
    q, r = divmod(abs(a), 1 << e)
    if 2 * r >= (1 << e) and e > 0:
        q += 1
    return q if a >= 0 else -q


def _ref_mulshr(a: int, b: int, k: int) -> int:
    return _wrap((a * b + (1 << (k - 1))) >> k)      # Python >> floors, as int64 >> does


def test_srdhm_lanes_match_gemmlowp():
    a, b = np.meshgrid(EDGES, EDGES)
    rng = np.random.default_rng(0)
    a = np.concatenate([a.ravel(), rng.integers(I32_MIN, I32_MAX + 1, 3000)])
    b = np.concatenate([b.ravel(), rng.integers(I32_MIN, I32_MAX + 1, 3000)])
    got = srdhm(a.astype(np.int32), b.astype(np.int32))
    assert got.dtype == np.int32
    assert got.tolist() == [_ref_srdhm(int(x), int(y)) for x, y in zip(a, b)]
    assert srdhm(np.int32([I32_MIN]), np.int32([I32_MIN])).tolist() == [I32_MAX]
    # ties: 2*a*b = (2k+1) * 2^31 / 2 rounds away from zero
    assert srdhm(np.int32([1 << 29, -(1 << 29)]), np.int32([3, 3])).tolist() == [1, -1]


def test_rshr_lanes_match_rounding_divide_by_pot():
    shifts = np.array([0, 1, 2, 5, 30, 31, 32, 40, I32_MAX, -1, -2, -31, -32, -33, I32_MIN])
    a, e = np.meshgrid(EDGES, shifts)
    rng = np.random.default_rng(1)
    a = np.concatenate([a.ravel(), rng.integers(I32_MIN, I32_MAX + 1, 3000)])
    e = np.concatenate([e.ravel(), rng.integers(-40, 40, 3000)])
    got = rounding_shift(a.astype(np.int32), e.astype(np.int32))
    assert got.dtype == np.int32
    assert got.tolist() == [_ref_rshr(int(x), int(y)) for x, y in zip(a, e)]
    # ties round away from zero; below a half toward zero
    assert rounding_shift(np.int32([5, -5, 6, -6, 7, -7]), np.int32([1] * 6)).tolist() == \
        [3, -3, 3, -3, 4, -4]
    assert rounding_shift(np.int32([-3, 3]), np.int32([2, 2])).tolist() == [-1, 1]


@pytest.mark.parametrize("k", [1, 2, 30, 31, 32, 47, 62])
def test_mulshr_lanes_match_single_rounding(k):
    a, b = np.meshgrid(EDGES, EDGES)
    rng = np.random.default_rng(k)
    a = np.concatenate([a.ravel(), rng.integers(I32_MIN, I32_MAX + 1, 2000)])
    b = np.concatenate([b.ravel(), rng.integers(I32_MIN, I32_MAX + 1, 2000)])
    got = mul_shift(a.astype(np.int32), b.astype(np.int32), k)
    assert got.dtype == np.int32
    assert got.tolist() == [_ref_mulshr(int(x), int(y), k) for x, y in zip(a, b)]


def test_tflite_layer_chain_equals_the_compiler_reference():
    """RSHR(-left) -> SRDHM -> RSHR(right) is TFLite's double-rounding
    MultiplyByQuantizedMultiplier; MULSHR with k = 31 - shift its single rounding."""
    from vtakit.runtime.hostops import fixed_point as fp
    rng = np.random.default_rng(3)
    x = rng.integers(-2**24, 2**24, 4000).astype(np.int32)
    m, s = fp.quantize_multiplier(rng.uniform(1e-5, 3.0, 4000))
    m, s = m.astype(np.int32), s.astype(np.int32)
    y = rounding_shift(srdhm(rounding_shift(x, np.minimum(-s, 0)), m), np.maximum(-s, 0))
    np.testing.assert_array_equal(y, fp.multiply_by_quantized_multiplier(x, m, s))
    ms, ss = fp.quantize_multiplier(rng.uniform(1e-5, 3.0, 4000), single_rounding=True)
    single = np.concatenate([mul_shift(x[j:j + 1], np.int32(ms[j:j + 1]), 31 - int(ss[j]))
                             for j in range(0, 4000, 97)])
    np.testing.assert_array_equal(single, fp.multiply_by_quantized_multiplier(
        x[::97], ms[::97], ss[::97], single_rounding=True))


# ------------------------------------------------------------------ the table, by config

def test_table_is_config_aware():
    assert [str(e) for e in alu_ops(RQ)] == ["MIN=0", "MAX=1", "ADD=2", "SHR=3", "SRDHM=5",
                                            "RSHR=6", "MULSHR=7"]
    assert [str(e) for e in alu_ops(TINY)] == [str(e) for e in alu_ops()]
    assert illegal_alu_opcodes(TINY) == [4, 5, 6, 7] and illegal_alu_opcodes(RQ) == [4]
    assert alu_opcode_bits(TINY) == 2 and alu_opcode_bits(RQ) == 3
    assert alu_semantics(5) is None and alu_semantics(5, RQ).name == "SRDHM"
    assert alu_semantics(5, ["requant"]) is alu_semantics(5, RQ)
    assert alu_violation(5, 0, 0, TINY).startswith("opcode 5 is illegal; legal opcodes are "
                                                   "MIN=0, MAX=1, ADD=2, SHR=3; SRDHM=5 needs")
    assert alu_violation(5, 0, 123, RQ) is None and alu_violation(6, 0, -9, RQ) is None
    assert alu_violation(6, 1, 3, RQ) == ("RSHR needs use_imm=0 (a tensor operand); an "
                                          "immediate is not supported")
    for k in (1, 31, 62):
        assert alu_violation(7, 0, k, RQ) is None
    for k in (0, 63, -1):
        assert alu_violation(7, 0, k, RQ) == (f"MULSHR imm {k} is out of range; MULSHR takes "
                                              "a tensor operand (use_imm=0) and an imm field "
                                              "that is the shift 1..62")
    assert alu_violation(7, 1, 5, RQ).startswith("MULSHR needs use_imm=0")


def test_disassembler_names_the_extension_opcodes():
    isa = isa_for(RQ)
    for code, name in ((5, "SRDHM"), (6, "RSHR"), (7, "MULSHR")):
        text = str(isa.decode(isa.encode(Opcode.ALU, alu_opcode=code, imm=9, uop_end=1)))
        assert text.startswith(f"ALU    {name} ") and "alu_opcode=" + str(code) in text


def test_kernels_carry_the_extension_opcodes():
    k = UopKernel.alu(AluOp.MULSHR, [(0, 1)], [(4, 1, 1)], imm=31)
    assert (k.kind, k.use_imm, k.imm) == ("ALU MULSHR", False, 31)
    assert UopKernel.alu(AluOp.SRDHM, [(0, 1)]).use_imm is False
    assert UopKernel.alu(AluOp.ADD, [(0, 1)], imm=3).use_imm is True
    assert len(k.check_config(RQ)) == 1
    with pytest.raises(KernelError, match=r"^ALU MULSHR kernel: opcode 7 is illegal; .*needs "
                                          r"the ISA extension 'requant' .*\(config 1x8_i8w8a32"
                                          r"_12_12_14_14\)$"):
        k.check_config(TINY)
    with pytest.raises(KernelError, match=r"^ALU kernel: MULSHR imm 0 is out of range"):
        UopKernel.alu(AluOp.MULSHR, [(0, 1)])
    with pytest.raises(KernelError, match=r"^ALU kernel: RSHR needs use_imm=0"):
        UopKernel.alu(AluOp.RSHR, [(0, 1)], imm=4)


# --------------------------------------------------- datapath == sequential spec, faults

def _state(config, seed):
    rng = np.random.default_rng(seed)
    srams = SRAMs(config)
    n = srams.acc.size
    pick = rng.integers(0, 3, n)
    srams.acc.reshape(-1)[:] = np.select(
        [pick == 0, pick == 1], [rng.integers(-3, 32, n), rng.integers(2**30, 2**31, n)],
        rng.integers(I32_MIN, I32_MAX + 1, n))
    srams.acc.reshape(-1)[rng.integers(0, n, 20)] = I32_MIN
    srams.uop[:8] = [srams.isa.encode_uop(int(rng.integers(0, 6)), int(rng.integers(0, 6)))
                     for _ in range(8)]
    return srams


@pytest.mark.parametrize("code", [AluOp.SRDHM, AluOp.RSHR, AluOp.MULSHR])
def test_datapath_equals_the_sequential_spec(code):
    """Repeated destinations and chains through written rows (the fast path's waves)."""
    rng = np.random.default_rng(int(code))
    for n in range(40):
        fast, spec = _state(RQ, n), _state(RQ, n)
        insn = alu_insn(RQ, code, use_imm=0,
                        imm=int(rng.integers(1, 63)) if code == AluOp.MULSHR else 0,
                        **random_loops(rng))
        assert_datapath_equals_spec(fast, spec, insn)


@pytest.mark.parametrize("code", [5, 6, 7])
def test_extension_opcodes_are_illegal_without_the_extension_in_both_models(code):
    insn = alu_insn(TINY, code, use_imm=0, imm=5)
    for execute in (SRAMs(TINY).alu, lambda i, c: reference.alu(SRAMs(TINY), i, c)):
        with pytest.raises(Fault, match=f"^ALU opcode {code} is illegal; legal opcodes are "
                                        "MIN=0, MAX=1, ADD=2, SHR=3; ") as info:
            execute(insn, Counters())
        assert info.value.code == ErrorCode.ILLEGAL_FIELD


# ------------------------------------------------------------------------------ config

def test_config_show_output_with_extensions_added_loads(capsys):
    from vtakit.cli.main import main
    assert main(["config", "show", "default"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "EXTENSIONS" not in shown
    config = VTAConfig.from_dict({**shown, "EXTENSIONS": ["requant"]})
    assert config.extensions == ("requant",) and config.has_extension("requant")
    assert config.name == "1x16_i8w8a32_15_15_18_17+requant+overlap"
    assert config.model == "sim_1x16_i8w8a32_15_15_18_17+requant+overlap"
    assert config.replace(extensions=()) == load_config("default")
    assert config.to_dict() == {**load_config("default").to_dict(), "EXTENSIONS": ["requant"]}
    assert VTAConfig.from_dict(config.derived()) == config
    assert VTAConfig.from_dict({**shown, "EXTENSIONS": []}) == load_config("default")
    assert not load_config("default").has_extension("requant")


@pytest.mark.parametrize("value, pattern", [
    (["requant", "fma"], r"^config: EXTENSIONS=\['fma', 'requant'\]: unknown extension 'fma'; "
                         r"known extensions are requant \(exact TFLite"),
    ("requant", r"^config: EXTENSIONS must be a list of extension names "
                r"\(known: requant, requant2\), "
                r"got 'requant'$"),
])
def test_bad_extensions_are_config_errors(value, pattern):
    with pytest.raises(ConfigError, match=pattern):
        VTAConfig.from_dict({**TINY.to_dict(), "EXTENSIONS": value})


def test_derived_keys_must_match():
    with pytest.raises(ConfigError, match=r"^config: acc_depth=7 does not match the keys"):
        VTAConfig.from_dict({**TINY.derived(), "acc_depth": 7})


# -------------------------------------------------------------------------- the fuzzer

def test_fuzzer_draws_the_extension_opcodes_only_with_the_extension():
    from vtakit.sim.fuzz import run_program
    from vtakit.sim.fuzz_gen import generate_program, illegal_kinds
    assert "alu opcode" in illegal_kinds(RQ)            # 4 stays illegal
    seen = {}
    for i in range(12):
        program = generate_program(RQ, np.random.default_rng([22, i]), token_depth=256,
                                   illegal=0.0)
        for a in program.actions:
            if a.kind == "alu":
                f = a.fields
                seen.setdefault(AluOp(f["alu_opcode"]).name, []).append(f["imm"])
                assert alu_violation(f["alu_opcode"], f["use_imm"], f["imm"], RQ) is None
        image, _ = program.build()
        out = run_program(image, RQ, "behavioral")
        assert out.fault is None, out.message
    assert {"SRDHM", "RSHR", "MULSHR"} <= set(seen)
    assert all(1 <= k <= 62 for k in seen["MULSHR"])
    for i in range(12):
        program = generate_program(TINY, np.random.default_rng([22, i]), token_depth=256)
        codes = {a.fields["alu_opcode"] for a in program.actions if a.kind == "alu"}
        assert codes <= {0, 1, 2, 3}


# ------------------------------------------------------------------- the RTL ALU block

def test_rtl_alu_lanes_match_the_references():
    """VectorAlu of a requant config (Amaranth simulation) against the references above,
    edge cases and random lanes, every operand form; the base opcodes still work."""
    from amaranth.sim import Simulator
    from vtakit.hw.alu import REQUANT_OPS, REQUANT_STAGES, VectorAlu
    lanes = RQ.batch * RQ.block_out
    dut = VectorAlu(RQ)
    assert len(dut.op) == 3
    rng = np.random.default_rng(9)
    edge = np.resize(EDGES, 4 * lanes)
    shifts = np.array([0, 1, 2, 31, 32, 99, -1, -2, -31, -32, I32_MIN, I32_MAX, 5, 30, 3, 4])
    cases = []
    for n in range(0, len(edge), lanes):
        cases.append((AluOp.SRDHM, edge[n:n + lanes], edge[::-1][n:n + lanes], 0))
        cases.append((AluOp.RSHR, edge[n:n + lanes], np.resize(shifts, lanes), 0))
        cases.append((AluOp.RSHR, edge[n:n + lanes], np.resize(shifts[::-1], lanes), 0))
    cases.append((AluOp.SRDHM, np.full(lanes, I32_MIN), np.full(lanes, I32_MIN), 0))
    for _ in range(4):
        a = rng.integers(I32_MIN, I32_MAX + 1, lanes)
        cases.append((AluOp.SRDHM, a, rng.integers(I32_MIN, I32_MAX + 1, lanes), 0))
        cases.append((AluOp.RSHR, a, rng.integers(-35, 35, lanes), 0))
    for k in (1, 2, 30, 31, 32, 61, 62):
        cases.append((AluOp.MULSHR, edge[:lanes], edge[::-1][:lanes], k))
        cases.append((AluOp.MULSHR, rng.integers(I32_MIN, I32_MAX + 1, lanes),
                      rng.integers(I32_MIN, I32_MAX + 1, lanes), k))
    refs = {AluOp.SRDHM: lambda a, b, k: _ref_srdhm(a, b),
            AluOp.RSHR: lambda a, b, k: _ref_rshr(a, b), AluOp.MULSHR: _ref_mulshr,
            AluOp.ADD: lambda a, b, k: _wrap(a + b), AluOp.MIN: lambda a, b, k: min(a, b),
            AluOp.SHR: lambda a, b, k: a >> k}
    cases += [(AluOp.ADD, edge[:lanes], edge[::-1][:lanes], 0),
              (AluOp.MIN, edge[:lanes], edge[::-1][:lanes], 0),
              (AluOp.SHR, edge[:lanes], edge[:lanes], 7)]

    def pack(values):
        return sum((int(v) & 0xFFFFFFFF) << (32 * i) for i, v in enumerate(values))

    async def testbench(ctx):
        for op, a, b, k in cases:
            ctx.set(dut.op, op)
            ctx.set(dut.a, pack(a))
            ctx.set(dut.b, pack(b))
            ctx.set(dut.shift, k if k < 32 else k - 64)      # the imm's low 6 bits
            if op in REQUANT_OPS:       # the result REQUANT_STAGES - 1 cycles later
                ctx.set(dut.late_en, 1)
                await ctx.tick()
                ctx.set(dut.late_en, 0)
                await ctx.tick().repeat(REQUANT_STAGES - 2)
                word = ctx.get(dut.late)
            else:
                word = ctx.get(dut.result)
            got = [_wrap((word >> (32 * i)) & 0xFFFFFFFF) for i in range(lanes)]
            want = [refs[op](int(x), int(y), k) for x, y in zip(a, b)]
            assert got == want, (op.name, k, list(a), list(b))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


# ------------------------------------------------- every backend, bit for bit (tiny RTL)

RTL = ["behavioral", "cxxrtl", "verilator"]


def _requant_prefix(seed):
    """A fuzzed requant program's actions up to its first extension ALU, plus its data."""
    from vtakit.sim.fuzz_gen import generate_program
    for i in range(20):
        program = generate_program(RQ, np.random.default_rng([seed, i]), token_depth=256,
                                   illegal=0.0)
        for n, a in enumerate(program.actions):
            if a.kind == "alu" and a.fields["alu_opcode"] >= AluOp.SRDHM:
                return program, program.actions[:n + 1]
    pytest.fail("no program holds an extension opcode")


def test_rtl_backends_agree_with_the_extension(capsys, tmp_path):
    """The CI campaign with the extension: behavioral vs cxxrtl vs verilator."""
    from vtakit.cli.main import main
    path = tmp_path / "requant.json"
    path.write_text(json.dumps(RQ.to_dict()))
    code = main(["fuzz", "--config", str(path), "--backends", ",".join(RTL), "--count", "20",
                 "--seed", "1", "--out-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("fuzz 1x8_i8w8a32_12_12_14_14+requant on behavioral,cxxrtl,verilator: "
                          "20 programs, "), out
    assert ", 0 mismatching, 0 skipped" in out.splitlines()[0], out
    for name in ("SRDHM", "RSHR", "MULSHR"):
        assert f"alu {name} tensor" in out, out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_extension_program_faults_without_the_extension_on_every_backend(seed):
    from vtakit.runtime.compare import compare_outcomes
    from vtakit.sim.fuzz import run_program
    from vtakit.sim.fuzz_program import FuzzProgram
    program, actions = _requant_prefix(seed)
    on = FuzzProgram(RQ, program.data, actions, 256).build()[0]
    off = FuzzProgram(TINY, program.data, actions, 256).build()[0]
    with_ext = [run_program(on, RQ, b) for b in RTL]
    without = [run_program(off, TINY, b) for b in RTL]
    assert all(o.fault is None for o in with_ext), [o.message for o in with_ext]
    assert all(compare_outcomes(with_ext[0], o).equal for o in with_ext[1:])
    keys = {o.fault.key for o in without}
    assert len(keys) == 1, keys
    code, module, index = keys.pop()
    assert (code, module) == ("ILLEGAL_FIELD", "compute"), without[0].message
    assert "is illegal; legal opcodes are MIN=0, MAX=1, ADD=2, SHR=3; " in without[0].message


def test_verilog_has_the_extension_only_when_enabled():
    from vtakit.hw.alu import VectorAlu
    from vtakit.hw.verilog import convert, generate_verilog
    base, ext = convert(VectorAlu(TINY), name="alu"), convert(VectorAlu(RQ), name="alu")
    assert "requant_prod" not in base and "requant_prod7" in ext
    assert "input [1:0] op" in base and "input [2:0] op" in ext
    assert ext == convert(VectorAlu(RQ), name="alu")          # deterministic
    text = generate_verilog(RQ)
    head = text.splitlines()[:4]
    assert head[1].startswith("// config: 1x8_i8w8a32_12_12_14_14+requant (")
    assert head[3] == ("// ISA extension requant: exact TFLite requantization: ALU SRDHM, "
                       "RSHR and MULSHR")
    assert "requant_prod0" in text


# ------------------------------------------------------------------ executables, images

def test_executable_for_the_extension_refuses_hardware_without_it(tmp_path):
    import math

    import vtakit
    from vtakit.runtime import ExecutableError
    from vtakit.runtime.device import DeviceError, open_device
    from vm_programs import factorial_exe
    default = load_config("default")
    exe = factorial_exe()
    exe.config = default.replace(extensions=("requant",))
    assert exe.header()["config"]["EXTENSIONS"] == ["requant"]
    path = exe.save(tmp_path / "m.vtax")
    assert vtakit.load(path).config == exe.config
    note = (r"; it uses the ISA extension requant, which config 1x16_i8w8a32_15_15_18_17\+overlap does "
            r"not have \(run it on hardware built with \"EXTENSIONS\": \[\"requant\"\]\)$")
    with pytest.raises(ExecutableError, match=r"section HEAD, byte 24: built for config "
                                              r"1x16_i8w8a32_15_15_18_17\+requant\+overlap, not "
                                              r"1x16_i8w8a32_15_15_18_17\+overlap" + note):
        vtakit.load(path, config="default")
    with open_device("behavioral", default) as dev:
        with pytest.raises(DeviceError, match=r"^the executable is built for config "
                                              r"1x16_i8w8a32_15_15_18_17\+requant\+overlap, not the "
                                              r"device's 1x16_i8w8a32_15_15_18_17\+overlap" + note):
            exe.run([np.array(5, np.int64)], device=dev)
    with open_device("behavioral", exe.config) as dev:
        assert int(exe.run([np.array(5, np.int64)], device=dev)) == math.factorial(5)


# ---------------------------------- a whole TFLite requantization on the device (worked)

def _tflite_epilogue(rt, rng, rows=12, single=False):
    """int32 accumulators -> TFLite requantization with per-channel multipliers and shifts
    -> + zero point -> clamp -> int8 store, all on VTA (the sequence the compiler emits);
    returns (output buffer, expected int8 from runtime.hostops.fixed_point)."""
    from vtakit.hw.spec import Unit
    from vtakit.runtime.hostops import fixed_point as fp
    c = rt.config
    lanes = c.batch * c.block_out
    scale = rng.uniform(1e-4, 4e-2, c.block_out)        # per output channel (lane)
    scale[:2] = [1.7, 3.1]                              # positive shifts: RSHR left first
    if single:     # MULSHR's k is per instruction: channels share one shift (FC layers do)
        scale = rng.uniform(2**-7, 2**-6, c.block_out)
    target = rng.uniform(-150, 150, (rows, c.batch, c.block_out))
    acc = np.round(target / scale).astype(np.int32)     # outputs mostly inside int8
    acc[0, 0, :2] = [I32_MIN, I32_MAX]
    zp = -7
    m, s = fp.quantize_multiplier(scale, single_rounding=single)
    want = fp.requantize_tflite(acc, scale, zp, axis=2, single_rounding=single)
    want = np.clip(want, -128, 127).astype(np.int8)

    def row(values):                    # one ACC row: the channel's value in every batch row
        return np.broadcast_to(np.asarray(values, np.int32), (c.batch, c.block_out))

    if single:
        assert len(set(s.tolist())) == 1
        params = [row(m)]
    else:
        params = [row(-np.maximum(s, 0)), row(m), row(np.maximum(-s, 0))]
    data = np.concatenate([acc.reshape(rows, lanes)] + [p.reshape(1, lanes) for p in params])
    buf = rt.alloc(data.nbytes)
    rt.upload(buf, data)
    rt.load_2d(MemType.ACC, 0, buf, 0, len(data), 1, len(data))
    loop = [(rows, 1, 0)]               # dst row r, the same parameter row for every r
    if single:
        rt.push_alu(UopKernel.alu(AluOp.MULSHR, [(0, rows)], loop, imm=31 - int(s[0])))
    else:
        for j, op in enumerate((AluOp.RSHR, AluOp.SRDHM, AluOp.RSHR)):
            rt.push_alu(UopKernel.alu(op, [(0, rows + j)], loop))
    rt.push_alu(UopKernel.alu(AluOp.ADD, [(0, 0)], [(rows, 1, 0)], imm=zp))
    rt.push_alu(UopKernel.alu(AluOp.MAX, [(0, 0)], [(rows, 1, 0)], imm=-128))
    rt.push_alu(UopKernel.alu(AluOp.MIN, [(0, 0)], [(rows, 1, 0)], imm=127))
    out = rt.alloc(want.nbytes)
    rt.dep_push(Unit.COMPUTE, Unit.STORE)
    rt.dep_pop(Unit.COMPUTE, Unit.STORE)
    rt.store_2d(0, out, 0, rows, 1, rows)
    return out, want


@pytest.mark.parametrize("backend", RTL)
@pytest.mark.parametrize("single", [False, True], ids=["double", "single"])
def test_tflite_requantization_runs_whole_on_vta(backend, single):
    from vtakit.runtime import Runtime
    from vtakit.runtime.device import open_device
    with open_device(backend, RQ) as dev:
        rt = Runtime(dev)
        out, want = _tflite_epilogue(rt, np.random.default_rng(22), single=single)
        rt.synchronize()
        got = rt.download(out, np.int8, want.shape)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 20


# ------------------------------------------- the two-stage requant ops, back to back

def _chained_requant_run(backend):
    """Requant micro-ops that read what the micro-op right before them wrote (as ``a``
    and as the tensor operand), a base ALU op right after a requant one (in the same
    instruction stream, dispatched while it drains) and a requant op right after a base
    one; every accumulator row stored (low 8 bits of each lane)."""
    from vtakit.runtime import Runtime, Unit
    from vtakit.sim import open_device
    lanes = RQ.batch * RQ.block_out
    rng = np.random.default_rng(11)
    rows = 6
    acc = rng.integers(-2**30, 2**30, (rows, RQ.batch, RQ.block_out)).astype(np.int32)
    acc[3] = rng.integers(-3, 9, (RQ.batch, RQ.block_out))      # RSHR amounts
    with open_device(backend, RQ) as dev:
        rt = Runtime(dev)
        buf, out = rt.alloc(acc.nbytes), rt.alloc(rows * lanes)
        rt.upload(buf, acc)
        rt.load_2d(MemType.ACC, 0, buf, 0, rows, 1, rows)
        # ACC[0] = SRDHM(ACC[0], ACC[1]); ACC[2] = SRDHM(ACC[2], ACC[0]); ACC[2] = RSHR(ACC[2], ACC[3])
        rt.push_alu(UopKernel.alu(AluOp.SRDHM, [(0, 1), (2, 0)]))
        rt.push_alu(UopKernel.alu(AluOp.RSHR, [(2, 3), (4, 2)]))
        rt.push_alu(UopKernel.alu(AluOp.ADD, [(2, 0)], imm=77))       # base op after requant
        rt.push_alu(UopKernel.alu(AluOp.MULSHR, [(5, 2), (5, 5)], imm=33))
        rt.push_alu(UopKernel.alu(AluOp.MAX, [(1, 5)]))                # tensor base op
        rt.push_alu(UopKernel.alu(AluOp.SRDHM, [(1, 1)]))               # reads the MAX's result
        rt.dep_push(Unit.COMPUTE, Unit.STORE)
        rt.dep_pop(Unit.COMPUTE, Unit.STORE)
        rt.store_2d(0, out, 0, rows, 1, rows)
        stats = rt.synchronize().stats
        return rt.download(out, "int8", (rows, lanes)), stats


@pytest.mark.parametrize("backend", ["verilator", "cxxrtl"])
def test_requant_ops_back_to_back_equal_the_behavioral_model(backend):
    want, want_stats = _chained_requant_run("behavioral")
    got, stats = _chained_requant_run(backend)
    np.testing.assert_array_equal(got, want)
    assert stats["alu_counter"] == want_stats["alu_counter"] == 9


# ------------------------- the requant pipeline: one micro-op per cycle, held on a hazard
# The compute module alone (test_rtl_compute's bench: the Amaranth simulation with Python
# models around it), tiny+requant, every run against the behavioral model's datapath bit
# for bit (all of ACC, every OUT entry, the counters, the fault). The cycle counts follow
# hw/compute.py's rule: requant micro-ops issue one per cycle; one whose acc reads hit the
# dst of a requant micro-op issued d < REQUANT_STAGES cycles before waits
# REQUANT_STAGES - d cycles; a base loop after a requant instruction issues
# REQUANT_STAGES cycles after its last micro-op (2 cycles later than after a base one).

P = 40          # the per-channel parameter row of the passes below (nothing writes it)


def _pipeline_run(insns, uops, acc):
    """Run ``insns`` (then FINISH) on the compute module and on the behavioral model's
    datapath; assert equal ACC, OUT, counters and fault (code, instruction); return the
    RTL run (its ``accepted`` cycles) and the fault's instruction index or None."""
    from test_rtl_compute import ComputeBench, check_against_model
    insns = list(insns) + [isa_for(RQ).encode(Opcode.FINISH)]
    bench = ComputeBench(RQ)
    r = bench.run(insns, uop=uops, acc=acc, max_cycles=3000)
    fault = check_against_model(RQ, bench, r, insns, uops, acc)
    return r, None if fault is None else fault[0]


def _acc(rows=64, seed=5):
    """Random int32 rows; the parameter row P has small RSHR shifts in its lanes."""
    rng = np.random.default_rng(seed)
    acc = rng.integers(I32_MIN, I32_MAX + 1, (rows, RQ.batch * RQ.block_out))
    acc[P] = rng.integers(-3, 12, RQ.batch * RQ.block_out)
    return acc


def _loop_alu(op, bgn, end, *, iters=(1, 1), dst=(0, 0), src=(0, 0), imm=0, **flags):
    isa = isa_for(RQ)
    return isa.encode(Opcode.ALU, alu_opcode=op, use_imm=int(op < AluOp.SRDHM and imm != 0),
                      imm=imm, uop_bgn=bgn, uop_end=end, iter_out=iters[0], iter_in=iters[1],
                      dst_factor_out=dst[0], dst_factor_in=dst[1], src_factor_out=src[0],
                      src_factor_in=src[1], **flags)


@pytest.mark.parametrize("op", [AluOp.SRDHM, AluOp.RSHR, AluOp.MULSHR])
def test_independent_requant_uops_issue_one_per_cycle(op):
    """A 16-micro-op pass (two loop iterations of 8 rows, one parameter row) takes N + 1
    cycles from accept to accept when the next loop is dispatched while it drains, the
    base ALU loop after it issues 2 cycles later than after a base loop, and a pass
    before FINISH drains its late writes (N + 1 + W + REQUANT_STAGES - 1)."""
    from vtakit.hw.alu import REQUANT_STAGES
    from vtakit.hw.compute import write_stage
    isa = isa_for(RQ)
    W = write_stage(RQ)
    uops = [isa.encode_uop(d, P, 0) for d in range(8)]
    imm = 31 if op == AluOp.MULSHR else 0
    rq = _loop_alu(op, 0, 8, iters=(2, 1), dst=(8, 0), imm=imm)
    add = _loop_alu(AluOp.ADD, 0, 8, imm=-5)
    r, _ = _pipeline_run([rq, add, rq], uops, _acc())
    gaps = np.diff(r.accepted).tolist()
    assert gaps == [16 + 1, 8 + 1 + (REQUANT_STAGES - 2), 16 + 1 + W + REQUANT_STAGES - 1], gaps


@pytest.mark.parametrize("via", ["dst", "src"])
@pytest.mark.parametrize("distance", [1, 2, 3, 4, 5])
def test_dependent_requant_uops_wait_for_the_late_write(via, distance):
    """Micro-op ``distance`` of an 8-micro-op SRDHM pass reads row 0, which micro-op 0
    wrote (as its ``a``: dst, or as its tensor operand: src): the pass takes
    REQUANT_STAGES - distance cycles more than an independent one (none from 4 on)."""
    from vtakit.hw.alu import REQUANT_STAGES
    from vtakit.hw.compute import write_stage
    isa = isa_for(RQ)
    pairs = [(d + 1, P) for d in range(8)]
    pairs[0] = (0, P)
    pairs[distance] = (0, P) if via == "dst" else (distance + 1, 0)
    uops = [isa.encode_uop(d, s, 0) for d, s in pairs]
    r, _ = _pipeline_run([_loop_alu(AluOp.SRDHM, 0, 8)], uops, _acc())
    wait = max(0, REQUANT_STAGES - distance)
    assert r.accepted[1] - r.accepted[0] == 8 + 1 + write_stage(RQ) + REQUANT_STAGES - 1 + wait


def test_a_chain_of_dependent_requant_uops():
    """Each micro-op reads the row the one before it wrote (dst and src alternately), two
    loop iterations: every one waits REQUANT_STAGES - 1 cycles."""
    from vtakit.hw.alu import REQUANT_STAGES
    from vtakit.hw.compute import write_stage
    isa = isa_for(RQ)
    uops = [isa.encode_uop(0, P, 0), isa.encode_uop(0, P, 0), isa.encode_uop(1, 0, 0),
            isa.encode_uop(1, 1, 0)]
    insn = _loop_alu(AluOp.MULSHR, 0, 4, iters=(2, 1), dst=(1, 0), src=(1, 0), imm=30)
    r, _ = _pipeline_run([insn], uops, _acc())
    assert r.accepted[1] - r.accepted[0] == \
        8 + 1 + write_stage(RQ) + REQUANT_STAGES - 1 + 7 * (REQUANT_STAGES - 1)


@pytest.mark.parametrize("after", ["gemm", "alu_tensor", "alu_imm", "srdhm_dst", "rshr_src",
                                   "gemm_reset"])
def test_requant_pass_then_a_dependent_instruction(after):
    """The instruction right after a requant pass (dispatched while the pass drains) reads
    the row its last micro-op wrote: a GEMM accumulating onto it (or resetting it), a base
    ALU reading it as src or dst, another requant pass reading it as dst or src (held
    across the instruction boundary)."""
    isa = isa_for(RQ)
    uops = [isa.encode_uop(d, P, 0) for d in range(4)] + [
        isa.encode_uop(3, 2, 5),       # 4: dst 3 (GEMM: inp 2, wgt 5)
        isa.encode_uop(9, 3, 0),       # 5: dst 9, src 3
    ]
    nxt = {
        "gemm": isa.encode(Opcode.GEMM, uop_bgn=4, uop_end=5, iter_out=1, iter_in=1),
        "gemm_reset": isa.encode(Opcode.GEMM, reset_reg=1, uop_bgn=4, uop_end=5,
                                 iter_out=1, iter_in=1),
        "alu_tensor": _loop_alu(AluOp.ADD, 5, 6),
        "alu_imm": _loop_alu(AluOp.SHR, 4, 5, imm=3),
        "srdhm_dst": _loop_alu(AluOp.SRDHM, 4, 5),
        "rshr_src": _loop_alu(AluOp.RSHR, 5, 6),
    }[after]
    # rows 0..3 = SRDHM(row, P); then the dependent one; then a base pass over 0..3
    _pipeline_run([_loop_alu(AluOp.SRDHM, 0, 4), nxt, _loop_alu(AluOp.MAX, 0, 4, imm=-7)],
                  uops, _acc())


@pytest.mark.parametrize("case", ["independent", "dependent", "last_held"])
def test_fault_inside_a_requant_pass(case):
    """A loop iteration's dst is out of range: the fault names the pass, and ACC and OUT
    hold exactly what the micro-ops before it wrote (their late writes too), also when
    the micro-op before the faulting one is held for its own hazard, and when the faulting
    one is the pass's last, held in S1 behind it while the next command, taken in the
    cycle it issued, waits for its dispatch."""
    isa = isa_for(RQ)
    half = RQ.acc_depth // 2
    if case == "last_held":     # iteration 1's third micro-op (dst half + 4 + half - 1)
        uops = [isa.encode_uop(0, P, 0), isa.encode_uop(0, P, 0),
                isa.encode_uop(half + 4, P, 0)]
        rq = _loop_alu(AluOp.SRDHM, 0, 3, iters=(2, 1), dst=(half - 1, 0))
    else:                       # iteration 2's first micro-op (dst 2 * half)
        uops = [isa.encode_uop(0, P, 0), isa.encode_uop(0 if case == "dependent" else 1, P, 0)]
        rq = _loop_alu(AluOp.SRDHM, 0, 2, iters=(3, 1), dst=(half, 0))
    insns = [_loop_alu(AluOp.ADD, 0, 2, imm=3), rq, _loop_alu(AluOp.ADD, 0, 2, imm=9)]
    acc = np.zeros((RQ.acc_depth, RQ.batch * RQ.block_out), np.int64)
    acc[:64] = _acc()
    acc[half - 1:half + 6] = _acc(seed=6)[:7]
    _, fault = _pipeline_run(insns, uops, acc)
    assert fault == 1


def random_late_program(rng, n_insns, config, ext_insn, *, gemm=0.2, base=0.45, src_rows=8):
    """Random GEMM, base ALU and extension ALU instructions over 8 uops whose rows crowd
    into 0..7 (read-after-write at every distance, within and across instructions): a GEMM
    with probability ``gemm``, a base ALU op up to ``base``, else the tensor-form extension
    instruction ``ext_insn(rng) -> (opcode, imm)``; uop src rows in ``0..src_rows-1``."""
    isa = isa_for(config)
    uops = [isa.encode_uop(int(rng.integers(0, 8)), int(rng.integers(0, src_rows)),
                           int(rng.integers(0, 8))) for _ in range(8)]
    insns = []
    for _ in range(n_insns):
        bgn = int(rng.integers(0, 8))
        loop = dict(uop_bgn=bgn, uop_end=int(rng.integers(bgn + 1, 9)),
                    iter_out=int(rng.integers(1, 3)), iter_in=int(rng.integers(1, 3)),
                    dst_factor_out=int(rng.integers(0, 3)), dst_factor_in=int(rng.integers(0, 3)),
                    src_factor_out=int(rng.integers(0, 3)), src_factor_in=int(rng.integers(0, 3)))
        kind = rng.random()
        if kind < gemm:
            insns.append(isa.encode(Opcode.GEMM, reset_reg=int(rng.random() < 0.2),
                                    wgt_factor_out=1, wgt_factor_in=0, **loop))
        elif kind < base:
            op = AluOp(int(rng.integers(0, 4)))
            use_imm = int(op == AluOp.SHR or rng.random() < 0.5)
            imm = int(rng.integers(-5, 6)) if op == AluOp.SHR else int(rng.integers(-999, 999))
            insns.append(isa.encode(Opcode.ALU, alu_opcode=op, use_imm=use_imm, imm=imm, **loop))
        else:
            op, imm = ext_insn(rng)
            insns.append(isa.encode(Opcode.ALU, alu_opcode=op, use_imm=0, imm=imm, **loop))
    return uops, insns


def _requant_insn(rng):
    op = AluOp(int(rng.choice([AluOp.SRDHM, AluOp.RSHR, AluOp.MULSHR])))
    return op, int(rng.integers(1, 63)) if op == AluOp.MULSHR else 0


def _random_requant_program(rng, n_insns):
    """Random GEMM, base ALU and requant passes (:func:`random_late_program`)."""
    return random_late_program(rng, n_insns, RQ, _requant_insn)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_dense_requant_programs_match_the_behavioral_model(seed):
    rng = np.random.default_rng([38, seed])
    uops, insns = _random_requant_program(rng, 24)
    acc = rng.integers(-2**24, 2**24, (16, RQ.batch * RQ.block_out))
    acc[:, ::3] = rng.integers(-4, 12, (16, len(acc[0, ::3])))     # RSHR-sized lanes
    _pipeline_run(insns, uops, acc)


def _distance_run(backend):
    """One SRDHM pass with read-after-write at distances 1..4 (as ``a`` and as the tensor
    operand), a base ADD right after it reading its last row, a RSHR pass, then a STORE of
    every row right after the last requant pass (its push waits for the late writes)."""
    from vtakit.runtime import Runtime, Unit
    from vtakit.sim import open_device
    lanes = RQ.batch * RQ.block_out
    rng = np.random.default_rng(12)
    rows, p, e = 14, 12, 13         # p: SRDHM multipliers, e: RSHR shifts
    acc = rng.integers(I32_MIN, I32_MAX + 1, (rows, lanes)).astype(np.int32)
    acc[e] = rng.integers(-2, 9, lanes)
    pairs = [(0, p), (0, p),                            # distance 1, dst
             (1, p), (2, p), (2, 1),                    # distance 2, src
             (3, p), (4, p), (5, p), (3, p),            # distance 3, dst
             (6, p), (7, p), (8, p), (9, p), (10, 6)]   # distance 4, src
    with open_device(backend, RQ) as dev:
        rt = Runtime(dev)
        buf, out = rt.alloc(acc.nbytes), rt.alloc(rows * lanes)
        rt.upload(buf, acc)
        rt.load_2d(MemType.ACC, 0, buf, 0, rows, 1, rows)
        rt.push_alu(UopKernel.alu(AluOp.SRDHM, pairs))
        rt.push_alu(UopKernel.alu(AluOp.ADD, [(11, 10)]))
        rt.push_alu(UopKernel.alu(AluOp.RSHR, [(d, e) for d in range(12)]))
        rt.dep_push(Unit.COMPUTE, Unit.STORE)
        rt.dep_pop(Unit.COMPUTE, Unit.STORE)
        rt.store_2d(0, out, 0, rows, 1, rows)
        rt.synchronize()
        return rt.download(out, "int8", (rows, lanes))


@pytest.mark.parametrize("backend", ["verilator", "cxxrtl"])
def test_requant_dependences_at_every_distance_on_the_rtl(backend):
    want = _distance_run("behavioral")
    np.testing.assert_array_equal(_distance_run(backend), want)
    assert len(np.unique(want)) > 40


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_short_requant_passes_back_to_back(n):
    """RSHR over the n rows an SRDHM pass right before it wrote: each of its micro-ops
    issues n + 1 cycles after the one that wrote its row, so it waits
    REQUANT_STAGES - (n + 1) cycles for n < 3 (RTL_COST's ``requant_late_cycles`` term)."""
    from vtakit.hw.alu import REQUANT_STAGES
    from vtakit.hw.compute import write_stage
    isa = isa_for(RQ)
    uops = [isa.encode_uop(d, P, 0) for d in range(n)]
    r, _ = _pipeline_run([_loop_alu(AluOp.SRDHM, 0, n), _loop_alu(AluOp.RSHR, 0, n)],
                         uops, _acc())
    drain = n + 1 + write_stage(RQ) + REQUANT_STAGES - 1
    assert np.diff(r.accepted).tolist() == [n + 1, drain + max(0, REQUANT_STAGES - n - 1)]
