"""The parameters of the two cost models: the tile search's estimate and the event model.

:class:`CostModel` holds the per-operation costs both read (GEMM and ALU micro-ops,
DMA instructions, rows and beats); :class:`SearchCost` adds what the search's
estimate reads alone (``burst_wait``, :mod:`.search`) and :class:`EventCost` what the
event model reads alone (``shared_read_port``, ``overlap_cycles``, :mod:`.events`).
:data:`RTL_COST` is the event model's fit to the RTL; the tile search ranks with
:class:`SearchCost`'s defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....hw.load_engine import MAX_BURST
from ....hw.alu import REQ_STAGES, REQUANT_STAGES
from ....hw.spec import DEFAULT_CMD_DEPTH, DMA_READ_AHEAD_BEATS

__all__ = ["CostModel", "SearchCost", "EventCost", "RTL_COST", "REQ_STAGES"]


@dataclass(frozen=True)
class CostModel:
    """The per-operation costs both models read (:class:`SearchCost` and
    :class:`EventCost` add what each reads alone).

    Attributes
    ----------
    gemm_uop_cycles : float
        Cycles per GEMM micro-op execution (1: fully pipelined).
    alu_imm_cycles, alu_tensor_cycles : float
        Cycles per ALU micro-op execution with an immediate / a tensor operand.
    requant_uop_cycles : float
        Cycles per micro-op of the ``requant`` extension's SRDHM, RSHR and MULSHR (at
        least; the larger of this and the operand kind's cost).
    dma_insn_cycles : int
        Fixed cost of each LOAD/STORE instruction (issue, address, first beat latency).
    dma_row_cycles : int
        Extra cost of each 2-D row (one DRAM burst each).
    insn_cycles : int
        Issue cost of each GEMM/ALU instruction.
    """

    gemm_uop_cycles: float = 1.0
    alu_imm_cycles: float = 1.0
    alu_tensor_cycles: float = 2.0
    requant_uop_cycles: float = 1.0
    dma_insn_cycles: int = 16
    dma_row_cycles: int = 2
    insn_cycles: int = 4


@dataclass(frozen=True)
class SearchCost(CostModel):
    """The tile search's estimate (:mod:`.search`): the common costs and

    Attributes
    ----------
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
    """

    burst_wait: float = 1.0


@dataclass(frozen=True)
class EventCost(CostModel):
    """The event model (:mod:`.events`): the common costs and

    Attributes
    ----------
    overlap_cycles : int or None
        :func:`~vtakit.compiler.ops.perfmodel.predict_stream` only: the issue cost, instead
        of ``insn_cycles``, of a GEMM/ALU whose next compute instruction is a GEMM/ALU
        with micro-ops to run or a LOAD UOP (``hw/compute.py`` dispatches it while the
        first drains; one with push flags pushes when its last write lands, and drains
        when a token of the compute module to the same queue is still travelling);
        None: no such overlap.
    shared_read_port : bool
        :func:`~vtakit.compiler.ops.perfmodel.predict_stream` only: the DRAM read beats of
        every LOAD (the load module's inputs and weights, the compute module's micro-ops
        and accumulators) share one read port, as in ``hw/top.py``'s read arbiter,
        instead of overlapping freely.
    read_priority_wait : int or None
        With ``shared_read_port``: the compute module's LOADs (micro-ops, accumulators)
        go before the load module's waiting bursts, as ``hw/top.py``'s ``READ_PRIORITY``
        has the read arbiter grant them, after at most this many cycles of the load
        module's beats already in flight (the arbiter's read-ahead), and push the load
        module's LOAD in progress back by their beats; None: no priority, every LOAD
        takes the free cycles in turn (:class:`~.events._ReadPort`).
    requant_late_cycles : int
        :func:`~vtakit.compiler.ops.perfmodel.predict_stream` only: the stages a
        ``requant`` micro-op (SRDHM, RSHR, MULSHR) writes after a base one
        (``hw/alu.py``'s REQUANT_STAGES - 1). A requant instruction that drains takes
        this many cycles more; one whose next loop is dispatched while it drains, one
        less when that loop is a base GEMM/ALU (its first micro-op waits for the late
        writes); when it is another requant pass, which reads the rows this one wrote
        (the compiler's chains), this many minus the pass's micro-ops, if more than 0
        (each of its micro-ops issues that many plus one cycles after the one that
        wrote its row, and the RTL holds it until the write is in reach).
    cmd_queue_depth : int or None
        Fetch and the command queues: fetch reads the stream in order, its bus beats per
        instruction (``hw/fetch.py``, an eight-instruction buffer), and dispatches each
        instruction once its module's command queue (this many commands, ``hw/spec.py``'s
        DEFAULT_CMD_DEPTH) has room; a module takes a command when it is free, then waits
        for its tokens. A run of short compute commands (``requant2``'s REQ.M / REQ.P
        setups, two cycles each) is thus fetch-bound, and a full queue holds the later
        commands of every module. None: commands are there when their module wants them.
    fetch_latency : int
        With ``cmd_queue_depth``: cycles from the start of a kernel until fetch's first
        beats arrive, beyond the beats themselves (``hw/fetch.py``'s request, the
        arbiter, the DRAM's latency, the instruction buffer and the command queue's
        register before the module accepts the first command: about 8 on the RTL). The
        same for every tiling of a layer: it moves no choice, and adds what small
        kernels (a batch-1 dense layer of 200 cycles) were predicted short.
    pads_on_port : bool
        With ``shared_read_port``: a padded LOAD holds the read port one cycle per pad
        element too (``hw/load_engine.py`` writes a pad per cycle and its one-element
        buffer stops the shared return channel meanwhile).
    burst_phase : bool
        With ``read_priority_wait``: a compute-module LOAD asking while the load module's
        LOAD streams waits for the beats the arbiter already requested (it issues the next
        burst, one row of at most MAX_BURST beats, once at most DMA_READ_AHEAD_BEATS are in
        flight), not for the whole ``read_priority_wait``: behind rows of 20 beats about
        84 cycles at most.
    req_late_cycles : int
        :func:`~vtakit.compiler.ops.perfmodel.predict_stream` only: as
        ``requant_late_cycles`` for the ``requant2`` extension's REQ pass (imm 0),
        ``hw/alu.py``'s REQ_STAGES - 1 on the RTL. Its setup micro-ops (REQ.M, REQ.P)
        write no SRAM and add nothing; a REQ pass followed by another REQ instruction
        (the next block's setup, which reads other rows) adds nothing either.
    uop_write_cycles : bool
        A LOAD UOP takes a cycle per micro-op, not per bus beat: the load engine's
        narrow writer (``hw/load_engine.py``, elements narrower than the bus) writes one
        micro-op per cycle to the uop SRAM and takes the next beat only once it has
        written the last one of the beat it holds, so on a 64-bit bus a LOAD UOP of N
        micro-ops holds the shared read port's return channel N cycles (N / 2 beats;
        seen on Verilator). Off in :data:`RTL_COST`: the fitted DMA constants absorb it
        (on, the demo CNN is predicted 2.9% long on ``default``, 3.8% on ``tiny``); a
        candidate for the next refit (``bench/costmodel.py --fit uop_write_cycles=0:1``).
    uop_stream_cycles, uop_stream_wait_cycles : int
        With ``UOP_STREAM`` only (``hw/compute.py``; configs without the key do not read
        them): a LOAD UOP without push flags holds the compute module
        ``uop_stream_cycles`` (its dispatch and DMA command) while its beats go on the
        shared read port as any LOAD's; the micro-ops arrive one per cycle from its first
        beat (the narrow writer), and a GEMM/ALU that reads some of them starts
        ``uop_stream_wait_cycles`` after the last one it reads arrived (the registered
        range compare). Another LOAD UOP, FINISH and an instruction with push flags start
        once the whole load has arrived (a LOAD ACC runs beside it, as in the RTL).
    lane_check_cycles, lane_start_cycles, lane_drain_cycles : int
        With ``COMPUTE_OVERLAP`` only (``hw/compute_lane.py``, and
        :func:`~.events.predict_stream` given the uop staging): an ALU the lane runs
        leaves the GEMM lane ``lane_check_cycles`` after it was accepted (its footprint
        check) once the GEMM pipeline is empty, issues its first micro-op
        ``lane_start_cycles`` after that (or once the lane's previous one issued its
        last), one per cycle, and its last write lands ``lane_drain_cycles`` after its
        last issue (L0..L4). With ``requant2`` too the lane runs REQ / REQ.M / REQ.P
        (``hw/compute_lane.py``'s ``lane_req``): those retire ``req_late_cycles`` later (the
        late stages), and a base ALU after one issues ``req_late_cycles - 1`` cycles after
        its last issue (the lane's gap). Without the key these are not read.
    store_row_cycles : int or None
        A STORE's cost per row, instead of ``dma_row_cycles`` (None: the same): the
        store module requests each burst while the previous one's beats stream
        (request-ahead, ``hw/spec.py``'s WRITE_AHEAD), so its rows cost a cycle less
        than a LOAD's.
    store_insn_cycles : int or None
        A STORE's fixed cost, instead of ``dma_insn_cycles`` (None: the same, and a STORE
        behind a STORE costs it too): the store module takes the next STORE (accepts,
        pops, checks, reads its first OUT row) while its writer still streams the
        previous one's beats, so a STORE that moves data behind one that moved data
        costs only its beats (and rows) once it was taken this many cycles before the
        previous one's last beat (``tests/test_rtl_dma_timing.py``: ``B`` behind a
        STORE, ``3 + B`` alone). Off in :data:`RTL_COST`: on, the model is closer to the
        RTL (``bench/costmodel.py`` on default, tiny and default+requant2, executables as
        compiled at a19faac: worst whole-model error 2.84% -> 2.17% with 3 and
        ``store_row_cycles`` 0, the RTL's own counts; 2.08% with 7, ``store_behind_cycles``
        3 and ``store_row_cycles`` 1), but the plans it re-ranks make some model slower on
        Verilator (``default``, measured: 3 / 0 re-ranks image classification's 3x3 and
        1x1 layers into smaller tiles, 64,143 -> 64,694 cycles, and keyword spotting on
        ``default+requant2`` 34,150 -> 35,903; 7 / 3 / 1: keyword spotting 38,536 ->
        38,270, its depthwise layers -57 each, but visual wake words 163,468 -> 163,516,
        its 1x1 32->64 layer at 12x12 re-ranked from th 4 to th 3 at the re-ranking's
        default choices, +103, and image classification 64,143 -> 64,150; measured with
        7 / 3 / 1, all nine configs of ``bench/costmodel.py``: worst 2.08%). With the
        conv2d runners-up of every int32 layer (three, not only block-diagonal ones) it
        still costs image classification 308 and visual wake words 100 cycles against
        that change alone, keyword spotting -266.
    store_behind_cycles : int
        With ``store_insn_cycles``: the fixed cost a STORE behind a STORE keeps (the
        RTL's 0).
    """

    cmd_queue_depth: int | None = None
    fetch_latency: int = 0
    pads_on_port: bool = False
    burst_phase: bool = False
    shared_read_port: bool = False
    read_priority_wait: int | None = None
    overlap_cycles: int | None = None
    requant_late_cycles: int = 0
    req_late_cycles: int = 0
    uop_write_cycles: bool = False
    uop_stream_cycles: int = 2
    uop_stream_wait_cycles: int = 2
    lane_check_cycles: int = 2
    lane_start_cycles: int = 2
    lane_drain_cycles: int = 4
    store_row_cycles: int | None = None
    store_insn_cycles: int | None = None
    store_behind_cycles: int = 0


#: The costs of the RTL (``hw/``), for
#: :func:`vtakit.compiler.ops.perfmodel.predict_stream`: GEMM and ALU issue one micro-op
#: per cycle with either operand kind (the ``requant`` extension's SRDHM, RSHR and MULSHR
#: too, written REQUANT_STAGES - 1 stages later: ``requant_late_cycles``; the compiler's
#: passes never wait for one of their own writes, and other dependent passes do not
#: stall, the acc reads forward the writes in flight) and occupy the compute module N + 7 cycles, N + 1
#: (the RTL's count) when the next loop or LOAD UOP is dispatched while one drains
#: (``hw/compute.py``; a push travels with the last micro-op); a LOAD/STORE costs a few cycles plus one per bus
#: beat, pad element and row; all LOADs share the one DRAM read port, the compute
#: module's first (after at most the read-ahead and one burst of the load module's beats
#: in flight, ``hw/spec.py``'s DMA_READ_AHEAD_BEATS + MAX_BURST), each of their beats
#: pushing the load module's LOAD in progress back by a cycle. The two DMA constants are
#: fitted (a grid, ``bench/costmodel.py --fit``) to Verilator's cycles of whole models
#: (the demo CNN and the four MLPerf Tiny models on default and tiny, each with and
#: without ``requant``: worst 1.43%, keyword spotting on default; ResNet-18 not
#: re-measured). They are not the RTL's own counts (a STORE alone is 3 cycles plus its
#: beats, one behind another its beats, since the store's request-ahead: a STORE row
#: costs a cycle less than a LOAD row here, ``store_row_cycles``; a LOAD 2): the event model does not see the fetch unit feeding the command queues
#: (nor its reads on the port), the phase of the load module's bursts or pad elements
#: stalling the port, and the fit absorbs them (since modelled: fetch and the command
#: queues, ``cmd_queue_depth``; pads on the port, ``pads_on_port``; the phase of the
#: bursts, ``burst_phase``; fetch's start, ``fetch_latency``; checked on the ``requant2``
#: layers' candidate tilings on Verilator; the fitted constants kept: worst whole-model
#: error then 2.76%, the demo CNN on tiny). Among the fits within 1.5%, the one where
#: no MLPerf Tiny model gets slower on default after re-ranking. The int32 layers'
#: tilings, re-ranked by this model, move with it; the tile search keeps
#: :class:`SearchCost`'s defaults.
RTL_COST = EventCost(alu_tensor_cycles=1.0, requant_late_cycles=REQUANT_STAGES - 1,
                     req_late_cycles=REQ_STAGES - 1,
                     dma_insn_cycles=7, dma_row_cycles=2, store_row_cycles=1,
                     insn_cycles=7, shared_read_port=True, overlap_cycles=1,
                     cmd_queue_depth=DEFAULT_CMD_DEPTH, fetch_latency=8, pads_on_port=True,
                     burst_phase=True,
                     read_priority_wait=DMA_READ_AHEAD_BEATS + MAX_BURST)
