"""Standalone element-wise addition on VTA.

Two engines. The GEMM engine (:func:`plan_add_gemm`, the default for int8
operands) is a 1x1 depthwise convolution of ``a`` with identity weights plus
``b`` as its int8 residual: both operands stream as int8 through the
double-buffered load module and each costs one GEMM micro-op per element. The
ALU engine (:class:`AddPlan`) is described below.

Both operands go to the accumulator SRAM, so they travel as int32 (int8 inputs
are sign-extended on the host: VTA has no 8-bit LOAD ACC in the base ISA). The
packed tensors are processed as one flat range of acc elements, in tiles of
half an acc buffer slot: LOAD ACC a, LOAD ACC b, ALU ADD tensor, the immediate
epilogue passes (rounding, shift, clip), store. Two acc slots let the store of
one tile overlap the next tile's compute.
"""

from __future__ import annotations

import numpy as np

from ...hw.isa import AluOp, MemType
from ...runtime import UopKernel
from .conv2d import Conv2dPlan, assemble_planes
from .epilogue import Epilogue, EpilogueError
from ...runtime.layout import LayoutError, nchw_shape
from .layout import pack_activation, unpack_activation
from .loops import Dim, fold_loops
from .tokens import Pipeline, kernel_fence
from .cost.roofline import add_roofline, rescaled_add_roofline
from .plan import OpPlan, Operand
from .operands import check_operand

__all__ = ["AddPlan", "RescaledAddPlan", "plan_add", "plan_add_gemm", "add"]


def _as_nchw(shape):
    try:
        return nchw_shape(shape)
    except LayoutError:
        raise ValueError(f"add: operands must be NCHW (4-D) or (N, C), got shape "
                         f"{tuple(shape)}") from None


