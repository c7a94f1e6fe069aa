"""ProgramBuilder: queue VTA work into a :class:`~.program.Program`, without a device.

The builder has the runtime's stream API (2-D loads and stores, GEMM/ALU
micro-op kernels with their uop-SRAM residency and staging, dependency tokens
folded into flags or NOPs) and checks every argument when it is queued. DRAM
operands are *slots*: named, sized buffers whose addresses are not known yet;
every LOAD/STORE on a slot becomes a relocation of the built Program. The
runtime driver queues its own stream through a builder too, with slots that
are live device buffers (their address known, so nothing is left to relocate
but the uop staging).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hw.config import extension_note
from ..hw.isa import MemType, Opcode
from ..hw.spec import DRAM_ADDR_BITS, MAX_PAD, PAD_BITS, XFER_BITS, Unit, dispatch_unit
from .deps import InsnQueue, PendingInsn, serial_stage_of
from .errors import (DramRangeError, InvalidArgumentError, KernelError, SramRangeError,
                     StreamStateError)
from .kernel import UopKernel
from .program import UOPS, Program, ProgramFormatError, encoder
from .uop_cache import UopCache

__all__ = ["ProgramBuilder", "Slot", "clear_encoded", "finished_alone"]

_FIELD16 = (1 << XFER_BITS) - 1
#: Checked-and-encoded kernels remembered across resets (a bound, so a long session
#: with ever new kernels does not grow, unlike TVM's uop cache, apache/tvm#4246).
_MAX_CHECKED = 4096
#: Encoded instructions of :meth:`ProgramBuilder.instructions`, by config, then by
#: opcode, field names and values (an Insn is a value: the candidate schedules of a plan
#: search repeat most of each other's instructions); bounded (instructions per config,
#: configs), emptied when full; :func:`clear_encoded` empties it.
_encoded: dict = {}
_MAX_ENCODED = 1 << 15
_MAX_ENCODED_CONFIGS = 4
_MEM_NAMES = {MemType.INP: "input", MemType.WGT: "weight", MemType.ACC: "accumulator",
              MemType.OUT: "output"}


@dataclass(frozen=True)
class Slot:
    """A DRAM buffer a stream addresses: a name and a size in bytes, and its byte
    address once known (``addr``; None for a slot of a relocatable Program)."""

    name: str
    nbytes: int
    addr: int | None = None

    def describe(self) -> str:
        if self.addr is None:
            return f"{self.nbytes}-byte slot {self.name!r}"
        return f"{self.nbytes}-byte buffer at 0x{self.addr:x}"


class ProgramBuilder:
    """Builds a :class:`Program` for one config, with no device.

    Parameters
    ----------
    config : VTAConfig
    name : str
        The name of the programs built (e.g. the operator).

    Examples
    --------
    >>> b = ProgramBuilder(VTAConfig.preset("default"), name="copy")
    >>> a, o = b.slot("a", 36 * 64), b.slot("out", 36 * 16)
    >>> b.load_2d(MemType.ACC, 0, a, 0, 36, 1, 36)
    >>> b.push_alu(UopKernel.alu(AluOp.SHR, [(0, 0)], [(36, 1, 1)], imm=0))   # acc -> out
    >>> b.dep_push(Unit.COMPUTE, Unit.STORE); b.dep_pop(Unit.COMPUTE, Unit.STORE)
    >>> b.store_2d(0, o, 0, 36, 1, 36)
    >>> program = b.build()
    """

    def __init__(self, config, *, name: str = ""):
        self.config = config
        self.name = name
        # the config's SRAM element bytes and depths by memory type (asked every DMA)
        self._elem_bytes = {mt: config.elem_bytes(mt) for mt in MemType}
        self._depth = {mt: config.depth(mt) for mt in MemType}
        self._queue = InsnQueue()
        self._cache = UopCache(config.uop_depth)
        self._words: dict[UopKernel, np.ndarray] = {}   # checked kernels -> encoded uops
        self._staged: dict[UopKernel, int] = {}         # kernel -> offset (uops) in staging
        self._staging: list[np.ndarray] = []
        self._staging_uops = 0
        self._slots: dict[str, Slot] = {}
        self._relocs: dict[PendingInsn, str] = {}       # relocated insn -> slot name
        self._sources: dict[PendingInsn, object] = {}   # included insn -> its encoded Insn

    # ------------------------------------------------------------ extension points

    def _resolve_slot(self, slot, call: str) -> Slot:
        """The Slot a DRAM argument names (a declared Slot or its name)."""
        name = slot.name if isinstance(slot, Slot) else slot
        found = self._slots.get(name) if isinstance(name, str) else None
        if found is None or (isinstance(slot, Slot) and slot != found):
            raise InvalidArgumentError(f"{call}: {slot!r} is not a slot of this builder; "
                                       "declare it with slot(name, nbytes) (slots: "
                                       + (", ".join(self._slots) or "none") + ")")
        return found

    def _before_queue(self) -> None:
        """Called after a call's checks, before it changes the stream."""

    def _before_stage(self, kernel) -> None:
        """Called before a kernel's uops are added to the staging."""

    # ------------------------------------------------------------------ slots

    def slot(self, name: str, nbytes: int) -> Slot:
        """Declare a buffer slot of ``nbytes`` bytes (a relocation target)."""
        if not isinstance(name, str) or not name.isidentifier():
            raise InvalidArgumentError(f"slot({name!r}): a slot name must be an identifier")
        if name in self._slots:
            raise InvalidArgumentError(f"slot({name!r}): a slot of that name already exists")
        if not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
            raise InvalidArgumentError(f"slot({name!r}, {nbytes!r}): size must be a positive "
                                       "integer")
        slot = self._slots[name] = Slot(name, int(nbytes))
        return slot

    @property
    def slots(self) -> dict:
        """Declared slots, name -> Slot."""
        return dict(self._slots)

    # -------------------------------------------------------------------- DMA

    def load_2d(self, mem_type, sram_base, slot, elem_offset, x_size, y_size, x_stride,
                x_pad_before=0, y_pad_before=0, x_pad_after=0, y_pad_after=0) -> None:
        """Queue a 2-D DMA load (reference 3.3) of INP, WGT or ACC elements.

        Rows of ``x_size`` elements, ``x_stride`` elements apart, are read from
        element ``elem_offset`` of ``slot`` and land contiguously (with zero
        padding) in SRAM from ``sram_base``. INP/WGT loads run on the load
        stage, ACC on compute.
        """
        try:
            mt = MemType(mem_type)
        except ValueError:
            mt = None
        if mt not in (MemType.INP, MemType.WGT, MemType.ACC):
            raise InvalidArgumentError(f"load_2d: memory type {mem_type!r} cannot be loaded; use "
                                       "MemType.INP, MemType.WGT or MemType.ACC (micro-ops are "
                                       "loaded by push_gemm/push_alu)")
        call = _LOAD_CALL[mt]
        if not _plain(sram_base, elem_offset, x_size, y_size, x_stride, x_pad_before,
                      y_pad_before, x_pad_after, y_pad_after):
            _check_args(call, dict(sram_base=sram_base, elem_offset=elem_offset, x_size=x_size,
                                   y_size=y_size, x_stride=x_stride),
                        dict(x_pad_before=x_pad_before, y_pad_before=y_pad_before,
                             x_pad_after=x_pad_after, y_pad_after=y_pad_after))
        slot = self._resolve_slot(slot, call)
        x_total = x_pad_before + x_size + x_pad_after
        y_total = y_pad_before + y_size + y_pad_after
        if sram_base + x_total * y_total > self._depth[mt]:
            self._check_sram(call, mt, sram_base, x_total * y_total,
                             f"{x_total} x {y_total} elements with padding")
        dram_base = self._check_dram(call, mt, slot, elem_offset, x_size, y_size, x_stride)
        stage = dispatch_unit(Opcode.LOAD, mt)
        self._before_queue()
        insn = self._queue.create(stage, Opcode.LOAD, memory_type=int(mt), sram_base=sram_base,
                                  dram_base=dram_base, y_size=y_size, x_size=x_size,
                                  x_stride=x_stride, y_pad_0=y_pad_before, y_pad_1=y_pad_after,
                                  x_pad_0=x_pad_before, x_pad_1=x_pad_after)
        if slot.addr is None:
            self._relocs[insn] = slot.name

    def store_2d(self, sram_base, slot, elem_offset, x_size, y_size, x_stride) -> None:
        """Queue a 2-D store of OUT elements ``[sram_base, sram_base + x_size*y_size)``
        to DRAM rows ``x_stride`` elements apart (reference 3.7)."""
        call = "store_2d"
        if not _plain(sram_base, elem_offset, x_size, y_size, x_stride):
            _check_args(call, dict(sram_base=sram_base, elem_offset=elem_offset, x_size=x_size,
                                   y_size=y_size, x_stride=x_stride), {})
        slot = self._resolve_slot(slot, call)
        if sram_base + x_size * y_size > self._depth[MemType.OUT]:
            self._check_sram(call, MemType.OUT, sram_base, x_size * y_size,
                             f"{x_size} x {y_size} elements")
        dram_base = self._check_dram(call, MemType.OUT, slot, elem_offset, x_size, y_size,
                                     x_stride)
        self._before_queue()
        insn = self._queue.create(Unit.STORE, Opcode.STORE, memory_type=int(MemType.OUT),
                                  sram_base=sram_base, dram_base=dram_base, y_size=y_size,
                                  x_size=x_size, x_stride=x_stride, y_pad_0=0, y_pad_1=0,
                                  x_pad_0=0, x_pad_1=0)
        if slot.addr is None:
            self._relocs[insn] = slot.name

    def _check_sram(self, call, mt, sram_base, count, what):
        depth = self.config.depth(mt)
        if sram_base + count > depth:
            raise SramRangeError(f"{call}: SRAM range [{sram_base}, {sram_base + count}) "
                                 f"({what}) exceeds the {_MEM_NAMES[mt]} buffer depth {depth}")

    def _check_dram(self, call, mt, slot: Slot, elem_offset, x_size, y_size, x_stride) -> int:
        """The instruction's dram_base: absolute for a slot with an address, else the
        element offset inside the slot (relocated when the program is bound)."""
        elem = self._elem_bytes[mt]
        end = (elem_offset + (y_size - 1) * x_stride + x_size) * elem
        if end > slot.nbytes:
            raise DramRangeError(
                f"{call}: DRAM elements [{elem_offset}, {end // elem}) of {elem} bytes "
                f"(elem_offset={elem_offset}, y_size={y_size}, x_stride={x_stride}, "
                f"x_size={x_size}) end at byte {end}, past the {slot.describe()}")
        if slot.addr is None:
            return elem_offset
        return absolute_dram_base(call, self.config, mt, slot.addr, elem_offset, x_size, y_size,
                                  x_stride)

    # ---------------------------------------------------------------- kernels

    def push_gemm(self, kernel: UopKernel) -> None:
        """Queue a GEMM kernel: a LOAD UOP if it is not resident, then the GEMM instruction."""
        self._push_kernel(kernel, "gemm")

    def push_alu(self, kernel: UopKernel) -> None:
        """Queue an ALU kernel: a LOAD UOP if it is not resident, then the ALU instruction."""
        self._push_kernel(kernel, "alu")

    def _push_kernel(self, kernel, mode):
        if not isinstance(kernel, UopKernel):
            raise InvalidArgumentError(f"push_{mode}: expected a UopKernel, got "
                                       f"{type(kernel).__name__}")
        if kernel.mode != mode:
            raise KernelError(f"push_{mode}: got a {kernel.kind} kernel; use "
                              f"push_{kernel.mode} for it")
        words = self._words.get(kernel)
        if words is None:
            words = self._words[kernel] = kernel.check_config(self.config)
        self._before_queue()
        start = self._cache.lookup(kernel)
        if start is None:
            offset = self._staged.get(kernel)
            if offset is None:
                self._before_stage(kernel)
                offset = self._staged[kernel] = self._staging_uops
                self._staging.append(words)
                self._staging_uops += kernel.size
            start = self._cache.place(kernel, kernel.size)
            self._queue.create(Unit.COMPUTE, Opcode.LOAD, uop_offset=offset,
                               memory_type=int(MemType.UOP), sram_base=start, dram_base=offset,
                               y_size=1, x_size=kernel.size, x_stride=kernel.size, y_pad_0=0,
                               y_pad_1=0, x_pad_0=0, x_pad_1=0)
        n_out, n_in, f_out, f_in = kernel.iterations()
        if mode == "gemm":
            self._queue.create(Unit.COMPUTE, Opcode.GEMM, reset_reg=int(kernel.reset),
                               uop_bgn=start, uop_end=start + kernel.size, iter_out=n_out,
                               iter_in=n_in, dst_factor_out=f_out[0], dst_factor_in=f_in[0],
                               src_factor_out=f_out[1], src_factor_in=f_in[1],
                               wgt_factor_out=f_out[2], wgt_factor_in=f_in[2])
        else:
            self._queue.create(Unit.COMPUTE, Opcode.ALU, reset_reg=0, uop_bgn=start,
                               uop_end=start + kernel.size, iter_out=n_out, iter_in=n_in,
                               dst_factor_out=f_out[0], dst_factor_in=f_in[0],
                               src_factor_out=f_out[1], src_factor_in=f_in[1],
                               alu_opcode=int(kernel.alu_op), use_imm=int(kernel.use_imm),
                               imm=kernel.imm or 0)

    def staging_cost(self, kernel: UopKernel) -> int:
        """Uops that queueing ``kernel`` now would add to the staging (0 or its size)."""
        if kernel in self._cache.resident or kernel in self._staged:
            return 0
        return kernel.size

    def coalesce_uop_loads(self, max_uops: int) -> int:
        """Merge each LOAD UOP into an earlier one of the compute module when their kernels
        are contiguous both in the uop SRAM and in the staging (as kernels placed in the
        order they are first queued are), so one DMA instruction loads several kernels
        (each LOAD costs the compute module its per-instruction and per-row cycles).

        A LOAD is merged into the head of the current run while the run stays within
        ``max_uops`` micro-ops and no GEMM/ALU queued in between reads the SRAM range it
        writes (a kernel there that it evicted). Its pop flags move to the next compute
        instruction (its own GEMM/ALU, which reads only the uop SRAM the pops do not
        guard); a LOAD whose flags cannot move ends the run. Returns the LOADs merged.
        """
        if max_uops < 1:
            raise InvalidArgumentError(f"coalesce_uop_loads({max_uops!r}): max_uops must be "
                                       "at least 1")
        insns = self._queue.insns
        compute = [p for p in insns if serial_stage_of(p) == Unit.COMPUTE]
        drop = set()
        head = None
        used = set()                    # [bgn, end) uop ranges read since the head
        low, high = 0, 0                # and the range they span (a quick test first)
        for k, p in enumerate(compute):
            f = p.fields
            if p.opcode in (Opcode.GEMM, Opcode.ALU):
                a, b = f["uop_bgn"], f["uop_end"]
                if not used:
                    low, high = a, b
                elif a < low or b > high:
                    low, high = min(low, a), max(high, b)
                used.add((a, b))
                continue
            if p.opcode != Opcode.LOAD or p.uop_offset is None or not f["x_size"]:
                continue
            bgn, n = f["sram_base"], f["x_size"]
            pops = [g for g in ("pop_prev_dep", "pop_next_dep") if f[g]]
            nxt = compute[k + 1] if k + 1 < len(compute) else None
            if (head is not None and bgn == head.fields["sram_base"] + head.fields["x_size"]
                    and p.uop_offset == head.uop_offset + head.fields["x_size"]
                    and head.fields["x_size"] + n <= max_uops
                    and not (used and low < bgn + n and bgn < high
                             and any(a < bgn + n and bgn < b for a, b in used))
                    and not (pops and (nxt is None or nxt.opcode not in (Opcode.GEMM, Opcode.ALU)
                                       or any(nxt.fields[g] for g in pops)))):
                size = head.fields["x_size"] + n
                head.fields.update(x_size=size, x_stride=size)
                for g in pops:
                    nxt.fields[g] = 1
                drop.add(id(p))
                continue
            head, used = p, set()
        if drop:
            self._queue.insns = [p for p in insns if id(p) not in drop]
        return len(drop)

    # ----------------------------------------------------------- dependencies

    def dep_push(self, src, dst) -> None:
        """Push a token from stage ``src`` to neighbouring stage ``dst`` after ``src``'s
        work queued so far (folded into its last instruction when possible)."""
        self._before_queue()
        self._queue.dep_push(src, dst)

    def dep_pop(self, src, dst) -> None:
        """Make ``dst``'s next instruction wait for a token from ``src``."""
        self._before_queue()
        self._queue.dep_pop(src, dst)

    def finish(self) -> None:
        """End the stream: the fences of VTASynchronize, then FINISH."""
        self._before_queue()
        q = self._queue
        q.fence()
        assert not q.has_pending_pop()
        q.create(Unit.COMPUTE, Opcode.FINISH)

    # ---------------------------------------------------------------- programs

    def include(self, program: Program, slots: dict, *, call: str = "include") -> None:
        """Append a program's instructions and uops to this stream.

        Parameters
        ----------
        program : Program
            Built for this builder's config.
        slots : dict of str -> slot
            One entry per slot of the program, naming a slot of this stream
            (what :meth:`load_2d` accepts). A slot whose address is known is
            resolved now (and its last byte checked against 2^32); others stay
            relocations of the stream.

        Pops pending in this stream merge into the program's first instruction of
        their stage when it does not pop the same queue (a sync-only NOP is emitted
        otherwise); the program's own pending pops stay pending afterwards. The
        uop SRAM is assumed overwritten: kernels queued later are loaded again.
        Nothing is queued if an argument is wrong.
        """
        self.append_resolved(program, self.resolve(program, slots, call=call))

    def resolve(self, program: Program, slots: dict, *, call: str = "include") -> list:
        """Check :meth:`include`'s arguments and resolve the program's slots; returns
        what :meth:`append_resolved` queues (the stream is not changed)."""
        if not isinstance(program, Program):
            raise InvalidArgumentError(f"{call}: expected a Program, got "
                                       f"{type(program).__name__}")
        what = f"{call}({program.name or 'program'})"
        if program.config != self.config:
            raise InvalidArgumentError(f"{what}: the program was built for config "
                                       f"{program.config.name}, this stream is for "
                                       f"{self.config.name}"
                                       + extension_note(program.config, self.config))
        if not isinstance(slots, dict):
            raise InvalidArgumentError(f"{what}: slots must be a dict of slot name -> buffer, "
                                       f"got {type(slots).__name__}")
        missing = [n for n in program.slots if n not in slots]
        unknown = [n for n in slots if n not in program.slots]
        if missing or unknown:
            raise InvalidArgumentError(
                f"{what}: " + "; ".join(
                    s for s in (missing and "no buffer for slot " + ", ".join(map(repr, missing)),
                                unknown and "no slot named " + ", ".join(map(repr, unknown)))
                    if s) + "; the program's slots are " + (", ".join(program.slots) or "none"))
        resolved = {}
        for name, nbytes in program.slots.items():
            s = resolved[name] = self._resolve_slot(slots[name], f"{what} slot {name!r}")
            if s.nbytes < nbytes:
                raise DramRangeError(f"{what}: slot {name!r} needs {nbytes} bytes, the "
                                     f"{s.describe()} is smaller")
        targets = {r.insn: r.slot for r in program.relocations}
        out = []
        for k, insn in enumerate(program.insns):
            fields = dict(insn.fields)
            del fields["opcode"]
            target = targets.get(k)
            if target is not None and target != UOPS:
                s = resolved[target]
                if s.addr is None:
                    target = s.name
                else:
                    mt = MemType.OUT if insn.opcode == Opcode.STORE else MemType(insn.memory_type)
                    fields["dram_base"] = absolute_dram_base(
                        f"{what} instruction {k} ({target!r})", self.config, mt, s.addr,
                        insn.dram_base, insn.x_size, insn.y_size, insn.x_stride)
                    target = None
            out.append((insn.opcode, fields, target))
        return out

    def append_resolved(self, program: Program, resolved: list) -> None:
        """Queue a program whose slots :meth:`resolve` resolved."""
        self._before_queue()
        new = []
        sources = program.insns if len(program.insns) == len(resolved) else [None] * len(resolved)
        for (opcode, fields, target), insn in zip(resolved, sources):
            uop_offset = None
            if target == UOPS:      # the program's staging lands at the end of this one's
                uop_offset = self._staging_uops + fields["dram_base"]
                fields = dict(fields, dram_base=uop_offset)
                target = None
            p = PendingInsn(opcode, dict(fields), uop_offset)
            if insn is not None:        # build() reuses it while the fields stay the same
                self._sources[p] = insn
            new.append((p, target))
        q = self._queue
        tail = set(program.pending_pops)
        for stage, flags in q.pending.items():
            carried = [f for f, v in flags.items() if v]
            if not carried:
                continue
            first = next((p for p, _ in new if serial_stage_of(p) == stage), None)
            if first is not None and not any(first.fields[f] for f in carried):
                for f in carried:
                    first.fields[f] = 1
                    q.pending[stage][f] = 0
            elif first is not None or any((int(stage), f) in tail for f in carried):
                q.commit_pending_pop(stage)
        for p, target in new:
            q.insns.append(p)
            if target is not None:
                self._relocs[p] = target
        for stage, flag in program.pending_pops:
            q.pending[Unit(stage)][flag] = 1
        if len(program.uops):
            self._staging.append(np.asarray(program.uops))
            self._staging_uops += len(program.uops)
        self._cache.invalidate()

    # ------------------------------------------------------------------ state

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def empty(self) -> bool:
        """True when nothing is queued (no instruction, no pending pop)."""
        return not self._queue.insns and not self._queue.has_pending_pop()

    @property
    def staging_uops(self) -> int:
        return self._staging_uops

    @property
    def uops(self) -> np.ndarray:
        """The uop staging (uint32 words)."""
        if not self._staging:
            return np.zeros(0, dtype=np.uint32)
        return np.concatenate(self._staging)

    def token_balance(self) -> dict[str, int]:
        """Pushes minus pops per token queue, pending pops included."""
        return self._queue.token_balance()

    def rewrite_serial(self) -> None:
        """FORCE_SERIAL: every instruction waits for the one before it."""
        self._queue.rewrite_serial()

    def build(self) -> Program:
        """The stream queued so far as a :class:`Program` (the builder is unchanged)."""
        insns = self.instructions()
        relocs = []
        for k, p in enumerate(self._queue.insns):
            if p.uop_offset is not None:
                relocs.append((k, UOPS))
            elif p in self._relocs:
                relocs.append((k, self._relocs[p]))
        pending = [(int(s), f) for s, flags in self._queue.pending.items()
                   for f, v in flags.items() if v]
        try:
            return Program(self.config, insns, self.uops,
                           {n: s.nbytes for n, s in self._slots.items()}, relocs, pending,
                           self.name)
        except ProgramFormatError as e:     # pragma: no cover - a builder bug
            raise StreamStateError(f"build: {e}") from None

    def instructions(self) -> list:
        """The stream queued so far as encoded :class:`~vtakit.hw.isa.Insn` values, those
        of :meth:`build`'s Program (relocated ``dram_base`` fields slot-relative), without
        building the Program (what reading the stream needs, e.g. a cycle prediction)."""
        insns, encoders, sources = [], {}, self._sources
        known = _encoded.get(self.config)
        if known is None:
            if len(_encoded) >= _MAX_ENCODED_CONFIGS:
                _encoded.clear()
            known = _encoded[self.config] = {}
        elif len(known) > _MAX_ENCODED:
            known.clear()
        for p in self._queue.insns:
            insn = sources.get(p) if sources else None  # an included instruction, unchanged?
            if insn is None or {**p.fields, "opcode": p.opcode} != insn.fields:
                f = p.fields
                key = (p.opcode, tuple(f), *f.values())
                insn = known.get(key)           # a stream repeats instructions (a tile's
                if insn is None:                # GEMMs): equal fields, one encoded Insn
                    encode = encoders.get(p.opcode)
                    if encode is None:
                        encode = encoders[p.opcode] = encoder(self.config, p.opcode)
                    insn = known[key] = encode(f)
            insns.append(insn)
        return insns

    def reset(self) -> None:
        """Discard the queued stream (slots stay declared; the uop SRAM is assumed empty)."""
        self._queue.clear()
        self._cache.invalidate()
        self._staged.clear()
        self._staging.clear()
        self._staging_uops = 0
        self._relocs.clear()
        self._sources.clear()
        if len(self._words) > _MAX_CHECKED:
            self._words.clear()

    @property
    def cache(self) -> UopCache:
        """The uop SRAM residency model (hits, misses, evictions counters)."""
        return self._cache


