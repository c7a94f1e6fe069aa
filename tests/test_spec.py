"""The rule table (vtakit.hw.spec): defined once, and right.

Every limit and the token-queue routing are assigned in hw/spec.py and nowhere else in
the package sources (other modules import them); the routing it derives is reference
3.2's table; dispatch is reference 3.1's."""

import re
from pathlib import Path

import pytest

from vtakit.hw import spec
from vtakit.hw.spec import (DEP_QUEUES, PIPELINE, TOKEN_QUEUES, MemType, Opcode, Unit,
                            dispatch_unit)

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for d in ("vtakit", "cli", "hw", "sim", "runtime", "compiler", "boards")
           for p in (ROOT / d).rglob("*.py")]
RULES = ["SHIFT_LIMIT", "IMM_MIN", "IMM_MAX", "IMM_BITS", "MAX_PAD", "PAD_BITS",
         "LOOP_ITER_BITS", "MAX_LOOP_EXTENT", "INSN_BITS", "INSN_BYTES", "UOP_BITS",
         "OPCODE_BITS", "TOKEN_QUEUES", "DEP_QUEUES", "DEP_FLAGS", "LOAD_UNIT_MEM_TYPES",
         "FINISH", "DRAM_ADDR_BITS"]


@pytest.mark.parametrize("name", RULES)
def test_rule_assigned_once(name):
    pattern = re.compile(rf"^\s*{name}\s*=", re.M)
    where = sorted(str(p.relative_to(ROOT)) for p in SOURCES if pattern.search(p.read_text()))
    assert where == ["hw/spec.py"], where


def test_token_routing_is_reference_3_2():
    assert DEP_QUEUES == {
        Unit.LOAD: {"pop_prev_dep": None, "pop_next_dep": "g2l",
                    "push_prev_dep": None, "push_next_dep": "l2g"},
        Unit.COMPUTE: {"pop_prev_dep": "l2g", "pop_next_dep": "s2g",
                       "push_prev_dep": "g2l", "push_next_dep": "g2s"},
        Unit.STORE: {"pop_prev_dep": "g2s", "pop_next_dep": None,
                     "push_prev_dep": "s2g", "push_next_dep": None},
    }
    assert PIPELINE == (Unit.LOAD, Unit.COMPUTE, Unit.STORE)
    assert set(TOKEN_QUEUES) == {"l2g", "g2l", "g2s", "s2g"}


def test_dispatch_is_reference_3_1():
    assert dispatch_unit(Opcode.STORE, MemType.OUT) == Unit.STORE
    assert [dispatch_unit(Opcode.LOAD, t) for t in MemType] == [
        Unit.COMPUTE, Unit.LOAD, Unit.LOAD, Unit.COMPUTE, Unit.COMPUTE]
    for op in (Opcode.GEMM, Opcode.ALU, Opcode.FINISH):
        assert dispatch_unit(op) == Unit.COMPUTE


def test_limits():
    assert (spec.SHIFT_LIMIT, spec.IMM_MIN, spec.IMM_MAX, spec.MAX_PAD) == (31, -32768, 32767, 15)
    assert (spec.MAX_LOOP_EXTENT, spec.INSN_BYTES, int(Opcode.FINISH)) == (16383, 16, 3)
    assert [str(u) for u in Unit] == ["fetch", "load", "compute", "store"]
