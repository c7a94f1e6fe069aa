"""Command-line gaps: compare with faulting backends, images that record their config,
the real output path of ``exec -o``, unknown ``-O`` options, multi-line error messages."""

import json
import re

import numpy as np
import pytest

from vtakit.runtime.compare import Fault
from vtakit.hw.config import load_config
from vtakit.hw.isa import AluOp, MemType, Opcode, bytes_to_words, isa_for
from vtakit.hw.spec import ErrorCode, Unit
from vtakit.cli.main import error_lines, main
from vtakit.sim.behavioral import BehavioralDevice
from vtakit.sim.rtl_build import BuildError
from vtakit.runtime.device import DeviceFault
from vtakit.runtime.device import BACKENDS
from vtakit.runtime.image import DramImage, ImageError, RunRecord

from test_behavioral import Prog

TINY = load_config("tiny")
DATA = np.arange(16, dtype=np.int32).reshape(2, 1, 8)


def program(fault=False, preset="tiny"):
    """ACC rows + 100 stored as int8; with ``fault``, instruction 1 loads INP past its depth
    (load module, instruction 1: SRAM_OUT_OF_RANGE). Returns (image, output address)."""
    prog = Prog(preset)
    out = prog.dev.alloc(64)
    prog.load(MemType.ACC, 0, prog.data(DATA), 2)
    if fault:
        prog.load(MemType.INP, prog.cfg.inp_depth, prog.data(np.zeros(8, np.int8)), 1)
    prog.uops([(0, 0, 0)], sram=0)
    prog.alu(AluOp.ADD, 0, 1, (1, 2), (0, 1), (0, 1), 100, push_next_dep=1)
    prog.store(0, out, 2, pop_prev_dep=1, push_prev_dep=1)
    prog.emit(Opcode.LOAD, memory_type=MemType.UOP, pop_next_dep=1)
    prog.finish()
    return prog.image(), out


# ------------------------------------------------------------ wrapper backends

class RtlLike(BehavioralDevice):
    """The behavioral model reporting a fault as the RTL backends do (the DeviceFault of
    Device.rtl_fault), optionally with a shifted index."""

    name = "rtllike"
    SHIFT = 0

    def run(self, insn_addr, insn_count):
        try:
            return super().run(insn_addr, insn_count)
        except DeviceFault as e:
            raise self.rtl_fault(
                f"{self.name} ({self.config.name})", int(e.code), int(e.module),
                e.index + self.SHIFT, insn_addr, insn_count) from None


class Shifted(RtlLike):
    name = "shifted"
    SHIFT = 1


class AlwaysFaults(BehavioralDevice):
    """A backend whose every run faults in compute at instruction 0 (ILLEGAL_OPCODE)."""

    name = "faulty"

    def run(self, insn_addr, insn_count):
        raise self.rtl_fault(f"faulty ({self.config.name})", ErrorCode.ILLEGAL_OPCODE,
                             Unit.COMPUTE, 0, insn_addr, insn_count)


@pytest.fixture
def backends(monkeypatch):
    for name, cls in (("rtllike", "RtlLike"), ("shifted", "Shifted"),
                      ("faulty", "AlwaysFaults"), ("model2", "BehavioralDevice")):
        monkeypatch.setitem(BACKENDS, name, f"{__name__}:{cls}")


WALL = r"wall \d+\.\d{3} s"


# ------------------------------------------------------- 1. compare with faults

