"""Golden fixtures: complete, current, replayable byte for byte on the behavioral model
(also under random module interleavings), and sensitive to a missing dependency flag."""

import importlib.util
import zlib

import numpy as np
import pytest

from vtakit.testing.fixtures import FIXTURE_DIR, assert_replay, first_difference, load_fixtures
from vtakit.testing.programs import PROGRAMS
from vtakit.hw.isa import MemType, Opcode, isa_for
from vtakit.sim import DeviceError, DramImage, open_device

# generate.py by path: a top-level name "fixtures" could be another installed package
_spec = importlib.util.spec_from_file_location("fixture_generate", FIXTURE_DIR / "generate.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)
PRESETS, build = generate.PRESETS, generate.build

FIXTURES = load_fixtures()
IDS = [f.id for f in FIXTURES]


def test_fixture_set_is_complete():
    assert sorted(IDS) == sorted(f"{n}__{p}" for n in PROGRAMS for p in PRESETS)


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_fixture_is_current(fx):
    """Building the program again gives the stored image bit for bit (otherwise the
    runtime or vtakit.testing.programs changed: run tests/fixtures/generate.py)."""
    _, _, image = build(fx.name, fx.preset)
    assert (image.insn_addr, image.insn_count) == (fx.image.insn_addr, fx.image.insn_count)
    assert first_difference(image.dram, fx.image.dram) is None, \
        "stale fixture: regenerate with python tests/fixtures/generate.py"


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_fixture_replays(fx, open_backend, request):
    """On the ``--backend`` (default behavioral): ``pytest --backend verilator --config tiny
    tests/test_fixtures.py -k replays`` replays the tiny fixtures on the Verilator RTL."""
    config = request.config.getoption("--config")
    if config is not None and config != fx.preset:
        pytest.skip(f"a {fx.preset} fixture; --config {config} selects only that preset's")
    assert_replay(fx, open_backend(fx.preset))


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_fixture_replays_interleaved(fx):
    seed = zlib.crc32(fx.id.encode())
    assert_replay(fx, open_device("behavioral", fx.preset, interleave_seed=seed))


# -------------------------------------------------------- a missing dependency

def _decoded(fx):
    isa = isa_for(open_device("behavioral", fx.preset).config)
    raw = fx.image.instructions()
    return [isa.decode(int.from_bytes(raw[16 * i:16 * i + 16], "little"))
            for i in range(fx.image.insn_count)]


def _without_flag(fx, index, flag):
    """(image, expected) with one dep flag of instruction ``index`` cleared."""
    bit = 1 << (3 + ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep").index(flag))
    addr = fx.image.insn_addr + 16 * index
    dram, expected = fx.image.dram.copy(), fx.expected.copy()
    assert dram[addr] & bit, f"instruction {index} has no {flag}"
    dram[addr] &= 0xFF ^ bit
    expected[addr] = dram[addr]           # the instruction itself is the only intended change
    return DramImage(dram, fx.image.insn_addr, fx.image.insn_count), expected


TILED = [f for f in FIXTURES if f.name == "gemm_tiled"]


def _nth(insns, pred, n):
    return [i for i, insn in enumerate(insns) if pred(insn)][n]


# Which flag to drop: (description, flag, selector of the instruction).
DROPPED_POPS = [
    ("compute of tile 1 does not wait for its loads", "pop_prev_dep",
     lambda insns: _nth(insns, lambda i: i.opcode == Opcode.LOAD and i.memory_type == MemType.ACC
                        and i.pop_prev_dep, 1)),
    ("load of tile 2 does not wait for compute of tile 0", "pop_next_dep",
     lambda insns: _nth(insns, lambda i: i.opcode == Opcode.LOAD and i.memory_type == MemType.INP
                        and i.pop_next_dep, 0)),
    ("compute of tile 2 does not wait for the store of tile 0", "pop_next_dep",
     lambda insns: _nth(insns, lambda i: i.opcode == Opcode.LOAD and i.memory_type == MemType.ACC
                        and i.pop_next_dep, 0)),
    ("store of tile 1 does not wait for its compute", "pop_prev_dep",
     lambda insns: _nth(insns, lambda i: i.opcode == Opcode.STORE and i.pop_prev_dep, 1)),
]


@pytest.mark.parametrize("fx", TILED, ids=[f.id for f in TILED])
@pytest.mark.parametrize("what, flag, select", DROPPED_POPS, ids=[d[0] for d in DROPPED_POPS])
def test_missing_pop_is_caught(fx, what, flag, select):
    """Some random interleaving exposes the race: a fault or a different final DRAM."""
    image, expected = _without_flag(fx, select(_decoded(fx)), flag)
    for seed in range(12):
        try:
            record = open_device("behavioral", fx.preset, interleave_seed=seed).run_image(image)
        except DeviceError:
            return
        if first_difference(record.dram, expected) is not None:
            return
    pytest.fail(f"{what}: no interleaving of 12 changed the result")


@pytest.mark.parametrize("fx", TILED, ids=[f.id for f in TILED])
def test_missing_push_deadlocks(fx):
    insns = _decoded(fx)
    index = _nth(insns, lambda i: i.opcode == Opcode.LOAD and i.push_next_dep and not i.is_nop, 0)
    image, _ = _without_flag(fx, index, "push_next_dep")
    with pytest.raises(DeviceError, match=r"^deadlock: no module can proceed before FINISH: .*"
                                          r"compute waits to pop from l2g"):
        open_device("behavioral", fx.preset).run_image(image)


def test_fixtures_are_small():
    assert sum(f.image.dram.nbytes for f in FIXTURES) < 8 << 20
    assert all(np.array_equal(f.image.dram[:4096], np.zeros(4096, np.uint8)) for f in FIXTURES)
