"""DRAM byte addresses never wrap at 32 bits: a LOAD or STORE with any byte at or
beyond ``2**32`` faults with DRAM_OUT_OF_RANGE, on the RTL (pysim, tiny) and on the
behavioral model alike: same module, same instruction index, and nothing moves (the
DRAM image and the target SRAM are unchanged). ``dram_base`` is an *element*
address, so ``dram_base * elem_bytes`` alone can pass ``2**32``; a transfer whose
last byte is exactly ``2**32 - 1`` is legal for the hardware (on these small images
it ends past the DRAM image instead: a harness fault, reported differently).
Also the runtime's check of the last byte of a transfer."""

import re

import numpy as np
import pytest

from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import MemType, Opcode, insns_to_bytes, isa_for
from vtakit.hw.spec import ErrorCode, Unit
from vtakit.runtime import DramRangeError, Runtime
from vtakit.sim import Device, RunResult
from vtakit.sim.behavioral import BehavioralDevice
from vtakit.runtime.device import DeviceFault
from vtakit.runtime.device import DeviceError
from vtakit.sim.pysim import PysimDevice

TINY = VTAConfig.preset("tiny")
ISA = isa_for(TINY)
TOP = 1 << 32
EB = {mt: TINY.elem_bytes(mt) for mt in (MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC,
                                         MemType.OUT)}
FINISH = ISA.encode(Opcode.FINISH)
WAIT_LOAD = ISA.encode(Opcode.LOAD, memory_type=MemType.UOP, pop_prev_dep=1)
WAIT_STORE = ISA.encode(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1)
LOAD_NOP = ISA.encode(Opcode.LOAD, memory_type=MemType.INP)
UOP_NOP = ISA.encode(Opcode.LOAD, memory_type=MemType.UOP)
STORE_NOP = ISA.encode(Opcode.STORE, memory_type=MemType.OUT)
SRAMS = {MemType.INP: "inp", MemType.WGT: "wgt", MemType.ACC: "acc", MemType.UOP: "uop"}


def load(mt, dram_base, x, y=1, stride=None, **f):
    return ISA.encode(Opcode.LOAD, memory_type=mt, sram_base=0, dram_base=dram_base,
                      x_size=x, y_size=y, x_stride=x if stride is None else stride, **f)


def store(dram_base, x, y=1, stride=None, **f):
    return ISA.encode(Opcode.STORE, memory_type=MemType.OUT, sram_base=0, dram_base=dram_base,
                      x_size=x, y_size=y, x_stride=x if stride is None else stride,
                      push_prev_dep=1, **f)


# Each case: (id, module, memory type, the faulting instruction from the address A of a
# 4 KiB buffer filled with a pattern, the stream around it). The faulting instruction
# is at index 1 (after a sync-only NOP of the same module).
def _load_stream(insn):
    return [LOAD_NOP, insn, WAIT_LOAD, FINISH]


def _compute_stream(insn):
    return [UOP_NOP, insn, FINISH]


def _store_stream(insn):
    return [STORE_NOP, insn, WAIT_STORE, FINISH]