def test_compare_fault_versus_completion(run_cli, tmp_path, capsys, backends):
    image, _ = program()
    path = tmp_path / "img.npz"
    image.save(path)
    code, out, err = run_cli("compare", path, "--config", "tiny",
                             "--backends", "behavioral,model2,faulty")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert re.fullmatch(rf"behavioral: cycles n/a, {WALL}", lines[0])
    insn0 = isa_for(TINY).decode(bytes_to_words(image.instructions(), 16)[0])
    assert re.fullmatch(rf"faulty: FAULT \({WALL}\): faulty \({TINY.name}\): compute module, "
                        rf"instruction 0: ILLEGAL_OPCODE \[{re.escape(str(insn0))}\]", lines[2])
    assert lines[3:] == [
        f"behavioral vs model2: equal ({len(image.dram)} bytes)",
        "behavioral vs faulty: DIFFER: faulty faults (compute module, instruction 0: "
        "ILLEGAL_OPCODE), behavioral completes",
    ]
    # The faulting backend as the reference.
    code, out, _ = run_cli("compare", path, "--config", "tiny",
                           "--backends", "faulty,behavioral")
    assert code == 1
    assert out.splitlines()[-1] == ("faulty vs behavioral: DIFFER: faulty faults (compute module, "
                                    "instruction 0: ILLEGAL_OPCODE), behavioral completes")


def test_compare_identical_faults_agree(run_cli, tmp_path, capsys, backends):
    image, _ = program(fault=True)
    path = tmp_path / "img.npz"
    image.save(path)
    with pytest.raises(DeviceFault, match=r"^load module, instruction 1: SRAM_OUT_OF_RANGE: "):
        BehavioralDevice(TINY).run_image(image)
    code, out, err = run_cli("compare", path, "--config", "tiny",
                             "--backends", "behavioral,rtllike")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert re.fullmatch(rf"behavioral: FAULT \({WALL}\): load module, instruction 1: "
                        r"SRAM_OUT_OF_RANGE: inp index 512 out of range .*", lines[0])
    assert re.fullmatch(rf"rtllike: FAULT \({WALL}\): rtllike \({TINY.name}\): load module, "
                        r"instruction 1: SRAM_OUT_OF_RANGE \[LOAD   INP .*\]", lines[1])
    assert lines[2:] == [
        "behavioral vs rtllike: same fault (load module, instruction 1: SRAM_OUT_OF_RANGE)",
        "all backends fault identically: load module, instruction 1: SRAM_OUT_OF_RANGE",
    ]


def test_compare_different_faults(run_cli, tmp_path, capsys, backends):
    image, _ = program(fault=True)
    path = tmp_path / "img.npz"
    image.save(path)
    code, out, _ = run_cli("compare", path, "--config", "tiny",
                          "--backends", "behavioral,rtllike,shifted,faulty")
    assert code == 1
    assert out.splitlines()[4:] == [
        "behavioral vs rtllike: same fault (load module, instruction 1: SRAM_OUT_OF_RANGE)",
        "behavioral vs shifted: DIFFER: different faults (instruction)",
        "  behavioral load module, instruction 1: SRAM_OUT_OF_RANGE",
        "  shifted    load module, instruction 2: SRAM_OUT_OF_RANGE",
        "behavioral vs faulty: DIFFER: different faults (module, instruction, code)",
        "  behavioral load module, instruction 1: SRAM_OUT_OF_RANGE",
        "  faulty     compute module, instruction 0: ILLEGAL_OPCODE",
    ]


def test_fault_compares_attributes_only():
    a = Fault.from_error(DeviceFault("pysim (x): deadlock: no progress for 10 cycles",
                                     ErrorCode.DEADLOCK))
    b = Fault.from_error(DeviceFault("deadlock: no module can proceed before FINISH: ...",
                                     ErrorCode.DEADLOCK))
    c = Fault.from_error(DeviceFault("pysim (x): deadlock: no progress for 10 cycles",
                                     ErrorCode.TIMEOUT))
    assert (a.module, a.index, a.code) == (None, None, "DEADLOCK")
    assert a.key == b.key != c.key
    assert a.summary() == "DEADLOCK"
    d = Fault.from_error(DeviceFault("verilator (x): module 7 module, instruction 12: code 9 "
                                     "[(index past the 3 instructions of the stream)]", 9, 7, 12))
    assert (d.module, d.index, d.code) == ("module 7", 12, "code 9")
    e = Fault.from_error(DeviceFault("m", ErrorCode.ILLEGAL_FIELD, Unit.STORE, 4))
    assert e.key == ("ILLEGAL_FIELD", "store", 4)


