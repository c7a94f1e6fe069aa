"""The instruction queue and its dependency-token bookkeeping (reference 4.3).

Instructions are kept as mutable :class:`PendingInsn` records until the stream
is finalized, because a later ``dep_push`` may set a push flag on the last
instruction. The rules are TVM's runtime.cc ones:

* ``dep_pop(a, b)`` runs on stage ``b``: it sets a pending pop flag of ``b``
  (``pop_prev`` if ``a < b``, else ``pop_next``), first committing an already
  set one as a NOP.
* A new instruction of a stage absorbs that stage's pending pops.
* ``dep_push(a, b)`` runs on stage ``a``: it commits ``a``'s pending pops as a
  NOP (a push must follow the pops), then sets the push flag on the last
  instruction if that belongs to ``a`` and lacks the flag (a LOAD with
  ``x_size == 0`` belongs to no stage here), else emits a NOP carrying it.
* NOPs: load stage -> LOAD INP, compute stage -> LOAD UOP, store stage ->
  STORE (memory type 0), every other field zero.
"""

from __future__ import annotations

from ..hw.isa import MemType, Opcode
from ..hw.spec import DEP_FLAGS, DEP_QUEUES, PIPELINE, TOKEN_QUEUES, Unit, dispatch_unit
from .errors import StageError

__all__ = ["PendingInsn", "InsnQueue", "stage_of", "serial_stage_of"]

# The pipeline stages are the units that exchange tokens (:data:`~vtakit.hw.spec.PIPELINE`).

_FLAGS = DEP_FLAGS
_NOP_FIELDS = dict(sram_base=0, dram_base=0, y_size=0, x_size=0, x_stride=0,
                   y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0)


class PendingInsn:
    """An instruction under construction: opcode and field values (dep flags included).

    ``uop_offset`` is set on LOAD UOP instructions: the offset, in uops, of the
    kernel's copy in the uop staging buffer (``dram_base`` is resolved from it
    when the staging buffer's address is known).
    """

    __slots__ = ("opcode", "fields", "uop_offset")

    def __init__(self, opcode: Opcode, fields: dict, uop_offset: int | None = None):
        self.opcode = opcode
        self.fields = fields
        self.uop_offset = uop_offset

    @property
    def is_nop(self) -> bool:
        return self.opcode in (Opcode.LOAD, Opcode.STORE) and self.fields.get("x_size", 0) == 0

    def __repr__(self):
        return f"PendingInsn({self.opcode.name}, {self.fields})"


def _mem_stage(memory_type) -> Unit:
    return dispatch_unit(Opcode.LOAD, memory_type)


def stage_of(insn: PendingInsn) -> Unit | None:
    """The stage a push may be folded into (TVM's GetPipelineStage): a sync-only LOAD
    and FINISH belong to none."""
    op = insn.opcode
    if op in (Opcode.GEMM, Opcode.ALU):
        return Unit.COMPUTE
    if op == Opcode.STORE:
        return Unit.STORE
    if op == Opcode.LOAD:
        return None if insn.fields["x_size"] == 0 else _mem_stage(insn.fields["memory_type"])
    return None


def serial_stage_of(insn: PendingInsn) -> Unit:
    """The unit that executes an instruction (NOPs included)."""
    return dispatch_unit(insn.opcode, insn.fields.get("memory_type"))


#: the legal dependency pairs (neighbouring stages), as check_pair returns them
_PAIRS = {(a, b): (a, b) for a in PIPELINE for b in PIPELINE if abs(a - b) == 1}


def check_pair(src, dst, call: str) -> tuple[Unit, Unit]:
    """Validate a dependency pair; returns it as Units."""
    if type(src) is Unit and type(dst) is Unit:     # the usual call: one lookup
        pair = _PAIRS.get((src, dst))
        if pair is not None:
            return pair
    try:
        a, b = Unit(src), Unit(dst)
        if a not in PIPELINE or b not in PIPELINE:
            raise ValueError
    except ValueError:
        raise StageError(f"{call}({src!r}, {dst!r}): stages are Unit.LOAD=1, "
                         "Unit.COMPUTE=2, Unit.STORE=3") from None
    if abs(a - b) != 1:
        raise StageError(f"{call}({a.name}, {b.name}): tokens only flow between neighbouring "
                         "stages (LOAD<->COMPUTE, COMPUTE<->STORE)")
    return a, b


