"""The ALU table (vtakit.hw.isa.ALU_OPS) is the one definition of the ALU: an opcode added
to it without an implementation makes the behavioral model, the sequential spec and the
RTL elaboration fail loudly; an opcode added with a lane function runs on both models
(and they agree); an opcode missing from it is illegal everywhere."""

import gc
import warnings

import numpy as np
import pytest
from amaranth.hdl import Fragment, UnusedElaboratable

from vtakit.hw import isa as isa_mod
from vtakit.hw.alu import VectorAlu
from vtakit.hw.compute import Compute
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import (ALU_OPS, AluOp, AluSemantics, AluTableError, MemType, Opcode, alu_opcode_bits,
                           alu_ops, alu_violation, illegal_alu_opcodes, insns_to_bytes, isa_for)
from vtakit.hw.spec import ErrorCode
from vtakit.runtime.errors import KernelError
from vtakit.runtime.kernel import UopKernel
from vtakit.sim import open_device, reference
from vtakit.sim.datapath import Counters, Fault, SRAMs
from vtakit.sim.fuzz_gen import illegal_kinds

from alu_check import alu_insn, assert_datapath_equals_spec, random_loops

TINY = VTAConfig.preset("tiny")


def _sub(a, b):
    """A lane function no base opcode computes (a - b, wrapping)."""
    return (a.astype(np.int64) - b).astype(np.int32, casting="unsafe")


#: The table without code 4 (the ``requant2`` extension's REQ): the slot the tests below
#: fill with an opcode of their own.
WITHOUT_4 = tuple(e for e in ALU_OPS if e.code != 4)


@pytest.fixture
def with_opcode(monkeypatch):
    """Returns a function that puts an opcode of its own at code 4 of the ALU table for this
    test, in place of the extension opcode REQ (its name stays REQ, as hw.spec.AluOp has it;
    its rules and function are the test's)."""
    def add(fn=None, **rules):
        entry = AluSemantics(4, "REQ", fn, **rules)
        monkeypatch.setattr(isa_mod, "ALU_OPS", WITHOUT_4 + (entry,))
        return entry
    return add


def _rtl_op_width() -> int:
    """Width of the RTL ALU's opcode port (elaborated, so it must implement the table)."""
    alu = VectorAlu(TINY)
    Fragment.get(alu, None)
    return len(alu.op)


