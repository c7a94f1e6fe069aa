"""Cycle prediction of an instruction stream (an event model of VTA's three modules).

Where :func:`.search.estimate` predicts a tiling from its shape (to rank tilings),
this model runs the actual stream: the load, compute and store modules execute their
queues in order, each instruction takes the :class:`.params.EventCost` duration of its
kind, and the dependency tokens carry the time they were pushed, so overlap
(and the lack of it) comes out exactly as the tokens allow. It is what the
benches report as "predicted" cycles when no RTL backend is available, and the one
predicted figure every report shows for a layer (:func:`program_prediction` of its
kernel: ``compile --report``, ``run --profile``, the demo, the sweep).

With :attr:`.params.EventCost.shared_read_port` all LOADs share the one DRAM read
port (the compute module's first, with ``read_priority_wait``, as ``hw/top.py``'s
arbiter grants them: the load module's LOAD in progress stays open until no compute
LOAD can start before its end, and every compute beat granted meanwhile pushes it
back). Not modelled: fetch's reads on that port, DRAM latency beyond the fixed
per-instruction cost, and command-queue capacity.
"""

from __future__ import annotations

from collections import OrderedDict, deque
import bisect
import hashlib
import math
from dataclasses import dataclass

from ....hw.alu import REQUANT_OPS
from ....hw.isa import AluOp, MemType, Opcode, isa_for
from ....hw.spec import (DEP_QUEUES, DMA_READ_AHEAD_BEATS, INSN_BYTES, OPCODE_BITS, PIPELINE,
                         TOKEN_QUEUES, Unit, dispatch_unit)
from .geometry import MAX_BURST
from .params import RTL_COST, EventCost

#: The ``requant2`` extension's ALU opcode REQ.
REQ_OPCODE = int(AluOp.REQ)

__all__ = ["StreamPrediction", "UnitInterval", "predict_stream", "stream_traffic", "uop_sram",
           "fetch_cycles", "program_stream", "program_prediction", "program_facts"]


@dataclass(frozen=True)
class UnitInterval:
    """One modelled interval of a unit, in cycles from the start of the stream:
    ``kind`` is ``"busy"`` (executing instruction ``what``, e.g. ``"GEMM"``) or
    ``"wait"`` (blocked on popping the token queue(s) ``what``, e.g. ``"l2g"``)."""

    start: float
    end: float
    kind: str
    what: str


@dataclass(frozen=True)
class StreamPrediction:
    """Predicted cycles of a stream and the busy cycles of each module.

    ``intervals`` (with ``predict_stream(..., intervals=True)``) maps each unit name,
    ``"fetch"`` included, to its :class:`UnitInterval` list in time order; ``busy`` then
    also has the fetch unit's busy cycles.
    """

    cycles: int
    busy: dict
    gemm_uops: int
    alu_uops: int
    intervals: dict | None = None


