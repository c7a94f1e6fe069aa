"""Bad input on every command and public entry point: one line (what, where, what would
be right), exit code 2, no traceback, no half-written output. The messages are pinned."""

import json
import os

import numpy as np
import pytest

from vtakit.cli.main import main
from vtakit.sim import DRAM, DramImage, ImageError, open_device
from vtakit.runtime.device import DeviceError
from vtakit.runtime.dram import DramError
from vtakit.runtime.image import RunRecord, write_atomic

PRESET_NAMES = "default, pynq, ultra96, de10nano, 4x8, tiny"
#: the ``rt`` fixture's config (tests/conftest.py)
PRESETS = ["tiny"]


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A directory of good and bad inputs; the tests run inside it."""
    monkeypatch.chdir(tmp_path)
    dram = np.zeros(8192, np.uint8)
    dram[4096] = 3                                    # FINISH
    tiny = json.dumps({"TARGET": "sim", "HW_VER": "0.0.2", "LOG_INP_WIDTH": 3,
                       "LOG_WGT_WIDTH": 3, "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0, "LOG_BLOCK": 3,
                       "LOG_UOP_BUFF_SIZE": 12, "LOG_INP_BUFF_SIZE": 12,
                       "LOG_WGT_BUFF_SIZE": 14, "LOG_ACC_BUFF_SIZE": 14})
    np.savez("good.npz", dram=dram, insn_addr=np.int64(4096), insn_count=np.int64(1))
    np.savez("tinyimg.npz", dram=dram, insn_addr=np.int64(4096), insn_count=np.int64(1),
             config=np.array(tiny))
    open("trunc.npz", "wb").write(open("good.npz", "rb").read()[:200])
    open("garbage.npz", "wb").write(b"hello world")
    np.savez("dtype.npz", dram=dram.astype(np.int32), insn_addr=np.int64(4096),
             insn_count=np.int64(1))
    np.savez("shape.npz", dram=dram.reshape(2, -1), insn_addr=np.int64(4096),
             insn_count=np.int64(1))
    np.savez("range.npz", dram=dram, insn_addr=np.int64(4096), insn_count=np.int64(1000))
    np.savez("neg.npz", dram=dram, insn_addr=np.int64(-16), insn_count=np.int64(1))
    np.savez("float.npz", dram=dram, insn_addr=np.float64(4096), insn_count=np.int64(1))
    np.savez("missing.npz", dram=dram, insn_addr=np.int64(4096))
    np.savez("badcfg.npz", dram=dram, insn_addr=np.int64(4096), insn_count=np.int64(1),
             config=np.array(json.dumps({**json.loads(tiny), "LOG_INP_WIDTH": 99})))
    np.savez("pickled.npz", dram=np.array([None], dtype=object), insn_addr=np.int64(0),
             insn_count=np.int64(0))
    os.mkdir("adir.npz")
    json.dump({"TARGET": "sim", "LOG_INP_WIDTH": 3, "FOO": 1}, open("badkey.json", "w"))
    json.dump({"TARGET": "sim", "LOG_INP_WIDTH": "x"}, open("badval.json", "w"))
    open("notjson.json", "w").write("{")
    open("raw.bin", "wb").write(b"\0" * 17)
    return tmp_path


IMAGE_ERRORS = [   # (file, message after "vtakit CMD: error: ")
    ("nosuch.npz", "nosuch.npz: no such file"),
    ("adir.npz", "adir.npz: cannot read (Is a directory)"),
    ("trunc.npz", "trunc.npz: not a .npz archive (File is not a zip file)"),
    ("garbage.npz", "garbage.npz: not a .npz archive (no zip header; write it with numpy.savez "
                    "or DramImage.save)"),
    ("dtype.npz", "dtype.npz: 'dram' must be a 1-D uint8 array, got int32 (8192,)"),
    ("shape.npz", "shape.npz: 'dram' must be a 1-D uint8 array, got uint8 (2, 4096)"),
    ("range.npz", "range.npz: 1000 instructions at 0x1000 run past the end of the 8192-byte "
                  "image"),
    ("neg.npz", "neg.npz: insn_addr -16 and insn_count 1 must be >= 0"),
    ("float.npz", "float.npz: 'insn_addr' must be an integer scalar, got float64 ()"),
    ("missing.npz", "missing.npz: missing array 'insn_count'; an image needs dram, insn_addr, "
                    "insn_count"),
    ("pickled.npz", "pickled.npz: array 'dram' is unreadable (Object arrays cannot be loaded "
                    "when allow_pickle=False)"),
    ("badcfg.npz", "badcfg.npz: the config recorded in the image is illegal (config: "
                   "LOG_INP_WIDTH=99: vtakit supports 8-bit inputs only (LOG_INP_WIDTH=3)); "
                   "rebuild the image with a valid config"),
]

CONFIG_ERRORS = [
    ("nosuch", f"'nosuch' is neither a preset ({PRESET_NAMES}) nor a JSON file "
               "(NAME+EXT enables an ISA extension, e.g. tiny+requant)"),
    ("tiny+fma", "EXTENSIONS=['fma']: unknown extension 'fma'; known extensions are requant "
                 "(exact TFLite requantization: ALU SRDHM, RSHR and MULSHR), requant2 (exact "
                 "TFLite requantization in one micro-op per output vector: ALU REQ with "
                 "per-lane multiplier and parameter registers)"),
    ("tiny+requant+requant2", "EXTENSIONS=['requant', 'requant2']: requant and requant2 "
                              "cannot be enabled together: they are two designs of the same "
                              "requantize (requant: SRDHM/RSHR/MULSHR passes; requant2: REQ); "
                              "pick one"),
    ("badkey.json", "badkey.json: unknown key 'FOO'; valid keys are TARGET, HW_VER, "
                    "LOG_INP_WIDTH, LOG_WGT_WIDTH, LOG_ACC_WIDTH, LOG_BATCH, LOG_BLOCK, "
                    "LOG_UOP_BUFF_SIZE, LOG_INP_BUFF_SIZE, LOG_WGT_BUFF_SIZE, LOG_ACC_BUFF_SIZE "
                    "(and the optional EXTENSIONS, COMPUTE_OVERLAP and UOP_STREAM)"),
    ("badval.json", "badval.json: LOG_INP_WIDTH must be an integer, got 'x'"),
    ("notjson.json", "notjson.json: invalid JSON at line 1 column 2: Expecting property name "
                     "enclosed in double quotes"),
    ("adir.npz", "adir.npz: cannot read config file (Is a directory)"),
]


def fails(capsys, argv, message, command=None):
    """Run the CLI; it must exit 2 with exactly one stderr line ending in ``message``."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:      # argparse errors
        code = e.code
    out, err = capsys.readouterr()
    command = command or argv[0]
    assert code == 2, (out, err)
    assert "Traceback" not in err
    assert err == f"vtakit {command}: error: {message}\n"


