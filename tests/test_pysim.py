"""The pysim backend replays every golden fixture byte for byte (the expected DRAM is the
behavioral model's), and its options work: vcd, read latency, ``vtakit exec``."""

import numpy as np
import pytest

from fixture_util import assert_replay, first_difference, load_fixtures
from vtakit.main import main
from vtakit.sim import DramImage, open_device
from vtakit.sim.device import DeviceError
from vtakit.sim.pysim import PysimDevice

# The tiled GEMM is ~50k cycles (about a minute on pysim): run it with -m slow.
SLOW = {"gemm_tiled"}
# default: the cheap fixtures only (the tiny preset covers the rest).
CASES = [pytest.param(fx, id=fx.id, marks=[pytest.mark.slow] if fx.name in SLOW else [])
         for fx in load_fixtures("tiny")]
CASES += [pytest.param(fx, id=fx.id) for fx in load_fixtures("default") if fx.name not in SLOW]
CASES += [pytest.param(fx, id=fx.id, marks=[pytest.mark.slow])
          for fx in load_fixtures() if fx.preset == "4x8" or
          (fx.preset == "default" and fx.name in SLOW)]

_DEVICES = {}


def _device(preset):
    # One simulator per preset: later fixtures also exercise the restart of the design.
    if preset not in _DEVICES:
        _DEVICES[preset] = PysimDevice(preset)
    return _DEVICES[preset]


def test_fixtures_exist():
    names = {fx.name for fx in load_fixtures("tiny")}
    assert {"gemm_default", "padded_load_all", "alu_add_tensor", "gemm_tiled"} <= names


@pytest.mark.parametrize("fx", CASES)
def test_fixture_replays_bit_exact(fx):
    assert_replay(fx, _device(fx.preset))


@pytest.mark.parametrize("fx", [pytest.param(fx, id=fx.id) for fx in load_fixtures("default")
                                if fx.name not in SLOW])
def test_default_fixtures_on_a_128_bit_bus(fx):
    """ultra96 has the default architecture on a 128-bit bus: the same programs give the
    same DRAM (one instruction per beat, four micro-ops per beat, one INP element per beat)."""
    assert_replay(fx, _device("ultra96"))


def test_read_latency_and_vcd(tmp_path):
    fx = next(f for f in load_fixtures("tiny") if f.name == "padded_load_all")
    vcd = tmp_path / "run.vcd"
    with open_device("pysim", "tiny", read_latency=9, vcd=str(vcd)) as dev:
        slow = dev.run_image(fx.image)
    assert first_difference(slow.dram, fx.expected) is None
    fast = _device("tiny").run_image(fx.image)
    assert slow.stats == fast.stats and slow.cycles > fast.cycles > 0
    text = vcd.read_text()
    assert "$enddefinitions" in text and "irq" in text


def test_exec_cli_pysim(tmp_path):
    fx = next(f for f in load_fixtures("tiny") if f.name == "gemm_default")
    image, out = tmp_path / "img.npz", tmp_path / "out.npz"
    fx.image.save(image)
    assert main(["exec", str(image), "--config", "tiny", "--backend", "pysim", "-o", str(out),
                 "--token-depth", "8", "-O", "read_latency=2"]) == 0
    with np.load(out) as npz:
        assert first_difference(npz["dram"], fx.expected) is None
        assert int(npz["cycles"]) > 0


def test_bad_options():
    with pytest.raises(DeviceError, match=r"^pysim: read_latency=0; it must be >= 1 cycle$"):
        PysimDevice("tiny", read_latency=0)
    dev = _device("tiny")
    with pytest.raises(DeviceError, match=r"^pysim: 2 instructions at 0x1008 are not a 16-byte "
                       r"aligned range"):
        dev.run(0x1008, 2)