def test_compare_open_error_still_aborts(run_cli, tmp_path, capsys):
    image, _ = program()
    path = tmp_path / "img.npz"
    image.save(path)
    code, out, err = run_cli("compare", path, "--backends", "behavioral,nosuch")
    assert (code, out) == (2, "")
    assert err == ("vtakit compare: error: unknown backend 'nosuch'; backends are behavioral, "
                   "pysim, cxxrtl, verilator, board, netlist\n")


# -------------------------------------------------- 2. images record their config

def test_image_config_round_trip(tmp_path):
    image, _ = program()
    assert image.config is None
    assert image.save(tmp_path / "old.npz") == tmp_path / "old.npz"
    assert DramImage.load(tmp_path / "old.npz").config is None       # old images load
    image.config = TINY.to_dict()
    image.save(tmp_path / "new.npz")
    with np.load(tmp_path / "new.npz") as npz:
        assert json.loads(str(npz["config"])) == TINY.to_dict()
    back = DramImage.load(tmp_path / "new.npz")
    assert back.config == TINY.to_dict()
    np.testing.assert_array_equal(back.dram, image.dram)
    assert back.resolve_config() == TINY
    assert back.resolve_config("tiny") == TINY
    assert DramImage.load(tmp_path / "old.npz").resolve_config().name == "1x16_i8w8a32_15_15_18_17+overlap"
    with pytest.raises(ImageError, match=r"^the image was built for config 1x8_i8w8a32_12_12_14_14, "
                                         r"not 1x16_i8w8a32_15_15_18_17\+overlap; leave the config out"):
        back.resolve_config("default")
    np.savez(tmp_path / "bad.npz", dram=image.dram, insn_addr=np.int64(image.insn_addr),
             insn_count=np.int64(image.insn_count), config=np.array("[1, 2]"))
    with pytest.raises(ImageError, match=r"bad\.npz: 'config' must be a JSON object of VTA keys, "
                                         r"got list$"):
        DramImage.load(tmp_path / "bad.npz")


def test_commands_use_the_image_config(run_cli, tmp_path, capsys, backends):
    image, out = program()
    image.config = TINY.to_dict()
    path = tmp_path / "img.npz"
    image.save(path)
    # exec: no --config, the tiny program runs as tiny (default would decode other widths).
    code, stdout, err = run_cli("exec", path, "-o", tmp_path / "res.npz")
    assert (code, err) == (0, "")
    rec = RunRecord.load(tmp_path / "res.npz")
    np.testing.assert_array_equal(rec.dram[out:out + 16].view(np.int8), (DATA + 100).ravel())
    # disasm: the image's field widths, which differ from the default's.
    code, stdout, _ = run_cli("disasm", path)
    words = bytes_to_words(image.instructions(), 16)
    assert stdout.splitlines() == list(isa_for(TINY).disasm(words))
    assert stdout.splitlines() != list(isa_for(load_config("default")).disasm(words))
    # compare: no --config runs as tiny; the same config named explicitly is accepted.
    for extra in ([], ["--config", "tiny"]):
        code, stdout, err = run_cli("compare", path, "--backends", "behavioral,model2",
                                    *extra)
        assert (code, err) == (0, "")
        assert stdout.splitlines()[-1] == f"behavioral vs model2: equal ({len(image.dram)} bytes)"


@pytest.mark.parametrize("command", ["exec", "compare", "disasm"])
def test_config_mismatch_is_one_line(run_cli, tmp_path, capsys, command):
    image, _ = program()
    image.config = TINY.to_dict()
    path = tmp_path / "img.npz"
    image.save(path)
    extra = {"exec": ["-o", tmp_path / "r.npz"], "compare": ["--backends", "behavioral,pysim"],
             "disasm": []}[command]
    code, out, err = run_cli(command, path, "--config", "default", *extra)
    assert (code, out) == (2, "")
    assert err == (f"vtakit {command}: error: {path}: --config default: the image was built for "
                   "config 1x8_i8w8a32_12_12_14_14, not 1x16_i8w8a32_15_15_18_17+overlap; leave the "
                   "config out to use the image's\n")
    assert not (tmp_path / "r.npz").exists()


