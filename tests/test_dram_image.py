"""runtime.dram (page allocator, bounds) and runtime.image (.npz images and run records)."""

import json

import numpy as np
import pytest

from vtakit.sim import PAGE_BYTES, DRAM, DramError, DramImage, ImageError, RunRecord


# ------------------------------------------------------------------- DRAM

def test_alloc_is_page_aligned_and_starts_at_page_1():
    d = DRAM()
    a = d.alloc(1)
    b = d.alloc(PAGE_BYTES + 1)
    c = d.alloc(PAGE_BYTES)
    assert a == PAGE_BYTES                      # address 0 is never a buffer
    assert b == 2 * PAGE_BYTES                  # 1 byte took a whole page
    assert c == 4 * PAGE_BYTES                  # PAGE+1 bytes took two pages
    assert all(x % PAGE_BYTES == 0 for x in (a, b, c))
    assert d.size >= 5 * PAGE_BYTES


def test_alloc_reuses_freed_space_first_fit():
    d = DRAM()
    a, b, c = d.alloc(PAGE_BYTES), d.alloc(2 * PAGE_BYTES), d.alloc(PAGE_BYTES)
    d.write(b, np.full(2 * PAGE_BYTES, 7, np.uint8))
    d.free(b)
    assert d.alloc(PAGE_BYTES) == b                 # first hole that fits
    assert d.alloc(PAGE_BYTES) == b + PAGE_BYTES    # the rest of the hole
    assert d.alloc(PAGE_BYTES) == c + PAGE_BYTES    # hole full: after the last block
    assert not d.read(b, 2 * PAGE_BYTES).any()      # reused pages come back zeroed
    d.free(a)
    assert d.alloc(2 * PAGE_BYTES) > c              # a 1-page hole does not fit 2 pages
    assert d.alloc(10) == a


def test_alloc_grows_and_keeps_contents():
    d = DRAM()
    a = d.alloc(100)
    d.write(a, np.arange(100, dtype=np.uint8))
    big = d.alloc(1 << 20)
    assert d.size >= big + (1 << 20)
    np.testing.assert_array_equal(d.read(a, 100), np.arange(100, dtype=np.uint8))
    d.write(big + (1 << 20) - 4, b"\x01\x02\x03\x04")
    assert d.read(big + (1 << 20) - 4, 4).tobytes() == b"\x01\x02\x03\x04"


def test_alloc_errors():
    d = DRAM(limit=4 * PAGE_BYTES)
    with pytest.raises(DramError, match=r"^cannot allocate 0 bytes: size must be positive$"):
        d.alloc(0)
    d.alloc(2 * PAGE_BYTES)
    with pytest.raises(DramError, match=r"^out of DRAM: 8192 bytes requested, image limit is "
                                        r"16384 bytes$"):
        d.alloc(2 * PAGE_BYTES)
    assert d.alloc(PAGE_BYTES) == 3 * PAGE_BYTES    # exactly up to the limit
    with pytest.raises(DramError, match=r"^free of 0x1234: not the start of an allocated "
                                        r"buffer$"):
        d.free(0x1234)


def test_bounds_errors():
    d = DRAM()
    d.alloc(PAGE_BYTES)
    end = d.size
    with pytest.raises(DramError, match=rf"^DRAM read of 8 bytes at 0x{end - 4:x} is outside the "
                                        rf"image \[0, 0x{end:x}\)$"):
        d.read(end - 4, 8)
    with pytest.raises(DramError, match=r"^DRAM write of 2 bytes at 0x-1"):
        d.write(-1, b"ab")
    d.write(end - 2, b"ab")                         # the last bytes are fine
    assert d.read(end - 2, 2).tobytes() == b"ab"


def test_write_takes_raw_bytes_of_arrays():
    d = DRAM()
    a = d.alloc(16)
    d.write(a, np.array([0x01020304, -1], dtype="<i4"))
    assert d.read(a, 8).tobytes() == b"\x04\x03\x02\x01\xff\xff\xff\xff"
    d.write(a, np.arange(4, dtype=np.int8).reshape(2, 2).T)    # non-contiguous: logical order
    assert d.read(a, 4).tobytes() == bytes([0, 2, 1, 3])


