"""The event model's STOREs (:attr:`~vtakit.compiler.ops.cost.params.EventCost.store_insn_cycles`):
a STORE behind a STORE costs its beats, as ``tests/test_rtl_dma_timing.py`` pins the RTL's
store module (``B`` behind a STORE that moved data, ``3 + B`` alone); without the key a
STORE costs the DMA constants, as before."""

import dataclasses

import pytest

from test_rtl_dma_timing import FRESH, STORES, _moves, _store_gaps
from vtakit.compiler.ops.cost import RTL_COST, EventCost
from vtakit.compiler.ops.perfmodel import predict_stream
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import MemType, Opcode, isa_for

#: The RTL's costs alone: a STORE's 3 fixed cycles, no row cycles (the request-ahead).
RTL_STORE = EventCost(store_insn_cycles=3, store_row_cycles=0)


def _stream(config, cmds):
    """STOREs offered back to back (every token at hand), then FINISH (after the last)."""
    isa = isa_for(config)
    words = [isa.encode(Opcode.STORE, memory_type=MemType.OUT,
                        **{k: v for k, v in f.items() if "dep" not in k}) for f in cmds]
    words[-1] = isa.encode(Opcode.STORE, memory_type=MemType.OUT, push_prev_dep=1,
                           **{k: v for k, v in cmds[-1].items() if "dep" not in k})
    words.append(isa.encode(Opcode.FINISH, pop_next_dep=1))
    return [isa.decode(w) for w in words]


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_stores_back_to_back_cost_their_beats(preset):
    """The STOREs that move data of test_rtl_dma_timing: the model's cycles are the RTL's
    gaps summed (but the first command's range check, :data:`FRESH`), and FINISH's cycle."""
    config = VTAConfig.preset(preset)
    cmds = [f for f in STORES if _moves(f)]
    got = predict_stream(_stream(config, cmds), config, RTL_STORE).cycles
    assert got == sum(_store_gaps(config, cmds)) - FRESH + 1
    # without the key each STORE pays the fixed cost (and its rows)
    old = dataclasses.replace(RTL_STORE, store_insn_cycles=None, dma_insn_cycles=3)
    assert predict_stream(_stream(config, cmds), config, old).cycles == got + 3 * (len(cmds) - 1)


def test_store_waiting_for_a_token_pays_its_fixed_cost():
    """A STORE whose token comes after the STORE before it ended costs its fixed cycles
    again (it was not taken while the one before streamed): a GEMM between two STOREs."""
    config = VTAConfig.preset("tiny")
    isa = isa_for(config)
    store = dict(memory_type=MemType.OUT, sram_base=0, dram_base=0, y_size=1, x_size=4,
                 x_stride=4)
    gemm = dict(reset_reg=1, uop_bgn=0, uop_end=1, iter_out=50, iter_in=1)
    words = [isa.encode(Opcode.STORE, **store),
             isa.encode(Opcode.GEMM, push_next_dep=1, **gemm),
             isa.encode(Opcode.STORE, pop_prev_dep=1, push_prev_dep=1, **store),
             isa.encode(Opcode.FINISH, pop_next_dep=1)]
    insns = [isa.decode(w) for w in words]
    cost = dataclasses.replace(RTL_STORE, insn_cycles=0)
    beats = 4 * config.out_axi_ratio
    # the GEMM's 50 micro-ops push at 50; the second STORE then costs 3 + its beats, FINISH 1
    assert predict_stream(insns, config, cost).cycles == 50 + 3 + beats + 1


def test_store_behind_cycles_stay_per_store():
    """``store_behind_cycles``: each STORE behind a STORE keeps that many fixed cycles."""
    config = VTAConfig.preset("default")
    cmds = [f for f in STORES if _moves(f)]
    base = predict_stream(_stream(config, cmds), config, RTL_STORE).cycles
    cost = dataclasses.replace(RTL_STORE, store_behind_cycles=2)
    assert predict_stream(_stream(config, cmds), config, cost).cycles == base + 2 * (len(cmds) - 1)


def test_rtl_cost_leaves_the_key_off():
    """RTL_COST keeps the fitted DMA constants for STOREs (the key on re-ranks plans that
    Verilator runs slower: see EventCost.store_insn_cycles)."""
    assert RTL_COST.store_insn_cycles is None
