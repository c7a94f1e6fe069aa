"""Chaining: consecutive device-resident layers run as one instruction stream.

A layer whose result stays on the device (stored straight into a
:class:`~.vm.objects.DeviceTensor`, no host step after it) need not synchronize:
the next VTA layer that the VM runs appends its kernel to the same stream, and only
a layer whose result goes to the host runs the whole chain, with one synchronize.
Each layer then no longer pays, serially, its head (the compute module waiting for
its first inputs and weights) after the previous layer's tail (its last stores):
the next layer's weights, micro-ops and bias rows load while the previous layer
still computes and stores.

Every operator's kernel ends with :func:`~vtakit.compiler.ops.tokens.kernel_fence`
(store -> compute -> load: nothing after it starts before everything before it is
over). At a chain boundary between layers *A* and *B* the fence is replaced by three
tokens, by rewriting the two kernels (:func:`exit_variant` of *A*,
:func:`entry_variant` of *B*; functions of the two Programs and their buffers only,
so a ``.vtax`` is unchanged):

* **SRAM free** (compute -> load): pushed right after *A*'s last GEMM that reads an
  inp or wgt SRAM row *B*'s first group loads into (:func:`sram_free_point`, from the
  GEMMs' micro-ops), and after *A*'s own last g2l push. *B*'s first weight LOADs pop
  it, so they overwrite nothing *A* still multiplies.
* **stores done** (store -> compute), twice: a store NOP of *A* pushes s2g after *A*'s
  last store that pushes a token of its own protocol (*early*), *A*'s last STORE
  pushes the fence's (*last*). Two compute NOPs of *B* pop them; the one after which
  *B*'s first inputs may be read pushes **DRAM ready** (compute -> load), popped by
  *B*'s first input LOAD: the first (*early*) when those inputs read nothing *A*'s
  later stores write (:func:`late_stores`, :func:`first_inputs`), else the second.

Before the compute NOPs, *B*'s leading compute instructions that write neither the
OUT SRAM (which *A*'s stores still read) nor wait for a token run early: LOAD UOP,
LOAD ACC (bias and requantize rows) and resetting GEMMs (which write the acc SRAM
only). Every queue stays FIFO-consistent: each new token is pushed after, and popped
after, every token of *A*'s own protocol in its queue.

Two refinements (:func:`hoist_plan`, :func:`early_store`):

* *B*'s first weight LOADs (2 KB or more) may run in *A*'s load queue instead, in pieces
  after load groups of *A* where its load module waits for its compute module anyway, after
  the LOAD that pops the g2l token *A*'s compute module pushes after its last GEMM
  reading those rows (no token of their own: the queue's order protects them). *SRAM
  free* is then popped by a load NOP.
* When *B*'s first inputs read a store of *A* that is not its last, *stores done*
  (early) may follow that store instead of *A*'s last store of its own protocol, and
  then pushes *DRAM ready* before *B*'s leading compute instructions.

:class:`Chain` is the run-time state (the VM context's): the layer whose kernel waits
for its successor (a kernel is bound when the next one is known, or when the chain
closes), and the staged buffers the chain's layers still read.

**Warm start across a host step.** A layer whose result goes to the host ends the
stream, and the next layer's inputs are the host's output, so no chain crosses it. What
the next layer's stream would do first without its inputs still can: its first group's
weight LOADs (and, on the base ISA, within limits, its later weight LOADs that wait for no
token: :func:`_warm_weights`) and its leading LOAD UOP, LOAD ACC and resetting GEMMs
(:func:`warm_split`'s head) run at the end of the stream before, bound after its :func:`exit_variant` (*SRAM
free* after its last GEMM reading those rows) and followed by the kernel fence again, so
each stream is token-complete on its own. The next layer then runs its warm kernel,
without them, but only when the guard holds (:attr:`Chain.warm`: the last stream started
on the device was that one, nothing queued since, same weight buffers); otherwise its
cold kernel. Which layer comes next is the caller's guess (``prefetch`` of
:meth:`Chain.follow`; the VM reads it from its code); a wrong guess costs the head's
loads, never the result.
**Resident micro-ops.** Within one stream the compute module runs every bound kernel's
LOAD UOPs in order, so :class:`Chain` follows what the uop SRAM holds through the kernels
it binds (:func:`uop_rows`) and binds each one with its LOAD UOPs trimmed of the
micro-ops already at their rows (:func:`reuse_uops`; a layer shape that repeats loads its
kernel once). Only while nothing else was queued since its last kernel and the kernel
fits the stream (no synchronize in between); a new stream assumes nothing, but for a
warm start: under its guard the uop SRAM holds what the stream before left (its head's
micro-ops included), and the warm kernel is bound knowing it.

**Streamed micro-ops** (``UOP_STREAM`` configs only: a LOAD UOP without push flags streams
beside the GEMMs after it). At a chain boundary *B*'s leading LOAD UOPs run in *A*'s
compute queue, before its last GEMM groups (:data:`UOP_HOIST_GROUPS`), where *A* computes
and the read port has room, instead of at *B*'s start, where their beats compete with *B*'s
first input and weight loads. *B*'s kernel is moved in the uop SRAM (:func:`shift_uops`)
clear of every row *A* uses (:func:`uop_hoist`), the LOAD UOPs join *A*'s bound variant
with their micro-ops (:func:`with_uop_loads`) and *B*'s entry variant leaves them out. Not
when the uop SRAM already holds them after *A* (:func:`reuse_uops` drops them).
"""

from __future__ import annotations

import numpy as np

from ..hw.isa import MemType, Opcode, isa_for
from ..hw.spec import Unit, dispatch_unit
from .program import UOPS, Program, make_insn