@pytest.mark.parametrize("name, message", IMAGE_ERRORS)
@pytest.mark.parametrize("command", ["disasm", "exec", "compare"])
def test_bad_images(files, capsys, command, name, message):
    extra = {"disasm": [], "exec": ["-o", "out.npz"],
             "compare": ["--backends", "behavioral,pysim"]}[command]
    fails(capsys, [command, name, *extra], message)
    assert not os.path.exists("out.npz")


@pytest.mark.parametrize("spec, message", CONFIG_ERRORS)
@pytest.mark.parametrize("command", ["config", "disasm", "exec", "compare", "verilog", "fuzz"])
def test_bad_configs(files, capsys, command, spec, message):
    argv = {"config": ["config", "show", spec],
            "disasm": ["disasm", "good.npz", "--config", spec],
            "exec": ["exec", "good.npz", "--config", spec, "-o", "out.npz"],
            "compare": ["compare", "good.npz", "--config", spec, "--backends",
                        "behavioral,pysim"],
            "verilog": ["verilog", "--config", spec, "-o", "out.v"],
            "fuzz": ["fuzz", "--config", spec, "--backends", "behavioral,behavioral2",
                     "--count", "1"]}[command]
    if command == "fuzz":
        argv[4] = "behavioral,pysim"
    fails(capsys, argv, message)
    assert not os.path.exists("out.npz") and not os.path.exists("out.v")


def test_config_mismatch(files, capsys):
    for argv in (["exec", "tinyimg.npz", "--config", "default", "-o", "out.npz"],
                 ["disasm", "tinyimg.npz", "--config", "default"],
                 ["compare", "tinyimg.npz", "--config", "default", "--backends",
                  "behavioral,pysim"]):
        fails(capsys, argv, "tinyimg.npz: --config default: the image was built for config "
                            "1x8_i8w8a32_12_12_14_14, not 1x16_i8w8a32_15_15_18_17+overlap; leave the "
                            "config out to use the image's")


