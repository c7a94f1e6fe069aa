"""int8 dense (fully connected) layers and matrix products on VTA.

The packed dense data layout (N/b, K/c, b, c) is the activation layout with
H = W = 1, so a dense layer is lowered as a 1x1 convolution on a 1x1 image:
the tiler then tiles batch blocks (``tn``), output blocks and input chunks, and
the whole tile is one LOAD per operand and one GEMM instruction whose micro-op
loops cover the reduction.

A small batch reads every weight once and does one MAC per weight byte: the layer
is bound by the DRAM read port (one bus beat per cycle), and the tiled schedule's
double buffering leaves it idle while a slot's GEMMs, epilogue and stores finish.
Such a layer may run the *streamed* schedule instead (:attr:`DensePlan.stream`,
:class:`_DenseStream`): the input loaded once, the whole weight resident in the wgt
SRAM and streamed in one LOAD per output tile, every output block its own
accumulator (so no tile waits for the store of another), each tile's epilogue and
stores right after its GEMM, and a small last tile, since after its weights only
its GEMM, epilogue and stores remain. The plan takes it when the event model
predicts it faster than the searched tiling.
"""

from __future__ import annotations

import numpy as np

from ...hw.isa import AluOp, MemType
from ...runtime import Unit, UopKernel
from .conv2d import Conv2dPlan, _residual_kind, assemble_planes
from .epilogue import Epilogue, Requant2, accumulation_bound
from .layout import unpack_dense_data
from .loops import Dim, fold_loops
from .plan import Operand
from .reference import wrap32
from .tiling import SearchCost, gemm_dims
from .tokens import kernel_fence
from .operands import check_fits, check_operand

__all__ = ["DensePlan", "plan_dense", "dense", "stream_candidates"]


