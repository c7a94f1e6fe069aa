"""Memory planning and register allocation for VM functions, both by liveness.

Memory: every tensor a packed call writes is carved from storage. A tensor that
never escapes (its only uses, and those of its reshaped views, are packed-call
inputs, ``If`` tests and ``ReshapeTensor``) gets an
offset in the function's *arena*, one storage allocated on entry; tensors whose
live ranges (in instruction order) do not overlap share bytes. A tensor that
escapes (returned, stored in a tuple or closure, passed to a call, moved) gets a
fresh storage of its own, since it may outlive the frame.

Registers: virtual registers are coloured by interference over the control-flow
graph (dataflow liveness, so jumps and tail-call loops are handled), parameters
keeping registers 0..n-1.
"""

from __future__ import annotations

import math

import numpy as np

from ...runtime.vm.bytecode import _LAYOUT, AllocStorage, AllocTensor, Opcode

__all__ = ["plan_memory", "allocate_registers", "ALIGNMENT"]

#: Byte alignment of every planned tensor (and of storage).
ALIGNMENT = 64

_PACKED, _IF, _GOTO = Opcode.INVOKE_PACKED.value, Opcode.IF.value, Opcode.GOTO.value
_ALLOC_TENSOR = Opcode.ALLOC_TENSOR.value
_RESHAPE = Opcode.RESHAPE_TENSOR.value
_EXITS = (Opcode.RET.value, Opcode.FATAL.value, Opcode.TAIL_INVOKE.value,
          Opcode.TAIL_INVOKE_CLOSURE.value)


def _operands(ins):
    """(uses, defs) register lists of an instruction."""
    uses, defs = [], []
    for (name, kind), v in zip(_LAYOUT[Opcode(ins[0])], ins[1:]):
        if kind == "r":
            (defs if name == "dst" else uses).append(v)
        elif kind == "R":
            uses.extend(v)
    return uses, defs


