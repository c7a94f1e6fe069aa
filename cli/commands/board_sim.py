"""``vtakit board-sim --config C --listen HOST:PORT``: the board design simulated as a board.

The whole ULX3S design (VTA, on-chip DRAM, UART host bridge) runs on Verilator, its
UART pins driven at the bit level from a TCP socket: the ``board`` backend talks to it
through pyserial (``-O url=socket://HOST:PORT``) exactly as to a board. It serves until
stopped (Ctrl-C). The UART runs at 4 clock cycles per bit in simulation; the bitstream
keeps the real baud.
"""

from __future__ import annotations

import os
import sys

from ..main import UsageError

__all__ = ["register", "run", "parse_listen", "board_sim_build"]


def register(sub):
    p = sub.add_parser("board-sim", help="simulate the board design (VTA, DRAM, UART bridge) "
                                         "and serve its serial link on a TCP socket")
    p.add_argument("--config", default="tiny", metavar="NAME|FILE",
                   help="hardware config (default: tiny, the ULX3S's)")
    p.add_argument("--listen", default="127.0.0.1:7777", metavar="HOST:PORT",
                   help="address to serve on (default 127.0.0.1:7777; port 0: any free port, "
                        "printed)")
    p.add_argument("--dram-size", default="128K", metavar="BYTES",
                   help="on-chip DRAM, a power of two (default 128K, the ULX3S build's; e.g. "
                        "1M for larger models)")
    p.set_defaults(func=run)


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UsageError(f"--listen {text!r}: give HOST:PORT, e.g. 127.0.0.1:7777")
    return host, int(port)


def dram_size(text) -> int:
    from ...sim.build_cache import parse_size
    size = parse_size(text)
    if size < 4096 or size & (size - 1):
        raise UsageError(f"--dram-size {text}: the on-chip DRAM must be a power of two of at "
                         "least 4K bytes (e.g. 128K, 256K, 1M)")
    return size


def board_sim_build(config, size: int, *, progress: bool = True):
    """The cached board-sim executable of ``config`` with ``size`` bytes of DRAM."""
    from ...boards.board_top import SIM_CYCLES_PER_BIT, board_sources, board_verilog
    from ...boards.link import config_label, protocol_constants
    from ...hw.config import load_config
    from ...sim.board_sim import get_board_sim
    cfg = load_config(config)
    return get_board_sim(
        f"{config_label(cfg)}-{size // 1024}k",
        lambda: board_verilog(cfg, dram_size=size, cycles_per_bit=SIM_CYCLES_PER_BIT),
        sources=board_sources(), params={"config": cfg.to_dict(), "dram_size": size,
                                          "protocol": protocol_constants()},
        cycles_per_bit=SIM_CYCLES_PER_BIT, progress=progress)


def run(args):
    host, port = parse_listen(args.listen)
    size = dram_size(args.dram_size)
    build = board_sim_build(args.config, size)
    print(f"board-sim: config {args.config}, {size:,} bytes of DRAM; connect with "
          f"--backend board -O url=socket://{host}:{port or 'PORT'}; Ctrl-C stops it",
          flush=True)
    exe = str(build.path / "board_sim")
    sys.stdout.flush()
    os.execv(exe, [exe, host, str(port)])
