"""One fault, one DeviceFault: every backend (behavioral, pysim, cxxrtl, verilator) raises
:class:`~vtakit.runtime.device.DeviceFault` with the same ``code``, ``module``, ``index``
and ``insn`` for the same program: an out-of-range SRAM index, a DRAM byte at or beyond
2**32, an illegal opcode, a stream without FINISH and a deadlock (which the compiled
simulators now detect with their no-progress watch instead of running to max_cycles)."""

import numpy as np
import pytest

from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import MemType, Opcode, insns_to_bytes, isa_for
from vtakit.hw.spec import ErrorCode, Unit
from vtakit.runtime.device import DeviceFault, open_device

TINY = VTAConfig.preset("tiny")
ISA = isa_for(TINY)
FINISH = ISA.encode(Opcode.FINISH)
LOAD_NOP = ISA.encode(Opcode.LOAD, memory_type=MemType.INP)
UOP_NOP = ISA.encode(Opcode.LOAD, memory_type=MemType.UOP)
STORE_NOP = ISA.encode(Opcode.STORE, memory_type=MemType.OUT)
WAIT_LOAD = ISA.encode(Opcode.LOAD, memory_type=MemType.UOP, pop_prev_dep=1)
WAIT_STORE = ISA.encode(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1)
ILLEGAL = 6     # an opcode without a meaning
BACKENDS = ("behavioral", "pysim", "cxxrtl", "verilator")
# pysim's default watch (100 k cycles) takes a minute at its speed; the compiled
# backends keep their default.
OPTIONS = {"pysim": {"stall_cycles": 2000}}


def _sram_range(a):
    insn = ISA.encode(Opcode.LOAD, memory_type=MemType.INP, sram_base=TINY.inp_depth - 1,
                      dram_base=a // TINY.inp_elem_bytes, x_size=2, y_size=1, x_stride=2,
                      push_next_dep=1)
    return [LOAD_NOP, insn, WAIT_LOAD, FINISH], (ErrorCode.SRAM_OUT_OF_RANGE, Unit.LOAD, 1)


def _dram_top(a):
    insn = ISA.encode(Opcode.STORE, memory_type=MemType.OUT, sram_base=0,
                      dram_base=(1 << 32) // TINY.out_elem_bytes - 1, x_size=2, y_size=1,
                      x_stride=2, push_prev_dep=1)
    return [STORE_NOP, insn, WAIT_STORE, FINISH], (ErrorCode.DRAM_OUT_OF_RANGE, Unit.STORE, 1)


def _illegal_opcode(a):
    return [UOP_NOP, ILLEGAL, FINISH], (ErrorCode.ILLEGAL_OPCODE, Unit.FETCH, 1)


def _no_finish(a):
    return [UOP_NOP, LOAD_NOP], (ErrorCode.ILLEGAL_FIELD, Unit.FETCH, None)


def _deadlock(a):
    return [WAIT_LOAD, FINISH], (ErrorCode.DEADLOCK, None, None)


CASES = {"sram-range": _sram_range, "dram-2^32": _dram_top, "illegal-opcode": _illegal_opcode,
         "no-finish": _no_finish, "deadlock": _deadlock}


@pytest.fixture(scope="module")
def devices():
    devs = {b: open_device(b, TINY, progress=False, **OPTIONS.get(b, {}))
            if b != "behavioral" else open_device(b, TINY) for b in BACKENDS}
    yield devs
    for dev in devs.values():
        dev.close()


@pytest.mark.parametrize("case", CASES)
def test_same_fault_on_every_backend(devices, case):
    keys = {}
    for name, dev in devices.items():
        a = dev.alloc(4096)
        dev.write(a, np.arange(4096, dtype=np.uint32).astype(np.uint8))
        words, (code, module, index) = CASES[case](a)
        addr = dev.alloc(16 * len(words))
        dev.write(addr, insns_to_bytes(words))
        with pytest.raises(DeviceFault) as info:
            dev.run(addr, len(words))
        e = info.value
        assert (e.code, e.module, e.index) == (code, module, index), (name, str(e))
        word = None if index is None else words[index]
        assert (None if e.insn is None else e.insn.word) == word, name
        keys[name] = e.key
        dev.free(addr)
        dev.free(a)
    assert len(set(keys.values())) == 1, keys


@pytest.mark.parametrize("name", ["pysim", "cxxrtl", "verilator"])
def test_deadlock_report_names_each_unit(devices, name):
    """Every RTL backend reports a deadlock long before max_cycles, with where each unit
    stands (read from the debug registers): compute holds the pop, FINISH waits behind it."""
    dev = devices[name]
    stall = OPTIONS.get(name, {}).get("stall_cycles", 4096)
    addr = dev.alloc(32)
    dev.write(addr, insns_to_bytes([WAIT_LOAD, FINISH]))
    with pytest.raises(DeviceFault, match=rf"^{name} \(1x8_i8w8a32_12_12_14_14\): deadlock: no "
                       rf"progress for {stall} cycles before FINISH running 2 instructions at "
                       r"0x[0-9a-f]+ \(gemm_counter=0, alu_counter=0, load_insn_count=0, "
                       r"store_insn_count=0; fetch idle, load idle, store idle, load queue 0, "
                       r"compute queue 1, store queue 0, l2g tokens 0/256, g2l tokens 0/256, "
                       r"g2s tokens 0/256, s2g tokens 0/256\)$"):
        dev.run(addr, 2)
    dev.free(addr)
