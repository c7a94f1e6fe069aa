"""Chain boundaries on ``UOP_STREAM`` configs (vtakit.runtime.chain: uop_hoist,
shift_uops, with_uop_loads): the next layer's leading LOAD UOPs run in the previous
layer's compute queue before its last GEMM groups, its kernel moved in the uop SRAM clear
of the previous layer's rows; bit for bit as unchained, and fewer Verilator cycles."""

from pathlib import Path

import numpy as np
import pytest

import vtakit
from vtakit.compiler.frontend import from_tflite
from vtakit.compiler.ir import evaluate
from vtakit.hw.isa import MemType, Opcode
from vtakit.runtime import chain as chain_mod
from vtakit.runtime.recorder import LayerRecorder
from vtakit.sim import open_device
from vtakit.testing import model_inputs

from chain_util import decoded, is_load, kernels

KWS = Path(__file__).parent / "data" / "mltk" / "keyword_spotting.tflite"
CONFIG = "default+requant2+uopstream"


@pytest.fixture(scope="module")
def kws():
    x = model_inputs(from_tflite(KWS)["main"].params[0].type_annotation, 1, 0)[0]
    return vtakit.compile(KWS, config=CONFIG), x





def _run(exe, x, chain=True, **device_options):
    with open_device("behavioral", exe.config, **device_options) as dev, \
            LayerRecorder(dev, keep_outputs=False, keep_streams=True) as rec:
        y = np.asarray(exe.run([x], device=dev, hook=rec.hook, hook_outputs=False,
                               chain=chain))
    return y, [r for layer in rec.layers for r in layer.runs]


def _forget_variants(monkeypatch, exe):
    for prog in kernels(exe):          # variants are kept with their programs
        for key in [k for k in prog.memo if isinstance(k, tuple) and k[0] == "chain"]:
            monkeypatch.delitem(prog.memo, key)


def test_next_kernel_moves_clear_of_the_previous_ones_rows(kws):
    """uop_hoist: the next kernel, moved, uses no uop SRAM row the previous one uses, with
    the same micro-op words, every GEMM/ALU range and LOAD UOP shifted alike; its LOAD
    UOPs (flag-free) go before the previous layer's chosen GEMM group, their words in its
    staging."""
    exe, _ = kws
    ks = kernels(exe)
    moved = 0
    for a, b in zip(ks, ks[1:]):
        got = chain_mod.uop_hoist(a, b)
        if got is None:
            continue
        b2, loads = got
        moved += 1
        lo, hi = chain_mod._uop_span(a)
        assert not chain_mod.overlap([chain_mod._uop_span(b2)], [(lo, hi)])
        assert np.array_equal(b2.uops, b.uops) and len(b2.insns) == len(b.insns)
        d = {i2.fields[f] - i.fields[f] for i, i2 in zip(b.insns, b2.insns)
             for f in ("uop_bgn", "uop_end") if i.opcode in (Opcode.GEMM, Opcode.ALU)}
        d |= {i2.sram_base - i.sram_base for i, i2 in zip(b.insns, b2.insns)
              if is_load(i, MemType.UOP)}
        assert len(d) == 1
        assert all(is_load(b2.insns[k], MemType.UOP) and not any(
            b2.insns[k].fields[f] for f in chain_mod._FLAGS) for k in loads)
        ex = chain_mod.exit_variant(a)
        w = chain_mod.with_uop_loads(ex, b2, loads)
        assert len(w.insns) == len(ex.insns) + len(loads)
        at = next(n for n, (i, j) in enumerate(zip(w.insns, ex.insns)) if i is not j)
        starts = [k for k, i in enumerate(ex.insns) if i.opcode == Opcode.GEMM
                  and not i.fields["reset_reg"] and i.fields["pop_prev_dep"]]
        assert at == starts[-min(chain_mod.UOP_HOIST_GROUPS, len(starts))]
        relocs = {r.insn: r.slot for r in w.relocations}
        for n, k in enumerate(loads):
            i, j = w.insns[at + n], b2.insns[k]
            assert relocs[at + n] == chain_mod.UOPS and i.sram_base == j.sram_base
            assert np.array_equal(w.uops[i.dram_base:i.dram_base + i.x_size],
                                  b2.uops[j.dram_base:j.dram_base + j.x_size])
        # the entry variant leaves them out
        assert (len(chain_mod.entry_variant(b2)) - len(chain_mod.entry_variant(b2, uops=True))
                == len(loads))
    assert moved


def test_uop_hoisted_chain_equals_unchained_under_any_schedule(kws, monkeypatch):
    """Bit for bit equal to the unchained run and to the IR interpreter, for seeded random
    interleavings of the behavioral model's units; the stream carries more LOAD UOPs off
    row 0 (the next layers' kernels, moved) than with UOP_HOIST off."""
    exe, x = kws
    ref = np.asarray(evaluate(from_tflite(KWS), x))
    y0, _ = _run(exe, x, chain=False)
    assert np.array_equal(y0, ref)

    def moved_uop_loads(runs):
        insns = decoded(exe.config, runs)
        return sum(is_load(i, MemType.UOP) and i.sram_base > 0 for i in insns)
    y, runs = _run(exe, x)
    assert np.array_equal(y, y0)
    for seed in (1, 2):
        y, _ = _run(exe, x, interleave_seed=seed)
        assert np.array_equal(y, y0), seed
    monkeypatch.setattr(chain_mod, "UOP_HOIST", False)
    _forget_variants(monkeypatch, exe)
    y, plain = _run(exe, x)
    assert np.array_equal(y, y0)
    assert moved_uop_loads(runs) > moved_uop_loads(plain)


def test_no_uop_hoist_without_uop_stream(monkeypatch):
    """Configs without UOP_STREAM never move a LOAD UOP (their streams are unchanged)."""
    def boom(*a, **k):
        raise AssertionError("uop_hoist called")
    monkeypatch.setattr(chain_mod, "uop_hoist", boom)
    monkeypatch.setattr(chain_mod, "with_uop_loads", boom)
    exe = vtakit.compile(KWS, config="default+requant2")
    x = model_inputs(from_tflite(KWS)["main"].params[0].type_annotation, 1, 0)[0]
    y, runs = _run(exe, x)
    assert len(runs) < len(kernels(exe))           # it chained
    assert np.array_equal(y, np.asarray(evaluate(from_tflite(KWS), x)))


@pytest.mark.slow
def test_uop_hoist_on_verilator_equals_the_model_in_fewer_cycles(kws, monkeypatch, capsys):
    """keyword spotting on default+requant2+uopstream, Verilator: the same outputs as the
    behavioral model with and without the hoist, in fewer cycles with it (33,621 against
    33,918 when measured)."""
    from vtakit.tools.profile import profile_model
    exe, x = kws
    want = exe.run_named([x])
    cycles = {}
    for on in (True, False):
        monkeypatch.setattr(chain_mod, "UOP_HOIST", on)
        _forget_variants(monkeypatch, exe)
        got, rows = profile_model(exe, [x], "verilator")
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=str(on))
        cycles[on] = sum(r.cycles for r in rows if r.engine == "VTA")
    with capsys.disabled():
        print(f"\n  keyword_spotting {CONFIG}, uop hoist on/off: {cycles}")
    assert cycles[True] < cycles[False]
