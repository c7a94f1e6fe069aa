"""The board link (vtakit.boards.link) against the Python model of the bridge: frames and
CRCs, the board backend's contract (fixtures equal to the behavioral model, identification
before any write, sizes checked), and a fault-injection run of hundreds of programs over
a link that drops, flips, duplicates and delays bytes at random points: every run either
completes with the behavioral model's DRAM or fails with one LinkError; none returns a
wrong result."""

import random
import re
import struct
import zlib

import numpy as np
import pytest

from vtakit.boards.board_device import BoardDevice, _runs, open_port
from vtakit.boards.link import (CRC_RESIDUE, SYNC, BridgeModel, Link, LinkError, Op, Space,
                                Status, _crc_register, crc32, frame)
from vtakit.hw.config import load_config
from vtakit.hw.spec import Reg
from vtakit.runtime.device import DeviceError, DeviceFault, open_device
from vtakit.testing.fixtures import _load, fixture_path


def behavioral_vta(config, keep=True):
    """A BridgeModel VTA: the behavioral model run in place on the model's DRAM. One
    device for every run, as on the board: its SRAMs keep what the last stream left
    (a warm start across a host step relies on it, :mod:`vtakit.runtime.chain`);
    ``keep=False``: a fresh one per run (SRAMs forgotten)."""
    devs = []

    def run(dram, insn_addr, insn_count):
        regs = [0] * 16
        if not devs or not keep:
            devs[:] = [open_device("behavioral", config)]
        dev = devs[0]
        dev.dram.load_image(dram.copy())
        try:
            result = dev.run(insn_addr, insn_count)
        except DeviceFault as f:
            regs[Reg.CTRL // 4] = 0b110
            regs[Reg.ERROR_CODE // 4] = int(f.code)
            regs[Reg.ERROR_MODULE // 4] = int(f.module or 0)
            regs[Reg.ERROR_INSN // 4] = int(f.index or 0)
            return regs
        dram[:] = dev.dram.data[:len(dram)]
        regs[Reg.CTRL // 4] = 0b010
        regs[Reg.GEMM_COUNT // 4] = result.stats.get("gemm_counter", 0)
        regs[Reg.ALU_COUNT // 4] = result.stats.get("alu_counter", 0)
        regs[Reg.LOAD_COUNT // 4] = result.stats.get("load_insn_count", 0)
        regs[Reg.STORE_COUNT // 4] = result.stats.get("store_insn_count", 0)
        return regs
    return run


class ModelSerial:
    """A pyserial-like port wired to a BridgeModel, injecting one fault per transfer with
    probability ``p`` (in either direction): a byte dropped, a bit flipped, a byte
    duplicated, or the rest of the transfer delayed past the reader's timeout (delivered
    one to three timeouts later: after the host's resynchronization, too). Like a serial
    line, it keeps the bytes in order: what follows a delayed byte waits behind it."""

    def __init__(self, model, rng=None, p=0.0):
        self.model, self.rng, self.p = model, rng, p
        self.inbox, self.late_in, self.late_out = bytearray(), bytearray(), bytearray()
        self.late_wait = 0
        self.timeout = 1.0
        self.faults = []

    def _mangle(self, data: bytes, direction: str, late: bytearray) -> bytes:
        if not data or self.rng is None or self.rng.random() >= self.p:
            return data
        k = self.rng.randrange(len(data))
        kind = self.rng.choice(["drop", "flip", "dup", "delay"])
        self.faults.append(f"{direction} {kind} at {k}")
        if kind == "drop":
            return data[:k] + data[k + 1:]
        if kind == "flip":
            return data[:k] + bytes([data[k] ^ (1 << self.rng.randrange(8))]) + data[k + 1:]
        if kind == "dup":
            return data[:k + 1] + data[k:]
        late += data[k:]
        self.late_wait = self.rng.randrange(1, 4)
        return data[:k]

    def write(self, data):
        if self.late_out:                 # queued behind the delayed bytes
            self.late_out += data
            return len(data)
        reply = self.model.feed(self._mangle(bytes(data), "out", self.late_out))
        self._receive(reply)
        return len(data)

    def _receive(self, reply):
        if self.late_in:
            self.late_in += reply
        else:
            self.inbox += self._mangle(reply, "in", self.late_in)

    def read(self, n):
        if len(self.inbox) < n:           # the reader waits its timeout: the line is quiet
            self.model.idle()
            out = bytes(self.inbox)
            self.inbox.clear()
            # what was delayed arrives after one to three timeouts
            self.late_wait -= 1
            if self.late_wait <= 0:
                self.inbox += self.late_in
                self.late_in.clear()
                if self.late_out:
                    late = bytes(self.late_out)
                    self.late_out.clear()
                    self._receive(self.model.feed(late))
            return out
        out = bytes(self.inbox[:n])
        del self.inbox[:n]
        return out

    def reset_input_buffer(self):
        self.inbox.clear()

    def close(self):
        pass


def _board(config="tiny", dram_size=64 * 1024, rng=None, p=0.0, **kwargs):
    cfg = load_config(config)
    model = BridgeModel(cfg, dram_size, behavioral_vta(cfg))
    return model, ModelSerial(model, rng, p)


def test_crc_and_frames():
    msg = b"vtakit board link"
    assert crc32(msg) == zlib.crc32(msg)
    assert _crc_register(msg + struct.pack("<I", crc32(msg))) == CRC_RESIDUE
    f = frame(Op.WRITE, Space.DRAM, 7, 0x100, 2, b"\x01\x02\x03\x04\x05\x06\x07\x08")
    assert f[0] == SYNC and len(f) == 13 + 8 + 4
    assert _crc_register(f[1:13]) == CRC_RESIDUE and _crc_register(f[13:]) == CRC_RESIDUE
    assert len(frame(Op.READ, Space.CSR, 1, 0, 16)) == 13


def test_runs_merge_close_words():
    diff = np.zeros(40, bool)
    diff[[1, 2, 5, 20, 21, 39]] = True
    assert _runs(diff, 6) == [(1, 6), (20, 22), (39, 40)]
    assert _runs(np.zeros(3, bool), 6) == []


def test_bulk_read_write_and_registers():
    model, port = _board()
    link = Link(port)
    info = link.identify()
    assert (info.config_name, info.dram_size) == ("tiny", 64 * 1024)
    data = bytes(range(256)) * 9          # 2304 bytes: three commands
    link.write(Space.DRAM, 0x400, data)
    assert bytes(model.dram[0x400:0x400 + len(data)]) == data
    assert link.read(Space.DRAM, 0x400, len(data) // 4) == data
    link.write_word(Space.CSR, Reg.INSN_COUNT // 4, 0x1234)
    assert link.read_word(Space.CSR, Reg.INSN_COUNT // 4) == 0x1234
    with pytest.raises(LinkError, match=r"refused a read of 2 word\(s\) at DRAM 0xfffc: "
                                        r"OUT_OF_RANGE"):
        link.read(Space.DRAM, 0xFFFC, 2)


def test_retried_start_is_not_executed_twice():
    model, port = _board()
    link = Link(port)
    link.identify()
    link.write_word(Space.CSR, 5, 1)
    executed = model.executed
    # The same frame again (a retry after a lost reply): acknowledged, not executed.
    c = frame(Op.WRITE, Space.CSR, model.last_seq, 20, 1, struct.pack("<I", 2))
    reply = model.feed(c)
    assert reply[1] == Status.OK and model.csr[5] == 1 and model.executed == executed + 1


@pytest.mark.parametrize("name", ["alu_add_imm", "gemm_tiled", "relu"])
def test_fixture_on_the_board_backend_equals_behavioral(name):
    fx = _load(fixture_path(name, "tiny"))
    model, port = _board(dram_size=256 * 1024)
    with BoardDevice("tiny", serial=port, progress=False) as dev:
        record = dev.run_image(fx.image)
        out = dev.link.stats
    np.testing.assert_array_equal(record.dram, fx.expected)
    # Only the non-zero words went out (plus headers): far fewer bytes than the image.
    assert out.bytes_out < 1.2 * np.count_nonzero(fx.image.dram.view("<u4")) * 4 + 2000


def test_another_config_is_refused_before_any_write():
    model, port = _board("tiny")
    with pytest.raises(DeviceError, match=r"^board at board runs config tiny .*the program is "
                                          r"for config default .*nothing was written"):
        BoardDevice("default", serial=port, progress=False)
    assert model.executed == 0 and not any(model.dram)


def test_an_image_too_big_is_refused_before_any_write():
    fx = _load(fixture_path("gemm_tiled", "tiny"))       # 204800 bytes
    model, port = _board(dram_size=128 * 1024)
    with BoardDevice("tiny", serial=port, progress=False) as dev:
        with pytest.raises(DeviceError, match=r"the image needs 204800 bytes of DRAM, the "
                                              r"board has 131072 bytes; nothing was written"):
            dev.run_image(fx.image)
        with pytest.raises(DeviceError, match=r"would end at 135168 bytes, the board has "
                                              r"131072 bytes"):
            dev.alloc(128 * 1024)
    assert model.executed == 0


def test_a_missing_port_is_one_line():
    with pytest.raises(LinkError, match=r"^board: cannot open /dev/ttyNOSUCH0: .*; check that "
                                        r"the board is plugged in") as e:
        open_port(port="/dev/ttyNOSUCH0")
    assert "\n" not in str(e.value)
    with pytest.raises(LinkError, match=r"^board: give the serial port"):
        open_port()


def test_fault_injection_never_gives_a_wrong_result():
    """Hundreds of runs, a fault in one transfer in 12 (or, every fourth run, one in 3):
    each run completes with the behavioral DRAM or raises one LinkError naming what went
    wrong."""
    fxs = [_load(fixture_path(n, "tiny")) for n in ("alu_add_imm", "relu", "gemm_default")]
    outcomes = {"right": 0, "error": 0}
    faults = 0
    for i in range(300):
        rng = random.Random(i)
        fx = fxs[i % len(fxs)]
        model, port = _board(rng=rng, p=0.33 if i % 4 == 3 else 0.08)
        try:
            with BoardDevice("tiny", serial=port, progress=False, timeout=0.0,
                             retries=3) as dev:
                record = dev.run_image(fx.image)
        except LinkError as e:
            assert "\n" not in str(e) and re.match(r"^board: no valid reply to a (read|write) "
                                                    r"of \d+ word\(s\) at \w+ 0x[0-9a-f]+ after 4 "
                                                    r"tries \(last: .+\); check the cable",
                                                    str(e)), e
            outcomes["error"] += 1
        else:
            assert np.array_equal(record.dram, fx.expected), (i, port.faults)
            outcomes["right"] += 1
        faults += len(port.faults)
    print(outcomes, faults)
    assert faults > 600          # the faults did happen
    assert outcomes["right"] > 200 and outcomes["error"] > 0, outcomes


def test_anomaly_detection_load_is_near_its_nonzero_payload(capsys):
    """The anomaly-detection model on the board backend (the bridge model, 512 KiB): outputs
    equal the behavioral model's, and the bytes sent are at most 1.2x the non-zero words
    written; the bytes and the time at 3 Mbaud are printed."""
    import vtakit
    from pathlib import Path
    exe = vtakit.compile(Path(__file__).parent / "data" / "mltk" / "anomaly_detection.tflite",
                         config="tiny")
    x = np.random.default_rng(0).normal(size=(1, 5, 128, 1)).astype(np.float32)
    model, port = _board(dram_size=512 * 1024)
    with BoardDevice("tiny", serial=port) as dev:
        got = exe.run_named([x], device=dev)
        stats = dev.link.stats
    want = exe.run_named([x], backend="behavioral")
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    line = capsys.readouterr().err
    print(line)
    assert "bytes out" in line and "s on the wire at 3,000,000 baud" in line
    assert stats.nonzero_written > 200_000       # the weights went over the link
    assert stats.bytes_out <= 1.2 * stats.nonzero_written, (stats.bytes_out, stats.nonzero_written)


def test_a_model_too_big_is_refused_before_any_write():
    import vtakit
    from pathlib import Path
    exe = vtakit.compile(Path(__file__).parent / "data" / "mltk" / "anomaly_detection.tflite",
                         config="tiny")
    model, port = _board(dram_size=256 * 1024)
    with BoardDevice("tiny", serial=port, progress=False) as dev:
        with pytest.raises(DeviceError, match=r"the model needs 286720 bytes of DRAM \(weights "
                                              r"270336, arena 4096, staging 8192, from address "
                                              r"4096\), the board has 262144 bytes; nothing was "
                                              r"written"):
            dev.check_model(exe)
    assert model.executed == 0


def test_a_device_that_forgets_its_srams_runs_every_layer_cold():
    """A warm start (the next layer's head loaded by the stream before) is used only on a
    device whose SRAMs keep what a stream left (``Device.keeps_sram``): a board whose
    VTA forgot them between runs gives the interpreter's result when it says so, and a
    wrong one if it claimed to keep them (so the check matters)."""
    import vtakit
    from pathlib import Path
    exe = vtakit.compile(Path(__file__).parent / "data" / "mltk" / "anomaly_detection.tflite",
                         config="tiny")
    x = np.random.default_rng(0).normal(size=(1, 5, 128, 1)).astype(np.float32)
    want = exe.run_named([x], backend="behavioral")
    right = {}
    for keeps in (False, True):
        cfg = load_config("tiny")
        port = ModelSerial(BridgeModel(cfg, 512 * 1024, behavioral_vta(cfg, keep=False)), None, 0.0)
        with BoardDevice("tiny", serial=port, progress=False) as dev:
            dev.keeps_sram = keeps
            got = exe.run_named([x], device=dev)
        right[keeps] = all(np.array_equal(got[k], want[k]) for k in want)
    assert right == {False: True, True: False}
