"""int8 2-D convolution on VTA, with a fused epilogue.

Data flow of one output tile (see :mod:`.tiling` for the tile shape and
:mod:`.pipeline` for the tokens):

* compute: LOAD ACC the bias tile when it is not already in this acc slot; reset
  the tile's accumulators (GEMM reset), or start them from the bias by one ALU MIN
  (:attr:`.epilogue.Epilogue.init`: a reset first only where this layer's clips have
  not bounded the slot yet), or LOAD ACC an int32 residual;
* for every chunk of input-channel blocks (a *group*): load the input window of
  the chunk into an inp slot (2-D DMA per channel block, the padding inserted by
  the load's pad fields where the window crosses the border) and the weights
  into a wgt slot (skipped when the slot already holds them), then one GEMM
  instruction whose micro-ops and two loops (:func:`.loops.fold_loops`) run the
  whole chunk;
* an int8 residual is one more group: its int8 tile into an inp slot, an
  identity weight tile, one GEMM micro-op per accumulator;
* compute: the epilogue ALU passes (:class:`.epilogue.Epilogue`); with a fused add
  (:class:`.epilogue.ResidualAdd`) they run before the residual's group, the add's
  passes around it;
* store: one 2-D store per (batch block, output-channel block) of the tile, or a
  single store when the tile spans the whole image.

SRAM layouts of a slot: inp ``[n][i][row][col]`` (rows and columns include the
padding), wgt ``[o][i][kh][kw]``, acc ``[n][o][oh][ow]`` followed at the end of
the slot by the ``tco`` bias elements.

Grouped convolution (``groups > 1``), three mappings:

* groups of whole channel blocks (C/groups and O/groups multiples of BLOCK): the
  weight packs as for groups=1 with C/groups input channels; output-channel tiles
  stay inside one group and reduce over that group's input blocks only
  (per-group GEMMs in one kernel, no wasted lanes);
* groups smaller than a block with as many outputs as inputs per group, dividing
  BLOCK (depthwise: one channel per group): *block-diagonal* weight tiles
  (:func:`.layout.pack_block_diagonal_weight`): output block o reads input block o
  through one tile per kernel position that is zero across groups. Each GEMM
  micro-op then does BLOCK x BLOCK MACs of which BLOCK x g are useful (1/BLOCK for
  depthwise): the honest cost of a GEMM-only datapath without MUL, but one
  micro-op per output element and kernel position, the ALU's rate, in one kernel;
* anything else: :func:`group_conv2d`, one convolution per group.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import replace
from typing import Callable, NamedTuple

import numpy as np

from ...hw.errors import VtakitError
from ...hw.isa import AluOp, MemType
from ...runtime import KernelError, Unit, UopKernel
from ...runtime.hostops.vta import assemble_planes
from .epilogue import Epilogue, Requant2, accumulation_bound
from .layout import (ceil_div, pack_activation, pack_bias, pack_block_diagonal_weight,
                     pack_conv_weight, unpack_activation)
from .loops import Dim, fold_loops
from .tokens import EARLY, MID, SPREAD, Pipeline, PlanePipeline, kernel_fence
from .cost.events import timing_key
from .cost.roofline import conv_roofline
from .cost.geometry import whole_weight
from .plan import OpPlan, Operand, _describe, _Unhashable, on_clear, plan_signature
from .reference import conv2d_output_shape, normalize_padding, wrap32
from ...runtime.layout import pair as _pair
from .operands import check_fits, check_operand, check_positive
from .tiling import (RTL_COST, ConvProblem, ConvTiling, SearchCost, TilingError, acc_slots,
                     estimate, gemm_dims, search_tiles, shared_acc, uop_budget)

__all__ = ["Conv2dPlan", "plan_conv2d", "conv2d", "group_conv2d", "assemble_planes",
           "GroupMappingError", "border_cases", "border_cells"]


# Memos of the plan searches, keyed by everything the memoized step reads (the layer and
# the plan's state by value, :func:`.plan.plan_signature`), so that a plan in any state
# may call them; a state that cannot be described is not memoized.
_RERANKED: dict = {}     # Conv2dPlan._rerank's choices
_RUNNERS: dict = {}      # Conv2dPlan._rerank's other candidates, best first
_RUNNER_PICK: dict = {}  # Conv2dPlan._try_runners_up's plan (None: the re-ranked one)
_SEARCHED: dict = {}     # Conv2dPlan._search's (choices, runners-up, timing key of the result)

#: :meth:`Conv2dPlan._gemm_kernels`'s kernels, keyed by everything they depend on: the
#: plan's class, problem and config, the slot counts the listed kernel's budget reads and
#: the call's arguments (every candidate schedule of a search emits the same tiles' kernels);
#: bounded, emptied when full; :func:`.plan.clear_program_cache` empties it.
GEMM_KERNELS: dict = {}
_GEMM_KERNELS_SIZE = 4096


@on_clear
def _clear_memos() -> None:
    _SEARCHED.clear()       # the module's names as they are now (tests replace them)
    GEMM_KERNELS.clear()


def _state(plan, *drop):
    """:func:`.plan.plan_signature` of ``plan`` without its attributes ``drop`` (and its
    program); None when an attribute cannot be described."""
    q = copy.copy(plan)
    for name in drop + ("_program",):
        q.__dict__.pop(name, None)
    return plan_signature(q)


class _Step(NamedTuple):
    """A step of :attr:`Conv2dPlan.SEARCH`: ``apply(plan, args)`` runs when
    ``applies(plan, args)`` holds."""
    name: str
    applies: Callable
    apply: Callable


class _SearchArgs(NamedTuple):
    """What :attr:`Conv2dPlan.SEARCH`'s steps read besides the plan: the search cost, the
    tile search's ranked tilings (None: a tiling was given), the problem as first planned
    and the plan's ``shared_weight`` and ``pad_value`` arguments."""
    cost: SearchCost
    ranked: list | None
    problem: ConvProblem
    shared_weight: bool
    pad_value: int | None

    @property
    def reranked(self) -> bool:
        """The tile search ranked two or more tilings (:meth:`Conv2dPlan._rerank`)."""
        return self.ranked is not None and len(self.ranked) > 1


class GroupMappingError(VtakitError, ValueError):
    """A grouped convolution that one plan cannot map onto whole or diagonal blocks."""


def border_cases(h, w, kh, kw, stride, pad, oh, ow) -> list:
    """The rectangles ``(r0, r1, c0, c1)`` (half-open output rows and columns) whose
    windows read the same kernel taps from the padding, for every such set but the empty
    one (row-major). Padding with a value ``v`` adds ``v`` times the weights of those taps,
    one per-channel constant per rectangle."""
    return [cell[:4] for cell in border_cells(h, w, kh, kw, stride, pad, oh, ow)
            if cell[4] is not None]


def border_cells(h, w, kh, kw, stride, pad, oh, ow) -> list:
    """Every rectangle of outputs whose windows read the same taps from the padding,
    the empty set's too (row-major): ``(r0, r1, c0, c1, k)``, ``k`` the index of the
    rectangle in :func:`border_cases`, None for the ones that read no padding."""
    def segments(size, k, s, before, out):
        segs = []
        for o in range(out):
            start = o * s - before
            key = (max(0, -start), max(0, start + k - size))   # taps before / after
            if segs and segs[-1][2] == key:
                segs[-1][1] = o + 1
            else:
                segs.append([o, o + 1, key])
        return segs
    (sh, sw), (pt, pl, _, _) = stride, pad
    cells, k = [], 0
    for r0, r1, rk in segments(h, kh, sh, pt, oh):
        for c0, c1, ck in segments(w, kw, sw, pl, ow):
            border = rk != (0, 0) or ck != (0, 0)
            cells.append((r0, r1, c0, c1, k if border else None))
            k += border
    return cells


def border_taps(cells, h, w, kh, kw, stride, pad) -> list:
    """Per border rectangle of ``cells`` (:func:`border_cells`, in order of their case
    index): the kernel taps ``i * kw + j`` its windows read from the padding."""
    (sh, sw), (pt, pl, _, _) = stride, pad
    out = []
    for r0, _, c0, _, k in cells:
        if k is None:
            continue
        rows = [i for i in range(kh) if not 0 <= r0 * sh - pt + i < h]
        cols = [j for j in range(kw) if not 0 <= c0 * sw - pl + j < w]
        out.append([i * kw + j for i in range(kh) for j in range(kw)
                    if i in rows or j in cols])
    return out


def border_uops(taps, tci: int):
    """One block's correction micro-ops ``[(case, tap, input block)]`` of
    :attr:`Conv2dPlan.onchip_border` in an order where no micro-op writes a row one of
    the previous two wrote (the accumulate-hazard rule), or None when there is none."""
    todo = [[(k, t, ci) for t in ts for ci in range(tci)] for k, ts in enumerate(taps)]
    out = []
    while any(todo):
        # the case with the most left whose row the last two did not write
        recent = {u[0] for u in out[-2:]}
        ready = [k for k, l in enumerate(todo) if l and k not in recent]
        if not ready:
            return None
        k = max(ready, key=lambda k: (len(todo[k]), -k))
        out.append(todo[k].pop(0))
    return out


