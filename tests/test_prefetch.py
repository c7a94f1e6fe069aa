"""Warm start across a host step (vtakit.runtime.chain: warm_split, Chain.follow's
prefetch): a layer's stream ends with the head of the layer expected next (its first
weight LOADs, LOAD UOP/ACC, resets), which then starts without it, bit for bit as the
cold runs; the guard (Chain.warm) makes a layer start cold when anything else ran on
the device since, and without it the result would be wrong."""

from pathlib import Path

import numpy as np
import pytest

import vtakit
from vtakit.compiler.frontend import from_tflite
from vtakit.compiler.ir import evaluate
from vtakit.runtime import chain as chain_mod
from vtakit.runtime.recorder import LayerRecorder
from vtakit.sim import open_device
from vtakit.testing import model_inputs

KWS = Path(__file__).parent / "data" / "mltk" / "keyword_spotting.tflite"


@pytest.fixture(scope="module")
def kws():
    """KWS on the base ISA: every conv layer's result goes through a host requantize."""
    mod = from_tflite(KWS)
    x = model_inputs(mod["main"].params[0].type_annotation, 1, 0)[0]
    return vtakit.compile(KWS, config="default"), x, np.asarray(evaluate(mod, x))


@pytest.fixture
def count(monkeypatch):
    """Counts of prefetched heads, of warm and cold starts of prefetched layers, and of
    the starts that know the uop SRAM the stream before left (``carried``)."""
    n = dict(prefetched=0, warm=0, cold=0, carried=0)
    real_pre, real_start = chain_mod.Chain._prefetch, chain_mod.Chain._warm_start

    def prefetch(self, *args):
        r = real_pre(self, *args)
        n["prefetched"] += r is not None
        return r

    def start(self, rt, program, bufs):
        expected = self.warm is not None and self.warm[0] is program
        p = real_start(self, rt, program, bufs)
        if expected:
            n["warm" if p is not program else "cold"] += 1
        n["carried"] += self.uop_rows is not None
        return p

    monkeypatch.setattr(chain_mod.Chain, "_prefetch", prefetch)
    monkeypatch.setattr(chain_mod.Chain, "_warm_start", start)
    return n


def _run(exe, x, backend="behavioral", chain=True, **device_options):
    """Output and device runs of one inference."""
    with open_device(backend, exe.config, **device_options) as dev, \
            LayerRecorder(dev, keep_outputs=False, keep_streams=True) as rec:
        y = np.asarray(exe.run([x], device=dev, hook=rec.hook, hook_outputs=False,
                               chain=chain))
    return y, [r for layer in rec.layers for r in layer.runs]


def test_warm_split_moves_the_head(kws):
    """The head holds the first group's weight LOADs and the leading LOAD UOP, then the
    fence; the warm kernel is the rest, one push fewer in no queue."""
    exe, _, _ = kws
    prog = exe.program(next(p.meta_dict["kernel"] for p in exe.primitives
                            if p.name == "vta_conv2d_1"))
    head, warm = chain_mod.warm_split(prog)
    later = len(head.memo["warm_wgt"]) - 1      # its later weight LOADs: a NOP each
    assert len(head.insns) + len(warm.insns) == len(prog.insns) + 2 + later
    assert head.pending_pops == prog.pending_pops
    assert any(i.opcode.name == "LOAD" and i.memory_type == 0 for i in head.insns)
    assert set(head.slots) <= set(prog.slots) and "data" not in head.slots
    flags = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")
    tally = lambda p: [sum(i.fields[f] for i in p.insns) for f in flags]  # noqa: E731
    assert tally(warm) == tally(prog)


def _wgt_rows(program) -> int:
    return sum(i.fields["x_size"] * i.fields["y_size"] for i in program.insns
               if i.opcode.name == "LOAD" and not i.is_nop and i.memory_type == 1)


@pytest.mark.parametrize("on, limit, carried", [(True, 1 << 20, 16), (True, 3072, 12),
                                                 (False, 1 << 20, 4)])
