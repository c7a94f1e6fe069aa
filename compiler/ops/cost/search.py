"""The analytic estimate of a convolution tiling: what the tile search ranks with.

:func:`estimate` (one tiling) and :func:`_estimates` (many at once, as numpy lanes)
count GEMM and ALU micro-ops, DMA beats and instruction overheads per tile and
overlap the three modules (:class:`~.params.SearchCost`). It ranks tilings; the
figure a report shows for a layer is the event model's (:mod:`.events`) on the
kernel the chosen tiling emits.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .geometry import MAX_BURST, ConvProblem, ConvTiling, acc_slots, shared_acc
from .params import REQ_STAGES, SearchCost

__all__ = ["Estimate", "estimate"]


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


def estimate(p: ConvProblem, t: ConvTiling, config, cost: SearchCost = SearchCost()) -> Estimate:
    """Predict cycles and DRAM traffic of a conv tiling (see :class:`~.params.SearchCost`)."""
    lanes = {k: np.array([v]) for k, v in (("tn", t.tn), ("tco", t.tco), ("th", t.th),
                                          ("tw", t.tw), ("tci", t.tci),
                                          ("nthreads", t.nthreads))}
    lanes["co_outer"] = np.array([t.order == "co_outer"])
    lanes["resident"] = np.array([t.resident])
    return Estimate(*(v[0].item() for v in _estimates(p, lanes, config, cost)))


def _estimates(p: ConvProblem, t: dict, config, cost: SearchCost) -> tuple:
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
        c_tile, reads = _tile_overhead(p, cost, bus, e_inp, e_acc, shared, ent, tco, wi,
                                       n_rows_out, z_l)
        for r in reads:
            rd[sel] += m * r
        passes = p.alu_imm + p.planes - 1
        c_tile += passes * (ent * cost.alu_imm_cycles + cost.insn_cycles)
        planes = p.planes
        s_bytes = planes * ent * e_out
        s_tile = (s_bytes / bus + planes * (
            cost.dma_insn_cycles * n_st_insn + n_st_rows * cost.dma_row_cycles))
        wr[sel] += m * s_bytes
        g_sum = _groups(p, cost, bus, e_inp, e_wgt, chunks, at, sel, m, tn, tco, hi, wi, ent,
                        kk, taps, full_sp_l, i_frac_l, w_frac_l, k_l, z_l,
                        rd, load, comp, first_load)
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


def _tile_overhead(p, cost, bus, e_inp, e_acc, shared, ent, tco, wi, n_rows_out, z_l):
    """The compute-stage cycles of one tile outside its GEMMs (accumulator start,
    bias, per-channel rows, border ADDs) and, in order, the bytes it reads."""
    reads = []
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
        reads.append(b)
        c_tile += b / bus + cost.dma_insn_cycles + n_rows_out * cost.dma_row_cycles
    elif not p.min_init:
        c_tile += ent * cost.gemm_uop_cycles
    if p.bias:
        if not shared:
            reads.append(tco * e_acc)
            c_tile += tco * e_acc / bus + cost.dma_insn_cycles
        if p.req_pass and p.uniform_rows:   # one REQ (the setup once per kernel)
            c_tile += ent * cost.alu_tensor_cycles + cost.insn_cycles + REQ_STAGES - 1
        elif p.req_pass:   # per block: REQ.M, REQ.P (a micro-op each), the REQ pass
            c_tile += (ent * cost.alu_tensor_cycles + 3 * tco * cost.insn_cycles
                       + 2 * tco * cost.alu_tensor_cycles + REQ_STAGES - 1)
        else:
            c_tile += ent * cost.alu_tensor_cycles + cost.insn_cycles
    rows = p.acc_rows * (not p.uniform_rows) + p.border_cases
    if rows:     # 2-D LOAD ACC of the rows; a tensor pass per requant row
        if not shared:
            reads.append(rows * tco * e_acc)
            c_tile += (rows * tco * e_acc / bus + cost.dma_insn_cycles * (
                bool(p.acc_rows and not p.uniform_rows) + bool(p.border_cases))
                + rows * cost.dma_row_cycles)
        if not p.req_pass:
            c_tile += p.acc_rows * (ent * cost.alu_tensor_cycles + cost.insn_cycles)
    if p.border_cases and p.req_pass and shared:
        # the border rides in the REQ pass (its shared rows hold bias + correction,
        # Conv2dPlan.folded_border): one more REQ instruction per border rectangle the
        # tile touches, per block unless the rows are uniform
        share = ent / (p.nb * p.oh * p.ow * tco)
        c_tile += (np.maximum(1.0, share * p.border_cases) * cost.insn_cycles
                   * (1 if p.uniform_rows else tco))
    elif p.border_cases:   # border ADDs: the tile's share of them
        share = ent / (p.nb * p.ob * p.oh * p.ow)
        c_tile += share * p.border_vectors * cost.alu_tensor_cycles
        c_tile += np.maximum(1.0, share * p.border_cases) * cost.insn_cycles
    return c_tile, reads


def _groups(p, cost, bus, e_inp, e_wgt, chunks, at, sel, m, tn, tco, hi, wi, ent, kk, taps,
            full_sp_l, i_frac_l, w_frac_l, k_l, z_l, rd, load, comp, first_load):
    """The groups of one tile class (each reduction chunk, the int8 residual's):
    their reads, load and GEMM cycles added to the lanes ``sel`` of ``rd``, ``load``,
    ``comp`` and ``first_load``; returns the tile's pipelined group cycles."""
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
    return g_sum
