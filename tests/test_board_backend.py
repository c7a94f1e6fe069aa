"""The board backend against the board design simulated as a board (``vtakit board-sim``:
the whole ULX3S top on Verilator, its UART pins driven from a TCP socket), through
pyserial's ``socket://`` exactly as a board: the golden fixtures of tiny, a compiled
model, the refusals, and faults injected by a TCP proxy. Slow: the first run builds the
simulated board (minutes); later runs load it from the cache."""

import random
import socket
import subprocess
import threading

import numpy as np
import pytest

from vtakit.boards.board_device import BoardDevice
from vtakit.boards.link import BridgeReg, Link, LinkError, Space
from vtakit.cli.main import main
from vtakit.testing.fixtures import load_fixtures

pytestmark = pytest.mark.slow


class BoardSim:
    """A running ``board-sim`` executable (a fresh board: DRAM zero, VTA reset)."""

    def __init__(self, size):
        from vtakit.cli.commands.board_sim import board_sim_build
        exe = board_sim_build("tiny", size, progress=False).path / "board_sim"
        self.proc = subprocess.Popen([str(exe), "127.0.0.1", "0"], stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        assert "listening on" in line, line
        self.port = int(line.rsplit(":", 1)[1])
        self.url = f"socket://127.0.0.1:{self.port}"

    def last_seq(self):
        import serial
        with serial.serial_for_url(self.url, timeout=1) as port:
            link = Link(port)
            return link.read_word(Space.BRIDGE, BridgeReg.LAST_SEQ)

    def close(self):
        self.proc.terminate()
        self.proc.wait()


@pytest.fixture(scope="module")
def board():
    sim = BoardSim(256 * 1024)
    yield sim
    sim.close()


@pytest.mark.parametrize("fx", load_fixtures("tiny"), ids=lambda f: f.name)
def test_fixture_through_exec_on_the_board(board, fx, tmp_path):
    image = tmp_path / "image.npz"
    fx.image.save(image)
    out = tmp_path / "out.npz"
    assert main(["exec", str(image), "--config", "tiny", "--backend", "board",
                 "-O", f"url={board.url}", "-O", "progress=False", "-o", str(out)]) == 0
    with np.load(out) as result:
        np.testing.assert_array_equal(result["dram"], fx.expected)


def _digits(config):
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend.onnx import from_onnx
    from vtakit.compiler.models import digits_cnn_path, load_digits_split
    from vtakit.compiler.quant.calibrate import calibrate
    x_train, _, x_test, _ = load_digits_split()
    exe = compile_model(calibrate(from_onnx(digits_cnn_path()), x_train[:64, None]), config)
    return exe, x_test[:2, None].reshape(2, 1, 1, 8, 8).astype(np.float32)


def test_digits_cnn_on_the_board_equals_behavioral(board, tmp_path):
    exe, xs = _digits("tiny")
    with BoardDevice("tiny", url=board.url, progress=False) as dev:
        for x in xs:
            got = exe.run_named([x], device=dev)
            want = exe.run_named([x], backend="behavioral")
            assert got.keys() == want.keys()
            for k in want:
                np.testing.assert_array_equal(got[k], want[k])
    path = exe.save(tmp_path / "digits.vtax")
    np.save(tmp_path / "x.npy", xs[0])
    assert main(["compare", str(path), "--input", str(tmp_path / "x.npy"),
                 "--backends", "behavioral,board", "-O", f"url={board.url}"]) == 0


def test_a_model_for_another_config_is_refused_before_any_write(board, tmp_path, capsys):
    exe, xs = _digits("default")
    path = exe.save(tmp_path / "digits_default.vtax")
    np.save(tmp_path / "x.npy", xs[0])
    before = board.last_seq()
    assert main(["run", str(path), "--input", str(tmp_path / "x.npy"), "--backend", "board",
                 "-O", f"url={board.url}", "-o", str(tmp_path / "out.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "runs config tiny" in err and "the program is for config default" in err
    assert board.last_seq() == before       # nothing was written


def test_a_model_too_big_is_refused_before_any_write(board, tmp_path, capsys):
    import vtakit
    from pathlib import Path
    data = Path(__file__).parent / "data" / "mltk" / "anomaly_detection.tflite"
    exe = vtakit.compile(data, config="tiny")      # about 280 KB of DRAM, the board has 256 KB
    path = exe.save(tmp_path / "ad.vtax")
    np.save(tmp_path / "x.npy", np.zeros((1, 5, 128, 1), np.float32))
    before = board.last_seq()
    assert main(["run", str(path), "--input", str(tmp_path / "x.npy"), "--backend", "board",
                 "-O", f"url={board.url}", "-o", str(tmp_path / "out.npz")]) == 2
    err = capsys.readouterr().err
    assert "the board has 262144 bytes" in err and "nothing" in err
    assert board.last_seq() == before


class FaultProxy:
    """A TCP proxy between the host and board-sim that, with probability ``p`` per chunk
    in either direction, drops, flips, duplicates a byte or holds the rest back for
    longer than the host's timeout."""

    def __init__(self, target_port, rng, p, hold=2.5):
        self.rng, self.p, self.hold = rng, p, hold
        self.faults = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.listener.getsockname()[1]}"
        self.target = target_port
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        client, _ = self.listener.accept()
        server = socket.create_connection(("127.0.0.1", self.target))
        for a, b, d in ((client, server, "out"), (server, client, "in")):
            threading.Thread(target=self._pump, args=(a, b, d), daemon=True).start()

    def _pump(self, src, dst, direction):
        import time
        try:
            while data := src.recv(65536):
                if self.rng.random() < self.p:
                    k = self.rng.randrange(len(data))
                    kind = self.rng.choice(["drop", "flip", "dup", "delay"])
                    self.faults.append(f"{direction} {kind}")
                    if kind == "drop":
                        data = data[:k] + data[k + 1:]
                    elif kind == "flip":
                        data = data[:k] + bytes([data[k] ^ 0x04]) + data[k + 1:]
                    elif kind == "dup":
                        data = data[:k + 1] + data[k:]
                    else:
                        dst.sendall(data[:k])
                        time.sleep(self.hold)
                        data = data[k:]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def test_faults_between_host_and_board_sim(board):
    fxs = {f.name: f for f in load_fixtures("tiny")}
    right = errors = faults = 0
    for i in range(8):
        fx = fxs[["alu_add_imm", "relu", "gemm_default", "alu_max_tensor"][i % 4]]
        proxy = FaultProxy(board.port, random.Random(i), p=0.03)
        try:
            with BoardDevice("tiny", url=proxy.url, progress=False) as dev:
                record = dev.run_image(fx.image)
        except LinkError as e:
            assert "\n" not in str(e)
            print(f"run {i}: {e} (faults: {proxy.faults})")
            errors += 1
        else:
            np.testing.assert_array_equal(record.dram, fx.expected)
            right += 1
        faults += len(proxy.faults)
    assert faults > 0 and right >= 6, (right, errors, faults)


def test_anomaly_detection_on_a_512k_board_sim(capsys):
    """The anomaly-detection model on board-sim with 512 KiB of DRAM: outputs identical to
    behavioral; the bytes on the wire (at most 1.2x the non-zero words written) and their
    time at 3 Mbaud are printed."""
    import vtakit
    from pathlib import Path
    exe = vtakit.compile(Path(__file__).parent / "data" / "mltk" / "anomaly_detection.tflite",
                         config="tiny")
    x = np.random.default_rng(0).normal(size=(1, 5, 128, 1)).astype(np.float32)
    sim = BoardSim(512 * 1024)
    try:
        with BoardDevice("tiny", url=sim.url) as dev:
            got = exe.run_named([x], device=dev)
            stats = dev.link.stats
    finally:
        sim.close()
    want = exe.run_named([x], backend="behavioral")
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    print(capsys.readouterr().err)
    assert stats.nonzero_written > 200_000
    assert stats.bytes_out <= 1.2 * stats.nonzero_written, (stats.bytes_out, stats.nonzero_written)
