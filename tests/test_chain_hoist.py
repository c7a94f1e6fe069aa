"""Chain boundaries of keyword spotting on default+requant2 (vtakit.runtime.chain): the
next layer's first weight LOADs hoisted into the previous layer's load queue
(hoist_plan), and *stores done* (early) pushed after the last store the next layer's
first inputs read (early_store); bit for bit as unchained under any schedule."""

from pathlib import Path

import numpy as np
import pytest

import vtakit
from vtakit.compiler.frontend import from_tflite
from vtakit.hw.isa import MemType
from vtakit.hw.spec import Unit
from vtakit.runtime import chain as chain_mod
from vtakit.runtime.recorder import LayerRecorder
from vtakit.sim import open_device
from vtakit.testing import model_inputs

from chain_util import decoded, is_load, kernels, unit

KWS = Path(__file__).parent / "data" / "mltk" / "keyword_spotting.tflite"


@pytest.fixture(scope="module")
def kws():
    x = model_inputs(from_tflite(KWS)["main"].params[0].type_annotation, 1, 0)[0]
    return vtakit.compile(KWS, config="default+requant2"), x





def _rows(insns):
    out = set()
    for i in insns:
        f = i.fields
        for y in range(f["y_size"]):
            base = f["sram_base"] + y * f["x_size"]
            out.update(range(base, base + f["x_size"]))
    return out


def _run(exe, x, chain=True, **device_options):
    with open_device("behavioral", exe.config, **device_options) as dev, \
            LayerRecorder(dev, keep_outputs=False, keep_streams=True) as rec:
        y = np.asarray(exe.run([x], device=dev, hook=rec.hook, hook_outputs=False,
                               chain=chain))
    return y, [r for layer in rec.layers for r in layer.runs]


def test_first_weights_hoisted_into_the_previous_layers_loads(kws):
    """Where the load module of the layer before waits for its compute module (a load
    group's end whose next LOAD pops g2l), the next layer's first weight LOADs run there:
    every row of them, without token flags, relocated to a slot of their own; the next
    layer's entry variant then starts without them."""
    exe, _ = kws
    ks = kernels(exe)
    pairs = [(a, b) for a, b in zip(ks, ks[1:]) if chain_mod.hoist_plan(a, b)]
    assert pairs                        # the depthwise -> pointwise boundaries
    for a, b in pairs:
        first = [b.insns[k] for k in chain_mod._first_group(b)[1]]
        assert sum(len(_rows([i])) for i in first) * exe.config.wgt_elem_bytes \
            >= chain_mod.HOIST_MIN
        ex = chain_mod.exit_variant(a, hoist=b)
        names = chain_mod.hoist_slots(a, b)
        relocs = {r.insn: r.slot for r in ex.relocations}
        moved = [k for k, s in relocs.items() if s in names.values()]
        assert moved and all(is_load(ex.insns[k], MemType.WGT) and not any(
            ex.insns[k].fields[f] for f in chain_mod._FLAGS) for k in moved)
        assert _rows([ex.insns[k] for k in moved]) == _rows(first)
        loads = [k for k, i in enumerate(ex.insns) if unit(i) == Unit.LOAD]
        for k in moved:     # after a group's end, before a LOAD waiting for compute
            j = loads.index(k)
            before = next(m for m in reversed(loads[:j]) if m not in moved)
            after = next(m for m in loads[j + 1:] if m not in moved)
            assert ex.insns[before].push_next_dep and ex.insns[after].pop_next_dep
        assert ex.slots[names["weight"]] == b.slots["weight"]
        # the entry variant leaves them out
        plain, hoisted = chain_mod.entry_variant(b), chain_mod.entry_variant(b, hoisted=True)
        assert len(plain) - len(hoisted) == len(first)
        lead = [i for i in hoisted.insns if unit(i) == Unit.LOAD]
        assert lead[0].memory_type == MemType.INP and lead[0].pop_next_dep