def test_warm_head_carries_resident_weights(kws, monkeypatch, on, limit, carried):
    """A pointwise layer that keeps its weights resident (one LOAD per output block, none
    waiting for a token) has them in its warm head (WARM_WEIGHTS), up to WARM_WEIGHTS_MAX
    bytes (256 a tile): its warm kernel loads the rest, and keeps the l2g pushes of the
    ones it no longer loads (as load NOPs). Without WARM_WEIGHTS: the first block only.
    The stream before frees the SRAM no earlier for the larger head."""
    exe, _, _ = kws
    prog = exe.program(next(p.meta_dict["kernel"] for p in exe.primitives
                            if p.name == "vta_conv2d_2"))
    monkeypatch.setattr(chain_mod, "WARM_WEIGHTS", on)
    monkeypatch.setattr(chain_mod, "WARM_WEIGHTS_MAX", limit)
    memo = dict(prog.memo)          # warm_split's memo: of this test's settings only
    prog.memo.pop("chain_warm", None)
    try:
        head, warm = chain_mod.warm_split(prog)
    finally:
        prog.memo.clear()
        prog.memo.update(memo)
    assert _wgt_rows(prog) == 16
    assert _wgt_rows(head) == carried and _wgt_rows(warm) == 16 - carried
    flags = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")
    tally = lambda p: [sum(i.fields[f] for i in p.insns) for f in flags]  # noqa: E731
    assert tally(warm) == tally(prog)
    before = exe.program(next(p.meta_dict["kernel"] for p in exe.primitives
                              if p.name == "vta_conv2d_1"))
    free = chain_mod.sram_free_point
    assert free(before, prog, head.memo["warm_wgt"]) >= free(before, prog)


@pytest.mark.parametrize("drain", [0.0, 100.0])
def test_warm_kernel_goes_with_the_head_that_ran(kws, count, monkeypatch, drain):
    """Whether a head carries its later weights depends on the stream before (WARM_DRAIN
    of its drain_bytes): the warm kernel that runs is the one of the head that ran (none
    of them, or every one, here), and the result is the interpreter's."""
    exe, x, ref = kws
    monkeypatch.setattr(chain_mod, "WARM_DRAIN", drain)
    kernels = []
    real = chain_mod.Chain._warm_start

    def start(self, rt, program, bufs):
        p = real(self, rt, program, bufs)
        if p is not program:
            kernels.append(p)
        return p

    monkeypatch.setattr(chain_mod.Chain, "_warm_start", start)
    y, _ = _run(exe, x)
    assert np.array_equal(y, ref) and count["warm"] == len(kernels) > 0
    nops = [sum(i.is_nop and i.opcode.name == "LOAD" and i.memory_type == 2
                and i.fields["push_next_dep"] for i in k.insns) for k in kernels]
    assert (sum(nops) > 0) == (drain > 1)


def test_warm_equals_cold_under_any_schedule(kws, count):
    """Behavioral: the warm starts (every VTA layer but the first) give the cold runs'
    and the IR interpreter's result, for seeded random interleavings of the units."""
    exe, x, ref = kws
    y0, runs0 = _run(exe, x, chain=False)
    assert np.array_equal(y0, ref)
    assert count == dict(prefetched=0, warm=0, cold=0, carried=0)
    vta = sum(p.kind == "vta_layer" for p in exe.primitives)
    for seed in (None, 1, 2, 3):
        y, runs = _run(exe, x, interleave_seed=seed)
        assert np.array_equal(y, y0), seed
        assert len(runs) == len(runs0) == vta
    assert count["warm"] == 4 * (vta - 1) and count["cold"] == 0
    assert count["prefetched"] == 4 * (vta - 1) and count["carried"] == count["warm"]


@pytest.mark.slow
def test_warm_on_verilator_equals_cold_in_fewer_cycles(kws, count):
    """Verilator: the warm run equals the cold one and the interpreter bit for bit, in
    fewer cycles."""
    exe, x, ref = kws
    y0, runs0 = _run(exe, x, "verilator", chain=False)
    y, runs = _run(exe, x, "verilator")
    assert np.array_equal(y0, ref) and np.array_equal(y, y0)
    assert count["warm"] > 0 and count["carried"] == count["warm"]
    assert 0 < sum(r.cycles for r in runs) < sum(r.cycles for r in runs0)


def _clobbered(exe, x, other_runtime=False):
    """One behavioral inference in which, right after ``vta_conv2d_1`` (whose stream
    prefetched ``vta_conv2d_2``'s head), another stream runs on the same runtime (or on
    another runtime over the same device): ``vta_conv2d_3``'s kernel on random buffers
    (it loads its own micro-ops and weights over the rows the head filled)."""
    from vtakit.runtime import Runtime
    rng = np.random.default_rng(0)
    prog = exe.program(next(p.meta_dict["kernel"] for p in exe.primitives
                            if p.name == "vta_conv2d_3"))
    vm = None

    def hook(name, _):
        if name != "vta_conv2d_1":
            return
        rt = Runtime(vm.context.device) if other_runtime else vm.context.runtime
        bufs = {}
        for slot, nbytes in prog.slots.items():
            bufs[slot] = rt.alloc(nbytes)
            rt.upload(bufs[slot], rng.integers(-128, 128, nbytes, dtype=np.int8))
        rt.bind(prog, bufs)
        rt.synchronize()
        for buf in bufs.values():
            rt.free(buf)

    with exe.vm("behavioral", hook=hook, hook_outputs=False) as vm:
        return np.asarray(vm.run(*exe._args([x]), func=exe.entry))


