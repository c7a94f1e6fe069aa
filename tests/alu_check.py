"""Shared by the ALU tests: one ALU instruction, and the fast datapath against the
sequential spec on it."""

import numpy as np

from vtakit.hw.isa import Opcode, isa_for
from vtakit.sim import reference
from vtakit.sim.datapath import Counters


def wrap32(x) -> np.ndarray:
    """Integers wrapped to the int32 range (int64 values): the test's own two's complement,
    independent of the library's :func:`vtakit.hw.fixedpoint.wrap_int32`."""
    return ((np.asarray(x, np.int64) + (1 << 31)) % (1 << 32)) - (1 << 31)


def alu_insn(config, code, *, use_imm=1, imm=3, iters=(1, 1), dst=(0, 0), src=(0, 0),
             uop_end=1):
    """A decoded ALU instruction of ``config``'s ISA over uops ``[0, uop_end)``."""
    isa = isa_for(config)
    return isa.decode(isa.encode(
        Opcode.ALU, alu_opcode=code, use_imm=use_imm, imm=imm, uop_bgn=0, uop_end=uop_end,
        iter_out=iters[0], iter_in=iters[1], dst_factor_out=dst[0], dst_factor_in=dst[1],
        src_factor_out=src[0], src_factor_in=src[1]))


def random_loops(rng) -> dict:
    """Random loop extents, factors and uop count: repeated destinations and chains."""
    return dict(iters=tuple(int(v) for v in rng.integers(1, 4, 2)),
                dst=tuple(int(v) for v in rng.integers(0, 2, 2)),
                src=tuple(int(v) for v in rng.integers(0, 2, 2)),
                uop_end=int(rng.integers(1, 8)))


def assert_datapath_equals_spec(fast, spec, insn):
    """Run ``insn`` on the fast datapath (SRAMs ``fast``) and the sequential spec (``spec``,
    the same state): equal accumulators, outputs and counters, and the instruction
    changed something."""
    counters = (Counters(), Counters())
    before = fast.acc.copy()
    fast.alu(insn, counters[0])
    reference.alu(spec, insn, counters[1])
    np.testing.assert_array_equal(fast.acc, spec.acc, err_msg=str(insn))
    np.testing.assert_array_equal(fast.out, spec.out, err_msg=str(insn))
    assert counters[0] == counters[1]
    assert not np.array_equal(fast.acc, before), str(insn)
