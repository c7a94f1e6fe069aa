"""``vtakit disasm FILE``: disassemble a raw instruction stream or a DRAM image."""

from pathlib import Path

from ...hw.config import load_config
from ...hw.isa import bytes_to_words, isa_for
from ...hw.spec import INSN_BYTES
from ...runtime.image import DramImage
from ...runtime.executable import load as _load_vtax
from ..main import UsageError
from .exec import image_config

__all__ = ["register", "run"]


def register(sub):
    p = sub.add_parser("disasm", help="disassemble a compiled model (.vtax), a DRAM image "
                                      "(.npz) or a raw instruction stream")
    p.add_argument("file", help="a compiled model .vtax, a DRAM image .npz, or raw "
                                "little-endian 16-byte instructions")
    p.add_argument("--config", metavar="NAME|FILE",
                   help="config whose field widths to decode with (default: the config "
                        "recorded in the image, else default)")
    p.set_defaults(func=run)


def run(args):
    path = Path(args.file)
    if path.suffix == ".vtax":     # a compiled model: its bytecode, primitives and kernel table
        return print(_load_vtax(path, config=args.config).disasm())
    if path.suffix == ".npz":
        image = DramImage.load(path)
        config = image_config(args.config, image, path)
        data = image.instructions()
    else:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise OSError(f"{path}: {e.strerror}") from None
        if len(data) % INSN_BYTES:
            raise UsageError(f"{path}: {len(data)} bytes is not a whole number of "
                             "16-byte instructions")
        config = load_config(args.config or "default")
    isa = isa_for(config)
    for line in isa.disasm(bytes_to_words(data, INSN_BYTES)):
        print(line)
