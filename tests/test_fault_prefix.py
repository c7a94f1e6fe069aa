"""A GEMM or ALU that reaches an out-of-range SRAM index part way through its loop
leaves the SRAMs exactly as the RTL does: the iterations before the first bad one
(p > q > k order) execute, then SRAM_OUT_OF_RANGE is raised (sim/datapath.py).

Each case runs the same program on pysim (tiny) and on the behavioral model, compares
the fault (module, instruction index, code), then reads every ACC and OUT entry back
with a second run (STORE OUT, then ACC byte by byte through ALU SHR + STORE) and
compares the bytes. A legal program checks the readout agrees on a run without fault.
"""

import re

import numpy as np
import pytest

from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import AluOp, MemType, Opcode, insns_to_bytes, isa_for
from vtakit.sim import DeviceError, open_device
from vtakit.runtime.device import DeviceFault

CFG = VTAConfig.preset("tiny")
ISA = isa_for(CFG)
ROWS = 64                    # INP/WGT/ACC rows loaded with random data
READ_UOP = 16                # uop (dst 0, src 0) used by the readout run
# uops 0..3: dst = src = wgt = d; 4..7: all eight products accumulate into ACC[5];
# 8..9: ALU chain ACC[d+1] op= ACC[d]
UOPS = ([ISA.encode_uop(d, d, d) for d in range(4)]
        + [ISA.encode_uop(5, d, d) for d in range(4)]
        + [ISA.encode_uop(1, 0, 0), ISA.encode_uop(2, 1, 0)])

_FAULT = re.compile(r"(\w+) module, instruction (\d+): (\w+)")


def _gemm(**f):
    return ISA.encode(Opcode.GEMM, **{"uop_bgn": 0, "uop_end": 4, "iter_out": 1,
                                      "iter_in": 1, **f})


def _alu(**f):
    return ISA.encode(Opcode.ALU, **{"uop_bgn": 0, "uop_end": 4, "iter_out": 1,
                                     "iter_in": 1, "alu_opcode": AluOp.ADD, "use_imm": 1,
                                     **f})


