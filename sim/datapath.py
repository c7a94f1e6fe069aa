"""The numpy datapath of the behavioral model: SRAMs, 2-D DMA, GEMM and ALU.

Every operation works on whole instructions with array operations (no per-lane
or per-micro-op Python loops on the common paths) and is exact: results equal
the sequential order of reference section 3 as pinned by the lead. A fault is
raised as :class:`Fault` (error code and detail); the device adds the module,
instruction index and disassembly.

A GEMM or ALU whose loop reaches an out-of-range SRAM index part way through
behaves as the RTL (``hw/compute.py`` squashes the bad micro-op in S1 after the
ones before it completed): every iteration before the first faulting one, in
p > q > k order, executes exactly as in a legal program (ACC and OUT writes,
``gemm_counter``/``alu_counter`` counting each executed micro-op), then
SRAM_OUT_OF_RANGE is raised. The indices checked are those the RTL checks: dst
always; for an accumulating GEMM also src (inp) and wgt; for an ALU with a tensor
operand also src (acc). A reset GEMM and an ALU with an immediate read no source.
Field faults (uop range, ALU opcode, SHR) are raised before any work.
"""

from __future__ import annotations

import numpy as np

from ..hw.errors import VtakitError
from ..hw.config import VTAConfig
from ..hw.spec import DRAM_ADDR_BITS, ErrorCode
from ..hw.isa import AluSemantics, MemType, alu_registers, alu_semantics, alu_violation, isa_for

__all__ = ["Fault", "SRAMs", "Counters", "COUNTER_KEYS"]

#: fsim's profiler keys (reference 4.6), in its order.
COUNTER_KEYS = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
                "out_store_nbytes", "gemm_counter", "alu_counter")


# One tile product sums BLOCK_IN int8 x int8 terms (|term| <= 2**14), so it is exact
# in float32 while BLOCK_IN * 2**14 < 2**24, and in float64 far beyond any config.
# Sums across iterations are then done in int32, which wraps modulo 2**32 as ACC does.
_EXACT_FLOAT32_TERMS = 1 << 10

# Group length up to which per-index sums are done as whole-array adds.
_SHORT_GROUP = 32


