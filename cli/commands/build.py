"""``vtakit build --board B --config C -o vta.bit``: a bitstream for a board (open tools).

Thin: the flow is :func:`vtakit.boards.build.build_bitstream`.
"""

from __future__ import annotations

from ..checks import output_file

__all__ = ["register", "run"]


def register(sub):
    from ...boards.build import BOARDS
    p = sub.add_parser("build", help="build a bitstream of the VTA for an FPGA board")
    p.add_argument("--board", required=True, choices=sorted(BOARDS))
    p.add_argument("--config", metavar="NAME|FILE",
                   help="hardware config (default: the board's, e.g. tiny for ulx3s)")
    p.add_argument("-o", "--output", default="vta.bit", type=output_file, metavar="OUT.bit")
    p.add_argument("--seed", type=int, default=1, help="nextpnr placer seed (default: 1)")
    p.add_argument("--workdir", metavar="DIR", help="keep the build files in DIR")
    p.add_argument("--dram-size", metavar="BYTES",
                   help="on-chip DRAM, a power of two (default: the board's, 128K on ulx3s)")
    p.set_defaults(func=run)


def run(args):
    from ...boards import format_table
    from ...boards.build import build_bitstream
    from ...sim.build_cache import parse_size
    report = build_bitstream(args.board, args.config, args.output, workdir=args.workdir,
                             seed=args.seed,
                             dram_size=parse_size(args.dram_size) if args.dram_size else None)
    print(format_table([report]))
    print(f"wrote {args.output}")
    return 0