A, I, W = CFG.acc_depth, CFG.inp_depth, CFG.wgt_depth
#: name -> (compute instructions after the setup, fault expected)
CASES = {
    # the reviewer's case: iterations q=0,1 write ACC/OUT[0..3] and [256..259]
    "alu_imm_dst": ([_alu(imm=5, iter_in=3, dst_factor_in=A // 2)], True),
    "alu_tensor_src": ([_alu(use_imm=0, iter_in=3, src_factor_in=A // 2 - 1)], True),
    "alu_tensor_dst": ([_alu(use_imm=0, alu_opcode=AluOp.MAX, iter_out=3,
                             dst_factor_out=A // 2 - 1)], True),
    # a dependency chain (ACC[1] += ACC[0]; ACC[2] += ACC[1]) cut after iteration p=2
    "alu_tensor_chain": ([_alu(use_imm=0, uop_bgn=8, uop_end=10, iter_out=5,
                               dst_factor_out=A // 3, src_factor_out=A // 3)], True),
    # ALU with imm ignores src: a huge src factor is no fault
    "alu_imm_src_ignored": ([_alu(imm=-7, iter_in=3, src_factor_in=A - 1,
                                  dst_factor_in=A // 2)], True),
    "gemm_dst": ([_gemm(iter_out=3, dst_factor_out=(A - 2) // 2)], True),
    "gemm_src": ([_gemm(iter_out=2, iter_in=3, src_factor_in=I // 2 - 1)], True),
    "gemm_wgt": ([_gemm(iter_out=4, wgt_factor_out=W // 3)], True),
    # back-to-back accumulates into one entry, cut part way
    "gemm_same_dst_wgt": ([_gemm(uop_bgn=4, uop_end=8, iter_out=3, iter_in=2,
                                 wgt_factor_in=W // 5, wgt_factor_out=W // 2)], True),
    "gemm_reset_dst": ([_gemm(reset_reg=1, iter_in=3, dst_factor_in=A // 2 - 1)], True),
    # a reset GEMM reads no operand: src/wgt factors past the depth are no fault
    "gemm_reset_ignores_operands": ([_gemm(reset_reg=1, iter_in=3, src_factor_in=I - 1,
                                           wgt_factor_in=W - 1, dst_factor_in=A // 2)], True),
    "legal": ([_gemm(iter_out=2, iter_in=3, dst_factor_in=1, src_factor_in=2,
                     wgt_factor_out=3),
               _gemm(reset_reg=1, uop_bgn=1, uop_end=3),
               _alu(use_imm=0, uop_bgn=8, uop_end=10, iter_out=5, dst_factor_out=7,
                    src_factor_out=7),
               _alu(alu_opcode=AluOp.SHR, imm=-3, iter_in=2, dst_factor_in=100)], False),
}


def _write(dev, data) -> int:
    data = np.frombuffer(bytes(data), np.uint8)
    addr = dev.alloc(len(data))
    dev.write(addr, data)
    return addr


def _run(dev, insns):
    return dev.run(_write(dev, insns_to_bytes(insns)), len(insns))


def _setup(dev, rng, body):
    """Load random INP/WGT/ACC rows and the uops, then run ``body`` and FINISH."""
    inp = rng.integers(-128, 128, ROWS * CFG.batch * CFG.block_in, dtype=np.int8)
    wgt = rng.integers(-128, 128, ROWS * CFG.block_out * CFG.block_in, dtype=np.int8)
    acc = rng.integers(-2**31, 2**31, ROWS * CFG.batch * CFG.block_out, dtype=np.int32)
    uops = np.zeros(READ_UOP + 1, np.uint32)
    uops[:len(UOPS)] = UOPS
    uops[READ_UOP] = ISA.encode_uop(0, 0, 0)
    addrs = {name: _write(dev, arr.astype("<" + arr.dtype.str[1:]).tobytes())
             for name, arr in (("inp", inp), ("wgt", wgt), ("acc", acc), ("uop", uops))}

    def load(mt, ebytes, count, **flags):
        return ISA.encode(Opcode.LOAD, memory_type=mt, sram_base=0, y_size=1, x_size=count,
                          x_stride=count, dram_base=addrs[MemType(mt).name.lower()] // ebytes,
                          **flags)
    insns = [load(MemType.INP, CFG.elem_bytes(MemType.INP), ROWS),
             load(MemType.WGT, CFG.elem_bytes(MemType.WGT), ROWS, push_next_dep=1),
             load(MemType.UOP, 4, READ_UOP + 1, pop_prev_dep=1),
             load(MemType.ACC, CFG.elem_bytes(MemType.ACC), ROWS),
             *body, ISA.encode(Opcode.FINISH)]
    return _run(dev, insns)


def _readout(dev):
    """OUT, then each byte of ACC (ALU SHR 0, 8, 8, 8 over every entry), as bytes."""
    nbytes = A * CFG.out_elem_bytes
    bufs = [dev.alloc(nbytes) for _ in range(5)]
    insns = [ISA.encode(Opcode.LOAD, memory_type=MemType.UOP, push_next_dep=1)]  # compute NOP
    for n, buf in enumerate(bufs):
        if n:
            insns.append(_alu(alu_opcode=AluOp.SHR, imm=0 if n == 1 else 8, uop_bgn=READ_UOP,
                              uop_end=READ_UOP + 1, iter_in=A, dst_factor_in=1,
                              src_factor_in=1, pop_next_dep=1, push_next_dep=1))
        insns.append(ISA.encode(Opcode.STORE, memory_type=MemType.OUT, sram_base=0,
                                dram_base=buf // CFG.out_elem_bytes, y_size=1, x_size=A,
                                x_stride=A, pop_prev_dep=1, push_prev_dep=1))
    insns.append(ISA.encode(Opcode.FINISH, pop_next_dep=1))
    _run(dev, insns)
    return [dev.read(buf, nbytes).tobytes() for buf in bufs]


def _fault(exc) -> tuple:
    found = _FAULT.search(str(exc))
    assert found, str(exc)
    return found.group(1), int(found.group(2)), found.group(3)


def _final_state(backend, case):
    body, faults = CASES[case]
    with open_device(backend, "tiny") as dev:
        rng = np.random.default_rng(sum(map(ord, case)))
        fault, stats = None, None
        if faults:
            with pytest.raises(DeviceError) as err:
                _setup(dev, rng, body)
            fault = _fault(err.value)
        else:
            stats = _setup(dev, rng, body).stats
        return fault, stats, _readout(dev)


# ~7 s each on pysim: CI runs these; the rest with -m slow (tests/test_rtl_compute.py
# checks the plain dst/src/wgt cases against the model on the compute module alone).
FAST = {"alu_imm_dst", "alu_tensor_chain", "gemm_same_dst_wgt", "gemm_reset_dst", "legal"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=[] if c in FAST else [pytest.mark.slow])
                                  for c in CASES])
def test_fault_prefix_matches_rtl(case):
    model_fault, model_stats, model_bytes = _final_state("behavioral", case)
    rtl_fault, rtl_stats, rtl_bytes = _final_state("pysim", case)
    _, faults = CASES[case]
    if faults:
        assert model_fault == rtl_fault == ("compute", 4, "SRAM_OUT_OF_RANGE")
    else:
        for key in ("gemm_counter", "alu_counter"):
            assert model_stats[key] == rtl_stats[key], key
    for what, m, r in zip(("OUT", "ACC byte 0", "ACC byte 1", "ACC byte 2", "ACC byte 3"),
                          model_bytes, rtl_bytes):
        m, r = np.frombuffer(m, np.int8), np.frombuffer(r, np.int8)
        diff = np.flatnonzero(m != r)
        assert not len(diff), (f"{what}: {len(diff)} bytes differ, first at element "
                               f"{diff[0] // CFG.out_elem_bytes}: model {m[diff[0]]}, "
                               f"pysim {r[diff[0]]}")


def test_prefix_runs_on_the_model():
    """The reviewer's case in the model alone: OUT[0..3] = ACC[0..3] + 5 after the
    fault (not untouched), and the message names the first bad iteration."""
    body, _ = CASES["alu_imm_dst"]
    with open_device("behavioral", "tiny") as dev:
        rng = np.random.default_rng(1)
        with pytest.raises(DeviceFault, match=r"^compute module, instruction 4: "
                           r"SRAM_OUT_OF_RANGE: acc index 512 out of range \(depth 512\) at "
                           r"iteration p=0 q=2 uop 0 \(dst_idx\) \["):
            _setup(dev, rng, body)
        acc = dev.srams.acc.reshape(A, -1)
        rng = np.random.default_rng(1)
        rng.integers(-128, 128, ROWS * CFG.batch * CFG.block_in, dtype=np.int8)
        rng.integers(-128, 128, ROWS * CFG.block_out * CFG.block_in, dtype=np.int8)
        loaded = rng.integers(-2**31, 2**31, ROWS * CFG.batch * CFG.block_out,
                              dtype=np.int32).reshape(ROWS, -1)
        expected = ((loaded[:4].astype(np.int64) + 5 + 2**31) % 2**32 - 2**31)
        np.testing.assert_array_equal(acc[:4], expected)
        np.testing.assert_array_equal(acc[A // 2:A // 2 + 4], 5)
        np.testing.assert_array_equal(acc[4:ROWS], loaded[4:])
        np.testing.assert_array_equal(dev.srams.out.reshape(A, -1)[:4],
                                      expected.astype(np.int8))
