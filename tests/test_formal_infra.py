"""The formal runner itself (vtakit.hw.formal): tools from wheels, verdicts, traces."""

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Signal
from amaranth.lib import memory

from vtakit.hw.formal import FormalToolError, Spec, check, tool_env
from vtakit.hw.queues import TokenQueue

from formal_util import prove, refute
from test_formal_queues import QueueContract

pytestmark = pytest.mark.formal


class Counter(Spec):
    """A free-running 4-bit counter; ``limit``: the asserted bound on its value."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    def properties(self, m, platform):
        count = Signal(4)
        with m.If(AnySeq(1)):
            m.d.sync += count.eq(count + 1)
        m.d.comb += Assert(count <= self.limit)


def test_wrappers_name_the_wheel_tools(tmp_path):
    env = tool_env(tmp_path)
    for name in ("yosys", "yosys-smtbmc", "yices-smt2", "sby"):
        assert (tmp_path / name).is_file()
        assert env["PATH"].startswith(str(tmp_path))


def test_a_true_property_proves_and_a_false_one_fails_with_a_trace(tmp_path):
    prove(Counter(15), "counter_ok", tmp_path, mode="prove", depth=1)
    trace = refute(Counter(5), "counter_bad", tmp_path, mode="bmc", depth=8)
    assert trace.stat().st_size > 0


def test_the_z3_wheel_is_an_alternative_solver(tmp_path):
    prove(QueueContract(TokenQueue(2)), "token2_z3", tmp_path, mode="prove", depth=2,
          engine="smtbmc z3")


def test_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="mode 'prov'"):
        check(Counter(15), name="x", workdir=tmp_path, mode="prov")


class ZeroMemory(Spec):
    """A memory with init zeros, read combinationally: is word 1 zero?"""

    def properties(self, m, platform):
        m.submodules.words = mem = memory.Memory(shape=8, depth=4, init=[])
        port = mem.read_port(domain="comb")
        m.d.comb += [port.addr.eq(1), Assert(port.data == 0)]


def test_free_memories_start_with_any_contents(tmp_path):
    prove(ZeroMemory(), "mem_init", tmp_path, mode="bmc", depth=2)
    refute(ZeroMemory(), "mem_free", tmp_path, mode="bmc", depth=2, free_memories=["words"])
    with pytest.raises(FormalToolError, match="SymbiYosys ended"):
        check(ZeroMemory(), name="mem_typo", workdir=tmp_path, mode="bmc", depth=2,
              free_memories=["wrods"])
