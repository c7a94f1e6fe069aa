"""``vtakit plot trace FILE -o timeline.png``: draw a trace written by ``vtakit run --trace``."""

from __future__ import annotations

from ..checks import output_file

__all__ = ["register", "run"]


def register(sub):
    p = sub.add_parser("plot", help="draw a picture (trace: a run's layer timeline)")
    p.add_argument("kind", choices=["trace"], help="what to draw")
    p.add_argument("file", help="trace JSON (vtakit run --trace FILE)")
    p.add_argument("-o", "--output", required=True, type=output_file, metavar="OUT.png",
                   help="the PNG to write")
    p.add_argument("--axis", choices=["auto", "cycles", "wall"], default="auto",
                   help="x axis: VTA cycles (measured, else predicted), wall time, or auto: "
                        "cycles when the trace has measured ones (default)")
    p.set_defaults(func=run)


def run(args):
    from ...tools.trace import plot_trace
    path = plot_trace(args.file, args.output, axis=args.axis)
    print(f"{args.file}: timeline -> {path}")
