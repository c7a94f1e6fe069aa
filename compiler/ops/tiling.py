"""Tiling of convolutions (and dense layers, as 1x1 convolutions) for VTA's SRAMs.

An output tile covers ``tn`` batch blocks x ``tco`` output-channel blocks x
``th`` rows x ``tw`` columns; its reduction over input channels runs in chunks
of ``tci`` blocks. One *group* (the load and GEMM of one chunk) fills one of
``nthreads`` disjoint halves of the inp and wgt SRAMs, and one tile's
accumulators one of ``nthreads`` halves of the acc SRAM: with two "virtual
threads" (reference 4.5) the load of group g+1 and the store of tile t-1 run
while group g computes.

:func:`search_tiles` enumerates candidate tilings that fit every SRAM of the
config, ranks them with an analytic cost model (:class:`CostModel`: GEMM at
one micro-op per cycle, ALU passes, DMA at one bus beat per cycle, per
instruction overheads, and overlap of the three modules) and returns the best
first. A problem that cannot fit at all raises :class:`TilingError` naming the
operator, its shape and the buffer that overflows.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from ...hw.errors import VtakitError
from .layout import ceil_div
from .loops import Dim, fold_loops
from ...hw.spec import MAX_PAD
from .reference import normalize_padding
from .roofline import covered_positions

__all__ = [
    "ConvProblem", "ConvTiling", "CostModel", "RTL_COST", "Estimate", "TilingError",
    "search_tiles", "best_tiling", "gemm_dims", "uop_budget", "acc_slots", "shared_acc", "MAX_PAD",
    "INT32_ACC_SLOTS",
]

#: Acc slots of a double-buffered tiling with an int32 result: tile i's byte-plane shift k
#: runs k tiles after its GEMMs (:class:`~vtakit.compiler.ops.tokens.PlanePipeline`), so
#: a tile holds its slot for four steps and the next occupant waits for its last plane
#: store one step earlier still (planes + 1 slots keep every wait in store order).
INT32_ACC_SLOTS = 5

#: :data:`vtakit.hw.load_engine.MAX_BURST` (the longest DRAM burst of a LOAD), without
#: importing the RTL (tests/test_ops_tiling.py checks they agree).
MAX_BURST = 256


def shared_acc(p, config) -> int:
    """Acc SRAM entries of the per-channel rows (bias, requantize rows, border rows) of
    every output block, loaded once per kernel at the top of the acc SRAM and shared by
    all slots: ``ob x rows``, or 0 (each slot holds its tile's rows instead) when that
    would take more than an eighth of the acc SRAM. Only for int32 results: their five
    slots would otherwise reload a tile's rows at nearly every tile (int8 results keep
    the per-slot rows, which the tile search's model ranks better for them)."""
    n = p.ob * (int(p.bias) + p.acc_rows + p.border_cases)
    return n if p.int32_out and n <= config.acc_depth // 8 else 0


def acc_slots(int32_out, nthreads):
    """Acc/out SRAM slots of a tiling with ``nthreads`` inp/wgt buffers (works on arrays):
    :data:`INT32_ACC_SLOTS` for a double-buffered int32 result, else ``nthreads``."""
    return np.where(np.asarray(nthreads) >= 2, INT32_ACC_SLOTS, nthreads) if int32_out \
        else nthreads



class TilingError(VtakitError, ValueError):
    """An operator that cannot be tiled for a config (names the op, shape and buffer)."""


@dataclass(frozen=True)
class ConvProblem:
    """A convolution in block units: everything the tiler and the cost model need.

    Attributes
    ----------
    nb, ib, ob : int
        Batch, input-channel and output-channel blocks.
    h, w, kh, kw : int
        Input size and kernel size.
    stride : (int, int)
    pad : (top, left, bottom, right)
    bias : bool
        The epilogue adds a per-channel acc tile (ALU ADD tensor), kept in acc SRAM.
    min_init : bool
        The accumulators start from the bias tile by an ALU MIN instead of a reset (the
        bias pass then replaces the reset; the first tile of each slot still resets).
    residual : bool
        The accumulators start from an int32 residual tile (LOAD ACC) instead of a reset.
    residual_gemm : bool
        An int8 residual tile is added by one more GEMM group per tile (identity weights).
    alu_imm : int
        Number of immediate ALU passes over each tile (round, shift, max, min).
    acc_rows : int
        Per-channel int32 rows besides the bias (the exact requantize's multiplier and
        shifts on the ALU extension ``"requant"``): each is one more acc tile of ``tco``
        elements, loaded with the bias, and one ALU pass with a tensor operand.
    border_cases, border_vectors : int
        Padding with a non-zero value corrected on the ALU: per-channel rows (acc tiles
        of ``tco`` elements, loaded with the bias), one per rectangle of output positions
        that read the same taps from the padding, added by ALU ADD tensor over the
        ``border_vectors`` accumulators those rectangles hold (whole problem).
    int32_out : bool
        The result is stored as int8 byte planes (one SHR pass per plane after the
        first).
    result_bytes : int
        The planes of an int32 result (4, or fewer when the results fit).
    op : str
        Operator name, for messages.
    in_blocks : int
        Channel blocks of the input tensor in DRAM (0: ``ib``). Grouped convolutions
        reduce each output block over ``ib`` of them only.
    group_ob : int
        Output blocks per group (0: ``ob``); output-channel tiles never straddle a group.
        Group ``g`` reads input blocks ``[g * ib, (g + 1) * ib)``.
    diag : bool
        Block-diagonal grouped convolution (groups smaller than a block, e.g.
        depthwise): output block ``o`` reads input block ``o`` only, through one
        block-diagonal weight tile per kernel position (``ib`` is 1).
    shared_wgt : bool
        One weight tile serves every output block, input block and kernel position
        (e.g. the identity tile of a window sum): loaded once, all wgt strides 0.
    """

    nb: int
    ib: int
    h: int
    w: int
    ob: int
    kh: int
    kw: int
    stride: tuple = (1, 1)
    pad: tuple = (0, 0, 0, 0)
    bias: bool = False
    residual: bool = False
    alu_imm: int = 0
    int32_out: bool = False
    op: str = "conv2d"
    shape_text: str = ""
    in_blocks: int = 0
    group_ob: int = 0
    diag: bool = False
    shared_wgt: bool = False
    result_bytes: int = 4
    residual_gemm: bool = False
    acc_rows: int = 0
    border_cases: int = 0
    border_vectors: int = 0
    min_init: bool = False

    def __post_init__(self):
        object.__setattr__(self, "pad", normalize_padding(self.pad))
        if isinstance(self.stride, int):
            object.__setattr__(self, "stride", (self.stride, self.stride))

    @property
    def oh(self) -> int:
        return (self.h + self.pad[0] + self.pad[2] - self.kh) // self.stride[0] + 1

    @property
    def ow(self) -> int:
        return (self.w + self.pad[1] + self.pad[3] - self.kw) // self.stride[1] + 1

    @property
    def cin_blocks(self) -> int:
        return self.in_blocks or self.ib

    @property
    def gob(self) -> int:
        return self.group_ob or self.ob

    @property
    def planes(self) -> int:
        """Byte planes stored per output (1 for an int8 result)."""
        return self.result_bytes if self.int32_out else 1

    @property
    def n_groups(self) -> int:
        return self.ob // self.gob

    @property
    def describe(self) -> str:
        return self.shape_text or (
            f"{self.op} (blocks: N/b={self.nb} C/c={self.ib} H={self.h} W={self.w} "
            f"O/c={self.ob} kernel {self.kh}x{self.kw} stride {self.stride} pad {self.pad})")

    @property
    def taps_inside(self) -> int:
        """(output pixel, kernel tap) pairs whose tap reads the input, not the padding
        (the kernels skip the others: they would multiply zeros)."""
        (sh, sw), (t, l, _, _) = self.stride, self.pad
        return (int(covered_positions(self.h, self.kh, sh, t, self.oh)[0].sum())
                * int(covered_positions(self.w, self.kw, sw, l, self.ow)[0].sum()))

    @property
    def tap_fraction(self) -> float:
        """:attr:`taps_inside` over all (output pixel, tap) pairs."""
        return self.taps_inside / (self.oh * self.ow * self.kh * self.kw)

    @property
    def gemm_uops(self) -> int:
        """Micro-op executions of the whole convolution (ideal GEMM cycles)."""
        return self.nb * self.ob * self.ib * self.taps_inside


@dataclass(frozen=True)
class ConvTiling:
    """Tile sizes (blocks / rows / columns), tile order and number of buffers.

    ``order`` is ``"co_outer"`` (output-channel tiles outside spatial tiles: weights
    stay resident) or ``"sp_outer"`` (spatial outside: inputs stay resident).

    ``resident``: the whole weight lives in the wgt SRAM, laid out as in DRAM, each
    output-channel tile's rows loaded once, by the first group that uses them, so the
    first tile waits only for its own weights and no weight is loaded twice (the
    ``nthreads`` slots then hold inputs only, a group loading into the next slot only
    when its data changes). Needs one reduction chunk (``tci`` = all input blocks) and
    two slots; offered for int32 results (see :func:`search_tiles`).
    """

    tn: int
    tco: int
    th: int
    tw: int
    tci: int
    order: str = "co_outer"
    nthreads: int = 2
    resident: bool = False

    def __repr__(self):
        extra = ", resident=True" if self.resident else ""
        return (f"ConvTiling(tn={self.tn}, tco={self.tco}, th={self.th}, tw={self.tw}, "
                f"tci={self.tci}, order={self.order!r}, nthreads={self.nthreads}{extra})")

    def in_rows(self, p: ConvProblem, th=None) -> int:
        return ((self.th if th is None else th) - 1) * p.stride[0] + p.kh

    def in_cols(self, p: ConvProblem, tw=None) -> int:
        return ((self.tw if tw is None else tw) - 1) * p.stride[1] + p.kw

    def footprint(self, p: ConvProblem, config=None) -> dict:
        """SRAM elements one buffer slot needs, by memory (without the rows of
        :func:`shared_acc` when a config is given and they are shared)."""
        blocks = self.tco if p.diag else self.tci
        inp = self.tn * blocks * self.in_rows(p) * self.in_cols(p)
        if p.residual_gemm:
            inp = max(inp, self.tn * self.tco * self.th * self.tw)
        return {"inp": inp,
                "wgt": 1 if p.shared_wgt else self.tco * self.tci * p.kh * p.kw,
                **({"wgt_resident": whole_weight(p)} if self.resident else {}),
                "acc": (self.tn * self.tco * self.th * self.tw
                        + (0 if config is not None and shared_acc(p, config) else
                           self.tco * (int(p.bias) + p.acc_rows + p.border_cases)))}


def gemm_dims(p: ConvProblem, tn, tco, th, tw, tci, hi, wi):
    """The GEMM loop nest of one group: outputs (n, o, oh, ow), reductions (i, kh, kw).
    SRAM layouts: acc [n][o][oh][ow], inp [n][i][row][col], wgt [o][i][kh][kw]; for a
    block-diagonal problem the inp blocks are the tile's output blocks (``i`` is 1)."""
    sh, sw = p.stride
    kk = p.kh * p.kw
    if p.shared_wgt:
        return [Dim(d.name, d.extent, d.dst, d.src, 0, d.reduce)
                for d in gemm_dims(replace(p, shared_wgt=False), tn, tco, th, tw, tci, hi, wi)]
    if p.diag:
        return [Dim("n", tn, tco * th * tw, tco * hi * wi, 0),
                Dim("o", tco, th * tw, hi * wi, kk),
                Dim("oh", th, tw, sh * wi, 0),
                Dim("ow", tw, 1, sw, 0),
                Dim("kh", p.kh, 0, wi, p.kw, True),
                Dim("kw", p.kw, 0, 1, 1, True)]
    return [Dim("n", tn, tco * th * tw, tci * hi * wi, 0),
            Dim("o", tco, th * tw, 0, tci * kk),
            Dim("oh", th, tw, sh * wi, 0),
            Dim("ow", tw, 1, sw, 0),
            Dim("i", tci, 0, hi * wi, kk, True),
            Dim("kh", p.kh, 0, wi, p.kw, True),
            Dim("kw", p.kw, 0, 1, 1, True)]


def uop_budget(config, nthreads: int, slots: int | None = None) -> int:
    """Largest GEMM kernel (micro-ops) a tiling may use: the kernels of all buffer
    slots (``nthreads`` inp/wgt x ``slots`` acc, default ``nthreads``; at least 2 x
    ``nthreads``) plus a few small reset/ALU kernels must stay resident together."""
    slots = nthreads if slots is None else slots
    return max(1, (config.uop_depth - 64) // (nthreads * max(2, int(slots))))


@dataclass(frozen=True)
class CostModel:
    """Analytic cycle model of one VTA kernel.

    Attributes
    ----------
    gemm_uop_cycles : float
        Cycles per GEMM micro-op execution (1: fully pipelined).
    alu_imm_cycles, alu_tensor_cycles : float
        Cycles per ALU micro-op execution with an immediate / a tensor operand.
    dma_insn_cycles : int
        Fixed cost of each LOAD/STORE instruction (issue, address, first beat latency).
    dma_row_cycles : int
        Extra cost of each 2-D row (one DRAM burst each).
    insn_cycles : int
        Issue cost of each GEMM/ALU instruction.
    overlap_cycles : int or None
        :func:`~vtakit.compiler.ops.perfmodel.predict_stream` only: the issue cost, instead
        of ``insn_cycles``, of a GEMM/ALU without push flags whose next compute
        instruction is a GEMM/ALU with micro-ops to run (``hw/compute.py`` dispatches it
        while the first drains); None: no such overlap.
    burst_wait : float
        The tile search only: input bursts (a row of a tile's input window, at most
        :data:`~vtakit.hw.load_engine.MAX_BURST` beats) that each of a tile's
        compute-module LOADs (bias, per-channel rows, micro-ops) waits for on the shared
        DRAM read port. Wide windows of strided convolutions pay for it on the RTL
        (ResNet-18's 3x3 stride-2 64->128 conv: 275.6k cycles with 57-element rows,
        266.1k with 11), which the event model does not see. Applied to strided
        convolutions of several taps with int8 results only: fitted on ResNet-18's
        Verilator cycles, where it made the 1x1 stride-2 convs slower and moved the
        stride-1 3x3 convs among near ties.
    shared_read_port : bool
        :func:`~vtakit.compiler.ops.perfmodel.predict_stream` only: the DRAM read beats of
        every LOAD (the load module's inputs and weights, the compute module's micro-ops
        and accumulators) share one read port, as in ``hw/top.py``'s read arbiter,
        instead of overlapping freely.
    """

    gemm_uop_cycles: float = 1.0
    alu_imm_cycles: float = 1.0
    alu_tensor_cycles: float = 2.0
    dma_insn_cycles: int = 16
    dma_row_cycles: int = 2
    insn_cycles: int = 4
    burst_wait: float = 1.0
    shared_read_port: bool = False
    overlap_cycles: int | None = None


#: The costs of the RTL (``hw/``), for :func:`vtakit.compiler.ops.perfmodel.predict_stream`:
#: GEMM and ALU issue one micro-op per cycle with either operand kind and occupy the
#: compute module N + 4 cycles, fewer when the next loop is dispatched while one without
#: pushes drains (``hw/compute.py``); a LOAD/STORE costs a few cycles plus one per bus
#: beat, pad element and row; all LOADs share the one DRAM read port. The three
#: instruction constants are fitted (a grid) to Verilator's cycles of whole models
#: (``bench/costmodel.py``: within 3% on the demo CNN, the four MLPerf Tiny models and
#: ResNet-18, default and tiny configs). They are not the RTL's own counts (a STORE is
#: 3 cycles plus its beats, a LOAD 2, an overlapped loop 1): the event model does not
#: see the fetch unit feeding the command queues or the read arbiter's interleaving, and
#: the fit absorbs them (with the RTL's own counts the worst model is off by 6.8%). The
#: int32 layers' tilings, re-ranked by this model, move with it; the tile search keeps
#: :class:`CostModel`'s defaults.
RTL_COST = CostModel(alu_tensor_cycles=1.0, dma_insn_cycles=6, dma_row_cycles=3,
                     shared_read_port=True, overlap_cycles=3)


@dataclass(frozen=True)
class Estimate:
    """Cost-model prediction for one tiling (cycles and DRAM bytes)."""

    cycles: float
    compute: float
    load: float
    store: float
    read_bytes: int
    write_bytes: int
    tiles: int
    groups: int
    detail: dict = field(default_factory=dict, compare=False)


def _axis(n: int, t):
    """The tiles of an axis of n split into tiles of ``t`` (an array): ``[(size, count)]``
    with the full tiles first and the remainder second (count 0 when there is none)."""
    full, rem = n // t, n % t
    return [(t, full), (rem, (rem > 0).astype(np.int64))]


def estimate(p: ConvProblem, t: ConvTiling, config, cost: CostModel = CostModel()) -> Estimate:
    """Predict cycles and DRAM traffic of a conv tiling (see :class:`CostModel`)."""
    lanes = {k: np.array([v]) for k, v in (("tn", t.tn), ("tco", t.tco), ("th", t.th),
                                          ("tw", t.tw), ("tci", t.tci),
                                          ("nthreads", t.nthreads))}
    lanes["co_outer"] = np.array([t.order == "co_outer"])
    lanes["resident"] = np.array([t.resident])
    return Estimate(*(v[0].item() for v in _estimates(p, lanes, config, cost)))


def _estimates(p: ConvProblem, t: dict, config, cost: CostModel) -> tuple:
    """:func:`estimate` of many tilings at once: ``t`` holds int64 arrays ``tn``, ``tco``,
    ``th``, ``tw``, ``tci``, ``nthreads`` and bool arrays ``co_outer`` and ``resident``;
    returns arrays (cycles, compute, load, store, read bytes, write bytes, tiles, groups).
    Each lane does the scalar model's operations in the scalar model's order (absent
    remainder tiles add exact zeros), so a lane's figures are the scalar model's, bit
    for bit."""
    bus = config.bus_bytes
    kk, taps = p.kh * p.kw, p.tap_fraction    # padding taps are skipped (on average)
    sh, sw = p.stride
    e_inp, e_wgt, e_acc, e_out = (config.inp_elem_bytes, config.wgt_elem_bytes,
                                  config.acc_elem_bytes, config.out_elem_bytes)
    tn_, tco_, th_, tw_, tci_, nth = (t[k] for k in ("tn", "tco", "th", "tw", "tci",
                                                      "nthreads"))
    co_outer = t["co_outer"]
    n_n, n_co = -(-p.nb // tn_), p.n_groups * -(-p.gob // tco_)
    n_h, n_w = -(-p.oh // th_), -(-p.ow // tw_)
    chunks = _axis(p.ib, tci_)
    k = -(-p.ib // tci_)
    tiles = n_n * n_co * n_h * n_w

    # Fraction of group loads that find their operand already in the slot.
    def loads_per_run(run):
        return np.where(nth % k == 0, np.minimum(run, nth // k) / run, 1.0)
    # a resident weight (ConvTiling.resident) is loaded once, one output-channel tile
    # at its first use; its groups' inputs change slot only when the data changes
    res = t["resident"]
    w_frac = np.where(res, 1.0 / (n_n * n_h * n_w),
                      np.where(co_outer, loads_per_run(n_h * n_w), 1.0))
    i_frac = np.where(~co_outer & (not p.diag),
                      np.where(res, 1.0 / n_co, loads_per_run(n_co)), 1.0)
    full_sp = (th_ >= p.oh) & (tw_ >= p.ow) & (not any(p.pad))
    z = np.zeros(len(tn_))
    comp, load, store, rd, wr, pipe = z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy()
    first_load, last_tail = z.copy(), z.copy()
    # a double-buffered int32 result ends with the stores of its last step and the
    # drain's six plane stores and shifts: about two tiles' stores after the last GEMM
    tail_stores = np.where((nth >= 2) & p.int32_out, 2.0, 1.0)
    slots = acc_slots(p.int32_out, nth)
    per_tile_kernels = (int(not p.residual) + int(p.bias) + p.alu_imm + 1 + p.acc_rows
                        + p.border_cases)
    shared = shared_acc(p, config)
    if shared:   # the per-channel rows of every output block, loaded once per kernel
        rows = int(p.bias) + p.acc_rows + p.border_cases
        c0 = (shared * e_acc / bus + rows * cost.dma_row_cycles + cost.dma_insn_cycles * (
            int(p.bias) + bool(p.acc_rows) + bool(p.border_cases)))
        rd += shared * e_acc
        comp += c0
        pipe += c0
    # The tiles of a lane fall in up to 16 classes (full or remainder along each axis);
    # a class is computed on the lanes that have such tiles only (an absent class would
    # add exact zeros), which skips most of the work on problems of one batch block.
    axes = [_axis(p.nb, tn_), [(s_, c_ * p.n_groups) for s_, c_ in _axis(p.gob, tco_)],
            _axis(p.oh, th_), _axis(p.ow, tw_)]
    per_lane = (tw_, full_sp, i_frac, w_frac, k, nth, slots, tail_stores)
    for (tn, cn), (tco, cco), (th, ch), (tw, cw) in itertools.product(*axes):
        m = cn * cco * ch * cw
        live = m > 0
        if live.all():
            sel = slice(None)
        elif live.any():
            sel = np.flatnonzero(live)
        else:
            continue
        at = lambda a: a[sel] if np.ndim(a) else a     # noqa: E731
        m, tn, tco, th, tw = at(m), at(tn), at(tco), at(th), at(tw)
        tw_l, full_sp_l, i_frac_l, w_frac_l, k_l, nth_l, slots_l, tail_l = map(at, per_lane)
        z_l = np.zeros(len(m))
        ent = tn * tco * th * tw
        hi, wi = (th - 1) * sh + p.kh, (tw - 1) * sw + p.kw
        # output tile transfers (conv2d's _move): one for the whole image, else one per
        # (batch, channel) block (a row per output row); stores of full-width tiles one
        # per batch block (a row per channel block; the int8 ranking keeps the
        # per-block count, which it was tuned with)
        n_rows_out = np.where(full_sp_l, 1, tn * tco * th)
        full_w = (tw_l >= p.ow) & p.int32_out
        n_st_insn = np.where(full_sp_l, 1, np.where(full_w, tn, tn * tco))
        n_st_rows = np.where(full_sp_l, 1, np.where(full_w, tn * tco, tn * tco * th))
        # compute-stage work of the tile outside the GEMMs
        c_tile = z_l + cost.insn_cycles
        if not p.int32_out and max(p.stride) > 1 and p.kh * p.kw > 1:
            # the compute module's LOADs of the tile (bias, rows, micro-ops) share the
            # DRAM read port with the load module's input rows, one burst each: each
            # waits for about one burst in flight
            n_cl = int(p.bias) + bool(p.acc_rows) + bool(p.border_cases) + 1
            c_tile += n_cl * np.minimum(MAX_BURST, wi * e_inp / bus) * cost.burst_wait
        if p.residual:
            b = ent * e_acc
            rd[sel] += m * b
            c_tile += b / bus + cost.dma_insn_cycles + n_rows_out * cost.dma_row_cycles
        elif not p.min_init:
            c_tile += ent * cost.gemm_uop_cycles
        if p.bias:
            if not shared:
                rd[sel] += m * tco * e_acc
                c_tile += tco * e_acc / bus + cost.dma_insn_cycles
            c_tile += ent * cost.alu_tensor_cycles + cost.insn_cycles
        rows = p.acc_rows + p.border_cases
        if rows:     # 2-D LOAD ACC of the rows; a tensor pass per requant row
            if not shared:
                rd[sel] += m * rows * tco * e_acc
                c_tile += (rows * tco * e_acc / bus + cost.dma_insn_cycles * (
                    bool(p.acc_rows) + bool(p.border_cases))
                    + rows * cost.dma_row_cycles)
            c_tile += p.acc_rows * (ent * cost.alu_tensor_cycles + cost.insn_cycles)
        if p.border_cases:   # border ADDs: the tile's share of them
            share = ent / (p.nb * p.ob * p.oh * p.ow)
            c_tile += share * p.border_vectors * cost.alu_tensor_cycles
            c_tile += np.maximum(1.0, share * p.border_cases) * cost.insn_cycles
        passes = p.alu_imm + p.planes - 1
        c_tile += passes * (ent * cost.alu_imm_cycles + cost.insn_cycles)
        planes = p.planes
        s_bytes = planes * ent * e_out
        s_tile = (s_bytes / bus + planes * (
            cost.dma_insn_cycles * n_st_insn + n_st_rows * cost.dma_row_cycles))
        wr[sel] += m * s_bytes
        g_sum = z_l.copy()
        for tci, cci in ((at(a), at(b)) for a, b in chunks):
            if not cci.any():
                continue
            gemm = ent * tci * kk * taps * cost.gemm_uop_cycles + cost.insn_cycles
            ib_ = tn * (tco if p.diag else tci) * hi * wi * e_inp * i_frac_l
            wb_ = (1 if p.shared_wgt else tco * tci * kk) * e_wgt * w_frac_l
            n_in_insn = np.where(full_sp_l, 1, tn * (tco if p.diag else tci))
            l_g = ((ib_ + wb_) / bus + (n_in_insn + 1) * cost.dma_insn_cycles
                   + (n_in_insn * hi * i_frac_l + tco) * cost.dma_row_cycles)
            rd[sel] += m * cci * (ib_ + wb_)
            load[sel] += m * cci * l_g
            comp[sel] += m * cci * gemm
            g_sum += cci * np.maximum(l_g, gemm)
            # the first tile loads its operands whole (weights that stay resident are
            # not yet there); later chunks overlap GEMMs. (A kernel that keeps all its
            # weights resident, e.g. a 1x1 downsampling conv's 128 KB, waits for them
            # at its start.)
            l_full = (((ib_ / i_frac_l) + wb_ / w_frac_l) / bus
                      + (n_in_insn + 1) * cost.dma_insn_cycles
                      + (n_in_insn * hi + tco) * cost.dma_row_cycles)
            l_first = l_full + (k_l - 1) * np.maximum(0.0, l_full - gemm)
            first_load[sel] = np.where(first_load[sel] == 0, l_first, first_load[sel])
        if p.residual_gemm:    # one more group: int8 tile + identity GEMM
            l_r = ent * e_inp / bus + cost.dma_insn_cycles * np.where(full_sp_l, 1, tn * tco)
            c_r = ent * cost.gemm_uop_cycles + cost.insn_cycles
            rd[sel] += m * ent * e_inp
            load[sel] += m * l_r
            comp[sel] += m * c_r
            g_sum += np.maximum(l_r, c_r)
        comp[sel] += m * c_tile
        store[sel] += m * s_tile
        pipe[sel] += m * (g_sum + c_tile)
        if p.int32_out:
            # LOAD UOPs: each tile shape's kernels once per acc slot (GEMMs per inp slot
            # too), on the compute module: issue + a few beats each
            u = (np.minimum(m, slots_l) * per_tile_kernels
                 + np.minimum(m * k_l, nth_l * slots_l)) * (cost.dma_insn_cycles + 8)
            comp[sel] += u
            pipe[sel] += u
        last_tail[sel] = c_tile + s_tile * tail_l
    groups = tiles * (k + (1 if p.residual_gemm else 0))
    cycles = np.where(nth >= 2, np.maximum(np.maximum(np.maximum(pipe, store), comp), rd / bus)
                      + first_load + last_tail, comp + load + store)
    return (cycles, comp, load, store, rd.astype(np.int64), wr.astype(np.int64), tiles, groups)


def _candidates(n: int):
    """Tile sizes worth trying for an axis of n: the smallest size for each tile count."""
    return sorted({ceil_div(n, c) for c in range(1, n + 1)}, reverse=True)


def _fit_error(p: ConvProblem, config):
    """Raise the TilingError of a problem whose smallest tiling does not fit."""
    t = ConvTiling(1, 1, 1, 1, 1, nthreads=1)
    fp = t.footprint(p)
    for mem, depth in (("inp", config.inp_depth), ("wgt", config.wgt_depth),
                       ("acc", config.acc_depth)):
        if fp[mem] > depth:
            raise TilingError(
                f"{p.describe}: does not fit config {config.name}: even a 1x1 output tile "
                f"with one channel block needs {fp[mem]} {mem} SRAM elements, the {mem} "
                f"buffer holds {depth}")
    raise TilingError(f"{p.describe}: no tiling fits config {config.name}")


def _fitting(p: ConvProblem, config, nthreads, orders) -> dict:
    """Every tiling that fits the SRAMs, as lanes (see :func:`_estimates`), in the order
    of the nested loops nthreads > tci > tco > tn > th > tw > order."""
    res_axis = [False, True] if _resident_possible(p, config) else [False]
    axes = [np.array(nthreads), np.array(_candidates(p.ib)), np.array(_candidates(p.gob)),
            np.array(_candidates(p.nb)), np.array(_candidates(p.oh)),
            np.array(_candidates(p.ow)), np.array([o == "co_outer" for o in orders]),
            np.array(res_axis)]
    nth, tci, tco, tn, th, tw, co, res = (a.ravel()
                                          for a in np.meshgrid(*axes, indexing="ij"))
    blocks = tco if p.diag else tci
    hi, wi = (th - 1) * p.stride[0] + p.kh, (tw - 1) * p.stride[1] + p.kw
    inp = tn * blocks * hi * wi
    if p.residual_gemm:
        inp = np.maximum(inp, tn * tco * th * tw)
    wgt = 1 if p.shared_wgt else tco * tci * p.kh * p.kw
    shared = shared_acc(p, config)
    acc = tn * tco * th * tw + (0 if shared else tco * (int(p.bias) + p.acc_rows + p.border_cases))
    acc_d = (config.acc_depth - shared) // acc_slots(p.int32_out, nth)
    # (the search has always also required room for tw = 1 plus a bias row)
    ok = ((inp <= config.inp_depth // nth) & (acc <= acc_d) & (tn * tco * th + tco <= acc_d)
          & np.where(res, (tci == p.ib) & (nth == 2), wgt <= config.wgt_depth // nth))
    return {"tn": tn[ok], "tco": tco[ok], "th": th[ok], "tw": tw[ok], "tci": tci[ok],
            "nthreads": nth[ok], "co_outer": co[ok], "resident": res[ok]}


def _resident_possible(p: ConvProblem, config) -> bool:
    """Whether a tiling of ``p`` may keep its whole weight resident
    (:attr:`ConvTiling.resident`): int32 results (whose tilings the event model
    re-ranks), per-block weights without an int8 residual group, and the whole weight
    within the wgt SRAM."""
    return (p.int32_out and not p.shared_wgt and not p.residual_gemm
            and whole_weight(p) <= config.wgt_depth)


def whole_weight(p: ConvProblem) -> int:
    """Weight SRAM elements of the whole packed weight (output x input blocks x taps)."""
    return p.ob * p.ib * p.kh * p.kw


def search_tiles(p: ConvProblem, config, *, cost: CostModel = CostModel(), top: int = 8,
                 nthreads=(2, 1), orders=("co_outer", "sp_outer")):
    """Rank the tilings of a convolution that fit every SRAM of ``config``. The search is
    a pure function of its arguments and is memoized: a model's repeated layers (and the
    profiles and rooflines that re-plan them) search once.

    Returns
    -------
    list of (Estimate, ConvTiling)
        Best (fewest predicted cycles) first, at most ``top`` entries; each tiling's
        GEMM kernel fits the uop budget.

    Raises
    ------
    TilingError
        If no tiling fits (the message names the op, its shape and the buffer).
    """
    return list(_search_tiles(p, config, cost, top, tuple(nthreads), tuple(orders)))


@lru_cache(maxsize=512)
def _search_tiles(p, config, cost, top, nthreads, orders) -> tuple:
    for name, v in (("padding", max(p.pad)),):
        if v > MAX_PAD:
            raise TilingError(f"{p.describe}: {name} {v} exceeds {MAX_PAD}, the largest pad "
                              "a VTA LOAD can insert")
    if p.pad[0] >= p.kh or p.pad[2] >= p.kh or p.pad[1] >= p.kw or p.pad[3] >= p.kw:
        raise TilingError(f"{p.describe}: padding {p.pad} must be smaller than the "
                          f"{p.kh}x{p.kw} window (a window entirely in the padding cannot be "
                          "loaded)")
    lanes = _fitting(p, config, nthreads, orders)
    if not len(lanes["tn"]):
        _fit_error(p, config)
    est = _estimates(p, lanes, config, cost)
    # fewest cycles first, then more threads, then enumeration order (a stable sort)
    rank = np.lexsort((-lanes["nthreads"], est[0]))
    out = []
    for i in rank:
        t = ConvTiling(*(int(lanes[k][i]) for k in ("tn", "tco", "th", "tw", "tci")),
                       "co_outer" if lanes["co_outer"][i] else "sp_outer",
                       int(lanes["nthreads"][i]), bool(lanes["resident"][i]))
        hi, wi = t.in_rows(p), t.in_cols(p)
        f = fold_loops(gemm_dims(p, t.tn, t.tco, t.th, t.tw, t.tci, hi, wi))
        if f.n_uops <= uop_budget(config, t.nthreads, acc_slots(p.int32_out, t.nthreads)):
            out.append((Estimate(*(v[i].item() for v in est)), t))
            if len(out) >= top:
                break
    if not out:
        raise TilingError(f"{p.describe}: every tiling that fits the SRAMs of config "
                          f"{config.name} needs a GEMM kernel larger than the uop buffer "
                          f"({config.uop_depth} micro-ops)")
    return tuple(out)


def best_tiling(p: ConvProblem, config, *, cost: CostModel = CostModel()) -> ConvTiling:
    """The top-ranked tiling of :func:`search_tiles`."""
    return search_tiles(p, config, cost=cost, top=1)[0][1]