class DensePlan(Conv2dPlan):
    """A planned dense layer ``(N, K) x (O, K)^T``; operands as :class:`Conv2dPlan`
    with H = W = 1 (same bytes as the dense packed layouts).

    Attributes
    ----------
    stream : tuple of int
        The output-channel blocks of each tile of the streamed schedule (module
        docstring; they sum to the layer's blocks), or ``()``: the tiled schedule of
        :attr:`tiling`. Chosen by the event model unless a ``tiling`` or ``stream`` is
        given.
    """

    MERGE_ROWS = False      # its rows: :attr:`bias_start`'s own operand

    name = "dense"
    stream: tuple = ()

    def __init__(self, config, x_shape, w_shape, *, epilogue: Epilogue = Epilogue(),
                 tiling=None, cost: SearchCost = SearchCost(), stream=None):
        (n, k), (o, k2) = x_shape, w_shape
        self.dense_shapes = ((int(n), int(k)), (int(o), int(k2)))
        super().__init__(config, (n, k, 1, 1), (o, k2, 1, 1), 1, 0, epilogue=epilogue,
                         tiling=tiling, cost=cost)
        self._tiled_operands = dict(self.operands)
        if stream is not None:
            self._set_stream(tuple(int(s) for s in stream))
        elif tiling is None and self.stream_fits():
            self._choose_stream()

    # ------------------------------------------------------------------ streamed

    def stream_fits(self) -> bool:
        """Whether the streamed schedule can run this layer: no residual, and the whole
        input, the whole weight and one accumulator per output block (with the
        per-channel rows) within the SRAMs."""
        p, cfg, epi = self.problem, self.config, self.epilogue
        return (not epi.residual and epi.add is None
                and p.nb * p.ib <= cfg.inp_depth
                and p.ob * p.ib <= cfg.wgt_depth
                and p.nb * p.ob + self._stream_rows() <= cfg.acc_depth)

    def _stream_rows(self) -> int:
        """Acc entries of the per-channel rows (bias, requantize rows) of every block."""
        p, epi = self.problem, self.epilogue
        return p.ob * int(epi.bias_tile) + p.row_blocks * epi.rows

    def _bias_start_fits(self) -> bool:
        """Whether the streamed schedule may start the accumulators from the bias
        (:attr:`bias_start`): a one-pass requantize with uniform rows and one batch block."""
        epi = self.epilogue
        return (isinstance(epi.requant, Requant2) and epi.uniform_rows and epi.bias
                and not epi.init and self.problem.nb == 1)

    @property
    def bias_start(self) -> bool:
        """The streamed schedule loads the accumulators themselves with the bias, the
        requantize rows ahead of them in the same LOAD ACC (the DRAM operand
        ``"requant"`` holds ``M``, ``P`` then ``bias - P`` per block, no ``"bias"``
        operand): no reset GEMM and one LOAD fewer. ``REQ`` adds its src to the
        accumulators, and its src is the ``P`` row (wrapping adds: ``bias - P + acc + P``
        is ``bias + acc``). A :class:`.epilogue.Requant2` epilogue with
        :attr:`~.epilogue.Epilogue.uniform_rows` and one batch block only."""
        return bool(self.stream) and self._bias_start_fits()

    def _set_stream(self, stream: tuple) -> None:
        if stream and (sum(stream) != self.problem.ob or min(stream) < 1):
            raise ValueError(f"{self.problem.describe}: streamed tiles {list(stream)} must be "
                             f"positive and cover the {self.problem.ob} output blocks")
        if stream and not self.stream_fits():
            raise ValueError(f"{self.problem.describe}: the streamed schedule does not fit "
                             f"config {self.config.name} (it keeps the whole input, weight "
                             "and output in SRAM and adds no residual)")
        self.stream = stream
        self._program = None
        self.operands = dict(self._tiled_operands)
        if self.bias_start:          # one operand: the rows, then the bias of every block
            bias, rows = self.operands.pop("bias"), self.operands["requant"]
            self.operands["requant"] = Operand(
                "requant", (rows.shape[0] + bias.shape[0],) + bias.shape[1:], np.int32)

    #: :meth:`_choose_stream` takes the streamed schedule when the event model predicts at
    #: most this fraction of the tiled schedule's cycles. Verilator: the layers predicted
    #: 2.7-5.4% faster gain 2.5-4% (anomaly detection, default and default+requant2);
    #: keyword spotting's and image classification's last layer on tiny (64 -> 12,
    #: predicted 1.7% faster) lost 3 cycles.
    STREAM_GAIN = 0.98
    #: :attr:`STREAM_GAIN` of a layer whose streamed schedule starts the accumulators from
    #: the bias (:attr:`bias_start`): its kernel has fewer instructions than the tiled one
    #: (no reset GEMM, one LOAD ACC), so it is taken when predicted faster at all.
    #: Verilator, anomaly detection on default+requant2 (its 128 -> 8 and 8 -> 128
    #: layers, predicted 0.5-0.7% faster): 35,176 -> 35,131 cycles chained, 35,494 ->
    #: 35,439 layer by layer.
    BIAS_START_GAIN = 1.0

    def _choose_stream(self) -> None:
        """Keep the candidate (:func:`stream_candidates`) the event model predicts fastest
        when it predicts at most :attr:`STREAM_GAIN` (:attr:`BIAS_START_GAIN`) of the
        tiled schedule's cycles."""
        tiled = self.predicted()
        best = (tiled, ())
        for cand in stream_candidates(self.problem.ob):
            self._set_stream(cand)
            best = min(best, (self.predicted(), cand))
        gain = self.BIAS_START_GAIN if self._bias_start_fits() else self.STREAM_GAIN
        self._set_stream(best[1] if best[0] <= gain * tiled else ())

    def emit(self, builder, slots: dict) -> None:
        if self.stream:
            _DenseStream(self, builder, slots).run()
        else:
            super().emit(builder, slots)

    # ------------------------------------------------------------------ host side

    def pack(self, x, w, bias=None, residual=None, requant=None) -> dict:
        """Pack (N, K) int8 data, (O, K) int8 weights, (O,) bias, (N, O) residual,
        (rows, O) requantize rows."""
        x, w = np.asarray(x), np.asarray(w)
        if (x.shape, w.shape) != self.dense_shapes:
            raise ValueError(f"dense: got x{list(x.shape)} w{list(w.shape)}, the plan is for "
                             f"x{list(self.dense_shapes[0])} w{list(self.dense_shapes[1])}")
        res = None if residual is None else np.asarray(residual)[:, :, None, None]
        out = super().pack(x[:, :, None, None], w[:, :, None, None], bias, res, requant)
        if "bias" in out and "bias" not in self.operands:        # bias_start
            rows, b = out["requant"][:, 0], out.pop("bias").astype(np.int64)
            start = wrap32(b - rows[1].astype(np.int64)).astype(np.int32)
            out["requant"] = np.ascontiguousarray(np.concatenate([rows, start]))
        return out

    def unpack(self, out) -> np.ndarray:
        """Packed ``out`` -> (N, O)."""
        n, o = self.dense_shapes[0][0], self.dense_shapes[1][0]
        planes = [unpack_dense_data(pl[:, :, 0, 0], self.config, n, o) for pl in out]
        return planes[0] if len(planes) == 1 else assemble_planes(planes)


