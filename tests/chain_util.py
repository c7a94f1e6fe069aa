"""Helpers shared by the chain tests (test_chain_hoist, test_chain_uop_hoist)."""

from vtakit.hw.isa import Opcode
from vtakit.hw.spec import dispatch_unit


def unit(insn):
    """The module that runs ``insn``."""
    return dispatch_unit(insn.opcode, insn.fields.get("memory_type"))


def kernels(exe):
    """The kernel Program of every VTA layer of ``exe``, in order."""
    return [exe.program(p.meta_dict["kernel"]) for p in exe.primitives if p.kind == "vta_layer"]


def is_load(insn, memory_type) -> bool:
    """``insn`` is a LOAD that moves data into ``memory_type``."""
    return insn.opcode == Opcode.LOAD and not insn.is_nop and insn.memory_type == memory_type


def decoded(config, runs):
    """The instructions of recorded device ``runs`` (with their streams), decoded."""
    from vtakit.hw.isa import bytes_to_words, isa_for
    from vtakit.hw.spec import INSN_BYTES
    isa = isa_for(config)
    return [isa.decode(w) for r in runs for w in bytes_to_words(r.insns, INSN_BYTES)]
