"""Random actions for the differential fuzzer (:mod:`vtakit.sim.fuzz`).

:func:`generate_program` draws a :class:`~vtakit.sim.fuzz_program.FuzzProgram`:
LOADs of every memory type with random padding and strides, micro-op kernels
(fresh or reused ranges) driving GEMMs (reset or accumulating, with repeated
destinations: accumulate hazards) and ALU ops (every supported opcode, immediate
and tensor operands), STOREs, SRAM bases across the whole depth, double-buffered
tile loops, long token chains, token queues filled to capacity, with late opcodes
(``requant``, ``requant2``) late chains (:meth:`_Gen.late_chain`: a late micro-op and a
reader of its dst 1..L+1 issue slots later, the compute module's hold) and, in some
programs, one instruction built to fault. Every index and loop stays in range
except in the faulting instruction; the builder adds the dependency tokens.
"""

from __future__ import annotations

import numpy as np

from ..hw.config import VTAConfig
from ..hw.fixedpoint import pack_requant_word
from ..hw.alu import late_ops, late_stages
from ..hw.isa import (REQ_LOAD_M, REQ_LOAD_P, REQ_RUN, AluOp, MemType, Opcode, alu_entry,
                      alu_ops, alu_registers, illegal_alu_opcodes, isa_for)
from ..hw.spec import IMM_MAX, IMM_MIN
from .fuzz_program import (INPUT_BYTES, INPUT_START, INSN_START, MODULES, OUTPUT_BYTES,
                           OUTPUT_START, QUEUES, UOP_BYTES, UOP_START, Action, FuzzProgram)

__all__ = ["generate_program", "ILLEGAL_KINDS", "illegal_kinds"]

#: The deliberately illegal instructions a program may contain (one at most).
ILLEGAL_KINDS = ("opcode", "load memory_type", "store memory_type", "store pads",
                 "uop load shape", "alu opcode", "alu tensor operand", "alu imm range",
                 "uop range", "load sram range", "store sram range", "gemm sram range",
                 "dep flag", "dram 4 GiB")


def _no_tensor_ops(config=None):
    """ALU opcodes legal in ``config`` that take no tensor operand (SHR)."""
    return [e for e in alu_ops(config) if not e.tensor]


def _restricted_imm_ops(config=None):
    """ALU opcodes legal in ``config`` whose immediates are a part of the 16-bit field
    (SHR; MULSHR's shift)."""
    return [e for e in alu_ops(config)
            if e.imm and e.imm_range != (IMM_MIN, IMM_MAX) or e.tensor_imm is not None]


def illegal_kinds(config=None) -> tuple:
    """:data:`ILLEGAL_KINDS` that the ALU table leaves possible in ``config`` (e.g. "alu
    opcode" only while some ``alu_opcode`` value is no legal opcode)."""
    possible = {"alu opcode": bool(illegal_alu_opcodes(config)),
                "alu tensor operand": bool(_no_tensor_ops(config)),
                "alu imm range": bool(_restricted_imm_ops(config))}
    return tuple(k for k in ILLEGAL_KINDS if possible.get(k, True))


def _requant_words(rng: np.random.Generator, n: int, params: bool = False) -> np.ndarray:
    """``n`` int32 words shaped for the requant opcodes' tensor operands: shifts (mostly
    -3..31), Q31 multipliers (mostly [2^30, 2^31), some negative), INT32_MIN/MAX and
    uniform values; with ``params`` (``requant2``) also REQ parameter words whose clamp is
    not empty (``lo <= hi``), so that REQ's results depend on its inputs."""
    kind = rng.choice(5, n, p=[0.35, 0.3, 0.08, 0.04, 0.23])
    words = rng.integers(-2**31, 2**31, n, dtype=np.int64)
    shifts = np.where(rng.random(n) < 0.9, rng.integers(-3, 32, n), rng.integers(-40, 41, n))
    mults = rng.integers(1 << 30, 1 << 31, n) * np.where(rng.random(n) < 0.8, 1, -1)
    words = np.select([kind == 0, kind == 1, kind == 2, kind == 3],
                      [shifts, mults, -2**31, 2**31 - 1], words)
    if params:
        bounds = np.sort(rng.integers(-128, 128, (2, n)), axis=0)
        exps = np.where(rng.random(n) < 0.7, rng.integers(-12, 2, n), rng.integers(-32, 32, n))
        p = pack_requant_word(exps, rng.integers(-128, 128, n), *bounds,
                              single_rounding=False).astype(np.int64)
        p |= rng.integers(0, 2, n) << 6                  # either rounding
        words = np.where(rng.random(n) < 0.3, p, words)
    return words.astype(np.int32)

