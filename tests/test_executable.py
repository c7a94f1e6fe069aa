"""The .vtax file: determinism, round trips, and corruption always caught as one error line."""

import math
import struct

import numpy as np
import pytest
from vm_programs import closure_exe, factorial_exe, list_sum_exe

import vtakit
from vtakit.runtime import Executable, ExecutableError, PrimitiveEntry, Program
from vtakit.runtime.executable import FORMAT_VERSION, MAGIC, SECTIONS
from vtakit.runtime.vm import LoadConst, Ret, VMFunction


def rich_exe():
    """Every section populated: constants of several dtypes, a kernel table, closures."""
    exe = closure_exe()
    exe.constants = exe.constants + [np.arange(12, dtype=np.int8).reshape(3, 4),
                                     np.linspace(0, 1, 5, dtype=np.float32)]
    exe.kernels = [("conv0", kernel("conv0")), ("dense1", kernel("dense1"))]
    return exe


def kernel(name, config="default"):
    """A real kernel-table entry: a small conv plan's Program, as bytes."""
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.hw.config import load_config
    if name == "conv0":
        return plan_conv2d(load_config(config), (1, 16, 4, 4), (16, 16, 1, 1)).program().to_bytes()
    return Program(load_config(config), [], slots={"x": 64}, name=name).to_bytes()


@pytest.mark.parametrize("make", [factorial_exe, closure_exe, list_sum_exe, rich_exe])
def test_save_load_save_is_byte_identical(make, tmp_path):
    exe = make()
    data = exe.to_bytes()
    assert data == make().to_bytes()                         # deterministic
    path = exe.save(tmp_path / "m.vtax")
    back = vtakit.load(path)
    assert back.to_bytes() == data
    assert [f.code for f in back.functions] == [f.code for f in exe.functions]
    for a, b in zip(back.constants, exe.constants):
        assert a.dtype == b.dtype and np.array_equal(a, b) and not a.flags.writeable
    assert back.kernels == exe.kernels


def test_loaded_executable_runs():
    back = Executable.from_bytes(factorial_exe().to_bytes())
    assert int(back.run([np.array(6, np.int64)])) == math.factorial(6)


def _run_corrupt(data, original_result):
    """Loading ``data`` must raise one ExecutableError line; if it loads, it must be right."""
    try:
        exe = Executable.from_bytes(data, source="m.vtax")
    except ExecutableError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith("m.vtax: ")
        assert e.offset is not None and 0 <= e.offset <= len(data)
        return msg
    # CRC32 detects every single-bit error, so nothing may load
    result = exe.run([np.array(5, np.int64)])
    raise AssertionError(f"a corrupt file loaded (result {result}, expected {original_result})")


def test_every_bit_flip_at_random_offsets_is_one_error_line():
    data = rich_exe().to_bytes()
    rng = np.random.default_rng(1234)
    offsets = rng.integers(0, len(data), 300)
    sections = set()
    for off in offsets:
        bad = bytearray(data)
        bad[off] ^= 1 << int(rng.integers(0, 8))
        msg = _run_corrupt(bytes(bad), None)
        sections.add(msg.split(": ")[1].split(",")[0])
    # flips landed in (and were reported for) most sections
    assert {"section HEAD", "section CONS", "section CODE", "section KERN"} <= sections
    assert sections <= {"header"} | {f"section {s.strip(chr(0))}" for s in SECTIONS}


def test_truncation_at_random_offsets_is_one_error_line():
    data = factorial_exe().to_bytes()
    rng = np.random.default_rng(99)
    for n in list(rng.integers(0, len(data), 150)) + [0, 7, 11, len(data) - 1]:
        msg = _run_corrupt(data[:n], None)
        assert "truncated" in msg or "bad magic" in msg, msg


