"""Dependency-token protocol of a double-buffered load -> compute -> store kernel.

Operators emit a sequence of *groups* (loads into one of ``in_slots`` inp/wgt
SRAM slots, then the GEMMs that read them) and of *store events* (compute
finishes an acc/out slot, store writes it back). With two slots ("virtual
threads", reference 4.5) the tokens below let the load of group g+1 and the
store of event e-1 overlap the compute of group g:

* load g pops g2l (WAR: compute has finished reading the slot, group g-2) when
  g >= in_slots, and pushes l2g when its loads are issued (RAW);
* compute g pops l2g before its GEMMs and pushes g2l afterwards, but only when a
  later load will pop it (tokens stay balanced, so nothing is left in a queue
  at FINISH and a reset-less device can run the next program);
* before compute first writes the OUT entries of event e it pops s2g of event
  e - out_slots (WAR); after its last write it pushes g2s (RAW);
* store e pops g2s, stores, and pushes s2g when event e + out_slots exists.

Every pop's matching push is emitted earlier in the stream, so the in-order
fetch unit can never deadlock on a full command queue.
"""

from __future__ import annotations

from ...runtime import Unit

__all__ = ["EARLY", "MID", "Pipeline", "PlanePipeline", "SPREAD", "kernel_fence"]


def kernel_fence(stream) -> None:
    """Make everything emitted so far complete before anything emitted later.

    Store pushes s2g after its last store; compute pops it (all stores are done,
    so their OUT reads and DRAM writes are over), then pushes g2l; load pops it
    (all GEMMs are done reading inp/wgt, and the next kernel may load what this
    one stored). Every operator ends with this fence, so kernels lowered one
    after another into a single stream neither race on the SRAM slots (each
    kernel's token protocol starts afresh) nor read DRAM before it is written.
    """
    stream.dep_push(Unit.STORE, Unit.COMPUTE)
    stream.dep_pop(Unit.STORE, Unit.COMPUTE)
    stream.dep_push(Unit.COMPUTE, Unit.LOAD)
    stream.dep_pop(Unit.COMPUTE, Unit.LOAD)


class Pipeline:
    """Emits the dependency pushes and pops of one double-buffered kernel.

    Parameters
    ----------
    stream : ProgramBuilder or Runtime
        Where the tokens are queued (anything with ``dep_push``/``dep_pop``).
    in_slots, out_slots : int
        Number of inp/wgt and acc/out buffer slots (1 or 2).
    n_groups, n_events : int
        Total groups and store events the kernel will emit.
    """

    def __init__(self, stream, in_slots: int, out_slots: int, n_groups: int, n_events: int,
                 epochs=None):
        self.stream = stream
        self.in_slots, self.out_slots = in_slots, out_slots
        self.n_groups, self.n_events = n_groups, n_events
        self.epochs = list(range(n_groups)) if epochs is None else list(epochs)
        self._n_epochs = self.epochs[-1] + 1 if self.epochs else 0
        self._skipped: set = set()

    def _first(self, g: int) -> bool:
        return g == 0 or self.epochs[g - 1] != self.epochs[g]

    def _last(self, g: int) -> bool:
        return g + 1 == len(self.epochs) or self.epochs[g + 1] != self.epochs[g]

    def load_begin(self, g: int) -> None:
        if self.epochs[g] >= self.in_slots and self._first(g):
            self.stream.dep_pop(Unit.COMPUTE, Unit.LOAD)

    def load_end(self, g: int, loaded: bool = True) -> None:
        """After group ``g``'s loads; ``loaded=False``: it loaded nothing (its operands are
        already in SRAM), so no token passes for it."""
        if loaded:
            self.stream.dep_push(Unit.LOAD, Unit.COMPUTE)
        else:
            self._skipped.add(g)

    def compute_begin(self, g: int) -> None:
        if g not in self._skipped:
            self.stream.dep_pop(Unit.LOAD, Unit.COMPUTE)

    def compute_end(self, g: int) -> None:
        if self._last(g) and self.epochs[g] + self.in_slots < self._n_epochs:
            self.stream.dep_push(Unit.COMPUTE, Unit.LOAD)

    def acquire_out(self, e: int) -> None:
        """Before compute writes the OUT entries that store event ``e`` will read."""
        if e >= self.out_slots:
            self.stream.dep_pop(Unit.STORE, Unit.COMPUTE)

    def release_out(self, e: int) -> None:
        """After compute's last write for store event ``e``."""
        self.stream.dep_push(Unit.COMPUTE, Unit.STORE)

    def store_begin(self, e: int) -> None:
        self.stream.dep_pop(Unit.COMPUTE, Unit.STORE)

    def store_end(self, e: int) -> None:
        if e + self.out_slots < self.n_events:
            self.stream.dep_push(Unit.STORE, Unit.COMPUTE)


