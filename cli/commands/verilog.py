"""``vtakit verilog --config C -o OUT.v``: the VTA top level as deterministic Verilog
(written by :func:`vtakit.hw.verilog.generate_verilog`, the generator the simulators use).
"""

from __future__ import annotations

from pathlib import Path

from ...hw.spec import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH
from ...hw.verilog import TOP_NAME, generate_verilog
from ...runtime.image import write_atomic
from ..checks import output_file

__all__ = ["register", "run"]


def register(sub):
    p = sub.add_parser("verilog", help="write the VTA top level as Verilog")
    p.add_argument("--config", default="default", metavar="NAME|FILE",
                   help="hardware config: preset name or JSON file (default: default)")
    p.add_argument("-o", "--output", required=True, type=output_file, metavar="OUT.v",
                   help="Verilog file to write")
    p.add_argument("--token-depth", type=int, default=DEFAULT_TOKEN_DEPTH, metavar="N",
                   help=f"capacity of each dependency-token queue (default: {DEFAULT_TOKEN_DEPTH})")
    p.add_argument("--cmd-depth", type=int, default=DEFAULT_CMD_DEPTH, metavar="N",
                   help=f"depth of each command queue (default: {DEFAULT_CMD_DEPTH})")
    p.set_defaults(func=run)


def run(args):
    text = generate_verilog(args.config, token_depth=args.token_depth, cmd_depth=args.cmd_depth)
    out = Path(args.output)
    write_atomic(out, lambda f: f.write(text.encode()))   # never a half-written file
    print(f"wrote {out} ({len(text.splitlines())} lines, top module {TOP_NAME})")