# ------------------------------------------------------ 3. the real output path

def test_exec_prints_the_path_it_wrote(run_cli, tmp_path, capsys):
    image, out = program()
    path = tmp_path / "img.npz"
    image.save(path)
    code, stdout, _ = run_cli("exec", path, "--config", "tiny", "-o", tmp_path / "res")
    assert code == 0
    assert stdout.endswith(f" -> {tmp_path / 'res.npz'}\n")
    assert not (tmp_path / "res").exists()
    rec = RunRecord.load(tmp_path / "res.npz")
    np.testing.assert_array_equal(rec.dram[out:out + 16].view(np.int8), (DATA + 100).ravel())
    assert image.save(tmp_path / "copy") == tmp_path / "copy.npz"
    assert DramImage.load(tmp_path / "copy.npz").insn_count == image.insn_count
    assert rec.save(str(tmp_path / "r2.npz")) == tmp_path / "r2.npz"


# ------------------------------------------------------- 4. unknown -O options

def test_exec_unknown_option_names_the_accepted_ones(run_cli, tmp_path, capsys):
    image, out = program()
    path = tmp_path / "img.npz"
    image.save(path)
    code, stdout, err = run_cli("exec", path, "--config", "tiny", "-o", tmp_path / "r",
                                "-O", "bogus=1")
    assert (code, stdout) == (2, "")
    assert err == ("vtakit exec: error: backend 'behavioral' has no option 'bogus'; its options "
                   "are token_depth, interleave_seed, cmd_depth\n")
    code, _, err = run_cli("exec", path, "--config", "tiny", "-o", tmp_path / "r",
                           "-O", "dram=1")
    assert code == 2 and "has no option 'dram'" in err
    code, _, err = run_cli("exec", path, "--config", "tiny", "-o", tmp_path / "r",
                           "-O", "cmd_depth=2")
    assert (code, err) == (0, "")
    rec = RunRecord.load(tmp_path / "r.npz")
    np.testing.assert_array_equal(rec.dram[out:out + 16].view(np.int8), (DATA + 100).ravel())


# ------------------------------------------------------ 5. multi-line messages

class BuildFails(BehavioralDevice):
    """A backend whose construction fails with a build error and the tool's output."""

    def __init__(self, config, **options):
        raise BuildError("cxxrtl: building the simulator failed (exit 1)\n"
                           "In file included from vta.cc:1:\n\n"
                           "vta.cc:12: error: expected ';'\n"
                           "1 error generated.\n\n")


class TwoLines(BehavioralDevice):
    def __init__(self, config, **options):
        raise BuildError("first line\n  second line\n")


def test_multi_line_error(run_cli, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(BACKENDS, "buildfails", f"{__name__}:BuildFails")
    monkeypatch.setitem(BACKENDS, "twolines", f"{__name__}:TwoLines")
    image, _ = program()
    path = tmp_path / "img.npz"
    image.save(path)
    code, out, err = run_cli("exec", path, "--backend", "buildfails", "-o", tmp_path / "r")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "vtakit exec: error: cxxrtl: building the simulator failed (exit 1)",
        "  ... 1 error generated.",
        "  (VTAKIT_DEBUG=1 for the full message)",
    ]
    code, _, err = run_cli("exec", path, "--backend", "twolines", "-o", tmp_path / "r")
    assert err.splitlines() == ["vtakit exec: error: first line", "  second line"]
    assert error_lines("x", RuntimeError()) == ["vtakit x: error: RuntimeError"]
    assert error_lines("x", ValueError("one")) == ["vtakit x: error: one"]
    monkeypatch.setenv("VTAKIT_DEBUG", "1")
    with pytest.raises(RuntimeError, match=r"(?s)^cxxrtl: building .*\n1 error generated\."):
        main(["exec", str(path), "--backend", "buildfails", "-o", str(tmp_path / "r")])
