"""The tiled 128 x 128 x 128 int8 GEMM (int32 bias via LOAD ACC, shift, clip, int8
store), double-buffered over two virtual threads, against numpy on three presets.

Besides the result, the dependency structure is checked: the stream is race-free
(every random module interleaving gives the same DRAM), and its token graph lets
load, compute and store run at the same time, which the FORCE_SERIAL stream does not.
"""

import numpy as np
import pytest

from vtakit.testing.programs import build_gemm_tiled, verify
from vtakit.hw.isa import MemType, Opcode
from vtakit.runtime import DebugFlag, Runtime
from vtakit.sim import open_device

PRESETS = ["default", "4x8", "tiny"]

# (module, flag) -> token queue, reference 3.2
_QUEUE = {("load", "push_next_dep"): "l2g", ("compute", "pop_prev_dep"): "l2g",
          ("compute", "push_prev_dep"): "g2l", ("load", "pop_next_dep"): "g2l",
          ("compute", "push_next_dep"): "g2s", ("store", "pop_prev_dep"): "g2s",
          ("store", "push_prev_dep"): "s2g", ("compute", "pop_next_dep"): "s2g"}


def module_of(insn):
    if insn.opcode == Opcode.STORE:
        return "store"
    if insn.opcode == Opcode.LOAD and insn.memory_type in (MemType.INP, MemType.WGT):
        return "load"
    return "compute"


def asap_schedule(insns):
    """Earliest (start, end) of every instruction with unit-time work (NOPs take no time),
    each module in order, and the k-th pop of a queue after the k-th push completes."""
    pushes, pops = {}, {}
    for i, insn in enumerate(insns):
        for (mod, flag), q in _QUEUE.items():
            if mod == module_of(insn) and insn.fields[flag]:
                (pushes if flag.startswith("push") else pops).setdefault(q, []).append(i)
    waits = {i: [] for i in range(len(insns))}
    for q, poppers in pops.items():
        assert len(pushes.get(q, [])) >= len(poppers), f"queue {q} pops more than it gets"
        for pusher, popper in zip(pushes[q], poppers):
            waits[popper].append(pusher)
    seqs = {m: [i for i, insn in enumerate(insns) if module_of(insn) == m]
            for m in ("load", "compute", "store")}
    pos = dict.fromkeys(seqs, 0)
    end, times, progress = {}, {}, True
    while progress:
        progress = False
        for mod, seq in seqs.items():
            while pos[mod] < len(seq):
                i = seq[pos[mod]]
                if any(p not in end for p in waits[i]):
                    break
                start = max([end[seq[pos[mod] - 1]] if pos[mod] else 0]
                            + [end[p] for p in waits[i]])
                work = not (insns[i].is_nop or insns[i].opcode == Opcode.FINISH)
                end[i] = start + int(work)
                times[i] = (start, end[i])
                pos[mod] += 1
                progress = True
    assert len(end) == len(insns), "the token graph has a cycle (deadlock)"
    return times


def overlap_steps(insns, times):
    """Time steps in which the load, compute and store modules all do work."""
    busy = {"load": set(), "compute": set(), "store": set()}
    for i, (s, e) in times.items():
        busy[module_of(insns[i])].update(range(s, e))
    return busy["load"] & busy["compute"] & busy["store"]


@pytest.mark.parametrize("preset", PRESETS)
def test_gemm_tiled_matches_numpy(preset):
    rt = Runtime(open_device("behavioral", preset))
    checks = build_gemm_tiled(rt, np.random.default_rng(7))
    insns = rt.instructions
    stats = rt.synchronize().stats
    verify(rt, checks)
    cfg = rt.config
    assert stats["gemm_counter"] == (128 // cfg.batch) * (128 // cfg.block_out) * (128 // cfg.block_in)
    # two virtual threads on disjoint halves of the input buffer
    inp_bases = {i.sram_base for i in insns if i.opcode == Opcode.LOAD and
                 i.memory_type == MemType.INP}
    assert inp_bases == {0, cfg.inp_depth // 2}


@pytest.mark.parametrize("preset", PRESETS)
def test_gemm_tiled_overlaps_and_serializes(preset):
    rt = Runtime(open_device("behavioral", preset))
    build_gemm_tiled(rt, np.random.default_rng(7))
    rt.finalize()
    insns = rt.instructions
    times = asap_schedule(insns)
    makespan = max(e for _, e in times.values())
    assert overlap_steps(insns, times), "loads, GEMMs and stores never overlap"

    serial = Runtime(open_device("behavioral", preset), debug=DebugFlag.FORCE_SERIAL)
    build_gemm_tiled(serial, np.random.default_rng(7))
    serial.finalize()
    s_insns = serial.instructions
    s_times = asap_schedule(s_insns)
    work = sum(1 for i in s_insns if not i.is_nop and i.opcode != Opcode.FINISH)
    assert max(e for _, e in s_times.values()) == work      # strictly one at a time
    assert not overlap_steps(s_insns, s_times)
    assert makespan < 0.8 * work


@pytest.mark.parametrize("preset", PRESETS)
def test_gemm_tiled_race_free_and_serial_equal(preset):
    """Random interleavings and FORCE_SERIAL give the same DRAM as the default schedule."""
    images = []
    for debug, seed in [(DebugFlag(0), None), (DebugFlag(0), 1), (DebugFlag(0), 2),
                        (DebugFlag.FORCE_SERIAL, 3)]:
        rt = Runtime(open_device("behavioral", preset, interleave_seed=seed), debug=debug)
        checks = build_gemm_tiled(rt, np.random.default_rng(11))
        rt.synchronize()
        verify(rt, checks)
        images.append(rt.download(checks[0].buf, np.uint8, checks[0].buf.nbytes))
    assert all(np.array_equal(images[0], im) for im in images[1:])
