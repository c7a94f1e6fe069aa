"""Cycle prediction of an instruction stream (an event model of VTA's three modules).

Where :func:`.tiling.estimate` predicts a tiling from its shape, this model runs
the actual stream: the load, compute and store modules execute their queues in
order, each instruction takes the :class:`.tiling.CostModel` duration of its
kind, and the dependency tokens carry the time they were pushed, so overlap
(and the lack of it) comes out exactly as the tokens allow. It is what the
benches report as "predicted" cycles when no RTL backend is available.

Not modelled: contention of the modules for the single DRAM read port, DRAM
latency beyond the fixed per-instruction cost, and command-queue capacity.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..hw.isa import MemType, Opcode
from ..hw.spec import DEP_QUEUES, PIPELINE, TOKEN_QUEUES, dispatch_unit
from .tiling import CostModel

__all__ = ["StreamPrediction", "predict_stream", "stream_traffic"]


@dataclass(frozen=True)
class StreamPrediction:
    """Predicted cycles of a stream and the busy cycles of each module."""

    cycles: int
    busy: dict
    gemm_uops: int
    alu_uops: int


def stream_traffic(insns, config) -> dict:
    """DRAM bytes a stream moves, by fsim's counter names (reference 4.6)."""
    out = dict(inp_load_nbytes=0, wgt_load_nbytes=0, acc_load_nbytes=0, uop_load_nbytes=0,
               out_store_nbytes=0)
    names = {MemType.INP: "inp_load_nbytes", MemType.WGT: "wgt_load_nbytes",
             MemType.ACC: "acc_load_nbytes", MemType.UOP: "uop_load_nbytes"}
    for insn in insns:
        if insn.opcode not in (Opcode.LOAD, Opcode.STORE) or insn.x_size == 0:
            continue
        n = insn.x_size * insn.y_size
        if insn.opcode == Opcode.STORE:
            out["out_store_nbytes"] += n * config.out_elem_bytes
        else:
            out[names[MemType(insn.memory_type)]] += n * config.elem_bytes(insn.memory_type)
    return out


def _duration(insn, config, cost: CostModel):
    """(cycles, gemm uops, alu uops) of one instruction."""
    op = insn.opcode
    if op in (Opcode.LOAD, Opcode.STORE):
        if insn.x_size == 0:
            return 1, 0, 0
        mem = MemType.OUT if op == Opcode.STORE else MemType(insn.memory_type)
        n = insn.x_size * insn.y_size
        pads = 0
        if op == Opcode.LOAD and mem != MemType.UOP:
            xt = insn.x_pad_0 + insn.x_size + insn.x_pad_1
            pads = xt * (insn.y_pad_0 + insn.y_size + insn.y_pad_1) - n
        beats = -(-n * config.elem_bytes(mem) // config.bus_bytes)
        return cost.dma_insn_cycles + beats + pads + insn.y_size * cost.dma_row_cycles, 0, 0
    if op in (Opcode.GEMM, Opcode.ALU):
        uops = insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)
        if op == Opcode.GEMM:       # gemm_uops counts like gemm_counter (no resets)
            return cost.insn_cycles + uops * cost.gemm_uop_cycles, 0 if insn.reset_reg else uops, 0
        per = cost.alu_imm_cycles if insn.use_imm else cost.alu_tensor_cycles
        return cost.insn_cycles + uops * per, 0, uops
    return 1, 0, 0


def predict_stream(insns, config, cost: CostModel = CostModel()) -> StreamPrediction:
    """Predict the cycles of a decoded stream (``Runtime.instructions`` after finalize,
    or any list of :class:`~vtakit.hw.isa.Insn`).

    Raises
    ------
    ValueError
        If the stream deadlocks (a pop whose token is never pushed).
    """
    queues = {m: [] for m in PIPELINE}
    for insn in insns:
        queues[dispatch_unit(insn.opcode, insn.fields.get("memory_type"))].append(insn)
    tokens = {q: deque() for q in TOKEN_QUEUES}
    time = dict.fromkeys(queues, 0.0)
    busy = dict.fromkeys(queues, 0.0)
    pos = dict.fromkeys(queues, 0)
    gemm = alu = 0
    progress = True
    while progress:
        progress = False
        for m, q in queues.items():
            while pos[m] < len(q):
                insn = q[pos[m]]
                pops = [tokens[name] for flag, name in DEP_QUEUES[m].items()
                        if name and flag.startswith("pop") and insn.fields.get(flag)]
                if any(not t for t in pops):
                    break
                start = max([time[m]] + [t.popleft() for t in pops])
                dur, g, a = _duration(insn, config, cost)
                gemm, alu = gemm + g, alu + a
                time[m] = start + dur
                busy[m] += dur
                for flag, name in DEP_QUEUES[m].items():
                    if name and flag.startswith("push") and insn.fields.get(flag):
                        tokens[name].append(time[m])
                pos[m] += 1
                progress = True
                if insn.opcode == Opcode.FINISH:
                    return StreamPrediction(int(round(time[m])), _by_name(busy), gemm, alu)
    stuck = {str(m): pos[m] for m in queues if pos[m] < len(queues[m])}
    if stuck:
        raise ValueError(f"predict_stream: the stream deadlocks (module -> position of the "
                         f"instruction that waits for a token): {stuck}")
    return StreamPrediction(int(round(max(time.values()))), _by_name(busy), gemm, alu)


def _by_name(per_unit: dict) -> dict:
    """``{unit name: value}`` (``"load"``, ``"compute"``, ``"store"``), as reported."""
    return {str(unit): value for unit, value in per_unit.items()}
