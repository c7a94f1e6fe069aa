"""``vtakit board-sim`` and the board options of the other commands: bad arguments are one
line and exit 2 before anything is built or opened."""

import pytest

from vtakit.cli.main import main
from vtakit.runtime.device import DeviceError, route_options


@pytest.mark.parametrize("args, message", [
    (["--listen", "7777"], "--listen '7777': give HOST:PORT, e.g. 127.0.0.1:7777"),
    (["--dram-size", "100K"], "--dram-size 100K: the on-chip DRAM must be a power of two"),
    (["--dram-size", "lots"], "size 'lots' is not a number of bytes"),
])
def test_bad_board_sim_arguments(capsys, args, message):
    assert main(["board-sim", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_options_go_to_the_backends_that_take_them():
    routed = route_options(["behavioral", "board"], {"url": "socket://x:1", "timeout": 1.0})
    assert routed == {"behavioral": {}, "board": {"url": "socket://x:1", "timeout": 1.0}}
    with pytest.raises(DeviceError, match=r"^no backend of behavioral, board has an option "
                                          r"'nosuch'$"):
        route_options(["behavioral", "board"], {"nosuch": 1})


def test_a_missing_serial_port_is_one_line(capsys, tmp_path):
    import numpy as np
    from vtakit.runtime.image import DramImage
    path = tmp_path / "img.npz"
    DramImage(np.zeros(4096, np.uint8), 0, 1).save(path)
    assert main(["exec", str(path), "--config", "tiny", "--backend", "board",
                 "-O", "port=/dev/ttyNOSUCH9", "-o", str(tmp_path / "out.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vtakit exec: error: board: cannot open /dev/ttyNOSUCH9: ")
    assert "check that the board is plugged in" in err and err.count("\n") == 1