def test_load_image_marks_everything_allocated():
    d = DRAM()
    d.load_image(np.arange(3 * PAGE_BYTES + 5, dtype=np.uint64).astype(np.uint8))
    assert d.size == 4 * PAGE_BYTES
    assert d.read(3 * PAGE_BYTES, 5).tobytes() == bytes(range(0, 5))
    assert d.alloc(1) == 4 * PAGE_BYTES             # past the loaded image
    with pytest.raises(DramError, match=r"^a DRAM image must be one-dimensional, got shape "
                                        r"\(2, 2\)$"):
        d.load_image(np.zeros((2, 2), np.uint8))
    with pytest.raises(DramError, match=r"^DRAM image of 20000 bytes exceeds the limit 8192$"):
        DRAM(limit=8192).load_image(np.zeros(20000, np.uint8))


# ------------------------------------------------------------- DramImage

def test_image_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    dram = rng.integers(0, 256, 3 * PAGE_BYTES, dtype=np.uint8)
    img = DramImage(dram, 0x1010, 5)
    path = tmp_path / "img.npz"
    img.save(path)
    back = DramImage.load(path)
    np.testing.assert_array_equal(back.dram, dram)
    assert (back.insn_addr, back.insn_count) == (0x1010, 5)
    assert back.instructions() == dram[0x1010:0x1010 + 80].tobytes()


def test_image_contract_errors():
    with pytest.raises(ImageError, match=r"^insn_addr 0x1008 is not 16-byte aligned$"):
        DramImage(np.zeros(PAGE_BYTES * 2, np.uint8), 0x1008, 1)
    with pytest.raises(ImageError, match=r"^3 instructions at 0xff0 run past the end of the "
                                         r"4096-byte image$"):
        DramImage(np.zeros(PAGE_BYTES, np.uint8), 0xff0, 3)


def _savez(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("arrays,pattern", [
    (dict(dram=np.zeros(16, np.uint8), insn_addr=np.int64(0)),
     r"missing array 'insn_count'; an image needs dram, insn_addr, insn_count$"),
    (dict(dram=np.zeros(16, np.int16), insn_addr=np.int64(0), insn_count=np.int64(0)),
     r"'dram' must be a 1-D uint8 array, got int16 \(16,\)$"),
    (dict(dram=np.zeros((4, 4), np.uint8), insn_addr=np.int64(0), insn_count=np.int64(0)),
     r"'dram' must be a 1-D uint8 array, got uint8 \(4, 4\)$"),
    (dict(dram=np.zeros(16, np.uint8), insn_addr=np.float64(0), insn_count=np.int64(0)),
     r"'insn_addr' must be an integer scalar, got float64 \(\)$"),
    (dict(dram=np.zeros(16, np.uint8), insn_addr=np.int64(0), insn_count=np.arange(2)),
     r"'insn_count' must be an integer scalar, got int64 \(2,\)$"),
    (dict(dram=np.zeros(16, np.uint8), insn_addr=np.int64(0), insn_count=np.int64(2)),
     r"2 instructions at 0x0 run past the end of the 16-byte image$"),
])
def test_image_malformed(tmp_path, arrays, pattern):
    path = _savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ImageError, match="^" + str(path).replace("\\", r"\\") + ": " + pattern):
        DramImage.load(path)


def test_image_unreadable(tmp_path):
    with pytest.raises(ImageError, match=r": no such file$"):
        DramImage.load(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"this is not a zip archive")
    with pytest.raises(ImageError, match=r"junk.npz: not a .npz archive"):
        DramImage.load(junk)


# -------------------------------------------------------------- RunRecord

def test_record_round_trip(tmp_path):
    dram = np.arange(256, dtype=np.uint8)
    stats = {"gemm_counter": 12, "alu_counter": 0, "nested": {"a": [1, 2]}}
    path = tmp_path / "res.npz"
    RunRecord(dram, 1234, stats).save(path)
    back = RunRecord.load(path)
    np.testing.assert_array_equal(back.dram, dram)
    assert back.cycles == 1234 and back.stats == stats
    RunRecord(dram).save(path)
    assert RunRecord.load(path).cycles == -1 and RunRecord.load(path).stats == {}
    with np.load(path) as npz:       # the stored form: JSON text, int64 cycles
        assert json.loads(str(npz["stats"])) == {} and npz["cycles"].dtype == np.int64


def test_record_malformed(tmp_path):
    path = _savez(tmp_path / "r.npz", dram=np.zeros(4, np.uint8), cycles=np.int64(1))
    with pytest.raises(ImageError, match=r"missing array 'stats'"):
        RunRecord.load(path)
    path = _savez(tmp_path / "r2.npz", dram=np.zeros(4, np.uint8), cycles=np.float32(1.5),
                  stats=np.array("{}"))
    with pytest.raises(ImageError, match=r"'cycles' must be an integer scalar, got float32"):
        RunRecord.load(path)