def clear_encoded() -> None:
    """Forget the instructions :meth:`ProgramBuilder.instructions` encoded."""
    _encoded.clear()


def finished_alone(program: Program) -> list:
    """The instructions of ``program`` included alone in a new stream and finished (the
    fences and FINISH a runtime appends): ``include``, ``finish`` then
    :meth:`ProgramBuilder.instructions`, slot-relative ``dram_base`` fields. Computed on
    the program's last instruction only: a new stream has no pending pop for include to
    merge into the program's instructions, and the fences of finish can only set a push
    flag on the last instruction queued."""
    stream = ProgramBuilder(program.config, name=program.name)
    if not program.insns:
        stream.include(program, {n: stream.slot(n, size) for n, size in program.slots.items()})
        stream.finish()
        return stream.instructions()
    last = program.insns[-1]
    p = PendingInsn(last.opcode, {k: v for k, v in last.fields.items() if k != "opcode"})
    stream._queue.insns.append(p)
    stream._sources[p] = last
    for stage, flag in program.pending_pops:      # as include leaves them
        stream._queue.pending[Unit(stage)][flag] = 1
    stream.finish()
    return list(program.insns[:-1]) + stream.instructions()


_LOAD_CALL = {mt: f"load_2d({mt.name})" for mt in MemType}


