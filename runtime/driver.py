"""The runtime driver: a Pythonic equivalent of TVM VTA's runtime.cc (reference section 4).

It owns device buffers, builds one instruction stream (2-D loads and stores,
micro-op kernels cached in the uop SRAM, GEMM and ALU instructions, dependency
tokens folded into flags or NOPs), and at :meth:`Runtime.synchronize` writes
the micro-ops and instructions into device DRAM and runs them on any
:class:`~vtakit.runtime.device.Device`.

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

from ..hw.isa import MemType, Opcode, insns_to_bytes, isa_for
from ..hw.spec import DRAM_ADDR_BITS, MAX_PAD, PAD_BITS, XFER_BITS, dispatch_unit
from .device import Device, RunResult
from .dram import PAGE_BYTES
from .image import DramImage
from .deps import InsnQueue, Stage
from .errors import (BufferHandleError, DramRangeError, InvalidArgumentError, KernelError,
                     SramRangeError, StreamStateError)
from .kernel import UopKernel
from .uop_cache import UopCache

__all__ = ["Runtime", "Buffer", "DebugFlag", "VTA_MAX_XFER"]

#: Largest instruction or uop stream of one synchronize, in bytes (TVM's VTA_MAX_XFER).
VTA_MAX_XFER = 1 << 25
#: Instructions the end of a stream may still add (fences, FINISH), as runtime.cc reserves.
_RESERVE = 6
#: Checked-and-encoded kernels remembered across synchronizes (a bound, so a long session
#: with ever new kernels does not grow, unlike TVM's uop cache, apache/tvm#4246).
_MAX_CHECKED = 4096


class DebugFlag(enum.IntFlag):
    """Debug modes (TVM's VTASetDebugMode bit values)."""

    DUMP_INSN = 1 << 1
    DUMP_UOP = 1 << 2
    FORCE_SERIAL = 1 << 5


@dataclass(frozen=True)
class Buffer:
    """A device buffer: byte address in device DRAM (page aligned) and size in bytes."""

    addr: int
    nbytes: int


_FIELD16 = (1 << XFER_BITS) - 1


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
        self._queue = InsnQueue()
        self._cache = UopCache(self.config.uop_depth)
        self._words: dict[UopKernel, np.ndarray] = {}   # checked kernels -> encoded uops
        self._staged: dict[UopKernel, int] = {}         # kernel -> offset (uops) in staging
        self._staging: list[np.ndarray] = []
        self._staging_uops = 0
        self._uop_buf: Buffer | None = None              # device copies, reused across syncs
        self._insn_buf: Buffer | None = None
        self._finalized: tuple[int, int] | None = None  # (insn_addr, count) once finalized
        self.stats = dict(syncs=0, auto_syncs=0)
        self._tables: dict = {}

    # ------------------------------------------------------------------ buffers

    def alloc(self, nbytes: int) -> Buffer:
        """Allocate a page-aligned device buffer of ``nbytes`` bytes."""
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise InvalidArgumentError(f"alloc({nbytes}): size must be positive")
        buf = Buffer(self.device.alloc(nbytes), nbytes)
        self._buffers[buf.addr] = buf
        return buf

    def free(self, buf: Buffer) -> None:
        """Free a buffer allocated by :meth:`alloc`."""
        self._live(buf, "free")
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
        if not isinstance(buf, Buffer) or self._buffers.get(buf.addr) != buf:
            raise BufferHandleError(f"{call}: {buf!r} is not a live buffer of this runtime "
                                    "(freed, or not allocated by Runtime.alloc)")
        return buf

    # ------------------------------------------------------------------- DMA

    def load_2d(self, mem_type, sram_base, buf, elem_offset, x_size, y_size, x_stride,
                x_pad_before=0, y_pad_before=0, x_pad_after=0, y_pad_after=0) -> None:
        """Queue a 2-D DMA load (reference 3.3) of INP, WGT or ACC elements.

        ``dram_base = buf.addr // elem_bytes + elem_offset``; rows are ``x_stride``
        elements apart in DRAM and land contiguously (with zero padding) in SRAM
        from ``sram_base``. INP/WGT loads run on the load stage, ACC on compute.
        """
        try:
            mt = MemType(mem_type)
        except ValueError:
            mt = None
        if mt not in (MemType.INP, MemType.WGT, MemType.ACC):
            raise InvalidArgumentError(f"load_2d: memory type {mem_type!r} cannot be loaded; use "
                                       "MemType.INP, MemType.WGT or MemType.ACC (micro-ops are "
                                       "loaded by push_gemm/push_alu)")
        call = f"load_2d({mt.name})"
        args = dict(sram_base=sram_base, elem_offset=elem_offset, x_size=x_size, y_size=y_size,
                    x_stride=x_stride)
        pads = dict(x_pad_before=x_pad_before, y_pad_before=y_pad_before,
                    x_pad_after=x_pad_after, y_pad_after=y_pad_after)
        self._check_args(call, args, pads)
        self._live(buf, call)
        x_total = x_pad_before + x_size + x_pad_after
        y_total = y_pad_before + y_size + y_pad_after
        self._check_sram(call, mt, sram_base, x_total * y_total,
                         f"{x_total} x {y_total} elements with padding")
        dram_base = self._check_dram(call, mt, buf, elem_offset, x_size, y_size, x_stride)
        stage = dispatch_unit(Opcode.LOAD, mt)
        self._start_push()
        self._queue.create(stage, Opcode.LOAD, memory_type=int(mt), sram_base=sram_base,
                           dram_base=dram_base, y_size=y_size, x_size=x_size, x_stride=x_stride,
                           y_pad_0=y_pad_before, y_pad_1=y_pad_after, x_pad_0=x_pad_before,
                           x_pad_1=x_pad_after)
        self._check_overflow()

    def store_2d(self, sram_base, buf, elem_offset, x_size, y_size, x_stride) -> None:
        """Queue a 2-D store of OUT elements ``[sram_base, sram_base + x_size*y_size)``
        to DRAM rows ``x_stride`` elements apart (reference 3.7)."""
        call = "store_2d"
        self._check_args(call, dict(sram_base=sram_base, elem_offset=elem_offset, x_size=x_size,
                                    y_size=y_size, x_stride=x_stride), {})
        self._live(buf, call)
        self._check_sram(call, MemType.OUT, sram_base, x_size * y_size,
                         f"{x_size} x {y_size} elements")
        dram_base = self._check_dram(call, MemType.OUT, buf, elem_offset, x_size, y_size, x_stride)
        self._start_push()
        self._queue.create(Stage.STORE, Opcode.STORE, memory_type=int(MemType.OUT),
                           sram_base=sram_base, dram_base=dram_base, y_size=y_size,
                           x_size=x_size, x_stride=x_stride, y_pad_0=0, y_pad_1=0, x_pad_0=0,
                           x_pad_1=0)
        self._check_overflow()

    @staticmethod
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

    def _check_sram(self, call, mt, sram_base, count, what):
        depth = self.config.depth(mt)
        if sram_base + count > depth:
            name = {MemType.INP: "input", MemType.WGT: "weight", MemType.ACC: "accumulator",
                    MemType.OUT: "output"}[mt]
            raise SramRangeError(f"{call}: SRAM range [{sram_base}, {sram_base + count}) "
                                 f"({what}) exceeds the {name} buffer depth {depth}")

    def _check_dram(self, call, mt, buf, elem_offset, x_size, y_size, x_stride) -> int:
        elem = self.config.elem_bytes(mt)
        end = (elem_offset + (y_size - 1) * x_stride + x_size) * elem
        if end > buf.nbytes:
            raise DramRangeError(
                f"{call}: DRAM elements [{elem_offset}, {end // elem}) of {elem} bytes "
                f"(elem_offset={elem_offset}, y_size={y_size}, x_stride={x_stride}, "
                f"x_size={x_size}) end at byte {end}, past the {buf.nbytes}-byte buffer at "
                f"0x{buf.addr:x}")
        dram_base = buf.addr // elem + elem_offset
        # dram_base is an element address: the hardware faults (DRAM_OUT_OF_RANGE) on any
        # byte at or beyond 2**32, so the last byte is checked, not just the field.
        last = (dram_base + (y_size - 1) * x_stride + x_size) * elem - 1
        if last >= 1 << DRAM_ADDR_BITS:
            raise DramRangeError(
                f"{call}: the transfer's last DRAM byte 0x{last:x} (dram_base={dram_base} "
                f"elements of {elem} bytes, y_size={y_size}, x_stride={x_stride}, "
                f"x_size={x_size}) is beyond the 32-bit byte address space; every byte "
                "must be below 0x100000000")
        return dram_base

    # ---------------------------------------------------------------- kernels

    def push_gemm(self, kernel: UopKernel) -> None:
        """Queue a GEMM kernel: a LOAD UOP if it is not resident, then the GEMM instruction."""
        self._push_kernel(kernel, "gemm")

    def push_alu(self, kernel: UopKernel) -> None:
        """Queue an ALU kernel: a LOAD UOP if it is not resident, then the ALU instruction."""
        self._push_kernel(kernel, "alu")

    def _push_kernel(self, kernel, mode):
        call = f"push_{mode}"
        if not isinstance(kernel, UopKernel):
            raise InvalidArgumentError(f"{call}: expected a UopKernel, got {type(kernel).__name__}")
        if kernel.mode != mode:
            raise KernelError(f"{call}: got a {kernel.kind} kernel; use "
                              f"push_{kernel.mode} for it")
        words = self._words.get(kernel)
        if words is None:
            words = self._words[kernel] = kernel.check_config(self.config)
        self._start_push()
        start = self._cache.lookup(kernel)
        if start is None:
            offset = self._staged.get(kernel)
            if offset is None:
                if (self._staging_uops and (self._staging_uops + kernel.size)
                        * self.config.uop_elem_bytes > self.max_xfer):
                    self._auto_sync()
                offset = self._staged[kernel] = self._staging_uops
                self._staging.append(words)
                self._staging_uops += kernel.size
                self._uop_buf = self._ensure(self._uop_buf,
                                             self._staging_uops * self.config.uop_elem_bytes)
            start = self._cache.place(kernel, kernel.size)
            self._queue.create(Stage.COMPUTE, Opcode.LOAD, uop_offset=offset,
                               memory_type=int(MemType.UOP), sram_base=start,
                               dram_base=self._uop_dram_base(offset), y_size=1,
                               x_size=kernel.size, x_stride=kernel.size, y_pad_0=0, y_pad_1=0,
                               x_pad_0=0, x_pad_1=0)
        n_out, n_in, f_out, f_in = kernel.iterations()
        fields = dict(reset_reg=int(kernel.reset), uop_bgn=start, uop_end=start + kernel.size,
                      iter_out=n_out, iter_in=n_in, dst_factor_out=f_out[0],
                      dst_factor_in=f_in[0], src_factor_out=f_out[1], src_factor_in=f_in[1])
        if mode == "gemm":
            fields.update(wgt_factor_out=f_out[2], wgt_factor_in=f_in[2])
            self._queue.create(Stage.COMPUTE, Opcode.GEMM, **fields)
        else:
            fields.update(reset_reg=0, alu_opcode=int(kernel.alu_op),
                          use_imm=int(kernel.imm is not None), imm=kernel.imm or 0)
            self._queue.create(Stage.COMPUTE, Opcode.ALU, **fields)
        self._check_overflow()

    def _uop_dram_base(self, offset: int) -> int:
        # The staging buffer may move when it grows; LOAD UOPs keep their offset and
        # are re-resolved at every encoding.
        return self._uop_buf.addr // self.config.uop_elem_bytes + offset

    # ----------------------------------------------------------- dependencies

    def dep_push(self, src, dst) -> None:
        """Push a token from stage ``src`` to neighbouring stage ``dst`` after ``src``'s
        work queued so far (folded into its last instruction when possible)."""
        self._start_push()
        self._queue.dep_push(src, dst)

    def dep_pop(self, src, dst) -> None:
        """Make ``dst``'s next instruction wait for a token from ``src``."""
        self._start_push()
        self._queue.dep_pop(src, dst)

    # ------------------------------------------------------------ the stream

    @property
    def instructions(self) -> list:
        """The pending stream as decoded :class:`~vtakit.hw.isa.Insn` objects."""
        return [self.isa.decode(w) for w in self._encode()]

    @property
    def uops(self) -> np.ndarray:
        """The uop staging area of the pending stream (uint32 words)."""
        if not self._staging:
            return np.zeros(0, dtype=np.uint32)
        return np.concatenate(self._staging)

    def _encode(self) -> list[int]:
        words = []
        for insn in self._queue.insns:
            if insn.uop_offset is not None:
                insn.fields["dram_base"] = self._uop_dram_base(insn.uop_offset)
            words.append(self._encode_one(insn))
        return words

    def _encode_one(self, insn) -> int:
        """ISA encoding through a per-opcode table of (offset, mask, min, max) taken from
        the ISA's field tables; any out-of-range value goes to ``isa.encode`` for its error."""
        table = self._tables.get(insn.opcode)
        if table is None:
            fmt = self.isa.format(insn.opcode)
            table = self._tables[insn.opcode] = {
                f.name: (f.offset, f.mask, f.min, f.max) for f in fmt.fields}
        word = int(insn.opcode) << table["opcode"][0]
        for name, value in insn.fields.items():
            entry = table.get(name)
            if entry is None or not entry[2] <= value <= entry[3]:
                return self.isa.encode(insn.opcode, **insn.fields)
            word |= (value & entry[1]) << entry[0]
        return word

    def _start_push(self):
        if self._finalized is not None:
            raise StreamStateError("the stream is finalized; call synchronize() to run it or "
                                   "reset() to discard it before queueing more work")

    def _check_overflow(self):
        if (len(self._queue) + _RESERVE) * self.config.insn_bytes > self.max_xfer:
            self._auto_sync()

    def _auto_sync(self):
        unbalanced = {q: n for q, n in self._queue.token_balance().items() if n}
        if unbalanced:
            detail = ", ".join(f"{q} {'+' if n > 0 else ''}{n}" for q, n in unbalanced.items())
            raise StreamStateError(
                f"the stream reached max_xfer={self.max_xfer} bytes at instruction "
                f"{len(self._queue)}, where it cannot be cut: token queues are unbalanced "
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
        q = self._queue
        if self.debug & DebugFlag.FORCE_SERIAL:
            q.rewrite_serial()
        q.fence()
        assert not q.has_pending_pop()
        q.create(Stage.COMPUTE, Opcode.FINISH)
        if self._staging_uops:
            self.device.write(self._uop_buf.addr, self.uops)
        words = self._encode()
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
        if self._finalized is None and not self._queue.insns and not self._queue.has_pending_pop():
            return RunResult()
        try:
            insn_addr, count = self._commit()
            result = self.device.run(insn_addr, count)
            self.stats["syncs"] += 1
        finally:
            self.reset()
        return result

    def reset(self) -> None:
        """Discard the pending stream and invalidate the uop cache."""
        self._queue.clear()
        self._cache.invalidate()
        self._staged.clear()
        self._staging.clear()
        self._staging_uops = 0
        self._finalized = None
        if len(self._words) > _MAX_CHECKED:
            self._words.clear()

    @property
    def cache_stats(self) -> dict:
        """Uop cache counters: ``hits``, ``misses``, ``evictions``."""
        c = self._cache
        return dict(hits=c.hits, misses=c.misses, evictions=c.evictions)