def _run_on_behavioral(code, imm=3):
    """LOAD UOP, one ALU instruction with ``alu_opcode=code``, FINISH on the behavioral model."""
    dev = open_device("behavioral", TINY)
    isa = isa_for(TINY)
    uop = np.array([isa.encode_uop(0, 0)], np.uint32)
    uop_addr = dev.alloc(uop.nbytes)
    dev.write(uop_addr, uop)
    words = [isa.encode(Opcode.LOAD, memory_type=MemType.UOP, sram_base=0,
                        dram_base=uop_addr // 4, y_size=1, x_size=1, x_stride=1),
             isa.encode(Opcode.ALU, alu_opcode=code, use_imm=1, imm=imm, uop_bgn=0, uop_end=1,
                        iter_out=1, iter_in=1),
             isa.encode(Opcode.FINISH)]
    stream = np.frombuffer(insns_to_bytes(words), np.uint8)
    addr = dev.alloc(len(stream))
    dev.write(addr, stream)
    return dev.run(addr, len(words))


# ------------------------------------------------------- the base table, as pinned

def test_base_table_is_the_pinned_alu():
    assert [str(e) for e in alu_ops()] == ["MIN=0", "MAX=1", "ADD=2", "SHR=3"]
    assert illegal_alu_opcodes() == [4, 5, 6, 7]
    assert [str(e) for e in alu_ops("requant2")] == ["MIN=0", "MAX=1", "ADD=2", "SHR=3", "REQ=4"]
    assert alu_opcode_bits() == 2
    assert _rtl_op_width() == 2
    a = np.array([-7, 5, 2**31 - 1, -2**31], np.int32)
    fns = {e.name: e.fn for e in alu_ops()}
    np.testing.assert_array_equal(fns["MIN"](a, 0), [-7, 0, 0, -2**31])
    np.testing.assert_array_equal(fns["MAX"](a, 0), [0, 5, 2**31 - 1, 0])
    np.testing.assert_array_equal(fns["ADD"](a, 1), [-6, 6, -2**31, -2**31 + 1])
    np.testing.assert_array_equal(fns["SHR"](a, 1), [-4, 2, 2**30 - 1, -2**30])
    np.testing.assert_array_equal(fns["SHR"](a, -1), [-14, 10, -2, 0])
    assert alu_violation(3, 0, 0) == ("SHR needs use_imm=1 (an immediate); a tensor operand "
                                      "is not supported")
    assert alu_violation(3, 1, -32) == "SHR imm -32 is out of range; SHR immediates are -31..31"
    assert alu_violation(2, 0, 99) is None and alu_violation(3, 1, -31) is None


@pytest.mark.parametrize("code,hint", [
    (4, ""),
    (4, r"; REQ=4 needs the ISA extension 'requant2' \(config key \"EXTENSIONS\": "
        r"\[\"requant2\"\]\)"),
    (7, r"; MULSHR=7 needs the ISA extension 'requant' \(config key \"EXTENSIONS\": "
        r"\[\"requant\"\]\)")])
def test_opcode_missing_from_the_table_is_illegal_everywhere(code, hint, monkeypatch):
    if not hint:        # a code no entry of the table has
        monkeypatch.setattr(isa_mod, "ALU_OPS", WITHOUT_4)
    message = (f"opcode {code} is illegal; legal opcodes are MIN=0, MAX=1, ADD=2, SHR=3{hint}")
    for execute in (SRAMs(TINY).alu, lambda insn, c: reference.alu(SRAMs(TINY), insn, c)):
        with pytest.raises(Fault, match=f"^ALU {message}$") as info:
            execute(alu_insn(TINY, code), Counters())
        assert info.value.code == ErrorCode.ILLEGAL_FIELD
    if not hint:
        with pytest.raises(KernelError, match=f"^ALU kernel: {message}$"):
            UopKernel.alu(code, [(0, 0)], imm=1)
    else:   # an extension opcode: a kernel is config-independent, the config refuses it
        name = isa_mod.alu_entry(code).name
        with pytest.raises(KernelError, match=f"^ALU {name} kernel: {message} \\(config "):
            UopKernel.alu(code, [(0, 0)], imm=1).check_config(TINY)


# ------------------------------------------------- an opcode without implementation

@pytest.fixture
def no_unused_warnings():
    """A failed elaboration leaves built but unused elaboratables; collect them here, quietly,
    rather than warn in a later test."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        gc.collect()


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_unimplemented_opcode_fails_loudly_everywhere(with_opcode, no_unused_warnings):
    with_opcode(fn=None)
    no_fn = r"^ALU opcode REQ=4 is in the ALU table \(vtakit.hw.isa.ALU_OPS\) without a lane "
    no_rtl = r"^ALU opcode REQ=4 is legal in the ALU table .* but hw/alu.py has no RTL for it"
    # the behavioral model (through the device) and its fast datapath
    with pytest.raises(AluTableError, match=no_fn):
        _run_on_behavioral(4)
    with pytest.raises(AluTableError, match=no_fn):
        SRAMs(TINY).alu(alu_insn(TINY, 4), Counters())
    # the sequential spec
    with pytest.raises(AluTableError, match=no_fn):
        reference.alu(SRAMs(TINY), alu_insn(TINY, 4), Counters())
    # the RTL: the ALU block and the compute unit that contains it
    with pytest.raises(AluTableError, match=no_rtl):
        VectorAlu(TINY)
    with pytest.raises(AluTableError, match=no_rtl):
        Fragment.get(Compute(TINY), None)
    # the table drives the legality rules and the fuzzer's illegal range
    assert illegal_alu_opcodes() == [5, 6, 7]
    assert alu_violation(4, 1, 3) is None
    assert UopKernel.alu(4, [(0, 0)], imm=1).kind == "ALU REQ"


def test_base_opcodes_still_run_while_the_table_has_an_unimplemented_one(with_opcode):
    with_opcode(fn=None)
    assert _run_on_behavioral(2).stats["alu_counter"] == 1


# ------------------------------------------------ an opcode with a lane function

def _random_alu_state(rng):
    srams = SRAMs(TINY)
    srams.acc[:] = rng.integers(-2**31, 2**31, srams.acc.shape)
    isa = srams.isa
    srams.uop[:8] = [isa.encode_uop(int(rng.integers(0, 6)), int(rng.integers(0, 6)))
                     for _ in range(8)]
    return srams


@pytest.mark.parametrize("tensor", [True, False])
def test_new_opcode_with_a_function_runs_on_both_models_alike(with_opcode, tensor):
    """No fast-path hints (repeat/reduce): the datapath takes its generic exact paths,
    including repeated destinations and chains through written entries."""
    with_opcode(fn=_sub)
    rng = np.random.default_rng(7)
    for n in range(60):
        fast = _random_alu_state(np.random.default_rng(n))
        spec = _random_alu_state(np.random.default_rng(n))
        insn = alu_insn(TINY, 4, use_imm=int(not tensor), imm=int(rng.integers(-300, 300)),
                        **random_loops(rng))
        assert_datapath_equals_spec(fast, spec, insn)


def test_new_opcode_operand_rules_come_from_the_table(with_opcode):
    with_opcode(fn=_sub, tensor=False, imm_range=(-5, 9))
    assert alu_violation(4, 0, 0) == ("REQ needs use_imm=1 (an immediate); a tensor "
                                      "operand is not supported")
    assert alu_violation(4, 1, 10) == "REQ imm 10 is out of range; REQ immediates are -5..9"
    with pytest.raises(Fault, match=r"^ALU REQ imm -6 is out of range"):
        SRAMs(TINY).alu(alu_insn(TINY, 4, imm=-6), Counters())
    with pytest.raises(KernelError, match=r"^ALU kernel: REQ needs use_imm=1"):
        UopKernel.alu(4, [(0, 0)])
    with_opcode(fn=_sub, imm=False)
    with pytest.raises(Fault, match=r"^ALU REQ needs use_imm=0 \(a tensor operand\)"):
        reference.alu(SRAMs(TINY), alu_insn(TINY, 4), Counters())


def test_fuzzer_illegal_kinds_follow_the_table(monkeypatch):
    assert "alu opcode" in illegal_kinds()
    full = tuple(e for e in ALU_OPS if e.base) + tuple(
        AluSemantics(c, AluOp(c).name if c in AluOp._value2member_map_ else f"X{c}", _sub)
        for c in range(4, 8))
    monkeypatch.setattr(isa_mod, "ALU_OPS", full)
    assert illegal_alu_opcodes() == [] and "alu opcode" not in illegal_kinds()
    no_shift = tuple(e for e in ALU_OPS if e.name != "SHR")
    monkeypatch.setattr(isa_mod, "ALU_OPS", no_shift)
    assert "alu tensor operand" not in illegal_kinds() and "alu imm range" not in illegal_kinds()


@pytest.mark.parametrize("entry,message", [
    (AluSemantics(8, "WIDE", _sub), r"^ALU opcode WIDE=8 does not fit the 3-bit alu_opcode"),
    (AluSemantics(2, "ADD2", _sub), r"^ALU opcode 2 appears twice in the ALU table$"),
    (AluSemantics(4, "BAD", _sub, imm_range=(0, 1 << 15)), r"^ALU opcode BAD=4: immediate "
                                                          r"range 0..32768 is outside"),
    (AluSemantics(4, "NONE", _sub, tensor=False, imm=False), r"^ALU opcode NONE=4 takes neither"),
])
def test_inconsistent_table_is_an_error(monkeypatch, entry, message):
    monkeypatch.setattr(isa_mod, "ALU_OPS", WITHOUT_4 + (entry,))
    with pytest.raises(AluTableError, match=message):
        alu_ops()


def test_extension_opcode_is_illegal_in_the_base_isa(with_opcode):
    with_opcode(fn=_sub, base=False)
    assert 4 in illegal_alu_opcodes()
    assert _rtl_op_width() == 2      # not legal, so the RTL need not implement it
    with pytest.raises(Fault, match=r"^ALU opcode 4 is illegal"):
        SRAMs(TINY).alu(alu_insn(TINY, 4), Counters())