@pytest.mark.parametrize("argv, message", [
    (["exec", "good.npz", "--backend", "nosuch", "-o", "out.npz"],
     "unknown backend 'nosuch'; backends are behavioral, pysim, cxxrtl, verilator, board, netlist"),
    (["compare", "good.npz", "--backends", "behavioral,nosuch"],
     "unknown backend 'nosuch'; backends are behavioral, pysim, cxxrtl, verilator, board, netlist"),
    (["fuzz", "--backends", "behavioral,nosuch", "--count", "1"],
     "unknown backend 'nosuch'; backends are behavioral, pysim, cxxrtl, verilator, board, netlist"),
    (["compare", "good.npz", "--backends", "behavioral"],
     "--backends needs two or more backends, got 'behavioral'"),
    (["fuzz", "--backends", "behavioral,behavioral"],
     "--backends names a backend twice: 'behavioral,behavioral'"),
    (["exec", "good.npz", "-O", "foo=1", "-o", "out.npz"],
     "backend 'behavioral' has no option 'foo'; its options are token_depth, interleave_seed, "
     "cmd_depth"),
    (["fuzz", "--backends", "behavioral,cxxrtl", "-O", "cxxrtl:foo=1"],
     "backend 'cxxrtl' has no option 'foo'; its options are token_depth, cmd_depth, "
     "read_latency, vcd, max_cycles, stall_cycles, design, progress, inject, build"),
    (["fuzz", "--backends", "behavioral,cxxrtl", "-O", "pysim:vcd=x"],
     "-O pysim:vcd: 'pysim' is not one of --backends behavioral,cxxrtl"),
    (["exec", "good.npz", "-O", "token_depth=x", "-o", "out.npz"],
     "behavioral: token_depth='x'; it must be an integer"),
    (["exec", "good.npz", "--backend", "cxxrtl", "-O", "max_cycles=abc", "-o", "out.npz"],
     "cxxrtl: max_cycles='abc'; it must be an integer"),
    (["exec", "good.npz", "--backend", "cxxrtl", "-O", "inject=read:1", "-o", "out.npz"],
     "cxxrtl: inject='read:1'; the fault injection this backend knows is 'write:N' (flip a bit "
     "of DRAM write beat N, N >= 0)"),
    (["exec", "good.npz", "--token-depth", "0", "-o", "out.npz"],
     "token_depth must be at least 1, got 0"),
    (["exec", "good.npz", "-O", "x", "-o", "out.npz"],
     "argument -O: backend option 'x' is not KEY=VALUE"),
    (["verilog", "--token-depth", "0", "-o", "out.v"],
     "--token-depth 0: a token queue needs capacity >= 1"),
    (["verilog", "--cmd-depth", "abc", "-o", "out.v"],
     "argument --cmd-depth: invalid int value: 'abc'"),
    (["fuzz", "--count", "0"], "--count 0: need at least 1 program"),
    (["fuzz", "--token-depth", "0"], "--token-depth 0: a token queue needs capacity >= 1"),
    (["disasm", "raw.bin"], "raw.bin: 17 bytes is not a whole number of 16-byte instructions"),
    (["disasm", "nosuch.bin"], "nosuch.bin: No such file or directory"),
    (["config", "show"], "the following arguments are required: NAME|FILE"),
])
def test_bad_arguments(files, capsys, argv, message):
    command = argv[0] if argv[:2] != ["config", "show"] else "config show"
    fails(capsys, argv, message, command)
    assert not os.path.exists("out.npz") and not os.path.exists("out.v")


def test_unwritable_outputs(files, capsys):
    # Rejected by the argument check, before the image runs or the Verilog is generated.
    fails(capsys, ["exec", "tinyimg.npz", "-o", "nodir/out.npz"],
          "argument -o/--output: folder 'nodir' of 'nodir/out.npz' does not exist "
          "(create it first: mkdir -p nodir)")
    fails(capsys, ["verilog", "--config", "tiny", "-o", "nodir/out.v"],
          "argument -o/--output: folder 'nodir' of 'nodir/out.v' does not exist "
          "(create it first: mkdir -p nodir)")


def test_failed_write_leaves_no_file(files, monkeypatch):
    """An interrupted save leaves neither a half-written output nor a temporary file."""
    def boom(f, **arrays):
        f.write(b"PK\x03\x04 half")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(np, "savez_compressed", boom)
    with pytest.raises(OSError, match=r"^out\.npz: cannot write \(No space left on device\)$"):
        RunRecord(np.zeros(4, np.uint8)).save("out.npz")
    with pytest.raises(OSError):
        DramImage.load("good.npz").save("img")
    assert sorted(os.listdir(".")) == sorted(os.listdir(".")) and \
        not [f for f in os.listdir(".") if f.startswith((".out", ".img", "out", "img"))]


def test_atomic_replace_keeps_old_file_on_failure(files):
    write_atomic("keep.txt", lambda f: f.write(b"old"))
    with pytest.raises(RuntimeError):
        write_atomic("keep.txt", lambda f: (f.write(b"ne"), (_ for _ in ()).throw(
            RuntimeError("interrupted"))))
    assert open("keep.txt", "rb").read() == b"old"


# ---------------------------------------------------------------- library entry points