def test_no_hoist_where_the_layer_before_reads_the_rows(kws):
    """Rows the layer before still reads are not loaded before the token its compute
    module pushes after its last GEMM reading them: a boundary whose first weights land
    where the last GEMM reads has no hoist point, and with the rows read only up to an
    earlier token the point is the LOAD popping that token."""
    exe, _ = kws
    ks = kernels(exe)
    for a, b in zip(ks, ks[1:]):
        point = chain_mod.hoist_point(a, b)
        group = chain_mod._first_group(b)
        if group is None or not group[1]:
            assert point is None
            continue
        rows = _rows([b.insns[k] for k in group[1]])
        reads = [k for k, _, (lo, hi) in chain_mod._gemm_reads(a)
                 if rows & set(range(lo, hi))]
        pushes = [k for k, i in enumerate(a.insns) if unit(i) == Unit.COMPUTE
                  and i.push_prev_dep]
        pops = [k for k, i in enumerate(a.insns) if unit(i) == Unit.LOAD and i.pop_next_dep]
        if not reads:
            assert point is not None
            continue
        n = sum(k < reads[-1] for k in pushes)
        if n >= len(pops) or not any(k >= reads[-1] for k in pushes):
            assert point is None
        else:
            assert point is not None and point >= pops[n]
    assert any(chain_mod.hoist_point(a, b) is None for a, b in zip(ks, ks[1:]))


def test_hoisted_chain_equals_unchained_under_any_schedule(kws, monkeypatch):
    """Bit for bit equal to the unchained run and to the IR interpreter, for seeded random
    interleavings of the behavioral model's units; the stream carries the hoisted weight
    LOADs (flag-free LOAD WGTs) and an early *stores done* after a store that is not the
    layer's last of its own protocol, which it has without them."""
    from vtakit.compiler.ir import evaluate
    exe, x = kws
    ref = np.asarray(evaluate(from_tflite(KWS), x))
    y0, _ = _run(exe, x, chain=False)
    assert np.array_equal(y0, ref)

    def free_wgt_loads(runs):
        insns = decoded(exe.config, runs)
        return sum(is_load(i, MemType.WGT) and not any(i.fields[f] for f in chain_mod._FLAGS)
                   for i in insns)
    calls = []
    real = chain_mod.early_store

    def spy(*a):
        got = real(*a)
        calls.append(got)
        return got
    monkeypatch.setattr(chain_mod, "early_store", spy)
    y, runs = _run(exe, x)
    assert np.array_equal(y, y0)
    assert any(c is not None for c in calls)
    for seed in (1, 2, 3):
        y, _ = _run(exe, x, interleave_seed=seed)
        assert np.array_equal(y, y0), seed
    hoisted = free_wgt_loads(runs)
    monkeypatch.setattr(chain_mod, "HOIST", False)
    for prog in kernels(exe):          # variants are kept with their programs
        for key in [k for k in prog.memo if isinstance(k, tuple) and k[0] == "chain"]:
            monkeypatch.delitem(prog.memo, key)
    y, plain = _run(exe, x)
    assert np.array_equal(y, y0)
    assert hoisted > free_wgt_loads(plain)


def test_early_store_is_the_last_store_the_inputs_read(kws):
    """early_store: the last store of the layer before whose bytes the next layer's first
    inputs read, when a later store follows (None when the last store is read, or
    nothing is)."""
    exe, _ = kws
    a = kernels(exe)[2]

    class Buf:
        def __init__(self, addr, nbytes):
            self.addr, self.nbytes = addr, nbytes
    bufs = {n: Buf((1 << 22) + k * (1 << 16), size)
            for k, (n, size) in enumerate(a.slots.items())}
    stores = [k for k, i in enumerate(a.insns) if unit(i) == Unit.STORE and not i.is_nop]
    spans = chain_mod._ranges(a, stores, exe.config.out_elem_bytes, bufs)
    assert chain_mod.early_store(a, bufs, []) is None
    assert chain_mod.early_store(a, bufs, [spans[-1]]) is None
    own = [k for k in stores[:-1] if a.insns[k].push_prev_dep]
    later = [j for j, k in enumerate(stores[:-1]) if not own or k >= own[-1]]
    checked = 0
    for j in later:
        lo = spans[j][0]        # a byte only this store (and maybe earlier ones) writes
        if any(s0 <= lo < s1 for s0, s1 in spans[j + 1:]):
            continue
        assert chain_mod.early_store(a, bufs, [(lo, lo + 1)]) == stores[j]
        ex = chain_mod.exit_variant(a, stored=stores[j])
        assert not chain_mod.overlap([(lo, lo + 1)], chain_mod.late_stores(ex, bufs))
        checked += 1
    assert checked