#: Hoist the next layer's first weight LOADs into the previous layer's load queue at a
#: chain boundary (:func:`hoist_plan`). Verilator, default+requant2: keyword spotting
#: 35,322 -> 34,284 cycles (its four 64 x 64 pointwise layers' weights load during the
#: depthwise layer before them); anomaly detection, image classification and visual
#: wake words unchanged (35,112 / 58,462 / 142,784).
HOIST = True
#: :func:`hoist_plan` moves first weights of at least this many bytes. Visual wake words'
#: boundaries with 256 to 1,024 bytes ran 48 cycles slower hoisted; keyword spotting's
#: 768-byte depthwise weights 3 slower.
HOIST_MIN = 2048
#: :func:`hoist_plan` cuts the hoisted weights into pieces of at most this many bytes,
#: each after one load group (keyword spotting 34,278 cycles in one piece, 34,266 in
#: 1 KB pieces; 256 / 512 / 2,048 bytes: no better).
HOIST_CHUNK = 1024
#: A :func:`warm_split` head carries the weight LOADs after the first group that wait
#: for nothing but the kernel's start too (:func:`_warm_weights`). Verilator, default
#: (per layer): keyword spotting 39,218 -> 38,758 cycles (its 64 x 64 pointwise layers'
#: four weight blocks load while the depthwise layer before drains its stores: 3,765 ->
#: 3,656 each), image classification 64,875 -> 64,435, visual wake words 166,559 ->
#: 164,090. Carrying every weight LOAD that may move, also those after a token pop
#: (keyword spotting's depthwise layers' later channel blocks): 40,430.
WARM_WEIGHTS = True
#: ... up to this many weight bytes in all (the first group's included): the stream that
#: carries the head loads them after its last GEMM reading those rows, and a head longer
#: than its store drain makes it longer. Image classification 64,875 cycles without
#: :data:`WARM_WEIGHTS`; 2 KB: 64,659, 3 KB: 64,435, 4 KB: 64,448, 6 KB: 64,659, no
#: limit: 66,886 (its 18 KB head in a 2,334-cycle stream: +1,578 there, -27 saved);
#: visual wake words 3 KB: 164,090, 4 KB: 164,072; keyword spotting the same from 3 KB.
WARM_WEIGHTS_MAX = 3072
#: ... and only when those after the first group are at most this fraction of what the
#: stream that carries the head still stores after its last GEMM (:func:`drain_bytes`;
#: else the first group's only). Verilator: anomaly detection (default) 34,238 cycles
#: without :data:`WARM_WEIGHTS`, 34,278 with no such limit (1,280 bytes after a 48-byte
#: drain), 34,238 at 1.0; image classification (tiny) 222,929 / 222,951 at 1.0 / 222,893
#: at 0.7 (576 bytes after 768); visual wake words (default) 164,090 at 1.0, 164,018 at
#: 0.7; keyword spotting (default, 2,048 after 3,120) the same.
WARM_DRAIN = 0.7
#: (Base ISA only: with ``requant2``, whose layers requantize on chip and mostly chain,
#: image classification's one such head, 1,536 bytes after a 4,352-byte drain, ran
#: 58,409 -> 58,594 cycles; keyword spotting, visual wake words and anomaly detection
#: unchanged.)
#: ``early`` of :func:`entry_variant` when *stores done* (early) follows a later store
#: (:func:`early_store`): its NOP goes before the head (keyword spotting 34,284 ->
#: 34,266). Not for every early boundary: image classification ran 58,456 -> 58,541 so.
FIRST = 2
#: With ``UOP_STREAM`` only (a LOAD UOP without push flags streams beside the GEMMs after
#: it): at a chain boundary the next layer's leading LOAD UOPs run in the previous layer's
#: compute queue before its last :data:`UOP_HOIST_GROUPS` GEMM groups (a GEMM popping l2g
#: starts one), its kernel moved in the uop SRAM clear of every row the previous layer
#: uses (:func:`uop_hoist`). Verilator, default+requant2+uopstream (anomaly detection,
#: keyword spotting, image classification, visual wake words): 35,110 / 33,918 / 57,998 /
#: 142,024 cycles without it, 35,110 / 33,621 / 57,311 / 141,861 with it.
UOP_HOIST = True
#: From 16 micro-ops, before the last group: 35,110 / - / 57,726 / - (anomaly detection
#: 35,121 with no :data:`UOP_HOIST_MIN`); 2: image classification 57,811; 3: 35,110 /
#: 33,603 / 57,475 / 141,626; 4: 35,110 / 33,621 / 57,311 / 141,901; 5: 35,110 / 33,602 /
#: 57,994 / 142,033; 6: 35,110 / 33,613 / 57,316 / 142,062; 8: image classification
#: 57,886; the first group: 58,115. Dropped: of the last 2 to 8 groups, the latest whose
#: GEMMs and ALUs before the next push-flagged instruction (which waits for the stream's
#: end) run at least 1 to 4 times as many micro-op cycles as the LOAD UOP loads micro-ops
#: (else the one with the most): 35,110 / 33,560 / 57,455 / 141,400 (2 times, last 6),
#: image classification 57,455 to 57,465 whatever the two.
UOP_HOIST_GROUPS = 4
#: ... when they load at least this many micro-ops: anomaly detection's dense layers (4 to 8
#: micro-ops each) ran 35,110 -> 35,121 cycles hoisted; visual wake words (46 to 163 per
#: layer) 141,901 cycles from 16, 141,861 from 64, 141,948 from 128 (keyword spotting
#: 33,621 -> 33,666 there; image classification 57,311 from 16 to 128).
UOP_HOIST_MIN = 64
#: (Dropped: a :func:`warm_split` head's LOAD UOPs before the last 4 GEMM groups of the
#: stream that carries it, the next kernel moved as at a boundary: default+uopstream
#: keyword spotting 38,258 -> 38,990 cycles, image classification 63,733 -> 64,250, visual
#: wake words 162,880 -> 163,409, anomaly detection unchanged; default+requant2+uopstream
#: image classification 57,311 -> 57,471. Before the last group: 38,602 and 64,076.)

__all__ = ["Chain", "exit_variant", "entry_variant", "variant", "sram_free_point",
           "swap_slots", "late_stores", "all_stores", "first_inputs", "hoisted_reads",
           "overlap", "warm_split", "prefetch_reads", "uop_rows", "reuse_uops",
           "shift_uops", "uop_hoist", "with_uop_loads"]

_POP_S2G = "pop_next_dep"        # compute pops store's token
_PUSH_G2L = "push_prev_dep"      # compute pushes to load
_POP_G2L = "pop_next_dep"        # load pops compute's token
_PUSH_L2G = "push_next_dep"      # load pushes to compute
_FLAGS = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")
_NOP = dict(sram_base=0, dram_base=0, y_size=0, x_size=0, x_stride=0, y_pad_0=0, y_pad_1=0,
            x_pad_0=0, x_pad_1=0)


def _unit(insn) -> Unit:
    return dispatch_unit(insn.opcode, insn.fields.get("memory_type"))


def _flags(insn) -> set:
    return {f for f in _FLAGS if insn.fields[f]}


def _with(config, insn, **flags):
    fields = {k: v for k, v in insn.fields.items() if k != "opcode"}
    fields.update(flags)
    return make_insn(config, insn.opcode, fields)


def _nop(config, unit: Unit, **flags):
    """A sync-only instruction of ``unit`` carrying exactly ``flags``."""
    opcode = Opcode.STORE if unit == Unit.STORE else Opcode.LOAD
    mt = MemType.INP if unit == Unit.LOAD else MemType.UOP
    return make_insn(config, opcode, {"memory_type": int(mt), **_NOP,
                                      **{f: 0 for f in _FLAGS}, **flags})


def _rebuild(program, order, replace=None, slots=None, uops=None) -> Program:
    """``program`` with its instructions in ``order`` (old indices, new Insns, or
    ``(Insn, slot)`` for a new instruction relocated to ``slot``), relocations carried
    with their instructions; ``slots`` adds slots (name -> bytes); ``uops``: another
    staging."""
    relocs = {r.insn: r.slot for r in program.relocations}
    insns, new_relocs = [], []
    for item in order:
        if isinstance(item, int):
            if item in relocs:
                new_relocs.append((len(insns), relocs[item]))
            insns.append((replace or {}).get(item, program.insns[item]))
        elif isinstance(item, tuple):
            new_relocs.append((len(insns), item[1]))
            insns.append(item[0])
        else:
            insns.append(item)
    return Program(program.config, insns, program.uops if uops is None else uops,
                   {**program.slots, **(slots or {})}, new_relocs, program.pending_pops,
                   program.name)


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


def _last_gemm(program):
    return max((k for k, i in enumerate(program.insns) if i.opcode == Opcode.GEMM
                and not i.fields["reset_reg"]), default=None)