def test_open_device_and_image_api(files):
    with pytest.raises(DeviceError, match=r"^unknown backend 'x'; backends are behavioral, "
                                          r"pysim, cxxrtl, verilator, board, netlist$"):
        open_device("x", "tiny")
    with pytest.raises(DeviceError, match=r"^behavioral: cmd_depth=2\.5; it must be an "
                                          r"integer$"):
        open_device("behavioral", "tiny", cmd_depth=2.5)
    with pytest.raises(ImageError, match=r"^garbage\.npz: not a \.npz archive"):
        DramImage.load("garbage.npz")
    with pytest.raises(ImageError, match=r"^insn_addr 0x8 is not 16-byte aligned$"):
        DramImage(np.zeros(64, np.uint8), 8, 1)


def test_image_larger_than_dram(files):
    dev = open_device("behavioral", "tiny", dram=DRAM(limit=4096))
    image = DramImage.load("good.npz")
    with pytest.raises(DramError, match=r"^DRAM image of 8192 bytes exceeds the limit 4096$"):
        dev.run_image(image)


def test_instruction_range_outside_dram():
    dev = open_device("behavioral", "tiny")
    with pytest.raises(DeviceError, match=r"fetch module: DRAM_IMAGE: 4 instructions at "
                                          r"0x1000 end at 0x1040, outside the image "
                                          r"\[0, 0x1000\)$"):
        dev.run(0x1000, 4)


def i8(*shape):
    return np.zeros(shape, np.int8)


@pytest.mark.parametrize("call, message", [
    (lambda rt, ops: ops.dense(rt, i8(0, 16), i8(8, 16)),
     r"dense: x has a zero-size axis \(shape \(0, 16\)\); every axis needs at least one "
     r"element"),
    (lambda rt, ops: ops.dense(rt, np.zeros((4, 16), np.float32), i8(8, 16)),
     r"dense: x must hold integers \(int8\), got float32"),
    (lambda rt, ops: ops.dense(rt, i8(16), i8(8, 16)),
     r"dense: x must be a 2-D array, got shape \(16,\)"),
    (lambda rt, ops: ops.dense(rt, np.full((4, 16), 300), i8(8, 16)),
     r"dense: x values 300\.\.300 do not fit int8 \(-128\.\.127\)"),
    (lambda rt, ops: ops.conv2d(rt, i8(1, 0, 8, 8), i8(8, 0, 3, 3), 1, 1),
     r"conv2d: x has a zero-size axis \(shape \(1, 0, 8, 8\)\); every axis needs at least "
     r"one element"),
    (lambda rt, ops: ops.conv2d(rt, i8(1, 8, 8, 8), i8(8, 8, 3, 3), 0, 1),
     r"conv2d: stride 0 must be a positive integer \(or a pair of them\)"),
    (lambda rt, ops: ops.conv2d(rt, i8(1, 8, 8, 8), i8(8, 4, 3, 3), 1, 1),
     r"conv2d x\[1, 8, 8, 8\] w\[8, 4, 3, 3\] .*: input has 8 channels, the weight expects 4 "
     r"per group"),
    (lambda rt, ops: ops.add(rt, i8(1, 0, 4, 4), i8(1, 0, 4, 4)),
     r"add: a has a zero-size axis"),
    (lambda rt, ops: ops.add(rt, i8(1, 8, 4, 4), i8(1, 8, 4, 5)),
     r"add: operands \(1, 8, 4, 4\) and \(1, 8, 4, 5\) differ in shape"),
    (lambda rt, ops: ops.global_avg_pool2d(rt, i8(1, 8, 0, 0)),
     r"global_avg_pool2d: x has a zero-size axis"),
    (lambda rt, ops: ops.max_pool2d(rt, i8(1, 8, 4, 4), 0),
     r"max_pool2d: kernel 0 must be a positive integer \(or a pair of them\)"),
    (lambda rt, ops: ops.max_pool2d(rt, i8(1, 8, 4, 4), 9, 1, 0),
     r"window 9x9 with padding \(0, 0, 0, 0\) does not fit the 4x4 input"),
    (lambda rt, ops: ops.dense(rt, np.broadcast_to(np.int8(0), (1 << 20, 1 << 14)),
                               i8(8, 1 << 14)),
     r"dense: the operands hold 17180000256 bytes, more than the device's 1073741824-byte "
     r"DRAM; split the operation into smaller ones"),
])
def test_operator_bad_shapes(rt, call, message):
    from vtakit import compiler
    with pytest.raises((ValueError, RuntimeError), match=f"^{message}"):
        call(rt, compiler)


def test_runtime_bad_arguments(rt):
    from vtakit.runtime import Runtime
    with pytest.raises(Exception, match=r"^Runtime\(device=\.\.\.\): expected a vtakit\.sim "
                                        r"Device, got str$"):
        Runtime("tiny")
    with pytest.raises(Exception, match=r"^alloc\(0\): size must be positive$"):
        rt.alloc(0)
    with pytest.raises(Exception, match=r"^out of DRAM: 1099511627776 bytes requested"):
        rt.alloc(1 << 40)
