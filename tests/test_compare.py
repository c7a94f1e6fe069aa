"""One comparison of device outcomes (vtakit.runtime.compare): the rule vtakit compare,
the fuzzer and layer compare share."""

import numpy as np
import pytest

from vtakit.cli.main import main
from vtakit.hw.config import load_config
from vtakit.hw.spec import ErrorCode, Unit
from vtakit.runtime.compare import (Fault, Outcome, compare_outcomes, first_difference,
                                    format_comparison, run_outcome, run_outcomes)
from vtakit.runtime.device import BACKENDS, DeviceError, DeviceFault
from vtakit.runtime.image import RunRecord
from vtakit.sim.behavioral import BehavioralDevice
from vtakit.sim.fuzz import run_program
from vtakit.sim.fuzz_gen import generate_program

TINY = load_config("tiny")


def _done(name, dram, **stats):
    return Outcome(name, RunRecord(np.asarray(dram, np.uint8), -1, stats))


def _fault(name, *args):
    return Outcome(name, fault=Fault.from_error(DeviceFault("m", *args)))


def test_first_difference_of_arrays():
    assert first_difference(np.arange(6).reshape(2, 3), np.arange(6).reshape(2, 3)) is None
    b = np.arange(6).reshape(2, 3)
    b[1, 0] = 9
    b[1, 2] = 9
    d = first_difference(np.arange(6).reshape(2, 3), b)
    assert (d.index, d.expected, d.actual, d.count, d.size) == ((1, 0), 3, 9, 2, 6)
    nan = np.array([1.0, np.nan])
    assert first_difference(nan, nan.copy()) is None
    d = first_difference(np.zeros(3, np.int8), np.zeros(4, np.int8))
    assert (d.index, d.expected, d.actual) == ((), "int8[3]", "int8[4]")


def test_the_rule():
    a = _done("a", [1, 2, 3], gemm_counter=4, alu_counter=1, wall=0.5)
    assert compare_outcomes(a, _done("b", [1, 2, 3], gemm_counter=4, wall=9.0)).equal
    c = compare_outcomes(a, _done("b", [1, 7, 7], gemm_counter=4))
    assert not c.equal and c.dram.index == (1,) and c.dram.count == 2
    assert c.line() == "a vs b: DIFFER: first differing byte at 0x1 (2 bytes differ)"
    c = compare_outcomes(a, _done("b", [1, 2, 3], gemm_counter=5, alu_counter=1))
    assert not c.equal and c.counters == [("gemm_counter", 4, 5)]
    assert c.line() == "a vs b: DIFFER: counters gemm_counter 4 / 5"
    c = compare_outcomes(a, _done("b", [1, 2]))
    assert c.line() == "a vs b: DIFFER: DRAM of 3 / 2 bytes"
    # faults: attributes only, never messages; a fault and a completion always differ
    f = _fault("f", ErrorCode.ILLEGAL_FIELD, Unit.COMPUTE, 3)
    assert compare_outcomes(f, _fault("g", ErrorCode.ILLEGAL_FIELD, Unit.COMPUTE, 3)).equal
    c = compare_outcomes(f, _fault("g", ErrorCode.ILLEGAL_FIELD, Unit.STORE, 4))
    assert c.fault_fields == ["module", "instruction"]
    assert format_comparison(c).splitlines() == [
        "f vs g: DIFFER: different faults (module, instruction)",
        "  f compute module, instruction 3: ILLEGAL_FIELD",
        "  g store module, instruction 4: ILLEGAL_FIELD"]
    assert compare_outcomes(_fault("d", ErrorCode.DEADLOCK),
                            _fault("t", ErrorCode.TIMEOUT)).fault_fields == ["code"]
    assert compare_outcomes(a, f).line() == ("a vs f: DIFFER: f faults (compute module, "
                                             "instruction 3: ILLEGAL_FIELD), a completes")
    # a simulator error during the run is an outcome, keyed by its message
    e = Outcome("e", fault=Fault.from_error(DeviceError("sim (x): combinational loop\nmore")))
    assert e.fault.key == ("ERROR", None, "sim (x): combinational loop")
    assert not compare_outcomes(a, e).equal


class CountsOneMore(BehavioralDevice):
    """Right DRAM, one GEMM too many in its counters."""

    def run_image(self, image):
        record = super().run_image(image)
        record.stats = {**record.stats, "gemm_counter": record.stats["gemm_counter"] + 1}
        return record


def test_compare_and_fuzzer_decide_alike(tmp_path, capsys, monkeypatch):
    """A counter difference: the fuzzer's run_program outcomes and vtakit compare agree
    that it differs (before, the fuzzer said so and its replay command said equal)."""
    monkeypatch.setitem(BACKENDS, "countsmore", f"{__name__}:CountsOneMore")
    program = generate_program(TINY, np.random.default_rng([5, 0]), token_depth=256,
                               illegal=0.0)
    image, _ = program.build()
    ref = run_program(image, TINY, "behavioral")       # the fuzzer's outcome of a run
    with CountsOneMore(TINY) as dev:
        other = run_outcome(dev, image, "countsmore")
    c = compare_outcomes(ref, other)
    assert not c.equal and c.dram is None and c.counters[0][0] == "gemm_counter"
    outcomes = run_outcomes(image, TINY, ["behavioral", "countsmore"])
    assert compare_outcomes(outcomes["behavioral"], outcomes["countsmore"]).line() == c.line()
    path = image.save(tmp_path / "p.npz")
    assert main(["compare", str(path), "--config", "tiny",
                 "--backends", "behavioral,countsmore"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == c.line()


@pytest.mark.parametrize("backends,status", [("behavioral,behavioral2", 0),
                                             ("behavioral,countsmore", 1)])
def test_compare_exit_status(tmp_path, capsys, monkeypatch, backends, status):
    monkeypatch.setitem(BACKENDS, "behavioral2", "vtakit.sim.behavioral:BehavioralDevice")
    monkeypatch.setitem(BACKENDS, "countsmore", f"{__name__}:CountsOneMore")
    image, _ = generate_program(TINY, np.random.default_rng([5, 1]), token_depth=256,
                                illegal=0.0).build()
    path = image.save(tmp_path / "p.npz")
    assert main(["compare", str(path), "--config", "tiny", "--backends", backends]) == status
