"""Chaining: consecutive device-resident layers run as one instruction stream.

A layer whose result stays on the device (stored straight into a
:class:`~.vm.objects.DeviceTensor`, no host step after it) need not synchronize:
the next VTA layer that the VM runs appends its kernel to the same stream, and only
a layer whose result goes to the host runs the whole chain, with one synchronize.
Each layer then no longer pays, serially, its head (the compute module waiting for
its first inputs and weights) after the previous layer's tail (its last stores):
the next layer's weights, micro-ops and bias rows load while the previous layer
still stores.

Every operator's kernel ends with :func:`~vtakit.compiler.ops.tokens.kernel_fence`
(store -> compute -> load: nothing after it starts before everything before it is
over). At a chain boundary it is split in two barriers, by rewriting the two
kernels (:func:`exit_variant` of layer *k*, :func:`entry_variant` of layer *k + 1*;
pure functions of one Program each, so a ``.vtax`` is unchanged):

* **SRAM free** (compute -> load): pushed right after layer *k*'s last GEMM (the
  last instruction that reads the inp/wgt SRAMs). Layer *k + 1*'s first weight
  LOADs pop it, so they overwrite no weight layer *k* still multiplies.
* **DRAM ready** (store -> compute -> load): layer *k*'s last STORE pushes s2g (as
  in the fence); a compute NOP of layer *k + 1* pops it and pushes g2l; layer
  *k + 1*'s first input LOAD pops that, so it reads what layer *k* stored.

Before the compute NOP, layer *k + 1*'s leading compute instructions that write
neither the OUT SRAM (which layer *k*'s stores still read) nor depend on a token
run early: LOAD UOP, LOAD ACC (bias and requantize rows) and resetting GEMMs (which
write the acc SRAM only). Each queue stays FIFO-consistent: both new tokens are
pushed after, and popped after, every token of layer *k*'s own protocol.

:class:`Chain` is the run-time state (the VM context's): whether a chain is open,
and the staged buffers its layers still need.
"""

from __future__ import annotations

from ..hw.isa import MemType, Opcode
from ..hw.spec import Unit, dispatch_unit
from .program import Program, make_insn

__all__ = ["Chain", "exit_variant", "entry_variant", "variant"]

_POP_S2G = "pop_next_dep"        # compute pops store's token
_PUSH_G2L = "push_prev_dep"      # compute pushes to load
_POP_G2L = "pop_next_dep"        # load pops compute's token
_PUSH_L2G = "push_next_dep"      # load pushes to compute
_FLAGS = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")


def _unit(insn) -> Unit:
    return dispatch_unit(insn.opcode, insn.fields.get("memory_type"))


def _flags(insn) -> set:
    return {f for f in _FLAGS if insn.fields[f]}


def _with(config, insn, **flags):
    fields = {k: v for k, v in insn.fields.items() if k != "opcode"}
    fields.update(flags)
    return make_insn(config, insn.opcode, fields)


def _compute_nop(config, **flags):
    fields = dict(memory_type=int(MemType.UOP), sram_base=0, dram_base=0, y_size=0, x_size=0,
                  x_stride=0, y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0)
    fields.update({f: 0 for f in _FLAGS})
    fields.update(flags)
    return make_insn(config, Opcode.LOAD, fields)


def _rebuild(program, order, replace=None):
    """A Program of ``program``'s instructions in ``order`` (old indices, or new Insns),
    relocations carried with their instructions."""
    relocs = {r.insn: r.slot for r in program.relocations}
    insns, new_relocs = [], []
    for item in order:
        if isinstance(item, int):
            if item in relocs:
                new_relocs.append((len(insns), relocs[item]))
            insns.append((replace or {}).get(item, program.insns[item]))
        else:
            insns.append(item)
    return insns, new_relocs


def _fence_end(program):
    """``(nop_pop, nop_push)`` indices when ``program`` ends with the kernel fence's
    compute NOPs (pop s2g, then push g2l) and the load's pending pop; else None."""
    ins = program.insns
    if len(ins) < 2 or program.pending_pops != ((int(Unit.LOAD), _POP_G2L),):
        return None
    a, b = ins[-2], ins[-1]
    if (a.is_nop and b.is_nop and _unit(a) == _unit(b) == Unit.COMPUTE
            and _flags(a) == {_POP_S2G} and _flags(b) == {_PUSH_G2L}):
        return len(ins) - 2, len(ins) - 1
    return None