def test_guard_falls_back_after_another_stream(kws, count):
    """A stream run between a layer and the one it prefetched for: that layer starts
    cold, and the result is still right."""
    exe, x, ref = kws
    assert np.array_equal(_clobbered(exe, x), ref)
    assert count["cold"] == 1 and count["warm"] > 0
    assert count["carried"] == count["warm"]       # the cold start assumes nothing


def test_guard_sees_another_runtime_on_the_device(kws, count):
    """The same with the other stream run by another Runtime over the same device: the
    device's stream count shows it, the layer starts cold."""
    exe, x, ref = kws
    assert np.array_equal(_clobbered(exe, x, other_runtime=True), ref)
    assert count["cold"] == 1 and count["warm"] > 0


def test_without_the_guard_the_warm_start_is_wrong(kws, count, monkeypatch):
    """The same run with the guard dropped (a layer starts warm whenever the last
    prefetch was its own): the other stream's micro-ops and weights are used, the
    result differs. The guard is what protects it."""
    exe, x, ref = kws

    def unguarded(self, rt, program, bufs):
        warm, self.warm = self.warm, None
        if warm is not None and warm[0] is program:
            count["warm"] += 1
            return warm[2]
        return program

    monkeypatch.setattr(chain_mod.Chain, "_warm_start", unguarded)
    assert not np.array_equal(_clobbered(exe, x), ref)
    assert not np.array_equal(_clobbered(exe, x, other_runtime=True), ref)


def test_model_engine_predicts_the_warm_streams(kws, count):
    """The model engine (no device) makes the same warm starts as the runtime: its rows
    and cycles are the event model's on the streams that ran (the micro-ops a warm
    kernel uses are the ones the stream before loaded)."""
    from vtakit.tools.point import predict_layers
    from vtakit.tools.profile import profile_model
    exe, x, _ = kws
    predicted = predict_layers(exe)
    assert count["warm"] > 0
    warm = count["warm"]
    _, rows = profile_model(exe, [x])
    assert count["warm"] == 2 * warm
    assert [(p["layer"], p["cycles"]) for p in predicted] == \
        [(r.name, r.predicted_cycles) for r in rows]


def _uop_words(program) -> int:
    return sum(i.fields["x_size"] * i.fields["y_size"] for i in program.insns
               if i.opcode.name == "LOAD" and not i.is_nop and i.memory_type == 0)


def test_warm_kernels_reuse_the_micro_ops_the_stream_before_left(kws, count, monkeypatch):
    """Under the guard, the uop SRAM the stream before left (its head's micro-ops) is
    known to the warm kernel's stream: the repeated layer shapes load fewer micro-ops
    than when each stream assumes nothing, and the result is the interpreter's."""
    exe, x, ref = kws
    loaded = []
    real = chain_mod.Chain._bind

    def bind(self, rt, program, bufs):
        rows = self._rows(rt)
        if rows is not None and rt.fits(program):
            loaded.append(_uop_words(chain_mod.reuse_uops(program, rows)))
        else:
            loaded.append(_uop_words(program))
        return real(self, rt, program, bufs)

    monkeypatch.setattr(chain_mod.Chain, "_bind", bind)
    y, _ = _run(exe, x)
    assert np.array_equal(y, ref) and count["carried"] == count["warm"] > 0
    carried = sum(loaded)
    loaded.clear()
    real_start = chain_mod.Chain._warm_start

    def forget(self, rt, program, bufs):
        p = real_start(self, rt, program, bufs)
        self.uop_rows = None                        # each stream assumes nothing
        return p

    monkeypatch.setattr(chain_mod.Chain, "_warm_start", forget)
    y, _ = _run(exe, x)
    assert np.array_equal(y, ref)
    assert 0 < carried < sum(loaded)


def test_without_the_guard_the_carried_micro_ops_are_wrong(kws, count, monkeypatch):
    """The uop SRAM the stream before left, carried into the next stream although the
    guard failed (another stream ran in between, on this runtime or another one): the
    cold kernel trims micro-ops the other stream overwrote, the result differs. The
    guard is what protects it."""
    exe, x, ref = kws
    real_start = chain_mod.Chain._warm_start

    def unguarded(self, rt, program, bufs):
        warm = self.warm
        p = real_start(self, rt, program, bufs)
        if warm is not None and warm[-1] is not None and self.uop_rows is None:
            count["forced"] = count.get("forced", 0) + 1
            self.uop_rows = (warm[-1], chain_mod._queued(rt), chain_mod._streams(rt))
        return p

    monkeypatch.setattr(chain_mod.Chain, "_warm_start", unguarded)
    for other in (False, True):
        count.pop("forced", None)
        assert not np.array_equal(_clobbered(exe, x, other_runtime=other), ref), other
        assert count["forced"] == 1