class Conv2dPlan(OpPlan):
    """A planned convolution: problem in blocks, tiling, epilogue, DRAM operands.

    Operands (packed layouts of :mod:`.layout`): ``data`` int8 (N/b, C/c, H, W, b, c),
    ``weight`` int8 (O/c, C/c, KH, KW, c, c), ``bias`` int32 (O/c, b, c) when the
    epilogue has a bias tile, ``requant`` int32 (rows, O/c, b, c) for an exact
    requantize (ALU extension ``"requant"``), ``border`` int32 (cases, O/c, b, c) with
    ``border=True`` (what padding with a non-zero value adds: one per-channel row per
    rectangle of :func:`border_cases`, added by an ALU ADD over the rectangle's
    accumulators; with a REQ epilogue, :attr:`folded_border`, each row holds the bias
    plus the correction and is the REQ pass's src over its rectangle), ``residual`` int32 (N/b, O/c, OH, OW, b, c), and
    ``out`` int8 (planes, N/b, O/c, OH, OW, b, c) with 1 plane (int8) or 4 (int32).
    """

    name = "conv2d"

    @property
    def folded_border(self) -> bool:
        """The border correction rides in the REQ pass (ALU extension ``"requant2"``):
        each border row holds bias + correction and REQ reads it as its src over the
        row's rectangle (one REQ per rectangle of :attr:`border_cells` a tile touches,
        the plain bias row over the rest), so no ALU ADD pass of the border remains.

        Only with the rows shared by every slot (:func:`.tiling.shared_acc`): with rows
        per slot (:attr:`.ConvProblem.own_rows`, or too many rows to share) the event
        model predicts much more than the RTL saves (Verilator: visual_wake_words' 6x6
        depthwise layers with own rows 6172 cycles folded, 6214 with ADDs, predicted 4511
        and 6006; keyword_spotting's depthwise layers on tiny save 148 cycles, predicted
        560), so those kernels keep the ADD passes, which the model predicts right."""
        return (bool(self.border_cases) and isinstance(self.epilogue.requant, Requant2)
                and shared_acc(self.problem, self.config) > 0 and not self.direct_border)

    #: Border correction mode of a plan given the ``pad_value`` (``requant2``):
    #: ``"rows"`` (per-rectangle rows, :attr:`folded_border` / :attr:`onchip_border`) or
    #: ``"direct"`` (:attr:`direct_border`); chosen by :meth:`_try_onchip_rows`.
    border_mode = "rows"

    @property
    def direct_border(self) -> bool:
        """The border correction added straight to the accumulators (``requant2``, a
        plan given the ``pad_value``, one batch block): after each group's GEMMs, GEMMs
        of an input vector of the pad value (:attr:`zx_entry`) with the weight tiles of
        the taps each border output vector reads from the padding, one micro-op per
        vector and tap. No rows and one REQ pass per block (src the bias row): cheaper
        than :attr:`folded_border` when the rectangles are small (a 3x3 output has nine,
        of one vector each, and nine REQ instructions per block)."""
        return (self.border_mode == "direct" and self.pad_value is not None
                and self.problem.nb == 1 and self.zx_entry is not None)

    @property
    def onchip_border(self) -> bool:
        """:attr:`folded_border` rows computed on chip instead of loaded (``requant2``,
        a plan given the ``pad_value``): each row is reset, gets the bias by one ALU ADD
        and the correction by GEMMs of an input vector of the pad value (one inp entry,
        :attr:`zx_entry`, loaded once) with the weight tiles of the taps its rectangle
        reads from the padding (:attr:`border_taps`), once per output-channel block, in
        the first tile of the block while its weights are in the wgt SRAM. The rows'
        DRAM loads (8 x 64 bytes per block for a 3x3 kernel) go away; the GEMMs cost one
        cycle per tap and row on the compute module, which loaded the rows before."""
        return (self.folded_border and self.pad_value is not None and self.rows_on_chip
                and self.zx_entry is not None
                and border_uops(self.border_taps, self.tiling.tci) is not None)

    @property
    def zx_entry(self) -> int | None:
        """The inp SRAM entry of the pad-value vector of :attr:`onchip_border`: the last
        one, when no inp slot of the tiling reaches it; else None."""
        cfg, t = self.config, self.tiling
        at = cfg.inp_depth - 1
        used = (t.nthreads - 1) * (cfg.inp_depth // t.nthreads) + t.footprint(
            self.problem, cfg)["inp"]
        return at if used <= at else None

    def roofline(self):
        """This layer's :class:`~.cost.roofline.Roofline`."""
        return conv_roofline(self, self.config)

    def __init__(self, config, x_shape, w_shape, stride=1, padding=0, *, groups: int = 1,
                 epilogue: Epilogue = Epilogue(), tiling: ConvTiling | None = None,
                 cost: SearchCost = SearchCost(), shared_weight: bool = False,
                 border: bool = False, pad_value: int | None = None,
                 border_choice: tuple | None = None):
        super().__init__(config)
        n, c, h, w = (int(v) for v in x_shape)
        o, i, kh, kw = (int(v) for v in w_shape)
        self.x_shape, self.w_shape, self.groups = (n, c, h, w), (o, i, kh, kw), int(groups)
        text = (f"{self.name} x{list(self.x_shape)} w{list(self.w_shape)} stride "
                f"{_pair(stride)} padding {normalize_padding(padding)}"
                + (f" groups {self.groups}" if self.groups != 1 else ""))
        g = self.groups
        if g < 1 or c % g or o % g or i != c // g:
            raise ValueError(f"{text}: input has {c} channels, the weight expects {i} per "
                             f"group; with groups={g} the weight must be "
                             f"[{o}, {c // g if g >= 1 and c % g == 0 else '?'}, {kh}, {kw}] and "
                             "both channel counts divisible by groups")
        self.stride, self.padding = _pair(stride), normalize_padding(padding)
        self.oh, self.ow = conv2d_output_shape(h, w, kh, kw, self.stride, self.padding)
        self.epilogue = epilogue
        epilogue.check_config(config)
        self.border_cells = (border_cells(h, w, kh, kw, self.stride, self.padding, self.oh,
                                          self.ow) if border else [])
        self.border_cases = [cell[:4] for cell in self.border_cells if cell[4] is not None]
        # requant2: the folded border rows computed on chip from the pad value (an int8
        # zero point; see onchip_border)
        self.pad_value = (int(pad_value) if border and pad_value is not None
                          and float(pad_value) == int(pad_value)
                          and -128 <= int(pad_value) <= 127
                          and isinstance(epilogue.requant, Requant2)
                          and not shared_weight else None)
        self.border_taps = (border_taps(self.border_cells, h, w, kh, kw, self.stride,
                                        self.padding) if self.pad_value is not None else [])
        cfg = config
        b, blk = cfg.batch, cfg.block
        og = o // g
        if g == 1:
            grouping = dict(ib=ceil_div(c, blk))
        elif i % blk == 0 and og % blk == 0:      # whole blocks per group: per-group GEMMs
            grouping = dict(ib=i // blk, in_blocks=c // blk, group_ob=og // blk)
        elif i == og and blk % i == 0:           # groups inside a block: block-diagonal
            grouping = dict(ib=1, in_blocks=ceil_div(c, blk), diag=True)
        else:
            raise GroupMappingError(
                f"{text}: {i} input and {og} output channels per group neither fill whole "
                f"{blk}-channel blocks nor tile a block diagonally (equal counts dividing "
                f"{blk}); group_conv2d runs such convolutions group by group")
        self.problem = ConvProblem(
            ceil_div(n, b), grouping.pop("ib"), h, w, ceil_div(o, blk), kh, kw, self.stride,
            self.padding, bias=epilogue.bias_tile, residual=epilogue.residual == "int32",
            residual_gemm=epilogue.residual == "int8",
            alu_imm=sum(map(len, epilogue.stages())),
            int32_out=epilogue.out_dtype == "int32",
            result_bytes=epilogue.result_bytes,
            op=self.name, shape_text=text, shared_wgt=bool(shared_weight),
            acc_rows=epilogue.rows, border_cases=len(self.border_cases),
            uniform_rows=epilogue.uniform_rows,
            min_init=bool(epilogue.init), req_pass=isinstance(epilogue.requant, Requant2),
            border_vectors=sum((r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in self.border_cases)
            * ceil_div(n, b) * ceil_div(o, blk), **grouping)
        if border_choice is not None:   # _try_runners_up: the re-ranked plan's rows
            self.rows_on_chip, self.border_mode, own = border_choice
            self.problem = replace(self.problem, own_rows=own)
        p = self.problem
        ranked = None
        if tiling is None:
            ranked = self._ranked(cost)
            tiling = ranked[0][1]
        # the search's estimate of its winner is the scalar model's, bit for bit
        self._set_tiling(tiling, cost, ranked[0][0] if ranked else None)
        e = (b, blk)
        self.operands = {"data": Operand("data", (p.nb, p.cin_blocks, h, w) + e, np.int8),
                         "weight": Operand("weight", (1, 1, 1, 1, blk, blk) if p.shared_wgt else
                                           (p.ob, p.ib, kh, kw, blk, blk), np.int8)}
        if epilogue.bias_tile:
            self._operands["bias"] = Operand("bias", (p.ob, b, blk), np.int32)
        if epilogue.rows:
            self._operands["requant"] = Operand("requant", (epilogue.rows, p.row_blocks, b, blk),
                                               np.int32)
        if self.border_cases:
            self._operands["border"] = Operand("border", (len(self.border_cases), p.ob, b, blk),
                                              np.int32)
        if self.pad_value is not None:
            self._operands["border_zx"] = Operand("border_zx", (1, b, blk), np.int8)
        if epilogue.residual:
            self._operands["residual"] = Operand("residual", (p.nb, p.ob, p.oh, p.ow) + e,
                                                np.dtype(epilogue.residual))
        if epilogue.residual == "int8":
            self._operands["identity"] = Operand("identity", (1, 1, 1, 1, blk, blk), np.int8)
        self._operands["out"] = Operand("out", (epilogue.planes, p.nb, p.ob, p.oh, p.ow) + e,
                                       np.int8)
        onchip = self.pad_value is not None and ranked is not None
        if border_choice is None:
            self.rows_on_chip = not onchip     # searched both ways, loaded rows first
        self._search(_SearchArgs(cost, ranked, p, shared_weight, pad_value))

    def _search(self, args):
        """Make the schedule choices of :attr:`SEARCH` in order: of each entry, the first
        step whose predicate holds on the plan as the steps before left it runs.

        Memoized (:data:`_SEARCHED`) by :meth:`_search_key`: a layer whose plan differs
        from one searched before only in its epilogue's immediates (a ResNet block's
        shifts and clip bounds) takes that search's choices when they give it a program
        the event model cannot tell from that search's result
        (:func:`.cost.events.timing_key`: every step decides by the event model, which
        reads no immediate); else it searches."""
        key = self._search_key(args)
        got = _SEARCHED.get(key) if key is not None else None
        if got is not None:
            was = self._snapshot()
            self._restore(got[0])
            if timing_key(self.program(), RTL_COST) == got[2]:
                self.__dict__.update(got[1])
                return
            self._restore(was)
        for entry in self.SEARCH:
            step = next((s for s in entry if s.applies(self, args)), None)
            if step is not None:
                step.apply(self, args)
        if key is not None:     # the re-ranking's runners-up too: a plan as searched
            ranked = {k: self.__dict__[k] for k in ("_runners", "_rerank_key")
                      if k in self.__dict__}
            _SEARCHED[key] = (self._snapshot(), ranked, timing_key(self.program(), RTL_COST))

    def _search_key(self, args):
        """What :meth:`_search` reads, immediates aside: the class's methods and
        parameters as they are now, the plan's state by value without its epilogue
        (:func:`_state`), the epilogue's shape (each stage's passes without their
        immediates, and every flag that decides what is emitted) and the search's
        arguments; None when a part cannot be described (not memoized)."""
        epi = self.epilogue
        state = _state(self, "epilogue", "_runners", "_rerank_key")
        if state is None:
            return None
        try:
            shape = _describe((
                epi.bias, epi.residual, epi.out_dtype, epi.planes, epi.bias_tile,
                bool(epi.shift), bool(epi.init), epi.fold, epi.requant, epi.add is not None,
                tuple(tuple(op for op, _ in stage) for stage in epi.stages()), tuple(args)))
        except _Unhashable:
            return None
        params = tuple((name, v if getattr(type(v), "__hash__", None) else id(v))
                       for c in type(self).__mro__ for name, v in vars(c).items()
                       if not name.startswith("__"))
        return type(self), params, state, shape

    def _add_order_fit(self) -> bool:
        """:meth:`_try_add_order` applies: a fused add, COMPUTE_OVERLAP, two or more
        reduction chunks."""
        t = self.tiling
        return (self.epilogue.add is not None and self.config.compute_overlap
                and not t.resident and t.tci < self.problem.ib)

    def _beside_fit(self) -> bool:
        """:meth:`_try_beside` applies: an epilogue of immediate passes after a MIN init,
        COMPUTE_OVERLAP, two or more reduction chunks whose GEMMs are no more micro-ops
        than the passes."""
        p, t, epi = self.problem, self.tiling, self.epilogue
        return (self.config.compute_overlap and epi.add is None and not t.resident
                and t.tci < p.ib and epi.init and epi.requant is None
                and not epi.residual and not self.border_cases
                and t.tci * p.kh * p.kw <= len(epi.stages()[0]))

    def _plane_banks_fit(self) -> bool:
        """:meth:`_try_plane_banks` applies: an int32 result, COMPUTE_OVERLAP, two
        threads, the tiling's acc slots."""
        return (self.config.compute_overlap and self.problem.int32_out
                and self.epilogue.planes > 1 and self.tiling.nthreads > 1
                and not self.out_slots)

    def _int32_runners_fit(self, args) -> bool:
        """:meth:`_try_runners_up` for an int32 result: a re-ranked block-diagonal layer,
        COMPUTE_OVERLAP, no requantize."""
        p = args.problem
        return (args.reranked and p.int32_out and self.epilogue.requant is None
                and self.config.compute_overlap and bool(self.RUNNERS_UP)
                and type(self) is Conv2dPlan and p.diag)

    #: The schedule choices searched after the tile search, in order: entries of
    #: alternative :class:`_Step` (the first whose predicate holds runs), each predicate
    #: read on the plan as the steps before left it (``args``: :class:`_SearchArgs`).
    #: Each step keeps what it tries by its own rule (its method's: mostly when the event
    #: model predicts the plan faster).
    SEARCH = (
        (_Step("rerank", lambda s, a: a.reranked,
               lambda s, a: s._rerank([t for _, t in a.ranked], a.cost)),),
        (_Step("own_rows", lambda s, a: (a.ranked is not None and a.problem.req_pass
                                         and bool(shared_acc(a.problem, s.config))),
               lambda s, a: s._try_own_rows(a.cost)),),
        (_Step("onchip_rows", lambda s, a: s.pad_value is not None and a.ranked is not None,
               lambda s, a: s._try_onchip_rows(a.cost, a.problem, a.ranked)),),
        (_Step("add_order", lambda s, a: s._add_order_fit(),
               lambda s, a: s._try_add_order(a.cost)),
         _Step("beside", lambda s, a: s._beside_fit(), lambda s, a: s._try_beside(a.cost)),
         _Step("plane_banks", lambda s, a: s._plane_banks_fit(),
               lambda s, a: s._try_plane_banks(a.cost))),
        (_Step("serial_order", lambda s, a: (s.config.compute_overlap
                                             and s.epilogue.requant is not None),
               lambda s, a: s._try_flag("serial_order")),),
        (_Step("row_pieces", lambda s, a: s._row_pieces_apply(),
               lambda s, a: s._try_flag("row_pieces")),),
        (_Step("split_first", lambda s, a: (s.tiling.resident and a.problem.int32_out
                                            and s.tiling.tco > 1 and not s.border_cases),
               lambda s, a: s._try_split_first(a.cost)),),
        (_Step("head_rows", lambda s, a: a.problem.int32_out and s._head_rows_apply(),
               lambda s, a: s._try_head_rows()),),
        (_Step("row_loads", lambda s, a: a.problem.int32_out and s._row_loads_apply(),
               lambda s, a: s._try_flag("row_loads")),),
        (_Step("weights_ahead", lambda s, a: (s.tiling.resident
                                              and s.problem.ob > s.tiling.tco),
               lambda s, a: s._try_flag("weights_ahead")),),
        (_Step("bank_rows", lambda s, a: s._bank_rows_fit(),
               lambda s, a: s._try_lane_zero(a.cost, s._try_bank_rows())),
         _Step("lane_zero", lambda s, a: s._lane_zero_fit(),     # rows in each slot (or none)
               lambda s, a: s._try_lane_zero(a.cost, s.inspect()["predicted_cycles"]))),
        (_Step("shared_lane", lambda s, a: (s.problem.own_rows
                                            and (s._lane_zero_fit() or s.lane_zero)),
               lambda s, a: s._try_shared_lane(a.cost)),),
        (_Step("req_resident", lambda s, a: s._req_resident_fit(),
               lambda s, a: s._try_req_resident(a.cost)),),
        (_Step("bank_copy", lambda s, a: s.bank_rows and not s.bank_copy,
               lambda s, a: s._try_flag("bank_copy")),),
        (_Step("runners_up", lambda s, a: s._int32_runners_fit(a),
               lambda s, a: s._try_runners_up(a.cost, bool(s.border_cells), a.shared_weight)),
         _Step("req_runners_up", lambda s, a: (a.reranked and s._req_runners_fit()
                                               and type(s) is Conv2dPlan),
               lambda s, a: s._try_runners_up(a.cost, bool(s.border_cells), a.shared_weight,
                                              s.REQ_RUNNERS_UP, a.pad_value,
                                              s.REQ_RUNNER_GAIN))),
    )

    #: COMPUTE_OVERLAP with a fused add: the order of a tile's parts around the
    #: residual's identity GEMM (:meth:`_ConvEmission.run_add`), ``"pre"`` or ``"split"``;
    #: :meth:`_try_add_order` takes the one the event model predicts faster.
    add_order = "pre"

    #: COMPUTE_OVERLAP with a fused add: tile t's passes after its residual GEMM go
    #: between tile t + 1's groups (:meth:`_ConvEmission.post_beside`) instead of all
    #: before them; :meth:`_try_add_order` decides.
    post_beside = False

    #: COMPUTE_OVERLAP: tile t + 1's start is emitted after tile t's epilogue, as on a
    #: one-lane config, instead of before it (:meth:`_ConvEmission.run`). With a
    #: requantize epilogue the lane takes none of ``requant``'s late passes (``SRDHM``,
    #: ...) and, with ``requant2``, the REQs whose rows are in the other bank, so the
    #: early start may only delay the next GEMMs; :meth:`_try_flag` decides.
    serial_order = False

    #: With the ALU lane running REQ (``requant2``, :func:`~vtakit.hw.compute_lane.lane_req`)
    #: and per-channel rows shared by the slots (:func:`shared_acc`): a copy of the rows at
    #: the top of each acc bank, and two slots, one per bank below them, so that every
    #: tile's REQ passes (src: its bank's bias or border row) stay in one bank and the
    #: lane takes them (with one copy, at the top of bank 1, the lane refuses the REQs of
    #: the tiles in bank 0). The rows load twice; :meth:`_try_flag` decides.
    bank_rows = False

    #: With :attr:`bank_rows`: four acc slots, two per bank under its copy of the rows
    #: (:attr:`out_slots` 4), and each tile's accumulators zeroed by two ALU passes in
    #: the lane (:meth:`.Epilogue.emit_zero`) two tiles ahead, right after the REQ
    #: epilogue of the tile before it in its bank, instead of by a GEMM reset (one
    #: GEMM-lane micro-op per output vector) before its GEMMs; the lane runs both beside
    #: the next tile's GEMMs. :meth:`_try_lane_zero` decides.
    lane_zero = False

    #: With :attr:`bank_rows`: bank 0's copy of the rows made on chip from bank 1's
    #: (:meth:`_ConvEmission.copy_shared_rows`: a GEMM reset and an ALU ADD, one
    #: micro-op per row each, in the GEMM lane) instead of loaded from DRAM a second
    #: time (the compute module's LOADs of the rows were a seventh of keyword spotting's
    #: compute time). :meth:`_try_flag` decides.
    bank_copy = False

    def _try_bank_rows(self) -> int:
        """:attr:`bank_rows`, loaded twice or with :attr:`bank_copy`: the one the event
        model predicts fastest, if faster than one copy; returns the prediction kept."""
        return self._try([dict(bank_rows=True, bank_copy=copy) for copy in (False, True)])

    def _try_lane_zero(self, cost, keep):
        """:attr:`lane_zero` with the tiling's tiles shrunk to fit a quarter of the acc
        SRAM less the rows (fewer rows, then fewer output blocks), kept when the event
        model predicts it faster than ``keep`` (the plan's prediction as it stands)."""
        p, t, cfg, epi = self.problem, self.tiling, self.config, self.epilogue
        if epi.init or epi.residual or epi.add is not None or self.serial_order:
            return
        shared = shared_acc(p, cfg)
        room = (cfg.acc_depth // 2 - shared) // 2 if shared else cfg.acc_depth // 4
        quad = next((c for tco in range(t.tco, 0, -1) for th in range(t.th, 0, -1)
                     for c in [replace(t, tco=tco, th=th)]
                     if c.footprint(p, cfg)["acc"] <= room), None)
        if quad is None:
            return
        self._try([dict(bank_rows=bool(shared), lane_zero=True, out_slots=4, tiling=quad)],
                  cost, keep)

    def _try_shared_lane(self, cost):
        """A plan with rows per slot (:attr:`.ConvProblem.own_rows`) tries the shared rows
        again, with :attr:`bank_rows` and then :attr:`lane_zero` (each tile's rows load
        took the compute module ~100 cycles a tile): kept when the event model predicts
        it faster."""
        def change():
            self.problem = replace(self.problem, own_rows=False)
            self.lane_zero, self.out_slots = False, None
            if not shared_acc(self.problem, self.config):
                return False
            self._replan(cost)
            if not self._bank_rows_fit():
                return False
            self.bank_rows, self.bank_copy, self._program = True, False, None
            self._try_lane_zero(cost, self._try_flag("bank_copy"))
            return True

        self._keep_if_faster(change)

    #: requant2 (an int8 result of REQ passes): how many of the tile search's best
    #: tilings :meth:`_try_req_resident` tries with resident weights.
    REQ_RESIDENT = 4

    def _req_resident_fit(self) -> bool:
        """:meth:`_try_req_resident` applies: a REQ epilogue (the tile search keeps
        resident weights to int32 results), per-block weights without an int8 residual
        group, the whole weight within the wgt SRAM, an output of more than one vector
        per image (a dense layer as a 1x1 convolution reads its weights once either way:
        anomaly detection's ten, predicted faster resident, ran 35,187 -> 35,666 cycles
        on Verilator); on a one-lane config not a block-diagonal one (keyword spotting's
        depthwise layers on ``default+requant2+serial``: 42,429 -> 42,628 cycles)."""
        p = self.problem
        return (p.req_pass and not p.int32_out and not p.shared_wgt and not p.residual_gemm
                and p.oh * p.ow > 1 and (self.config.compute_overlap or not p.diag)
                and not self.tiling.resident and not self.plane_banks
                and whole_weight(p) <= self.config.wgt_depth)

    def _try_req_resident(self, cost):
        """Resident weights for a REQ epilogue (each output block's weights loaded once,
        by its first tile), with :attr:`weights_ahead` and :attr:`row_pieces` (the fill:
        the first GEMMs wait for a kernel row's weights, not all): the plan's tiling and
        the search's best :attr:`REQ_RESIDENT`, each with one reduction chunk and two
        threads, and each with :attr:`split_last` as it stands and flipped. The one the
        event model predicts fastest is kept, if faster than the plan as it stands."""
        p, cfg = self.problem, self.config
        best = (self.inspect()["predicted_cycles"], self.tiling, self.estimate,
                self.split_last, False, False)
        cands = [self.tiling] + [t for _, t in search_tiles(p, cfg, cost=cost,
                                                             top=self.REQ_RESIDENT)]
        cands = dict.fromkeys(replace(t, tci=p.ib, nthreads=2, resident=True) for t in cands)
        for cand in cands:
            try:
                self._set_tiling(cand, cost)
            except TilingError:
                continue
            pieces = [False, True] if self._row_pieces_apply() else [False]
            ahead = [False, True] if p.ob > cand.tco else [False]
            splits = [False, True] if self._last_tile_splits() else [False]
            for split, wa, rp in itertools.product(splits, ahead, pieces):
                self.split_last, self.weights_ahead, self.row_pieces = split, wa, rp
                self._program = None
                got = self.inspect()["predicted_cycles"]
                if got < best[0]:
                    best = (got, cand, self.estimate, split, wa, rp)
        _, tiling, est, split, self.weights_ahead, self.row_pieces = best
        self._set_tiling(tiling, cost, est)
        self.split_last = split

    def _lane_zero_fit(self) -> bool:
        """:attr:`lane_zero` may apply without shared rows: the lane runs REQ, two plain
        acc slots, each holding its tile's rows (:func:`shared_acc` 0)."""
        from ...hw.compute_lane import lane_req
        p, cfg = self.problem, self.config
        return (lane_req(cfg) and p.req_pass and not shared_acc(p, cfg)
                and not self.plane_banks and not self.out_slots
                and self.acc_slot_count() == 2)

    def _bank_rows_fit(self) -> bool:
        """:attr:`bank_rows` applies: the lane runs REQ, the rows are shared (loaded, not
        computed on chip), two plain acc slots, and a tile fits a bank less the rows."""
        from ...hw.compute_lane import lane_req
        p, cfg = self.problem, self.config
        shared = shared_acc(p, cfg)
        return (lane_req(cfg) and p.req_pass and shared > 0 and not self.onchip_border
                and not self.plane_banks and not self.out_slots
                and self.acc_slot_count() == 2
                and self.tiling.footprint(p, cfg)["acc"] <= cfg.acc_depth // 2 - shared)

    #: inp/wgt SRAM slots when not the tiling's ``nthreads``: 3 for a fused add with
    #: COMPUTE_OVERLAP (:meth:`_try_add_order`), whose residual group takes a slot of
    #: its own in the rotation, so that the next tile's groups load while it waits for
    #: the passes before it (two acc slots still, one per bank).
    in_slots = None

    #: acc/out slots when not the tiling's: 4 with COMPUTE_OVERLAP (two per acc bank,
    #: :meth:`_ConvEmission.slot_base`), so that a tile's start waits for the store of
    #: the tile four before it, not two; :meth:`_try_out_slots` decides.
    out_slots = None

    #: COMPUTE_OVERLAP with an int32 result (plane shifts k tiles behind the GEMMs,
    #: :class:`.tokens.PlanePipeline`): the acc bank of each acc slot, tile t in slot
    #: t % len(plane_banks), the slots of a bank one after another from its first row
    #: (:meth:`_ConvEmission.slot_base`). A GEMM waits for the ALU lane's instructions
    #: in its bank, so the next tile's GEMMs run beside the plane shifts of the tiles
    #: before it when their slots lie in the other bank; :meth:`_try_plane_banks`
    #: decides. None: :data:`.geometry.INT32_ACC_SLOTS` slots one after another.
    plane_banks = None

    #: COMPUTE_OVERLAP, int32 result: the accumulators start from zero by two ALU passes
    #: (:meth:`.Epilogue.emit_zero`, in the ALU lane) a step ahead of the tile's GEMMs
    #: (:class:`.tokens.PlanePipeline` ``lead``) instead of a GEMM reset (in the GEMM
    #: lane, right before them); :meth:`_try_plane_banks` decides.
    alu_reset = False

    def acc_slot_count(self) -> int:
        """Acc/out slots the emission rotates through."""
        if self.plane_banks:
            return len(self.plane_banks)
        return self.out_slots or int(acc_slots(self.problem.int32_out, self.tiling.nthreads))

    def plane_slot_rows(self, banks=None) -> int:
        """Rows of each slot with :attr:`plane_banks` (or ``banks``): a bank's rows (the
        top bank's less the shared rows, :func:`shared_acc`) over the most slots of a
        bank."""
        half = self.config.acc_depth // 2
        banks = banks or self.plane_banks
        return (half - shared_acc(self.problem, self.config)) // max(banks.count(0),
                                                                      banks.count(1))

    #: Resident weights of a full (not block-diagonal) convolution with a kernel of 2+
    #: rows: the first group loads them one kernel row at a time, each with its own
    #: token, and runs each row's GEMMs after it, as a depthwise layer's first group
    #: always does (:meth:`_ConvEmission.group`). The first GEMMs then wait for a third
    #: of the weights (a 3x3 kernel), not all of them; each row is ``tco x ib`` LOADs of
    #: ``kw`` elements instead of one LOAD. :meth:`_try_flag` decides (the event model).
    row_pieces = False

    def _row_loads_apply(self) -> bool:
        """Whether :attr:`row_loads` changes this plan's program: a group of two or more
        input blocks whose window is whole rows without padding (not the whole image,
        which is one LOAD anyway)."""
        p, t = self.problem, self.tiling
        (sh, sw), (pt, pl, _, _) = p.stride, p.pad
        for n0, tn, co0, tco, h0, th, w0, tw in self.tiles():
            nin = tco if p.diag else min(t.tci, p.ib)
            ywin = self._window(h0, th, sh, p.kh, pt, p.h)
            xwin = self._window(w0, tw, sw, p.kw, pl, p.w)
            if (nin > 1 and ywin[1] == ywin[4] != p.h and xwin[1] == xwin[4] == p.w):
                return True
        return False

    def _row_pieces_apply(self) -> bool:
        """Whether :attr:`row_pieces` changes this plan's program."""
        p, t = self.problem, self.tiling
        return (t.resident and not p.diag and p.kh > 1 and t.tn == 1 and not p.shared_wgt
                and not self.onchip_border and not self.direct_border)

    #: :meth:`_try_plane_banks`' bank patterns, the first taken on a tie (on the MLPerf
    #: Tiny models each wins some layers; banks alternating slot by slot, (0, 1) x 3,
    #: won none: the next tile then shares its bank with the shift of the tile two
    #: before it).
    PLANE_BANKS = ((0, 0, 0, 1, 1, 1), (0, 0, 1, 1), (0, 0, 1, 1, 1))

    #: With :attr:`plane_banks`, the :class:`.tokens.PlanePipeline` skew: plane k of tile
    #: i - plane_skew * k shifted after tile i's GEMMs.
    plane_skew = 1

    #: :meth:`_try_plane_banks`' patterns with ``plane_skew`` 2, by planes: slots
    #: alternating banks, so that the shifts of tiles t - 2 and t - 4 (and t - 6) never
    #: share a bank with tile t + 1's GEMMs.
    SKEWED_BANKS = {2: (0, 1, 0, 1), 3: (0, 1) * 3, 4: (0, 1) * 4}

    def _try_plane_banks(self, cost):
        """:attr:`plane_banks`, :attr:`plane_skew` and :attr:`alu_reset`: each of
        :attr:`PLANE_BANKS` (skew 1), :attr:`SKEWED_BANKS` (skew 2), two slots
        alternating banks with every plane of a tile right after it (skew 0) and
        ``2 planes`` slots alternating banks (skew :data:`.tokens.MID`, and with three
        planes or more :data:`.tokens.EARLY`); where
        :meth:`_zero_ok`, each again with :attr:`alu_reset`, and slots alternating banks
        :attr:`ZERO_EXTRA` pairs more than the planes (skew 1 and 2); then
        :attr:`SPREAD_BANKS` (skew :data:`.tokens.SPREAD`, with and where
        :meth:`_zero_ok` without :attr:`alu_reset`). A candidate needs
        slots that hold the tiling's tile and at least
        :meth:`.tokens.PlanePipeline.min_slots`; the one the event model predicts
        fastest is kept, if faster than the plan as it stands."""
        fp = self.tiling.footprint(self.problem, self.config)["acc"]
        planes = self.epilogue.planes
        tries = [(b, 1, False) for b in self.PLANE_BANKS]
        if planes in self.SKEWED_BANKS:
            tries.append((self.SKEWED_BANKS[planes], 2, False))
        tries.append(((0, 1), 0, False))
        tries.append(((0, 1) * planes, MID, False))
        if planes > 2:      # EARLY differs from MID with a plane 2
            tries.append(((0, 1) * planes, EARLY, False))
        zero = self._zero_ok()
        if zero:
            tries += [(b, s, True) for b, s, _ in tries]
            tries += [((0, 1) * (planes + extra), skew, True) for extra in self.ZERO_EXTRA
                      for skew in (1, 2)]
        # last: the ones before win a tie
        tries += [(b, SPREAD, z) for z in (False, True)[:1 + zero] for b in self.SPREAD_BANKS]
        self._try([dict(plane_banks=banks, plane_skew=skew, alu_reset=zero)
                   for banks, skew, zero in dict.fromkeys(tries)
                   if len(banks) >= PlanePipeline.min_slots(planes, skew, zero)
                   and fp <= self.plane_slot_rows(banks)])

    #: :meth:`_try_plane_banks`' patterns with ``plane_skew`` :data:`.tokens.SPREAD`
    #: (every plane of a tile shifted amid the next tile's GEMMs): slots alternating banks.
    SPREAD_BANKS = ((0, 1) * 2, (0, 1) * 3)

    #: :meth:`_try_plane_banks` with :attr:`alu_reset`: slots alternating banks, this
    #: many pairs more than the planes (a tile's zeroing pops its slot a step before
    #: its GEMMs, so the slot's previous tile has stored its last plane by then).
    ZERO_EXTRA = (0, 1)

    def _zero_ok(self) -> bool:
        """Whether the accumulators may start from :meth:`.Epilogue.emit_zero` instead of
        a GEMM reset: an int32 result that starts from zeros (no bias tile, rows,
        border or residual in the acc SRAM)."""
        p, epi = self.problem, self.epilogue
        return (p.int32_out and not epi.init and not epi.bias_tile and not epi.residual
                and not p.acc_rows and not p.border_cases)

    def _try_add_order(self, cost):
        """The :attr:`add_order`, :attr:`post_beside`, :attr:`in_slots` and
        :attr:`out_slots` the event model predicts fastest: three inp/wgt slots
        (:meth:`_three_slot_tiling`) when a tiling fits them, else the searched tiling
        with two; in each order of :attr:`ADD_ORDERS` (``post_beside`` only when a
        group's GEMMs are no more micro-ops than the passes after the residual GEMM, as in
        :meth:`_try_beside`, and then ``"pre"`` only with it); then
        :meth:`_try_out_slots`.

        Three slots were predicted faster than every order with two on each add layer
        of ResNet-18 and ResNet-50 (default+overlap), so two are not tried beside them.
        Verilator, default+overlap, 1x1 residual layers of ResNet-50 (cycles pre /
        split, two slots): 64 -> 256 at 56x56 569,753 / 628,680; 128 -> 512 at 28x28
        345,920 / 338,160; 256 -> 1024 at 14x14 275,457 / 288,973; 512 -> 2048 at 7x7
        243,593 / 238,637 (the event model within 1.3% of each)."""
        three = self._three_slot_tiling()
        if three is not None:
            self.in_slots = 3
            self._set_tiling(three, cost)
        t = self.tiling
        short = t.tci * self.problem.kh * self.problem.kw <= len(self.epilogue.stages()[2])
        got = self._try([dict(add_order=order, post_beside=beside)
                         for order, beside in self.ADD_ORDERS
                         if not (beside and not short or (order == "pre" and beside != short))],
                        keep=math.inf)
        self._try_out_slots(cost, got, [("split", False)])

    #: :meth:`_try_add_order`'s orders ``(add_order, post_beside)``, the first taken on
    #: a tie.
    ADD_ORDERS = (("pre", False), ("pre", True), ("split", False), ("split", True))

    def _three_slot_tiling(self):
        """The searched tiling shrunk to fit three inp/wgt slots (its residual tile and
        a group's inputs in a third of the inp SRAM, a group's weights in a third of
        the wgt SRAM): the most output blocks, then the most input blocks per group;
        None when even one block each does not fit."""
        p, t, cfg = self.problem, self.tiling, self.config
        for tco in range(t.tco, 0, -1):
            for tci in range(t.tci, 0, -1):
                c = replace(t, tco=tco, tci=tci)
                fp = c.footprint(p, cfg)
                if fp["inp"] <= cfg.inp_depth // 3 and fp["wgt"] <= cfg.wgt_depth // 3:
                    return c
        return None

    def _try_out_slots(self, cost, keep, orders):
        """:attr:`out_slots` 4 with the tiling's tiles shrunk to a quarter of the acc
        SRAM (fewer rows, then fewer output blocks) in each of ``orders``
        (``(add_order, post_beside)``), kept when the event model predicts it faster
        than ``keep`` (the plan's prediction as it stands). Tried only where the ALU
        lane has as many micro-ops per output vector as the GEMM lane (the start, GEMMs,
        passes and store of a bank's tile then bound the layer; where the GEMMs bound
        it, the smaller tiles lost on ResNet-50)."""
        p, t, cfg, epi = self.problem, self.tiling, self.config, self.epilogue
        alu = 1 + sum(map(len, epi.stages()))      # lane micro-ops per output vector
        if shared_acc(p, cfg) or p.int32_out or alu < p.ib * p.kh * p.kw + p.residual_gemm:
            return
        quad = next((c for tco in range(t.tco, 0, -1) for th in range(t.th, 0, -1)
                     for c in [replace(t, tco=tco, th=th)]
                     if c.footprint(p, cfg)["acc"] <= cfg.acc_depth // 4), None)
        if quad is None:
            return
        self._try([dict(out_slots=4, add_order=order, post_beside=beside, tiling=quad)
                   for order, beside in dict.fromkeys(orders)], cost, keep)

    def _try_beside(self, cost):
        """:attr:`post_beside` for an epilogue of immediate passes only (a MIN init
        carries the bias) whose group of GEMMs per input chunk is shorter than the
        passes: kept when the event model predicts it faster."""
        best = self._try_flag("post_beside")
        self._try_out_slots(cost, best, [(self.add_order, self.post_beside)])

    def _try_flag(self, name: str) -> int:
        """Set the boolean attribute ``name`` when the event model predicts the plan
        faster with it; returns the prediction kept."""
        return self._try([{name: True}])

    def _try(self, candidates, cost=None, keep=None) -> int:
        """Set each of ``candidates`` (attribute -> value, a ``tiling`` last by
        :meth:`_set_tiling` with ``cost``) in turn, and keep the first the event model
        predicts fastest if it predicts it faster than ``keep`` (default: the plan as it
        stands), else the plan as it was; returns the prediction kept."""
        if keep is None:
            keep = self.inspect()["predicted_cycles"]
        was, best = self._snapshot(), (keep, None)
        for c in candidates:
            self._assign(c, cost)
            got = self.inspect()["predicted_cycles"]
            best = (got, c) if got < best[0] else best
        if candidates and best[1] is not candidates[-1]:      # else the plan holds it
            self._restore(was)
            if best[1] is not None:
                self._assign(best[1], cost)
        return best[0]

    def _keep_if_faster(self, change) -> None:
        """Run ``change()``, which changes the plan's choices (False: it does not apply),
        and keep what it made if the event model predicts it faster than the plan was,
        else restore the plan as it was."""
        keep, was = self.inspect()["predicted_cycles"], self._snapshot()
        if not (change() and self.inspect()["predicted_cycles"] < keep):
            self._restore(was)

    def _snapshot(self) -> dict:
        """The plan's :attr:`STATE`, as :meth:`_restore` takes it."""
        return {k: self.__dict__[k] for k in self.STATE if k in self.__dict__}

    def _restore(self, was: dict) -> None:
        """Set the plan's :attr:`STATE` back to ``was`` (:meth:`_snapshot`)."""
        for k in self.STATE:
            if k not in was:
                self.__dict__.pop(k, None)
        self.__dict__.update(was)     # in place: the attributes keep their order
        self._program = None

    def _assign(self, choice: dict, cost):
        """Set the attributes of ``choice``, its ``tiling`` last (:meth:`_set_tiling`)."""
        for k, v in choice.items():
            if k != "tiling":
                setattr(self, k, v)
        self._program = None
        if "tiling" in choice:
            self._set_tiling(choice["tiling"], cost)

    def _ranked(self, cost):
        """The tile search's best tilings of :attr:`problem`, distinct in order, as many
        as the event model re-ranks (one for an int8 result without REQ)."""
        p = self.problem
        count = self.RERANK_SPATIAL if p.kh * p.kw > 1 and not p.diag else self.RERANK
        ranked = search_tiles(p, self.config, cost=cost,
                              top=4 * count if p.int32_out or p.req_pass else 1)
        return _distinct_orders(p, ranked)[:count]

    #: :attr:`onchip_border` allowed (:meth:`_try_onchip_rows` decides).
    rows_on_chip = True

    #: :meth:`_try_onchip_rows` keeps the on-chip rows when the event model predicts at
    #: most this fraction of the loaded rows' cycles. Verilator (default+requant2) gains
    #: less than predicted: visual_wake_words' 6x6x128 depthwise layers, predicted
    #: -10%, measured -1.3%, its last 3x3 layers -6% / -8%; layers predicted within 2%
    #: (keyword_spotting's depthwise, image_classification's 3x3 convolutions) ran
    #: 0.5-2% slower.
    ONCHIP_GAIN = 0.95

    #: :meth:`_try_onchip_rows` takes :attr:`direct_border` when the event model
    #: predicts at most this multiple of the best other plan: Verilator runs it faster
    #: than predicted where it wins (visual_wake_words' stride-2 depthwise to 3x3,
    #: predicted +0.4% against rows per slot, measured -4.0%; its 6x6 depthwise,
    #: predicted +0.02% against on-chip rows, measured -0.4%); the layers where it
    #: loses are predicted 5% or more slower.
    DIRECT_SLACK = 1.01

    def _try_onchip_rows(self, cost, problem, ranked):
        """The plans that correct the border on chip, each with the shared rows'
        ``problem`` and its tile search's ``ranked`` tilings re-ranked: kept when the
        event model predicts :attr:`direct_border` fastest of all, else
        :attr:`onchip_border` when it predicts it at most :attr:`ONCHIP_GAIN` of the
        plan with loaded rows."""
        def state():
            return self.inspect()["predicted_cycles"], self._snapshot()

        def search(rows_on_chip, mode):
            self.problem, self.rows_on_chip, self.border_mode = problem, rows_on_chip, mode
            self.split_last = type(self).split_last      # as the first search scored them
            self._set_tiling(ranked[0][1], cost, ranked[0][0])
            if len(ranked) > 1:
                self._rerank([t for _, t in ranked], cost)
            return state()

        loaded = state()
        rows = search(True, "rows")
        rows = rows if self.onchip_border else None
        direct = search(False, "direct")
        direct = direct if self.direct_border else None
        best = loaded
        if rows is not None and rows[0] <= self.ONCHIP_GAIN * loaded[0]:
            best = rows
        if direct is not None and direct[0] <= self.DIRECT_SLACK * best[0]:
            best = direct
        self._restore(best[1])

    def _try_own_rows(self, cost):
        """A REQ epilogue's plan with per-slot rows (:attr:`.ConvProblem.own_rows`) instead
        of the shared ones, kept when the event model predicts it faster (shared rows
        delay the first GEMM by their load; per-slot rows reload with the channel
        blocks)."""
        def change():
            self.problem = replace(self.problem, own_rows=True)
            self._replan(cost)
            return True

        self._keep_if_faster(change)

    def _replan(self, cost):
        """The tile search's best tiling of :attr:`problem` (re-ranked)."""
        ranked = self._ranked(cost)
        self._set_tiling(ranked[0][1], cost, ranked[0][0])
        if len(ranked) > 1:
            self._rerank([t for _, t in ranked], cost)

    #: int32 results: how many of the tile search's best tilings are re-ranked by the
    #: event model (:func:`.perfmodel.predict_stream`) on their instruction streams. The
    #: skewed plane schedule's fill, drain and LOAD UOPs are where the analytic model is
    #: coarsest, and these layers are small enough to lower a few times.
    RERANK = 8

    #: :attr:`RERANK` for a dense (not block-diagonal) kernel larger than 1x1, where the
    #: analytic model ranks the tilings worst. Measured on Verilator: 16 saves image
    #: classification 981 cycles (its 3x3 layers); 16 for depthwise layers too saves
    #: visual wake words 190 more but costs it 70% more compile time; 16 for 1x1 layers
    #: too made anomaly detection 6 cycles slower.
    RERANK_SPATIAL = 16

    def _set_tiling(self, tiling, cost, est=None):
        self.tiling = tiling
        self._check_tiling()
        self.estimate = est or estimate(self.problem, tiling, self.config, cost)
        self._program = None

    #: The schedule choices the searches after the tile search set (each a class
    #: attribute with its default), besides the :attr:`tiling`, the :attr:`problem`'s
    #: ``own_rows`` and the border rows (:attr:`rows_on_chip`, :attr:`border_mode`).
    #: :meth:`_rerank` scores its candidates with them at their defaults.
    CHOICES = ("split_last", "split_first", "head_rows", "add_order", "post_beside",
               "in_slots", "out_slots", "plane_banks", "plane_skew", "alu_reset",
               "serial_order", "row_pieces", "row_loads", "weights_ahead", "bank_rows",
               "bank_copy", "lane_zero")

    #: What a search step may change and restore (:meth:`_snapshot`): the
    #: :attr:`CHOICES`, the tiling and its estimate, the problem and the border rows (the
    #: re-ranking's runners-up stay those of the last re-ranking).
    STATE = CHOICES + ("tiling", "estimate", "problem", "rows_on_chip", "border_mode")

    def _rerank(self, candidates, cost):
        """Keep the candidate tiling whose stream the event model predicts fastest (the
        search's order breaks ties). The candidates are scored on a copy of the plan with
        its :attr:`CHOICES` at their defaults, whatever this plan's are (the compiler
        re-ranks before it searches them; a plan re-ranked later picks what a fresh one
        does), memoized by that copy's state (:func:`_state`), the cost and the
        candidates."""
        fresh = copy.copy(self)
        for name in self.CHOICES + ("_runners", "_rerank_key"):
            fresh.__dict__.pop(name, None)
        fresh._program = None
        state = _state(fresh, "tiling", "estimate", "problem", "rows_on_chip", "border_mode")
        key = None if state is None else (state, self.problem, self.rows_on_chip,
                                          self.border_mode, cost, tuple(candidates),
                                          self.RERANK_SPLIT)
        if key is None or key not in _RERANKED:
            scored = []
            for i, t in enumerate(candidates):      # every candidate scored as it is emitted
                fresh._set_tiling(t, cost)
                scored.append((fresh.inspect()["predicted_cycles"], i, False))
            # the best few again with their last tile halved (the winner is often one
            # of them split: the drain of the last tile shrinks)
            for _, i, _ in sorted(scored)[:self.RERANK_SPLIT]:
                fresh._set_tiling(candidates[i], cost)
                fresh.split_last = True
                if fresh._last_tile_splits():
                    scored.append((fresh.inspect()["predicted_cycles"], i, True))
                fresh.split_last = False
            _, i, split = min(scored)
            best = (candidates[i], split)
            runners = [candidates[j] for j in dict.fromkeys(j for _, j, _ in sorted(scored))
                       if j != i]
            if key is not None:
                _RERANKED[key], _RUNNERS[key] = best, runners
        else:
            best, runners = _RERANKED[key], _RUNNERS[key]
        self._runners = runners
        self._rerank_key = key
        self._set_tiling(best[0], cost)
        self.split_last = best[1]

    #: int32 results (no requantize on VTA), COMPUTE_OVERLAP: how many of
    #: :meth:`_rerank`'s next best tilings are planned again with every choice made after
    #: the re-ranking searched for them (:meth:`_try_runners_up`).
    RUNNERS_UP = 1

    #: :meth:`_try_runners_up` takes a runner-up predicted at most this fraction of the
    #: re-ranked plan. Verilator: keyword spotting's depthwise layers, predicted -1.3%
    #: each, measured 42,678 -> 42,438 cycles for the model; visual wake words' 8-channel
    #: depthwise layer at 48x48, predicted -0.04%, made the model 62 cycles slower.
    RUNNER_GAIN = 0.99

    _runners: list = []
    _rerank_key = None

    #: requant2 on COMPUTE_OVERLAP (the lane runs REQ): how many runners-up
    #: :meth:`_try_runners_up` plans for a REQ layer (:meth:`_req_runners_fit`).
    REQ_RUNNERS_UP = 2

    def _req_runners_fit(self) -> bool:
        """:meth:`_try_runners_up` for a REQ layer (``requant2``, the lane runs REQ on
        COMPUTE_OVERLAP): the re-ranking scores its tilings before the REQ choices
        (resident weights, bank rows, lane zero, serial order) that change the ranking."""
        from ...hw.compute_lane import lane_req
        p, cfg = self.problem, self.config
        return (bool(self.REQ_RUNNERS_UP) and cfg.compute_overlap and lane_req(cfg)
                and p.req_pass and not p.int32_out)

    #: :attr:`RUNNER_GAIN` for a REQ layer (:meth:`_req_runners_fit`).
    REQ_RUNNER_GAIN = 0.99

    def _try_runners_up(self, cost, border, shared_weight, count=None, pad_value=None,
                        gain=None):
        """Plan each of :attr:`RUNNERS_UP` next best re-ranked tilings with its own
        choices (a plan of that tiling, its flags and plane slots searched as this one's
        were) and take the one the event model predicts fastest if at most
        :attr:`RUNNER_GAIN` of this plan. The re-ranking scores the tilings without those
        choices, which change the ranking (keyword spotting's depthwise layers: th 9 with
        them beats th 13). A REQ layer (:meth:`_req_runners_fit`) plans ``count`` of them
        with its ``pad_value``, the border rows as this plan has them (``border_choice``),
        and takes one at most ``gain`` of this plan. Memoized by the plan's state as it
        stands (:func:`_state`) and the arguments."""
        count = self.RUNNERS_UP if count is None else count
        state = _state(self, "_rerank_key")
        key = None if state is None else (state, self._rerank_key, cost, border, shared_weight,
                                          count, pad_value, gain)
        if key is not None and key in _RUNNER_PICK:     # decided for this plan before
            if _RUNNER_PICK[key] is not None:
                self._adopt(_RUNNER_PICK[key])
            return
        gain = self.RUNNER_GAIN if gain is None else gain
        best, got = gain * self.inspect()["predicted_cycles"], None
        for tiling in self._runners[:count]:
            try:
                q = type(self)(self.config, self.x_shape, self.w_shape, self.stride,
                               self.padding, groups=self.groups, epilogue=self.epilogue,
                               tiling=tiling, cost=cost, shared_weight=shared_weight,
                               border=border, pad_value=pad_value,
                               border_choice=None if not self.problem.req_pass else
                               (self.rows_on_chip, self.border_mode, self.problem.own_rows))
            except TilingError:
                continue
            c = q.inspect()["predicted_cycles"]
            if c <= best:
                best, got = c, q
        if key is not None:
            _RUNNER_PICK[key] = got
        if got is not None:
            self._adopt(got)

    def _adopt(self, plan):
        """Become ``plan`` (a plan of the same layer): its tiling and choices, its
        containers copied, its program lowered again on demand."""
        self.__dict__.clear()
        self.__dict__.update({k: (copy.copy(v) if isinstance(v, (dict, list, set)) else v)
                              for k, v in plan.__dict__.items()})
        self._program = None

    #: :meth:`_rerank`: how many of the best candidates are also scored with
    #: :attr:`split_last`.
    RERANK_SPLIT = 3

    #: Whether the last output tile is emitted as two, its rows halved (:meth:`tiles`): an
    #: int32 result's kernel ends with the last tile's plane stores and shifts, one after
    #: another, so a smaller last tile ends it sooner. Chosen by the event model for the
    #: re-ranked winner (a depthwise layer gains, a 1x1 one does not).
    split_last = False

    #: A group whose tile spans whole rows of the input without padding loads its
    #: input blocks with one LOAD (each block's rows are one run, the blocks an image
    #: apart) instead of one per block. Slower on some layers (ResNet-50 on
    #: ``default``, 08a2634), so per layer where the event model predicts it faster
    #: (:meth:`_try_flag`), tried for int32 results only (the MLPerf Tiny layers; no
    #: prediction more for ResNet's).
    row_loads = False

    #: Resident weights: a group's weight LOAD (each output block's, by its first tile)
    #: comes before the group's wait for its inp slot (the compute module's token that
    #: the slot's previous group is done), not after it: the weights are never
    #: overwritten, so they load as soon as the load module is free, and the next
    #: block's GEMMs do not wait for a slot the weights do not use. :meth:`_try_flag`
    #: decides (the event model).
    weights_ahead = False

    #: Whether the tiles of the first output position (rows and columns) are emitted
    #: one output block each (:meth:`tiles`): with resident weights (each block's
    #: loaded by its first tile) the first GEMMs then wait for one block's weights, not
    #: ``tco``, and the first stores start sooner (a store-bound 1x1 layer).
    #: :meth:`_try_split_first` decides (the event model).
    split_first = False

    def _try_split_first(self, cost):
        """:attr:`split_first`, with the plane slots searched again for it
        (:meth:`_try_plane_banks`, COMPUTE_OVERLAP); kept when the event model predicts
        it faster."""
        def change():
            self.split_first, self._program = True, None
            if self.plane_banks is not None:
                self.plane_banks, self.plane_skew, self.alu_reset = None, 1, False
                self._try_plane_banks(cost)
            return True

        self._keep_if_faster(change)

    #: The first tile's rows in two tiles, the first of this many rows (:meth:`tiles`):
    #: an int32 result's stores start after the first tile's GEMMs and plane shifts, so
    #: a smaller first tile starts the store (the bound of a depthwise layer) sooner.
    #: :meth:`_try_head_rows` decides (the event model).
    head_rows = None

    #: :meth:`_try_head_rows`' first pieces, as fractions of the first tile's rows.
    HEAD_FRACTIONS = (2, 3)

    def _head_rows_apply(self) -> bool:
        """Whether :attr:`head_rows` may change this plan's tiles (a first tile of 2+
        rows)."""
        return next(iter(self.tiles()))[5] > 1

    def _try_head_rows(self) -> int:
        """:attr:`head_rows`: the first tile's rows over each of :attr:`HEAD_FRACTIONS`,
        the one the event model predicts fastest, if faster than the plan as it stands."""
        th = next(iter(self.tiles()))[5]
        return self._try([dict(head_rows=r) for r in
                          dict.fromkeys(max(1, th // k) for k in self.HEAD_FRACTIONS)])

    def _last_tile_splits(self) -> bool:
        """Whether :attr:`split_last` changes this tiling's tiles (a last tile of 2+ rows)."""
        tiles = list(self._uniform_tiles())
        return tiles[-1][5] > 1

    def _check_tiling(self):
        p, t, cfg = self.problem, self.tiling, self.config
        if t.nthreads not in (1, 2):
            raise TilingError(f"{p.describe}: nthreads={t.nthreads}; must be 1 or 2")
        fp = t.footprint(p, cfg)
        nacc = self.acc_slot_count()
        if self.plane_banks and fp["acc"] > self.plane_slot_rows():
            raise TilingError(f"{p.describe}: tiling {t} needs {fp['acc']} acc SRAM elements "
                              f"per buffer; plane_banks {self.plane_banks} give each "
                              f"{self.plane_slot_rows()}")
        if t.resident:
            if p.shared_wgt or t.tci != p.ib:
                raise TilingError(f"{p.describe}: tiling {t} keeps the weights resident, which "
                                  f"needs one reduction chunk (tci={p.ib}) and per-block weights")
            if fp["wgt_resident"] > cfg.wgt_depth:
                raise TilingError(f"{p.describe}: tiling {t} keeps all {fp['wgt_resident']} "
                                  f"weight elements resident; the wgt buffer of config "
                                  f"{cfg.name} holds {cfg.wgt_depth}")
        nin = self.in_slots or t.nthreads
        checks = [("inp", cfg.inp_depth, nin), ("wgt", cfg.wgt_depth, nin),
                  ("acc", cfg.acc_depth - shared_acc(p, cfg), nacc)]
        for mem, depth, n in checks:
            if mem == "wgt" and t.resident:     # checked whole above
                continue
            if fp[mem] * n > depth:
                raise TilingError(f"{p.describe}: tiling {t} needs {fp[mem]} {mem} SRAM elements "
                                  f"per buffer x {n} buffers; the {mem} buffer of config "
                                  f"{cfg.name} holds {depth}")
        if min(t.tn, t.tco, t.th, t.tw, t.tci) < 1:
            raise TilingError(f"{p.describe}: tiling {t} has a tile size below 1")

    # ---------------------------------------------------------------- host side

    #: :attr:`merged_rows` may apply (a subclass that packs its rows otherwise sets False).
    MERGE_ROWS = True

    @property
    def merged_rows(self) -> tuple:
        """``requant2``: the per-channel row operands (of ``"bias"``, ``"requant"``,
        ``"border"``, in that order) that the kernel loads at the top of the acc SRAM,
        shared by every slot (:func:`.tiling.shared_acc`), when there are two or more:
        they are then one operand ``"rows"`` (their concatenation: the regions are
        adjacent, in that order) loaded by one LOAD ACC instead of one each. Each compute
        LOAD waits behind the load module's bursts in flight (hw/top.py's read priority):
        at a chain boundary the next layer's rows load while the load module streams its
        first inputs. Verilator, default+requant2: image classification 58,380 -> 58,096
        cycles, keyword spotting 34,150 -> 34,119, visual wake words 142,839 -> 142,405,
        anomaly detection 35,112 (the same). Base-ISA kernels are unchanged."""
        if (not self.MERGE_ROWS or not self.config.has_extension("requant2")
                or not shared_acc(self.problem, self.config)):
            return ()
        loaded = (("bias", self.epilogue.bias_tile), ("requant", bool(self.epilogue.rows)),
                  ("border", bool(self.border_cases) and not self.onchip_border
                   and not self.direct_border))
        names = tuple(n for n, on in loaded if on)
        return names if len(names) > 1 else ()

    @property
    def operands(self) -> dict:
        """The plan's operands (name -> :class:`~.operands.Operand`), with the
        :attr:`merged_rows` as one ``"rows"`` operand in the place of the first."""
        ops = self._operands
        merged = self.merged_rows
        if not merged or not all(n in ops for n in merged):
            return ops
        out = {}
        for name, op in ops.items():
            if name == merged[0]:
                n = sum(int(np.prod(ops[m].shape[:-2])) for m in merged)
                out["rows"] = Operand("rows", (n,) + op.shape[-2:], np.int32)
            elif name not in merged:
                out[name] = op
        return out

    @operands.setter
    def operands(self, value) -> None:
        self._operands = value

    def pack(self, x, w, bias=None, residual=None, requant=None, border=None) -> dict:
        """Pack framework-layout operands (NCHW int8, OIHW int8, (O,) int32, NCHW
        int8/int32 residual, (rows, O) int32 requantize rows of
        :meth:`.epilogue.Requant.make`, (N, O, OH, OW) int32 border correction) into this
        plan's DRAM operands."""
        cfg = self.config
        x, w = np.asarray(x), np.asarray(w)
        if x.shape != self.x_shape or w.shape != self.w_shape:
            raise ValueError(f"{self.name}: got x{list(x.shape)} w{list(w.shape)}, the plan is "
                             f"for x{list(self.x_shape)} w{list(self.w_shape)}")
        if self.problem.shared_wgt:
            wp = self._shared_tile(w)
        elif self.problem.diag:
            wp = pack_block_diagonal_weight(w.astype(np.int8), cfg, self.groups)
        else:
            wp = pack_conv_weight(w.astype(np.int8), cfg)
        out = {"data": pack_activation(x.astype(np.int8), cfg), "weight": wp}
        if (bias is not None) != self.epilogue.bias:
            raise ValueError(f"{self.name}: bias {'given' if bias is not None else 'missing'}, "
                             f"but the plan was made with bias={self.epilogue.bias}")
        if self.epilogue.bias_tile:
            out["bias"] = pack_bias(self.epilogue.pack_bias_values(bias, self.w_shape[0]), cfg)
        if (requant is not None) != bool(self.epilogue.rows):
            raise ValueError(f"{self.name}: requantize rows "
                             f"{'given' if requant is not None else 'missing'}, but the plan "
                             f"was made with requant={self.epilogue.requant}")
        if self.epilogue.rows:
            out["requant"] = self.epilogue.pack_rows(requant, self.w_shape[0], cfg)
        if (border is not None) != bool(self.border_cases):
            raise ValueError(f"{self.name}: border correction "
                             f"{'given' if border is not None else 'missing'}, but the plan "
                             f"has {len(self.border_cases)} border cases")
        if self.border_cases:
            out["border"] = self._pack_border(border)
            if self.folded_border:    # each row: bias + its correction (wrapping)
                b = self.epilogue.pack_bias_values(bias, self.w_shape[0]).astype(np.int64)
                out["border"] = np.stack([pack_bias(wrap32(b + v), cfg)
                                          for v in self._border_values(border)])
        if self.pad_value is not None:     # onchip_border's input vector
            out["border_zx"] = np.full((1, cfg.batch, cfg.block), self.pad_value, np.int8)
        if self.epilogue.residual:
            r = np.asarray(residual)
            want = (self.x_shape[0], self.w_shape[0], self.oh, self.ow)
            if r.shape != want:
                raise ValueError(f"{self.name}: residual has shape {r.shape}, expected {want}")
            if self.epilogue.residual == "int8" and r.dtype != np.int8:
                raise ValueError(f"{self.name}: residual is {r.dtype}; the plan adds an int8 "
                                 "residual (plan with residual='int32' for wider ones)")
            out["residual"] = pack_activation(r.astype(self.epilogue.residual), cfg)
        if self.epilogue.residual == "int8":
            scale = 1 << self.epilogue.add.eb if self.epilogue.add else 1
            out["identity"] = (np.eye(cfg.block, dtype=np.int8) * np.int8(scale)).reshape(
                1, 1, 1, 1, cfg.block, cfg.block)
        merged = self.merged_rows
        if merged:      # one operand: the rows in their acc SRAM order (merged_rows)
            out["rows"] = np.ascontiguousarray(np.concatenate(
                [out.pop(n).reshape(-1, cfg.batch, cfg.block) for n in merged]))
        return out

    def _border_values(self, corr) -> list:
        """The int64 (O,) correction of each rectangle of :attr:`border_cases`."""
        corr = np.asarray(corr)
        return [corr[0, :, r0, c0].astype(np.int64) for r0, r1, c0, c1 in self.border_cases]

    def _pack_border(self, corr) -> np.ndarray:
        """(cases, O/c, b, c) from the int32 (N, O, OH, OW) border correction (the value
        of each rectangle of :attr:`border_cases`, which it must hold throughout)."""
        corr = np.asarray(corr)
        want = (self.x_shape[0], self.w_shape[0], self.oh, self.ow)
        if corr.shape != want:
            raise ValueError(f"{self.name}: border correction has shape {corr.shape}, "
                             f"expected {want}")
        rows = []
        for r0, r1, c0, c1 in self.border_cases:
            v = corr[0, :, r0, c0]
            if not (corr[:, :, r0:r1, c0:c1] == v[None, :, None, None]).all():
                raise ValueError(f"{self.name}: the border correction is not constant over "
                                 f"output rows {r0}..{r1 - 1}, columns {c0}..{c1 - 1}")
            rows.append(pack_bias(v, self.config))
        covered = np.zeros(want[2:], bool)
        for r0, r1, c0, c1 in self.border_cases:
            covered[r0:r1, c0:c1] = True
        if (corr[:, :, ~covered] != 0).any():
            raise ValueError(f"{self.name}: the border correction is non-zero away from "
                             "the border")
        return np.stack(rows)

    def _shared_tile(self, w):
        """The one weight tile of a shared-weight plan: every packed tile of ``w`` must
        equal it (an all-equal-taps depthwise kernel, e.g. the ones of a window sum)."""
        cfg = self.config
        full = (pack_block_diagonal_weight(w.astype(np.int8), cfg, self.groups)
                if self.problem.diag else pack_conv_weight(w.astype(np.int8), cfg))
        tile = full[0, 0, 0, 0]
        # lanes of the channel padding of the last block read and write nothing real
        real = self.w_shape[0] - (full.shape[0] - 1) * cfg.block
        if not ((full[:-1] == tile).all() and
                (full[-1][..., :real, :real] == tile[:real, :real]).all()):
            raise ValueError(f"{self.name}: a shared-weight plan needs one weight tile for "
                             "every block and kernel position; this weight has several")
        return np.ascontiguousarray(tile.reshape(1, 1, 1, 1, *tile.shape))

    def unpack(self, out) -> np.ndarray:
        """Packed ``out`` -> NCHW int8 (or int32 for four byte planes)."""
        n, o = self.x_shape[0], self.w_shape[0]
        planes = [unpack_activation(pl, self.config, n, o) for pl in out]
        return planes[0] if len(planes) == 1 else assemble_planes(planes)

    # --------------------------------------------------------------- lowering

    def tiles(self):
        """Output tiles in emission order: (n0, tn, co0, tco, h0, th, w0, tw); with
        :attr:`head_rows`, the first tile's rows in two tiles; with :attr:`split_last`,
        the last tile's rows in two tiles."""
        tiles = list(self._uniform_tiles())
        if self.split_first and tiles[0][3] > 1:
            # the tiles of the first output position, one output block each
            k = next((i for i, t in enumerate(tiles) if t[4:] != tiles[0][4:]), len(tiles))
            tiles[:k] = [t[:2] + (co, 1) + t[4:] for t in tiles[:k]
                         for co in range(t[2], t[2] + t[3])]
        if self.head_rows and tiles[0][5] > self.head_rows:
            # the tiles of the first output position, each in two: its first rows, then
            # the rest (the first GEMMs wait for fewer input rows)
            k = next((i for i, t in enumerate(tiles) if t[4:] != tiles[0][4:]), len(tiles))
            r = self.head_rows
            tiles[:k] = ([t[:5] + (r,) + t[6:] for t in tiles[:k]]
                         + [t[:4] + (t[4] + r, t[5] - r) + t[6:] for t in tiles[:k]])
        if self.split_last and tiles[-1][5] > 1:
            n0, tn, co0, tco, h0, th, w0, tw = tiles.pop()
            first = th - th // 2
            tiles += [(n0, tn, co0, tco, h0, first, w0, tw),
                      (n0, tn, co0, tco, h0 + first, th // 2, w0, tw)]
        yield from tiles

    def _uniform_tiles(self):
        """:meth:`tiles` of the tiling's sizes (edge tiles smaller)."""
        p, t = self.problem, self.tiling
        ax = lambda total, size: [(s, min(size, total - s)) for s in range(0, total, size)]
        ns = ax(p.nb, t.tn)
        cos = [(g * p.gob + s, n) for g in range(p.n_groups) for s, n in ax(p.gob, t.tco)]
        hs, ws = ax(p.oh, t.th), ax(p.ow, t.tw)
        if t.order == "co_outer":
            for n in ns:
                for co in cos:
                    for hh in hs:
                        for ww in ws:
                            yield n + co + hh + ww
        else:
            for n in ns:
                for hh in hs:
                    for ww in ws:
                        for co in cos:
                            yield n + co + hh + ww

    def _data_key(self, tile, c0, tci) -> tuple:
        """What a group of ``tile`` and reduction chunk ``c0`` loads into its inp slot:
        ``(n0, tn, first input block, blocks, h0, th, w0, tw)``; the tile's own blocks
        for a block-diagonal problem, else chunk ``c0`` of its group's reduction range."""
        p = self.problem
        n0, tn, co0, tco, h0, th, w0, tw = tile
        in0, nin = (co0, tco) if p.diag else ((co0 // p.gob) * p.ib + c0, tci)
        return (n0, tn, in0, nin, h0, th, w0, tw)

    def _window(self, o0, osize, stride, k, pad_before, size):
        """Input range of output range [o0, o0+osize): (start, count, pad_before, pad_after)."""
        r0 = o0 * stride - pad_before
        r1 = (o0 + osize - 1) * stride - pad_before + k
        return max(r0, 0), min(r1, size) - max(r0, 0), max(0, -r0), max(0, r1 - size), r1 - r0

    def emit(self, builder, slots: dict) -> None:
        _ConvEmission(self, builder, slots).run()

    def _gemm_kernels(self, base, tn, tco, th, tw, tci, hi, wi, ydata, xdata,
                      uses=1, taps_h=None, parts=1) -> tuple:
        """:meth:`_make_gemm_kernels`, remembered in :data:`GEMM_KERNELS`."""
        key = (type(self), self.problem, self.config, self.tiling.nthreads, self.in_slots,
               self.acc_slot_count(), base, tn, tco, th, tw, tci, hi, wi, ydata, xdata, uses,
               taps_h, parts)
        kernels = GEMM_KERNELS.get(key)
        if kernels is None:
            kernels = self._make_gemm_kernels(base, tn, tco, th, tw, tci, hi, wi, ydata,
                                              xdata, uses, taps_h, parts)
            if len(GEMM_KERNELS) >= _GEMM_KERNELS_SIZE:
                GEMM_KERNELS.clear()
            GEMM_KERNELS[key] = kernels
        return kernels

    def _make_gemm_kernels(self, base, tn, tco, th, tw, tci, hi, wi, ydata, xdata,
                           uses=1, taps_h=None, parts=1) -> tuple:
        """The GEMM kernels of one group of a tile whose input window holds data in rows
        ``ydata = (first, count)`` and columns ``xdata`` (the rest is the load's zero
        padding). Taps that only read padding multiply zeros, so output rows and columns
        near the border run the taps inside the data only: one kernel per rectangle of
        outputs with the same taps (the whole tile away from the border). Falls back to
        splitting rows only, then to one kernel, when a rectangle would break the
        accumulate-hazard rule. A whole-image tile whose kernel serves ``uses`` groups
        may instead run one listed kernel (:meth:`_listed_kernel`). ``parts`` > 1: the
        longest run of rows in that many kernels of three rows or more (fewer where the
        run is short; none under six rows), so that work can go between them
        (:meth:`_ConvEmission.body_split`)."""
        p, cfg = self.problem, self.config
        (sh, sw), kw_stride = p.stride, 0 if p.shared_wgt else 1
        dims = gemm_dims(p, tn, tco, th, tw, tci, hi, wi)
        rows = _tap_segments(th, sh, p.kh, *ydata)
        if taps_h is not None:
            rows = [(r0, r1, max(a0, taps_h[0]), min(a1, taps_h[1]))
                    for r0, r1, a0, a1 in rows if max(a0, taps_h[0]) < min(a1, taps_h[1])]
        cols = _tap_segments(tw, sw, p.kw, *xdata)
        if parts > 1 and rows and max(r1 - r0 for r0, r1, _, _ in rows) >= 6:
            k = max(range(len(rows)), key=lambda i: rows[i][1] - rows[i][0])
            r0, r1, a0, a1 = rows[k]
            n = min(parts, (r1 - r0) // 3)
            cut = [r0 + (r1 - r0) * j // n for j in range(n + 1)]
            rows = (rows[:k] + [(cut[j], cut[j + 1], a0, a1) for j in range(n)]
                    + rows[k + 1:])
        rects = self._rect_kernels(base, dims, rows, cols, th, tw, wi, kw_stride, taps_h)
        if (len(rects) > 1 and th >= p.oh and tw >= p.ow and not p.int32_out
                and parts == 1):
            def worth(size):
                """The instructions a list of ``size`` micro-ops saves over the groups
                that use it cost more than loading its extra micro-ops (once per slot)."""
                return ((size - sum(k.size for k in rects)) * cfg.uop_elem_bytes
                        / cfg.bus_bytes < (len(rects) - 1) * RTL_COST.insn_cycles * uses)
            listed = self._listed_kernel(base, dims, rows, cols, tw, wi, kw_stride, worth)
            if listed is not None:
                return (listed,)
        return rects

    def _rect_kernels(self, base, dims, rows, cols, th, tw, wi, kw_stride,
                      taps_h=None) -> tuple:
        """One GEMM kernel per rectangle of outputs with equal taps (see
        :meth:`_gemm_kernels`)."""
        p, cfg = self.problem, self.config
        (sh, sw) = p.stride
        full_r, full_c = [(0, th, *(taps_h or (0, p.kh)))], [(0, tw, 0, p.kw)]

        def fold(r0, r1, a0, a1, c0, c1, b0, b1):
            ext = {"oh": r1 - r0, "ow": c1 - c0, "kh": a1 - a0, "kw": b1 - b0}
            return fold_loops(
                [Dim(d.name, ext.get(d.name, d.extent), d.dst, d.src, d.wgt, d.reduce)
                 for d in dims],
                (base[0] + r0 * tw + c0,
                 base[1] + (r0 * sh + a0) * wi + c0 * sw + b0,
                 base[2] + (a0 * p.kw + b0) * kw_stride))

        for rs in (rows, full_r):
            # each run of rows split at the columns' tap changes where that is
            # hazard-free (a corner output alone breaks the rule), else whole rows
            folds = []
            for r in rs:
                split = [fold(*r, *c) for c in cols]
                if len(split) > 1 and not all(f.hazard_free for f in split):
                    split = [fold(*r, *full_c[0])]
                folds += split
            if len(folds) == 1 or all(f.hazard_free for f in folds):
                break
        for f in folds:
            if f.n_uops > cfg.uop_depth:
                raise TilingError(f"{p.describe}: a GEMM kernel of a {th}x{tw} tile needs "
                                  f"{f.n_uops} micro-ops; the uop buffer holds {cfg.uop_depth}")
        return tuple(UopKernel.gemm(f.uops, f.loops, check_hazard=f.hazard_free)
                     for f in folds)

    def _listed_kernel(self, base, dims, rows, cols, tw, wi, kw_stride, worth=None):
        """One GEMM kernel for a tile that is the whole image (a deep layer's small
        feature map, where one kernel per rectangle of equal taps would be up to nine
        instructions per group): the (output, tap) pairs inside the data listed as
        micro-ops tap by tap, the batch, output-block and input-block dimensions as its
        loops. None when the list exceeds the tiling's micro-op budget, a third such
        dimension would need enumerating, or it breaks the accumulate-hazard rule. Int8
        results only: an int32 result's five acc slots each load their own kernel, and
        the list (every output pixel one micro-op) loads many more micro-ops than the
        rectangles' folded loops (measured: image_classification 1% slower). Also None
        when ``worth(micro-ops)`` says the list does not pay (checked before it is built)."""
        p, t, cfg = self.problem, self.tiling, self.config
        sh, sw = p.stride
        pairs = []
        for a in range(p.kh):
            for b in range(p.kw):
                rs = [r for r0, r1, a0, a1 in rows if a0 <= a < a1 for r in range(r0, r1)]
                cs = [c for c0, c1, b0, b1 in cols if b0 <= b < b1 for c in range(c0, c1)]
                pairs += [(base[0] + r * tw + c, base[1] + (r * sh + a) * wi + c * sw + b,
                           base[2] + (a * p.kw + b) * kw_stride) for r in rs for c in cs]
        loops = [d for d in dims if d.name not in ("oh", "ow", "kh", "kw") and d.extent > 1]
        budget = uop_budget(cfg, self.in_slots or t.nthreads,
                            self.acc_slot_count())
        if len(loops) > 2 or len(pairs) > budget or (worth and not worth(len(pairs))):
            return None
        try:
            return UopKernel.gemm(pairs, [(d.extent, d.dst, d.src, d.wgt) for d in loops])
        except KernelError:
            return None

    @staticmethod
    def _tile_part(rect, tn, tco, h0, th, w0, tw):
        """``(acc offset, dims)`` of the part of the output rectangle ``rect`` (rows
        ``r0..r1``, columns ``c0..c1``) inside the tile, dims ``n``, ``o``, ``r``, ``c``
        with dst and src strides; None when the tile does not touch it."""
        r0, r1, c0, c1 = rect
        rr0, rr1 = max(r0, h0), min(r1, h0 + th)
        cc0, cc1 = max(c0, w0), min(c1, w0 + tw)
        if rr0 >= rr1 or cc0 >= cc1:
            return None
        dims = [Dim("n", tn, tco * th * tw, 0), Dim("o", tco, th * tw, 1),
                Dim("r", rr1 - rr0, tw, 0), Dim("c", cc1 - cc0, 1, 0)]
        return (rr0 - h0) * tw + cc0 - w0, dims

    def _req_parts(self, acc_base, bias_base, border_base, step, tn, tco, h0, th, w0, tw):
        """:attr:`folded_border`: ``[(acc base, src base, dims)]``, the REQ passes of one
        tile, one per rectangle of :attr:`border_cells` it touches (src: the rectangle's
        row, row k at ``border_base + k * step``, or the bias row; dims as
        :meth:`_tile_part`)."""
        parts = []
        for *rect, k in self.border_cells:
            part = self._tile_part(rect, tn, tco, h0, th, w0, tw)
            if part is not None:
                parts.append((acc_base + part[0],
                              bias_base if k is None else border_base + k * step, part[1]))
        return parts

    def _emit_border(self, builder, acc_base, border_base, step, tn, tco, h0, th, w0, tw):
        """ALU ADD of each border rectangle's per-channel row (row k at ``border_base + k
        * step``) over the tile's part of it."""
        for k, rect in enumerate(self.border_cases):
            part = self._tile_part(rect, tn, tco, h0, th, w0, tw)
            if part is None:
                continue
            f = fold_loops(part[1], (acc_base + part[0], border_base + k * step, 0))
            builder.push_alu(UopKernel.alu(AluOp.ADD, [u[:2] for u in f.uops],
                                           [lp[:3] for lp in f.loops]))

    def _move(self, builder, kind, buf, sram, base, n0, tn, co0, tco, h0, th, w0, tw):
        """Store an acc tile to (or LOAD ACC / LOAD INP it from) an (N/b, O/c, OH, OW)
        tensor; the SRAM side is laid out [n][o][oh][ow] from ``sram``."""
        p = self.problem
        hw = p.oh * p.ow

        def one(sram_base, off, x, y, stride):
            if kind == "store":
                builder.store_2d(sram_base, buf, base + off, x, y, stride)
            else:
                mem = MemType.INP if kind == "load_inp" else MemType.ACC
                builder.load_2d(mem, sram_base, buf, base + off, x, y, stride)

        if th >= p.oh and tw >= p.ow:       # the tile is the whole image
            one(sram, (n0 * p.ob + co0) * hw, tco * hw, tn, p.ob * hw)
            return
        if tw == p.ow and kind == "store":   # whole rows: th * tw elements per channel block
            for nl in range(tn):
                one(sram + nl * tco * th * tw, ((n0 + nl) * p.ob + co0) * hw + h0 * p.ow,
                    th * tw, tco, hw)
            return
        for nl in range(tn):
            for ol in range(tco):
                off = ((n0 + nl) * p.ob + co0 + ol) * hw + h0 * p.ow + w0
                one(sram + (nl * tco + ol) * th * tw, off, tw, th, p.ow)


class _ConvEmission:
    """One emission of a :class:`Conv2dPlan`'s program: the SRAM slots, what each holds,
    the token pipeline, and the steps of a tile (:meth:`compute`: its groups' loads and
    GEMMs, the border correction and the epilogue; :meth:`store`: a plane), scheduled
    by :meth:`run`."""

    def __init__(self, plan, builder, slots):
        self.plan, self.builder, self.slots = plan, builder, slots
        p, t, cfg, epi = plan.problem, plan.tiling, plan.config, plan.epilogue
        self.p, self.t, self.epi = p, t, epi
        self.nth = nth = t.nthreads
        self.nin = nin = plan.in_slots or nth        # inp/wgt slots
        self.nacc = nacc = plan.acc_slot_count()
        self.shared = shared = shared_acc(p, cfg)
        self.inp_slot, self.wgt_slot, self.acc_slot = (cfg.inp_depth // nin,
                                                       cfg.wgt_depth // nin,
                                                       plan.plane_slot_rows() if plan.plane_banks
                                                       else (cfg.acc_depth // 2 - shared)
                                                       // (nacc // 2) if plan.bank_rows
                                                       else (cfg.acc_depth - shared) // nacc)
        self.nborder = len(plan.border_cases)
        if shared:   # [bias][requantize rows][border rows] x ob at the top of the acc SRAM
            self.region = cfg.acc_depth - shared
            self.rows_region = self.region + p.ob * int(epi.bias_tile)
            self.border_region = self.rows_region + p.row_blocks * epi.rows
        self.kk = p.kh * p.kw
        self.chunks = [(c0, min(t.tci, p.ib - c0)) for c0 in range(0, p.ib, t.tci)]
        self.tiles = tiles = list(plan.tiles())
        self.planes = epi.planes
        self.res_group = epi.residual == "int8"
        self.resident = t.resident
        self.epochs = None
        if self.resident:   # a group loads into the next inp slot only when its data changes
            keys = [plan._data_key(tile, c0, tci) for tile in tiles for c0, tci in self.chunks]
            self.epochs = list(itertools.accumulate(
                (int(k != prev) for k, prev in zip(keys[1:], keys)), initial=0))
        self.w_loaded = set()         # resident weights: output blocks loaded so far
        self.pipe = Pipeline(builder, nin, plan.out_slots or nth,
                             len(tiles) * (len(self.chunks) + self.res_group),
                             len(tiles) * self.planes, epochs=self.epochs)
        self.out_plane = p.nb * p.ob * p.oh * p.ow
        self.inp_has, self.wgt_has, self.bias_has = [None] * nin, [None] * nin, [None] * nacc
        self.clipped = [0] * nacc   # acc entries from a slot's start this layer clipped
        self.kernels = {}
        self.g = 0
        self.req_loaded = [None]      # requant2: the block REQ's registers hold (Epilogue.emit)
        # requant2: border rows computed on chip (Conv2dPlan.onchip_border); the first
        # output block of each tile whose rows are done
        self.onchip = plan.onchip_border
        self.rows_done = set()
        self.uniform_loaded = False   # requant2's uniform rows are in the acc SRAM
        self._bases = {}              # row bases of the tiles started (start -> finish_tile)
        self._between = None          # body_split: emitted amid the next GEMM kernels
        self._slot_bases = {}         # slot_base by slot
        self._dims = {}               # out_dims and bias_dims by tile shape

    # ------------------------------------------------------------------ schedule

    def run(self) -> None:
        """The shared per-channel rows, every tile's groups and planes, the fence."""
        builder, epi, nacc, planes, pipe = (self.builder, self.epi, self.nacc, self.planes,
                                            self.pipe)
        overlap = ((nacc == self.nth or self.plan.out_slots) and nacc > 1 and planes == 1
                   and self.plan.config.compute_overlap and not self.plan.serial_order)
        # requant2 with lane_zero: the shared rows' LOAD ACCs (and their bank copy) after
        # the first tile's zeroing ALU passes instead of first. At a chain boundary
        # (runtime/chain.py) only the leading LOAD UOP / LOAD ACC / resets run before the
        # compute NOP that lets the next layer's first inputs load: the rows then load
        # beside those inputs. Verilator (default+requant2, whole models): keyword
        # spotting 36,293 -> 36,198, image classification 58,693 -> 58,477, visual wake
        # words 143,617 -> 143,536, anomaly detection unchanged. Not for depthwise layers
        # with border rows (keyword spotting +264 with them), nor after both tiles'
        # zeroing (+701 on its 1x1 layers: a LOAD ACC waits for the ALU lane to drain its
        # bank, hw/compute.py, which the event model misses: it predicted -396).
        rows_late = (overlap and self.add_order() is None and self.plan.lane_zero
                     and isinstance(epi.requant, Requant2)
                     and not (self.nborder and self.p.diag))
        if not rows_late:
            self.load_shared_rows()
        if overlap and self.add_order() is not None:
            self.run_add(self.add_order())
        elif overlap:
            # COMPUTE_OVERLAP (the compute module's ALU lane, banked by the acc index's
            # top bit): the next tile's start (its rows, reset and MIN init) before this
            # tile's epilogue, so that the epilogue's ALU passes run beside the next
            # tile's GEMMs (which wait only for that start)
            n = len(self.tiles)
            beside = self.plan.post_beside and self.plain_epilogue()
            # lane_zero: a tile's zeroing two tiles ahead, after the epilogue in its bank
            zero = self.plan.lane_zero
            for ti in range(min(n, 2) if zero else 1):
                pipe.acquire_out(ti)
                if zero:
                    epi.emit_zero(builder, self.acc_at(ti), self.out_dims(ti))
                if rows_late and ti == 0:
                    self.load_shared_rows()
            self.start(0)
            self.body(0)
            for ti in range(n):
                if ti + 1 < n:
                    if not zero:
                        pipe.acquire_out(ti + 1)
                    self.start(ti + 1)
                if beside and ti + 1 < n:
                    # the epilogue's passes between tile ti + 1's groups
                    self._bases.pop(ti)
                    a = ti % nacc
                    self.clipped[a] = max(self.clipped[a], self.out_size(ti))
                    self.post_beside(ti, self.acc_at(ti), self.chunks, 0)
                    continue
                self.finish_tile(ti)
                self.release_store(ti)
                if zero and ti + 2 < n:
                    pipe.acquire_out(ti + 2)
                    epi.emit_zero(builder, self.acc_at(ti + 2), self.out_dims(ti + 2))
                if ti + 1 < n:
                    self.body(ti + 1)
        elif nacc == self.nth and not self.plan.plane_banks:
            # each tile's planes right after it (int8 results, or one buffer: the shift of
            # plane k waits for the store of plane k - 1)
            for ti in range(len(self.tiles)):
                pipe.acquire_out(ti * planes)
                self.compute(ti)
                for k in range(planes):
                    e = ti * planes + k
                    if k:
                        pipe.acquire_out(e)
                        epi.emit_plane_shift(builder, self.acc_at(ti),
                                             self.out_dims(ti))
                    pipe.release_out(e)
                    pipe.store_begin(e)
                    self.store(ti, k)
                    pipe.store_end(e)
        else:
            # int32 result, double-buffered: plane shifts k tiles behind the GEMMs
            lead = self.plan.alu_reset
            sched = PlanePipeline(builder, len(self.tiles), planes, nacc,
                                  self.plan.plane_skew if self.plan.plane_banks else 1,
                                  lead=lead)

            def act(ti, k):
                sched.acquire((ti, k))
                if k < 0:       # the start of a tile a step ahead (alu_reset)
                    epi.emit_zero(builder, self.acc_at(ti), self.out_dims(ti))
                    return
                if k:
                    epi.emit_plane_shift(builder, self.acc_at(ti), self.out_dims(ti))
                sched.release((ti, k))
                sched.store_begin((ti, k))
                self.store(ti, k)
                sched.store_end((ti, k))

            for step in sched.steps:
                if (step and step[-1][1] == 0 and any(k is None for _, k in step)):   # MID
                    ti = step[-1][0]
                    at = next(n for n, a in enumerate(step) if a[1] is None)
                    for a in step[:at]:
                        act(*a)
                    sched.acquire((ti, 0))
                    self.start(ti)
                    amid = step[at + 1:-1]
                    # MID: the shifts together at the GEMMs' half; SPREAD: spread over them
                    self.body_split(ti, [lambda a=a: act(*a) for a in amid]
                                    if self.plan.plane_skew == SPREAD and amid else
                                    [lambda: [act(*a) for a in amid]])
                    self.finish_tile(ti)
                    sched.release((ti, 0))
                    sched.store_begin((ti, 0))
                    self.store(ti, 0)
                    sched.store_end((ti, 0))
                    continue
                for ti, k in step:
                    if k == 0:
                        sched.acquire((ti, k))
                        self.compute(ti)
                        sched.release((ti, k))
                        sched.store_begin((ti, k))
                        self.store(ti, k)
                        sched.store_end((ti, k))
                    else:
                        act(ti, k)
        kernel_fence(builder)

    def slot_base(self, a) -> int:
        """The first acc row of acc slot ``a`` (:meth:`_slot_base`, computed once)."""
        base = self._slot_bases.get(a)
        if base is None:
            base = self._slot_bases[a] = self._slot_base(a)
        return base

    def _slot_base(self, a) -> int:
        """The first acc row of acc slot ``a``: slots one after another, or with
        :attr:`Conv2dPlan.out_slots` four slots, two per acc bank, alternating banks."""
        if self.plan.out_slots:
            return (a % 2) * (self.plan.config.acc_depth // 2) + (a // 2) * self.acc_slot
        if self.plan.bank_rows:
            return a * (self.plan.config.acc_depth // 2)
        banks = self.plan.plane_banks
        if banks:
            return (banks[a] * (self.plan.config.acc_depth // 2)
                    + banks[:a].count(banks[a]) * self.acc_slot)
        return a * self.acc_slot

    def acc_at(self, ti) -> int:
        """The first acc row of tile ti's slot."""
        return self.slot_base(ti % self.nacc)

    def plain_epilogue(self) -> bool:
        """The tile's epilogue is immediate passes only (:meth:`.Epilogue.stages` ``[0]``:
        a MIN init carries the bias; no requantize rows, border correction, residual
        or add), so :meth:`post_beside` may split it."""
        epi, plan = self.epi, self.plan
        return bool(epi.init and epi.requant is None and epi.add is None
                    and not epi.residual and not plan.border_cases and epi.stages()[0])

    def out_size(self, ti) -> int:
        """Tile ti's accumulators (output vectors)."""
        tn, tco, th, tw = (self.tiles[ti][k] for k in (1, 3, 5, 7))
        return tn * tco * th * tw

    def add_order(self):
        """COMPUTE_OVERLAP with a fused add (:class:`.epilogue.ResidualAdd`): the order of
        :meth:`run_add` (:attr:`Conv2dPlan.add_order`; ``"split"`` needs two groups or
        more), or None for :meth:`run`'s."""
        if not (self.res_group and self.epi.add) or self.resident:
            return None
        return "split" if self.plan.add_order == "split" and len(self.chunks) > 1 else "pre"

    def run_add(self, order) -> None:
        """:meth:`run`'s tiles with COMPUTE_OVERLAP and a fused add, whose identity GEMM
        sits between the epilogue's passes before it (*pre*) and after it (*post*).
        ``"pre"``: tile t's GEMMs, its pre passes, tile t + 1's start, its residual GEMM
        and post passes: the pre passes start without waiting for the start's MIN.
        ``"split"``: tile t + 1's start and tile t's pre passes, then the first half of
        tile t + 1's groups (beside the pre passes), tile t's residual GEMM and post
        passes, its store, the second half of tile t + 1's groups (beside the post
        passes)."""
        pipe, n = self.pipe, len(self.tiles)
        half = len(self.chunks) // 2
        pipe.acquire_out(0)
        self.start(0)
        self.body(0)
        for ti in range(n):
            acc_base = self.acc_at(ti)
            bases = self._bases.pop(ti)
            nxt = ti + 1 < n
            if order == "pre":
                self.pre_add(ti, acc_base, bases)
                if nxt:
                    pipe.acquire_out(ti + 1)
                    self.start(ti + 1)
            else:
                if nxt:
                    pipe.acquire_out(ti + 1)
                    self.start(ti + 1)
                self.pre_add(ti, acc_base, bases)
                if nxt:
                    self.body(ti + 1, self.chunks[:half])
            self.residual_group(ti, acc_base, bases, epilogue=False)
            rest = (self.chunks[half:] if order == "split" else self.chunks) if nxt else []
            if self.plan.post_beside and rest and self.epi.stages()[2]:
                self.post_beside(ti, acc_base, rest, 2)
                continue
            self.epi.emit_add(self.builder, acc_base, self.out_dims(ti), after=True)
            self.release_store(ti)
            if nxt:
                self.body(ti + 1, rest)

    def release_store(self, ti) -> None:
        """Tile ti's last write done: its store."""
        self.pipe.release_out(ti)
        self.pipe.store_begin(ti)
        self.store(ti, 0)
        self.pipe.store_end(ti)

    def post_beside(self, ti, acc_base, chunks, stage) -> None:
        """:attr:`Conv2dPlan.post_beside`: tile ti's last passes, the immediate passes
        of :meth:`.Epilogue.stages` ``[stage]`` (each one ALU instruction over the
        tile), between tile ti + 1's groups ``chunks``: before each group as many as its
        GEMM micro-ops cover (at least one), so that the group's token push (which waits
        for the ALU lane to drain) finds the lane empty; the rest after the last group;
        the store after the last."""
        passes = len(self.epi.stages()[stage])
        size, dims = self.out_size(ti), self.out_dims(ti)
        nxt = self.out_size(ti + 1) * self.kk       # GEMM micro-ops per input block
        k = 0
        for c in chunks:
            if k < passes:
                j = k + max(1, min(passes - k, nxt * c[1] // size))
                self.epi.emit_stage(self.builder, acc_base, dims, stage, slice(k, j))
                k = j
                if k == passes:
                    self.release_store(ti)
            self.body(ti + 1, [c])
        if k < passes:
            self.epi.emit_stage(self.builder, acc_base, dims, stage, slice(k, None))
            self.release_store(ti)

    def pre_add(self, ti, acc_base, bases) -> None:
        """Tile ti's epilogue and the fused add's passes before its residual GEMM."""
        self.epilogue(ti, acc_base, bases)
        self.epi.emit_add(self.builder, acc_base, self.out_dims(ti), after=False)

    def load_shared_rows(self) -> None:
        """The per-channel rows shared by every slot (:func:`shared_acc`), loaded once."""
        if not self.shared:
            return
        p, epi, builder, slots = self.p, self.epi, self.builder, self.slots
        merged = self.plan.merged_rows
        if merged:
            self.load_merged_rows()
        else:
            if epi.bias_tile:
                builder.load_2d(MemType.ACC, self.region, slots["bias"], 0, p.ob, 1, p.ob)
            if epi.rows:     # uniform rows: row r at rows_region + r
                builder.load_2d(MemType.ACC, self.rows_region, slots["requant"], 0,
                                p.row_blocks, epi.rows, p.row_blocks)
                self.uniform_loaded = True
            if self.nborder and not self.onchip and not self.plan.direct_border:
                builder.load_2d(MemType.ACC, self.border_region, slots["border"], 0, p.ob,
                                self.nborder, p.ob)
        if self.nborder and self.onchip:
            # onchip_border: every block's rows start as its bias (one reset, one ALU ADD
            # for all of them; each block's correction GEMMs follow in its first tile)
            f = fold_loops(self.row_dims(p.ob), (self.border_region, 0, 0))
            builder.push_gemm(UopKernel.gemm(f.uops, f.loops, reset=True))
            f = fold_loops(self.row_dims(p.ob), (self.border_region, self.region, 0))
            builder.push_alu(UopKernel.alu(AluOp.ADD, [u[:2] for u in f.uops],
                                           [lp[:3] for lp in f.loops]))
        if self.plan.bank_rows and self.plan.bank_copy:
            self.copy_shared_rows()
        elif self.plan.bank_rows and merged:
            self.load_merged_rows(self.plan.config.acc_depth // 2)
        elif self.plan.bank_rows:     # the copy at the top of bank 0 (onchip excluded)
            half = self.plan.config.acc_depth // 2
            if epi.bias_tile:
                builder.load_2d(MemType.ACC, self.region - half, slots["bias"], 0, p.ob, 1,
                                p.ob)
            if epi.rows:
                builder.load_2d(MemType.ACC, self.rows_region - half, slots["requant"], 0,
                                p.row_blocks, epi.rows, p.row_blocks)
            if self.nborder and not self.plan.direct_border:
                builder.load_2d(MemType.ACC, self.border_region - half, slots["border"], 0,
                                p.ob, self.nborder, p.ob)

    def load_merged_rows(self, below: int = 0) -> None:
        """The shared rows of :attr:`Conv2dPlan.merged_rows` by one LOAD ACC, ``below``
        rows under their region."""
        merged, n = self.plan.merged_rows, self.plan.operands["rows"].shape[0]
        start = {"bias": self.region, "requant": self.rows_region,
                 "border": self.border_region}[merged[0]]
        self.builder.load_2d(MemType.ACC, start - below, self.slots["rows"], 0, n, 1, n)
        if self.epi.rows:
            self.uniform_loaded = True

    def copy_shared_rows(self) -> None:
        """:attr:`Conv2dPlan.bank_copy`: bank 0's copy of the rows just loaded into bank 1
        made on chip, by a GEMM reset of its rows and one ALU ADD of bank 1's (both in
        the GEMM lane: the ADD reads the other bank), one micro-op per row each, instead
        of a second DRAM load of every row."""
        p, half = self.p, self.plan.config.acc_depth // 2
        loaded = self.border_region - self.region
        if self.nborder and not self.plan.direct_border:
            loaded += p.ob * self.nborder
        dims = [Dim("r", loaded, 1, 1)]
        f = fold_loops(dims, (self.region - half, 0, 0))
        self.builder.push_gemm(UopKernel.gemm(f.uops, f.loops, reset=True))
        f = fold_loops(dims, (self.region - half, self.region, 0))
        self.builder.push_alu(UopKernel.alu(AluOp.ADD, [u[:2] for u in f.uops],
                                            [lp[:3] for lp in f.loops]))

    def out_dims(self, ti) -> tuple:
        """Tile ti's accumulators: dims ``n``, ``o``, ``p`` (dst strides), made once per
        tile shape."""
        tn, tco, th, tw = (self.tiles[ti][k] for k in (1, 3, 5, 7))
        key = ("out", tn, tco, th, tw)
        dims = self._dims.get(key)
        if dims is None:
            dims = self._dims[key] = (Dim("n", tn, tco * th * tw), Dim("o", tco, th * tw),
                                      Dim("p", th * tw, 1))
        return dims

    def store(self, ti, k) -> None:
        n0, tn, co0, tco, h0, th, w0, tw = self.tiles[ti]
        self.plan._move(self.builder, "store", self.slots["out"], self.acc_at(ti),
                        k * self.out_plane, n0, tn, co0, tco, h0, th, w0, tw)

    # ------------------------------------------------------------------ one tile

    def row_bases(self, a, co0, tco):
        """(bias, requantize rows, border rows, row step) acc addresses of slot ``a``."""
        p, epi, t = self.p, self.epi, self.t
        if self.shared:
            self.bias_has[a] = (co0, tco)
            # (bank_rows: slot 0's tiles read the copy in bank 0)
            off = (-(self.plan.config.acc_depth // 2) if self.plan.bank_rows and a % 2 == 0
                   else 0)
            return (self.region + co0 + off,
                    self.rows_region + co0 * (not epi.uniform_rows) + off,
                    self.border_region + co0 + off,
                    p.ob)
        # [border rows][requantize rows][bias] x tco at the end of the slot
        bias_base = self.slot_base(a) + self.acc_slot - t.tco
        rows_base = bias_base - t.tco * epi.rows + (0 if epi.bias_tile else t.tco)
        return bias_base, rows_base, rows_base - t.tco * self.nborder, tco   # rows of tco

    def compute(self, ti) -> None:
        """Tile ti up to its first stored plane: the groups' loads and GEMMs (with the
        load/compute tokens), the border correction and the epilogue."""
        self.start(ti)
        self.body(ti)
        self.finish_tile(ti)

    def start(self, ti) -> None:
        """Tile ti's rows and accumulators' start (:meth:`start_tile`)."""
        n0, tn, co0, tco, h0, th, w0, tw = self.tiles[ti]
        a = ti % self.nacc
        self._bases[ti] = bases = self.row_bases(a, co0, tco)
        self.start_tile(ti, a, self.slot_base(a), bases)

    def body(self, ti, chunks=None) -> None:
        """Tile ti's groups (``chunks``, default all): loads and GEMMs (with the
        load/compute tokens)."""
        p = self.p
        n0, tn, co0, tco, h0, th, w0, tw = self.tiles[ti]
        acc_base = self.acc_at(ti)
        (sh, sw), (pt, pl, _, _) = p.stride, p.pad
        ywin = self.plan._window(h0, th, sh, p.kh, pt, p.h)
        xwin = self.plan._window(w0, tw, sw, p.kw, pl, p.w)
        for c0, tci in self.chunks if chunks is None else chunks:
            self.group(ti, acc_base, c0, tci, ywin, xwin)

    def body_split(self, ti, between) -> None:
        """Tile ti's groups with each of ``between`` (callables, one or more) emitted
        amid its GEMMs (:data:`.tokens.MID`, :data:`.tokens.SPREAD`), the j-th of n
        after j / (n + 1) of them: between its groups, or with one group after the GEMM
        kernel that completes that share of its micro-ops."""
        parts = len(between) + 1
        if len(self.chunks) > 1:
            cut = [len(self.chunks) * j // parts for j in range(parts + 1)]
            for j in range(parts):
                self.body(ti, self.chunks[cut[j]:cut[j + 1]])
                if j < len(between):
                    between[j]()
            return
        self._between = list(between)
        self.body(ti)
        rest, self._between = self._between or [], None
        for b in rest:
            b()

    def finish_tile(self, ti) -> None:
        """Tile ti's residual group, border correction and epilogue."""
        epi, builder = self.epi, self.builder
        acc_base = self.acc_at(ti)
        bases = self._bases.pop(ti)
        if self.res_group:
            self.residual_group(ti, acc_base, bases)
        if epi.add:
            epi.emit_add(builder, acc_base, self.out_dims(ti), after=True)
        else:
            self.epilogue(ti, acc_base, bases)

    def bias_dims(self, ti) -> tuple:
        """:meth:`out_dims` with the src strides of the tile's per-channel row (one
        element per output block), made once per tile shape."""
        tn, tco, th, tw = (self.tiles[ti][k] for k in (1, 3, 5, 7))
        key = ("bias", tn, tco, th, tw)
        dims = self._dims.get(key)
        if dims is None:
            dims = self._dims[key] = (Dim("n", tn, tco * th * tw, 0), Dim("o", tco, th * tw, 1),
                                      Dim("p", th * tw, 1, 0))
        return dims

    def start_tile(self, ti, a, acc_base, bases) -> None:
        """The tile's per-channel rows (unless its slot holds them) and its accumulators'
        start: the int32 residual, a reset, or the bias by an ALU MIN."""
        p, epi, builder, slots = self.p, self.epi, self.builder, self.slots
        n0, tn, co0, tco, h0, th, w0, tw = self.tiles[ti]
        bias_base, rows_base, border_base, _ = bases
        if (epi.bias_tile or p.acc_rows or p.border_cases) and self.bias_has[a] != (co0, tco):
            if epi.bias_tile:
                builder.load_2d(MemType.ACC, bias_base, slots["bias"], co0, tco, 1, tco)
            if epi.rows and not epi.uniform_rows:     # row r lands at rows_base + r * tco
                builder.load_2d(MemType.ACC, rows_base, slots["requant"], co0, tco,
                                epi.rows, p.ob)
            if self.plan.border_cases and not self.plan.direct_border:
                builder.load_2d(MemType.ACC, border_base, slots["border"], co0, tco,
                                len(self.plan.border_cases), p.ob)
            self.bias_has[a] = (co0, tco)
        if epi.uniform_rows and not self.uniform_loaded:
            # once per program, for the first tile's REQ.M and REQ.P: row r at rows_base + r
            builder.load_2d(MemType.ACC, rows_base, slots["requant"], 0, 1, epi.rows, 1)
            self.uniform_loaded = True
        if epi.residual == "int32":
            self.plan._move(builder, "load", slots["residual"], acc_base, 0, n0, tn, co0, tco,
                            h0, th, w0, tw)
            return
        # with a MIN init, only accumulators no clip of this layer bounded yet need a
        # reset first (Epilogue.init)
        if self.plan.alu_reset or self.plan.lane_zero:
            return          # zeroed a step ahead (PlanePipeline lead; run's lane_zero)
        if not epi.init or self.clipped[a] < tn * tco * th * tw:
            f = fold_loops(self.out_dims(ti), (acc_base, 0, 0))
            builder.push_gemm(UopKernel.gemm(f.uops, f.loops, reset=True))
        if epi.init:
            epi.emit_init(builder, acc_base, bias_base, self.bias_dims(ti))

    def epilogue(self, ti, acc_base, bases) -> None:
        """Border correction and epilogue ALU passes of the tile."""
        n0, tn, co0, tco, h0, th, w0, tw = self.tiles[ti]
        bias_base, rows_base, border_base, step = bases
        parts = None
        if self.plan.folded_border:
            parts = self.plan._req_parts(acc_base, bias_base, border_base, step, tn, tco, h0,
                                         th, w0, tw)
        elif not self.plan.direct_border:
            self.plan._emit_border(self.builder, acc_base, border_base, step, tn, tco, h0, th,
                                   w0, tw)
        a = ti % self.nacc
        self.clipped[a] = max(self.clipped[a], tn * tco * th * tw)
        self.epi.emit(self.builder, acc_base, self.out_dims(ti), bias_base, self.bias_dims(ti),
                      rows_base, step, co0, self.req_loaded, parts=parts)

    def group(self, ti, acc_base, c0, tci, ywin, xwin) -> None:
        """One group: chunk ``c0`` of the tile's reduction, its load stage then its GEMMs."""
        s = self.epochs[self.g] % self.nin if self.resident else self.g % self.nin
        tn = self.tiles[ti][1]
        p = self.p
        # the first group of a resident block-diagonal (depthwise) weight loads it one
        # kernel row at a time, each with its own token, so its GEMMs start after the
        # first row's 16x16 diagonal tiles, not all kh x kw of them
        pieces = (self.resident and self.g == 0 and p.kh > 1 and tn == 1
                  and not p.shared_wgt and (p.diag or self.plan.row_pieces))
        # Conv2dPlan.weights_ahead: resident weights (never overwritten) load before the
        # wait for the inp slot, as soon as the previous group's loads are done
        ahead = self.resident and self.plan.weights_ahead and not pieces
        wloaded = ahead and self.load_weight(ti, s, c0, tci, pieces)
        self.pipe.load_begin(self.g)
        if (self.onchip or self.plan.direct_border) and self.g == 0:   # the pad value
            self.builder.load_2d(MemType.INP, self.plan.zx_entry, self.slots["border_zx"], 0,
                                 1, 1, 1)
        loaded = self.load_data(ti, s, c0, tci, ywin, xwin)
        if ahead:
            loaded = wloaded or loaded
        else:
            loaded = self.load_weight(ti, s, c0, tci, pieces) or loaded
        self.pipe.load_end(self.g, loaded or not self.resident or (self.g == 0 and (
            self.onchip or self.plan.direct_border)))
        self.pipe.compute_begin(self.g)
        self.gemms(ti, s, acc_base, tci, ywin, xwin, pieces)
        co0 = self.tiles[ti][2]
        if self.onchip and co0 not in self.rows_done:
            self.border_rows(ti, s, c0, tci)
        if self.plan.direct_border:
            self.direct_border(ti, s, acc_base, tci)
        self.pipe.compute_end(self.g)
        self.g += 1

    def border_rows(self, ti, s, c0, tci) -> None:
        """:attr:`Conv2dPlan.onchip_border`: the correction GEMMs of the tile's blocks'
        border rows (which start as the bias, :meth:`load_shared_rows`) from the group
        of input blocks ``c0..c0 + tci`` (weights in wgt slot ``s``); the rows are done
        after the last group."""
        p, builder, plan = self.p, self.builder, self.plan
        co0, tco = self.tiles[ti][2:4]
        rows = self.border_region + co0
        w_at = co0 * p.ib * self.kk if self.resident else s * self.wgt_slot
        uops = [(rows + k * p.ob, plan.zx_entry, w_at + ci * self.kk + tap)
                for k, tap, ci in border_uops(plan.border_taps, tci)]
        builder.push_gemm(UopKernel.gemm(uops, [(tco, 1, 0, tci * self.kk)]))
        if c0 + tci >= p.ib:
            self.rows_done.add(co0)

    def direct_border(self, ti, s, acc_base, tci) -> None:
        """:attr:`Conv2dPlan.direct_border`: the correction of the tile's border vectors
        from this group's input blocks (weights in wgt slot ``s``), one GEMM micro-op
        per vector, tap in the padding and input block, a loop over the tile's output
        blocks; in rounds of one micro-op per vector when no order keeps a vector out of
        the two micro-ops before it."""
        p, plan = self.p, self.plan
        n0, tn, co0, tco, h0, th, w0, tw = self.tiles[ti]
        w_at = co0 * p.ib * self.kk if self.resident else s * self.wgt_slot
        key = ("direct", acc_base, w_at, tco, h0, th, w0, tw, tci)
        kernels = self.kernels.get(key)
        if kernels is None:
            vecs, taps = [], []
            ks = iter(plan.border_taps)
            for r0, r1, c0, c1, k in plan.border_cells:
                if k is None:
                    continue
                ts = next(ks)
                for r in range(max(r0, h0), min(r1, h0 + th)):
                    for c in range(max(c0, w0), min(c1, w0 + tw)):
                        vecs.append((r - h0) * tw + c - w0)
                        taps.append(ts)
            order = border_uops(taps, tci)
            rounds = [order] if order is not None else [
                [(i, ts[j // tci], j % tci) for i, ts in enumerate(taps)
                 if j < len(ts) * tci] for j in range(max(map(len, taps), default=0) * tci)]
            loops = [(tco, th * tw, 0, tci * self.kk)]
            kernels = self.kernels[key] = [
                UopKernel.gemm([(acc_base + vecs[i], plan.zx_entry, w_at + ci * self.kk + t)
                                for i, t, ci in r], loops) for r in rounds if r]
        for kernel in kernels:
            self.builder.push_gemm(kernel)

    def row_dims(self, tco):
        """The border rows of ``tco`` blocks: dims ``k`` (row), ``o`` (block; src: the
        bias)."""
        return [Dim("k", self.nborder, self.p.ob, 0), Dim("o", tco, 1, 1)]

    def load_data(self, ti, s, c0, tci, ywin, xwin) -> bool:
        """The group's input blocks into inp slot ``s`` unless it holds them: the tile's
        own blocks (block-diagonal) or chunk c0 of the reduction range of its group."""
        p, builder, slots = self.p, self.builder, self.slots
        n0, tn = self.tiles[ti][:2]
        key = self.plan._data_key(self.tiles[ti], c0, tci)
        if self.inp_has[s] == key:
            return False
        in0, nin = key[2], key[3]
        cib = p.cin_blocks
        r_start, rows, ypad0, ypad1, hi = ywin
        c_start, cols, xpad0, xpad1, wi = xwin
        sram = s * self.inp_slot
        if rows == hi == p.h and cols == wi == p.w:
            builder.load_2d(MemType.INP, sram, slots["data"], (n0 * cib + in0) * p.h * p.w,
                            nin * p.h * p.w, tn, cib * p.h * p.w)
        elif self.plan.row_loads and rows == hi and cols == wi == p.w and nin > 1:
            # whole rows without padding: each block's rows are one run and the blocks
            # lie an image apart, so one LOAD per batch element (not one per block)
            for nl in range(tn):
                builder.load_2d(MemType.INP, sram + nl * nin * hi * wi, slots["data"],
                                (((n0 + nl) * cib + in0) * p.h + r_start) * p.w,
                                rows * p.w, nin, p.h * p.w)
        else:
            for nl in range(tn):
                for cl in range(nin):
                    off = (((n0 + nl) * cib + in0 + cl) * p.h + r_start) * p.w + c_start
                    builder.load_2d(MemType.INP, sram + (nl * nin + cl) * hi * wi,
                                    slots["data"], off, cols, rows, p.w,
                                    x_pad_before=xpad0, y_pad_before=ypad0,
                                    x_pad_after=xpad1, y_pad_after=ypad1)
        self.inp_has[s] = key
        return True

    def load_weight(self, ti, s, c0, tci, pieces) -> bool:
        """The group's weights: resident (rows co0.. of the whole weight, loaded once, in
        kernel rows with their own tokens for ``pieces``) or into wgt slot ``s`` unless
        it holds them; whether anything was loaded."""
        p, builder, slots, kk = self.p, self.builder, self.slots, self.kk
        co0, tco = self.tiles[ti][2:4]
        if self.resident:    # rows co0.. of the whole (ob, ib, kh, kw) weight, in place
            wbase = co0 * p.ib * kk
            if pieces:
                for row in range(p.kh):
                    for blk in range(tco * p.ib):    # (an SRAM side is contiguous)
                        at = wbase + blk * kk + row * p.kw
                        builder.load_2d(MemType.WGT, at, slots["weight"], at, p.kw, 1, p.kw)
                    if row + 1 < p.kh:
                        builder.dep_push(Unit.LOAD, Unit.COMPUTE)
                self.w_loaded.update(range(co0, co0 + tco))
                return True
            if not self.w_loaded.issuperset(range(co0, co0 + tco)):
                builder.load_2d(MemType.WGT, wbase, slots["weight"], wbase,
                                tco * p.ib * kk, 1, tco * p.ib * kk)
                self.w_loaded.update(range(co0, co0 + tco))
                return True
            return False
        wkey = "shared" if p.shared_wgt else (co0, tco, c0, tci)
        if self.wgt_has[s] == wkey:
            return False
        if p.shared_wgt:
            builder.load_2d(MemType.WGT, s * self.wgt_slot, slots["weight"], 0, 1, 1, 1)
        else:
            builder.load_2d(MemType.WGT, s * self.wgt_slot, slots["weight"],
                            (co0 * p.ib + c0) * kk, tci * kk, tco, p.ib * kk)
        self.wgt_has[s] = wkey
        return True

    def gemms(self, ti, s, acc_base, tci, ywin, xwin, pieces) -> None:
        """The group's GEMM kernels (memoized by what they address), one kernel row after
        each token for ``pieces``."""
        p, builder = self.p, self.builder
        n0, tn, co0, tco, h0, th, w0, tw = self.tiles[ti]
        _, rows, ypad0, _, hi = ywin
        _, cols, xpad0, _, wi = xwin
        w_at = co0 * p.ib * self.kk if self.resident else s * self.wgt_slot
        base = (acc_base, s * self.inp_slot, w_at)
        if pieces:      # one kernel row at a time, each after its token
            for row in range(p.kh):
                if row:
                    builder.dep_pop(Unit.LOAD, Unit.COMPUTE)
                for kernel in self.plan._gemm_kernels(base, tn, tco, th, tw, tci, hi, wi,
                                                      (ypad0, rows), (xpad0, cols),
                                                      taps_h=(row, row + 1)):
                    builder.push_gemm(kernel)
            return
        a = ti % self.nacc
        parts = len(self._between) + 1 if self._between is not None else 1
        kkey = (s, a, w_at, tn, tco, th, tw, tci, hi, wi, ypad0, rows, xpad0, cols) + (
            ("parts", parts) if parts > 1 else ())
        if kkey not in self.kernels:
            self.kernels[kkey] = self.plan._gemm_kernels(
                base, tn, tco, th, tw, tci, hi, wi, (ypad0, rows), (xpad0, cols),
                uses=len(self.tiles) * len(self.chunks) // self.nin, parts=parts)
        kernels = self.kernels[kkey]
        if self._between is None:
            for kernel in kernels:
                builder.push_gemm(kernel)
            return
        sizes = [k.size * math.prod(lp[0] for lp in k.loops) for k in kernels]
        done, j = 0, 1
        for kernel, n in zip(kernels, sizes):
            builder.push_gemm(kernel)
            done += n
            # the j-th callable once j / parts of the micro-ops are done
            while self._between and parts * done >= j * sum(sizes):
                self._between.pop(0)()
                j += 1
        if not self._between:
            self._between = None

    def residual_group(self, ti, acc_base, bases, epilogue=True) -> None:
        """An int8 residual: one more group, identity weights (the epilogue and the add's
        first passes go between its load and its GEMM when the layer adds it, unless
        ``epilogue`` is False: :meth:`run_add` emitted them)."""
        epi, builder, slots = self.epi, self.builder, self.slots
        n0, tn, co0, tco, h0, th, w0, tw = self.tiles[ti]
        s = self.g % self.nin
        self.pipe.load_begin(self.g)
        if self.inp_has[s] != ("res", n0, tn, co0, tco, h0, th, w0, tw):
            self.plan._move(builder, "load_inp", slots["residual"], s * self.inp_slot, 0, n0, tn,
                            co0, tco, h0, th, w0, tw)
            self.inp_has[s] = ("res", n0, tn, co0, tco, h0, th, w0, tw)
        if self.wgt_has[s] != "identity":
            builder.load_2d(MemType.WGT, s * self.wgt_slot, slots["identity"], 0, 1, 1, 1)
            self.wgt_has[s] = "identity"
        self.pipe.load_end(self.g)
        if epi.add and epilogue:   # the epilogue, then the add's residual (its load in flight)
            self.pre_add(ti, acc_base, bases)
        self.pipe.compute_begin(self.g)
        f = fold_loops([Dim("e", tn * tco * th * tw, 1, 1, 0)],
                       (acc_base, s * self.inp_slot, s * self.wgt_slot))
        builder.push_gemm(UopKernel.gemm(f.uops, f.loops))
        self.pipe.compute_end(self.g)
        self.g += 1


def _distinct_orders(p, ranked) -> list:
    """``ranked`` (search_tiles' list) without the tilings whose tile order equals that
    of one before them: with one output-channel tile or one spatial tile, both orders
    emit the same stream."""
    seen, out = set(), []
    for est, t in ranked:
        single = (ceil_div(p.gob, t.tco) * p.n_groups == 1
                  or ceil_div(p.oh, t.th) * ceil_div(p.ow, t.tw) == 1)
        key = replace(t, order="co_outer") if single else t
        if key not in seen:
            seen.add(key)
            out.append((est, t))
    return out


def _tap_segments(n_out, stride, k, first, count):
    """Along one axis of a tile (``n_out`` outputs, kernel ``k``, the window's data at
    ``[first, first + count)``): ``[(o0, o1, k0, k1)]``, runs of outputs whose taps inside
    the data are ``[k0, k1)``; outputs that read only padding are left out."""
    runs = []
    for o in range(n_out):
        taps = (max(0, first - o * stride), min(k, first + count - o * stride))
        if taps[0] >= taps[1]:
            continue
        if runs and runs[-1][1] == o and runs[-1][2:] == taps:
            runs[-1] = (runs[-1][0], o + 1) + taps
        else:
            runs.append((o, o + 1) + taps)
    return runs


def plan_conv2d(config, x_shape, w_shape, stride=1, padding=0, *, groups=1, bias=False,
                shift=0, relu=False, clip=None, residual=False, out_dtype=np.int8, tiling=None,
                cost: SearchCost = SearchCost(), requant=None, border=False,
                shared_weight=False, result_bytes=4, add=None, min_init=None,
                pad_value=None) -> Conv2dPlan:
    """Plan a convolution without running it (``bias``/``residual``/``border``/
    ``shared_weight`` are flags here; ``requant`` an :class:`.epilogue.Requant`, on a
    config with the ALU extension; ``add`` a :class:`.epilogue.ResidualAdd` of the int8
    ``residual`` fused after the clip; ``min_init=(bias values, weight)``: start the
    accumulators from the bias where exact, :meth:`.epilogue.Epilogue.with_min_init`;
    ``pad_value``: what ``border`` pads with, for :attr:`Conv2dPlan.onchip_border`)."""
    epi = Epilogue.make(bias=bias, residual=residual, shift=shift, clip=clip, relu=relu,
                        out_dtype=out_dtype, op="conv2d", requant=requant,
                        result_bytes=result_bytes, add=add)
    if min_init is not None:
        epi = epi.with_min_init(min_init[0], accumulation_bound(min_init[1]))
    return Conv2dPlan(config, x_shape, w_shape, stride, padding, groups=groups, epilogue=epi,
                      tiling=tiling, cost=cost, border=border, shared_weight=shared_weight,
                      pad_value=pad_value)


def conv2d(rt, x, w, stride=1, padding=0, *, groups=1, bias=None, shift=0, relu=False,
           clip=None, residual=None, out_dtype=np.int8, tiling=None) -> np.ndarray:
    """Run ``y = epilogue(conv2d(x, w) + bias + residual)`` on the device of ``rt``.

    Parameters
    ----------
    rt : Runtime
    x : (N, C, H, W) int8
    w : (O, C/groups, KH, KW) int8
    stride : int or (sh, sw)
    padding : int, (ph, pw) or (top, left, bottom, right); each at most 15 and
        smaller than the kernel
    groups : int
        Grouped convolution. Groups of whole channel blocks run as per-group GEMMs
        in one kernel; groups of g channels with g dividing the block (depthwise:
        g = 1) as block-diagonal weight tiles; anything else group by group
        (:func:`group_conv2d`).
    bias : (O,) int32, optional
    shift : int
        Requantization: add 2^(shift-1), arithmetic shift right by ``shift``.
    relu : bool
        Clip below at 0.
    clip : (lo, hi), optional
        Clip bounds (signed 16-bit).
    residual : (N, O, OH, OW) int8 or int32, optional
        Added to the accumulators: int8 through an identity GEMM from int8 DRAM data,
        other integer types as int32 LOAD ACC.
    out_dtype : int8 or int32
    tiling : ConvTiling, optional
        Override the searched tiling.

    Returns
    -------
    numpy.ndarray
        (N, O, OH, OW) of ``out_dtype``, equal to :func:`reference.epilogue_ref` of
        :func:`reference.group_conv2d_ref`.
    """
    x = check_operand("conv2d", "x", x)
    w = check_operand("conv2d", "w", w)
    check_positive("conv2d", "stride", stride)
    check_fits("conv2d", rt, x, w)
    try:
        plan = plan_conv2d(rt.config, np.shape(x), np.shape(w), stride, padding, groups=groups,
                           bias=bias is not None, shift=shift, relu=relu, clip=clip,
                           residual=_residual_kind(residual), out_dtype=out_dtype,
                           tiling=tiling, min_init=(bias, w))
    except GroupMappingError:
        return group_conv2d(rt, x, w, stride, padding, groups, bias=bias, shift=shift,
                            relu=relu, clip=clip, residual=residual, out_dtype=out_dtype)
    out, _ = plan.run(rt, plan.pack(x, w, bias, residual))
    return plan.unpack(out)


def _residual_kind(residual):
    """int8 residuals go through the identity GEMM, anything else as int32 LOAD ACC."""
    if residual is None:
        return None
    return "int8" if np.asarray(residual).dtype == np.int8 else "int32"


def group_conv2d(rt, x, w, stride=1, padding=0, groups=1, *, bias=None, residual=None,
                 **kwargs) -> np.ndarray:
    """Grouped convolution run group by group: ``groups`` independent convolutions on
    channel slices, each padded to whole blocks (the general fallback of
    :func:`conv2d`; it wastes lanes when a group is smaller than a block)."""
    x, w = np.asarray(x), np.asarray(w)
    n, c, _, _ = x.shape
    o, cg = w.shape[:2]
    if c % groups or o % groups or cg != c // groups:
        raise ValueError(f"group_conv2d: {c} input and {o} output channels, weight "
                         f"{list(w.shape)}, cannot form {groups} groups")
    og = o // groups
    outs = []
    for gi in range(groups):
        sl = slice(gi * og, (gi + 1) * og)
        outs.append(conv2d(rt, x[:, gi * cg:(gi + 1) * cg], w[sl], stride, padding,
                           bias=None if bias is None else np.asarray(bias)[sl],
                           residual=None if residual is None else np.asarray(residual)[:, sl],
                           **kwargs))
    return np.concatenate(outs, axis=1)