def exit_variant(program: Program) -> Program | None:
    """``program`` as the layer before a chain boundary: its fence's compute NOP that
    waits for the last store is gone (the next layer's :func:`entry_variant` pops that
    token), and the g2l token (*SRAM free*) is pushed right after its last GEMM. None
    when ``program`` does not end with the kernel fence."""
    end = _fence_end(program)
    if end is None:
        return None
    pop_at, push_at = end
    ins, cfg = program.insns, program.config
    last_gemm = max((k for k, i in enumerate(ins[:pop_at]) if i.opcode == Opcode.GEMM
                     and not i.fields["reset_reg"]), default=None)
    order: list = []
    replace = {}
    for k in range(pop_at):
        order.append(k)
        if k == last_gemm:
            if ins[k].fields[_PUSH_G2L]:
                order.append(_compute_nop(cfg, **{_PUSH_G2L: 1}))
            else:
                replace[k] = _with(cfg, ins[k], **{_PUSH_G2L: 1})
    if last_gemm is None:
        order.append(push_at)
    insns, relocs = _rebuild(program, order, replace)
    return Program(cfg, insns, program.uops, dict(program.slots), relocs,
                   program.pending_pops, program.name)


def _early_compute(insn) -> bool:
    """A compute instruction that may run before the previous layer's stores are over:
    it writes neither the OUT SRAM nor waits for a token."""
    if _flags(insn):
        return False
    if insn.opcode == Opcode.LOAD:
        return not insn.is_nop and insn.memory_type in (MemType.UOP, MemType.ACC)
    return insn.opcode == Opcode.GEMM and bool(insn.fields["reset_reg"])


def entry_variant(program: Program) -> Program | None:
    """``program`` as the layer after a chain boundary (see the module docstring): its
    first group's weight LOADs first (they pop *SRAM free*, pending in the stream), its
    leading compute LOADs and resets, a compute NOP that pops the previous layer's last
    store token and pushes *DRAM ready*, then its first input LOADs, which pop it. None
    when the program's first group cannot be found (no load that pushes, or no input
    LOAD in it)."""
    ins, cfg = program.insns, program.config
    loads, first_push = [], None
    for k, i in enumerate(ins):
        if _unit(i) == Unit.LOAD:
            loads.append(k)
            if i.fields[_PUSH_L2G]:
                first_push = k
                break
    if first_push is None or any(_flags(ins[k]) - {_PUSH_L2G} for k in loads):
        return None
    wgt = [k for k in loads if ins[k].opcode == Opcode.LOAD and not ins[k].is_nop
           and ins[k].memory_type == MemType.WGT]
    inp = [k for k in loads if k not in wgt]
    if not inp:
        return None
    early = []
    for k, i in enumerate(ins):
        if _unit(i) != Unit.COMPUTE:
            continue
        if not _early_compute(i):
            break
        early.append(k)
    moved = set(loads) | set(early)
    replace = {k: _with(cfg, ins[k], **{_PUSH_L2G: 0}) for k in loads}
    replace[inp[0]] = _with(cfg, replace[inp[0]], **{_POP_G2L: 1})
    replace[inp[-1]] = _with(cfg, replace[inp[-1]], **{_PUSH_L2G: 1})
    order: list = [*wgt, *early, _compute_nop(cfg, **{_POP_S2G: 1, _PUSH_G2L: 1}), *inp]
    order += [k for k in range(len(ins)) if k not in moved]
    insns, relocs = _rebuild(program, order, replace)
    return Program(cfg, insns, program.uops, dict(program.slots), relocs,
                   program.pending_pops, program.name)


def variant(program: Program, entry: bool, exit: bool) -> Program | None:
    """``program`` rewritten for its place in a chain (None: it cannot take it)."""
    key = ("chain", bool(entry), bool(exit))
    if key not in program.memo:         # a pure function of the (immutable) program
        p = exit_variant(program) if exit else program
        program.memo[key] = entry_variant(p) if entry and p is not None else p
    return program.memo[key]


class Chain:
    """The chain state of one runtime: open (the stream ends with a layer's
    :func:`exit_variant`, not yet run) or not, and the staged buffers the open chain's
    layers still read (freed when it runs)."""

    def __init__(self):
        self.open = False
        self.scratch: list = []

    def close(self, rt):
        """End an open chain: pop its last store's token and run the stream; the
        device's RunResult (None when no chain was open)."""
        if not self.open:
            return None
        self.open = False
        try:
            rt.dep_pop(Unit.STORE, Unit.COMPUTE)
            return rt.synchronize()
        finally:
            self.release(rt)

    def release(self, rt) -> None:
        """Free the staged buffers of the chain."""
        scratch, self.scratch = self.scratch, []
        for buf in scratch:
            try:
                rt.free(buf)
            except Exception:       # the device is already closed
                pass

    def abort(self, rt) -> None:
        """Drop an open chain without running it (after an error)."""
        if self.open:
            self.open = False
            rt.reset()
        self.release(rt)