def _host_nbytes(shape, dtype) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def plan_memory(code, arena_reg, new_reg, *, nbytes=_host_nbytes, alignment: int = ALIGNMENT,
                device: int = 0):
    """Give every ``AllocTensor`` on ``arena_reg`` an arena offset or a fresh storage.

    Parameters
    ----------
    code : list
        Instructions (``AllocTensor`` offsets are ignored and rewritten). Pseudo
        instructions with a negative opcode (labels) are kept as they are.
    arena_reg : int
    new_reg : callable
        Returns a fresh virtual register.
    nbytes : callable
        ``nbytes(shape, dtype)``: the bytes of a tensor in this arena (device tensors
        are packed).
    alignment : int
    device : int
        The device of fresh storages (``AllocStorage``'s device code).

    Returns
    -------
    (list, int, int)
        The new code, the arena size and the unplanned total (bytes: every tensor at
        its own aligned address, no reuse).
    """
    defs, uses = {}, {}
    # a ReshapeTensor's result is its source's memory: its uses are the source's
    source = {ins[3]: ins[1] for ins in code if ins[0] == _RESHAPE}

    def root(r):
        while r in source:
            r = source[r]
        return r
    for pc, ins in enumerate(code):
        if ins[0] < 0:
            continue
        if ins[0] == _ALLOC_TENSOR and ins[1] == arena_reg:
            defs[ins[5]] = pc
            continue
        u, _ = _operands(ins)
        reads = (set(ins[3]) if ins[0] == _PACKED else {ins[1], ins[2]} if ins[0] == _IF
                 else {ins[1]} if ins[0] == _RESHAPE else set())
        for r in u:     # a read by a packed call, an If test or a reshape does not let the
            uses.setdefault(root(r), []).append((pc, r in reads))   # tensor escape
    planned, naive = {}, 0
    items = []
    for reg, pc in defs.items():
        ins = code[pc]
        size = nbytes(ins[3], ins[4])
        naive += -(-size // alignment) * alignment      # each at an aligned address
        us = uses.get(reg, [])
        if all(ok for _, ok in us):
            end = max((p for p, _ in us), default=pc)
            items.append((size, pc, end, reg))
    # largest first, each at the lowest offset free during its live range
    placed = []
    size = 0
    for n, start, end, reg in sorted(items, key=lambda t: (-t[0], t[1])):
        conflicts = sorted((o, o + m) for o, m, s, e in placed if s <= end and start <= e)
        offset = 0
        for lo, hi in conflicts:
            if offset + n <= lo:
                break
            offset = max(offset, -(-hi // alignment) * alignment)
        placed.append((offset, n, start, end))
        planned[reg] = offset
        size = max(size, offset + n)
    out = []
    for ins in code:
        if ins[0] == _ALLOC_TENSOR and ins[1] == arena_reg:
            reg = ins[5]
            if reg in planned:
                out.append(AllocTensor(arena_reg, planned[reg], ins[3], ins[4], reg))
            else:
                storage = new_reg()
                out.append(AllocStorage(max(nbytes(ins[3], ins[4]), 1), alignment, storage,
                                        device))
                out.append(AllocTensor(storage, 0, ins[3], ins[4], reg))
        else:
            out.append(ins)
    return out, size, naive


def _successors(code):
    n = len(code)
    succ = []
    for pc, ins in enumerate(code):
        op = ins[0]
        if op == _IF:
            succ.append((pc + ins[3], pc + ins[4]))
        elif op == _GOTO:
            succ.append((pc + ins[1],))
        elif op in _EXITS:
            succ.append(())
        else:
            succ.append((pc + 1,) if pc + 1 < n else ())
    return succ


def allocate_registers(code, num_params: int):
    """Rename virtual registers to as few frame registers as liveness allows.

    Parameters
    ----------
    code : list
        Final instructions (jump offsets resolved) over virtual registers;
        registers ``0..num_params-1`` are the parameters.

    Returns
    -------
    (list, int)
        The renamed code and the number of registers.
    """
    info = [_operands(ins) for ins in code]
    use_bits = [sum(1 << r for r in set(u)) for u, _ in info]
    def_bits = [sum(1 << r for r in set(d)) for _, d in info]
    succ = _successors(code)
    live_in = [0] * len(code)
    live_out = [0] * len(code)
    changed = True
    while changed:
        changed = False
        for pc in range(len(code) - 1, -1, -1):
            out = 0
            for s in succ[pc]:
                out |= live_in[s]
            new_in = use_bits[pc] | (out & ~def_bits[pc])
            if out != live_out[pc] or new_in != live_in[pc]:
                live_out[pc], live_in[pc] = out, new_in
                changed = True
    adj: dict[int, int] = {}
    regs = set(range(num_params))
    for u, d in info:
        regs.update(u)
        regs.update(d)

    def link(a, bits):
        adj[a] = adj.get(a, 0) | bits

    entry = (live_in[0] if code else 0) | ((1 << num_params) - 1)
    for p in range(num_params):
        link(p, entry & ~(1 << p))
    for pc, (_, d) in enumerate(info):
        for r in d:
            link(r, live_out[pc] & ~(1 << r))
    for a, bits in list(adj.items()):    # make the relation symmetric
        b = bits
        while b:
            low = b & -b
            link(low.bit_length() - 1, 1 << a)
            b ^= low
    color = {p: p for p in range(num_params)}
    for r in sorted(regs):
        if r in color:
            continue
        taken = set()
        b = adj.get(r, 0)
        while b:
            low = b & -b
            c = color.get(low.bit_length() - 1)
            if c is not None:
                taken.add(c)
            b ^= low
        c = 0
        while c in taken:
            c += 1
        color[r] = c
    renamed = []
    for ins in code:
        layout = _LAYOUT[Opcode(ins[0])]
        new = [ins[0]]
        for (_, kind), v in zip(layout, ins[1:]):
            new.append(color[v] if kind == "r" else tuple(color[x] for x in v) if kind == "R"
                       else v)
        renamed.append(tuple(new))
    return renamed, max(color.values(), default=-1) + 1
