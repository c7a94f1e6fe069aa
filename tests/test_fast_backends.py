"""The compiled RTL backends (``cxxrtl``, ``verilator``): harness, build cache, devices.

Two tiers:

* The flow itself, on :mod:`fast_stub` (a DMA copier with the VTA's top-level
  signature, checked against its numpy model): DRAM model, CSR protocol, error,
  timeout and out-of-range reporting, read latency, VCD, cache hits,
  deterministic sources, atomic concurrent builds. Builds go to a private cache.
* The real VTA: every golden fixture byte-identical on behavioral, cxxrtl and
  verilator. One build per (backend, config) for the whole session, in the
  user's cache (``$VTAKIT_CACHE``), so repeated runs do not recompile.
"""

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fast_stub import stub_copy, stub_design, stub_fail, stub_finish, stub_reference
from vtakit.hw.config import load_config
from vtakit.hw.isa import isa_for
from vtakit.sim import rtl_build
from vtakit.hw.spec import ErrorCode
from vtakit.runtime.device import DeviceError, DeviceFault, open_device

FAST = ("cxxrtl", "verilator")
TINY = load_config("tiny")


@contextlib.contextmanager
def cache_at(path):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VTAKIT_CACHE", str(path))
        yield


@pytest.fixture(scope="session")
def stub_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("stub-cache")


def stub_device(backend, cache, config="tiny", **options):
    with cache_at(cache):
        return open_device(backend, config, design=stub_design(), progress=False, **options)


@pytest.fixture(scope="session", params=FAST)
def stub(request, stub_cache):
    dev = stub_device(request.param, stub_cache)
    yield dev
    dev.close()


def load_program(dev, words, *, seed=0, size=1 << 14):
    """Random data at a fresh buffer, then ``words`` (callables of the buffer address)."""
    rng = np.random.default_rng(seed)
    buf = dev.alloc(size)
    dev.write(buf, rng.integers(0, 256, size, dtype=np.uint8))
    words = [w(buf) for w in words]
    insn = dev.alloc(16 * len(words))
    dev.write(insn, b"".join(w.to_bytes(16, "little") for w in words))
    return insn, words


