"""The runtime driver: a Pythonic equivalent of TVM VTA's runtime.cc (reference section 4).

It owns device buffers, builds one instruction stream (2-D loads and stores,
micro-op kernels cached in the uop SRAM, GEMM and ALU instructions, dependency
tokens folded into flags or NOPs; queued through a
:class:`~.builder.ProgramBuilder` whose slots are its live buffers), appends
lowered :class:`~.program.Program` values with :meth:`Runtime.bind`, and at
:meth:`Runtime.synchronize` writes the micro-ops and instructions into device
DRAM and runs them on any :class:`~vtakit.runtime.device.Device`.

Where it deliberately differs from runtime.cc:

* Every LOAD UOP reads its own staging copy of its kernel (identical kernels
  share one immutable copy), so a uop-ring wrap-around within one stream never
  makes an earlier LOAD UOP read another kernel (reference 4.4's pitfall).
* FORCE_SERIAL also clears the first instruction's pops and the last one's
  pushes, and puts a compute NOP between a consecutive load and store (they
  share no token queue, so TVM leaves such a pair unordered).
* GEMM/ALU index ranges are checked at push time (like loads and stores), and
  the accumulate-hazard rule is checked in the kernel's full iteration order.
* An automatic synchronize (``max_xfer``) that would cut a token dependency
  raises instead of producing a stream that deadlocks in its next run.
* Device buffers for uops and instructions are reused and grow by doubling;
  the memo of checked kernels is bounded (no unbounded growth, apache/tvm#4246).
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass

import numpy as np

from ..hw.isa import insns_to_bytes, isa_for
from .device import Device, RunResult
from .dram import PAGE_BYTES
from .image import DramImage
from .builder import ProgramBuilder, Slot
from .errors import BufferHandleError, DramRangeError, InvalidArgumentError, StreamStateError
from .kernel import UopKernel
from .program import UOPS, Program

__all__ = ["Runtime", "Buffer", "DebugFlag", "VTA_MAX_XFER"]

#: Largest instruction or uop stream of one synchronize, in bytes (TVM's VTA_MAX_XFER).
VTA_MAX_XFER = 1 << 25
#: Instructions the end of a stream may still add (fences, FINISH), as runtime.cc reserves.
_RESERVE = 6


class DebugFlag(enum.IntFlag):
    """Debug modes (TVM's VTASetDebugMode bit values)."""

    DUMP_INSN = 1 << 1
    DUMP_UOP = 1 << 2
    FORCE_SERIAL = 1 << 5


@dataclass(frozen=True)
class Buffer:
    """A device buffer: byte address in device DRAM and size in bytes.

    ``base`` is None for an allocation (page aligned) and the allocation's address
    for a view of part of one (:meth:`Runtime.view`).
    """

    addr: int
    nbytes: int
    base: int | None = None

    def __repr__(self):
        view = "" if self.base is None else f", base={self.base}"
        return f"Buffer(addr={self.addr}, nbytes={self.nbytes}{view})"


class _Stream(ProgramBuilder):
    """The runtime's own stream: slots are live buffers (addresses known), and the
    runtime is asked before anything is queued or staged (finalize, max_xfer)."""

    def __init__(self, rt):
        super().__init__(rt.config)
        self._rt = rt

    def _resolve_slot(self, slot, call):
        return self._rt._buffer_slot(slot, call)

    def _before_queue(self):
        self._rt._start_push()

    def _before_stage(self, kernel):
        self._rt._before_stage(kernel)


class Runtime:
    """Builds instruction streams for one device and runs them.

    Parameters
    ----------
    device : Device
        Any backend (``vtakit.sim.open_device(...)``).
    debug : DebugFlag
        DUMP_INSN / DUMP_UOP print the stream at each synchronize; FORCE_SERIAL
        rewrites the dependency flags so no two instructions overlap.
    max_xfer : int
        Largest instruction (or uop staging) stream in bytes; a stream about to
        exceed it is synchronized automatically, as TVM does with VTA_MAX_XFER.
        Tokens do not carry across runs, so the cut must fall where every pushed
        token has been popped; otherwise :class:`StreamStateError` is raised.
    dump_file : file, optional
        Where dumps go (default: ``sys.stdout`` at dump time).

    Attributes
    ----------
    config : VTAConfig
    isa : ISA
    device : Device
    stats : dict
        ``syncs`` (runs) and ``auto_syncs`` (runs forced by ``max_xfer``).
    """

    def __init__(self, device: Device, debug=DebugFlag(0), *, max_xfer: int = VTA_MAX_XFER,
                 dump_file=None):
        if not isinstance(device, Device):
            raise InvalidArgumentError(f"Runtime(device=...): expected a vtakit.sim Device, got "
                                       f"{type(device).__name__}")
        self.device = device
        self.config = device.config
        self.isa = isa_for(self.config)
        self.debug = DebugFlag(debug)
        if max_xfer < (_RESERVE + 2) * self.config.insn_bytes:
            raise InvalidArgumentError(f"max_xfer={max_xfer} bytes cannot hold even one "
                                       "instruction plus the end-of-stream fences")
        self.max_xfer = max_xfer
        self.dump_file = dump_file
        self._buffers: dict[int, Buffer] = {}
        self._stream = _Stream(self)
        self._words = self._stream._words                # checked kernels -> encoded uops
        self._uop_buf: Buffer | None = None              # device copies, reused across syncs
        self._insn_buf: Buffer | None = None
        self._finalized: tuple[int, int] | None = None  # (insn_addr, count) once finalized
        self._finalized_insns: list | None = None       # its linked instructions
        self.stats = dict(syncs=0, auto_syncs=0)

    # ------------------------------------------------------------------ buffers

    def alloc(self, nbytes: int) -> Buffer:
        """Allocate a page-aligned device buffer of ``nbytes`` bytes."""
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise InvalidArgumentError(f"alloc({nbytes}): size must be positive")
        buf = Buffer(self.device.alloc(nbytes), nbytes)
        self._buffers[buf.addr] = buf
        return buf

    def view(self, buf: Buffer, offset: int, nbytes: int) -> Buffer:
        """``nbytes`` of ``buf`` from byte ``offset``, usable wherever a buffer is (bind,
        upload, download) while ``buf`` is live; a view is not freed."""
        self._live(buf, "view")
        if offset < 0 or nbytes <= 0 or offset + nbytes > buf.nbytes:
            raise DramRangeError(f"view of {nbytes} bytes at offset {offset} overruns the "
                                 f"{buf.nbytes}-byte buffer at 0x{buf.addr:x}")
        return Buffer(buf.addr + offset, nbytes, buf.addr if buf.base is None else buf.base)

    def free(self, buf: Buffer) -> None:
        """Free a buffer allocated by :meth:`alloc`."""
        self._live(buf, "free")
        if buf.base is not None:
            raise BufferHandleError(f"free: {buf!r} is a view; free the buffer it views")
        del self._buffers[buf.addr]
        self.device.free(buf.addr)

    def upload(self, buf: Buffer, array, offset: int = 0) -> None:
        """Copy the raw bytes of a numpy array into a buffer at byte ``offset``."""
        self._live(buf, "upload")
        data = np.ascontiguousarray(array)
        if offset < 0 or offset + data.nbytes > buf.nbytes:
            raise DramRangeError(f"upload of {data.nbytes} bytes at offset {offset} overruns the "
                                 f"{buf.nbytes}-byte buffer at 0x{buf.addr:x}")
        self.device.write(buf.addr + offset, data.view(np.uint8).reshape(-1))

    def download(self, buf: Buffer, dtype, shape, offset: int = 0) -> np.ndarray:
        """Read ``shape`` elements of ``dtype`` from a buffer at byte ``offset``."""
        self._live(buf, "download")
        dtype = np.dtype(dtype)
        shape = (shape,) if np.isscalar(shape) else tuple(shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if offset < 0 or offset + nbytes > buf.nbytes:
            raise DramRangeError(f"download of {nbytes} bytes at offset {offset} overruns the "
                                 f"{buf.nbytes}-byte buffer at 0x{buf.addr:x}")
        return self.device.read(buf.addr + offset, nbytes).view(dtype).reshape(shape)

    def _live(self, buf, call: str) -> Buffer:
        whole = (self._buffers.get(buf.addr if buf.base is None else buf.base)
                 if isinstance(buf, Buffer) else None)
        if whole is None or not (whole == buf or buf.base is not None and whole.addr <= buf.addr
                                 and buf.addr + buf.nbytes <= whole.addr + whole.nbytes):
            raise BufferHandleError(f"{call}: {buf!r} is not a live buffer of this runtime "
                                    "(freed, or not allocated by Runtime.alloc)")
        return buf

    def _buffer_slot(self, buf, call: str) -> Slot:
        self._live(buf, call)
        return Slot(f"buffer_{buf.addr:x}", buf.nbytes, buf.addr)

    # ------------------------------------------------------------------- DMA

    def load_2d(self, mem_type, sram_base, buf, elem_offset, x_size, y_size, x_stride,
                x_pad_before=0, y_pad_before=0, x_pad_after=0, y_pad_after=0) -> None:
        """Queue a 2-D DMA load (reference 3.3) of INP, WGT or ACC elements.

        ``dram_base = buf.addr // elem_bytes + elem_offset``; rows are ``x_stride``
        elements apart in DRAM and land contiguously (with zero padding) in SRAM
        from ``sram_base``. INP/WGT loads run on the load stage, ACC on compute.
        """
        self._stream.load_2d(mem_type, sram_base, buf, elem_offset, x_size, y_size, x_stride,
                             x_pad_before, y_pad_before, x_pad_after, y_pad_after)
        self._check_overflow()

    def store_2d(self, sram_base, buf, elem_offset, x_size, y_size, x_stride) -> None:
        """Queue a 2-D store of OUT elements ``[sram_base, sram_base + x_size*y_size)``
        to DRAM rows ``x_stride`` elements apart (reference 3.7)."""
        self._stream.store_2d(sram_base, buf, elem_offset, x_size, y_size, x_stride)
        self._check_overflow()

    # ---------------------------------------------------------------- kernels

    def push_gemm(self, kernel: UopKernel) -> None:
        """Queue a GEMM kernel: a LOAD UOP if it is not resident, then the GEMM instruction."""
        self._stream.push_gemm(kernel)
        self._kernel_queued()

    def push_alu(self, kernel: UopKernel) -> None:
        """Queue an ALU kernel: a LOAD UOP if it is not resident, then the ALU instruction."""
        self._stream.push_alu(kernel)
        self._kernel_queued()

    def _kernel_queued(self):
        if self._stream.staging_uops:
            self._uop_buf = self._ensure(self._uop_buf, self._stream.staging_uops
                                         * self.config.uop_elem_bytes)
        self._check_overflow()

    def _before_stage(self, kernel):
        st = self._stream
        if st.staging_uops and (st.staging_uops + kernel.size) * self.config.uop_elem_bytes \
                > self.max_xfer:
            self._auto_sync()

    # ----------------------------------------------------------- dependencies

    def dep_push(self, src, dst) -> None:
        """Push a token from stage ``src`` to neighbouring stage ``dst`` after ``src``'s
        work queued so far (folded into its last instruction when possible)."""
        self._stream.dep_push(src, dst)

    def dep_pop(self, src, dst) -> None:
        """Make ``dst``'s next instruction wait for a token from ``src``."""
        self._stream.dep_pop(src, dst)

    # -------------------------------------------------------------- programs

    def bind(self, program: Program, buffers: dict) -> None:
        """Append a :class:`~.program.Program` to the stream with its slots bound to
        buffers of this runtime (``{slot name: Buffer}``): every relocated
        ``dram_base`` is patched to the buffer's address and the program's uops join
        the stream's staging. :meth:`synchronize` runs it. Token pops pending in the
        stream and at the program's end behave as if the program's instructions had
        been queued one by one (:meth:`ProgramBuilder.include`); kernels queued after
        it are loaded into the uop SRAM again. If the stream plus the program would
        exceed ``max_xfer``, the stream is synchronized first.

        Raises
        ------
        InvalidArgumentError
            If the program is for another config, or a slot has no buffer (or a
            buffer no slot).
        BufferHandleError, DramRangeError
            If a buffer is not live, is smaller than its slot, or a transfer would
            reach past 2^32.
        StreamStateError
            If the stream is finalized, or the program alone exceeds ``max_xfer``.
        """
        st = self._stream
        resolved = st.resolve(program, buffers, call="bind")
        self._start_push()
        insn_room = (len(program) + _RESERVE) * self.config.insn_bytes
        uop_room = len(program.uops) * self.config.uop_elem_bytes
        if insn_room > self.max_xfer or uop_room > self.max_xfer:
            raise StreamStateError(
                f"bind({program.name or 'program'}): {len(program)} instructions and "
                f"{len(program.uops)} uops do not fit one stream of max_xfer="
                f"{self.max_xfer} bytes; raise max_xfer")
        if ((len(st) + len(program) + _RESERVE) * self.config.insn_bytes > self.max_xfer
                or (st.staging_uops + len(program.uops)) * self.config.uop_elem_bytes
                > self.max_xfer):
            self._auto_sync()
        st.append_resolved(program, resolved)
        if st.staging_uops:
            self._uop_buf = self._ensure(self._uop_buf,
                                         st.staging_uops * self.config.uop_elem_bytes)

    def fits(self, *programs: Program, slack: int = 8) -> bool:
        """Whether :meth:`bind` can append ``programs`` to the pending stream without the
        stream reaching ``max_xfer`` (which would synchronize it first), with ``slack``
        instructions to spare per program (a chain boundary adds a few,
        :mod:`.chain`)."""
        st = self._stream
        n = len(st) + sum(len(p) + slack for p in programs) + _RESERVE
        u = st.staging_uops + sum(len(p.uops) for p in programs)
        return (n * self.config.insn_bytes <= self.max_xfer
                and u * self.config.uop_elem_bytes <= self.max_xfer)

    # ------------------------------------------------------------ the stream

    @property
    def instructions(self) -> list:
        """The pending stream as :class:`~vtakit.hw.isa.Insn` objects, addresses resolved."""
        if self._finalized is not None:         # frozen until reset: linked once at commit
            return list(self._finalized_insns)
        return self._link(self._stream.build())

    @property
    def uops(self) -> np.ndarray:
        """The uop staging area of the pending stream (uint32 words)."""
        return self._stream.uops

    def _link(self, program: Program) -> list:
        bases = {UOPS: self._uop_buf.addr} if self._uop_buf is not None else {}
        return program.link(bases)

    def _start_push(self):
        if self._finalized is not None:
            raise StreamStateError("the stream is finalized; call synchronize() to run it or "
                                   "reset() to discard it before queueing more work")

    def _check_overflow(self):
        if (len(self._stream) + _RESERVE) * self.config.insn_bytes > self.max_xfer:
            self._auto_sync()

    def _auto_sync(self):
        unbalanced = {q: n for q, n in self._stream.token_balance().items() if n}
        if unbalanced:
            detail = ", ".join(f"{q} {'+' if n > 0 else ''}{n}" for q, n in unbalanced.items())
            raise StreamStateError(
                f"the stream reached max_xfer={self.max_xfer} bytes at instruction "
                f"{len(self._stream)}, where it cannot be cut: token queues are unbalanced "
                f"(pushes - pops: {detail}), so the next run would deadlock; synchronize() "
                "at a point where every pushed token has been popped, or raise max_xfer")
        self.stats["auto_syncs"] += 1
        self.synchronize()

    def _ensure(self, buf: Buffer | None, nbytes: int) -> Buffer:
        """A device buffer of at least ``nbytes``: ``buf`` if big enough, else a new one
        (sizes grow by doubling, so a long session reallocates a handful of times)."""
        if buf is not None and buf.nbytes >= nbytes:
            return buf
        size = PAGE_BYTES
        while size < nbytes:
            size *= 2
        if buf is not None:
            self.device.free(buf.addr)
        return Buffer(self.device.alloc(size), size)

    def _commit(self) -> tuple[int, int]:
        """Append fences + FINISH, write uops and instructions to device DRAM."""
        if self._finalized is not None:
            return self._finalized
        st = self._stream
        if self.debug & DebugFlag.FORCE_SERIAL:
            st.rewrite_serial()
        st.finish()
        if st.staging_uops:
            self.device.write(self._uop_buf.addr, st.uops)
        self._finalized_insns = self._link(st.build())
        words = [insn.word for insn in self._finalized_insns]
        self._insn_buf = self._ensure(self._insn_buf, len(words) * self.config.insn_bytes)
        self.device.write(self._insn_buf.addr, np.frombuffer(insns_to_bytes(words), np.uint8))
        if self.debug & (DebugFlag.DUMP_INSN | DebugFlag.DUMP_UOP):
            self._dump(words)
        self._finalized = (self._insn_buf.addr, len(words))
        return self._finalized

    def _dump(self, words):
        out = self.dump_file or sys.stdout
        if self.debug & DebugFlag.DUMP_INSN:
            print(f"There are {len(words)} instructions", file=out)
            for line in self.isa.disasm(words):
                print(line, file=out)
        if self.debug & DebugFlag.DUMP_UOP:
            uops = self.uops
            print(f"There are {len(uops)} uops", file=out)
            for k, w in enumerate(uops):
                print(f"{k:6d}: {self.isa.decode_uop(int(w))}", file=out)

    def finalize(self) -> DramImage:
        """End the stream (fences + FINISH), write it to device DRAM and return the
        whole device DRAM as a :class:`~vtakit.runtime.image.DramImage` (the program).
        The stream stays pending: :meth:`synchronize` runs it, :meth:`reset` drops it."""
        insn_addr, count = self._commit()
        dram = self.device.read(0, self.device.dram.size)
        return DramImage(dram, insn_addr, count, config=self.device.config.to_dict())

    def synchronize(self) -> RunResult:
        """Finalize the stream if needed, run it on the device and reset the queues
        (the uop cache is invalidated: nothing is assumed resident across runs).
        An empty stream runs nothing and returns an empty RunResult."""
        if self._finalized is None and self._stream.empty:
            return RunResult()
        try:
            insn_addr, count = self._commit()
            self.device.streams += 1
            result = self.device.run(insn_addr, count)
            self.stats["syncs"] += 1
        finally:
            self.reset()
        return result

    def reset(self) -> None:
        """Discard the pending stream and invalidate the uop cache."""
        self._stream.reset()
        self._finalized = self._finalized_insns = None

    def release(self) -> None:
        """Free the device buffers of the instruction and micro-op streams (the runtime
        allocates them again when it next runs). Buffers from :meth:`alloc` stay the
        caller's to free."""
        self.reset()
        for buf in (self._insn_buf, self._uop_buf):
            if buf is not None:
                self.device.free(buf.addr)
        self._insn_buf = self._uop_buf = None

    @property
    def cache_stats(self) -> dict:
        """Uop cache counters: ``hits``, ``misses``, ``evictions``."""
        c = self._stream.cache
        return dict(hits=c.hits, misses=c.misses, evictions=c.evictions)