_MAX_ITERS = 4096      # micro-op executions per GEMM/ALU (keeps RTL runs short)

#: The last bytes of the input area: ACC rows a late chain loads, in groups of four
#: (:data:`TABLE_KINDS`).
TABLE_BYTES = 4096
TABLE_START = INPUT_START + INPUT_BYTES - TABLE_BYTES
#: The rows of a group: a value to requantize (small, so that two passes keep
#: information), a small operand (a REQ bias, an RSHR shift: 1..5), a Q31 multiplier (RM,
#: the SRDHM/MULSHR operand) and an RP word (shift -4..0, wide clamp).
TABLE_KINDS = ("data", "small", "mult", "param")


def _table_rows(rng: np.random.Generator, rows: int, lanes: int) -> np.ndarray:
    """``rows`` x ``lanes`` int32 words, row ``r`` of kind ``TABLE_KINDS[r % 4]``."""
    n = rows * lanes
    data = np.where(rng.random(n) < 0.9, rng.integers(-300, 301, n), rng.integers(-5000, 5001, n))
    small = rng.integers(1, 6, n)
    mult = rng.integers(1 << 30, 1 << 31, n) * np.where(rng.random(n) < 0.85, 1, -1)
    single = rng.random(n) < 0.3
    param = pack_requant_word(rng.integers(-4, 1, n), rng.integers(-20, 21, n),
                              rng.integers(-128, -99, n), rng.integers(100, 128, n),
                              single_rounding=False).astype(np.int64) | (single.astype(np.int64) << 6)
    kinds = np.stack([data, small, mult, param]).reshape(4, rows, lanes)
    return kinds[np.arange(rows) % 4, np.arange(rows)].astype(np.int32)