def random_copies(n, bus_bytes, rng, size=1 << 14):
    """``n`` copies between random bus-aligned places of a ``size``-byte buffer (may overlap)."""
    out = []
    for _ in range(n):
        beats = int(rng.integers(1, 9))
        src, dst = (int(rng.integers(0, (size - 8 * bus_bytes) // bus_bytes)) * bus_bytes
                    for _ in range(2))
        out.append(lambda b, s=src, d=dst, k=beats: stub_copy(b + s, b + d, k))
    return out


# ----------------------------------------------------------------- the flow, on the stub

@pytest.mark.parametrize("seed", [1, 2])
def test_stub_program_matches_numpy(stub, seed):
    rng = np.random.default_rng(seed)
    insn, words = load_program(stub, random_copies(200, 8, rng) + [lambda b: stub_finish()],
                               seed=seed)
    expected = stub_reference(stub.dram.data, words, 8)
    result = stub.run(insn, len(words))
    assert np.array_equal(stub.dram.data, expected)
    assert result.stats["load_insn_count"] == 200
    assert result.cycles > 200 * 4


def test_stub_128_bit_bus(stub_cache):
    """ultra96 has a 128-bit bus: wide ports (VlWide in Verilator, 4 chunks in CXXRTL)."""
    for backend in FAST:
        with stub_device(backend, stub_cache, "ultra96") as dev:
            rng = np.random.default_rng(7)
            insn, words = load_program(dev, random_copies(50, 16, rng) + [lambda b: stub_finish()])
            expected = stub_reference(dev.dram.data, words, 16)
            dev.run(insn, len(words))
            assert np.array_equal(dev.dram.data, expected), backend


def test_read_latency_adds_cycles_per_read_request(stub_cache):
    """The stub waits for each read's data before its next request, so every read
    request (2 per copy: instruction fetch and data; 1 for FINISH's fetch) costs
    exactly ``read_latency - 1`` more cycles."""
    for backend in FAST:
        cycles = {}
        for latency in (1, 6):
            with stub_device(backend, stub_cache, read_latency=latency) as dev:
                rng = np.random.default_rng(3)
                insn, words = load_program(dev, random_copies(20, 8, rng)
                                           + [lambda b: stub_finish()])
                expected = stub_reference(dev.dram.data, words, 8)
                cycles[latency] = dev.run(insn, len(words)).cycles
                assert np.array_equal(dev.dram.data, expected)
        assert cycles[6] - cycles[1] == 5 * (2 * 20 + 1), (backend, cycles)


def test_rtl_error_names_module_index_and_disassembly(stub):
    insn, words = load_program(stub, [lambda b: stub_copy(b, b + 64, 1), lambda b: stub_fail(3),
                                      lambda b: stub_finish()])
    disasm = re.escape(str(isa_for(TINY).decode(words[1])))
    with pytest.raises(DeviceError, match=rf"^{stub.name} \(1x8_i8w8a32_12_12_14_14\): compute "
                                          rf"module, instruction 1: SRAM_OUT_OF_RANGE \[{disasm}\]$"):
        stub.run(insn, len(words))
    # The device is reset after a fault and runs the next program.
    insn, words = load_program(stub, [lambda b: stub_copy(b, b + 64, 2), lambda b: stub_finish()])
    expected = stub_reference(stub.dram.data, words, 8)
    stub.run(insn, len(words))
    assert np.array_equal(stub.dram.data, expected)


def test_timeout(stub):
    rng = np.random.default_rng(4)
    insn, words = load_program(stub, random_copies(50, 8, rng) + [lambda b: stub_finish()])
    stub.max_cycles = 100
    try:
        with pytest.raises(DeviceError, match=rf"^{stub.name} \(1x8_i8w8a32_12_12_14_14\): no "
                                              r"FINISH after 100 cycles \(max_cycles=100\) running "
                                              rf"51 instructions at 0x{insn:x} \(.*load_insn_count="
                                              r"\d+.*\); the program deadlocks"):
            stub.run(insn, len(words))
    finally:
        stub.max_cycles = 10**8


def test_dram_access_outside_the_image(stub):
    insn, words = load_program(stub, [lambda b: 0, lambda b: stub_finish()])
    end = len(stub.dram.data)
    stub.write(insn, stub_copy(0x1000, end - 8, 2).to_bytes(16, "little"))
    with pytest.raises(DeviceError, match=rf"^{stub.name} \(1x8_i8w8a32_12_12_14_14\): DRAM write "
                                          rf"of 16 bytes at 0x{end - 8:x} is outside the DRAM "
                                          rf"image \[0, 0x{end:x}\)$"):
        stub.run(insn, len(words))


def test_bad_instruction_range(stub):
    with pytest.raises(DeviceError, match=rf"^{stub.name} \(\S+\): 2 instructions at 0x1008 are not a "
                                          r"16-byte aligned range"):
        stub.run(0x1008, 2)


def test_vcd(stub_cache, tmp_path):
    for backend in FAST:
        vcd = tmp_path / f"{backend}.vcd"
        with stub_device(backend, stub_cache, vcd=vcd) as dev:
            insn, words = load_program(dev, [lambda b: stub_copy(b, b + 64, 2),
                                             lambda b: stub_finish()])
            cycles = dev.run(insn, len(words)).cycles
        text = vcd.read_text()
        assert "$enddefinitions" in text and "csr" in text and "dram_rd" in text, backend
        # At least one timestamp per clock edge of the run.
        assert len(re.findall(r"^#\d+", text, re.M)) >= 2 * cycles, backend


def test_second_construction_does_not_build(stub_cache, monkeypatch):
    for backend in FAST:
        stub_device(backend, stub_cache).close()   # built (or found) once

        def forbidden(*args, **kwargs):
            raise AssertionError("a cached build was regenerated or recompiled")
        monkeypatch.setattr(rtl_build, "generate_source", forbidden)
        monkeypatch.setattr(rtl_build, "_run", forbidden)
        with stub_device(backend, stub_cache) as dev:
            assert dev.build.cached
            insn, words = load_program(dev, [lambda b: stub_copy(b, b + 64, 2),
                                             lambda b: stub_finish()])
            expected = stub_reference(dev.dram.data, words, 8)
            dev.run(insn, len(words))
            assert np.array_equal(dev.dram.data, expected)
        monkeypatch.undo()


@pytest.mark.parametrize("backend", FAST)
def test_generated_source_is_deterministic(backend):
    a = rtl_build.generate_source(backend, TINY, design=stub_design())
    b = rtl_build.generate_source(backend, TINY, design=stub_design())
    assert a == b
    # No source locations: the text (and so the cache key of a cocotb build) does not
    # depend on where the package is checked out or installed.
    root = str(Path(rtl_build.__file__).resolve().parent.parent)
    assert root not in a


def test_verilator_top_feeds_every_input_only_into_a_register():
    """Verilator re-evaluates, on every eval, all logic that depends on a top-level
    input: the Verilator build's top (sim/registered_top.py) uses each input port only
    as the D of a register (clocked by clk or host_clk), nowhere else."""
    text = rtl_build.generate_source("verilator", TINY, design=stub_design(),
                                     registered_inputs=True)
    body = text.split(f"module {rtl_build.TOP_NAME}(", 1)[1].split("endmodule", 1)[0]
    inputs = set(re.findall(r"^\s*input (?:\[\d+:0\] )?(\w+);", body, re.M))
    clocks = {"clk", "host_clk"}
    assert inputs >= clocks | {"rst", "csr__addr", "csr__w_en", "dram_rd__data__payload",
                               "dram_rd__data__valid", "dram_wr__req__ready"}
    for name in sorted(inputs - clocks):
        uses = [line for line in body.splitlines()[1:]   # not the port list
                if re.search(rf"(?<![\\$\w.]){name}\b", line)
                and not re.match(rf"\s*(input|wire)\b", line)]
        assert len(uses) == 1 and re.fullmatch(rf"\s*\S+\s*<= {name};", uses[0]), (name, uses)
    clocked = re.findall(r"always @\(posedge (\w+)\)", body)
    assert set(clocked) == clocks


def test_cache_key_changes_with_inputs():
    design = stub_design()
    key = lambda backend="cxxrtl", cfg=TINY, td=256, cd=64, d=design: rtl_build.build_key(  # noqa
        backend, cfg, token_depth=td, cmd_depth=cd, design=d)[0]
    base = key()
    assert base == key()
    assert len({base, key("verilator"), key(cfg=load_config("default")), key(td=8), key(cd=8),
                key(d=rtl_build.vta_design())}) == 6


def test_concurrent_builds_install_one_library(tmp_path):
    """Two processes building the same key at once: both succeed, one build remains,
    no temporary directory is left behind."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from fast_stub import stub_design\n"
            "from vtakit.sim.rtl_build import get_build\n"
            "b = get_build('cxxrtl', 'tiny', design=stub_design(), progress=False)\n"
            "print(b.path, b.cached)\n") % str(Path(__file__).parent)
    env = {**os.environ, "VTAKIT_CACHE": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0][0] == outs[1][0]
    assert sorted(o[1] for o in outs) == ["False", "True"]   # one built, one waited and reused
    entries = sorted(p.name for p in (tmp_path / "cxxrtl").iterdir() if not p.name.endswith(".lock"))
    assert entries == [Path(outs[0][0]).name]


# ------------------------------------------------------------------- vtakit compare

from vtakit.runtime import compare as outcomes   # noqa: E402
from vtakit.hw.interfaces import Unit   # noqa: E402
from vtakit.hw.isa import AluOp, MemType, Opcode   # noqa: E402
from vtakit.sim.behavioral import BehavioralDevice   # noqa: E402
from vtakit.runtime.device import BACKENDS   # noqa: E402
from vtakit.runtime.image import DramImage, RunRecord   # noqa: E402


def alu_store_image(config=TINY):
    """LOAD ACC, LOAD UOP, two ALU ADD imm, two overlapping STOREs, FINISH.

    STORE 5 writes OUT[0:4] as 2 rows of 2 elements, row pitch 3 elements, at
    ``out``; STORE 6 writes OUT[0:2] at ``out + 1 element`` (overlapping row 0
    of STORE 5). Returns (image, out address)."""
    isa, c = isa_for(config), config
    dram = np.zeros(0x6000, np.uint8)
    acc, uop, out, insn = 0x1000, 0x2000, 0x3000, 0x4000
    rng = np.random.default_rng(5)
    dram[acc:acc + 4 * c.acc_elem_bytes] = rng.integers(0, 256, 4 * c.acc_elem_bytes, np.uint8)
    dram[uop:uop + 4] = np.frombuffer(isa.encode_uop(0, 0).to_bytes(4, "little"), np.uint8)
    e = c.out_elem_bytes
    words = [
        isa.encode(Opcode.LOAD, memory_type=MemType.ACC, dram_base=acc // c.acc_elem_bytes,
                   y_size=1, x_size=4, x_stride=4),
        isa.encode(Opcode.LOAD, memory_type=MemType.UOP, dram_base=uop // 4, y_size=1, x_size=1,
                   x_stride=1),
        isa.encode(Opcode.ALU, uop_bgn=0, uop_end=1, iter_out=4, iter_in=1, dst_factor_out=1,
                   src_factor_out=1, alu_opcode=AluOp.ADD, use_imm=1, imm=5, push_next_dep=1),
        isa.encode(Opcode.ALU, uop_bgn=0, uop_end=1, iter_out=4, iter_in=1, dst_factor_out=1,
                   src_factor_out=1, alu_opcode=AluOp.ADD, use_imm=1, imm=-7, push_next_dep=1),
        isa.encode(Opcode.LOAD, memory_type=MemType.UOP),   # a compute NOP
        isa.encode(Opcode.STORE, memory_type=MemType.OUT, dram_base=out // e, y_size=2, x_size=2,
                   x_stride=3, pop_prev_dep=1),
        isa.encode(Opcode.STORE, memory_type=MemType.OUT, dram_base=out // e + 1, y_size=1,
                   x_size=2, x_stride=2, pop_prev_dep=1, push_prev_dep=1),
        isa.encode(Opcode.FINISH, pop_next_dep=1),
    ]
    for k, w in enumerate(words):
        dram[insn + 16 * k:insn + 16 * k + 16] = np.frombuffer(w.to_bytes(16, "little"), np.uint8)
    return DramImage(dram, insn, len(words)), out


class PlantedDevice(BehavioralDevice):
    """The behavioral model with one byte of its final DRAM flipped (a planted bug)."""

    name = "planted"
    PLANT = 0x3000 + 8 + 3   # byte 3 of OUT[0] as written by STORE 6

    def run(self, insn_addr, insn_count):
        result = super().run(insn_addr, insn_count)
        self.dram.data[self.PLANT] ^= 0x5A
        return result


def test_compare_reports_the_planted_difference(tmp_path, monkeypatch, capsys):
    from vtakit.cli.main import main
    image, out = alu_store_image()
    path = tmp_path / "img.npz"
    image.save(path)
    monkeypatch.setitem(BACKENDS, "planted", f"{__name__}:PlantedDevice")
    assert main(["compare", str(path), "--config", "tiny", "--backends", "behavioral,behavioral"
                 ]) == 2
    assert capsys.readouterr().err == ("vtakit compare: error: --backends names a backend twice: "
                                       "'behavioral,behavioral'\n")
    assert main(["compare", str(path), "--config", "tiny",
                 "--backends", "behavioral,planted"]) == 1
    text = capsys.readouterr().out
    # The expected bytes: the behavioral result, independently of the report.
    ref = BehavioralDevice(TINY).run_image(image).dram
    addr = PlantedDevice.PLANT
    insn6 = isa_for(TINY).decode(int.from_bytes(image.dram[image.insn_addr + 96:
                                                           image.insn_addr + 112].tobytes(), "little"))
    lo = addr - 16 - (addr - 16) % 16
    exp = " ".join(f"[{v:02x}]" if lo + k == addr else f" {v:02x} "
                   for k, v in enumerate(ref[lo:lo + 48])).rstrip()
    act = exp.replace(f"[{ref[addr]:02x}]", f"[{ref[addr] ^ 0x5A:02x}]")
    assert text.splitlines()[2:] == [
        f"behavioral vs planted: DIFFER: first differing byte at 0x{addr:x} (1 byte differ)",
        "  region: DRAM range of STORE instruction 6 (the last STORE covering it), row 0, "
        "byte 3 of the row",
        f"  instruction 6: {insn6}",
        f"  behavioral 0x{lo:08x}: {exp}",
        f"  planted    0x{lo:08x}: {act}",
    ]
    assert text.splitlines()[0].startswith("behavioral: cycles n/a, wall ")


def test_compare_equal_and_uncovered_region(tmp_path, monkeypatch, capsys):
    from vtakit.cli.main import main
    image, out = alu_store_image()
    path = tmp_path / "img.npz"
    image.save(path)
    monkeypatch.setitem(BACKENDS, "model2", "vtakit.sim.behavioral:BehavioralDevice")
    assert main(["compare", str(path), "--config", "tiny", "--backends", "behavioral,model2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        f"behavioral vs model2: equal ({len(image.dram)} bytes)"
    # A difference in the instruction stream: covered by no STORE.
    ref = outcomes.run_outcomes(image, TINY, ["behavioral"])["behavioral"]
    a = outcomes.Outcome("a", ref.record)

    def flipped(addr):
        dram = ref.dram.copy()
        dram[addr] ^= 1
        return outcomes.Outcome("b", RunRecord(dram, ref.record.cycles, ref.record.stats))

    c = outcomes.compare_outcomes(a, flipped(image.insn_addr + 17))
    assert (c.dram.index, c.dram.count, c.counters) == ((image.insn_addr + 17,), 1, [])
    assert outcomes.covering_store(image, TINY, image.insn_addr + 17) is None
    assert "region: the instruction stream (no STORE" in outcomes.format_comparison(c, image, TINY)
    # Row 1 of STORE 5 (pitch 3 elements): covered by STORE 5 only.
    e = TINY.out_elem_bytes
    c = outcomes.compare_outcomes(a, flipped(out + 3 * e + 2))
    store = outcomes.covering_store(image, TINY, c.dram.index[0])
    assert store[0] == 5 and store[2:] == (1, 2)
    assert outcomes.compare_outcomes(a, outcomes.Outcome("b", ref.record)).equal


# --------------------------------------------------------------- the real VTA

from vtakit.testing.fixtures import assert_replay, load_fixtures   # noqa: E402

PRESETS = ("tiny", "default", "4x8")
#: Every (backend, preset) pair runs in CI. Cold builds on 2 busy cores: cxxrtl tiny 31 s,
#: default 60 s, 4x8 63 s; verilator tiny 55 s, default 85 s, 4x8 67 s.


@pytest.fixture(scope="session")
def vta_device():
    """``vta_device(backend, preset)``: one device (one build) per pair for the session."""
    devices = {}

    def get(backend, preset, **options):
        key = (backend, preset, tuple(sorted(options.items())))
        if key not in devices:
            extra = {"progress": False} if backend in FAST else {}
            devices[key] = open_device(backend, preset, **extra, **options)
        return devices[key]
    yield get
    for dev in devices.values():
        dev.close()


def _fixture_cases():
    for preset in PRESETS:
        for backend in ("behavioral",) + FAST:
            for fx in load_fixtures(preset):
                yield pytest.param(backend, fx, id=f"{backend}-{fx.id}")


@pytest.mark.parametrize("backend,fx", list(_fixture_cases()))
def test_golden_fixture_byte_identical(vta_device, backend, fx):
    assert_replay(fx, vta_device(backend, fx.preset))


@pytest.mark.parametrize("backend", FAST)
def test_counters_match_the_model(vta_device, backend):
    fx = next(f for f in load_fixtures("tiny") if f.name == "gemm_tiled")
    rtl = vta_device(backend, "tiny").run_image(fx.image)
    model = BehavioralDevice("tiny").run_image(fx.image)
    for key in ("gemm_counter", "alu_counter", "load_insn_count", "store_insn_count"):
        assert rtl.stats[key] == model.stats[key], key
    assert rtl.cycles > rtl.stats["gemm_counter"]   # at most one GEMM uop per cycle


def test_cycles_identical_across_rtl_simulators(vta_device):
    """The C++ harness and pysim's DramPortModel have the same DRAM timing, so the
    CYCLES register agrees exactly (for two read latencies)."""
    fx = next(f for f in load_fixtures("tiny") if f.name == "alu_add_imm")
    for latency in (1, 3):
        cycles = {b: vta_device(b, "tiny", read_latency=latency).run_image(fx.image).cycles
                  for b in ("pysim",) + FAST}
        assert len(set(cycles.values())) == 1, (latency, cycles)
    assert cycles["pysim"] > 0


@pytest.mark.parametrize("backend", FAST)
def test_rtl_fault_is_reported_like_the_model(vta_device, backend):
    """ALU opcode 4 (MUL) is illegal: the latched error names the module, the
    instruction index and its disassembly; the next run works (reset)."""
    image, _ = alu_store_image()
    isa = isa_for(TINY)
    word = int.from_bytes(image.dram[image.insn_addr + 48:image.insn_addr + 64].tobytes(), "little")
    bad = isa.decode(word).fields | {"alu_opcode": 4}
    bad_word = isa.encode(Opcode.ALU, **{k: v for k, v in bad.items() if k != "opcode"})
    image.dram[image.insn_addr + 48:image.insn_addr + 64] = np.frombuffer(
        bad_word.to_bytes(16, "little"), np.uint8)
    with pytest.raises(DeviceError) as model:
        BehavioralDevice(TINY).run_image(image)
    assert (model.value.module, model.value.index, model.value.code.name) == \
        (Unit.COMPUTE, 3, "ILLEGAL_FIELD")
    dev = vta_device(backend, "tiny")
    with pytest.raises(DeviceError, match=rf"^{backend} \(1x8_i8w8a32_12_12_14_14\): compute "
                                          rf"module, instruction 3: ILLEGAL_FIELD "
                                          rf"\[{re.escape(str(isa.decode(bad_word)))}\]$"):
        dev.run_image(image)
    fx = next(f for f in load_fixtures("tiny") if f.name == "relu")
    assert_replay(fx, dev)


@pytest.mark.parametrize("backend", FAST)
@pytest.mark.parametrize("stall", [0, 1000])
def test_deadlock_times_out_or_stalls(vta_device, backend, stall):
    """A FINISH that pops a token nobody pushes never completes: without the no-progress
    watch (stall_cycles=0) the run times out at max_cycles; with it, it stops as a
    deadlock after ``stall`` quiet cycles (rounded up to the watch's 256-cycle samples)."""
    isa = isa_for(TINY)
    dram = np.zeros(0x2000, np.uint8)
    dram[0x1000:0x1010] = np.frombuffer(isa.encode(Opcode.FINISH, pop_prev_dep=1)
                                        .to_bytes(16, "little"), np.uint8)
    dev = vta_device(backend, "tiny", max_cycles=5000, stall_cycles=stall)
    where = rf"^{backend} \(1x8_i8w8a32_12_12_14_14\): "
    if stall:
        match = (where + r"deadlock: no progress for 1000 cycles before FINISH running 1 "
                 r"instructions at 0x1000 \(gemm_counter=0, .*; fetch idle, load idle, store "
                 r"idle, load queue 0, compute queue 0, store queue 0, l2g tokens 0/256, .*\)$")
    else:
        match = (where + r"no FINISH after 5000 cycles \(max_cycles=5000\) running 1 "
                 r"instructions at 0x1000 \(gemm_counter=0, .*\); the program deadlocks or "
                 r"needs a larger max_cycles$")
    with pytest.raises(DeviceFault, match=match) as info:
        dev.run_image(DramImage(dram, 0x1000, 1))
    code = ErrorCode.DEADLOCK if stall else ErrorCode.TIMEOUT
    assert (info.value.code, info.value.module, info.value.index) == (code, None, None)
    fx = next(f for f in load_fixtures("tiny") if f.name == "alu_add_imm")
    assert_replay(fx, dev)


def test_fast_slices_rewrites_only_narrow_named_reads():
    src = ("y = add(p_w.slice<327,320>().val(), p_x.curr.slice<5>().val(), "
           "q.slice<100,0>().val(), f(x).slice<3,0>().val(), a.b.slice<3,0>().val()); "
           "i_t.slice<3,0>() = p_s.slice<63,32>().val();")
    assert rtl_build.fast_slices(src) == (
        "y = add(vta_slice<327,320>(p_w), vta_slice<5,5>(p_x.curr), "
        "q.slice<100,0>().val(), f(x).slice<3,0>().val(), a.b.slice<3,0>().val()); "
        "i_t.slice<3,0>() = vta_slice<63,32>(p_s);")


def test_build_refused_when_rtl_sources_changed_since_import(tmp_path, monkeypatch):
    """A process whose imported RTL is older than hw/ on disk must not file a build under
    the key of the new sources (the key is taken from the sources as imported)."""
    import dataclasses
    monkeypatch.setenv("VTAKIT_CACHE", str(tmp_path))
    design = rtl_build.vta_design()
    assert design.digests == design.source_digests()
    stale = dataclasses.replace(design, digests={**design.digests, "gemm.py": "0" * 64})
    with pytest.raises(rtl_build.BuildError, match=r"^gemm\.py changed after this process "
                       r"imported the vta RTL; restart Python so the build matches the sources$"):
        rtl_build.get_build("cxxrtl", "tiny", design=stale, progress=False)
    assert not any(tmp_path.rglob("libvta.so"))