#: :class:`PlanePipeline`'s ``skew`` for the shifts amid the next tile's GEMMs.
MID = -1

#: :class:`PlanePipeline`'s ``skew`` for every plane of a tile shifted amid the next
#: tile's GEMMs, spread over them.
SPREAD = -2

#: :class:`PlanePipeline`'s ``skew`` for :data:`MID` with the shifts of planes 2 and up
#: at the start of their step, before its tile's GEMMs.
EARLY = -3


class PlanePipeline:
    """Store tokens of a kernel whose tiles each store ``planes`` byte planes from one of
    ``slots`` acc/out slots, with the plane shifts skewed so that stores overlap GEMMs.

    A plane shift (ALU SHR 8 in place) overwrites the OUT entries the store of the
    previous plane reads, so it must wait for that store; issued right after it,
    compute would idle for every plane store. Instead compute runs in *steps*: step
    ``i`` computes tile ``i`` (plane 0) and then shifts plane ``k`` of tile ``i - k``
    (k = 1 .. planes - 1), whose previous plane was released one step earlier, so the
    stores of step ``i - 1`` run while tile ``i``'s GEMMs do. :attr:`steps` lists the
    actions ``(tile, plane)`` in compute order; stores run in the same order (store
    event = position in it).

    Tokens: an action pops s2g when it needs a store event later than every event
    popped so far (plane ``k`` needs plane ``k - 1`` of its tile; plane 0 of tile ``i``
    needs the last plane of tile ``i - slots``, the slot's previous occupant); a store
    pushes s2g only for events some action waits for, so every token is popped and the
    FIFO pairs the j-th pop with the j-th push. Stores complete in order, so an action
    whose event is no later than one already popped needs no pop (none with ``slots >
    planes``; with ``slots == planes`` a tile waits for all of the previous step's
    stores). Each push is emitted before its pop, as :class:`Pipeline` requires.

    With ``lead``, tile ``i``'s start (action ``(i, -1)``: the accumulators zeroed by
    ALU passes, which store nothing) comes first in step ``i - 1``, before tile
    ``i - 1``'s GEMMs, and pops the slot's token in place of plane 0.

    ``skew`` s > 1 shifts plane ``k`` of tile ``i - s k`` in step ``i`` instead (a tile
    holds its slot s (planes - 1) + 1 steps): with COMPUTE_OVERLAP and the slots
    alternating acc banks, s = 2 puts every shift of a step in the other bank than the
    next tile's GEMMs (:attr:`.conv2d.Conv2dPlan.plane_banks`).

    ``skew`` :data:`MID` shifts plane ``k`` of tile ``i - (2k - 1)`` (an odd number of
    tiles back: with slots alternating acc banks, always the other bank than tile
    ``i``) *amid* tile ``i``'s GEMMs: step ``i`` is ``(i, None)`` (the first half of
    tile ``i``'s GEMMs, which pops the tokens of ``(i, 0)``), the shifts (oldest tile
    first) and ``(i, 0)`` (the rest of its GEMMs). The ALU lane runs the shifts beside
    the second half, and the next tile's GEMMs (the shifts' bank) find the lane
    empty. A tile holds its slot for ``2 (planes - 1)`` steps: ``2 planes`` slots.

    ``skew`` :data:`SPREAD` shifts every plane ``k > 0`` of tile ``i - 1`` amid tile
    ``i``'s GEMMs, spread over them (step ``i``: ``(i, None)``, the shifts, ``(i, 0)``;
    :meth:`.conv2d._ConvEmission.body_split` puts each shift after its share of the
    GEMMs, so that the store of plane ``k - 1`` runs beside the GEMMs before it). The
    shifts are always in the other bank than tile ``i`` with slots alternating banks,
    and the kernel ends with the last tile's planes alone (with :data:`MID`, the planes
    2 and 3 tiles back are left too). A tile holds its slot for two steps: 3 slots
    (4 to alternate banks).

    ``skew`` :data:`EARLY` is :data:`MID` with the shifts of planes k >= 2 first in
    their step, before ``(i, None)`` (emitted before tile ``i``'s GEMMs, beside their
    first half: the previous plane was stored a step or more before, so none waits),
    plane 1 still amid. MID's plane stores come in threes, two at the GEMMs' half and
    plane 0 at their end, and the store module waits for them in between; EARLY starts
    a store with the GEMMs, so it waits less and the kernel ends sooner (keyword
    spotting's depthwise layers on ``default``: Verilator 5,279 -> 5,226 cycles alone).
    """

    @staticmethod
    def min_slots(planes: int, skew: int = 1, lead: bool = False) -> int:
        """The fewest acc slots for ``planes`` planes shifted with ``skew``: a tile holds
        its slot ``skew (planes - 1) + 1`` steps, with ``lead`` one more (its start
        comes a step early)."""
        if skew in (MID, EARLY):
            return 2 * planes
        if skew == SPREAD:
            return 3 + bool(lead)
        return planes + (skew - 1) * (planes - 1) + bool(lead)

    def __init__(self, stream, n_tiles: int, planes: int, slots: int, skew: int = 1,
                 lead: bool = False):
        least = self.min_slots(planes, skew, lead)
        mid = skew in (MID, SPREAD, EARLY)
        if slots < least:
            raise ValueError(f"PlanePipeline: {slots} acc slots for {planes} planes (skew "
                             f"{skew}{', lead' if lead else ''}); a slot's next tile would "
                             f"wait for a store issued after "
                             f"it: use at least {least} ({least + 1} to keep the waits in "
                             f"store order)")
        self.stream = stream
        if skew == SPREAD:  # the planes of tile i - 1 amid tile i's GEMMs: (i, None) first
            self.steps = [[(i, None)] * (i < n_tiles)
                          + [(i - 1, k) for k in range(1, planes) if i >= 1]
                          + [(i, 0)] * (i < n_tiles) for i in range(n_tiles + 1)]
        elif mid:       # plane k of tile i - (2k - 1) amid tile i's GEMMs: (i, None) first
            self.steps = [[(i, None)] * (i < n_tiles)
                          + [(i - 2 * k + 1, k) for k in range(planes - 1, 0, -1)
                             if 0 <= i - 2 * k + 1 < n_tiles]
                          + [(i, 0)] * (i < n_tiles) for i in range(n_tiles + 2 * planes - 3)]
            if skew == EARLY:   # planes 2 and up before the step's GEMMs
                for step in self.steps:
                    if step and step[0][1] is None:
                        step[:] = ([a for a in step if a[1] is not None and a[1] > 1]
                                   + [a for a in step if a[1] is None or a[1] <= 1])
        else:
            self.steps = [[(j, k) for j, k in [(i, 0)] + [(i - skew * k, k)
                                                          for k in range(1, planes)]
                           if 0 <= j < n_tiles] for i in range(n_tiles + skew * (planes - 1))]
        if lead:        # tile i + 1's start (-1: no store) before step i's actions
            for i, step in enumerate(self.steps):
                step[:0] = [(j, -1) for j in ((0, 1) if i == 0 else (i + 1,)) if j < n_tiles]
        order = [a for step in self.steps for a in step if a[1] is not None]
        event = {a: e for e, a in enumerate(a for a in order if a[1] >= 0)}
        self._pop, self._push, last = set(), set(), -1
        for j, k in order:
            need = (event[(j, k - 1)] if k > 0 else
                    -1 if k == 0 and lead else
                    event[(j - slots, planes - 1)] if j >= slots else -1)
            if need > last:
                self._pop.add((j, k))
                self._push.add(need)
                last = need
        self._event = event
        if mid and any(k == 0 for _, k in self._pop):
            # (i, 0) is acquired before its step's shifts (its GEMMs' first half), not
            # after them as listed: a pop there would take the token of a shift's event.
            # With 2 planes slots the slot's previous tile stored its last plane before
            # the events the previous step's shifts popped, so none is needed.
            raise ValueError(f"PlanePipeline: MID with {slots} slots for {planes} planes: "
                             "a tile's GEMMs would wait for a store token")

    def acquire(self, action) -> None:
        """Before compute's first write for ``action`` (a ``(tile, plane)``)."""
        if action in self._pop:
            self.stream.dep_pop(Unit.STORE, Unit.COMPUTE)

    def release(self, action) -> None:
        """After compute's last write for ``action``."""
        self.stream.dep_push(Unit.COMPUTE, Unit.STORE)

    def store_begin(self, action) -> None:
        self.stream.dep_pop(Unit.COMPUTE, Unit.STORE)

    def store_end(self, action) -> None:
        if self._event[action] in self._push:
            self.stream.dep_push(Unit.STORE, Unit.COMPUTE)