class AddPlan(OpPlan):
    """``out = epilogue(a + b)`` for two tensors of one shape (NCHW or (N, C)).

    Operands: ``a``, ``b`` int32 packed activations (N/b, C/c, H, W, b, c); ``out``
    int8 (planes, N/b, C/c, H, W, b, c).
    """

    name = "add"

    def roofline(self):
        """This layer's :class:`~.cost.roofline.Roofline`."""
        return add_roofline(self, self.config)

    def __init__(self, config, shape, *, epilogue: Epilogue = Epilogue(), tile=None):
        super().__init__(config)
        self.shape = tuple(int(s) for s in shape)
        n, c, h, w = _as_nchw(self.shape)
        if epilogue.bias_tile or epilogue.residual or epilogue.bias:
            raise EpilogueError(f"add{list(self.shape)}: shift={epilogue.shift} needs a "
                                "rounding constant above 2^14; element-wise ops support "
                                "shift <= 15 and no bias/residual")
        self.epilogue = epilogue
        b, blk = config.batch, config.block
        packed = (-(-n // b), -(-c // blk), h, w, b, blk)
        self.elements = packed[0] * packed[1] * h * w
        self.nthreads = 1 if epilogue.planes > 1 else 2
        slot = config.acc_depth // self.nthreads
        self.tile = int(tile) if tile else min(slot // 2, self.elements)
        if not 1 <= self.tile <= slot // 2:
            raise ValueError(f"add: tile of {self.tile} elements; two operands must fit half "
                             f"of the {config.acc_depth}-element acc buffer")
        self.operands = {"a": Operand("a", packed, np.int32), "b": Operand("b", packed, np.int32),
                         "out": Operand("out", (epilogue.planes,) + packed, np.int8)}

    def pack(self, a, b) -> dict:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != self.shape or b.shape != self.shape:
            raise ValueError(f"add: operands {a.shape} and {b.shape}, the plan is for "
                             f"{self.shape}")
        nchw = _as_nchw(self.shape)
        return {k: pack_activation(v.astype(np.int32).reshape(nchw), self.config)
                for k, v in (("a", a), ("b", b))}

    def unpack(self, out) -> np.ndarray:
        n, c = _as_nchw(self.shape)[:2]
        planes = [unpack_activation(pl, self.config, n, c).reshape(self.shape) for pl in out]
        return planes[0] if len(planes) == 1 else assemble_planes(planes)

    def emit(self, builder, slots: dict) -> None:
        epi, nth = self.epilogue, self.nthreads
        slot = self.config.acc_depth // nth
        starts = list(range(0, self.elements, self.tile))
        pipe = Pipeline(builder, 1, nth, 0, len(starts) * epi.planes)
        for ti, e0 in enumerate(starts):
            size = min(self.tile, self.elements - e0)
            base_a = (ti % nth) * slot
            base_b = base_a + self.tile
            dims = [Dim("e", size, 1)]
            pipe.acquire_out(ti * epi.planes)
            builder.load_2d(MemType.ACC, base_a, slots["a"], e0, size, 1, size)
            builder.load_2d(MemType.ACC, base_b, slots["b"], e0, size, 1, size)
            builder.push_alu(UopKernel.alu(AluOp.ADD, [(base_a, base_b)], [(size, 1, 1)]))
            epi.emit(builder, base_a, dims)
            for k in range(epi.planes):
                ev = ti * epi.planes + k
                if k:
                    pipe.acquire_out(ev)
                    epi.emit_plane_shift(builder, base_a, dims)
                pipe.release_out(ev)
                pipe.store_begin(ev)
                builder.store_2d(base_a, slots["out"], k * self.elements + e0, size, 1, size)
                pipe.store_end(ev)
        kernel_fence(builder)


def plan_add(config, shape, *, shift=0, relu=False, clip=None, out_dtype=np.int8,
             tile=None) -> AddPlan:
    """Plan ``epilogue(a + b)`` for operands of ``shape``."""
    epi = Epilogue.make(shift=shift, clip=clip, relu=relu, out_dtype=out_dtype, op="add")
    return AddPlan(config, shape, epilogue=epi, tile=tile)


def plan_add_gemm(config, shape, *, bias=False, shift=0, relu=False, clip=None,
                  out_dtype=np.int8) -> Conv2dPlan:
    """Plan ``epilogue(a + b)`` for int8 operands on the GEMM core: a 1x1 depthwise
    convolution of ``a`` with one shared identity weight tile and ``b`` as its int8
    residual. Pack with ``plan.pack(a4, ones, bias, residual=b4)`` on NCHW views (see
    :func:`add`); scaled weights (``2^e`` instead of ones, and the packed ``identity``
    times ``2^e``) make it ``a 2^e_a + b 2^e_b``."""
    n, c, h, w = _as_nchw(shape)
    epi = Epilogue.make(bias=bias, residual="int8", shift=shift, clip=clip, relu=relu,
                        out_dtype=out_dtype, op="add")
    return Conv2dPlan(config, (n, c, h, w), (c, 1, 1, 1), 1, 0, groups=c, epilogue=epi,
                      shared_weight=True)


def add(rt, a, b, *, shift=0, relu=False, clip=None, out_dtype=np.int8,
        engine="auto") -> np.ndarray:
    """Element-wise ``a + b`` (int8 or int32 NCHW / (N, C) tensors of one shape), then
    rounding shift and clip as in :func:`conv2d`; equals :func:`reference.add_ref`.

    ``engine``: ``"gemm"`` (int8 operands only, :func:`plan_add_gemm`), ``"alu"``
    (:class:`AddPlan`), or ``"auto"``: gemm for two int8 operands, else alu.
    """
    if engine not in ("auto", "gemm", "alu"):
        raise ValueError(f"add: engine {engine!r}; expected 'auto', 'gemm' or 'alu'")
    a = check_operand("add", "a", a, (2, 4), int32=True)
    b = check_operand("add", "b", b, (2, 4), int32=True)
    both_i8 = a.dtype == np.int8 and b.dtype == np.int8
    if engine == "gemm" and not both_i8:
        raise ValueError(f"add: the gemm engine adds int8 operands, got {a.dtype} and {b.dtype}")
    if engine != "alu" and both_i8:
        if a.shape != b.shape:
            raise ValueError(f"add: operands {a.shape} and {b.shape} differ in shape")
        shape4 = _as_nchw(a.shape)
        plan = plan_add_gemm(rt.config, a.shape, shift=shift, relu=relu, clip=clip,
                             out_dtype=out_dtype)
        ones = np.ones((shape4[1], 1, 1, 1), np.int8)
        out, _ = plan.run(rt, plan.pack(a.reshape(shape4), ones, None, b.reshape(shape4)))
        return plan.unpack(out).reshape(a.shape)
    plan = plan_add(rt.config, np.shape(a), shift=shift, relu=relu, clip=clip,
                    out_dtype=out_dtype)
    out, _ = plan.run(rt, plan.pack(a, b))
    return plan.unpack(out)


class RescaledAddPlan(OpPlan):
    """TFLite's int8 ADD, exactly, on the ALU extension ``"requant"``::

        out = clamp(R_out(R_a((a - z_a) << 20) + R_b((b - z_b) << 20)) + z_out)

    each ``R`` a per-tensor :class:`~.epilogue.Requant` (double rounding). Both int8
    operands reach the accumulators through an identity GEMM, into two regions of a
    tile (``a`` then ``b``: one GEMM micro-op per element each); the ALU subtracts the
    zero points, shifts left, requantizes each region, adds them and runs the output's
    epilogue. Tiles of flat packed elements, two acc/inp slots.

    Operands: ``data`` (a) and ``residual`` (b) int8 (N/b, C/c, H, W, b, c),
    ``identity`` int8 (1, 1, 1, 1, c, c), ``requant`` int32 (rows, 1, b, c) (one acc
    element per row, every lane equal: the rows of ``R_a``, ``R_b`` and ``R_out``),
    ``out`` int8 (1, N/b, C/c, H, W, b, c).
    """

    name = "add"

    def roofline(self):
        """This layer's :class:`~.cost.roofline.Roofline`."""
        return rescaled_add_roofline(self, self.config)

    def __init__(self, config, shape, *, rescale_a, rescale_b, rescale_out, zero_points,
                 clip, left_shift=20, tile=None):
        super().__init__(config)
        self.shape = tuple(int(s) for s in shape)
        n, c, h, w = _as_nchw(self.shape)
        self.rescale = (rescale_a, rescale_b)
        self.zero_points, self.left_shift = tuple(int(z) for z in zero_points), int(left_shift)
        self.epilogue = Epilogue.make(requant=rescale_out, clip=clip, op="add")
        self.epilogue.check_config(config)
        b, blk = config.batch, config.block
        packed = (-(-n // b), -(-c // blk), h, w, b, blk)
        self.elements = packed[0] * packed[1] * h * w
        self.rows = rescale_a.rows + rescale_b.rows + rescale_out.rows
        self.nthreads = 2
        acc_slot, inp_slot = config.acc_depth // 2, config.inp_depth // 2
        self.tile = int(tile) if tile else min((acc_slot - self.rows) // 2, inp_slot // 2,
                                               self.elements)
        if not 1 <= self.tile <= min((acc_slot - self.rows) // 2, inp_slot // 2):
            raise ValueError(f"add: tile of {self.tile} elements; both operands must fit half "
                             "an acc and an inp buffer slot")
        self.operands = {"data": Operand("data", packed, np.int8),
                         "residual": Operand("residual", packed, np.int8),
                         "identity": Operand("identity", (1, 1, 1, 1, blk, blk), np.int8),
                         "requant": Operand("requant", (self.rows, 1, b, blk), np.int32),
                         "out": Operand("out", (1,) + packed, np.int8)}

    def pack(self, a, b, rows) -> dict:
        """Pack the int8 operands and the (rows,) int32 values (``R_a``, ``R_b``, then
        ``R_out``'s rows, as :meth:`.epilogue.Requant.make` gives them)."""
        cfg = self.config
        nchw = _as_nchw(self.shape)
        rows = np.asarray(rows).ravel()
        if rows.shape != (self.rows,):
            raise ValueError(f"add: {rows.size} requantize rows, the plan needs {self.rows}")
        out = {k: pack_activation(np.asarray(v, np.int8).reshape(nchw), cfg)
               for k, v in (("data", a), ("residual", b))}
        out["identity"] = np.eye(cfg.block, dtype=np.int8).reshape(1, 1, 1, 1, cfg.block,
                                                                     cfg.block)
        out["requant"] = np.ascontiguousarray(np.broadcast_to(
            rows.astype(np.int32)[:, None, None, None], self.operands["requant"].shape))
        return out

    def unpack(self, out) -> np.ndarray:
        n, c = _as_nchw(self.shape)[:2]
        return unpack_activation(out[0], self.config, n, c).reshape(self.shape)

    def emit(self, builder, slots: dict) -> None:
        cfg = self.config
        acc_slot, inp_slot = cfg.acc_depth // 2, cfg.inp_depth // 2
        starts = list(range(0, self.elements, self.tile))
        pipe = Pipeline(builder, 2, 2, len(starts), len(starts))
        rows_has = [False, False]
        for ti, e0 in enumerate(starts):
            size = min(self.tile, self.elements - e0)
            s = ti % 2
            acc, inp = s * acc_slot, s * inp_slot
            rows_base = (s + 1) * acc_slot - self.rows
            both = [Dim("e", 2 * size, 1, 1, 0)]
            pipe.acquire_out(ti)
            if not rows_has[s]:
                builder.load_2d(MemType.ACC, rows_base, slots["requant"], 0, self.rows, 1,
                                self.rows)
                rows_has[s] = True
            f = fold_loops(both, (acc, 0, 0))
            builder.push_gemm(UopKernel.gemm(f.uops, f.loops, reset=True))
            pipe.load_begin(ti)
            if ti == 0:       # the identity tile stays at wgt 0 (nothing overwrites it)
                builder.load_2d(MemType.WGT, 0, slots["identity"], 0, 1, 1, 1)
            builder.load_2d(MemType.INP, inp, slots["data"], e0, size, 1, size)
            builder.load_2d(MemType.INP, inp + size, slots["residual"], e0, size, 1, size)
            pipe.load_end(ti)
            pipe.compute_begin(ti)
            f = fold_loops(both, (acc, inp, 0))
            builder.push_gemm(UopKernel.gemm(f.uops, f.loops))
            pipe.compute_end(ti)
            # each operand: minus its zero point, << left_shift, its requantize
            row = rows_base
            for k in range(2):
                self._alu(builder, AluOp.ADD, acc + k * size, size, imm=-self.zero_points[k])
            self._alu(builder, AluOp.SHR, acc, 2 * size, imm=-self.left_shift)
            for k, rq in enumerate(self.rescale):
                base = acc + k * size
                for op, imm in rq.passes():
                    self._alu(builder, op, base, size, src=row, imm=imm)
                    row += 1
            self._alu(builder, AluOp.ADD, acc, size, src=acc + size, src_stride=1)
            dims = [Dim("e", size, 1)]
            self.epilogue.emit(builder, acc, dims, None, [Dim("e", size, 1, 0)], row, 1)
            pipe.release_out(ti)
            pipe.store_begin(ti)
            builder.store_2d(acc, slots["out"], e0, size, 1, size)
            pipe.store_end(ti)
        kernel_fence(builder)

    @staticmethod
    def _alu(builder, op, base, size, *, src=None, imm=None, src_stride=0):
        """One ALU pass over ``size`` accumulators from ``base``: with an immediate, or
        with the tensor operand at ``src`` (``src_stride`` 0: one row for all)."""
        if src is None:
            src, src_stride = base, 1
        f = fold_loops([Dim("e", size, 1, src_stride)], (base, src, 0))
        builder.push_alu(UopKernel.alu(op, [u[:2] for u in f.uops], [lp[:3] for lp in f.loops],
                                       imm=imm))
