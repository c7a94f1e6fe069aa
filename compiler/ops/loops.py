"""Folding a loop nest of tensor-tile operations into one micro-op kernel.

A GEMM or ALU instruction runs ``iter_out x iter_in x uops``: two hardware
loops around a list of micro-ops, every index affine in the loop counters
(reference 3.4). An operator tile is a nest of named dimensions (output
channel block, output row, kernel row, ...), each with an extent and a stride
for the dst (acc), src (inp or acc) and wgt indices. :func:`fold_loops` picks
which two dimensions become the hardware loops and enumerates the rest as
micro-ops, so that:

* the micro-op count is minimal (the uop SRAM is small and LOAD UOP costs DMA);
* consecutive GEMM micro-ops write different accumulators (the accumulate-hazard
  rule of reference 3.4): reduction dimensions are placed outside, and the
  innermost run of output dimensions must cover at least 3 distinct
  accumulators whenever anything is reduced.

Adjacent dimensions of the same kind whose strides chain (``stride_outer ==
extent_inner * stride_inner`` for all three indices) are merged first, so e.g.
a 1x1 convolution's rows and columns form one loop.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

from ...hw.spec import MAX_LOOP_EXTENT

__all__ = ["Dim", "Folded", "fold_loops", "MAX_EXTENT"]

#: Largest hardware loop extent (the iteration fields' limit).
MAX_EXTENT = MAX_LOOP_EXTENT


@dataclass(frozen=True)
class Dim:
    """One dimension of a tile's loop nest.

    Attributes
    ----------
    name : str
    extent : int
    dst, src, wgt : int
        Index strides (SRAM elements) of the dst, src and wgt indices.
    reduce : bool
        True for a reduction dimension (it accumulates into the same dst).
    """

    name: str
    extent: int
    dst: int
    src: int = 0
    wgt: int = 0
    reduce: bool = False

    @property
    def strides(self) -> tuple[int, int, int]:
        return self.dst, self.src, self.wgt


@dataclass(frozen=True)
class Folded:
    """A loop nest folded into micro-ops and at most two loops.

    Attributes
    ----------
    uops : tuple of (dst, src, wgt)
    loops : tuple of (extent, dst_factor, src_factor, wgt_factor), outer first
    hazard_free : bool
        True if no micro-op writes the accumulator written by either of the two
        micro-ops before it, over the whole execution (p, q, k) order.
    order : tuple of str
        Dimension names in execution order, outermost first (loops, then uops).
    """

    uops: tuple
    loops: tuple
    hazard_free: bool
    order: tuple

    @property
    def n_uops(self) -> int:
        return len(self.uops)

    @property
    def iterations(self) -> int:
        """Micro-op executions of one instruction (GEMM/ALU cycles at one per cycle)."""
        return len(self.uops) * math.prod(lp[0] for lp in self.loops)


def _merge(dims):
    """Merge adjacent same-kind dims whose strides chain into one dim."""
    out = []
    for d in dims:
        if out:
            a = out[-1]
            if (a.reduce == d.reduce and a.extent * d.extent <= MAX_EXTENT
                    and all(sa == d.extent * sd for sa, sd in zip(a.strides, d.strides))):
                out[-1] = Dim(f"{a.name}*{d.name}", a.extent * d.extent, *d.strides, d.reduce)
                continue
        out.append(d)
    return out


def _hazard_free(order) -> bool:
    """The innermost run of output dims must hold >= 3 accumulators if anything reduces."""
    if not any(d.reduce for d in order):
        return True
    run = 1
    for d in reversed(order):
        if d.reduce:
            break
        run *= d.extent
    return run >= 3


def fold_loops(dims, base=(0, 0, 0)) -> Folded:
    """Fold a loop nest into at most two hardware loops plus a micro-op list.

    Parameters
    ----------
    dims : sequence of Dim
        The nest in canonical order (outermost first). Extent-1 dims are ignored.
    base : (int, int, int)
        dst, src and wgt index of the first element.

    Returns
    -------
    Folded
        The choice with the fewest micro-ops among the hazard-free ones (or, if no
        order is hazard-free, e.g. a single output accumulator, the fewest overall).
    """
    dims, base = tuple(dims), tuple(base)
    if all(type(d.extent) is int and type(d.dst) is int and type(d.src) is int
           and type(d.wgt) is int for d in dims) and all(type(b) is int for b in base):
        return _fold_cached(dims, base)     # an operator folds the same nests many times
    return _fold(dims, base)


@lru_cache(maxsize=4096)
def _fold_cached(dims, base) -> Folded:
    return _fold(dims, base, _choose_cached(dims))


@lru_cache(maxsize=4096)
def _choose_cached(dims) -> tuple:
    """:func:`_choose` of a nest (the choice does not depend on the base: a nest folded
    at many bases, e.g. a tile's in every slot, is searched once)."""
    return _choose(dims)


def _choose(dims) -> tuple:
    """``(loops, rest, order)``: the dims (extent > 1) that become the hardware loops,
    outer first, those enumerated as micro-ops, last fastest, and the execution order
    (see :func:`fold_loops`)."""
    dims = [d for d in dims if d.extent > 1]
    if any(d.extent < 1 for d in dims):
        raise ValueError("fold_loops: every extent must be >= 1")
    best = None
    merged = _merge(dims)
    for variant in (merged, dims) if merged != dims else (dims,):   # the same twice: once
        choices = [None] + list(range(len(variant)))
        for outer, inner in itertools.product(choices, choices):
            if (outer is None) != (inner is None) and outer is not None:
                continue          # a single loop is written as (None, inner)
            if outer is not None and outer == inner:
                continue
            loops = [variant[i] for i in (outer, inner) if i is not None]
            if any(d.extent > MAX_EXTENT for d in loops):
                continue
            rest = [d for i, d in enumerate(variant) if i not in (outer, inner)]
            rest = [d for d in rest if d.reduce] + [d for d in rest if not d.reduce]
            order = loops + rest
            n_uops = math.prod(d.extent for d in rest)
            key = (not _hazard_free(order), n_uops, not _hazard_free(rest))
            if best is None or key < best[0]:
                best = (key, loops, rest, order)
    _, loops, rest, order = best
    return tuple(loops), tuple(rest), tuple(order)


def _fold(dims, base, choice=None) -> Folded:
    """The nest folded at ``base``, by ``choice`` (:func:`_choose` of ``dims``, computed
    when not given)."""
    loops, rest, order = choice or _choose(dims)
    uops = [tuple(base)]            # the rest's index space, last dim fastest
    for d in rest:
        sd, ss, sw = d.strides
        uops = [(a + i * sd, b + i * ss, c + i * sw) for a, b, c in uops for i in range(d.extent)]
    return Folded(tuple(uops), tuple((d.extent, *d.strides) for d in loops),
                  _hazard_free(order), tuple(d.name for d in order))