def exit_variant(program: Program, after: int | None = None, hoist=None,
                 stored: int | None = None) -> Program | None:
    """``program`` as the layer before a chain boundary: its fence's compute NOPs are
    gone (the next layer's :func:`entry_variant` pops the s2g tokens), *SRAM free* is
    pushed right after instruction ``after`` (default: its last GEMM) and *stores done*
    (early) by a store NOP after its last store that pushes a token of its own
    protocol, or after its store ``stored`` (a later one: :func:`early_store`).
    ``hoist``: the next program, whose first weight LOADs run in this one's
    load queue (:func:`hoist_plan`), their slots renamed (:func:`hoist_slots`). None
    when ``program`` does not end with the kernel fence."""
    end = _fence_end(program)
    if end is None:
        return None
    pop_at, push_at = end
    ins, cfg = program.insns, program.config
    if after is None:
        after = _last_gemm(program)
    order, replace = list(range(pop_at)), {}
    if after is None:
        order.append(push_at)
    elif ins[after].opcode == Opcode.GEMM and not ins[after].fields[_PUSH_G2L]:
        replace[after] = _with(cfg, ins[after], **{_PUSH_G2L: 1})
    else:
        order.insert(after + 1, _nop(cfg, Unit.COMPUTE, **{_PUSH_G2L: 1}))
    stores = [k for k in range(pop_at) if _unit(ins[k]) == Unit.STORE]
    own = [k for k in stores[:-1] if ins[k].fields["push_prev_dep"]]
    at = order.index(own[-1]) + 1 if own else order.index(stores[0]) if stores else len(order)
    if stored is not None:
        at = max(at, order.index(stored) + 1)
    order.insert(at, _nop(cfg, Unit.STORE, push_prev_dep=1))
    slots = None
    if hoist is not None:
        names = hoist_slots(program, hoist)
        slots = {n: hoist.slots[s] for s, n in names.items()}
        for k, got in reversed(hoist_plan(program, hoist)):
            at = order.index(k) + 1
            order[at:at] = [(i, names[slot]) for i, slot in got]
    return _rebuild(program, order, replace, slots)


def hoist_point(prev: Program, nxt: Program) -> int | None:
    """The earliest place in ``prev``'s load queue for ``nxt``'s first group's weight
    LOADs (so they load while ``prev`` still computes, instead of after *SRAM free*):
    the index of ``prev``'s load-module instruction after which they may go, the latest of

    * its first group's last LOAD (which, after a chain boundary, pops *DRAM ready*:
      every GEMM of the layers before has run);
    * its last LOAD writing one of those weight rows;
    * its LOAD popping the g2l token its compute module pushes at or after its last
      GEMM reading one of those rows (tokens of a queue pair up in order).

    None when ``nxt`` has no first group with weights or that token does not exist."""
    group, pgroup = _first_group(nxt), _first_group(prev)
    if group is None or not group[1] or pgroup is None:
        return None
    ins = prev.insns
    end = _fence_end(prev)
    stop = end[0] if end else len(ins)
    wdst = [_rows(nxt.insns[k]) for k in group[1]]
    loads = [k for k in range(stop) if _unit(ins[k]) == Unit.LOAD]
    point = pgroup[0][-1]
    for k in loads:
        i = ins[k]
        if (i.opcode == Opcode.LOAD and not i.is_nop and i.memory_type == MemType.WGT
                and overlap([_rows(i)], wdst)):
            point = max(point, k)
    reads = [k for k, _, w_rows in _gemm_reads(prev) if overlap([w_rows], wdst)]
    if reads:
        pushes = [k for k in range(reads[-1], stop)
                  if _unit(ins[k]) == Unit.COMPUTE and ins[k].fields[_PUSH_G2L]]
        before = sum(1 for k in range(reads[-1])
                     if _unit(ins[k]) == Unit.COMPUTE and ins[k].fields[_PUSH_G2L])
        pops = [k for k in loads if ins[k].fields[_POP_G2L]]
        if not pushes or before >= len(pops):
            return None
        point = max(point, pops[before])
    return point


def _units(insn) -> int:
    """How many pieces :func:`hoist_plan` may cut a weight LOAD into: its rows
    (``y_size`` > 1) or elements; 1 with padding."""
    f = insn.fields
    if f["y_pad_0"] or f["y_pad_1"] or f["x_pad_0"] or f["x_pad_1"]:
        return 1
    return f["y_size"] if f["y_size"] > 1 else f["x_size"]


def _piece(config, insn, at: int, n: int):
    """Pieces ``at .. at + n`` of the weight LOAD ``insn`` (:func:`_units`) as one LOAD."""
    f = insn.fields
    if _units(insn) == 1:
        return insn
    if f["y_size"] > 1:
        return _with(config, insn, sram_base=f["sram_base"] + at * f["x_size"],
                     dram_base=f["dram_base"] + at * f["x_stride"], y_size=n)
    return _with(config, insn, sram_base=f["sram_base"] + at, dram_base=f["dram_base"] + at,
                 x_size=n)