CASES = [
    # A truncating RTL would write the pattern buffer at A (2**32 + A wraps to A).
    ("store-wraps-to-A", Unit.STORE, MemType.OUT, _store_stream,
     lambda a: store((TOP + a) // EB[MemType.OUT], 2)),
    # Rows 0, 1 below 2**32, row 2 starts exactly there (row address arithmetic).
    ("store-last-row", Unit.STORE, MemType.OUT, _store_stream,
     lambda a: store(TOP // EB[MemType.OUT] - 100, 1, 3, 50)),
    ("store-straddles", Unit.STORE, MemType.OUT, _store_stream,
     lambda a: store(TOP // EB[MemType.OUT] - 1, 2)),
    ("inp-wraps-to-A", Unit.LOAD, MemType.INP, _load_stream,
     lambda a: load(MemType.INP, (TOP + a) // EB[MemType.INP], 3, push_next_dep=1)),
    ("inp-padded-last-row", Unit.LOAD, MemType.INP, _load_stream,
     lambda a: load(MemType.INP, TOP // EB[MemType.INP] - 7, 2, 2, 6, y_pad_0=1, x_pad_1=1,
                    push_next_dep=1)),
    ("wgt-row-straddles", Unit.LOAD, MemType.WGT, _load_stream,
     lambda a: load(MemType.WGT, TOP // EB[MemType.WGT] - 10, 2, 2, 9, push_next_dep=1)),
    ("wgt-wraps-to-A", Unit.LOAD, MemType.WGT, _load_stream,
     lambda a: load(MemType.WGT, (TOP + a) // EB[MemType.WGT], 1, push_next_dep=1)),
    ("acc-wraps-to-A", Unit.COMPUTE, MemType.ACC, _compute_stream,
     lambda a: load(MemType.ACC, (TOP + a) // EB[MemType.ACC], 2)),
    ("acc-last-row", Unit.COMPUTE, MemType.ACC, _compute_stream,
     lambda a: load(MemType.ACC, TOP // EB[MemType.ACC] - 4, 1, 3, 2)),
    # Micro-ops: 4-byte elements, not bus aligned, the last one straddles 2**32.
    ("uop-straddles", Unit.COMPUTE, MemType.UOP, _compute_stream,
     lambda a: load(MemType.UOP, TOP // EB[MemType.UOP] - 2, 3)),
    ("uop-wraps-to-A", Unit.COMPUTE, MemType.UOP, _compute_stream,
     lambda a: load(MemType.UOP, (TOP + a) // EB[MemType.UOP] + 1, 5)),
]


@pytest.fixture(scope="module")
def pysim():
    with PysimDevice(TINY) as dev:
        yield dev


def _sram(dev, mt):
    """The target SRAM's contents (OUT for a STORE), as a list of ints / an array."""
    name = SRAMS.get(mt, "out")
    if isinstance(dev, BehavioralDevice):
        return getattr(dev.srams, name).copy()
    if name not in ("inp", "wgt", "out") or not isinstance(dev, PysimDevice):
        return None             # pysim exposes only these; compute's are checked on the model
    depth = {"inp": TINY.inp_depth, "wgt": TINY.wgt_depth, "acc": TINY.acc_depth,
             "uop": TINY.uop_depth, "out": TINY.out_depth}[name]
    return np.array(dev.read_sram(name, 0, min(depth, 16)), dtype=object)


def _run_case(dev, make_stream, make_insn):
    """Put a pattern buffer at A and the case's stream in ``dev``'s DRAM; returns
    (dev, the stream's words, its address)."""
    a = dev.alloc(4096)
    dev.write(a, np.arange(4096, dtype=np.uint32).astype(np.uint8) ^ 0xA5)
    words = make_stream(make_insn(a))
    addr = dev.alloc(16 * len(words))
    dev.write(addr, insns_to_bytes(words))
    return dev, words, addr


def _fault(dev, words, addr, mt):
    dram = dev.dram.data.copy()
    sram = _sram(dev, mt)
    with pytest.raises(DeviceError) as info:
        dev.run(addr, len(words))
    assert np.array_equal(dev.dram.data[:len(dram)], dram), "DRAM changed"
    if sram is not None:
        assert np.array_equal(_sram(dev, mt), sram), "the SRAM changed"
    return info.value


@pytest.mark.parametrize("name,module,mt,make_stream,make_insn", CASES,
                         ids=[c[0] for c in CASES])
def test_fault_matches_model(pysim, name, module, mt, make_stream, make_insn):
    # The behavioral model: ErrorCode.DRAM_OUT_OF_RANGE, the module and index.
    model, words, addr = _run_case(BehavioralDevice("tiny"), make_stream, make_insn)
    e = _fault(model, words, addr, mt)
    assert isinstance(e, DeviceFault)
    assert (e.code, e.module, e.index) == (ErrorCode.DRAM_OUT_OF_RANGE, module, 1)
    assert re.match(rf"^{module.name.lower()} module, instruction 1: DRAM_OUT_OF_RANGE: "
                    r"(LOAD reads|STORE writes) DRAM bytes \[0x[0-9a-f]+, 0x1[0-9a-f]{8}\) pass "
                    r"the 32-bit byte address space \(every byte address must be < "
                    r"0x100000000\) \[", str(e)), str(e)
    # The RTL: the same fault latched in its error registers, nothing moved.
    dev, words, addr = _run_case(pysim, make_stream, make_insn)
    e = _fault(dev, words, addr, mt)
    assert str(e) == (f"pysim ({TINY.name}): {module.name.lower()} module, instruction 1: "
                      f"DRAM_OUT_OF_RANGE [{ISA.decode(words[1])}]")
    # The device recovers for the next run.
    res = pysim.run(*_program(pysim, [FINISH]))
    assert res.stats["load_insn_count"] == 0


def _program(dev, words):
    addr = dev.alloc(16 * len(words))
    dev.write(addr, insns_to_bytes(words))
    return addr, len(words)


BOUNDARY = [
    # Last byte exactly 2**32 - 1: not a hardware fault; past these small images.
    ("store", Unit.STORE, _store_stream, store(TOP // EB[MemType.OUT] - 2, 2), "write"),
    ("inp", Unit.LOAD, _load_stream,
     load(MemType.INP, TOP // EB[MemType.INP] - 5, 1, 3, 2, push_next_dep=1), "read"),
    ("acc", Unit.COMPUTE, _compute_stream, load(MemType.ACC, TOP // EB[MemType.ACC] - 1, 1),
     "read"),
    ("uop", Unit.COMPUTE, _compute_stream, load(MemType.UOP, TOP // EB[MemType.UOP] - 3, 3),
     "read"),
]


@pytest.mark.parametrize("name,module,make_stream,insn,what", BOUNDARY,
                         ids=[b[0] for b in BOUNDARY])
def test_last_byte_below_2_32_is_no_address_fault(name, module, make_stream, insn, what):
    words = make_stream(insn)
    model = BehavioralDevice("tiny")
    with pytest.raises(DeviceFault, match=r"^\w+ module, instruction 1: DRAM_IMAGE: "
                       r"(LOAD reads|STORE writes) DRAM bytes \[0x[0-9a-f]+, 0x100000000\) "
                       r"outside the image") as info:
        model.run(*_program(model, words))
    assert (info.value.code, info.value.module, info.value.index) == \
        (ErrorCode.DRAM_IMAGE, module, 1)
    # The RTL issues the access (its DMA reaches the top of the address space),
    # which the harness refuses as outside its DRAM image. (A fresh device: after a
    # harness fault pysim does not reset the design's modules.)
    with PysimDevice(TINY) as pysim, pytest.raises(
            DeviceError, match=rf"^pysim \(\S+\): DRAM {what} of \d+ bytes at "
                               r"0xf[0-9a-f]{7} is outside "):
        pysim.run(*_program(pysim, words))


# ------------------------------------------------------------------ runtime

class HighDevice(Device):
    """Buffers at the top of the 32-bit address space; runs are never made."""

    name = "high"

    def alloc(self, nbytes):
        return TOP - 4096              # 4 KiB below 2**32, the rest above

    def run(self, insn_addr, insn_count):
        return RunResult(cycles=0)


def test_runtime_checks_the_last_byte():
    rt = Runtime(HighDevice("tiny"))
    buf = rt.alloc(16384)
    ebi, ebw = EB[MemType.INP], EB[MemType.WGT]
    rt.load_2d(MemType.INP, 0, buf, 4096 // ebi - 1, 1, 1, 1)      # last byte 2**32 - 1
    rt.store_2d(0, buf, 4096 // EB[MemType.OUT] - 3, 1, 2, 2)       # last byte 2**32 - 1
    assert len(rt.instructions) == 2
    with pytest.raises(DramRangeError, match=r"^load_2d\(INP\): the transfer's last DRAM byte "
                       r"0x100000007 \(dram_base=536870911 elements of 8 bytes, y_size=1, "
                       r"x_stride=2, x_size=2\) is beyond the 32-bit byte address space; every "
                       r"byte must be below 0x100000000$"):
        rt.load_2d(MemType.INP, 0, buf, 4096 // ebi - 1, 2, 1, 2)
    with pytest.raises(DramRangeError, match=r"^load_2d\(WGT\): the transfer's last DRAM byte "
                       r"0x10000003f \(dram_base=67108800 elements of 64 bytes, y_size=3, "
                       r"x_stride=32, x_size=1\)"):
        rt.load_2d(MemType.WGT, 0, buf, 4096 // ebw - 64, 1, 3, 32)
    with pytest.raises(DramRangeError, match=r"^store_2d: the transfer's last DRAM byte "
                       r"0x100000007 "):
        rt.store_2d(0, buf, 4096 // EB[MemType.OUT], 1, 1, 1)
    assert len(rt.instructions) == 2


# ------------------------------------------------------------- fast backends

@pytest.fixture(scope="module", params=["cxxrtl", "verilator"])
def compiled(request):
    from vtakit.sim import open_device
    with open_device(request.param, "tiny") as dev:
        yield dev


def test_compiled_backends_fault_too(compiled):
    """The same RTL built by CXXRTL and Verilator: every case faults alike, DRAM unchanged."""
    for name, module, mt, make_stream, make_insn in CASES:
        dev, words, addr = _run_case(compiled, make_stream, make_insn)
        e = _fault(dev, words, addr, mt)       # DRAM only: no SRAM access on these backends
        assert str(e) == (f"{compiled.name} ({TINY.name}): {module.name.lower()} module, "
                          f"instruction 1: DRAM_OUT_OF_RANGE [{ISA.decode(words[1])}]"), name