def test_error_messages_are_precise():
    data = factorial_exe().to_bytes()
    with pytest.raises(ExecutableError, match=r"^m.vtax: header, byte 0: not a vtakit executable "
                                              r"\(bad magic"):
        Executable.from_bytes(b"PK\x03\x04" + data[4:], source="m.vtax")
    bad = data[:8] + struct.pack("<I", FORMAT_VERSION + 1) + data[12:]
    with pytest.raises(ExecutableError, match=rf"^m.vtax: header, byte 8: format version "
                                              rf"{FORMAT_VERSION + 1} is not supported"):
        Executable.from_bytes(bad, source="m.vtax")
    head = data.index(b"HEAD")
    bad = bytearray(data)
    bad[head + 20] ^= 0x10
    with pytest.raises(ExecutableError, match=rf"^m.vtax: section HEAD, byte {head}: "
                                              r"checksum mismatch \(stored 0x[0-9a-f]{8}, "
                                              r"computed 0x[0-9a-f]{8}\): the file is corrupt$"):
        Executable.from_bytes(bytes(bad), source="m.vtax")
    with pytest.raises(ExecutableError, match=r"^m.vtax: section END, byte \d+: truncated"):
        Executable.from_bytes(data[:-3], source="m.vtax")
    with pytest.raises(ExecutableError, match=r"^m.vtax: end of file, byte \d+: 2 unexpected bytes after "
                                              r"the END section$"):
        Executable.from_bytes(data + b"\0\0", source="m.vtax")


def test_config_is_checked(tmp_path):
    path = factorial_exe().save(tmp_path / "m.vtax")
    assert vtakit.load(path, config="default").config.name == \
        vtakit.load(path).config.name
    with pytest.raises(ExecutableError, match=r"section HEAD, byte 24: built for config "
                                              r"1x16_i8w8a32_15_15_18_17\+overlap, not "
                                              r"1x8_i8w8a32_12_12_14_14$"):
        vtakit.load(path, config="tiny")


def test_valid_checksums_but_bad_code_is_caught_with_its_offset():
    """A file whose checksums are right but whose bytecode is wrong (hand-made or from a
    buggy writer) is rejected by the verifier, naming the CODE byte of the instruction."""
    exe = Executable("default", [VMFunction("main", [], 1, [LoadConst(0, 0), Ret(0)])],
                     [np.zeros(2)])
    exe.constants = []                     # bypass the constructor's check
    data = exe.to_bytes()
    code = data.index(b"CODE")
    with pytest.raises(ExecutableError, match=rf"^x: section CODE, byte {code + 12}: function "
                                              r"'main': instruction 0 \(LOAD_CONST\): const "
                                              r"constant 0 is out of range; there are 0 "
                                              r"constants$"):
        Executable.from_bytes(data, source="x")


def test_missing_file():
    with pytest.raises(ExecutableError, match=r"^nope.vtax: cannot read \(No such file"):
        vtakit.load("nope.vtax")


def test_disasm_lists_code_primitives_and_kernels():
    text = rich_exe().disasm()
    assert "def @main($0:x)" in text
    assert "$2 = alloc_closure lifted [$1 $0]" in text
    assert "$5 = invoke_closure $2($3)" in text
    assert "invoke_packed vmtest.add in($5 $6) out($8)" in text
    assert "vmtest.mul  kind=global in=2 out=1" in text
    assert "conv0: " in text and "slots: data (" in text and "; dram_base relative to" in text
    assert "int8[3, 4]" in text
    assert text.startswith(f"; vtax format {FORMAT_VERSION}, vtakit")


def test_magic_is_png_style():
    assert MAGIC[0] == 0x89 and MAGIC[-3:] == b"\r\n\x1a"
    assert factorial_exe().to_bytes().startswith(MAGIC)


def test_primitive_entry_round_trip():
    p = PrimitiveEntry("fused_conv", "host", 3, 1, '{"a":1}')
    assert PrimitiveEntry.from_json(p.to_json()) == p


def test_kernel_table_entries_must_be_programs_for_the_config():
    exe = closure_exe()
    exe.kernels = [("ok", kernel("ok")), ("tiny", kernel("tiny", "tiny"))]
    data = exe.to_bytes()
    with pytest.raises(ExecutableError, match=r"^m: section KERN, byte \d+: kernel 'tiny' is "
                                              r"built for config 1x8_i8w8a32_12_12_14_14, the "
                                              r"executable for 1x16_i8w8a32_15_15_18_17\+overlap$"):
        Executable.from_bytes(data, source="m")
    exe.kernels = [("junk", b"\x00" * 10)]
    with pytest.raises(ExecutableError, match=r"^m: section KERN, byte \d+: kernel 'junk': "
                                              r"Program.from_bytes: 10 bytes is too short"):
        Executable.from_bytes(exe.to_bytes(), source="m")
    back = Executable.from_bytes(rich_exe().to_bytes())
    assert back.program("conv0").slots.keys() >= {"data", "weight", "out"}
