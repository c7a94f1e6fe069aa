"""The geometry of a convolution on VTA: the problem in block units, a tiling of it, its loops.

:class:`ConvProblem` (a convolution, dense layer, pool or add as the tiler sees it),
:class:`ConvTiling` (one choice of output tile, reduction chunk, loop order and
buffering) with its SRAM footprint, the GEMM loop nest of one group
(:func:`gemm_dims`), the micro-op and acc-slot budgets, and the input positions a
window covers (:func:`covered_positions`, which the roofline counts too). No cost
here: :mod:`.search` estimates a tiling, :mod:`.events` predicts a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..layout import ceil_div
from ..loops import Dim
from ..reference import normalize_padding

__all__ = ["ConvProblem", "ConvTiling", "gemm_dims", "uop_budget", "acc_slots", "shared_acc",
           "whole_weight", "covered_positions", "INT32_ACC_SLOTS", "MAX_BURST"]


def covered_positions(size, kernel, stride, pad_before, out):
    """Along one axis of ``size`` inputs and ``out`` windows: ``(taps, covered)``,
    ``taps[k]`` the input positions inside window ``k`` (padding excluded) and
    ``covered`` how many input positions some window reads."""
    starts = np.arange(out) * stride - pad_before
    lo, hi = np.maximum(starts, 0), np.minimum(starts + kernel, size)
    taps = hi - lo
    covered = np.zeros(size, bool)
    for a, b in zip(lo, hi):
        covered[a:b] = True
    return taps, int(covered.sum())


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
    the per-slot rows, which the tile search's model ranks better for them), and for the
    ``requant2`` extension's REQ epilogue unless ``own_rows`` (the plan tries both and
    keeps the one the event model predicts faster)."""
    n = p.ob * (int(p.bias) + p.border_cases) + p.row_blocks * p.acc_rows
    shared = p.int32_out or (p.req_pass and not p.own_rows)
    return n if shared and n <= config.acc_depth // 8 else 0


def acc_slots(int32_out, nthreads):
    """Acc/out SRAM slots of a tiling with ``nthreads`` inp/wgt buffers (works on arrays):
    :data:`INT32_ACC_SLOTS` for a double-buffered int32 result, else ``nthreads``."""
    return np.where(np.asarray(nthreads) >= 2, INT32_ACC_SLOTS, nthreads) if int32_out \
        else nthreads


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
    req_pass : bool
        The ``requant2`` extension's one-pass requantize: the bias pass is ``REQ`` (it
        also requantizes, adds the zero point and clamps), one instruction per
        output-channel block of a tile, each after two setup micro-ops (``REQ.M``,
        ``REQ.P``, one instruction each) that read the two ``acc_rows``; the rows have no
        pass of their own.
    uniform_rows : bool
        With ``req_pass``: the ``acc_rows`` are one block for every channel (a per-tensor
        requantize): loaded once per kernel, REQ.M and REQ.P once, one REQ per tile.
    own_rows : bool
        With ``req_pass``: each acc slot holds its tile's per-channel rows, as for
        other int8 results, instead of the rows of every block shared at the top of the
        acc SRAM (:func:`shared_acc`).
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
    req_pass: bool = False
    own_rows: bool = False
    uniform_rows: bool = False

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
    def row_blocks(self) -> int:
        """Blocks of each ``acc_rows`` row in DRAM: ``ob``, or 1 with ``uniform_rows``."""
        return 1 if self.uniform_rows else self.ob

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


def whole_weight(p: ConvProblem) -> int:
    """Weight SRAM elements of the whole packed weight (output x input blocks x taps)."""
    return p.ob * p.ib * p.kh * p.kw