class Fault(VtakitError):
    """A datapath fault: ``code`` (an :class:`ErrorCode`) and a ``detail`` sentence."""

    def __init__(self, code, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail

    @property
    def label(self) -> str:
        return self.code.name


class Counters(dict):
    """fsim's byte and micro-op counters (reference 4.6), all starting at 0."""

    def __init__(self):
        super().__init__((k, 0) for k in COUNTER_KEYS)


def _wrap32(values: np.ndarray) -> np.ndarray:
    """int64 -> int32 modulo 2**32 (two's complement)."""
    return values.astype(np.int32, casting="unsafe")


def _first_bad(index: np.ndarray, depth: int):
    """Flat position of the first entry >= depth, or None."""
    if index.max() < depth:
        return None
    return int(np.argmax(index >= depth))


class SRAMs:
    """The on-chip memories of one VTA instance, shaped by the config.

    Parameters
    ----------
    config : VTAConfig

    Attributes
    ----------
    inp : ndarray, int8, (inp_depth, BATCH, BLOCK_IN)
    wgt : ndarray, int8, (wgt_depth, BLOCK_OUT, BLOCK_IN)
    acc : ndarray, int32, (acc_depth, BATCH, BLOCK_OUT)
    out : ndarray, int8, (out_depth, BATCH, BLOCK_OUT)
    uop : ndarray, uint32, (uop_depth,)
    alu_regs : dict of ndarray, int32, (BATCH, BLOCK_OUT)
        The per-lane ALU registers of the config's ISA extensions by name
        (:func:`~vtakit.hw.isa.alu_registers`; empty for the base ISA), reset to 0.

    The arrays are updated in place (tests and tools may write into them, e.g.
    ``srams.acc[:] = x``); rebinding an attribute to a new array is not supported.
    """

    def __init__(self, config: VTAConfig):
        c = self.config = config
        self.isa = isa_for(config)
        self.inp = np.zeros((c.inp_depth, c.batch, c.block_in), np.int8)
        self.wgt = np.zeros((c.wgt_depth, c.block_out, c.block_in), np.int8)
        self.acc = np.zeros((c.acc_depth, c.batch, c.block_out), np.int32)
        self.out = np.zeros((c.out_depth, c.batch, c.block_out), np.int8)
        self.uop = np.zeros(c.uop_depth, np.uint32)
        self.alu_regs = {name: np.zeros((c.batch, c.block_out), np.int32)
                         for name in alu_registers(c)}
        # Row views (one row of lanes per entry) and depths, looked up per instruction.
        self._acc_rows = self.acc.reshape(c.acc_depth, -1)
        self._out_rows = self.out.reshape(c.out_depth, -1)
        self._depth = {"acc": c.acc_depth, "inp": c.inp_depth, "wgt": c.wgt_depth,
                       "uop": c.uop_depth}
        # (array, SRAM name, little-endian element dtype) per LOAD memory type
        self._load_target = {
            MemType.INP: (self.inp, "inp", np.dtype("i1")),
            MemType.WGT: (self.wgt, "wgt", np.dtype("i1")),
            MemType.ACC: (self.acc, "acc", np.dtype("<i4")),
        }

    # ------------------------------------------------------------------ DMA

    @staticmethod
    def _dram_window(dram: np.ndarray, base: int, nelems: int, ebytes: int, what: str):
        """``nelems`` elements of ``ebytes`` at element address ``base``, as (nelems, ebytes)."""
        start, end = base * ebytes, (base + nelems) * ebytes
        if end > 1 << DRAM_ADDR_BITS:     # the hardware code: a byte beyond the 32-bit address space
            raise Fault(ErrorCode.DRAM_OUT_OF_RANGE,
                        f"{what} DRAM bytes [0x{start:x}, 0x{end:x}) pass the 32-bit byte "
                        "address space (every byte address must be < 0x100000000)")
        if end > len(dram):   # inside the address space, beyond this image: no hardware code
            raise Fault(ErrorCode.DRAM_IMAGE,
                        f"{what} DRAM bytes [0x{start:x}, 0x{end:x}) outside the image "
                        f"[0, 0x{len(dram):x})")
        return dram[start:end].reshape(nelems, ebytes)

    @classmethod
    def _dram_rows(cls, dram, base, xs, ys, stride, ebytes, what):
        """The 2-D DRAM region of a LOAD/STORE as a (ys, xs, ebytes) uint8 array: a view
        into ``dram`` when rows do not overlap, else a copy (None for STORE callers)."""
        window = cls._dram_window(dram, base, (ys - 1) * stride + xs, ebytes, what)
        if ys == 1 or stride == xs:
            return window.reshape(ys, xs, ebytes)
        full = (base + ys * stride) * ebytes
        if stride > xs and full <= len(dram):      # whole pitch rows: reshape and slice
            return dram[base * ebytes:full].reshape(ys, stride, ebytes)[:, :xs]
        if stride > xs:
            return None                            # last row ends the image: no view
        return window[np.arange(ys)[:, None] * stride + np.arange(xs)]

    @staticmethod
    def _check_sram(name: str, base: int, count: int, depth: int, what: str):
        if base + count > depth:
            raise Fault(ErrorCode.SRAM_OUT_OF_RANGE,
                        f"{name} index {base + count - 1} out of range (depth {depth}): "
                        f"{what} covers {name}[{base}, {base + count})")

    def load(self, insn, dram: np.ndarray, counters: Counters) -> None:
        """Execute a LOAD with ``x_size > 0`` (callers route NOPs away)."""
        f = insn.fields
        mt = f["memory_type"]
        if mt == MemType.UOP:
            return self._load_uop(insn, dram, counters)
        if mt not in self._load_target:
            name = f" ({MemType(mt).name})" if mt in MemType._value2member_map_ else ""
            raise Fault(ErrorCode.ILLEGAL_MEMORY_TYPE,
                        f"LOAD memory_type {mt}{name} is illegal; a LOAD with x_size > 0 "
                        "moves UOP (0), WGT (1), INP (2) or ACC (3)")
        sram, name, _ = self._load_target[mt]
        ebytes = self.config.elem_bytes(mt)
        xs, ys, stride, base = f["x_size"], f["y_size"], f["x_stride"], f["sram_base"]
        y0, y1, x0, x1 = f["y_pad_0"], f["y_pad_1"], f["x_pad_0"], f["x_pad_1"]
        x_total, y_total = x0 + xs + x1, y0 + ys + y1
        self._check_sram(name, base, x_total * y_total, len(sram),
                         f"LOAD {MemType(mt).name} of {y_total} rows x {x_total} elements")
        rows = None
        if ys:
            rows = self._dram_rows(dram, f["dram_base"], xs, ys, stride, ebytes, "LOAD reads")
            if rows is None:
                window = self._dram_window(dram, f["dram_base"], (ys - 1) * stride + xs,
                                           ebytes, "LOAD reads")
                rows = window[np.arange(ys)[:, None] * stride + np.arange(xs)]
        # The destination range as raw bytes, (y_total, x_total, ebytes): lanes are
        # little-endian in DRAM and in these arrays alike.
        dst = sram[base:base + x_total * y_total].view(np.uint8).reshape(
            y_total, x_total, ebytes)
        dst[:y0] = 0
        dst[y0 + ys:] = 0
        dst[y0:y0 + ys, :x0] = 0
        dst[y0:y0 + ys, x0 + xs:] = 0
        if ys:
            dst[y0:y0 + ys, x0:x0 + xs] = rows
        counters[f"{name}_load_nbytes"] += xs * ys * ebytes

    def _load_uop(self, insn, dram, counters) -> None:
        f = insn.fields
        if f["y_size"] != 1 or f["y_pad_0"] or f["y_pad_1"] or f["x_pad_0"] or f["x_pad_1"]:
            raise Fault(ErrorCode.ILLEGAL_FIELD,
                        f"LOAD UOP needs y_size=1 and all pads 0, got y_size={insn.y_size} "
                        f"pads y={insn.y_pad_0},{insn.y_pad_1} x={insn.x_pad_0},{insn.x_pad_1}")
        xs, base = f["x_size"], f["sram_base"]
        self._check_sram("uop", base, xs, self.config.uop_depth, f"LOAD UOP of {xs} micro-ops")
        window = self._dram_window(dram, f["dram_base"], xs, 4, "LOAD reads")
        self.uop[base:base + xs].view(np.uint8).reshape(xs, 4)[...] = window
        counters["uop_load_nbytes"] += xs * 4

    def store(self, insn, dram: np.ndarray, counters: Counters) -> None:
        """Execute a STORE with ``x_size > 0``: OUT -> DRAM."""
        f = insn.fields
        if f["memory_type"] != MemType.OUT:
            raise Fault(ErrorCode.ILLEGAL_MEMORY_TYPE,
                        f"STORE memory_type {insn.memory_type} is illegal; a STORE with "
                        f"x_size > 0 must read OUT ({int(MemType.OUT)})")
        if f["y_pad_0"] or f["y_pad_1"] or f["x_pad_0"] or f["x_pad_1"]:
            raise Fault(ErrorCode.ILLEGAL_FIELD,
                        f"STORE pads must be 0, got y={insn.y_pad_0},{insn.y_pad_1} "
                        f"x={insn.x_pad_0},{insn.x_pad_1}")
        xs, ys, stride, base = f["x_size"], f["y_size"], f["x_stride"], f["sram_base"]
        ebytes = self.config.out_elem_bytes
        self._check_sram("out", base, xs * ys, len(self.out),
                         f"STORE of {ys} rows x {xs} elements")
        if not ys:
            return
        src = self.out[base:base + xs * ys].view(np.uint8).reshape(ys, xs, ebytes)
        if stride >= xs:
            dst = self._dram_rows(dram, f["dram_base"], xs, ys, stride, ebytes, "STORE writes")
            if dst is not None:
                dst[...] = src
                counters["out_store_nbytes"] += xs * ys * ebytes
                return
        # Overlapping rows (the later row wins, as in sequential order), or pitch rows
        # that would run past the image: row by row.
        window = self._dram_window(dram, f["dram_base"], (ys - 1) * stride + xs, ebytes,
                                   "STORE writes")
        for r in range(ys):
            window[r * stride:r * stride + xs] = src[r]
        counters["out_store_nbytes"] += xs * ys * ebytes

    # -------------------------------------------------------------- compute

    @staticmethod
    def _loop_indices(insn, uop_fields: dict, factors):
        """Index arrays over (p, q, k) flattened in sequential order, one per
        ``(uop field, factor_out, factor_in)``."""
        f = insn.fields
        p = np.arange(f["iter_out"], dtype=np.int64)[:, None, None]
        q = np.arange(f["iter_in"], dtype=np.int64)[None, :, None]
        out = []
        for field, f_out, f_in in factors:
            u = uop_fields[field][None, None, :]
            out.append((u + p * f[f_out] + q * f[f_in]).ravel())
        return out

    def _uops(self, insn):
        """Decoded micro-ops of the instruction, or None when it does nothing."""
        f = insn.fields
        bgn, end, depth = f["uop_bgn"], f["uop_end"], self._depth["uop"]
        if end < bgn or end > depth:
            raise Fault(ErrorCode.ILLEGAL_FIELD,
                        f"uop range [{bgn}, {end}) is illegal; need uop_bgn <= uop_end <= "
                        f"{depth} (uop depth)")
        if end == bgn or f["iter_out"] == 0 or f["iter_in"] == 0:
            return None
        return self.isa.decode_uops(self.uop[bgn:end])

    def _range_check(self, insn, checks):
        """``checks``: (index array, sram name, depth, uop field). Returns ``(n, fault)``:
        the number of iterations before the first bad one in sequential order and the
        :class:`Fault` naming it (and within it the first bad field), or ``(None, None)``
        when every index is in range. The caller executes the first ``n`` iterations,
        then raises the fault (as the RTL does)."""
        first = None
        for idx, name, depth, field in checks:
            pos = _first_bad(idx, depth)
            if pos is not None and (first is None or pos < first[0]):
                first = (pos, idx, name, depth, field)
        if first is None:
            return None, None
        pos, idx, name, depth, field = first
        nk = insn.uop_end - insn.uop_bgn
        p, rem = divmod(pos, insn.iter_in * nk)
        q, k = divmod(rem, nk)
        return pos, Fault(ErrorCode.SRAM_OUT_OF_RANGE,
                          f"{name} index {int(idx[pos])} out of range (depth {depth}) at "
                          f"iteration p={p} q={q} uop {insn.uop_bgn + k} ({field})")

    def gemm(self, insn, counters: Counters) -> None:
        """GEMM: reset, or ``ACC[a] += INP[x] . WGT[w]^T`` with int32 wrap-around.

        On an out-of-range index the iterations before it execute, then it raises."""
        uops = self._uops(insn)
        if uops is None:
            return
        depth = self._depth
        if insn.fields["reset_reg"]:
            (dst,) = self._loop_indices(insn, uops, [("dst_idx", "dst_factor_out",
                                                       "dst_factor_in")])
            n, fault = self._range_check(insn, [(dst, "acc", depth["acc"], "dst_idx")])
            self._acc_rows[dst[:n]] = 0   # OUT untouched (pinned); not counted (RTL)
            if fault is not None:
                raise fault
            return
        dst, src, wgt = self._loop_indices(insn, uops, [
            ("dst_idx", "dst_factor_out", "dst_factor_in"),
            ("src_idx", "src_factor_out", "src_factor_in"),
            ("wgt_idx", "wgt_factor_out", "wgt_factor_in")])
        n, fault = self._range_check(insn, [(dst, "acc", depth["acc"], "dst_idx"),
                                            (src, "inp", depth["inp"], "src_idx"),
                                            (wgt, "wgt", depth["wgt"], "wgt_idx")])
        if fault is not None:
            dst, src, wgt = dst[:n], src[:n], wgt[:n]
        if len(dst):
            # Accumulation into ACC is a sum modulo 2**32, so the sequential order of
            # (p, q, k) cannot change the result: compute every product in any order.
            order, rows = self._products(src, wgt)             # exact float64 products
            touched, delta = _sum_by_index(dst[order], rows.astype(np.int32))
            new = self._acc_rows[touched] + delta     # int32 arithmetic wraps modulo 2**32
            self._acc_rows[touched] = new
            self._out_rows[touched] = new.astype(np.int8, casting="unsafe")
            counters["gemm_counter"] += len(dst)
        if fault is not None:
            raise fault

    def _products(self, src: np.ndarray, wgt: np.ndarray):
        """``INP[src[n]] . WGT[wgt[n]]^T`` for every n as exact float ``(n, B*BO)``
        rows, in the order ``order`` (iterations sorted by weight tile).

        Returns ``(order, rows)``.
        """
        b, bi, bo = self.inp.shape[1], self.inp.shape[2], self.wgt.shape[1]
        ft = np.float32 if bi <= _EXACT_FLOAT32_TERMS else np.float64
        n = len(src)
        order = np.argsort(wgt, kind="stable")
        w_sorted = wgt[order]
        starts = _group_starts(w_sorted)
        x = self.inp[src[order]].astype(ft)            # (n, B, BI)
        ends = np.append(starts[1:], n)
        sizes = ends - starts
        if len(starts) * 8 > n:
            # Mostly distinct weight tiles: one batched matmul over gathered tiles.
            w = self.wgt[w_sorted].astype(ft)          # (n, BO, BI)
            rows = np.matmul(x, w.transpose(0, 2, 1))
        elif (sizes == sizes[0]).all():
            # Equal groups (the usual loop nests): one stacked matmul, tile by tile.
            w = self.wgt[w_sorted[starts]].astype(ft)  # (groups, BO, BI)
            rows = np.matmul(x.reshape(len(starts), -1, bi), w.transpose(0, 2, 1))
        else:
            # Few distinct tiles of unequal use: one BLAS matmul per weight tile.
            rows = np.empty((n * b, bo), ft)
            x = x.reshape(-1, bi)
            for s, e in zip((starts * b).tolist(), (ends * b).tolist()):
                rows[s:e] = x[s:e] @ self.wgt[w_sorted[s // b]].T.astype(ft)
        return order, rows.reshape(n, b * bo)

    def alu(self, insn, counters: Counters) -> None:
        """An ALU instruction (an opcode of :data:`~vtakit.hw.isa.ALU_OPS`) over the loop
        nest, exact in sequential order."""
        f = insn.fields
        violation = alu_violation(f["alu_opcode"], f["use_imm"], f["imm"], self.config)
        if violation is not None:
            raise Fault(ErrorCode.ILLEGAL_FIELD, "ALU " + violation)
        op = alu_semantics(f["alu_opcode"], self.config)
        register = op.loads_register(f["use_imm"], f["imm"])
        # An opcode without a lane function fails here, before any work.
        fn = None if register else op.function(
            f["imm"], {k: v.reshape(-1) for k, v in self.alu_regs.items()})
        imm = f["imm"] if f["use_imm"] else None
        uops = self._uops(insn)
        if uops is None:
            return
        depth = self._depth["acc"]
        if imm is None:
            dst, src = self._loop_indices(insn, uops, [
                ("dst_idx", "dst_factor_out", "dst_factor_in"),
                ("src_idx", "src_factor_out", "src_factor_in")])
            n, fault = self._range_check(insn, [(dst, "acc", depth, "dst_idx"),
                                                (src, "acc", depth, "src_idx")])
            if fault is not None:
                dst, src = dst[:n], src[:n]
        else:   # the uop's src field is ignored
            (dst,), src = self._loop_indices(insn, uops, [
                ("dst_idx", "dst_factor_out", "dst_factor_in")]), None
            n, fault = self._range_check(insn, [(dst, "acc", depth, "dst_idx")])
            if fault is not None:
                dst = dst[:n]
        if register is not None:      # loads an ALU register: no SRAM write
            if len(dst):
                self.alu_regs[register].reshape(-1)[:] = self._acc_rows[src[-1]]
                counters["alu_counter"] += len(dst)
        elif len(dst):
            acc = self._acc_rows
            touched = _alu_apply(acc, op, fn, dst, src, imm)
            self._out_rows[touched] = acc[touched].astype(np.int8, casting="unsafe")
            counters["alu_counter"] += len(dst)
        if fault is not None:
            raise fault


def _group_starts(values: np.ndarray) -> np.ndarray:
    """Positions where a sorted array starts a new run of equal values."""
    new = np.empty(len(values), dtype=bool)
    new[:1] = True
    np.not_equal(values[1:], values[:-1], out=new[1:])
    return np.flatnonzero(new)


def _sum_by_index(index: np.ndarray, values: np.ndarray):
    """Sorted unique indices and the row sums of ``values`` per index.

    Sums are in ``values.dtype``; for int32 they wrap modulo 2**32 like ACC.
    """
    n = len(index)
    if n == 1 or (index[1:] > index[:-1]).all():
        return index, values
    order = np.argsort(index, kind="stable")
    idx, values = index[order], values[order]
    starts = _group_starts(idx)
    size = n // len(starts)
    if n % len(starts) == 0 and (starts == np.arange(0, n, size)).all():
        # Every index used equally often (regular loop nests): a reshape and a sum,
        # as a few whole-array adds when the groups are short (numpy's strided
        # reduction is slower there).
        groups = values.reshape(len(starts), size, -1)
        if size <= _SHORT_GROUP:
            sums = groups[:, 0].copy()
            for j in range(1, size):
                sums += groups[:, j]
        else:
            sums = groups.sum(axis=1, dtype=values.dtype)
    else:
        # Differences of a running sum; exact for integers, wrapping or not.
        run = np.cumsum(values, axis=0, dtype=values.dtype)
        sums = run[np.append(starts[1:], n) - 1]
        sums[1:] -= run[starts[1:] - 1]
    return idx[starts], sums


def _repeat(op: AluSemantics, fn, a: np.ndarray, imm: int, times: np.ndarray) -> np.ndarray:
    """``fn`` (``op``'s lane function) applied ``times[i]`` times to row ``a[i]`` with the
    immediate ``imm``: the table's fast form if it gives one, else one application per round."""
    if op.repeat is not None:
        return op.repeat(a, imm, times)
    a = a.copy()
    for k in range(int(times.max())):
        more = times > k
        a[more] = fn(a[more], imm)
    return a


def _alu_apply(acc: np.ndarray, op: AluSemantics, fn, dst: np.ndarray, src,
               imm) -> np.ndarray:
    """Apply ``acc[dst[n]] = fn(acc[dst[n]], acc[src[n]] or imm)`` for n in order, exactly
    (``fn``: ``op``'s lane function, :meth:`~vtakit.hw.isa.AluSemantics.function`).

    Returns the destination rows (each once). Three paths, fastest first:
    distinct destinations with no read of an entry written earlier (one gather and
    one scatter); repeated destinations whose operands are never written earlier
    (a fold per destination: the table's ``repeat`` for an immediate, its ``reduce``
    ufunc for a tensor operand); anything else (chains through written entries, or an
    opcode without a ``reduce``) in dependency waves, each wave a gather-before-scatter
    over distinct destinations.
    """
    n = len(dst)
    counts = np.bincount(dst)
    distinct = counts.max() == 1
    if distinct:
        uniq = dst
    else:
        uniq = np.flatnonzero(counts)
        counts = counts[uniq]
    reads_written = False
    if src is not None:
        # Position of the first write of every row (n = never written).
        first_write = np.full(len(acc), n, dtype=np.int64)
        if distinct:
            first_write[dst] = np.arange(n)
        else:
            order = np.argsort(dst, kind="stable")
            starts = _group_starts(dst[order])
            first_write[uniq] = order[starts]      # stable: the first occurrence
        reads_written = bool((first_write[src] < np.arange(n)).any())
    if not reads_written:
        operand = imm if src is None else acc[src]
        if distinct:
            acc[dst] = fn(acc[dst], operand)
            return uniq
        if src is None:
            acc[uniq] = _repeat(op, fn, acc[uniq], imm, counts)
            return uniq
        if op.reduce is np.add:
            idx, total = _sum_by_index(dst, operand.astype(np.int64))
            acc[idx] = _wrap32(acc[idx].astype(np.int64) + total)
            return uniq
        if op.reduce is not None:
            op.reduce.at(acc, dst, operand)
            return uniq
    for wave in _waves(dst, src):
        d, s = dst[wave], src[wave]
        acc[d] = fn(acc[d], acc[s])
    return uniq


def _waves(dst: np.ndarray, src: np.ndarray):
    """Split iterations into waves that can each run as one gather-before-scatter.

    Iteration n goes to the first wave after the last earlier write of its
    destination and of its source (RAW, WAW), and no earlier than any earlier read of
    its destination (WAR is safe within a wave because all reads precede all writes).
    """
    last_write: dict[int, int] = {}
    last_read: dict[int, int] = {}
    level = np.empty(len(dst), dtype=np.int64)
    for n, (d, s) in enumerate(zip(dst.tolist(), src.tolist())):
        lv = max(last_write.get(d, -1) + 1, last_write.get(s, -1) + 1, last_read.get(d, 0))
        level[n] = lv
        last_write[d] = lv
        if last_read.get(s, -1) < lv:
            last_read[s] = lv
    order = np.argsort(level, kind="stable")
    bounds = np.flatnonzero(np.diff(level[order])) + 1
    return np.split(order, bounds)
