"""Max, average and global-average pooling on VTA.

Average pooling has two engines: the GEMM engine (:func:`plan_avg_pool_gemm`, the
default) sums windows as a depthwise convolution with an all-ones kernel, or, for a
global pool, streams the input in chunks into one accumulator per channel block
(:class:`GlobalSumPlan`, :func:`global_sums_or`); the ALU engine (:class:`PoolPlan`,
below) is the one max pooling uses.

The int8 input streams through the double-buffered load module into an inp
slot and is copied into the accumulators by GEMM micro-op loops with an
identity weight tile (no int32 LOAD ACC, no host sign extension).
A tile covers ``tn`` batch blocks x ``tc`` channel blocks x ``th`` output rows x
``tw`` output columns; its acc slot holds the input window (rows and columns
including padding, zero-filled by the load's pad fields), followed by the
output accumulators unless the schedule is separable. Per tile, on the compute
module:

* max, separable (strides up to 2 and windows at most twice the stride on both
  axes, e.g. 3x3 stride 2, 2x2 stride 2): the window is copied in its *polyphase*
  layout (rows and columns split by their remainder modulo the stride; no separate
  outputs), padded positions are forced to -32768 (ALU MIN imm: below every int8,
  so padding never wins), then each row's maxima over the window columns are taken
  in place into phase column 0 and the maxima of those over the window rows in place
  into phase (0, 0), whose top-left corner then holds the outputs (stored a row at a
  time when they are not contiguous). A 3x3 stride-2 window takes ``6 + 2 / th`` MAX
  per output (6.07 on ResNet-18's stem pool) instead of a reset, a MIN and 9 MAX;
  the tile is the shape of least modelled cost (:meth:`PoolPlan._separable_cost`);
* max, other windows: padded input positions are forced to -32768 (ALU MIN imm
  over the pad rectangles); the outputs are reset (GEMM reset), set to -32768
  (MIN imm) and then take the MAX over the window;
* average: the outputs are reset and take the ADD over the window (padding
  counts as zeros, ``count_include_pad``); then, for a power-of-two window area,
  ADD imm area/2 and SHR imm log2(area) give the rounded mean on VTA. Other areas
  (e.g. a 7x7 global pool) have no exact VTA division (no MUL): the sums are read
  back as int32 (four byte planes) and divided on the host, rounding half up
  exactly like :func:`reference.round_shift_div`.

The window reduction is one ALU instruction when :func:`.loops.fold_loops` finds a
hazard-free order (consecutive micro-ops write different accumulators), else
one instruction per window offset.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...hw.isa import AluOp, MemType
from ...hw.spec import IMM_MAX, IMM_MIN, MAX_LOOP_EXTENT
from ...runtime import UopKernel, Unit
from .conv2d import Conv2dPlan, assemble_planes
from .epilogue import Epilogue, result_bytes_for
from .layout import ceil_div, pack_activation, unpack_activation
from .loops import Dim, fold_loops
from .tokens import Pipeline, kernel_fence
from .cost.events import program_facts
from .cost.roofline import Roofline, pool_roofline
from .plan import OpPlan, Operand
from .reference import conv2d_output_shape, normalize_padding, round_shift_div
from ...runtime.layout import pair as _pair
from .tiling import MAX_PAD, TilingError
from .operands import check_operand, check_positive

__all__ = ["PoolPlan", "GlobalSumPlan", "plan_pool2d", "plan_avg_pool_gemm", "global_sums_or",
           "max_pool2d", "avg_pool2d", "global_avg_pool2d"]

_NEG = IMM_MIN


def _tile_sizes(n: int, t: int) -> list:
    """``[(size, count)]`` of an axis of ``n`` cut into tiles of ``t``: the full tiles,
    then the remainder's when there is one."""
    return [(t, n // t)] + ([(n % t, 1)] if n % t else [])


class PoolPlan(OpPlan):
    """A planned pooling of an int8 NCHW tensor (``kind`` ``"max"`` or ``"avg"``).

    Operands: ``data`` int8 (N/b, C/c, H, W, b, c), ``identity`` int8 (one WGT tile);
    ``out`` int8 (planes, N/b, C/c,
    OH, OW, b, c) with 4 planes when an average needs a host division.
    """

    def roofline(self):
        """This layer's :class:`~.cost.roofline.Roofline`."""
        return pool_roofline(self, self.config)

    def __init__(self, config, x_shape, kind, kernel, stride=None, padding=0, tile=None):
        super().__init__(config)
        if kind not in ("max", "avg"):
            raise ValueError(f"pool kind {kind!r}; expected 'max' or 'avg'")
        self.kind, self.name = kind, f"{kind}_pool2d"
        self.x_shape = tuple(int(v) for v in x_shape)
        if len(self.x_shape) != 4:
            raise ValueError(f"{self.name}: input must be NCHW, got shape {self.x_shape}")
        n, c, h, w = self.x_shape
        self.kernel = _pair(kernel)
        self.stride = self.kernel if stride is None else _pair(stride)
        self.padding = normalize_padding(padding)
        kh, kw = self.kernel
        self.oh, self.ow = conv2d_output_shape(h, w, kh, kw, self.stride, self.padding)
        text = (f"{self.name} x{list(self.x_shape)} kernel {self.kernel} stride {self.stride} "
                f"padding {self.padding}")
        t, l, b_, r = self.padding
        if max(self.padding) > MAX_PAD or t >= kh or b_ >= kh or l >= kw or r >= kw:
            raise TilingError(f"{text}: padding must be at most {MAX_PAD} and smaller than "
                              "the window")
        area = kh * kw
        self.area = area
        self.host_divide = kind == "avg" and area & (area - 1) != 0
        if kind == "avg" and not self.host_divide and area // 2 > IMM_MAX:
            raise TilingError(f"{text}: window area {area} too large for the rounding immediate")
        # window sums of int8 lie within 128 x area: their low bytes are enough
        self.planes = result_bytes_for(128 * area) if self.host_divide else 1
        self.nthreads = 1 if self.planes > 1 else 2
        bb, blk = config.batch, config.block
        self.nb, self.cb = ceil_div(n, bb), ceil_div(c, blk)
        # at most 2 x 2 phases: a larger stride (e.g. a global pool) would trade a few
        # micro-ops for an instruction per phase and per window offset
        self.separable = (kind == "max" and max(self.stride) <= 2
                          and kh <= 2 * self.stride[0] and kw <= 2 * self.stride[1])
        if tile is None and self.separable:
            tile = self._choose_separable_tile(text)
            direct = self._choose_tile(text)
            # small pools: the direct schedule's few instructions may cost less
            if self._separable_cost(*direct, separable=False) < self._separable_cost(*tile):
                self.separable, tile = False, direct
        self.tile = tile or self._choose_tile(text)
        self.operands = {"data": Operand("data", (self.nb, self.cb, h, w, bb, blk), np.int8),
                         "identity": Operand("identity", (1, 1, 1, 1, blk, blk), np.int8),
                         "out": Operand("out", (self.planes, self.nb, self.cb, self.oh, self.ow,
                                                bb, blk), np.int8)}

    def _need(self, tn, tc, th, tw):
        """Acc elements of a tile, or a huge number if its window misses the inp slot."""
        hi = (th - 1) * self.stride[0] + self.kernel[0]
        wi = (tw - 1) * self.stride[1] + self.kernel[1]
        if tn * tc * hi * wi > self.config.inp_depth // 2:
            return 1 << 30
        return tn * tc * (hi * wi + th * tw)

    def _choose_tile(self, text):
        """Largest tile in the acc slot: full width first, then rows, channels, batch."""
        slot = self.config.acc_depth // self.nthreads
        tw = self.ow
        while tw > 1 and self._need(1, 1, 1, tw) > slot:
            tw = ceil_div(tw, 2)
        if self._need(1, 1, 1, tw) > slot:
            kh, kw = self.kernel
            raise TilingError(f"{text}: a single output needs {kh * kw + 1} acc elements and a "
                              f"{kh * kw}-element inp window; the acc buffer slot holds {slot}, "
                              f"the inp slot {self.config.inp_depth // 2}")
        th = 1
        while th < self.oh and self._need(1, 1, th + 1, tw) <= slot:
            th += 1
        tc = 1
        if th == self.oh and tw == self.ow:
            while tc < self.cb and self._need(1, tc + 1, th, tw) <= slot:
                tc += 1
        tn = 1
        if tc == self.cb:
            while tn < self.nb and self._need(tn + 1, tc, th, tw) <= slot:
                tn += 1
        return (tn, tc, th, tw)

    def _window(self, th, tw):
        """Input rows and columns a tile of ``th x tw`` outputs reads (padding included)."""
        return ((th - 1) * self.stride[0] + self.kernel[0],
                (tw - 1) * self.stride[1] + self.kernel[1])

    def _phases(self, hi, wi):
        """The polyphase layout of a separable max pool's window in the accumulators:
        ``(phases, size)``, ``phases[(a, b)] = (rows, cols, offset)`` the window rows
        ``a, a + sh, ...`` and columns ``b, b + sw, ...`` stored row-major from element
        ``offset`` of one channel block's ``size`` elements (phase (0, 0) first: the
        outputs end up in its top-left ``th x tw`` corner)."""
        (sh, sw), (kh, kw) = self.stride, self.kernel
        phases, off = {}, 0
        for a in range(min(sh, kh)):
            for b in range(min(sw, kw)):
                rows, cols = ceil_div(hi - a, sh), ceil_div(wi - b, sw)
                phases[(a, b)] = (rows, cols, off)
                off += rows * cols
        return phases, off

    def _separable_cost(self, tn, tc, th, tw, separable=True):
        """Compute-module cycles of all tiles of this shape (1 << 60 if one misses the
        acc or inp slot): the reset and copy of each window, the MAX passes, a few
        cycles per instruction and, once per tile shape, the LOAD UOP of its kernels; of
        the direct schedule with ``separable=False``."""
        slot, inp_slot = self.config.acc_depth // self.nthreads, self.config.inp_depth // 2
        (kh, kw), (sh, sw) = self.kernel, self.stride
        total = 0
        axes = [_tile_sizes(n, t) for n, t in ((self.nb, tn), (self.cb, tc), (self.oh, th),
                                                 (self.ow, tw))]
        for (n_, cn), (c_, cc), (h_, ch), (w_, cw) in itertools.product(*axes):
            count = cn * cc * ch * cw
            if not count:
                continue
            nc = n_ * c_
            hi, wi = self._window(h_, w_)
            if not separable:       # reset, copy, MIN of the outputs, a MAX per tap
                if self._need(n_, c_, h_, w_) > slot:
                    return 1 << 60
                out = nc * h_ * w_
                total += count * (2 * nc * hi * wi + out * (2 + kh * kw) + 8 * 8) + 16 * 8
                continue
            phases, size = self._phases(hi, wi)
            if nc * size > slot or nc * hi * wi > inp_slot:
                return 1 << 60
            rows = sum(r for (a, b), (r, _, _) in phases.items() if b == 0)
            alu = nc * (rows * w_ * (kw - 1) + h_ * w_ * (kh - 1))
            insns = 1 + len(phases) + min(sh, kh) * (kw - 1) + kh - 1 + 4
            total += count * (2 * nc * size + alu + 8 * insns) + 16 * insns
        return total

    def _choose_separable_tile(self, text):
        """The tile shape of least :meth:`_separable_cost`: for each width the most rows
        that fit, and, for a whole plane, channel and batch blocks."""
        best = None
        for tw in range(1, self.ow + 1):
            th = 0
            while th < self.oh and self._separable_cost(1, 1, th + 1, tw) < 1 << 60:
                th += 1
            if not th:
                continue
            th = ceil_div(self.oh, ceil_div(self.oh, th))      # as many tiles, evenly tall
            tc = tn = 1
            if th == self.oh and tw == self.ow:
                while tc < self.cb and self._separable_cost(1, tc + 1, th, tw) < 1 << 60:
                    tc += 1
                while (tc == self.cb and tn < self.nb
                       and self._separable_cost(tn + 1, tc, th, tw) < 1 << 60):
                    tn += 1
            key = (self._separable_cost(tn, tc, th, tw), -tw)
            if best is None or key < best[0]:
                best = (key, (tn, tc, th, tw))
        if best is None:
            kh, kw = self.kernel
            raise TilingError(f"{text}: a single output's {kh * kw}-element window misses the "
                              f"acc buffer slot ({self.config.acc_depth // self.nthreads}) or "
                              f"the inp slot ({self.config.inp_depth // 2})")
        return best[1]

    # ------------------------------------------------------------------ host

    def pack(self, x) -> dict:
        x = np.asarray(x)
        if x.shape != self.x_shape:
            raise ValueError(f"{self.name}: input {x.shape}, the plan is for {self.x_shape}")
        blk = self.config.block
        return {"data": pack_activation(x.astype(np.int8), self.config),
                "identity": np.eye(blk, dtype=np.int8).reshape(1, 1, 1, 1, blk, blk)}

    def unpack(self, out) -> np.ndarray:
        n, c = self.x_shape[:2]
        planes = [unpack_activation(pl, self.config, n, c) for pl in out]
        if self.planes == 1:
            return planes[0]
        return round_shift_div(assemble_planes(planes), self.area).astype(np.int8)

    # -------------------------------------------------------------- lowering

    def tiles(self):
        tn, tc, th, tw = self.tile
        for n0 in range(0, self.nb, tn):
            for c0 in range(0, self.cb, tc):
                for h0 in range(0, self.oh, th):
                    for w0 in range(0, self.ow, tw):
                        yield (n0, min(tn, self.nb - n0), c0, min(tc, self.cb - c0),
                               h0, min(th, self.oh - h0), w0, min(tw, self.ow - w0))

    def emit(self, builder, slots: dict) -> None:
        _, _, h, w = self.x_shape
        (kh, kw), (sh, sw), (pt, pl, _, _) = self.kernel, self.stride, self.padding
        nth, planes = self.nthreads, self.planes
        slot = self.config.acc_depth // nth
        inp_slot, wgt_slot = self.config.inp_depth // 2, self.config.wgt_depth // 2
        tiles = list(self.tiles())
        pipe = Pipeline(builder, 2, nth, len(tiles), len(tiles) * planes)
        wgt_has = [False, False]
        for ti, (n0, tn, c0, tc, h0, th, w0, tw) in enumerate(tiles):
            base = (ti % nth) * slot
            s = ti % 2
            r0, r1 = h0 * sh - pt, (h0 + th - 1) * sh - pt + kh
            q0, q1 = w0 * sw - pl, (w0 + tw - 1) * sw - pl + kw
            hi, wi = r1 - r0, q1 - q0
            ypad0, ypad1, xpad0, xpad1 = max(0, -r0), max(0, r1 - h), max(0, -q0), max(0, q1 - w)
            rows, cols = hi - ypad0 - ypad1, wi - xpad0 - xpad1
            nc = tn * tc
            # load: the int8 window (zero padding by the load) and the identity tile
            pipe.load_begin(ti)
            for j in range(nc):
                nl, cl = divmod(j, tc)
                off = (((n0 + nl) * self.cb + c0 + cl) * h + r0 + ypad0) * w + q0 + xpad0
                builder.load_2d(MemType.INP, s * inp_slot + j * hi * wi, slots["data"], off, cols,
                           rows, w, x_pad_before=xpad0, y_pad_before=ypad0,
                           x_pad_after=xpad1, y_pad_after=ypad1)
            if not wgt_has[s]:
                builder.load_2d(MemType.WGT, s * wgt_slot, slots["identity"], 0, 1, 1, 1)
                wgt_has[s] = True
            pipe.load_end(ti)
            pipe.acquire_out(ti * planes)
            if self.separable:
                out_base, row_stride = self._separable(
                    builder, pipe, ti, base, s * inp_slot, s * wgt_slot, nc, th, tw, hi, wi,
                    (ypad0, ypad1, xpad0, xpad1))
            else:
                out_base, row_stride = self._direct(
                    builder, pipe, ti, base, s * inp_slot, s * wgt_slot, nc, th, tw, hi, wi,
                    (ypad0, ypad1, xpad0, xpad1)), tw
            out_dims = [Dim("nc", nc, th * tw, th * tw), Dim("p", th * tw, 1, 1)]
            if self.kind == "avg" and not self.host_divide and self.area > 1:
                self._imm(builder, AluOp.ADD, self.area // 2, out_base[0], out_dims)
                self._imm(builder, AluOp.SHR, self.area.bit_length() - 1, out_base[0],
                          out_dims)
            for k in range(planes):
                ev = ti * planes + k
                if k:
                    pipe.acquire_out(ev)
                    self._imm(builder, AluOp.SHR, 8, out_base[0], out_dims)
                pipe.release_out(ev)
                pipe.store_begin(ev)
                plane = k * self.nb * self.cb * self.oh * self.ow
                for j in range(nc):
                    nl, cl = divmod(j, tc)
                    off = plane + (((n0 + nl) * self.cb + c0 + cl) * self.oh + h0) * self.ow + w0
                    if row_stride == tw:
                        builder.store_2d(out_base[j], slots["out"], off, tw, th, self.ow)
                    else:                   # rows apart in the window: one store per row
                        for r in range(th):
                            builder.store_2d(out_base[j] + r * row_stride, slots["out"],
                                             off + r * self.ow, tw, 1, self.ow)
                pipe.store_end(ev)
        kernel_fence(builder)

    def _direct(self, builder, pipe, ti, base, inp, wgt, nc, th, tw, hi, wi, pads):
        """Reset the window and outputs, copy the window into acc (GEMM identity), then
        the window reduction into separate outputs: the acc index of each channel
        block's outputs (``th x tw``, row-major)."""
        (kh, kw), (sh, sw) = self.kernel, self.stride
        win_n = nc * hi * wi
        out_base = base + win_n
        builder.push_gemm(UopKernel.gemm([(base, 0, 0)], [(win_n + nc * th * tw, 1, 0, 0)],
                                         reset=True))
        pipe.compute_begin(ti)
        builder.push_gemm(UopKernel.gemm([(base, inp, wgt)], [(win_n, 1, 1, 0)]))
        pipe.compute_end(ti)
        out_dims = [Dim("nc", nc, th * tw, th * tw), Dim("p", th * tw, 1, 1)]
        if self.kind == "max":
            self._fill_pads(builder, base, nc, hi, wi, *pads)
            self._imm(builder, AluOp.MIN, _NEG, out_base, out_dims)
        op = AluOp.MAX if self.kind == "max" else AluOp.ADD
        win = [Dim("nc", nc, th * tw, hi * wi), Dim("oh", th, tw, sh * wi),
               Dim("ow", tw, 1, sw), Dim("kh", kh, 0, wi, reduce=True),
               Dim("kw", kw, 0, 1, reduce=True)]
        f = fold_loops(win, (out_base, base, 0))
        if f.hazard_free:
            builder.push_alu(UopKernel.alu(op, [u[:2] for u in f.uops], [lp[:3] for lp in f.loops]))
        else:
            g = fold_loops(win[:3], (out_base, base, 0))
            for i in range(kh):
                for jj in range(kw):
                    builder.push_alu(UopKernel.alu(op, [(d, s + i * wi + jj) for d, s, _ in g.uops],
                                                   [lp[:3] for lp in g.loops]))
        return [out_base + j * th * tw for j in range(nc)]

    def _separable(self, builder, pipe, ti, base, inp, wgt, nc, th, tw, hi, wi, pads):
        """A max pool with ``stride <= 2`` and ``kernel <= 2 x stride`` on both axes, in
        place: the window is copied into acc in its polyphase layout (:meth:`_phases`),
        padding forced to -32768, then each row's maxima over the columns (written into
        phase column 0) and the maxima of those over the rows (written into phase
        (0, 0)). Every pass reads a phase's shifted-by-one copy of its own destination
        first, in ascending order (it reads each element before the pass overwrites
        it), then the other phases, which no pass writes. Returns the acc index of each
        channel block's outputs and their row stride."""
        (kh, kw), (sh, sw) = self.kernel, self.stride
        phases, size = self._phases(hi, wi)
        builder.push_gemm(UopKernel.gemm([(base, 0, 0)], [(nc * size, 1, 0, 0)], reset=True))
        pipe.compute_begin(ti)
        for (a, b), (rows, cols, off) in phases.items():
            f = fold_loops([Dim("nc", nc, size, hi * wi), Dim("r", rows, cols, sh * wi),
                            Dim("c", cols, 1, sw)], (base + off, inp + a * wi + b, wgt))
            builder.push_gemm(UopKernel.gemm(f.uops, f.loops))
        pipe.compute_end(ti)
        ypad0, ypad1, xpad0, xpad1 = pads
        for (a, b), (rows, cols, off) in phases.items():
            r_top, r_bot = ceil_div(max(0, ypad0 - a), sh), ceil_div(max(0, hi - ypad1 - a), sh)
            c_lft, c_rgt = ceil_div(max(0, xpad0 - b), sw), ceil_div(max(0, wi - xpad1 - b), sw)
            for r, nr, c, ncol in ((0, r_top, 0, cols), (r_bot, rows - r_bot, 0, cols),
                                   (0, rows, 0, c_lft), (0, rows, c_rgt, cols - c_rgt)):
                if nr > 0 and ncol > 0:
                    self._imm(builder, AluOp.MIN, _NEG, base + off + r * cols + c,
                              [Dim("nc", nc, size, size), Dim("r", nr, cols, cols),
                               Dim("c", ncol, 1, 1)])
        c0 = phases[(0, 0)][1]

        def reduce(dst, src, nrows, ncols):
            f = fold_loops([Dim("nc", nc, size, size), Dim("r", nrows, c0, c0),
                            Dim("c", ncols, 1, 1)], (base + dst, base + src, 0))
            builder.push_alu(UopKernel.alu(AluOp.MAX, [u[:2] for u in f.uops],
                                           [lp[:3] for lp in f.loops]))

        taps_w = sorted(range(1, kw), key=lambda dx: dx % sw)       # the shifted own phase first
        for a in range(min(sh, kh)):
            rows, _, dst = phases[(a, 0)]
            for dx in taps_w:
                b, k = dx % sw, dx // sw
                _, cols, off = phases[(a, b)]
                f = fold_loops([Dim("nc", nc, size, size), Dim("r", rows, c0, cols),
                                Dim("c", tw, 1, 1)], (base + dst, base + off + k, 0))
                builder.push_alu(UopKernel.alu(AluOp.MAX, [u[:2] for u in f.uops],
                                               [lp[:3] for lp in f.loops]))
        for dy in sorted(range(1, kh), key=lambda dy: dy % sh):
            a, k = dy % sh, dy // sh
            reduce(0, phases[(a, 0)][2] + k * c0, th, tw)
        return [base + j * size for j in range(nc)], c0

    def _imm(self, builder, op, imm, base, dims):
        f = fold_loops(dims, (base, base, 0))
        builder.push_alu(UopKernel.alu(op, [u[:2] for u in f.uops], [lp[:3] for lp in f.loops],
                                  imm=imm))

    def _fill_pads(self, builder, base, nc, hi, wi, ypad0, ypad1, xpad0, xpad1):
        """MIN imm -32768 over the padded rows and columns of every window."""
        rects = [(0, ypad0, 0, wi), (hi - ypad1, ypad1, 0, wi),
                 (0, hi, 0, xpad0), (0, hi, wi - xpad1, xpad1)]
        for r, nr, c, ncol in rects:
            if nr and ncol:
                dims = [Dim("nc", nc, hi * wi, hi * wi), Dim("r", nr, wi, wi),
                        Dim("c", ncol, 1, 1)]
                self._imm(builder, AluOp.MIN, _NEG, base + r * wi + c, dims)


class GlobalSumPlan(OpPlan):
    """The window sums of a global average pool (the window is the whole plane, no
    padding) on the GEMM core, streamed in chunks of input vectors.

    The packed input (``N/b, C/c, H, W, b, c``) is one run of ``N/b * C/c * H * W``
    contiguous inp vectors, each channel block's ``H * W`` in a row. It is loaded in
    chunks (:attr:`sizes` vectors each, in order), and each chunk's GEMMs (one identity
    weight tile, loaded once into the top weight row) add its vectors into one
    accumulator per channel block: a GEMM for a block the chunk holds partly, one for
    its whole blocks (a two-level loop, blocks inner). The GEMMs of a chunk run while
    the next one loads; only the last chunk's follow the last LOAD, so the sizes
    (:meth:`candidates`, the one of fewest predicted cycles) end with a short chunk when
    that pays. Then ``shift`` > 0 divides the sums on VTA (ADD imm ``2^(shift-1)``, SHR
    imm ``shift``: rounded half up, int8 out), else ``planes`` byte planes of the int32
    sums are stored, each after the first shifted right by 8 in place once the store of
    the one before is over.

    The first chunk goes to the bottom of the inp SRAM, the others alternate between two
    slots at its top (chunk ``g >= 3`` waits for chunk ``g - 2``'s GEMMs). A warm-started
    or chained next layer (:mod:`vtakit.runtime.chain`) loads its first weights and
    inputs (at the bottom of the SRAMs, for the layers of this library) once the pool no
    longer reads those rows: here after the first chunk's GEMMs, so its loads follow the
    pool's last input LOAD at once. The accumulators the first chunk adds into are reset
    before its LOAD (a warm start moves that reset to the stream before), the others
    after its GEMMs.

    ``Conv2dPlan`` (the all-ones depthwise convolution) does the same sums a tile of
    output channel blocks at a time, each tile loaded whole, and its weight tile once
    per slot.

    Operands: ``data`` int8 (N/b, C/c, H, W, b, c), ``weight`` int8 (one identity WGT
    tile), ``out`` int8 (planes, N/b, C/c, 1, 1, b, c).
    """

    name = "global_sum_pool2d"

    def __init__(self, config, x_shape, *, shift=0, planes=1, sizes=None):
        super().__init__(config)
        self.x_shape = tuple(int(v) for v in x_shape)
        if len(self.x_shape) != 4:
            raise ValueError(f"{self.name}: input must be NCHW, got shape {self.x_shape}")
        n, c, h, w = self.x_shape
        text = f"{self.name} x{list(self.x_shape)}"
        if config.block_in != config.block_out:
            raise TilingError(f"{text}: an identity weight tile needs BLOCK_IN == BLOCK_OUT")
        self.area, self.shift, self.planes = h * w, int(shift), int(planes)
        if self.shift and self.planes != 1:
            raise ValueError(f"{self.name}: a shift (int8 out) stores one plane, not "
                             f"{self.planes}")
        if self.shift and (1 << (self.shift - 1)) > IMM_MAX:
            raise TilingError(f"{text}: shift {self.shift} too large for the rounding "
                              "immediate")
        if not 1 <= self.planes <= 4:
            raise ValueError(f"{self.name}: {self.planes} byte planes; expected 1 to 4")
        bb, blk = config.batch, config.block
        self.nb, self.cb = ceil_div(n, bb), ceil_div(c, blk)
        self.blocks = self.nb * self.cb
        self.vectors = self.blocks * self.area
        if self.blocks > config.acc_depth:
            raise TilingError(f"{text}: {self.blocks} accumulators; the acc buffer holds "
                              f"{config.acc_depth}")
        self.operands = {"data": Operand("data", (self.nb, self.cb, h, w, bb, blk), np.int8),
                         "weight": Operand("weight", (1, 1, 1, 1, blk, blk), np.int8),
                         "out": Operand("out", (self.planes, self.nb, self.cb, 1, 1, bb, blk),
                                        np.int8)}
        self.sizes = self._check_sizes(sizes, text) if sizes is not None else \
            self._choose(text)

    def _max_chunk(self) -> int:
        return min(self.config.inp_depth // 2, MAX_LOOP_EXTENT, (1 << 16) - 1)

    def _fits(self, sizes) -> bool:
        """The first chunk's slot and two of the largest other chunk's fit the inp SRAM."""
        return sizes[0] + 2 * max(sizes[1:], default=0) <= self.config.inp_depth

    def _check_sizes(self, sizes, text) -> tuple:
        sizes = tuple(int(v) for v in sizes)
        if (sum(sizes) != self.vectors or not sizes or not self._fits(sizes)
                or not all(1 <= v <= self._max_chunk() for v in sizes)):
            raise TilingError(f"{text}: chunks of {list(sizes)} vectors; they must add up to "
                              f"{self.vectors}, each fit a loop ({self._max_chunk()} at "
                              f"most), and the first one and twice the largest other one "
                              f"the inp buffer ({self.config.inp_depth})")
        return sizes

    def candidates(self) -> list:
        """Chunk sizes worth predicting: the input cut into 1 to 12 even chunks (also
        rounded up to whole channel blocks), each also after a last chunk of 1/16 to 1/2
        of a block or 8 to 64 vectors."""
        top, out = self._max_chunk(), set()
        tails = {0} | {t for t in (8, 16, 32, 64) if t < self.vectors} | {
            self.area * f // 16 for f in (1, 2, 4, 8) if 0 < self.area * f // 16 < self.vectors}
        for t in sorted(tails):
            rest = self.vectors - t
            for k in range(1, 13):
                r = ceil_div(rest, k)
                for size in {r, min(rest, ceil_div(r, self.area) * self.area)}:
                    if size > top or t > size:
                        continue
                    sizes = [size] * (rest // size) + [rest % size] * bool(rest % size)
                    sizes = tuple(sizes + [t] * bool(t))
                    if self._fits(sizes):
                        out.add(sizes)
        return sorted(out)

    def _choose(self, text) -> tuple:
        """The :meth:`candidates` of fewest predicted cycles (the event model, as
        :meth:`predicted`, on programs kept out of the program cache); the one of fewer
        chunks on a tie."""
        best = None
        for sizes in self.candidates():
            self.sizes = sizes
            key = (program_facts(self.emit_program())[0].cycles, len(sizes), sizes)
            if best is None or key < best[0]:
                best = (key, sizes)
        if best is None:
            raise TilingError(f"{text}: no chunk fits")
        return best[1]

    def describe_tiling(self) -> str:
        """The layer report's tiling column: the chunks, in input vectors, and what the
        sums end as."""
        out = (f"shift {self.shift}, int8" if self.shift else
               f"{self.planes} byte plane{'s' * (self.planes > 1)}")
        return (f"streamed: {len(self.sizes)} chunk{'s' * (len(self.sizes) > 1)} of "
                f"{list(self.sizes)} input vectors, {out}")

    def roofline(self):
        """The GEMM bound of :func:`.cost.roofline.conv_roofline` for an all-ones
        depthwise kernel (one micro-op per input vector), one reset per accumulator, and
        the rounding ADD and SHR or a SHR per byte plane after the first."""
        cfg = self.config
        ops = self.operands
        rd = sum(op.nbytes for k, op in ops.items() if k != "out")
        wr = ops["out"].nbytes
        beats = lambda names: sum(ceil_div(ops[k].nbytes, cfg.bus_bytes)  # noqa: E731
                                  for k in names)
        dram = max(beats(["data", "weight"]), beats(["out"]))
        mac = self.vectors
        macs = self.x_shape[1] * self.x_shape[0] * self.area
        alu = self.blocks * (1 + (2 if self.shift else self.planes - 1))
        return Roofline(mac, alu, dram, rd, wr, macs,
                        macs / (mac * cfg.batch * cfg.block_in * cfg.block_out),
                        two_lanes=bool(cfg.compute_overlap))

    # ------------------------------------------------------------------ host

    def pack(self, x, weight=None) -> dict:
        """``x`` packed; ``weight`` (optional, the depthwise all-ones kernel of the same
        pool as :func:`plan_avg_pool_gemm` takes it) must be all ones."""
        x = np.asarray(x)
        if x.shape != self.x_shape:
            raise ValueError(f"{self.name}: input {x.shape}, the plan is for {self.x_shape}")
        if weight is not None and not np.all(np.asarray(weight) == 1):
            raise ValueError(f"{self.name}: the window sums take an all-ones kernel")
        blk = self.config.block
        return {"data": pack_activation(x.astype(np.int8), self.config),
                "weight": np.eye(blk, dtype=np.int8).reshape(1, 1, 1, 1, blk, blk)}

    def unpack(self, out) -> np.ndarray:
        """Packed ``out`` -> NCHW (N, C, 1, 1): int8, or int32 from several byte planes."""
        n, c = self.x_shape[:2]
        planes = [unpack_activation(pl, self.config, n, c) for pl in out]
        return planes[0] if len(planes) == 1 else assemble_planes(planes)

    # -------------------------------------------------------------- lowering

    def chunks(self) -> list:
        """``[(first vector, vectors)]`` of the chunks in load order."""
        starts = np.cumsum((0,) + self.sizes[:-1])
        return [(int(v), n) for v, n in zip(starts, self.sizes)]

    def emit(self, builder, slots: dict) -> None:
        cfg, area, blocks, planes = self.config, self.area, self.blocks, self.planes
        chunks = self.chunks()
        slot = max(self.sizes[1:], default=0)
        top = cfg.inp_depth - 2 * slot                   # the other chunks' two slots
        wgt = cfg.wgt_depth - 1                          # the top weight row
        # the accumulators the first chunk adds into are reset first (in a warm start's
        # head, which runs at the end of the stream before), the others after its GEMMs
        first = ceil_div(self.sizes[0], area)
        builder.push_gemm(UopKernel.gemm([(0, 0, 0)], [(first, 1, 0, 0)], reset=True))
        for g, (v0, nv) in enumerate(chunks):
            sram = 0 if g == 0 else top + (g - 1) % 2 * slot
            if g >= 3:                                   # chunk g - 2 left the slot
                builder.dep_pop(Unit.COMPUTE, Unit.LOAD)
            if g == 0:
                builder.load_2d(MemType.WGT, wgt, slots["weight"], 0, 1, 1, 1)
            builder.load_2d(MemType.INP, sram, slots["data"], v0, nv, 1, nv)
            builder.dep_push(Unit.LOAD, Unit.COMPUTE)
            builder.dep_pop(Unit.LOAD, Unit.COMPUTE)
            v, end = v0, v0 + nv
            while v < end:
                j, p = divmod(v, area)
                if p == 0 and end - v >= area:          # whole blocks: blocks inner
                    nblk = (end - v) // area
                    loops = [(area, 0, 1, 0)] + ([(nblk, 1, area, 0)] if nblk > 1 else [])
                    step = nblk * area
                else:                                   # a part of block j
                    step = min(end - v, area - p)
                    loops = [(step, 0, 1, 0)]
                builder.push_gemm(UopKernel.gemm([(j, sram + v - v0, wgt)], loops,
                                                 check_hazard=False))
                v += step
            if g == 0 and blocks > first:
                builder.push_gemm(UopKernel.gemm([(first, 0, 0)],
                                                 [(blocks - first, 1, 0, 0)],
                                                 reset=True))
            if g >= 1 and g + 2 < len(chunks):
                builder.dep_push(Unit.COMPUTE, Unit.LOAD)
        self._store(builder, slots)
        kernel_fence(builder)

    def _store(self, builder, slots):
        """The epilogue and the stores: the rounding shift, or each byte plane after the
        first the previous one shifted right by 8 in place, once its store is over."""
        blocks = self.blocks
        if self.shift:
            self._imm(builder, AluOp.ADD, 1 << (self.shift - 1), 0, blocks)
            self._imm(builder, AluOp.SHR, self.shift, 0, blocks)
        for k in range(self.planes):
            if k:
                builder.dep_pop(Unit.STORE, Unit.COMPUTE)
                self._imm(builder, AluOp.SHR, 8, 0, blocks)
            builder.dep_push(Unit.COMPUTE, Unit.STORE)
            builder.dep_pop(Unit.COMPUTE, Unit.STORE)
            builder.store_2d(0, slots["out"], k * blocks, blocks, 1, blocks)
            if k + 1 < self.planes:
                builder.dep_push(Unit.STORE, Unit.COMPUTE)

    @staticmethod
    def _imm(builder, op, imm, base, n):
        f = fold_loops([Dim("b", n, 1, 1)], (base, base, 0))
        builder.push_alu(UopKernel.alu(op, [u[:2] for u in f.uops], [lp[:3] for lp in f.loops],
                                       imm=imm))


def plan_pool2d(config, x_shape, kind, kernel, stride=None, padding=0, tile=None) -> PoolPlan:
    """Plan a pooling without running it."""
    return PoolPlan(config, x_shape, kind, kernel, stride, padding, tile)


def _run(rt, x, kind, kernel, stride, padding):
    x = check_operand(f"{kind}_pool2d", "x", x)
    plan = plan_pool2d(rt.config, np.shape(x), kind, kernel, stride, padding)
    out, _ = plan.run(rt, plan.pack(x))
    return plan.unpack(out)


def plan_avg_pool_gemm(config, x_shape, kernel, stride=None, padding=0) -> Conv2dPlan:
    """Average pooling as a depthwise convolution with an all-ones kernel.

    The window sums run on the GEMM core (one shared identity weight tile, one
    micro-op per output element and window position at one per cycle) from int8
    inputs that the
    double-buffered load module streams in, instead of int32 LOAD ACCs on the
    compute module. A power-of-two area is divided on VTA by the epilogue's rounding
    shift; other areas return int32 sums (byte planes) for the host to divide.
    """
    kh, kw = _pair(kernel)
    area = kh * kw
    pow2 = area & (area - 1) == 0
    c = int(x_shape[1])
    # window sums of int8 lie within 128 x area: their low bytes are enough
    epi = Epilogue.make(shift=area.bit_length() - 1 if pow2 else 0,
                        out_dtype=np.int8 if pow2 else np.int32, op="avg_pool2d",
                        result_bytes=result_bytes_for(128 * area))
    conv = Conv2dPlan(config, x_shape, (c, 1, kh, kw), (kh, kw) if stride is None else stride,
                      padding, groups=c, epilogue=epi, shared_weight=True)
    return global_sums_or(conv)


def global_sums_or(conv, warm_next=False):
    """``conv`` (the window sums of an average pool as an all-ones depthwise
    :class:`Conv2dPlan`, one shared weight tile) or, when the pool is global (the window
    is the unpadded input plane), the :class:`GlobalSumPlan` of the same sums and
    epilogue (a rounding shift, int8 out, or the int32 sums' byte planes): it takes the
    same ``pack(x, ones)`` and stores the same ``out``. That one when the event model
    predicts it faster alone, or always with ``warm_next``: a model's layer, whose stream
    ends with the next layer's warm-start head (:mod:`vtakit.runtime.chain`), which the
    kernel's prediction alone does not see: that head's loads wait for the pool's last
    GEMM reading the rows they overwrite, the conv plan's last one, the global plan's
    first (measured on Verilator, MLPerf Tiny on default and tiny: every global pool
    faster in the model with it, visual wake words on tiny too although predicted
    slower alone, 565 against 522 cycles)."""
    epi = conv.epilogue
    if (tuple(conv.x_shape[2:]) != tuple(conv.w_shape[2:]) or any(conv.padding)
            or epi.bias or epi.requant is not None or epi.lo is not None
            or epi.hi is not None or epi.add is not None or epi.residual is not None):
        return conv
    try:
        whole = GlobalSumPlan(conv.config, conv.x_shape, shift=epi.shift, planes=epi.planes)
    except TilingError:
        return conv
    return whole if warm_next or whole.predicted() < conv.predicted() else conv


def _avg_pool_gemm(rt, x, kernel, stride, padding):
    plan = plan_avg_pool_gemm(rt.config, np.shape(x), kernel, stride, padding)
    kh, kw = _pair(kernel)
    ones = np.ones((np.shape(x)[1], 1, kh, kw), np.int8)
    out, _ = plan.run(rt, plan.pack(x, ones))
    y = plan.unpack(out)
    return y if y.dtype == np.int8 else round_shift_div(y, kh * kw).astype(np.int8)


def max_pool2d(rt, x, kernel, stride=None, padding=0) -> np.ndarray:
    """int8 NCHW max pooling (padding never wins); equals :func:`reference.max_pool2d_ref`."""
    check_positive("max_pool2d", "kernel", kernel)
    return _run(rt, x, "max", kernel, stride, padding)


def avg_pool2d(rt, x, kernel, stride=None, padding=0, *, engine="auto") -> np.ndarray:
    """int8 NCHW average pooling (count_include_pad, rounding half up); equals
    :func:`reference.avg_pool2d_ref`.

    ``engine``: ``"gemm"`` (:func:`plan_avg_pool_gemm`, the fast path), ``"alu"``
    (:class:`PoolPlan`: LOAD ACC + ALU ADD), or ``"auto"``: gemm, or alu when the
    window does not fit the gemm mapping. Non-power-of-two windows divide on the host.
    """
    if engine not in ("auto", "gemm", "alu"):
        raise ValueError(f"avg_pool2d: engine {engine!r}; expected 'auto', 'gemm' or 'alu'")
    x = check_operand("avg_pool2d", "x", x)
    check_positive("avg_pool2d", "kernel", kernel)
    if engine != "alu":
        try:
            return _avg_pool_gemm(rt, x, kernel, stride, padding)
        except TilingError:
            if engine == "gemm":
                raise
    return _run(rt, x, "avg", kernel, stride, padding)


def global_avg_pool2d(rt, x, *, engine="auto") -> np.ndarray:
    """int8 NCHW -> (N, C, 1, 1) mean; equals :func:`reference.global_avg_pool2d_ref`."""
    x = check_operand("global_avg_pool2d", "x", x)
    return avg_pool2d(rt, x, np.shape(x)[2:], None, 0, engine=engine)