def stream_candidates(ob: int, most: int = 4) -> list:
    """Tile sizes the streamed schedule tries for ``ob`` output blocks: the blocks in 1 to
    ``most`` tiles as even as possible (larger first), each also with a last tile of 1
    or 2 blocks split off (after the last weights only the last tile's GEMM, epilogue
    and stores run; every tile costs a few instructions, whose fetch shares the DRAM
    read port with the weights)."""
    out = []
    for last in (0, 1, 2):
        rest = ob - last
        if rest < 1:
            continue
        for m in range(1, min(most, rest) + 1):
            q, r = divmod(rest, m)
            cand = tuple([q + 1] * r + [q] * (m - r) + ([last] if last else []))
            if cand not in out:
                out.append(cand)
    return out


class _DenseStream:
    """One emission of a :class:`DensePlan`'s streamed schedule.

    SRAM: inp ``[n][i]`` (the whole input, one LOAD), wgt ``[o][i]`` (the whole weight
    as in DRAM, each tile's rows loaded by one LOAD), acc: the tiles' accumulators in
    tile order, each ``[n][o]``, then the per-channel rows shared by all tiles (bias
    ``[o]``, requantize row ``r`` at ``r * row_blocks``), loaded once. With
    :attr:`DensePlan.bias_start`: the two rows at 0 and 1, then the accumulators, all
    loaded by one LOAD ACC (the accumulators' start: ``bias - P``).

    Tokens: load pushes l2g after each tile's weights (the first with the input),
    compute pops it before the tile's GEMM and pushes g2s after the epilogue; with an
    int32 result the shift of plane ``k`` pops the s2g the store of plane ``k - 1``
    pushed. No slot is reused, so nothing else waits.
    """

    def __init__(self, plan, builder, slots):
        self.plan, self.builder, self.slots = plan, builder, slots
        self.p, self.epi, self.cfg = plan.problem, plan.epilogue, plan.config
        p = self.p
        self.tiles, co0 = [], 0
        for tco in plan.stream:
            self.tiles.append((co0, tco))
            co0 += tco
        self.start = plan.bias_start
        if self.start:      # the rows, then the accumulators (loaded with the bias)
            self.acc0, self.rows_region = self.epi.rows, 0
        else:
            self.acc0, self.region = 0, p.nb * p.ob      # the shared rows start here
            self.rows_region = self.region + p.ob * int(self.epi.bias_tile)

    def run(self) -> None:
        p, epi, builder, slots = self.p, self.epi, self.builder, self.slots
        nb, ob, ib = p.nb, p.ob, p.ib
        # compute: the per-channel rows, every accumulator reset, the MIN init
        if self.start:      # the rows and the accumulators' start in one LOAD, no reset
            n = epi.rows + ob
            builder.load_2d(MemType.ACC, 0, slots["requant"], 0, n, 1, n)
        else:
            if epi.bias_tile:
                builder.load_2d(MemType.ACC, self.region, slots["bias"], 0, ob, 1, ob)
            if epi.rows:
                builder.load_2d(MemType.ACC, self.rows_region, slots["requant"], 0,
                                p.row_blocks, epi.rows, p.row_blocks)
            f = fold_loops([Dim("e", nb * ob, 1)], (0, 0, 0))
            builder.push_gemm(UopKernel.gemm(f.uops, f.loops, reset=True))
        loaded = [None]        # requant2: the block REQ's registers hold
        if self.start:      # REQ's registers before the first GEMM waits for its weights
            epi.emit_req_setup(builder, self.rows_region, loaded)
        for t, (co0, tco) in enumerate(self.tiles):
            acc = self.acc0 + nb * co0
            # load: the input with the first tile, then the tile's weights
            if t == 0:
                builder.load_2d(MemType.INP, 0, slots["data"], 0, nb * ib, 1, nb * ib)
            builder.load_2d(MemType.WGT, co0 * ib, slots["weight"], co0 * ib, tco * ib, 1,
                            tco * ib)
            builder.dep_push(Unit.LOAD, Unit.COMPUTE)
            # compute: the tile's GEMM and epilogue
            builder.dep_pop(Unit.LOAD, Unit.COMPUTE)
            if self.start:  # REQ's src: the P row, which the start holds subtracted
                bias_dims = [Dim("n", nb, tco, 0), Dim("o", tco, 1, 0), Dim("p", 1, 1, 0)]
                bias_base = self.rows_region + 1
            else:
                bias_dims = [Dim("n", nb, tco, 0), Dim("o", tco, 1, 1), Dim("p", 1, 1, 0)]
                bias_base = self.region + co0
            if epi.init:
                epi.emit_init(builder, acc, bias_base, bias_dims)
            f = fold_loops(gemm_dims(p, nb, tco, 1, 1, ib, 1, 1), (acc, 0, co0 * ib))
            builder.push_gemm(UopKernel.gemm(f.uops, f.loops, check_hazard=f.hazard_free))
            out_dims = [Dim("n", nb, tco), Dim("o", tco, 1), Dim("p", 1, 1)]
            if epi.out_dtype != "int32":
                epi.emit(builder, acc, out_dims, bias_base, bias_dims,
                         self.rows_region + co0 * (not epi.uniform_rows), p.row_blocks,
                         co0, loaded)
            for k in range(epi.planes):
                if k:       # the next byte plane, once the store of this one is done
                    builder.dep_pop(Unit.STORE, Unit.COMPUTE)
                    epi.emit_plane_shift(builder, acc, out_dims)
                builder.dep_push(Unit.COMPUTE, Unit.STORE)
                builder.dep_pop(Unit.COMPUTE, Unit.STORE)
                builder.store_2d(acc, slots["out"], k * nb * ob + co0, tco, nb, ob)
                if k + 1 < epi.planes:
                    builder.dep_push(Unit.STORE, Unit.COMPUTE)
        kernel_fence(builder)


