"""Dependency flags a module has no neighbour for: the RTL (pysim) and the behavioral
model both refuse them with ILLEGAL_FIELD, from the same module at the same instruction.

The load module has no previous stage (``pop_prev_dep``/``push_prev_dep`` on LOAD INP/WGT,
NOPs included); the store module has no next stage (``pop_next_dep``/``push_next_dep``
on any STORE, NOPs included). Both refuse the flags before popping any token, so a
stream whose legal pop would block forever still faults instead of deadlocking.
"""

import re

import pytest

from vtakit.hw.config import VTAConfig
from vtakit.hw.interfaces import ErrorCode, Unit
from vtakit.hw.isa import MemType, Opcode, insns_to_bytes, isa_for
from vtakit.runtime.device import DeviceError, open_device

ISA = isa_for(VTAConfig.preset("tiny"))
FINISH = ISA.encode(Opcode.FINISH)
WAIT_LOAD = ISA.encode(Opcode.LOAD, memory_type=MemType.UOP, pop_prev_dep=1)
WAIT_STORE = ISA.encode(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1)
LOAD_NOP = ISA.encode(Opcode.LOAD, memory_type=MemType.INP)
STORE_NOP = ISA.encode(Opcode.STORE, memory_type=MemType.OUT)


def load(mt, x_size, **flags):
    data = dict(sram_base=2, dram_base=16, x_size=x_size, y_size=2, x_stride=x_size) \
        if x_size else {}
    return ISA.encode(Opcode.LOAD, memory_type=mt, **data, **flags)


def store(x_size, **flags):
    data = dict(sram_base=1, dram_base=64, x_size=x_size, y_size=1, x_stride=x_size) \
        if x_size else {}
    return ISA.encode(Opcode.STORE, memory_type=MemType.OUT, **data, **flags)


# (stream, faulting module, index of the faulting instruction). Compute waits for a
# token from the module under test, so FINISH cannot end the run before it faults.
CASES = [
    *[([LOAD_NOP, load(mt, xs, **{flag: 1}, push_next_dep=1), WAIT_LOAD, FINISH], "load", 1)
      for mt in (MemType.INP, MemType.WGT) for xs in (0, 3)
      for flag in ("pop_prev_dep", "push_prev_dep")],
    *[([STORE_NOP, store(xs, **{flag: 1}, push_prev_dep=1), WAIT_STORE, FINISH], "store", 1)
      for xs in (0, 2) for flag in ("pop_next_dep", "push_next_dep")],
    # The legal pop would wait forever (nothing pushes g2l / g2s): the fault comes first.
    ([load(MemType.INP, 3, pop_prev_dep=1, pop_next_dep=1), WAIT_LOAD, FINISH], "load", 0),
    ([LOAD_NOP, WAIT_STORE, store(0, pop_prev_dep=1, push_next_dep=1), FINISH],
     "store", 2),
]
# Control: the same instructions with only legal flags run to FINISH on both.
LEGAL = [LOAD_NOP, load(MemType.WGT, 3, push_next_dep=1), WAIT_LOAD,
         store(2, push_prev_dep=1), WAIT_STORE, FINISH]

_PYSIM = re.compile(r"^pysim \(\S+\): (\w+) module, instruction (\d+): (\w+) \[(.*)\]$")


@pytest.fixture(scope="module")
def devices():
    devs = {"pysim": open_device("pysim", "tiny"), "behavioral": open_device("behavioral", "tiny")}
    yield devs
    for d in devs.values():
        d.close()


def run(dev, words):
    addr = dev.alloc(16 * len(words))
    dev.write(addr, insns_to_bytes(words))
    try:
        return dev.run(addr, len(words))
    finally:
        dev.free(addr)


def _case_id(case):
    words, module, index = case
    insn = ISA.decode(words[index])
    bad = [f for f in ("pop_prev_dep", "push_prev_dep", "pop_next_dep", "push_next_dep")
           if insn.fields[f] and f.split("_")[1] == ("prev" if module == "load" else "next")]
    return f"{module}-{MemType(insn.memory_type).name}-x{insn.fields['x_size']}-{bad[0]}-at{index}"


@pytest.mark.parametrize("words,module,index", CASES, ids=[_case_id(c) for c in CASES])
def test_rtl_and_model_refuse_flags_without_neighbour(devices, words, module, index):
    disasm = re.escape(str(ISA.decode(words[index])))
    stage = "previous" if module == "load" else "next"
    with pytest.raises(DeviceError, match=rf"^{module} module, instruction {index}: "
                       rf"ILLEGAL_FIELD: \w+_{'prev' if module == 'load' else 'next'}_dep "
                       rf"is set but the {module} module has no {stage} stage; it must be 0 "
                       rf"\[{disasm}\]$") as model:
        run(devices["behavioral"], words)
    assert (model.value.code, model.value.module, model.value.index) == \
        (ErrorCode.ILLEGAL_FIELD, Unit[module.upper()], index)
    with pytest.raises(DeviceError) as rtl:
        run(devices["pysim"], words)
    got = _PYSIM.match(str(rtl.value))
    assert got, str(rtl.value)
    assert got.groups() == (module, str(index), "ILLEGAL_FIELD", str(ISA.decode(words[index])))


def test_legal_flags_still_run_on_both(devices):
    stats = {name: run(dev, LEGAL).stats for name, dev in devices.items()}
    for name in devices:
        assert stats[name]["load_insn_count"] == 2, name
        assert stats[name]["store_insn_count"] == 1, name
