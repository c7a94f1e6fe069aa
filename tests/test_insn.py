"""Re-creations of TVM's instruction tests (reference 6.1, test_vta_insn.py) on the
runtime API, for the default, 4x8 and tiny presets, on the backend chosen with
``--backend`` (default: the behavioral model; ``pytest --backend verilator
tests/test_insn.py`` runs them on the Verilator RTL) and ``--config``.

Each program comes from ``vtakit.testing.programs``; its expected output is computed there
with numpy, independently of the model. The counters of each run are checked against
the work the program queued: the micro-op counters on every backend, fsim's DRAM byte
counters where the backend reports them (the behavioral model).
"""

import numpy as np
import pytest

from vtakit.runtime import Runtime
from vtakit.testing.programs import (ALU_CASES, PAD_CASES, build_alu, build_gemm,
                                     build_padded_load, build_relu, build_runtime_array,
                                     build_save_load_out, build_shift_and_scale, verify)

PRESETS = ["default", "4x8", "tiny"]
#: fsim's counters that only the behavioral model reports.
_BYTE_COUNTERS = {"inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
                  "out_store_nbytes"}


@pytest.fixture
def rng():
    return np.random.default_rng(0xDEADB)


class Stats(dict):
    """A run's counters; a byte counter the backend does not report reads as None."""

    def __init__(self, stats, reference: bool):
        super().__init__(stats)
        self.reference = reference

    def __missing__(self, key):
        if key in _BYTE_COUNTERS and not self.reference:
            return None
        raise KeyError(key)


def expect(value, wanted) -> bool:
    """``value == wanted``, or the backend does not report that counter."""
    return value is None or value == wanted


def run(rt, checks):
    result = rt.synchronize()
    verify(rt, checks)
    stats = Stats(result.stats, reference=rt.device.name == "behavioral")
    if stats:
        assert "gemm_counter" in stats and "alu_counter" in stats
    return stats


def test_runtime_array(rt, rng):
    checks = build_runtime_array(rt, rng, rows=100, cols=100)
    assert rt.instructions == []
    assert run(rt, checks) == {}     # nothing queued: nothing runs


def test_save_load_out(rt, rng):
    c = rt.config
    stats = run(rt, build_save_load_out(rt, rng))
    assert expect(stats["acc_load_nbytes"], 36 * c.acc_elem_bytes)
    assert stats["alu_counter"] == 36
    assert expect(stats["out_store_nbytes"], 36 * c.out_elem_bytes)


@pytest.mark.parametrize("case", PAD_CASES)
def test_padded_load(rt, rng, case):
    yb, ya, xb, xa = PAD_CASES[case]
    stats = run(rt, build_padded_load(rt, rng, case))
    assert expect(stats["acc_load_nbytes"], 15 * rt.config.acc_elem_bytes)   # pads not counted
    assert stats["alu_counter"] == (3 + yb + ya) * (5 + xb + xa)


@pytest.mark.parametrize("schedule", ["default", "smt"])
def test_gemm(rt, rng, schedule):
    stats = run(rt, build_gemm(rt, rng, schedule))
    assert stats["gemm_counter"] == 4 * 4 * 2          # 16 output tiles x 2 K blocks
    assert stats["alu_counter"] == 3 * 16


@pytest.mark.parametrize("case", ALU_CASES)
def test_alu(rt, rng, case):
    stats = run(rt, build_alu(rt, rng, case))
    assert stats["alu_counter"] == 64


def test_relu(rt, rng):
    assert run(rt, build_relu(rt, rng))["alu_counter"] == 2 * 80


def test_shift_and_scale(rt, rng):
    assert run(rt, build_shift_and_scale(rt, rng))["alu_counter"] == 2 * 16