def plan_dense(config, x_shape, w_shape, *, bias=False, shift=0, relu=False, clip=None,
               residual=False, out_dtype=np.int8, tiling=None,
               cost: SearchCost = SearchCost(), requant=None, result_bytes=4,
               min_init=None, stream=None) -> DensePlan:
    """Plan a dense layer without running it (``bias``/``residual`` are flags here;
    ``requant`` an :class:`.epilogue.Requant`; ``min_init`` as for
    :func:`.conv2d.plan_conv2d`; ``stream``: the streamed schedule's tile sizes, ``()``
    for the tiled schedule, None to choose)."""
    epi = Epilogue.make(bias=bias, residual=residual, shift=shift, clip=clip, relu=relu,
                        out_dtype=out_dtype, op="dense", requant=requant,
                        result_bytes=result_bytes)
    if min_init is not None:
        epi = epi.with_min_init(min_init[0], accumulation_bound(min_init[1]))
    return DensePlan(config, x_shape, w_shape, epilogue=epi, tiling=tiling, cost=cost,
                     stream=stream)


def dense(rt, x, w, *, bias=None, shift=0, relu=False, clip=None, residual=None,
          out_dtype=np.int8, tiling=None) -> np.ndarray:
    """Run ``y = epilogue(x @ w.T + bias + residual)`` on the device of ``rt``.

    ``x`` is (N, K) int8, ``w`` (O, K) int8, ``bias`` (O,) int32, ``residual`` (N, O);
    the epilogue arguments are those of :func:`conv2d`. Returns (N, O) ``out_dtype``.
    """
    x = check_operand("dense", "x", x, (2,))
    w = check_operand("dense", "w", w, (2,))
    check_fits("dense", rt, x, w)
    plan = plan_dense(rt.config, np.shape(x), np.shape(w), bias=bias is not None,
                      shift=shift, relu=relu, clip=clip, residual=_residual_kind(residual),
                      out_dtype=out_dtype, tiling=tiling, min_init=(bias, w))
    out, _ = plan.run(rt, plan.pack(x, w, bias, residual))
    return plan.unpack(out)