def _plain(sram_base, elem_offset, x_size, y_size, x_stride, *pads) -> bool:
    """The usual arguments of a load or store, quickly: Python ints that
    :func:`_check_args` accepts (anything else goes through it, for the message)."""
    return (type(sram_base) is int and type(elem_offset) is int and type(x_size) is int
            and type(y_size) is int and type(x_stride) is int
            and 0 <= sram_base <= _FIELD16 and elem_offset >= 0 and 1 <= x_size <= _FIELD16
            and 1 <= y_size <= _FIELD16 and 0 <= x_stride <= _FIELD16
            and all(type(v) is int and 0 <= v <= MAX_PAD for v in pads))


def _check_args(call, args, pads):
    for name, value in args.items():
        if not isinstance(value, (int, np.integer)) or value < 0:
            raise InvalidArgumentError(f"{call}: {name}={value!r} must be a non-negative "
                                       "integer")
    for name in ("x_size", "y_size"):
        if not 1 <= args[name] <= _FIELD16:
            raise InvalidArgumentError(f"{call}: {name}={args[name]} must be in 1..{_FIELD16} "
                                       "(the 16-bit field; 0 would make a sync-only NOP)")
    for name in ("x_stride", "sram_base"):
        if args[name] > _FIELD16:
            raise InvalidArgumentError(f"{call}: {name}={args[name]} does not fit its "
                                       f"16-bit field (max {_FIELD16})")
    for name, value in pads.items():
        if not isinstance(value, (int, np.integer)) or not 0 <= value <= MAX_PAD:
            raise InvalidArgumentError(f"{call}: {name}={value!r} must be in 0..{MAX_PAD} "
                                       f"({PAD_BITS}-bit pad field)")


def absolute_dram_base(call, config, mt, addr, elem_offset, x_size, y_size, x_stride) -> int:
    """``addr // elem_bytes + elem_offset``, after checking that the transfer's last
    byte is below 2^32 (the hardware faults with DRAM_OUT_OF_RANGE otherwise)."""
    elem = config.elem_bytes(mt)
    dram_base = addr // elem + elem_offset
    last = (dram_base + (y_size - 1) * x_stride + x_size) * elem - 1
    if last >= 1 << DRAM_ADDR_BITS:
        raise DramRangeError(
            f"{call}: the transfer's last DRAM byte 0x{last:x} (dram_base={dram_base} "
            f"elements of {elem} bytes, y_size={y_size}, x_stride={x_stride}, "
            f"x_size={x_size}) is beyond the 32-bit byte address space; every byte "
            "must be below 0x100000000")
    return dram_base
