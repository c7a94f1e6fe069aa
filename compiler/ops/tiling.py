"""Tiling of convolutions (and dense layers, as 1x1 convolutions) for VTA's SRAMs.

An output tile covers ``tn`` batch blocks x ``tco`` output-channel blocks x
``th`` rows x ``tw`` columns; its reduction over input channels runs in chunks
of ``tci`` blocks. One *group* (the load and GEMM of one chunk) fills one of
``nthreads`` disjoint halves of the inp and wgt SRAMs, and one tile's
accumulators one of ``nthreads`` halves of the acc SRAM: with two "virtual
threads" (reference 4.5) the load of group g+1 and the store of tile t-1 run
while group g computes.

:func:`search_tiles` enumerates candidate tilings that fit every SRAM of the
config, ranks them with an analytic cost model (:class:`~.cost.params.SearchCost`: GEMM at
one micro-op per cycle, ALU passes, DMA at one bus beat per cycle, per
instruction overheads, and overlap of the three modules) and returns the best
first. A problem that cannot fit at all raises :class:`TilingError` naming the
operator, its shape and the buffer that overflows.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...hw.errors import VtakitError
from ...hw.spec import MAX_PAD
from .cost.geometry import (INT32_ACC_SLOTS, MAX_BURST, ConvProblem, ConvTiling,  # noqa: F401
                            acc_slots, gemm_dims, shared_acc, uop_budget, whole_weight)
from .cost.params import RTL_COST, CostModel, EventCost, SearchCost  # noqa: F401
from .cost.search import Estimate, _estimates, estimate  # noqa: F401  (re-exported)
from .layout import ceil_div
from .loops import fold_loops

__all__ = [
    "ConvProblem", "ConvTiling", "CostModel", "SearchCost", "EventCost", "RTL_COST", "Estimate",
    "TilingError",
    "search_tiles", "best_tiling", "gemm_dims", "uop_budget", "acc_slots", "shared_acc", "MAX_PAD",
    "INT32_ACC_SLOTS",
]


class TilingError(VtakitError, ValueError):
    """An operator that cannot be tiled for a config (names the op, shape and buffer)."""


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


def search_tiles(p: ConvProblem, config, *, cost: SearchCost = SearchCost(), top: int = 8,
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


def best_tiling(p: ConvProblem, config, *, cost: SearchCost = SearchCost()) -> ConvTiling:
    """The top-ranked tiling of :func:`search_tiles`."""
    return search_tiles(p, config, cost=cost, top=1)[0][1]