def hoist_plan(prev: Program, nxt: Program):
    """``[(index in prev, [(Insn, slot of nxt), ...])]``: ``nxt``'s first group's weight
    LOADs placed in ``prev``'s load queue (see :func:`hoist_point`), cut into at most as
    many pieces as :data:`HOIST_CHUNK` bytes each need, each after one of ``prev``'s
    last load groups (a LOAD that pushes l2g: the load module would wait there for the
    compute module to free a slot: the next load pops g2l); None when there is no such
    group at or after the earliest point, or those weights are fewer than
    :data:`HOIST_MIN` bytes."""
    point = hoist_point(prev, nxt)
    if point is None:
        return None
    ins, cfg = prev.insns, prev.config
    end = _fence_end(prev)
    stop = end[0] if end else len(ins)
    loads = [k for k in range(stop) if _unit(ins[k]) == Unit.LOAD]
    cands = [k for k, n in zip(loads, loads[1:]) if point <= k and ins[k].fields[_PUSH_L2G]
             and ins[n].fields[_POP_G2L]]
    if not cands:
        return None
    relocs = {r.insn: r.slot for r in nxt.relocations}
    wgt = [(_with(cfg, nxt.insns[k], **{_PUSH_L2G: 0}), relocs[k])
           for k in _first_group(nxt)[1]]
    units = [(j, u) for j, (i, _) in enumerate(wgt) for u in range(_units(i))]
    total = sum(_rows(i)[1] - _rows(i)[0] for i, _ in wgt) * cfg.wgt_elem_bytes
    if total < HOIST_MIN:
        return None
    n = max(1, min(len(cands), len(units), -(-total // HOIST_CHUNK)))
    out = []
    for c, k in enumerate(cands[len(cands) - n:]):
        run = units[c * len(units) // n:(c + 1) * len(units) // n]
        got = []
        for j in dict.fromkeys(j for j, _ in run):        # each LOAD's pieces of the run
            us = [u for jj, u in run if jj == j]
            i, slot = wgt[j]
            got.append((_piece(cfg, i, us[0], len(us)), slot))
        out.append((k, got))
    return out


def hoist_slots(prev: Program, nxt: Program) -> dict:
    """``{slot of nxt: its name in prev's exit variant}`` for the slots of ``nxt``'s first
    weight LOADs hoisted into ``prev`` (:func:`hoist_point`): names ``prev`` does not use."""
    relocs = {r.insn: r.slot for r in nxt.relocations}
    out = {}
    for k in _first_group(nxt)[1]:
        s = relocs[k]
        if s not in out:
            name, n = f"next_{s}", 0
            while name in prev.slots or name in out.values():
                n += 1
                name = f"next{n}_{s}"
            out[s] = name
    return out


def _gemm_reads(program: Program) -> list:
    """``[(insn index, (inp lo, hi), (wgt lo, hi))]``: the inp and wgt SRAM rows each
    (non-reset) GEMM of ``program`` reads, from its micro-ops (the uop SRAM followed
    through the program's LOAD UOPs); a GEMM whose micro-ops were not loaded by the
    program reads everything."""
    memo = program.memo.get("chain_reads")
    if memo is not None:
        return memo
    cfg = program.config
    isa = isa_for(cfg)
    staging = np.asarray(program.uops, dtype=np.int64)
    everything = ((0, cfg.inp_depth), (0, cfg.wgt_depth))
    out = []
    for k, idx in _uop_sources(program):
        f = program.insns[k].fields
        if (program.insns[k].opcode != Opcode.GEMM or f["reset_reg"]
                or f["uop_end"] <= f["uop_bgn"] or f["iter_out"] == 0 or f["iter_in"] == 0):
            continue
        if idx is None or int(idx.max()) >= len(staging):
            out.append((k, *everything))
            continue
        u = isa.decode_uops(staging[idx].astype(np.uint32))
        span = lambda i, fo, fi: (  # noqa: E731
            int(i.min()), int(i.max()) + (f["iter_out"] - 1) * f[fo]
            + (f["iter_in"] - 1) * f[fi] + 1)
        out.append((k, span(u["src_idx"], "src_factor_out", "src_factor_in"),
                    span(u["wgt_idx"], "wgt_factor_out", "wgt_factor_in")))
    program.memo["chain_reads"] = out
    return out


def _first_group(program: Program):
    """``(loads, weight loads, other loads)``: instruction indices of the first group's
    load-module instructions (up to its l2g push), or None when they pop a token, push
    none or load no input."""
    ins = program.insns
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
    return (loads, wgt, inp) if inp else None


def _rows(insn):
    """The SRAM rows ``[lo, hi)`` a LOAD writes (padding included)."""
    f = insn.fields
    n = (f["y_size"] + f["y_pad_0"] + f["y_pad_1"]) * (f["x_size"] + f["x_pad_0"] + f["x_pad_1"])
    return f["sram_base"], f["sram_base"] + n


def sram_free_point(prev: Program, nxt: Program, wgt: list | None = None) -> int | None:
    """Where ``prev`` (as the layer before a boundary) may push *SRAM free* for ``nxt``:
    the index of its last instruction that must come first, i.e. the later of its last
    GEMM reading an inp/wgt row ``nxt``'s first group loads into and its own last g2l
    push (the token must follow those in the FIFO). None: no GEMM reads them. ``wgt``:
    the indices of ``nxt``'s weight LOADs that come first instead of its first group's
    (a :func:`warm_split` head's, :func:`_warm_weights`)."""
    group = _first_group(nxt)
    if group is None:
        return _last_gemm(prev)
    _, first_wgt, inp = group
    wgt = first_wgt if wgt is None else wgt
    wdst = [_rows(nxt.insns[k]) for k in wgt]
    idst = [_rows(nxt.insns[k]) for k in inp if not nxt.insns[k].is_nop]
    reads = [k for k, i_rows, w_rows in _gemm_reads(prev)
             if overlap([i_rows], idst) or overlap([w_rows], wdst)]
    end = _fence_end(prev)
    own = [k for k, i in enumerate(prev.insns[:end[0] if end else None])
           if _unit(i) == Unit.COMPUTE and i.fields[_PUSH_G2L]]
    points = reads[-1:] + own[-1:]
    return max(points) if points else None


def _uop_sources(program: Program) -> list:
    """``[(insn index, staging indices)]`` of every GEMM and ALU: which words of the
    program's uop staging each one's micro-ops are (None: not loaded by the program)."""
    memo = program.memo.get("chain_sources")
    if memo is not None:
        return memo
    cfg = program.config
    at = np.full(cfg.uop_depth, -1, dtype=np.int64)
    relocs = {r.insn: r.slot for r in program.relocations}
    out = []
    for k, i in enumerate(program.insns):
        f = i.fields
        if i.opcode == Opcode.LOAD and not i.is_nop and f["memory_type"] == MemType.UOP:
            n = f["y_size"] * f["x_size"]
            if relocs.get(k) == UOPS and f["y_size"] == 1 and f["x_pad_0"] == f["x_pad_1"] == 0:
                at[f["sram_base"]:f["sram_base"] + n] = np.arange(f["dram_base"],
                                                                  f["dram_base"] + n)
            else:
                at[f["sram_base"]:f["sram_base"] + n] = -1
        elif i.opcode in (Opcode.GEMM, Opcode.ALU):
            idx = at[f["uop_bgn"]:f["uop_end"]]
            out.append((k, None if (idx < 0).any() else idx.copy()))
    program.memo["chain_sources"] = out
    return out


def swap_slots(program: Program) -> Program | None:
    """``program`` with its two halves of the inp and of the wgt SRAM exchanged (its LOADs'
    ``sram_base`` and its GEMMs' micro-ops), so its first group loads where the layer
    before it does not read last. None when something does not stay within one half
    (a LOAD, a GEMM's reads) or a GEMM shares micro-ops with an ALU or with a GEMM of
    the other half."""
    if "chain_swap" in program.memo:
        return program.memo["chain_swap"]
    program.memo["chain_swap"] = None
    cfg = program.config
    halves = {MemType.INP: cfg.inp_depth // 2, MemType.WGT: cfg.wgt_depth // 2}
    ins = list(program.insns)

    def side(lo, hi, half):
        return 0 if hi <= half else 1 if lo >= half else None

    for k, i in enumerate(ins):
        if i.opcode == Opcode.LOAD and not i.is_nop and i.memory_type in halves:
            lo, hi = _rows(i)
            h = halves[MemType(i.memory_type)]
            sd = side(lo, hi, h)
            if sd is None:
                return None
            ins[k] = _with(cfg, i, sram_base=i.sram_base + (h if sd == 0 else -h))
    reads = {k: (a, b) for k, a, b in _gemm_reads(program)}
    words = program.uops.astype(np.int64)
    shift = {}          # staging index -> (inp shift, wgt shift)
    alu = set()
    for k, idx in _uop_sources(program):
        if program.insns[k].opcode == Opcode.ALU:
            if idx is None:
                continue
            alu.update(int(j) for j in idx)
            continue
        if k not in reads:       # a reset GEMM: reads neither
            continue
        if idx is None:
            return None
        (ilo, ihi), (wlo, whi) = reads[k]
        si = side(ilo, ihi, halves[MemType.INP])
        sw = side(wlo, whi, halves[MemType.WGT])
        if si is None or sw is None:
            return None
        d = (halves[MemType.INP] * (1 - 2 * si), halves[MemType.WGT] * (1 - 2 * sw))
        for j in idx:
            if shift.setdefault(int(j), d) != d:
                return None
    if alu & set(shift):
        return None
    isa = isa_for(cfg)
    fields = isa.uop.by_name
    src, wgt = fields["src_idx"], fields["wgt_idx"]
    for j, (di, dw) in shift.items():
        w = int(words[j])
        s_ = ((w >> src.offset) & src.mask) + di
        g_ = ((w >> wgt.offset) & wgt.mask) + dw
        w &= ~((src.mask << src.offset) | (wgt.mask << wgt.offset))
        words[j] = w | (s_ << src.offset) | (g_ << wgt.offset)
    swapped = Program(cfg, ins, words.astype(np.uint32), dict(program.slots),
                      [(r.insn, r.slot) for r in program.relocations], program.pending_pops,
                      program.name)
    program.memo["chain_swap"] = swapped
    return swapped


def _early_compute(insn) -> bool:
    """A compute instruction that may run before the previous layer's stores are over:
    it writes neither the OUT SRAM nor waits for a token."""
    if _flags(insn):
        return False
    if insn.opcode == Opcode.LOAD:
        return not insn.is_nop and insn.memory_type in (MemType.UOP, MemType.ACC)
    return insn.opcode == Opcode.GEMM and bool(insn.fields["reset_reg"])


def _movable(program: Program):
    """``(loads, wgt, inp, head)``: the first group's loads (:func:`_first_group`) and
    ``head``, the indices of the compute instructions before the first that must wait in
    place (:func:`_early_compute`: LOAD UOP, LOAD ACC, resetting GEMMs); None when the
    first group cannot be found."""
    group = _first_group(program)
    if group is None:
        return None
    head = []
    for k, i in enumerate(program.insns):
        if _unit(i) != Unit.COMPUTE:
            continue
        if not _early_compute(i):
            break
        head.append(k)
    return (*group, head)


def entry_variant(program: Program, early: bool | int = False, hoisted: bool = False,
                  uops: bool = False) -> Program | None:
    """``program`` as the layer after a chain boundary (see the module docstring): its
    first group's weight LOADs first (they pop *SRAM free*, pending in the stream), its
    leading compute LOADs and resets, two compute NOPs that pop the previous layer's two
    *stores done* tokens, the first (``early``) or the second pushing *DRAM ready*,
    then its first input LOADs, which pop it. ``early`` is right only when those inputs
    read nothing the previous layer's last stores write (:func:`late_stores`,
    :func:`first_inputs`); ``early`` :data:`FIRST`: the first NOP goes before the leading
    compute LOADs and resets. ``hoisted``: the first weight LOADs ran in the previous
    layer's load queue (:func:`hoist_plan`) and are left out (*SRAM free* is then popped
    by a load NOP the stream adds). ``uops``: its leading LOAD UOPs ran in the previous
    layer's compute queue (:func:`uop_hoist`) and are left out. None when the program's
    first group cannot be found."""
    ins, cfg = program.insns, program.config
    parts = _movable(program)
    if parts is None:
        return None
    loads, wgt, inp, head = parts
    moved = set(loads) | set(head)
    if uops:
        head = [k for k in head if not _is_uop_load(ins[k])]
    replace = {k: _with(cfg, ins[k], **{_PUSH_L2G: 0}) for k in loads}
    replace[inp[0]] = _with(cfg, replace[inp[0]], **{_POP_G2L: 1})
    replace[inp[-1]] = _with(cfg, replace[inp[-1]], **{_PUSH_L2G: 1})
    ready = {_PUSH_G2L: 1}
    first = _nop(cfg, Unit.COMPUTE, **{_POP_S2G: 1}, **(ready if early else {}))
    second = _nop(cfg, Unit.COMPUTE, **{_POP_S2G: 1}, **({} if early else ready))
    if early == FIRST:
        order: list = [*([] if hoisted else wgt), first, *head, second, *inp]
    else:
        order = [*([] if hoisted else wgt), *head, first, second, *inp]
    order += [k for k in range(len(ins)) if k not in moved]
    return _rebuild(program, order, replace)


def _warm_weights(program: Program, loads: list) -> list:
    """Indices of the weight LOADs after ``program``'s first group (its ``loads``) that a
    :func:`warm_split` head carries too (:data:`WARM_WEIGHTS`): those of the load queue's
    leading run that pops no token (they wait only for the kernel's start, e.g. a
    resident-weights plan's every weight block), up to the first that writes a wgt row a
    GEMM before it reads."""
    if not WARM_WEIGHTS:
        return []
    ins = program.insns
    reads = _gemm_reads(program)
    out = []
    room = WARM_WEIGHTS_MAX - sum(_rows(ins[k])[1] - _rows(ins[k])[0]
                                  for k in loads if ins[k].memory_type == MemType.WGT
                                  and not ins[k].is_nop) * program.config.wgt_elem_bytes
    for k in range(loads[-1] + 1, len(ins)):
        i = ins[k]
        if _unit(i) != Unit.LOAD:
            continue
        if _flags(i) - {_PUSH_L2G}:
            break
        if i.opcode != Opcode.LOAD or i.is_nop or i.memory_type != MemType.WGT:
            continue
        if any(g < k and overlap([w], [_rows(i)]) for g, _, w in reads):
            break
        room -= (_rows(i)[1] - _rows(i)[0]) * program.config.wgt_elem_bytes
        if room < 0:
            break
        out.append(k)
    return out


def warm_split(program: Program, later: bool = True):
    """``(head, warm)``: ``program`` split for a warm start across a host step (see
    :class:`Chain`), or None when it has nothing to move.

    ``head`` runs at the end of the previous layer's stream, bound after that layer's
    :func:`exit_variant`: the first group's weight LOADs (the first pops *SRAM free*,
    pending in the stream), the leading compute LOADs and resets (LOAD UOP, LOAD ACC,
    resetting GEMMs: they write neither the OUT SRAM nor wait for a token), then the
    kernel fence again (two compute NOPs popping the *stores done* tokens, the second
    pushing g2l, and the load's pending pop). ``warm`` is ``program`` without them (its
    first input LOADs push the first group's token): it is right only as the first
    program of the stream that runs right after ``head``'s, the SRAM rows ``head`` wrote
    untouched. ``head``'s slots are the ones its LOADs read. ``later``: the head carries
    the weight LOADs after the first group that may move too (:func:`_warm_weights`)."""
    key = "chain_warm" if later else "chain_warm_first"
    if key in program.memo:
        return program.memo[key]
    program.memo[key] = None
    ins, cfg = program.insns, program.config
    parts = _movable(program)
    if parts is None:
        return None
    loads, wgt, inp, head = parts
    if not wgt and not head:
        return None
    relocs = {r.insn: r.slot for r in program.relocations}
    later = _warm_weights(program, loads) if later else []
    moved = [*wgt, *later, *head]
    pre = ([_with(cfg, ins[k], **{_PUSH_L2G: 0}) for k in [*wgt, *later]]
           + [ins[k] for k in head])
    pre += [_nop(cfg, Unit.COMPUTE, **{_POP_S2G: 1}),
            _nop(cfg, Unit.COMPUTE, **{_POP_S2G: 1, _PUSH_G2L: 1})]
    hrelocs = [(n, relocs[k]) for n, k in enumerate(moved) if k in relocs]
    slots = {s: program.slots[s] for _, s in hrelocs if s != UOPS}
    head_p = Program(cfg, pre, program.uops, slots, hrelocs, ((int(Unit.LOAD), _POP_G2L),),
                     f"{program.name} (warm head)")
    head_p.memo["warm_wgt"] = [*wgt, *later]
    replace = {k: _with(cfg, ins[k], **{_PUSH_L2G: 0}) for k in loads}
    replace[inp[-1]] = _with(cfg, replace[inp[-1]], **{_PUSH_L2G: 1})
    gone = set(moved) - set(later)
    kept = [k for k in range(len(ins)) if k not in gone]
    # a later weight LOAD leaves a load NOP with its token (its l2g push) in its place
    warm = _rebuild(program, [_nop(cfg, Unit.LOAD, **{f: 1 for f in _flags(ins[k])})
                              if k in later else k for k in kept], replace)
    warm.memo["warm_of"] = program
    # its GEMMs read what they read in ``program`` (whose LOAD UOPs staged their micro-ops)
    pos = {k: n for n, k in enumerate(kept)}
    warm.memo["chain_reads"] = [(pos[k], a, b) for k, a, b in _gemm_reads(program) if k in pos]
    warm.memo["chain_sources"] = [(pos[k], idx) for k, idx in _uop_sources(program)
                                  if k in pos]
    head_p.memo["warm_later"] = sum(_rows(ins[k])[1] - _rows(ins[k])[0]
                                    for k in later) * cfg.wgt_elem_bytes
    program.memo[key] = (head_p, warm)
    return program.memo[key]


def drain_bytes(program: Program) -> int:
    """Bytes ``program``'s STOREs after its last GEMM write: what its stream still does
    after its compute is over, while a :func:`warm_split` head's loads run."""
    last = _last_gemm(program)
    ins = program.insns[last + 1:] if last is not None else program.insns
    return sum(_extent(i, program.config.out_elem_bytes)[1] for i in ins
               if _unit(i) == Unit.STORE and not i.is_nop)


def prefetch_reads(head: Program, bufs: dict) -> list:
    """DRAM byte ranges ``[start, end)`` the LOADs of a :func:`warm_split` head read,
    bound to ``bufs`` (its LOAD UOPs read the stream's staging: not included)."""
    relocs = {r.insn: r.slot for r in head.relocations}
    return _reads(head, [k for k, s in relocs.items() if s != UOPS], bufs)


def variant(program: Program, entry: bool = False, exit: bool = False, after=None,
            early: bool | int = False, hoisted: bool = False, hoist=None,
            stored: int | None = None, uops: bool = False) -> Program | None:
    """``program`` rewritten for its place in a chain: after a boundary (``entry``,
    ``early``, ``hoisted``, ``uops``: :func:`entry_variant`) and before one (``exit``,
    ``after``, ``hoist``, ``stored``: :func:`exit_variant`); None when it cannot take that
    place."""
    hoisted = bool(entry and hoisted)
    uops = bool(entry and uops)
    hoist = hoist if exit else None
    stored = stored if exit else None
    key = ("chain", bool(entry), bool(exit), after if exit else None, int(entry and early),
           hoisted, None if hoist is None else id(hoist), stored) + (("uops",) if uops else ())
    got = program.memo.get(key)
    if got is None or got[0] is not hoist:      # a function of the (immutable) programs
        p = exit_variant(program, after, hoist, stored) if exit else program
        if entry and p is not None:
            kw = {**({"hoisted": True} if hoisted else {}), **({"uops": True} if uops else {})}
            p = entry_variant(p, early, **kw)
        got = program.memo[key] = (hoist, p)
    return got[1]


def _extent(insn, elem_bytes):
    """``(first byte, bytes)`` a 2-D LOAD/STORE spans in its slot (padding reads none)."""
    f = insn.fields
    return (f["dram_base"] * elem_bytes,
            ((f["y_size"] - 1) * f["x_stride"] + f["x_size"]) * elem_bytes)


def _ranges(program, ks, elem_bytes, bufs) -> list:
    relocs = {r.insn: r.slot for r in program.relocations}
    out = []
    for k in ks:
        off, n = _extent(program.insns[k], elem_bytes)
        base = bufs[relocs[k]].addr
        out.append((base + off, base + off + n))
    return out


def late_stores(program: Program, bufs: dict) -> list:
    """DRAM byte ranges ``[start, end)`` of an :func:`exit_variant`'s stores after its
    early *stores done* push, bound to ``bufs``."""
    ins = program.insns
    stores = [k for k, i in enumerate(ins) if _unit(i) == Unit.STORE]
    nop = max(k for k in stores if ins[k].is_nop and ins[k].fields["push_prev_dep"])
    return _ranges(program, [k for k in stores if k > nop and not ins[k].is_nop],
                   program.config.out_elem_bytes, bufs)


def early_store(program: Program, bufs: dict, reads: list) -> int | None:
    """The store of ``program`` (as the layer before a boundary, bound to ``bufs``) after
    which its *stores done* (early) may be pushed so that no later store writes the DRAM
    byte ranges ``reads`` (the next layer's :func:`first_inputs`): its last store that
    writes one of them, when a later store follows it and it is not before its last
    store that pushes a token of its own protocol (:func:`exit_variant`); else None."""
    ins = program.insns
    end = _fence_end(program)
    stores = [k for k in range(end[0] if end else len(ins))
              if _unit(ins[k]) == Unit.STORE and not ins[k].is_nop]
    if not stores:
        return None
    hits = [k for k, r in zip(stores, _ranges(program, stores, program.config.out_elem_bytes,
                                              bufs)) if overlap([r], reads)]
    own = [k for k in stores[:-1] if ins[k].fields["push_prev_dep"]]
    if not hits or hits[-1] >= stores[-1] or (own and hits[-1] < own[-1]):
        return None
    return hits[-1]


def all_stores(program: Program, bufs: dict) -> list:
    """DRAM byte ranges ``[start, end)`` of every store of ``program``, bound to ``bufs``."""
    ins = program.insns
    return _ranges(program, [k for k, i in enumerate(ins) if _unit(i) == Unit.STORE
                             and not i.is_nop], program.config.out_elem_bytes, bufs)


def _elem_bytes(config, insn) -> int:
    return {MemType.INP: config.inp_elem_bytes, MemType.WGT: config.wgt_elem_bytes,
            MemType.ACC: config.acc_elem_bytes}[MemType(insn.memory_type)]


def _reads(program, ks, bufs) -> list:
    relocs = {r.insn: r.slot for r in program.relocations}
    out = []
    for k in ks:
        i = program.insns[k]
        off, n = _extent(i, _elem_bytes(program.config, i))
        base = bufs[relocs[k]].addr
        out.append((base + off, base + off + n))
    return out


def hoisted_reads(program: Program, bufs: dict) -> list:
    """DRAM byte ranges an :func:`entry_variant` of ``program`` reads before the previous
    layer's stores are over (its first weight LOADs, its leading LOAD ACCs), bound to
    ``bufs``; None when it has no first group it can move."""
    group = _first_group(program)
    if group is None:
        return None
    ks = list(group[1])
    for k, i in enumerate(program.insns):
        if _unit(i) != Unit.COMPUTE:
            continue
        if not _early_compute(i):
            break
        if i.opcode == Opcode.LOAD and i.memory_type == MemType.ACC:
            ks.append(k)
    return _reads(program, ks, bufs)


def first_inputs(program: Program, bufs: dict) -> list | None:
    """DRAM byte ranges ``[start, end)`` that the load module of an
    :func:`entry_variant` of ``program`` may read once *DRAM ready* is popped, before it
    pops another token (the next layer's own protocol then orders it after the previous
    layer's last store): its first group's loads and those up to its first load that
    pops, bound to ``bufs``. None when it has no first group an :func:`entry_variant`
    can move."""
    if _first_group(program) is None:
        return None
    ks = []
    for k, i in enumerate(program.insns):
        if _unit(i) != Unit.LOAD:
            continue
        if i.fields[_POP_G2L] or i.fields["pop_prev_dep"]:
            break
        if not i.is_nop:
            ks.append(k)
    return _reads(program, ks, bufs)


def overlap(a: list, b: list) -> bool:
    """Whether any range ``[lo, hi)`` of ``a`` meets one of ``b``."""
    return any(s0 < e1 and s1 < e0 for s0, e0 in a for s1, e1 in b)


def _queued(rt) -> int:
    """Instructions in ``rt``'s pending stream."""
    return len(rt._stream)


def uop_rows(program: Program, rows) -> np.ndarray:
    """The uop SRAM words (-1: unknown) after ``program`` ran from ``rows``: its LOAD
    UOPs of its own staging (one row, no padding) write their words, any other unknown."""
    rows = np.array(rows, dtype=np.int64)
    relocs = {r.insn: r.slot for r in program.relocations}
    words = np.asarray(program.uops, dtype=np.int64)
    for k, i in enumerate(program.insns):
        f = i.fields
        if i.opcode != Opcode.LOAD or i.is_nop or f["memory_type"] != MemType.UOP:
            continue
        n, b, d = f["y_size"] * f["x_size"], f["sram_base"], f["dram_base"]
        if (relocs.get(k) == UOPS and f["y_size"] == 1 and f["x_pad_0"] == f["x_pad_1"] == 0
                and d + n <= len(words)):
            rows[b:b + n] = words[d:d + n]
        else:
            rows[b:b + n] = -1
    return rows


def reuse_uops(program: Program, rows) -> Program:
    """``program`` with its LOAD UOPs (of its own staging, one row, no padding) trimmed
    of the leading and trailing micro-ops that the uop SRAM already holds at their rows
    (``rows``: its words when ``program`` starts, -1 unknown; rows an earlier LOAD UOP
    of ``program`` writes count as what it writes); one with nothing left and no token
    flag is dropped. The uop SRAM ends as with ``program``."""
    rows = np.array(rows, dtype=np.int64)
    relocs = {r.insn: r.slot for r in program.relocations}
    words = np.asarray(program.uops, dtype=np.int64)
    cfg = program.config
    replace, drop = {}, set()
    for k, i in enumerate(program.insns):
        f = i.fields
        if i.opcode != Opcode.LOAD or i.is_nop or f["memory_type"] != MemType.UOP:
            continue
        n, b, d = f["y_size"] * f["x_size"], f["sram_base"], f["dram_base"]
        if not (relocs.get(k) == UOPS and f["y_size"] == 1
                and f["x_pad_0"] == f["x_pad_1"] == 0 and d + n <= len(words)):
            rows[b:b + n] = -1
            continue
        same = rows[b:b + n] == words[d:d + n]
        rows[b:b + n] = words[d:d + n]
        lo = int(np.argmin(same)) if not same.all() else n
        hi = n - (int(np.argmin(same[::-1])) if not same.all() else 0)
        if lo >= hi:
            if not _flags(i):
                drop.add(k)
            continue
        if lo or hi < n:
            replace[k] = _with(cfg, i, sram_base=b + lo, dram_base=d + lo, x_size=hi - lo,
                               x_stride=max(f["x_stride"], hi - lo))
    if not replace and not drop:
        return program
    out = _rebuild(program, [k for k in range(len(program.insns)) if k not in drop], replace)
    out.memo.update({m: program.memo[m] for m in ("warm_of",) if m in program.memo})
    return out


def _is_uop_load(insn) -> bool:
    return insn.opcode == Opcode.LOAD and not insn.is_nop and insn.memory_type == MemType.UOP


def _uop_span(program: Program):
    """``(lo, hi)``: the uop SRAM rows ``program``'s LOAD UOPs write and its GEMMs and
    ALUs read lie in; None when there are none."""
    spans = [_rows(i) for i in program.insns if _is_uop_load(i)]
    spans += [(i.fields["uop_bgn"], i.fields["uop_end"]) for i in program.insns
              if i.opcode in (Opcode.GEMM, Opcode.ALU)]
    if not spans:
        return None
    return min(a for a, _ in spans), max(b for _, b in spans)


def shift_uops(program: Program, d: int) -> Program | None:
    """``program`` with its kernel moved ``d`` rows in the uop SRAM (its LOAD UOPs'
    ``sram_base``, its GEMMs' and ALUs' ``uop_bgn`` / ``uop_end``; the micro-ops are the
    same words); None when it would leave the uop SRAM."""
    key = ("chain_shift", d)
    if key in program.memo:
        return program.memo[key]
    cfg = program.config
    span = _uop_span(program)
    out = None
    if d == 0:
        out = program
    elif span is not None and span[0] + d >= 0 and span[1] + d <= cfg.uop_depth:
        replace = {}
        for k, i in enumerate(program.insns):
            f = i.fields
            if _is_uop_load(i):
                replace[k] = _with(cfg, i, sram_base=f["sram_base"] + d)
            elif i.opcode in (Opcode.GEMM, Opcode.ALU):
                replace[k] = _with(cfg, i, uop_bgn=f["uop_bgn"] + d, uop_end=f["uop_end"] + d)
        out = _rebuild(program, range(len(program.insns)), replace)
    program.memo[key] = out
    return out


def uop_hoist(prev: Program, nxt: Program, rows=None):
    """``(nxt', loads)`` for a chain boundary with ``UOP_STREAM`` (:data:`UOP_HOIST`):
    ``nxt'`` is ``nxt`` moved in the uop SRAM (:func:`shift_uops`) clear of every row
    ``prev`` uses (its own place when it is clear, else right after or before ``prev``'s
    rows), ``loads`` the indices of its leading LOAD UOPs (of its :func:`entry_variant`'s
    head: no token flags), which may then run in ``prev``'s compute queue
    (:func:`with_uop_loads`): nothing ``prev`` reads or writes later is theirs. None when
    it has none, the uop SRAM already holds them after ``prev`` (``rows``: its words
    before ``prev``, None unknown; :func:`reuse_uops` drops them), or there is no room."""
    parts = _movable(nxt)
    if parts is None:
        return None
    relocs = {r.insn: r.slot for r in nxt.relocations}
    loads = [k for k in parts[3] if _is_uop_load(nxt.insns[k])]
    if not loads:
        return None
    got = [nxt.insns[k] for k in loads]
    if (sum(i.x_size for i in got) < UOP_HOIST_MIN
            or any(relocs.get(k) != UOPS for k in loads)
            or any(i.y_size != 1 or i.x_pad_0 or i.x_pad_1 for i in got)):
        return None
    if rows is None:
        rows = np.full(prev.config.uop_depth, -1, dtype=np.int64)
    held = uop_rows(prev, rows)
    words = np.asarray(nxt.uops, dtype=np.int64)
    if all(np.array_equal(held[i.sram_base:i.sram_base + i.x_size],
                          words[i.dram_base:i.dram_base + i.x_size])
           for i in got):
        return None
    mine, theirs = _uop_span(prev), _uop_span(nxt)
    if mine is None:
        return nxt, loads
    for d in (0, mine[1] - theirs[0], mine[0] - theirs[1]):
        if not overlap([(theirs[0] + d, theirs[1] + d)], [mine]):
            got = shift_uops(nxt, d)
            if got is not None:
                return got, loads
    return None


def with_uop_loads(program: Program, nxt: Program, loads: list,
                   groups: int | None = None) -> Program | None:
    """``program`` (a layer's bound variant before a chain boundary) with ``nxt``'s LOAD
    UOPs ``loads`` (:func:`uop_hoist`) in its compute queue before its last ``groups``
    (:data:`UOP_HOIST_GROUPS`) GEMM groups (a non-resetting GEMM that pops l2g starts
    one), their micro-ops appended to its staging; None when it has no such GEMM."""
    groups = UOP_HOIST_GROUPS if groups is None else groups
    ins, cfg = program.insns, program.config
    starts = [k for k, i in enumerate(ins) if i.opcode == Opcode.GEMM
              and not i.fields["reset_reg"] and i.fields["pop_prev_dep"]]
    if not starts:
        return None
    at = starts[-min(groups, len(starts))]
    got = [nxt.insns[k] for k in loads]
    lo = min(i.dram_base for i in got)
    hi = max(i.dram_base + i.x_size for i in got)
    base = len(program.uops)
    new = [(_with(cfg, i, dram_base=i.dram_base - lo + base), UOPS) for i in got]
    uops = np.concatenate([np.asarray(program.uops, dtype=np.uint32),
                           np.asarray(nxt.uops[lo:hi], dtype=np.uint32)])
    return _rebuild(program, [*range(at), *new, *range(at, len(ins))], uops=uops)


def _keeps_sram(rt) -> bool:
    """A warm start may run on ``rt``'s device: its SRAMs keep what a stream left
    (:attr:`~.device.Device.keeps_sram`; a dry runtime, which has no device: yes)."""
    dev = getattr(rt, "device", None)
    return dev is None or bool(getattr(dev, "keeps_sram", False))


def _streams(rt) -> int:
    """Streams started so far on ``rt``'s device, by any runtime (a dry runtime, which
    has no device: its own runs)."""
    dev = getattr(rt, "device", None)
    return rt.stats["syncs"] if dev is None else dev.streams


class Chain:
    """The chain state of one runtime (see the module docstring).

    Attributes
    ----------
    pending : tuple or None
        ``(program, buffers, entry, early, hoisted, uops)`` of the chain's last layer: its
        kernel is bound when the next layer comes (rewritten for the boundary) or the chain
        closes; ``entry``/``early``/``hoisted``/``uops`` say how it follows the layer before
        it.
    scratch : list
        Staged buffers the chain's layers read, freed when it has run.
    warm : tuple or None
        ``(program, {slot: address}, kernel, runtime, streams, uop rows)``: the stream
        ``runtime`` ran as its device's ``streams``-th (:attr:`~.device.Device.streams`)
        ended with ``program``'s :func:`warm_split` head, read from those buffers, and
        ``kernel`` is the warm kernel that goes with it; the guard of a warm start
        (:meth:`follow`).
    """

    def __init__(self):
        self.pending = None
        self.scratch: list = []
        self.warm = None
        self.uop_rows = None      # (uop SRAM words the bound kernels leave, stream length,
                                  #  device streams)

    @property
    def open(self) -> bool:
        return self.pending is not None

    def follow(self, rt, program, bufs, direct: bool, prefetch=None):
        """Queue a layer's kernel (``program`` bound to ``bufs``) after the chain's:
        it stays pending when it stores directly into a device tensor (``direct``; returns
        None), else the stream runs (its RunResult).

        ``prefetch`` (optional) is ``prefetch(rt) -> (program, buffers) or None``: the
        layer expected to run next (its buffers: its weights, resident); when the stream
        runs, it ends with that layer's :func:`warm_split` head and :attr:`warm` records
        it. A kernel that the last stream prefetched for starts warm (see the class
        docstring)."""
        program = self._warm_start(rt, program, bufs)
        entry = early = hoisted = uops = False
        prev = self.pending
        if prev is not None:
            p_prog, p_bufs, p_entry, p_early, p_hoisted, p_uops = prev
            after = sram_free_point(p_prog, program)
            if after is not None and after == _last_gemm(p_prog):
                # nothing to overlap: the first group loads where the last one is read;
                # the program with its SRAM halves exchanged may load elsewhere
                other = swap_slots(program)
                if other is not None:
                    a2 = sram_free_point(p_prog, other)
                    if a2 is None or a2 < after:
                        program, after = other, a2
            hoist = program if HOIST and hoist_plan(p_prog, program) else None
            ex = variant(p_prog, p_entry, True, after, p_early, p_hoisted, hoist,
                         uops=p_uops)
            ex_bufs = p_bufs
            if ex is not None and hoist is not None:
                ex_bufs = {**p_bufs, **{n: bufs[s] for s, n in
                                        hoist_slots(p_prog, program).items()}}
            reads = first_inputs(program, bufs)
            # what the next kernel reads before the previous one's stores are over must
            # not be what they write (weights, bias rows: constants)
            if (ex is not None and reads is not None and rt.fits(ex, program)
                    and not overlap(hoisted_reads(program, bufs), all_stores(ex, p_bufs))):
                early = not overlap(reads, late_stores(ex, p_bufs))
                stored = None if early else early_store(p_prog, p_bufs, reads)
                if stored is not None:      # *stores done* pushed later, but before the
                    ex = variant(p_prog, p_entry, True, after, p_early, p_hoisted, hoist,
                                 stored, p_uops)   # stores the next layer's inputs do not read
                    early = FIRST if not overlap(reads, late_stores(ex, p_bufs)) else False
                if UOP_HOIST and program.config.uop_stream:
                    got = uop_hoist(p_prog, program, self._rows(rt))
                    with_ = got and with_uop_loads(ex, *got)
                    if with_ is not None and rt.fits(with_, got[0]):
                        ex, program, uops = with_, got[0], True
                self._bind(rt, ex, ex_bufs)
                entry, hoisted = True, hoist is not None
            else:
                self.close(rt)              # the chain runs without this layer
            self.pending = None
        if direct:
            self.pending = (program, bufs, entry, early, hoisted, uops)
            return None
        warm = self._prefetch(rt, program, bufs, entry, early, prefetch, hoisted, uops)
        if warm is None:
            self._bind(rt, variant(program, entry, False, None, early, hoisted, uops=uops),
                       bufs)
        try:
            rows = self._rows(rt)
            res = rt.synchronize()
            if warm is not None:
                self.warm = (*warm, rt, _streams(rt), rows)
            return res
        finally:
            self.release(rt)

    def _prefetch(self, rt, program, bufs, entry, early, prefetch, hoisted=False,
                  uops=False):
        """Bind ``program`` (the stream's last kernel) as its :func:`exit_variant`
        followed by the next layer's :func:`warm_split` head; ``(next program, {slot:
        address})`` of what the head read, or None (nothing bound) when there is no next
        layer or its head cannot move here."""
        if prefetch is None or not _keeps_sram(rt):
            return None
        nxt = prefetch(rt)
        if nxt is None:
            return None
        nprog, nbufs = nxt
        split = warm_split(nprog)
        if split is not None and (nprog.config.extensions or split[0].memo["warm_later"]
                                  > WARM_DRAIN * drain_bytes(program)):
            split = warm_split(nprog, later=False)  # its later weights: not in the drain
        if split is None or any(s not in nbufs for s in split[0].slots):
            return None
        head = split[0]
        nbufs = {s: nbufs[s] for s in head.slots}
        after = sram_free_point(program, nprog, head.memo["warm_wgt"])
        ex = variant(program, entry, True, after, early, hoisted, uops=uops)
        if (ex is None or not rt.fits(ex, head)
                or overlap(prefetch_reads(head, nbufs), all_stores(ex, bufs))):
            return None
        self._bind(rt, ex, bufs)
        self._bind(rt, head, nbufs)
        return nprog, {s: nbufs[s].addr for s in head.slots}, split[1]

    def _warm_start(self, rt, program, bufs):
        """``program``'s warm variant (:func:`warm_split`) when the device's SRAM holds
        what its head left: the last stream run on ``rt``'s device (by any runtime,
        faulted or not; nothing queued since, no chain pending) was ``rt``'s, and ended
        with the head of this very program, read from the buffers ``bufs`` names. Else
        ``program`` (the cold kernel). :attr:`warm` is consumed either way."""
        warm, self.warm = self.warm, None
        if warm is None or self.pending is not None:
            return program
        nprog, addrs, kernel, wrt, syncs, rows = warm
        if (nprog is not program or wrt is not rt or _streams(rt) != syncs
                or rt.instructions
                or any(s not in bufs or bufs[s].addr != a for s, a in addrs.items())):
            return program
        if rows is not None:        # the uop SRAM as that stream left it
            self.uop_rows = (rows, _queued(rt), syncs)
        return kernel

    def _rows(self, rt):
        """The uop SRAM words the kernels bound so far leave (None: unknown)."""
        rows, queued, syncs = self.uop_rows or (None, None, None)
        if rows is None or _queued(rt) != queued or _streams(rt) != syncs:
            return None
        return rows

    def _bind(self, rt, program, bufs):
        rows = self._rows(rt)
        if rows is None or not rt.fits(program):
            rows = np.full(program.config.uop_depth, -1, dtype=np.int64)
        else:
            program = reuse_uops(program, rows)
        try:
            rt.bind(program, bufs)
        except BaseException:
            self.abort(rt)
            raise
        self.uop_rows = (uop_rows(program, rows), _queued(rt), _streams(rt))

    def close(self, rt):
        """Run an open chain: its last layer's kernel as it ends (the kernel fence); the
        device's RunResult (None when no chain was open)."""
        if self.pending is None:
            return None
        program, bufs, entry, early, hoisted, uops = self.pending
        self.pending = None
        self._bind(rt, variant(program, entry, False, None, early, hoisted, uops=uops), bufs)
        try:
            return rt.synchronize()
        finally:
            self.release(rt)

    def release(self, rt) -> None:
        """Free the staged buffers of the chain (after its stream ran or was dropped:
        nothing is assumed of the uop SRAM any more)."""
        self.uop_rows = None
        scratch, self.scratch = self.scratch, []
        for buf in scratch:
            try:
                rt.free(buf)
            except Exception:       # the device is already closed
                pass

    def abort(self, rt) -> None:
        """Drop an open chain without running it (after an error)."""
        self.pending = self.warm = None
        rt.reset()
        self.release(rt)
