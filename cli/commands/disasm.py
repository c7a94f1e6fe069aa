"""``vtakit disasm FILE``: disassemble a raw instruction stream or a DRAM image."""

from pathlib import Path

from ..hw.config import load_config
from ..hw.isa import bytes_to_words, isa_for
from ..sim.image import DramImage


def register(sub):
    p = sub.add_parser("disasm", help="disassemble a raw instruction stream or a DRAM image (.npz)")
    p.add_argument("file", help="raw little-endian 16-byte instructions, or a DRAM image .npz")
    p.add_argument("--config", default="default", metavar="NAME|FILE",
                   help="config whose field widths to decode with (default: default)")
    p.set_defaults(func=run)


def run(args):
    path = Path(args.file)
    if path.suffix == ".npz":
        data = DramImage.load(path).instructions()
    else:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise OSError(f"{path}: {e.strerror}") from None
        if len(data) % 16:
            raise ValueError(f"{path}: {len(data)} bytes is not a whole number of "
                             "16-byte instructions")
    isa = isa_for(load_config(args.config))
    for line in isa.disasm(bytes_to_words(data, 16)):
        print(line)