class InsnQueue:
    """The pending instruction stream plus the pending pop flags of each stage."""

    def __init__(self):
        self.insns: list[PendingInsn] = []
        self.pending = {s: {"pop_prev_dep": 0, "pop_next_dep": 0} for s in PIPELINE}

    def __len__(self):
        return len(self.insns)

    def clear(self) -> None:
        self.insns.clear()
        for flags in self.pending.values():
            flags["pop_prev_dep"] = flags["pop_next_dep"] = 0

    def has_pending_pop(self) -> bool:
        return any(any(flags.values()) for flags in self.pending.values())

    # ----------------------------------------------------------- instructions

    def create(self, stage: Unit, opcode: Opcode, uop_offset=None, **fields) -> PendingInsn:
        """Append an instruction of ``stage``; it absorbs the stage's pending pops."""
        flags = self.pending[stage]
        fields["pop_prev_dep"] = flags["pop_prev_dep"]     # (``fields`` is this call's own)
        fields["pop_next_dep"] = flags["pop_next_dep"]
        fields["push_prev_dep"] = fields["push_next_dep"] = 0
        insn = PendingInsn(opcode, fields, uop_offset)
        flags["pop_prev_dep"] = flags["pop_next_dep"] = 0
        self.insns.append(insn)
        return insn

    def nop(self, stage: Unit, **flags) -> PendingInsn:
        """Append a sync-only instruction of ``stage`` carrying exactly ``flags``."""
        if stage == Unit.STORE:
            opcode, memory_type = Opcode.STORE, MemType.UOP
        else:
            opcode = Opcode.LOAD
            memory_type = MemType.INP if stage == Unit.LOAD else MemType.UOP
        fields = {"memory_type": int(memory_type), **_NOP_FIELDS,
                  **{f: 0 for f in _FLAGS}, **flags}
        insn = PendingInsn(opcode, fields)
        self.insns.append(insn)
        return insn

    # ----------------------------------------------------------- dependencies

    def commit_pending_pop(self, stage: Unit) -> None:
        """Emit a NOP carrying the stage's pending pops, if any."""
        flags = self.pending[stage]
        if flags["pop_prev_dep"] or flags["pop_next_dep"]:
            self.nop(stage, **flags)
            flags["pop_prev_dep"] = flags["pop_next_dep"] = 0

    def dep_pop(self, src, dst) -> None:
        a, b = check_pair(src, dst, "dep_pop")
        flag = "pop_prev_dep" if a < b else "pop_next_dep"
        if self.pending[b][flag]:
            self.commit_pending_pop(b)
        self.pending[b][flag] = 1

    def dep_push(self, src, dst) -> None:
        a, b = check_pair(src, dst, "dep_push")
        self.commit_pending_pop(a)
        flag = "push_next_dep" if a < b else "push_prev_dep"
        if self.insns:
            last = self.insns[-1]
            if stage_of(last) == a and not last.fields[flag]:
                last.fields[flag] = 1
                return
        self.nop(a, **{flag: 1})

    def fence(self) -> None:
        """The end-of-stream fences of VTASynchronize: a compute NOP that pops a token
        pushed after the last store and one pushed after the last load."""
        self.dep_push(Unit.STORE, Unit.COMPUTE)
        self.dep_push(Unit.LOAD, Unit.COMPUTE)
        self.dep_pop(Unit.STORE, Unit.COMPUTE)
        self.dep_pop(Unit.LOAD, Unit.COMPUTE)
        self.commit_pending_pop(Unit.COMPUTE)

    def rewrite_serial(self) -> None:
        """FORCE_SERIAL: drop every dependency flag and pending pop, then chain each pair
        of consecutive instructions of different stages with a push/pop pair, so each
        instruction waits for the one before it. Load and store share no token queue, so
        a compute NOP is inserted between a consecutive load and store (TVM leaves such
        a pair unsynchronized)."""
        for flags in self.pending.values():
            flags["pop_prev_dep"] = flags["pop_next_dep"] = 0
        old, self.insns = self.insns, []
        for insn in old:
            for f in _FLAGS:
                insn.fields[f] = 0
            if self.insns:
                a, b = serial_stage_of(self.insns[-1]), serial_stage_of(insn)
                if {a, b} == {Unit.LOAD, Unit.STORE}:
                    self.nop(Unit.COMPUTE)
                    self._chain(self.insns[-2], self.insns[-1])
                self._chain(self.insns[-1], insn)
            self.insns.append(insn)

    def token_balance(self) -> dict[str, int]:
        """Pushes minus pops per token queue over the stream, pending pops included.
        A stream that can be cut (run on its own) has every balance 0."""
        balance = dict.fromkeys(TOKEN_QUEUES, 0)
        for insn in self.insns:
            for flag, queue in DEP_QUEUES[serial_stage_of(insn)].items():
                if queue is not None and insn.fields[flag]:
                    balance[queue] += 1 if flag.startswith("push") else -1
        for stage, flags in self.pending.items():
            for flag, value in flags.items():
                if value:
                    balance[DEP_QUEUES[stage][flag]] -= 1
        return balance

    @staticmethod
    def _chain(prev: PendingInsn, now: PendingInsn) -> None:
        a, b = serial_stage_of(prev), serial_stage_of(now)
        if a == b:
            return
        prev.fields["push_next_dep" if a < b else "push_prev_dep"] = 1
        now.fields["pop_prev_dep" if a < b else "pop_next_dep"] = 1
