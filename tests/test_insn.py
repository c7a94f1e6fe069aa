"""Re-creations of TVM's instruction tests (reference 6.1, test_vta_insn.py) on the
runtime API, run on the behavioral model for the default, 4x8 and tiny presets.

Each program comes from ``vtakit.testing.programs``; its expected output is computed there
with numpy, independently of the model. The fsim counters of each run are checked
against the work the program queued.
"""

import numpy as np
import pytest

from vtakit.testing.programs import (ALU_CASES, PAD_CASES, build_alu, build_gemm, build_padded_load,
                      build_relu, build_runtime_array, build_save_load_out,
                      build_shift_and_scale, verify)
from vtakit.runtime import Runtime
from vtakit.sim import open_device

PRESETS = ["default", "4x8", "tiny"]


@pytest.fixture(params=PRESETS)
def rt(request):
    return Runtime(open_device("behavioral", request.param))


@pytest.fixture
def rng():
    return np.random.default_rng(0xDEADB)


def run(rt, checks):
    result = rt.synchronize()
    verify(rt, checks)
    return result.stats


def test_runtime_array(rt, rng):
    checks = build_runtime_array(rt, rng, rows=100, cols=100)
    assert rt.instructions == []
    assert run(rt, checks) == {}     # nothing queued: nothing runs


def test_save_load_out(rt, rng):
    c = rt.config
    stats = run(rt, build_save_load_out(rt, rng))
    assert stats["acc_load_nbytes"] == 36 * c.acc_elem_bytes
    assert stats["alu_counter"] == 36
    assert stats["out_store_nbytes"] == 36 * c.out_elem_bytes


@pytest.mark.parametrize("case", PAD_CASES)
def test_padded_load(rt, rng, case):
    yb, ya, xb, xa = PAD_CASES[case]
    stats = run(rt, build_padded_load(rt, rng, case))
    assert stats["acc_load_nbytes"] == 15 * rt.config.acc_elem_bytes   # pads are not counted
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