def fetch_cycles(config) -> int:
    """Modelled cycles fetch spends on one instruction: the bus beats of its bytes."""
    return -(-INSN_BYTES // config.bus_bytes)


def _fetch_intervals(insns, config, fetched=()) -> list:
    # Fetch reads each instruction in its bus beats, ending at ``fetched[k]`` (the times
    # :class:`_Dispatch` modelled: it waits for room in the buffer and the queues), else
    # back to back (command-queue capacity not modelled).
    step = fetch_cycles(config)
    out, end = [], 0.0
    for k, insn in enumerate(insns):
        end = fetched[k] if k < len(fetched) else end + step
        out.append(UnitInterval(end - step, end, "busy", Opcode(insn.opcode).name))
    return out


def stream_traffic(insns, config) -> dict:
    """DRAM bytes a stream moves, by fsim's counter names (reference 4.6)."""
    out = dict(inp_load_nbytes=0, wgt_load_nbytes=0, acc_load_nbytes=0, uop_load_nbytes=0,
               out_store_nbytes=0)
    names = {MemType.INP: "inp_load_nbytes", MemType.WGT: "wgt_load_nbytes",
             MemType.ACC: "acc_load_nbytes", MemType.UOP: "uop_load_nbytes"}
    elem = _elem_bytes(config)
    for insn in insns:
        op, f = insn.opcode, insn.fields
        if (op != Opcode.LOAD and op != Opcode.STORE) or f["x_size"] == 0:
            continue
        n = f["x_size"] * f["y_size"]
        if op == Opcode.STORE:
            out["out_store_nbytes"] += n * config.out_elem_bytes
        else:
            mt = _mem_type(f["memory_type"], elem)
            out[names[mt]] += n * elem[mt]
    return out


def _elem_bytes(config) -> dict:
    """Element bytes by memory type (int value), looked up once per stream."""
    return {int(m): config.elem_bytes(m) for m in MemType}


def _mem_type(value, elem) -> int:
    """A memory-type field's value, checked (``MemType(value)`` raises for an illegal one)."""
    return value if value in elem else MemType(value)


def _duration(insn, bus_bytes: int, cost: CostModel, elem: dict):
    """(cycles, gemm uops, alu uops) of one instruction (``elem``: :func:`_elem_bytes`,
    ``bus_bytes``: the config's)."""
    op, f = insn.opcode, insn.fields
    if op == Opcode.LOAD or op == Opcode.STORE:
        if f["x_size"] == 0:
            return 1, 0, 0
        mem = MemType.OUT if op == Opcode.STORE else _mem_type(f["memory_type"], elem)
        n = f["x_size"] * f["y_size"]
        pads = 0
        if op == Opcode.LOAD and mem != MemType.UOP:
            xt = f["x_pad_0"] + f["x_size"] + f["x_pad_1"]
            pads = xt * (f["y_pad_0"] + f["y_size"] + f["y_pad_1"]) - n
        beats = -(-n * elem[mem] // bus_bytes)
        if mem == MemType.UOP and cost.uop_write_cycles:
            beats = max(beats, n)       # the narrow writer: a micro-op per cycle
        row, fixed = cost.dma_row_cycles, cost.dma_insn_cycles
        if op == Opcode.STORE:
            if cost.store_row_cycles is not None:
                row = cost.store_row_cycles
            if cost.store_insn_cycles is not None:
                fixed = cost.store_insn_cycles
        return fixed + beats + pads + f["y_size"] * row, 0, 0
    if op == Opcode.GEMM or op == Opcode.ALU:
        uops = _loop_uops(insn)
        if op == Opcode.GEMM:       # gemm_uops counts like gemm_counter (no resets)
            return (cost.insn_cycles + uops * cost.gemm_uop_cycles,
                    0 if f["reset_reg"] else uops, 0)
        per = cost.alu_imm_cycles if f["use_imm"] else cost.alu_tensor_cycles
        if f["alu_opcode"] in REQUANT_OPS:
            per = max(per, cost.requant_uop_cycles)
        return cost.insn_cycles + uops * per, 0, uops
    return 1, 0, 0


class _ReadPort:
    """The one DRAM read port: the cycles in which it moves a beat. A LOAD's beats take
    the free cycles from the time it may start on, split across gaps as the arbiter
    interleaves bursts.

    With ``priority`` (``hw/top.py``'s ``READ_PRIORITY``: the arbiter grants the compute
    module's loaders first), a priority LOAD's beats wait for the other beats in flight,
    then only for other priority beats. The load module's LOAD in progress is *open*
    (:meth:`open`) until no priority LOAD can start before its end any more: its beats
    take the cycles the priority beats leave, so every priority beat granted meanwhile
    pushes its end back by a cycle, as on the RTL (:meth:`commit` fixes its spans).

    A priority LOAD waits for at most ``priority`` cycles of the beats in flight (the
    arbiter's read-ahead and one burst: the phase of the load module's bursts is not
    modelled)."""

    def __init__(self, priority: int | None = None, ahead: int = DMA_READ_AHEAD_BEATS):
        self.ahead = ahead
        self.busy: list[list[float]] = []          # sorted, disjoint [start, end)
        self.first = [] if priority is not None else None    # the priority beats alone
        self.wait = priority
        self.pending = None                        # the open LOAD: (start, beats)
        self._spans = None                         # open_spans(), until a reservation

    def reserve(self, t: float, beats: int, first: bool = False) -> float:
        """Take ``beats`` free cycles from ``t`` on; the end of the last one. ``first``:
        a priority client's LOAD (with ``priority`` only)."""
        if first and self.first is not None:
            # the beats in flight (the open LOAD's too): at most ``wait`` cycles of them
            for busy in (self.busy, self.open_spans()[0]):
                i = bisect.bisect_right(busy, [t, float("inf")]) - 1
                if i >= 0 and busy[i][1] > t:
                    wait = self.wait
                    if busy is not self.busy and self.burst:
                        wait = min(wait, self._in_flight(busy, t))
                    t = min(busy[i][1], t + wait)
                    break
            taken, t = _take(self.first, t, beats)
            for span in taken:
                _insert(self.first, list(span))
                _insert(self.busy, list(span))
            self._spans = None
            return t
        taken, t = _take(self.busy, t, beats)
        for span in taken:
            _insert(self.busy, span)
        self._spans = None
        return t

    def open(self, t: float, beats: int, burst: int = 0):
        """Start a LOAD of ``beats`` from ``t`` whose spans stay open (priority beats
        reserved before :meth:`commit` push it back); ``burst``: the beats of each of its
        DRAM bursts (0: unknown)."""
        self.pending, self._spans, self.burst = (t, beats), None, burst

    burst = 0

    def _in_flight(self, spans, t: float) -> float:
        """The open LOAD's beats requested and not yet returned at ``t`` (its ``spans``):
        the arbiter issues its next burst once at most ``ahead`` beats are in flight
        (``hw/dma.py``'s read-ahead), so a priority request at ``t`` waits for the
        bursts issued before, not for the whole LOAD."""
        done = sum(min(b, t) - a for a, b in spans if a < t)
        requested = min(self.pending[1], -(-(done + self.ahead) // self.burst) * self.burst)
        return max(0.0, requested - done)

    def open_spans(self) -> tuple:
        """``(spans, end)`` the open LOAD takes if nothing else is reserved (``([], 0)``
        without one)."""
        if self.pending is None:
            return [], 0
        if self._spans is None:
            self._spans = _take(self.busy, *self.pending)
        return self._spans

    def commit(self) -> float:
        """Fix the open LOAD's spans; the end of its last beat."""
        taken, end = self.open_spans()
        for span in taken:
            _insert(self.busy, list(span))
        self.pending = self._spans = None
        return end


def _take(busy, t: float, beats: int) -> tuple:
    """The free spans of ``beats`` cycles from ``t`` on in ``busy``, and the end of the last."""
    i = bisect.bisect_right(busy, [t, float("inf")]) - 1
    if i >= 0 and busy[i][1] > t:
        t = busy[i][1]
    i += 1
    taken = []
    while beats > 0:
        gap_end = busy[i][0] if i < len(busy) else float("inf")
        take = min(beats, gap_end - t)
        if take > 0:
            taken.append([t, t + take])
            beats -= take
            t += take
        if beats > 0:
            t = busy[i][1]
            i += 1
    return taken, t


def _insert(busy, span):
    """Add ``span`` to ``busy``, merged with the spans it touches (the list stays the
    unique sorted list of disjoint, non-touching spans)."""
    j = bisect.bisect_left(busy, span)
    if j > 0 and busy[j - 1][1] >= span[0]:
        j -= 1
        span = [busy[j][0], max(busy[j][1], span[1])]
    k = j
    while k < len(busy) and busy[k][0] <= span[1]:
        span[1] = max(span[1], busy[k][1])
        k += 1
    busy[j:k] = [span]


def _read_beats(insn, bus_bytes: int, elem, pads: bool = False, uop_writes: bool = False) -> int:
    """Cycles a LOAD holds the DRAM read port (0 for anything else): its read beats, and
    with ``pads`` (:attr:`.params.EventCost.pads_on_port`) one per pad element; with
    ``uop_writes`` (:attr:`.params.EventCost.uop_write_cycles`) a LOAD UOP's one per
    micro-op."""
    f = insn.fields
    if insn.opcode != Opcode.LOAD or f["x_size"] == 0:
        return 0
    n = f["x_size"] * f["y_size"]
    beats = -(-n * elem[f["memory_type"]] // bus_bytes)
    if uop_writes and f["memory_type"] == MemType.UOP:
        beats = max(beats, n)
    if pads and f["memory_type"] != MemType.UOP:
        xt = f["x_pad_0"] + f["x_size"] + f["x_pad_1"]
        beats += xt * (f["y_pad_0"] + f["y_size"] + f["y_pad_1"]) - n
    return beats


def _burst_beats(insn, bus_bytes: int, elem) -> int:
    """Beats of each DRAM burst of a LOAD (one per row, at most MAX_BURST)."""
    f = insn.fields
    return max(1, min(MAX_BURST, -(-f["x_size"] * elem[f["memory_type"]] // bus_bytes)))


def predict_stream(insns, config, cost: EventCost = RTL_COST, *,
                   intervals: bool = False, uops=None, sram=None) -> StreamPrediction:
    """Predict the cycles of a decoded stream (``Runtime.instructions`` after finalize,
    or any list of :class:`~vtakit.hw.isa.Insn`).

    With ``intervals=True`` the prediction also lists when each unit (fetch, load,
    compute, store) is busy on an instruction or waits for a dependency token
    (:attr:`StreamPrediction.intervals`).

    ``uops`` (the uop staging the stream's LOAD UOPs read, by ``dram_base``): with
    ``config.compute_overlap`` the compute module's ALU lane is modelled
    (:func:`_lane_plan`: which ALUs run in it, the banks of the GEMMs' rows); without
    ``uops`` (or the key) the compute module is one pipeline. ``sram`` is what the uop
    SRAM holds when the stream starts (:func:`uop_sram` of the stream before: a warm
    start's kernel uses micro-ops the stream before loaded; default: zeros).

    With ``config.uop_stream`` (``UOP_STREAM``) a LOAD UOP without push flags holds the
    compute module only :attr:`~.params.EventCost.uop_stream_cycles`; its beats go on the
    read port as any LOAD's, and the compute instructions after it wait as
    :func:`_stream_wait` says.

    Raises
    ------
    ValueError
        If the stream deadlocks (a pop whose token is never pushed).
    """
    queues = {m: [] for m in PIPELINE}
    order = []          # (unit, position in its queue) of each instruction, in fetch order
    for insn in insns:
        m = dispatch_unit(insn.opcode, insn.fields.get("memory_type"))
        order.append((m, len(queues[m])))
        queues[m].append(insn)
    dispatch = _Dispatch(order, queues, cost.cmd_queue_depth, fetch_cycles(config),
                         cost.fetch_latency)
    # compute positions whose loop overlaps the next one's dispatch (CostModel.overlap_cycles)
    saved = (0 if cost.overlap_cycles is None
             else cost.insn_cycles - cost.overlap_cycles)
    overlaps = _overlaps(queues[Unit.COMPUTE]) if saved else frozenset()
    late = _requant_late(queues[Unit.COMPUTE], overlaps, cost.requant_late_cycles)
    late.update(_req_late(queues[Unit.COMPUTE], overlaps, cost.req_late_cycles))
    # what the late writes add when the instruction drains (push flags and no room)
    drain_late = (_requant_late(queues[Unit.COMPUTE], frozenset(), cost.requant_late_cycles)
                  if overlaps else {})
    if overlaps:
        drain_late.update(_req_late(queues[Unit.COMPUTE], frozenset(), cost.req_late_cycles))
    # per token queue the time the compute module's last token was pushed: an overlapped
    # push travels with the last micro-op and needs the queue free of one still travelling
    landed = dict.fromkeys(TOKEN_QUEUES, float("-inf"))
    tokens = {q: deque() for q in TOKEN_QUEUES}
    elem, bus = _elem_bytes(config), config.bus_bytes
    plan = (_lane_plan(queues[Unit.COMPUTE], config, uops, sram)
            if uops is not None and getattr(config, "compute_overlap", 0) else None)
    lane: list = []         # (bank, retire time) of the lane's instructions, in order
    lane_issue = 0.0        # when the lane's sequencer is free for the next one
    lane_gap = 0.0          # requant2 in the lane: when a base ALU may issue after a REQ
    main_end = 0.0          # when the GEMM lane's pipeline is empty (written and pushed)
    port = _ReadPort(cost.read_priority_wait) if cost.shared_read_port else None
    # UOP_STREAM: the compute module's LOAD UOP in flight, (first uop index, micro-ops,
    # time its beats start, cycles per micro-op, time the load is done), else None
    streams = bool(getattr(config, "uop_stream", 0))
    stream = None
    pops = {m: [(flag, name) for flag, name in DEP_QUEUES[m].items()
                if name and flag.startswith("pop")] for m in queues}
    pushes = {m: [(flag, name) for flag, name in DEP_QUEUES[m].items()
                  if name and flag.startswith("push")] for m in queues}
    time = dict.fromkeys(queues, 0.0)
    busy = dict.fromkeys(queues, 0.0)
    pos = dict.fromkeys(queues, 0)
    spans = {m: [] for m in queues}
    gemm = alu = 0
    # what an instruction's timing needs, once per Insn object (a stream repeats them)
    facts: dict = {}

    def facts_of(insn, m):
        f = insn.fields
        got = facts[id(insn)] = (
            tuple(name for flag, name in pops[m] if f.get(flag)),
            _duration(insn, bus, cost, elem),
            port and _read_beats(insn, bus, elem, cost.pads_on_port, cost.uop_write_cycles),
            tuple(name for flag, name in pushes[m] if f.get(flag)),
            insn.opcode == Opcode.FINISH)
        return got

    # With ``store_insn_cycles``: whether the store module's last instruction was a STORE
    # that moved data (the next STORE's fixed cost then overlaps its beats).
    store_ahead = cost.store_insn_cycles is not None
    last_store = False

    def result(cycles):
        if not intervals:
            return StreamPrediction(cycles, _by_name(busy), gemm, alu)
        fetch = _fetch_intervals(insns, config, dispatch.fetched if dispatch.depth else ())
        return StreamPrediction(cycles, {"fetch": float(sum(i.end - i.start for i in fetch)),
                                         **_by_name(busy)}, gemm, alu,
                                {"fetch": fetch, **_by_name(spans)})
    # The load module's LOAD whose beats are open on the read port (a priority LOAD of
    # the compute module may still push it back): (module, instruction state), else None.
    held = None
    priority = port is not None and port.wait is not None
    producer = {name: unit for name, (unit, _) in TOKEN_QUEUES.items()}

    def preempts(end):
        # Whether the compute module may still start a LOAD before ``end``: its next
        # command can run before then, or waits for a token the store module pushes.
        k, q = pos[Unit.COMPUTE], queues[Unit.COMPUTE]
        if k >= len(q):
            return False
        names = (facts.get(id(q[k])) or facts_of(q[k], Unit.COMPUTE))[0]
        at = dispatch.at(Unit.COMPUTE, k) if dispatch.depth else 0.0
        if at is None:
            return False
        missing = [n for n in names if not tokens[n]]
        if missing:
            return all(producer[n] is not held[0] for n in missing)
        return max([time[Unit.COMPUTE], at, *(tokens[n][0] for n in names)]) < end

    def loads_first(start):
        # Whether the load module's next LOAD (tokens at hand) starts before ``start``:
        # its bursts are then in flight when a compute LOAD starting then asks for the
        # port, and the compute module's LOAD must wait for them (the loop may have run
        # the compute module ahead of the load module's earlier LOAD).
        k, q = pos[Unit.LOAD], queues[Unit.LOAD]
        if k >= len(q):
            return False
        names, _, beats, _, _ = facts.get(id(q[k])) or facts_of(q[k], Unit.LOAD)
        if not beats or any(not tokens[n] for n in names):
            return False
        at = dispatch.at(Unit.LOAD, k) if dispatch.depth else 0.0
        return at is not None and max([time[Unit.LOAD], at,
                                       *(tokens[n][0] for n in names)]) < start

    def run(m, insn, start, dur, ready, now, push_at=None):
        # the bookkeeping of an instruction that took [start, start + dur) (its tokens
        # pushed at ``push_at``, by default its end)
        nonlocal gemm, alu
        _, (_, g, a), _, pushed, _ = facts[id(insn)]
        if intervals:
            if start > now:
                late = "+".join(n for n, t in ready.items() if t > now)
                spans[m].append(UnitInterval(now, start, "wait", late))
            spans[m].append(UnitInterval(start, start + dur, "busy", Opcode(insn.opcode).name))
        gemm, alu = gemm + g, alu + a
        busy[m] += dur
        push_at = start + dur if push_at is None else push_at
        for name in pushed:
            tokens[name].append(push_at)
            if m is Unit.COMPUTE:
                landed[name] = push_at
        return start + dur

    fetched_at = dispatch.times     # (grows as dispatch.at models fetch)
    progress = True
    while progress or held:
        force = not progress    # nothing else moves: the open LOAD ends as it stands
        progress = False
        for m, q in queues.items():
            k, now = pos[m], time[m]
            compute, index = m is Unit.COMPUTE, dispatch.index[m]
            if held and held[0] is m:
                insn, start, dur, ready = held[1]
                if not force and preempts(port.open_spans()[1]):
                    continue
                now = run(m, insn, start, max(dur, port.commit() - start), ready, now)
                held, k, progress = None, k + 1, True
            while k < len(q):
                insn = q[k]
                names, (dur, _, _), beats, pushed, finish = (facts.get(id(insn))
                                                             or facts_of(insn, m))
                full = None     # the drained duration of an overlapped loop that pushes
                if saved and compute and k in overlaps:
                    if pushed:
                        full = dur + drain_late.get(k, 0)
                    dur -= saved
                if late and compute:
                    dur += late.get(k, 0)
                if dispatch.depth:
                    j = index[k]    # dispatch.at(m, k), its list read when it has it
                    at = fetched_at[j] if j < len(fetched_at) else dispatch.at(m, k)
                    if at is None:
                        break       # not in its command queue yet (fetch waits for room)
                    now = max(now, at)
                if not names:
                    ready, start = {}, now
                elif any(not tokens[n] for n in names):
                    break
                else:
                    start = max([now, *(tokens[n][0] for n in names)])
                if stream is not None and compute:
                    start = max(start, _stream_wait(insn, stream, pushed, finish, cost))
                kind = plan[k] if plan is not None and compute else None
                if kind is not None:
                    start, lane = _lane_wait(kind, start, now, main_end, lane, cost)
                if (beats and held and compute
                        and start + cost.dma_insn_cycles >= port.open_spans()[1]):
                    break       # the open LOAD ends first (and the load module goes on)
                if (beats and priority and not held and compute
                        and loads_first(start)):
                    break       # the load module's LOAD asks first: it goes first
                if names:
                    ready = {n: tokens[n].popleft() for n in names}
                progress = True
                if store_ahead and m is Unit.STORE:
                    moves = insn.opcode == Opcode.STORE and insn.fields["x_size"] != 0
                    if moves and last_store:
                        # taken (popped, checked, its first OUT row read) while the STOREs
                        # before streamed their beats: its fixed cost hides behind them
                        took = max([at if dispatch.depth else 0.0, *ready.values()])
                        dur += max(start + cost.store_behind_cycles,
                                   took + cost.store_insn_cycles) - start \
                            - cost.store_insn_cycles
                    last_store = moves
                if dispatch.depth:
                    dispatch.accepted[m].append(now)
                if kind is not None and kind[0] == "lane":
                    # the ALU lane: the GEMM lane hands it over in a cycle; the lane runs
                    # its micro-ops after the ones queued before, its writes land (and
                    # its tokens are pushed) lane_drain_cycles after its last issue
                    n = _loop_uops(insn)
                    req = _is_req(insn)     # (lane_req: on the REQ pipeline, written late)
                    issue = max(start + cost.lane_start_cycles, lane_issue,
                                0.0 if req else lane_gap) + n
                    lane_issue = issue
                    retire = issue + cost.lane_drain_cycles
                    if req:     # REQ.M / REQ.P too: they retire in order, after the chain
                        retire += cost.req_late_cycles
                        lane_gap = issue + cost.req_late_cycles - 1
                    if pushed:      # pushes a cycle after; the lane's last to start till then
                        retire += 1
                        lane_issue = retire
                    lane.append((kind[1], retire))
                    now = run(m, insn, start, 1.0, ready, now, retire)
                    k += 1
                    continue
                if beats:
                    if priority and not compute:
                        port.open(start + cost.dma_insn_cycles, beats,
                                  _burst_beats(insn, bus, elem) if cost.burst_phase else 0)
                        held = m, (insn, start, dur, ready)
                        break
                    beats_end = port.reserve(start + cost.dma_insn_cycles, beats,
                                             compute)
                    dur = max(dur, beats_end - start)
                if (streams and compute and not pushed
                        and insn.opcode == Opcode.LOAD and insn.fields["x_size"]
                        and insn.fields["memory_type"] == MemType.UOP):
                    # streamed: the module goes on after its command; the micro-ops
                    # arrive at the rate of its beats (as the load's own duration counts
                    # them, :attr:`.params.EventCost.uop_write_cycles`)
                    n = insn.fields["x_size"]
                    rate = (beats or _read_beats(insn, bus, elem, False,
                                                 cost.uop_write_cycles)) / n
                    first = (beats_end - beats if beats and port is not None
                             else start + dur - rate * n)
                    stream = (insn.fields["sram_base"], n, first, rate, start + dur)
                    dur = cost.uop_stream_cycles
                push_at = None
                if full is not None:
                    # the token is pushed when the last write lands, as after a drain;
                    # the next command overlaps only if no token to the same queue is
                    # still travelling (the RTL's registered room: two cycles after it landed)
                    if all(start + dur >= landed[n] + 2 for n in pushed):
                        push_at = start + full
                    else:
                        dur = full
                if kind is not None:
                    if pushed and lane and max(r for _, r in lane) > start + dur:
                        # pushes in program order, the lane's first: it neither overlaps
                        # the next command nor completes until the lane is empty
                        drained_at = start + (dur if full is None and k not in overlaps
                                              else full if full is not None
                                              else dur + saved)
                        push_at = max(drained_at, max(r for _, r in lane))
                        dur = push_at - start
                    main_end = max(main_end, start + (dur if full is None else full)
                                   + (saved if k in overlaps and full is None else 0))
                now = run(m, insn, start, dur, ready, now, push_at)
                k += 1
                if finish:
                    pos[m], time[m] = k, now
                    return result(int(round(now)))
            pos[m], time[m] = k, now
    stuck = {str(m): pos[m] for m in queues if pos[m] < len(queues[m])}
    if stuck:
        raise ValueError(f"predict_stream: the stream deadlocks (module -> position of the "
                         f"instruction that waits for a token): {stuck}")
    return result(int(round(max(time.values()))))


def _stream_wait(insn, stream, pushed, finish, cost) -> float:
    """``UOP_STREAM``: the earliest start of the compute module's ``insn`` behind the
    streamed LOAD UOP ``stream`` (:func:`predict_stream`)."""
    base, n, first, rate, done = stream
    op = insn.opcode
    if pushed or finish or (op == Opcode.LOAD and insn.fields["x_size"]
                            and insn.fields["memory_type"] == MemType.UOP):
        return done
    if (op == Opcode.GEMM or op == Opcode.ALU) and _loop_uops(insn):
        f = insn.fields
        last = min(f["uop_end"], base + n) - 1
        if f["uop_bgn"] < base + n and last >= base:
            return first + math.ceil((last - base + 1) * rate) + cost.uop_stream_wait_cycles
    return 0.0


def uop_sram(insns, config, uops, sram=None):
    """What the uop SRAM holds after ``insns`` (their LOAD UOPs, reading the staging
    ``uops`` by ``dram_base``), from ``sram`` (default: zeros); a new array."""
    import numpy as np
    uops = np.asarray(uops, dtype=np.uint32)
    out = (np.zeros(config.uop_depth, dtype=np.uint32) if sram is None
           else np.array(sram, dtype=np.uint32))
    for insn in insns:
        _load_uop(insn, uops, out)
    return out


def _load_uop(insn, uops, sram) -> bool:
    """Apply ``insn`` to ``sram`` when it is a LOAD UOP that moves data (True)."""
    f = insn.fields
    if insn.opcode != Opcode.LOAD or not f["x_size"] or f["memory_type"] != MemType.UOP:
        return False
    a, n = f["sram_base"], f["x_size"]
    got = uops[f["dram_base"]:f["dram_base"] + n]
    sram[a:a + len(got)] = got
    return True


def _lane_plan(queue, config, uops, sram=None) -> list:
    """With ``COMPUTE_OVERLAP`` (``hw/compute.py``, ``hw/compute_lane.py``): per position
    in the compute ``queue`` how it meets the ALU lane: ``("lane", bank)`` an ALU the
    lane runs (one micro-op, non-empty loops, a base opcode or, with ``requant2``
    (:func:`~vtakit.hw.compute_lane.lane_req`), REQ in any mode, its dst and src rows in the
    bank of its dst, as the RTL's footprint check computes them from the micro-op the
    uop SRAM holds then); ``("gemm", banks)`` a GEMM with micro-ops (the banks of its
    dst rows: a micro-op there waits for the lane's instructions of that bank);
    ``("alu", None)`` an ALU the lane refuses (after its footprint check, it waits for
    the lane to drain); ``("beside", bank)`` a LOAD ACC without push flags (it runs beside the lane when
    the lane has nothing in ``bank``); ``("drain", None)`` anything else (it waits for
    the lane to drain). ``uops``: the staging the LOAD UOPs read (by ``dram_base``);
    ``sram``: the uop SRAM at the start (default: zeros)."""
    import numpy as np
    from ....hw.alu import late_ops
    from ....hw.compute_lane import lane_req
    from ....hw.isa import isa_for
    isa = isa_for(config)
    # the late opcodes stay in the GEMM lane, but with requant2 the lane runs REQ too
    late = set() if lane_req(config) else {int(op) for op in late_ops(config)}
    uops = np.asarray(uops, dtype=np.uint32)
    sram = (np.zeros(config.uop_depth, dtype=np.uint32) if sram is None
            else np.array(sram, dtype=np.uint32))
    shift = config.log_acc_depth - 1
    half = config.acc_depth // 2
    out = []
    # the kind of a GEMM/ALU by the fields it reads, while the uop SRAM stays as it is
    # (a stream repeats its loops between LOAD UOPs)
    loops: dict = {}
    for insn in queue:
        op, f = insn.opcode, insn.fields
        kind = ("drain", None)
        if op == Opcode.LOAD and f["x_size"]:
            if _load_uop(insn, uops, sram):
                loops.clear()
            elif (f["memory_type"] == MemType.ACC and not f.get("push_prev_dep")
                  and not f.get("push_next_dep")):
                xt = f["x_pad_0"] + f["x_size"] + f["x_pad_1"]
                rows = xt * (f["y_pad_0"] + f["y_size"] + f["y_pad_1"])
                lo, hi = f["sram_base"], f["sram_base"] + rows - 1
                if (lo >= half) == (hi >= half) and hi < config.acc_depth:
                    kind = ("beside", int(lo >= half))
        elif (op == Opcode.GEMM or op == Opcode.ALU) and _loop_uops(insn):
            key = (op, f["uop_bgn"], f["uop_end"], f["iter_out"], f["iter_in"],
                   f["dst_factor_out"], f["dst_factor_in"], f.get("src_factor_out"),
                   f.get("src_factor_in"), f.get("alu_opcode"), f.get("use_imm"))
            kind = loops.get(key)
            if kind is None:
                kind = loops[key] = _loop_kind(insn, isa, sram, late, shift)
        out.append(kind)
    return out


def _loop_kind(insn, isa, sram, late, shift) -> tuple:
    """:func:`_lane_plan`'s kind of a GEMM/ALU with micro-ops (``sram``: the uop SRAM
    then; ``late``: the opcodes the lane leaves to the GEMM lane; ``shift``: the bank
    bit of an ACC row)."""
    import numpy as np
    op, f = insn.opcode, insn.fields
    io, ii = f["iter_out"] - 1, f["iter_in"] - 1
    d = isa.decode_uops(sram[f["uop_bgn"]:f["uop_end"]])
    dst = d["dst_idx"]
    last = io * f["dst_factor_out"] + ii * f["dst_factor_in"]
    if op == Opcode.GEMM:
        banks = np.concatenate([dst >> shift, (dst + last) >> shift]).tolist()
        return ("gemm", frozenset(banks))
    if f["uop_end"] - f["uop_bgn"] == 1 and f["alu_opcode"] not in late:
        x, bank = int(dst[0]), int(dst[0]) >> shift & 1
        ok = (x + last) >> shift == bank
        if ok and not f["use_imm"]:
            s = int(d["src_idx"][0])
            ok = (s >> shift == bank and (s + io * f["src_factor_out"]
                                          + ii * f["src_factor_in"]) >> shift == bank)
        if ok:
            return ("lane", bank)
    return ("alu", None)


def _lane_wait(kind, start, now, main_end, lane, cost) -> tuple:
    """``(start, lane)``: when a compute instruction of :func:`_lane_plan`'s ``kind``
    may start beside the ALU ``lane`` (its (bank, retire) entries; the ones retired by
    then are dropped), the earliest being ``start``; ``now``: when the GEMM lane took
    it; ``main_end``: when the GEMM lane's pipeline is empty."""
    what, bank = kind
    if what == "lane":      # the footprint check, an empty GEMM pipeline, room in the lane
        start = max(start, now + cost.lane_check_cycles, main_end)
        live = [r for _, r in lane if r > start]
        if len(live) >= LANE_DEPTH:
            start = max(start, live[-LANE_DEPTH])
    elif what == "gemm":    # its micro-ops wait for the lane's ones of their banks
        start = max([start, *(r for b, r in lane if b in bank)])
    elif what == "beside" and any(b == bank and r > start for b, r in lane):
        start = max([start, *(r for _, r in lane)])
    elif what == "drain":
        start = max([start, *(r for _, r in lane)])
    elif what == "alu":     # the footprint check too (every ALU waits for it)
        start = max([start, now + cost.lane_check_cycles, *(r for _, r in lane)])
    return start, [e for e in lane if e[1] > start]


#: Instructions the compute module's ALU lane queues (``hw/compute_lane.py``).
LANE_DEPTH = 16


class _Dispatch:
    """Fetch feeding the three command queues (:attr:`.params.EventCost.cmd_queue_depth`):
    fetch reads the stream in order, ``step`` cycles per instruction (its bus beats),
    the first ``latency`` cycles after the start,
    into a buffer of :data:`FETCH_BUFFER` instructions, and dispatches each once its
    queue has room, i.e. once the unit accepted the command ``depth`` places before it
    in that queue (a unit accepts a command when it is free, then waits for its tokens);
    a full queue holds every later instruction of the stream, whatever its unit."""

    def __init__(self, order, queues, depth, step, latency=0):
        self.order, self.depth, self.step, self.latency = order, depth, step, latency
        self.index = {m: [] for m in queues}        # queue position -> stream index
        for g, (m, _) in enumerate(order):
            self.index[m].append(g)
        self.accepted = {m: [] for m in queues}     # accept time per queue position
        self.fetched, self.times = [], []           # per stream index

    def at(self, m, k):
        """The cycle the ``k``-th command of unit ``m`` is in its queue, or None while
        that depends on a command not yet accepted."""
        g = self.index[m][k]
        times, fetched = self.times, self.fetched
        while len(times) <= g:
            j = len(times)
            u, p = self.order[j]
            room = 0.0
            if p >= self.depth:
                acc = self.accepted[u]
                if len(acc) <= p - self.depth:
                    return None
                room = acc[p - self.depth]
            f = (fetched[j - 1] if j else self.latency) + self.step
            if j >= FETCH_BUFFER:       # the buffer's slot frees at a dispatch
                f = max(f, times[j - FETCH_BUFFER] + self.step)
            fetched.append(f)
            times.append(max(f, room, times[j - 1] if j else 0.0))
        return times[g]


#: Instructions fetch buffers between DRAM and dispatch (``hw/fetch.py``'s default).
FETCH_BUFFER = 8


def _loop_uops(insn) -> int:
    """Micro-ops a GEMM/ALU runs (0 for anything else)."""
    if insn.opcode != Opcode.GEMM and insn.opcode != Opcode.ALU:
        return 0
    f = insn.fields
    return f["iter_out"] * f["iter_in"] * max(0, f["uop_end"] - f["uop_bgn"])


def _overlaps(queue) -> frozenset:
    """Positions in the compute ``queue`` of loops followed by a loop with micro-ops or a
    LOAD UOP: the RTL dispatches the next one while the first drains (a loop with push
    flags pushes when its last write lands, and only if no token it pushed before to the
    same queue is still travelling: :func:`predict_stream` checks that; ``requant2``'s
    REQ.M/REQ.P setups with push flags drain)."""
    out = set()
    for k in range(len(queue) - 1):
        f, nxt = queue[k].fields, queue[k + 1]
        pushes = f.get("push_prev_dep") or f.get("push_next_dep")
        if (_loop_uops(queue[k]) and not (pushes and _is_req(queue[k]) and f["imm"] != 0)
                and (_loop_uops(nxt) or (nxt.opcode == Opcode.LOAD and nxt.fields["x_size"]
                                         and nxt.fields["memory_type"] == MemType.UOP))):
            out.add(k)
    return frozenset(out)


def _is_requant(insn) -> bool:
    return insn.opcode == Opcode.ALU and insn.fields["alu_opcode"] in REQUANT_OPS


def _requant_late(queue, overlaps, cycles: int) -> dict:
    """Positions in the compute ``queue`` of requant passes with micro-ops -> the cycles
    their late writes add (:attr:`~.params.EventCost.requant_late_cycles`)."""
    if not cycles:
        return {}
    out = {}
    for k, insn in enumerate(queue):
        n = _loop_uops(insn)
        if not _is_requant(insn) or not n:
            continue
        nxt = queue[k + 1] if k in overlaps else None
        if nxt is None:
            out[k] = cycles
        elif _is_requant(nxt):
            # the next pass reads the rows of this one (the compiler's chains do): its
            # micro-op i issues n + 1 cycles after this one's i, and waits for a write
            # closer than cycles + 1
            out[k] = max(0, cycles - n)
        elif nxt.opcode != Opcode.LOAD:
            out[k] = cycles - 1
    return out


def _is_req(insn) -> bool:
    """An ALU instruction of the ``requant2`` extension's opcode REQ (any mode)."""
    return insn.opcode == Opcode.ALU and insn.fields["alu_opcode"] == REQ_OPCODE


def _req_late(queue, overlaps, cycles: int) -> dict:
    """Positions in the compute ``queue`` of REQ passes (imm 0) with micro-ops -> the
    cycles their late writes add (:attr:`~.params.EventCost.req_late_cycles`): all of
    them when the pass drains (push flags, or nothing dispatched behind it), one less
    when a base GEMM/ALU follows (its first micro-op waits for the last write), none
    when another REQ instruction (the next block's setup) or a LOAD UOP follows."""
    if not cycles:
        return {}
    out = {}
    for k, insn in enumerate(queue):
        if not _is_req(insn) or insn.fields["imm"] != 0 or not _loop_uops(insn):
            continue
        nxt = queue[k + 1] if k in overlaps else None
        if nxt is None:
            out[k] = cycles
        elif not _is_req(nxt) and nxt.opcode != Opcode.LOAD:
            out[k] = cycles - 1
    return out


def program_stream(program) -> list:
    """The instructions a :class:`~vtakit.runtime.Runtime` runs for ``program`` bound
    alone (``rt.bind`` then ``rt.finalize``: the program, the fences and FINISH), without
    a device: ``dram_base`` fields stay slot-relative, every other field is the runtime's
    (what :func:`predict_stream` and :func:`stream_traffic` read)."""
    from ....runtime.builder import finished_alone
    return finished_alone(program)


def program_prediction(program, cost: EventCost = RTL_COST) -> tuple:
    """``(StreamPrediction, stream_traffic dict)`` of :func:`program_stream`; computed once
    per Program object and cost model (kept in ``program.memo``: a Program is immutable),
    so a kernel the compiler already predicted (a re-ranked tiling, a layer without an
    analytic estimate) is not predicted again by the model engine. The traffic dict is
    the caller's own copy."""
    prediction, traffic, _ = program_facts(program, cost)
    return prediction, dict(traffic)


#: Facts of programs that differ only in what the event model does not read, shared
#: across Program objects (:func:`timing_key`; least recently used dropped).
_SHARED_FACTS: OrderedDict = OrderedDict()
SHARED_FACTS_SIZE = 256


def timing_key(program, cost: EventCost) -> tuple:
    """What :func:`program_facts` of ``program`` depends on: the config, the cost model,
    the slots and pending pops, and a digest of the micro-ops and of every instruction
    word, an ALU's immediate reduced to whether it is zero (the model reads only that, of
    REQ passes: a shift or clip amount takes the same cycles whatever its value). Two
    layers that differ only in their requantize shifts and clip bounds (ResNet blocks of
    one shape) share it."""
    imm = isa_for(program.config).alu.by_name["imm"]
    mask, nonzero = imm.mask << imm.offset, 1 << imm.offset
    alu, opcode = int(Opcode.ALU), (1 << OPCODE_BITS) - 1
    digest = hashlib.blake2b(program.uops.tobytes(), digest_size=16)
    for insn in program.insns:
        w = insn.word
        if w & opcode == alu:
            w = (w & ~mask) | (nonzero if w & mask else 0)
        digest.update(w.to_bytes(INSN_BYTES, "little"))
    return (program.config, cost, tuple(program.slots.items()), program.pending_pops,
            digest.digest())


def program_facts(program, cost: EventCost = RTL_COST) -> tuple:
    """``(StreamPrediction, traffic, opcode counts)`` of :func:`program_stream`, memoized
    (:func:`program_prediction`) with the program and across programs of one
    :func:`timing_key`; callers copy the dicts they hand out."""
    key = ("program_prediction", cost)
    got = program.memo.get(key)
    if got is None:
        shared = timing_key(program, cost)
        got = _SHARED_FACTS.get(shared)
        if got is None:
            insns = program_stream(program)
            by_op: dict[str, int] = {}
            for insn in insns:
                by_op[insn.opcode.name] = by_op.get(insn.opcode.name, 0) + 1
            got = (predict_stream(insns, program.config, cost, uops=program.uops),
                   stream_traffic(insns, program.config), by_op)
            _SHARED_FACTS[shared] = got
            while len(_SHARED_FACTS) > SHARED_FACTS_SIZE:
                _SHARED_FACTS.popitem(last=False)
        else:
            _SHARED_FACTS.move_to_end(shared)
        program.memo[key] = got
    return got


def _by_name(per_unit: dict) -> dict:
    """``{unit name: value}`` (``"load"``, ``"compute"``, ``"store"``), as reported."""
    return {str(unit): value for unit, value in per_unit.items()}