class _Gen:
    def __init__(self, config: VTAConfig, rng: np.random.Generator, token_depth: int):
        self.c, self.rng, self.token_depth = config, rng, token_depth
        self.isa = isa_for(config)
        self.data = np.zeros(INSN_START, np.uint8)
        self.data[INPUT_START:INPUT_START + INPUT_BYTES] = rng.integers(
            0, 256, INPUT_BYTES, dtype=np.uint8)
        if alu_ops(config) != alu_ops():
            # Extension opcodes read shifts and multipliers from ACC rows: half of the
            # input area holds such words (ACC loads land there about half the time).
            half = INPUT_START + INPUT_BYTES // 2
            self.data[half:INPUT_START + INPUT_BYTES] = _requant_words(
                rng, INPUT_BYTES // 8, params=bool(alu_registers(config))).view(np.uint8)
        self.late = [alu_entry(op) for op in late_ops(config)]
        if self.late:
            # The end of the input area: ACC rows for late chains (``late_chain``).
            lanes = config.elem_bytes(MemType.ACC) // 4
            rows = TABLE_BYTES // config.elem_bytes(MemType.ACC)
            table = _table_rows(rng, rows, lanes).reshape(-1)
            self.data[TABLE_START:TABLE_START + TABLE_BYTES] = table.view(np.uint8)
        self.uop_next = UOP_START          # next free byte of the micro-op area
        self.uop_view = np.zeros(config.uop_depth, np.uint32)
        self.ranges: list = []             # (bgn, end) of loaded micro-op ranges
        self.actions: list = []

    # ------------------------------------------------------------ helpers

    def small(self, hi: int, big: int | None = None) -> int:
        """Mostly small sizes in [1, hi], sometimes up to ``big``."""
        if big is not None and self.rng.random() < 0.1:
            return int(self.rng.integers(1, big + 1))
        return int(self.rng.integers(1, hi + 1))

    def base(self, depth: int, size: int) -> int:
        """An SRAM base for ``size`` entries: across the whole depth, often at its ends."""
        top = depth - size
        r = self.rng.random()
        if r < 0.15:
            return 0
        if r < 0.3:
            return top
        return int(self.rng.integers(0, top + 1))

    def dram_elems(self, start: int, nbytes: int, ebytes: int, span: int) -> int:
        """An element address in an area with ``span`` elements after it."""
        first, count = start // ebytes, nbytes // ebytes
        return first + int(self.rng.integers(0, count - span + 1))

    def emit(self, action: Action) -> Action:
        self.actions.append(action)
        return action

    # ------------------------------------------------------------ actions

    def load(self, mt=None):
        c, rng = self.c, self.rng
        mt = MemType(mt if mt is not None else rng.choice([MemType.INP, MemType.WGT,
                                                          MemType.ACC]))
        depth, eb = c.depth(mt), c.elem_bytes(mt)
        area = INPUT_BYTES // eb
        while True:
            xs, ys = self.small(8, 32), self.small(3, 8)
            pads = [int(rng.integers(1, 16)) if rng.random() < 0.3 else 0 for _ in range(4)]
            stride = xs + (int(rng.integers(0, 5)) if rng.random() < 0.5 else 0)
            total = (pads[2] + xs + pads[3]) * (pads[0] + ys + pads[1])
            if total <= depth and (ys - 1) * stride + xs <= area:
                break
        dram = self.dram_elems(INPUT_START, INPUT_BYTES, eb, (ys - 1) * stride + xs)
        label = f"load {mt.name}" + (" padded" if any(pads) else "")
        return self.emit(Action("load", "load" if mt in (MemType.INP, MemType.WGT) else "compute",
                                Opcode.LOAD, dict(
            memory_type=mt, sram_base=self.base(depth, total), dram_base=dram, y_size=ys,
            x_size=xs, x_stride=stride, y_pad_0=pads[0], y_pad_1=pads[1], x_pad_0=pads[2],
            x_pad_1=pads[3]), label=label))

    def uops(self, triples) -> tuple[int, int]:
        """Load micro-ops; returns their (bgn, end) in the micro-op SRAM."""
        words = np.array([self.isa.encode_uop(*t) for t in triples], np.uint32)
        n = len(words)
        if self.uop_next + 4 * n > UOP_START + UOP_BYTES:
            self.uop_next = UOP_START     # reuse the area (earlier loads already ran)
        addr = self.uop_next
        self.data[addr:addr + 4 * n] = words.view(np.uint8)
        self.uop_next += 4 * n
        bgn = self.base(self.c.uop_depth, n)
        self.last_uop = self.emit(Action("uop", "compute", Opcode.LOAD, dict(
            memory_type=MemType.UOP, sram_base=bgn, dram_base=addr // 4, y_size=1, x_size=n,
            x_stride=n), uops=words, label="load UOP"))
        self.uop_view[bgn:bgn + n] = words
        self.ranges = [r for r in self.ranges if r[1] <= bgn or r[0] >= bgn + n]
        self.ranges.append((bgn, bgn + n, self.last_uop))
        return bgn, bgn + n

    def factors(self, depth: int, iters: tuple, used: int) -> tuple[int, int, int]:
        """(factor_out, factor_in, span) with ``used + span < depth``; 0 factors give
        repeated indices (accumulate hazards)."""
        room = depth - 1 - used
        out = []
        for n in iters:
            if n <= 1 or room <= 0 or self.rng.random() < 0.25:
                out.append(0)
                continue
            hi = room // (n - 1)
            f = int(self.rng.integers(0, hi + 1)) if self.rng.random() < 0.3 else \
                int(self.rng.integers(0, min(hi, 4) + 1))
            out.append(f)
            room -= f * (n - 1)
        span = (iters[0] - 1) * out[0] + (iters[1] - 1) * out[1]
        return out[0], out[1], span

    def kernel(self, kind: str):
        """A GEMM or ALU over a fresh or reused micro-op range with a random loop nest."""
        c, rng = self.c, self.rng
        depths = {"dst": c.acc_depth, "src": c.inp_depth if kind == "gemm" else c.acc_depth,
                  "wgt": c.wgt_depth}
        iters = (self.small(4, 64), self.small(4, 64))
        reuse = self.ranges and rng.random() < 0.35
        if reuse:
            bgn, end, source = self.ranges[int(rng.integers(len(self.ranges)))]
            u = self.isa.decode_uops(self.uop_view[bgn:end])
            used = {"dst": int(u["dst_idx"].max()), "src": int(u["src_idx"].max()),
                    "wgt": int(u["wgt_idx"].max())}
            if any(used[k] >= depths[k] for k in used):
                reuse = False
        n = end - bgn if reuse else self.small(4, 16)
        if n * iters[0] * iters[1] > _MAX_ITERS:
            iters = (1, max(1, min(iters[1], _MAX_ITERS // n)))
        fac = {}
        for k in ("dst", "src", "wgt"):
            fac[k] = self.factors(depths[k], iters, used[k] if reuse else 0)
        if not reuse:
            triples = [tuple(int(rng.integers(0, depths[k] - fac[k][2])) for k in
                             ("dst", "src", "wgt")) for _ in range(n)]
            bgn, end = self.uops(triples)
            source = self.last_uop
        f = dict(uop_bgn=bgn, uop_end=end, iter_out=iters[0], iter_in=iters[1],
                 dst_factor_out=fac["dst"][0], dst_factor_in=fac["dst"][1],
                 src_factor_out=fac["src"][0], src_factor_in=fac["src"][1])
        label = "uop reuse " if reuse else ""
        if kind == "gemm":
            f.update(wgt_factor_out=fac["wgt"][0], wgt_factor_in=fac["wgt"][1],
                     reset_reg=int(rng.random() < 0.2))
            label += "gemm reset" if f["reset_reg"] else "gemm"
            return self.emit(Action("gemm", "compute", Opcode.GEMM, f, label=label,
                                    source=source))
        ops = alu_ops(c)
        op = ops[int(rng.integers(len(ops)))]
        use_imm = not op.tensor or (op.imm and rng.random() < 0.5)
        lo, hi = op.imm_range if use_imm or op.tensor_imm is None else op.tensor_imm
        if (lo, hi) != (IMM_MIN, IMM_MAX):
            imm = int(rng.integers(lo, hi + 1))
        else:
            imm = int(rng.integers(-32768, 32768)) if rng.random() < 0.3 else \
                int(rng.integers(-128, 128))
        f.update(alu_opcode=op.code, use_imm=int(use_imm),
                 imm=imm if op.uses_imm_field(use_imm) else 0)
        label += f"alu {op.name} {'imm' if use_imm else 'tensor'}"
        return self.emit(Action("alu", "compute", Opcode.ALU, f, label=label, source=source))

    def store(self):
        c, rng = self.c, self.rng
        eb = c.out_elem_bytes
        area = OUTPUT_BYTES // eb
        while True:
            xs, ys = self.small(8, 32), self.small(3, 8)
            stride = xs + (int(rng.integers(0, 5)) if rng.random() < 0.5 else 0)
            if xs * ys <= c.out_depth and (ys - 1) * stride + xs <= area:
                break
        return self.emit(Action("store", "store", Opcode.STORE, dict(
            memory_type=MemType.OUT, sram_base=self.base(c.out_depth, xs * ys),
            dram_base=self.dram_elems(OUTPUT_START, OUTPUT_BYTES, eb, (ys - 1) * stride + xs),
            y_size=ys, x_size=xs, x_stride=stride), label="store"))

    def double_buffer(self):
        """A tile loop over two halves of INP/WGT/OUT: the builder adds the tokens of
        double buffering (load waits for compute to free a half, store for compute)."""
        c, rng = self.c, self.rng
        tiles = int(rng.integers(2, 7))
        xs = self.small(4)
        half = {"inp": c.inp_depth // 2, "wgt": c.wgt_depth // 2,
                "out": min(c.acc_depth, c.out_depth) // 2}
        for t in range(tiles):
            h = t % 2
            for mt, name in ((MemType.INP, "inp"), (MemType.WGT, "wgt")):
                a = self.load(mt)
                a.fields.update(sram_base=h * half[name], x_size=xs, y_size=1, x_stride=xs,
                                y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0)
                a.label = f"double-buffer load {mt.name}"
            bgn, end = self.uops([(h * half["out"] + i, h * half["inp"] + i, h * half["wgt"] + i)
                                  for i in range(xs)])
            self.emit(Action("gemm", "compute", Opcode.GEMM, dict(
                uop_bgn=bgn, uop_end=end, iter_out=1, iter_in=1), label="double-buffer gemm",
                source=self.last_uop))
            a = self.store()
            a.fields.update(sram_base=h * half["out"], x_size=xs, y_size=1, x_stride=xs)

    def chain(self):
        mods = [MODULES[int(i)] for i in self.rng.integers(0, 3, int(self.rng.integers(3, 12)))]
        self.emit(Action("chain", "compute", fields={"modules": mods}, label="chain"))

    def fill(self):
        q = list(QUEUES)[int(self.rng.integers(len(QUEUES)))]
        self.emit(Action("fill", QUEUES[q]["producer"], fields={"queue": q}, label="fill"))

    def late_chain(self):
        """A late micro-op (:func:`~vtakit.hw.alu.late_ops`) and a micro-op that reads its
        dst ``k`` issue slots later, ``k`` in ``1..L+1`` (L =
        :func:`~vtakit.hw.alu.late_stages`): the compute module's hold and gap. ACC rows
        from the table at the end of the input area (:data:`TABLE_KINDS`, so that the
        values keep information through two passes), with ``requant2`` the REQ.M/REQ.P
        setups from them, then the producer's instruction with filler micro-ops (other
        rows) around it and the reader in the same instruction (the same opcode) or in
        the next one: a late opcode, a base ALU (immediate or tensor), a GEMM, or (REQ)
        REQ.M/REQ.P reading the producer's dst as src followed by a REQ that uses the
        register; then a STORE of the rows."""
        c, rng = self.c, self.rng
        n_late = late_stages(c)
        eb = c.elem_bytes(MemType.ACC)
        groups = int(rng.integers(2, min(4, TABLE_BYTES // eb // 4) + 1))
        size = 4 * groups
        base = self.base(min(c.acc_depth, c.out_depth), size)
        first = 4 * int(rng.integers(0, TABLE_BYTES // eb // 4 - groups + 1))
        self.emit(Action("load", "compute", Opcode.LOAD, dict(
            memory_type=MemType.ACC, sram_base=base, dram_base=TABLE_START // eb + first,
            y_size=1, x_size=size, x_stride=size, y_pad_0=0, y_pad_1=0, x_pad_0=0,
            x_pad_1=0), label="late chain load ACC"))

        def row(g, kind):
            return base + 4 * g + TABLE_KINDS.index(kind)

        pool = iter(r for r in rng.permutation(c.acc_depth).tolist()
                    if not base <= r < base + size)

        def operand(e, g=1):
            return row(g, "mult" if e.code in (AluOp.SRDHM, AluOp.MULSHR) else "small")

        def imm_of(e):
            return int(rng.integers(30, 33)) if e.code == AluOp.MULSHR else 0

        def fillers(n, e=None):
            """Micro-ops of other rows (no dependence on the chain's dst)."""
            if e is None:       # GEMM
                return [(next(pool), int(rng.integers(c.inp_depth)),
                         int(rng.integers(c.wgt_depth))) for _ in range(n)]
            return [(next(pool), operand(e) if e.tensor else 0, 0) for _ in range(n)]

        prod = self.late[int(rng.integers(len(self.late)))]
        req = AluOp.REQ in {e.code for e in self.late}
        kinds = ["same", "late", "alu", "gemm"] + (["setup"] if prod.code == AluOp.REQ else [])
        weights = np.array([0.3, 0.25, 0.15, 0.15, 0.15][:len(kinds)])
        kind = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
        # issue slots from the producer to the reader; an instruction boundary takes one
        k = int(rng.integers(1 if kind == "same" else 2, n_late + 2))
        reg = (REQ_LOAD_M, "mult") if rng.random() < 0.5 else (REQ_LOAD_P, "param")
        dst = row(0, reg[1] if kind == "setup" else "data")
        pre, post = int(rng.integers(0, 3)), int(rng.integers(0, 3))

        def reader(e):
            """A micro-op of opcode ``e`` (None: GEMM) reading ``dst``."""
            if e is None:
                return (dst, int(rng.integers(c.inp_depth)), int(rng.integers(c.wgt_depth)))
            if e.tensor and (not e.imm or rng.random() < 0.5) and rng.random() < 0.4:
                return (row(1, "data"), dst, 0)     # as the tensor src
            return (dst, operand(e) if e.tensor else 0, 0)

        a_imm = imm_of(prod)
        a = fillers(pre, prod) + [(dst, operand(prod, 0), 0)]
        plan = []           # (opcode entry or None, use_imm, imm, triples)
        if kind == "same":
            a += fillers(k - 1, prod) + [reader(prod)] + fillers(post, prod)
            plan.append((prod, 0, a_imm, a))
        else:
            n_a = int(rng.integers(0, k - 1))
            a += fillers(n_a, prod)
            plan.append((prod, 0, a_imm, a))
            n_b = k - 2 - n_a
            if kind == "late":
                e = self.late[int(rng.integers(len(self.late)))]
                plan.append((e, 0, imm_of(e), fillers(n_b, e) + [reader(e)]
                             + fillers(post, e)))
            elif kind == "alu":
                base_ops = [e for e in alu_ops(c) if e.base]
                e = base_ops[int(rng.integers(len(base_ops)))]
                use_imm = int(not e.tensor or rng.random() < 0.5)
                imm = int(rng.integers(0, 4) if e.code == AluOp.SHR else rng.integers(-50, 51))
                plan.append((e, use_imm, imm if use_imm else 0,
                             fillers(n_b, e) + [reader(e) if not use_imm else (dst, 0, 0)]
                             + fillers(post, e)))
            elif kind == "gemm":
                plan.append((None, 0, 0, fillers(n_b) + [reader(None)] + fillers(post)))
            else:       # setup: the register's last load reads the producer's dst
                setup = [(next(pool), row(1, reg[1]), 0) for _ in range(n_b)]
                plan.append((prod, 0, reg[0], setup + [(row(1, "data"), dst, 0)]))
                plan.append((prod, 0, REQ_RUN, [(row(1, "data"), row(1, "small"), 0)]))
        if req:     # the registers from the rows of group 0 first
            plan[:0] = [(alu_entry(AluOp.REQ), 0, REQ_LOAD_M, [(row(0, "data"), row(0, "mult"), 0)]),
                        (alu_entry(AluOp.REQ), 0, REQ_LOAD_P, [(row(0, "data"), row(0, "param"), 0)])]
        bgn, _ = self.uops([t for *_, triples in plan for t in triples])
        source = self.last_uop
        label = f"late chain {prod.name} -> {kind}"
        for e, use_imm, imm, triples in plan:
            f = dict(uop_bgn=bgn, uop_end=bgn + len(triples), iter_out=1, iter_in=1)
            bgn += len(triples)
            if e is None:
                self.emit(Action("gemm", "compute", Opcode.GEMM, dict(f, reset_reg=0),
                                 label=label, source=source))
            else:
                self.emit(Action("alu", "compute", Opcode.ALU, dict(
                    f, alu_opcode=e.code, use_imm=use_imm, imm=imm), label=label, source=source))
        self.emit(Action("store", "store", Opcode.STORE, dict(
            memory_type=MemType.OUT, sram_base=base, y_size=1, x_size=size, x_stride=size,
            dram_base=self.dram_elems(OUTPUT_START, OUTPUT_BYTES, c.out_elem_bytes, size)),
            label="late chain store"))

    # ------------------------------------------------------------ illegal

    def illegal(self):
        c, rng = self.c, self.rng
        kinds = illegal_kinds(c)
        kind = kinds[int(rng.integers(len(kinds)))]
        label = f"illegal {kind}"
        mem = dict(sram_base=0, dram_base=INPUT_START // 64, y_size=1, x_size=1, x_stride=1)
        if kind == "opcode":
            word = int(rng.integers(0, 1 << 62)) << 3 | int(rng.integers(5, 8))
            return self.emit(Action("illegal", "fetch", word=word, label=label))
        if kind == "load memory_type":
            return self.emit(Action("illegal", "compute", Opcode.LOAD, dict(
                mem, memory_type=int(rng.integers(4, 8))), label=label))
        if kind == "store memory_type":
            mt = int(rng.choice([0, 1, 2, 3, 5, 6, 7]))
            return self.emit(Action("illegal", "store", Opcode.STORE, dict(
                mem, memory_type=mt, dram_base=OUTPUT_START // 64), label=label))
        if kind == "store pads":
            pad = ["y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"][int(rng.integers(4))]
            return self.emit(Action("illegal", "store", Opcode.STORE, dict(
                mem, memory_type=MemType.OUT, dram_base=OUTPUT_START // c.out_elem_bytes,
                **{pad: int(rng.integers(1, 16))}), label=label))
        if kind == "uop load shape":
            bad = dict(y_size=2) if rng.random() < 0.5 else dict(x_pad_0=1)
            return self.emit(Action("illegal", "compute", Opcode.LOAD, dict(
                mem, memory_type=MemType.UOP, dram_base=UOP_START // 4, **bad), label=label))
        loop = dict(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1)
        if kind in ("alu opcode", "alu tensor operand", "alu imm range"):
            if kind == "alu opcode":
                bad = illegal_alu_opcodes(c)
                f = dict(alu_opcode=bad[int(rng.integers(len(bad)))], use_imm=1)
            elif kind == "alu tensor operand":
                ops = _no_tensor_ops(c)
                f = dict(alu_opcode=ops[int(rng.integers(len(ops)))].code, use_imm=0)
            else:
                ops = _restricted_imm_ops(c)
                op = ops[int(rng.integers(len(ops)))]
                lo, hi = op.imm_range if op.tensor_imm is None else op.tensor_imm
                # A value past one end of the range, inside the 16-bit field.
                if int(rng.choice([-1, 1])) > 0 and hi < IMM_MAX or lo == IMM_MIN:
                    imm = int(rng.integers(hi + 1, IMM_MAX + 1))
                else:
                    imm = -int(rng.integers(-lo + 1, -IMM_MIN))
                f = dict(alu_opcode=op.code, use_imm=int(op.tensor_imm is None), imm=imm)
            return self.emit(Action("illegal", "compute", Opcode.ALU, {**loop, **f}, label=label))
        if kind == "uop range":
            f = (dict(uop_bgn=5, uop_end=3) if rng.random() < 0.5 else
                 dict(uop_bgn=c.uop_depth - 1, uop_end=c.uop_depth + 1))
            op = Opcode.GEMM if rng.random() < 0.5 else Opcode.ALU
            return self.emit(Action("illegal", "compute", op, {**loop, **f}, label=label))
        if kind == "load sram range":
            mt = MemType(int(rng.choice([MemType.INP, MemType.WGT, MemType.ACC])))
            depth = c.depth(mt)
            xs = int(rng.integers(2, 9))
            return self.emit(Action("illegal", "load" if mt != MemType.ACC else "compute",
                                    Opcode.LOAD, dict(
                mem, memory_type=mt, sram_base=depth - int(rng.integers(1, xs)), x_size=xs,
                x_stride=xs, dram_base=INPUT_START // c.elem_bytes(mt)), label=label))
        if kind == "store sram range":
            xs = int(rng.integers(2, 9))
            return self.emit(Action("illegal", "store", Opcode.STORE, dict(
                mem, memory_type=MemType.OUT, sram_base=c.out_depth - int(rng.integers(1, xs)),
                x_size=xs, x_stride=xs, dram_base=OUTPUT_START // c.out_elem_bytes),
                label=label))
        if kind == "gemm sram range":
            start = c.acc_depth - int(rng.integers(1, 4))
            bgn, end = self.uops([(start, 0, 0)])
            return self.emit(Action("illegal", "compute", Opcode.GEMM, dict(
                uop_bgn=bgn, uop_end=end, iter_out=4, iter_in=1, dst_factor_out=1,
                reset_reg=int(rng.random() < 0.5)), label=label))
        if kind == "dep flag":
            if rng.random() < 0.5:
                flag = "pop_prev_dep" if rng.random() < 0.5 else "push_prev_dep"
                return self.emit(Action("illegal", "load", Opcode.LOAD, dict(
                    mem, memory_type=MemType.INP, dram_base=INPUT_START // c.inp_elem_bytes,
                    **{flag: 1}), label=label))
            flag = "pop_next_dep" if rng.random() < 0.5 else "push_next_dep"
            return self.emit(Action("illegal", "store", Opcode.STORE, dict(
                mem, memory_type=MemType.OUT, dram_base=OUTPUT_START // c.out_elem_bytes,
                **{flag: 1}), label=label))
        # dram 4 GiB: a LOAD/STORE whose bytes cross 2**32
        if rng.random() < 0.5:
            mt = MemType(int(rng.choice([MemType.INP, MemType.WGT])))
            eb, module, op = c.elem_bytes(mt), "load", Opcode.LOAD
        else:
            mt, eb, module, op = MemType.OUT, c.out_elem_bytes, "store", Opcode.STORE
        k = int(rng.integers(0, 3))
        return self.emit(Action("illegal", module, op, dict(
            mem, memory_type=mt, dram_base=(1 << 32) // eb - k, x_size=k + 1 + int(
                rng.integers(0, 3)), x_stride=8), label=label))


def generate_program(config: VTAConfig, rng: np.random.Generator, *, token_depth: int,
                     size: int = 24, illegal: float = 0.15,
                     late_chains: float = 0.1) -> FuzzProgram:
    """A random program of about ``size`` actions (see the module docstring).

    Parameters
    ----------
    config : VTAConfig
    rng : numpy.random.Generator
    token_depth : int
        Token-queue capacity of the devices it will run on (for queue-filling patterns).
    size : int
        Upper bound of the number of top-level actions.
    illegal : float
        Probability that the program holds one instruction built to fault.
    late_chains : float
        Weight of a late chain (:meth:`_Gen.late_chain`) among the actions (the others'
        weights sum to 0.965); only in a config with late opcodes.
    """
    g = _Gen(config, rng, token_depth)
    n = int(rng.integers(2, size + 1))
    fault_at = int(rng.integers(0, n)) if rng.random() < illegal else -1
    choices = ("load", "gemm", "alu", "store", "double", "chain", "fill", "late")
    weights = np.array([0.25, 0.2, 0.2, 0.2, 0.05, 0.05, 0.015, late_chains if g.late else 0])
    for i in range(n):
        if i == fault_at:
            g.illegal()
        what = choices[int(rng.choice(len(choices), p=weights / weights.sum()))]
        if what == "load":
            g.load()
        elif what in ("gemm", "alu"):
            g.kernel(what)
        elif what == "store":
            g.store()
        elif what == "double":
            g.double_buffer()
        elif what == "chain":
            g.chain()
        elif what == "late":
            g.late_chain()
        else:
            g.fill()
    return FuzzProgram(config, g.data, g.actions, token_depth)
