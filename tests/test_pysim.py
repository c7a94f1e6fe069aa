"""The pysim backend replays every golden fixture byte for byte (the expected DRAM is the
behavioral model's), and its options work: vcd, read latency, ``vtakit exec``."""

import numpy as np
import pytest

from vtakit.testing.fixtures import assert_replay, first_difference, load_fixtures
from vtakit.cli.main import main
from vtakit.sim import open_device
from vtakit.runtime.device import DeviceError
from vtakit.sim.pysim import PysimDevice

# The tiled GEMM is ~53k cycles on tiny (~30 s on pysim) and longer on the bigger presets:
# CI replays it on tiny only; default and 4x8 run with -m slow.
SLOW = {"gemm_tiled"}
CASES = [pytest.param(fx, id=fx.id) for fx in load_fixtures("tiny")]
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
    with pytest.raises(DeviceError, match=r"^pysim \(\S+\): 2 instructions at 0x1008 are not a 16-byte "
                       r"aligned range"):
        dev.run(0x1008, 2)


def _random_dma_program(rt, seed):
    """Random padded INP/WGT/ACC loads, GEMMs on them, copies to OUT and strided stores."""
    from vtakit.hw.isa import AluOp, MemType
    from vtakit.runtime import Unit, UopKernel
    L, C, S = Unit.LOAD, Unit.COMPUTE, Unit.STORE
    c = rt.config
    rng = np.random.default_rng(seed)
    src = rt.alloc(1 << 16)
    rt.upload(src, rng.integers(-64, 64, 1 << 16, dtype=np.int8))
    acc = rt.alloc(1 << 15)
    rt.upload(acc, rng.integers(-1000, 1000, (1 << 15) // 4, dtype=np.int32))
    out = rt.alloc(1 << 14)
    for step in range(4):
        x, y = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        pads = [int(v) for v in rng.integers(0, 3, 4)]
        stride = x + int(rng.integers(0, 3))
        xt, yt = pads[2] + x + pads[3], pads[0] + y + pads[1]
        n = xt * yt
        inp_base, wgt_base = int(rng.integers(0, 16)), int(rng.integers(0, 16))
        acc_base = int(rng.integers(0, 64))
        kw = dict(y_pad_before=pads[0], y_pad_after=pads[1], x_pad_before=pads[2],
                  x_pad_after=pads[3])
        rt.load_2d(MemType.INP, inp_base, src, int(rng.integers(0, 64)), x, y, stride, **kw)
        rt.load_2d(MemType.WGT, wgt_base, src, int(rng.integers(0, 16)), x, y, stride, **kw)
        rt.dep_push(L, C)
        rt.dep_pop(L, C)
        rt.load_2d(MemType.ACC, acc_base, acc, int(rng.integers(0, 64)), x, y, stride, **kw)
        rt.push_gemm(UopKernel.gemm([(acc_base, inp_base, wgt_base)], [(n, 1, 1, 1)]))
        rt.push_alu(UopKernel.alu(AluOp.SHR, [(acc_base, acc_base)], [(n, 1, 1)], imm=3))
        rt.dep_push(C, L)
        rt.dep_pop(C, L)
        rt.dep_push(C, S)
        rt.dep_pop(C, S)
        rt.store_2d(acc_base, out, 64 * step, xt, yt, xt + int(rng.integers(0, 3)))
        rt.dep_push(S, C)
        rt.dep_pop(S, C)


@pytest.mark.parametrize("seed", range(3))
def test_random_dma_programs_match_the_model(seed):
    """Random shapes, pads, strides and SRAM bases through every DMA path (INP/WGT/ACC loads,
    UOP loads, stores): pysim's final DRAM equals the behavioral model's, byte for byte."""
    from vtakit.runtime import Runtime
    drams = {}
    for backend in ("behavioral", "pysim"):
        dev = open_device(backend, "tiny", **({"progress": False} if backend == "pysim" else {}))
        rt = Runtime(dev)
        _random_dma_program(rt, seed)
        rt.synchronize()
        drams[backend] = dev.dram.data.copy()
    assert first_difference(drams["pysim"], drams["behavioral"]) is None


def test_dram_fault_then_recovery():
    """A LOAD reading past the end of DRAM raises; the device still runs the next program."""
    from vtakit.hw.isa import MemType, Opcode, insns_to_bytes, isa_for
    dev = PysimDevice("tiny", progress=False)
    isa = isa_for(dev.config)
    addr = dev.alloc(32)
    size = len(dev.dram.data)
    words = [isa.encode(Opcode.LOAD, memory_type=MemType.INP, dram_base=size // 8, x_size=1,
                        y_size=1, x_stride=1), isa.encode(Opcode.FINISH)]
    dev.write(addr, insns_to_bytes(words))
    with pytest.raises(DeviceError, match=r"^pysim \(\S+\): DRAM read of 8 bytes at 0x[0-9a-f]+ is outside "
                       r"the \d+-byte DRAM image$"):
        dev.run(addr, 2)
    fx = next(f for f in load_fixtures("tiny") if f.name == "relu")
    assert_replay(fx, dev)
