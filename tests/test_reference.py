"""The fast numpy datapath (what the behavioral model runs) against the plain sequential
specification :mod:`vtakit.sim.reference`, instruction by instruction: random LOAD,
STORE, GEMM and ALU instructions, aliasing and out-of-range indices included, on equal
random SRAMs and DRAM. Both must leave the same SRAMs, DRAM and counters and raise the
same fault (or none)."""

import numpy as np
import pytest

from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import isa_for
from vtakit.hw.spec import IMM_MAX, IMM_MIN, SHIFT_LIMIT, AluOp, ErrorCode, MemType, Opcode
from vtakit.sim import reference
from vtakit.sim.datapath import Counters, Fault, SRAMs

DRAM_BYTES = 1 << 16


def _fast(srams, insn, dram, counters):
    {Opcode.LOAD: lambda: srams.load(insn, dram, counters),
     Opcode.STORE: lambda: srams.store(insn, dram, counters),
     Opcode.GEMM: lambda: srams.gemm(insn, counters),
     Opcode.ALU: lambda: srams.alu(insn, counters)}[insn.opcode]()


def _random_state(config, rng):
    srams = SRAMs(config)
    isa = srams.isa
    srams.inp[:] = rng.integers(-128, 128, srams.inp.shape)
    srams.wgt[:] = rng.integers(-128, 128, srams.wgt.shape)
    srams.acc[:] = rng.integers(-2**31, 2**31, srams.acc.shape)
    srams.out[:] = rng.integers(-128, 128, srams.out.shape)
    def near(field, depth):     # mostly small, sometimes up to just past the depth
        top = min(depth + 1, isa.uop[field].max)
        return int(rng.integers(max(0, depth - 3), top + 1) if rng.random() < 0.05
                   else rng.integers(0, 6))
    srams.uop[:16] = [isa.encode_uop(near("dst_idx", config.acc_depth),
                                     near("src_idx", min(config.acc_depth, config.inp_depth)),
                                     near("wgt_idx", config.wgt_depth)) for _ in range(16)]
    dram = rng.integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    return srams, dram


def _loop_fields(config, rng):
    f = dict(uop_bgn=int(rng.integers(0, 8)), iter_out=int(rng.integers(0, 4)),
             iter_in=int(rng.integers(1, 4)))
    f["uop_end"] = f["uop_bgn"] + int(rng.integers(0, 5))
    for name in ("dst_factor_out", "dst_factor_in", "src_factor_out", "src_factor_in"):
        f[name] = int(rng.integers(0, 4))
    return f


def _random_insn(config, rng):
    isa = isa_for(config)
    kind = rng.choice(["load", "store", "gemm", "alu"])
    if kind == "gemm":
        f = _loop_fields(config, rng)
        f.update(reset_reg=int(rng.random() < 0.3), wgt_factor_out=int(rng.integers(0, 3)),
                 wgt_factor_in=int(rng.integers(0, 3)))
        return isa.decode(isa.encode(Opcode.GEMM, **f))
    if kind == "alu":
        f = _loop_fields(config, rng)
        op = int(rng.integers(0, 5)) if rng.random() < 0.05 else int(rng.integers(0, 4))
        use_imm = int(rng.random() < 0.6 or op == AluOp.SHR)
        if op == AluOp.SHR:
            limit = SHIFT_LIMIT + (3 if rng.random() < 0.1 else 0)
            imm = int(rng.integers(-limit, limit + 1))
        else:
            imm = int(rng.integers(IMM_MIN, IMM_MAX + 1))
        f.update(alu_opcode=op, use_imm=use_imm, imm=imm if use_imm else 0)
        return isa.decode(isa.encode(Opcode.ALU, **f))
    xs, ys = int(rng.integers(1, 5)), int(rng.integers(0, 4))
    stride = max(0, xs + int(rng.integers(-2, 3)))
    if kind == "store":
        mt, ebytes, pads = MemType.OUT, config.out_elem_bytes, (0, 0, 0, 0)
        depth = config.out_depth
    else:
        mt = MemType(rng.choice([MemType.INP, MemType.WGT, MemType.ACC, MemType.UOP]))
        ebytes = config.elem_bytes(mt)
        depth = {MemType.INP: config.inp_depth, MemType.WGT: config.wgt_depth,
                 MemType.ACC: config.acc_depth, MemType.UOP: config.uop_depth}[mt]
        if mt == MemType.UOP:
            ys, pads = 1, (0, 0, 0, 0)
        else:
            pads = tuple(int(v) for v in rng.integers(0, 3, 4))
    sram_base = int(rng.integers(max(0, depth - 20), depth)) if rng.random() < 0.2 else \
        int(rng.integers(0, 8))
    elems = DRAM_BYTES // ebytes
    r = rng.random()
    if r < 0.1:       # near the end of the image (DRAM_IMAGE for some)
        dram_base = elems - int(rng.integers(1, 12))
    elif r < 0.15:    # near 2**32 (DRAM_OUT_OF_RANGE)
        dram_base = (1 << 32) // ebytes - int(rng.integers(1, 12))
    else:
        dram_base = int(rng.integers(0, elems // 2))
    f = dict(memory_type=int(mt), sram_base=sram_base, dram_base=dram_base, x_size=xs,
             y_size=ys, x_stride=stride, y_pad_0=pads[0], y_pad_1=pads[1], x_pad_0=pads[2],
             x_pad_1=pads[3])
    return isa.decode(isa.encode(Opcode.STORE if kind == "store" else Opcode.LOAD, **f))


def _run(fn, srams, insn, dram):
    counters = Counters()
    try:
        fn(srams, insn, dram, counters)
    except Fault as f:
        return f.code, counters
    return None, counters


@pytest.mark.parametrize("preset", ["tiny", "4x8"])
@pytest.mark.parametrize("seed", range(4))
def test_fast_datapath_equals_the_sequential_spec(preset, seed):
    config = VTAConfig.preset(preset)
    rng = np.random.default_rng(1000 * seed + len(preset))
    faults = set()
    for n in range(150):
        fast, dram_fast = _random_state(config, np.random.default_rng(rng.integers(1 << 62)))
        spec, dram_spec = _random_state(config, np.random.default_rng(0))
        for name in ("inp", "wgt", "acc", "out", "uop"):
            getattr(spec, name)[:] = getattr(fast, name)
        dram_spec[:] = dram_fast
        insn = _random_insn(config, rng)
        got = _run(_fast, fast, insn, dram_fast)
        want = _run(reference.execute, spec, insn, dram_spec)
        where = f"instruction {n}: {insn}"
        assert got[0] == want[0], where
        assert dict(got[1]) == dict(want[1]), where
        for name in ("inp", "wgt", "acc", "out", "uop"):
            np.testing.assert_array_equal(getattr(fast, name), getattr(spec, name),
                                          err_msg=f"{name} after {where}")
        np.testing.assert_array_equal(dram_fast, dram_spec, err_msg=f"DRAM after {where}")
        faults.add(got[0])
    # the random cases reach completion and several faults
    assert None in faults and ErrorCode.SRAM_OUT_OF_RANGE in faults and len(faults) >= 3
