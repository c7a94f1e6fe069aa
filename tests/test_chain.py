"""Chaining (vtakit.runtime.chain): consecutive device-resident layers run as one
instruction stream with one synchronize, bit for bit as unchained, with the
cross-module barrier at every boundary; layers with a host step stay unchained."""

from pathlib import Path

import numpy as np
import pytest

import vtakit
from vtakit.compiler.frontend import from_tflite
from vtakit.hw.isa import MemType, Opcode, bytes_to_words, isa_for
from vtakit.hw.spec import INSN_BYTES, Unit, dispatch_unit
from vtakit.runtime import chain as chain_mod
from vtakit.runtime.recorder import LayerRecorder
from vtakit.sim import open_device
from vtakit.testing import model_inputs
from vtakit.tools.profile import latency_totals, profile_model

KWS = Path(__file__).parent / "data" / "mltk" / "keyword_spotting.tflite"


@pytest.fixture(scope="module")
def kws():
    x = model_inputs(from_tflite(KWS)["main"].params[0].type_annotation, 1, 0)[0]
    return vtakit.compile(KWS, config="tiny+requant2"), x


def _run(exe, x, backend="behavioral", chain=True, **device_options):
    """Output, device runs and their instruction streams of one inference."""
    with open_device(backend, exe.config, **device_options) as dev, \
            LayerRecorder(dev, keep_outputs=False, keep_streams=True) as rec:
        y = np.asarray(exe.run([x], device=dev, hook=rec.hook, hook_outputs=False,
                               chain=chain))
    return y, rec.layers


def _unit(insn):
    return dispatch_unit(insn.opcode, insn.fields.get("memory_type"))


def _vta_kernels(exe):
    return [exe.program(p.meta_dict["kernel"]) for p in exe.primitives if p.kind == "vta_layer"]


def test_variants_split_the_fence(kws):
    """The exit variant pushes *SRAM free* (compute -> load) right after its last GEMM, an
    early *stores done* (a store NOP after its last store of its own protocol) and leaves
    the last store's s2g token to the next layer; the entry variant loads its first
    weights, then its compute LOADs and resets, then two compute NOPs pop the two s2g
    tokens, one pushing *DRAM ready*, which its first input LOAD pops."""
    exe, _ = kws
    prog = _vta_kernels(exe)[1]          # a conv between two device tensors
    ex = chain_mod.exit_variant(prog)
    assert ex is not None and len(prog) - 1 <= len(ex) <= len(prog)
    assert ex.pending_pops == prog.pending_pops == ((1, "pop_next_dep"),)
    last_gemm = max(k for k, i in enumerate(ex.insns)
                    if i.opcode == Opcode.GEMM and not i.reset_reg)
    assert ex.insns[last_gemm].push_prev_dep or ex.insns[last_gemm + 1].push_prev_dep
    assert not any(i.pop_next_dep for i in ex.insns[last_gemm:] if _unit(i) == Unit.COMPUTE)
    stores = [i for i in ex.insns if _unit(i) == Unit.STORE]
    assert stores[-1].push_prev_dep and not stores[-1].is_nop
    assert sum(i.is_nop and i.push_prev_dep for i in stores) == 1

    for early in (False, True):
        en = chain_mod.entry_variant(prog, early)
        assert en is not None and len(en) == len(prog) + 2
        nops = [k for k, i in enumerate(en.insns) if i.is_nop and _unit(i) == Unit.COMPUTE
                and i.pop_next_dep]
        assert nops[1] == nops[0] + 1
        ready = nops[0] if early else nops[1]
        assert [en.insns[k].push_prev_dep for k in nops[:2]] == [k == ready for k in nops[:2]]
        head = en.insns[:nops[0]]
        loads = [i for i in head if _unit(i) == Unit.LOAD]
        assert loads and all(i.memory_type == MemType.WGT for i in loads)
        assert not any(i.pop_prev_dep or i.pop_next_dep for i in head)
        assert all(i.opcode == Opcode.LOAD or i.reset_reg for i in head
                   if _unit(i) == Unit.COMPUTE)
        first_inp = next(i for i in en.insns[nops[1]:] if _unit(i) == Unit.LOAD)
        assert first_inp.memory_type == MemType.INP and first_inp.pop_next_dep
        # the relocations travel with their instructions
        assert sorted((en.insns[r.insn].opcode, r.slot) for r in en.relocations) == \
            sorted((prog.insns[r.insn].opcode, r.slot) for r in prog.relocations)


def test_swap_slots_exchanges_the_halves(kws):
    """A kernel with its SRAM halves exchanged computes the same (behavioral model)."""
    from vtakit.runtime import Runtime
    exe, x = kws
    cfg = exe.config
    swapped = 0
    for prog in _vta_kernels(exe)[:4]:
        other = chain_mod.swap_slots(prog)
        if other is None:
            continue
        swapped += 1
        assert len(other) == len(prog) and other.words != prog.words
        rng = np.random.default_rng(len(prog))
        outs = []
        for p in (prog, other):
            with open_device("behavioral", cfg) as dev:
                rt = Runtime(dev)
                bufs = {}
                for name, n in p.slots.items():
                    bufs[name] = rt.alloc(n)
                    if name != "out":
                        rt.upload(bufs[name], np.random.default_rng(n).integers(
                            -128, 127, n, dtype=np.int8))
                rt.bind(p, bufs)
                rt.synchronize()
                outs.append(rt.download(bufs["out"], np.int8, p.slots["out"]))
        assert np.array_equal(*outs)
        del rng
    assert swapped


def test_chained_stream_has_the_barrier_at_each_boundary(kws, monkeypatch):
    """One run for the chain; between its layers the token pattern of the boundary (no
    warm-start head at its end: tests/test_prefetch.py)."""
    from vtakit.runtime.vm import interpreter
    monkeypatch.setattr(interpreter, "_next_layers", lambda *a: {})
    exe, x = kws
    y, layers = _run(exe, x)
    runs = [r for layer in layers for r in layer.runs]
    n_vta = sum(p.kind == "vta_layer" for p in exe.primitives)
    assert len(runs) < n_vta
    isa = isa_for(exe.config)
    insns = [isa.decode(w) for w in bytes_to_words(runs[0].insns, INSN_BYTES)]
    # every boundary: two compute NOPs popping s2g, one pushing g2l, then a LOAD INP
    # popping it
    nops = [k for k, i in enumerate(insns) if i.is_nop and _unit(i) == Unit.COMPUTE
            and i.pop_next_dep and insns[k + 1].is_nop and insns[k + 1].pop_next_dep
            and _unit(insns[k + 1]) == Unit.COMPUTE]
    # one boundary after each layer that left its chain open
    chained = [layer for layer in layers if layer.name.startswith("vta_") and not layer.runs]
    assert len(nops) == len(chained) > 0
    for k in nops:
        assert insns[k].push_prev_dep + insns[k + 1].push_prev_dep == 1
        nxt = next(i for i in insns[k + 2:] if _unit(i) == Unit.LOAD)
        assert nxt.memory_type == MemType.INP and nxt.pop_next_dep
    # token queues balance over the whole stream
    bal = {"l2g": 0, "g2l": 0, "g2s": 0, "s2g": 0}
    for i in insns:
        u = _unit(i)
        if u == Unit.LOAD:
            bal["l2g"] += i.push_next_dep
            bal["g2l"] -= i.pop_next_dep
        elif u == Unit.COMPUTE:
            bal["l2g"] -= i.pop_prev_dep
            bal["s2g"] -= i.pop_next_dep
            bal["g2l"] += i.push_prev_dep
            bal["g2s"] += i.push_next_dep
        else:
            bal["g2s"] -= i.pop_prev_dep
            bal["s2g"] += i.push_prev_dep
    assert bal == dict.fromkeys(bal, 0)


def test_chained_equals_unchained_under_any_schedule(kws):
    """Bit for bit equal to the unchained run and to the IR interpreter, for seeded random
    interleavings of the behavioral model's units (a missing dependency would show)."""
    exe, x = kws
    from vtakit.compiler.ir import evaluate
    ref = np.asarray(evaluate(from_tflite(KWS), x))
    y0, layers0 = _run(exe, x, chain=False)
    assert sum(len(layer.runs) for layer in layers0) == \
        sum(p.kind == "vta_layer" for p in exe.primitives)
    assert np.array_equal(y0, ref)
    for seed in (1, 2, 3):
        y, _ = _run(exe, x, interleave_seed=seed)
        assert np.array_equal(y, y0), seed


def test_without_the_barrier_the_chain_races(kws, monkeypatch):
    """The same chain with the DRAM-ready barrier dropped (the next layer's input LOAD does
    not wait for the last store) gives a different result under some interleaving: the
    barrier is what protects it."""
    exe, x = kws
    y0, _ = _run(exe, x, chain=False)
    real = chain_mod.entry_variant

    def no_barrier(program, early=False):
        p = real(program, early)
        if p is None:
            return None
        from vtakit.runtime.program import Program, make_insn
        insns, first = [], True
        for i in p.insns:
            f = {k: v for k, v in i.fields.items() if k != "opcode"}
            if first and _unit(i) == Unit.LOAD and i.memory_type == MemType.INP:
                f["pop_next_dep"] = 0       # does not wait for the previous layer's stores
                first = False
            insns.append(make_insn(p.config, i.opcode, f))
        # the g2l token is popped at the end instead (the queues stay balanced)
        insns.append(make_insn(p.config, Opcode.LOAD, dict(
            memory_type=int(MemType.INP), pop_next_dep=1)))
        return Program(p.config, insns, p.uops, dict(p.slots),
                       [(r.insn, r.slot) for r in p.relocations], p.pending_pops, p.name)

    monkeypatch.setattr(chain_mod, "entry_variant", no_barrier)
    for prog in _vta_kernels(exe):          # variants are kept with their programs
        for p in (prog, prog.memo.get("chain_swap")):
            for key in [k for k in (p.memo if p is not None else ()) if k[0] == "chain"]:
                monkeypatch.delitem(p.memo, key)
    results = [_run(exe, x, interleave_seed=s)[0] for s in range(1, 9)]
    assert any(not np.array_equal(y, y0) for y in results)


def test_base_isa_with_host_requantize_stays_unchained(monkeypatch):
    """On the base ISA every conv/dense result goes to the host: one run per VTA layer,
    each the layer's own kernel, unchanged once no warm start is expected
    (tests/test_prefetch.py covers those)."""
    from vtakit.runtime.vm import interpreter
    exe = vtakit.compile(KWS, config="tiny")
    x = model_inputs(from_tflite(KWS)["main"].params[0].type_annotation, 1, 0)[0]
    y0, layers0 = _run(exe, x, chain=False)
    y1, layers1 = _run(exe, x)                      # with warm starts
    monkeypatch.setattr(interpreter, "_next_layers", lambda *a: {})
    y, layers = _run(exe, x)
    assert np.array_equal(y, y0) and np.array_equal(y1, y0)
    runs = [len(layer.runs) for layer in layers0]
    assert [len(layer.runs) for layer in layers] == runs
    assert [len(layer.runs) for layer in layers1] == runs
    assert [r.insns for layer in layers for r in layer.runs] == \
        [r.insns for layer in layers0 for r in layer.runs]


def test_a_hook_that_sees_outputs_runs_unchained(kws):
    """A layer hook with outputs gets every layer's (so nothing is chained)."""
    exe, x = kws
    with open_device("behavioral", exe.config) as dev, \
            LayerRecorder(dev, keep_outputs=True) as rec:
        exe.run([x], device=dev, hook=rec.hook)
    assert all(layer.runs for layer in rec.layers if layer.name.startswith("vta_"))
    assert all(layer.output is not None for layer in rec.layers)


def test_profile_rows_of_a_chain(kws):
    """A chain is one profile row naming its layers; the rows' cycles (predicted here)
    and host times still sum to the totals."""
    exe, x = kws
    y, rows = profile_model(exe, [x])
    _, plain = profile_model(exe, [x], chain=False)
    chains = [r for r in rows if len(r.layers) > 1]
    assert chains and all(r.engine == "VTA" and r.predicted_cycles > 0 for r in chains)
    assert sum(len(r.layers) for r in rows) == len(plain)
    assert [n for r in rows for n in r.layers] == [r.name for r in plain]
    c = chains[0]
    assert c.name == f"{c.layers[0]} +{len(c.layers) - 1}"
    assert c.macs == sum(r.macs for r in plain if r.name in c.layers)
    assert c.roofline.cycles == sum(r.roofline.cycles for r in plain if r.name in c.layers)
    totals = latency_totals(rows, 100.0)
    assert totals["cycles"] == sum(r.vta_cycles for r in rows if r.engine == "VTA")
    assert totals["host_us"] == pytest.approx(sum(r.host_us() for r in rows))


@pytest.mark.slow
def test_chained_on_verilator_equals_unchained_and_litert(kws):
    """Verilator: the chained run equals the unchained one and LiteRT's reference kernels
    bit for bit, in fewer cycles; the profile's cycles are the device's."""
    import ai_edge_litert.interpreter as litert
    exe, x = kws
    it = litert.Interpreter(model_path=str(KWS),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    (i,), (o,) = it.get_input_details(), it.get_output_details()
    it.set_tensor(i["index"], x)
    it.invoke()
    y0, layers0 = _run(exe, x, "verilator", chain=False)
    y, layers = _run(exe, x, "verilator")
    assert np.array_equal(y, y0)
    assert np.array_equal(y, it.get_tensor(o["index"]))
    c0 = sum(r.cycles for layer in layers0 for r in layer.runs)
    c1 = sum(r.cycles for layer in layers for r in layer.runs)
    assert 0 < c1 < c0
    with open_device("verilator", exe.config) as dev:
        _, rows = profile_model(exe, [x], device=dev)
    assert sum(r.cycles for r in rows if r.engine == "VTA") == c1


def test_no_early_read_of_what_the_previous_layer_stores(kws):
    """A kernel joins a chain only if what it reads before the previous kernel's stores
    are over (first weights, bias rows) is not what they write; its inputs wait for the
    last store unless every load before its first token reads none of the last stores."""
    from vtakit.compiler.ops.cost.chain import DryRuntime
    exe, _ = kws
    a, b = _vta_kernels(exe)[1:3]

    class Buf:
        def __init__(self, addr, nbytes):
            self.addr, self.nbytes = addr, nbytes
    page = 1 << 16

    def bufs(prog, base, **at):
        return {n: at.get(n) or Buf(base + k * page, size)
                for k, (n, size) in enumerate(prog.slots.items())}
    a_bufs = bufs(a, 1 << 22)
    out = a_bufs["out"]
    # b's input is a's output: chained, one stream
    rt, ch = DryRuntime(exe.config), chain_mod.Chain()
    assert ch.follow(rt, a, a_bufs, True) is None
    b_bufs = bufs(b, 1 << 23, data=Buf(out.addr, b.slots["data"]))
    assert ch.follow(rt, b, b_bufs, False) is not None
    assert [len(r.programs) for r in rt.runs] == [2]
    # b's weights where a stores (its first weight LOADs would read them early): a runs
    # alone, then b
    rt, ch = DryRuntime(exe.config), chain_mod.Chain()
    ch.follow(rt, a, a_bufs, True)
    b_bufs = bufs(b, 1 << 23, data=Buf(out.addr, b.slots["data"]),
                  weight=Buf(out.addr, b.slots["weight"]))
    ch.follow(rt, b, b_bufs, False)
    assert [len(r.programs) for r in rt.runs] == [1, 1]
    # the loads that may run once DRAM ready is popped go up to the first that pops
    reads = chain_mod.first_inputs(b, b_bufs)
    loads = [i for i in b.insns if _unit(i) == Unit.LOAD]
    first_pop = next(k for k, i in enumerate(loads) if i.pop_next_dep)
    assert len(reads) == sum(not i.is_nop for i in loads[:first_pop]) > \
        len(chain_mod._first_group(b)[2])


def test_model_engine_predicts_the_chained_streams(kws):
    """The model engine (no device) predicts each chain as the one stream the runtime runs:
    its rows and cycles are the event model's on the streams that ran (warm starts across
    host steps too: tests/test_prefetch.py)."""
    from vtakit.tools.point import predict_layers
    exe, x = kws
    predicted = predict_layers(exe)
    _, rows = profile_model(exe, [x])
    assert [(p["layer"], p["cycles"], p["calls"]) for p in predicted] == \
        [(r.name, r.predicted_cycles, len(r.layers)) for r in rows]
    assert any(p["calls"] > 1 for p in predicted)
    plain = predict_layers(exe, chain=False)
    assert len(plain) == sum(p["calls"] for p in predicted)
    assert all(p["calls"] == 1 for p in plain)


def test_a_chain_never_outgrows_the_stream(kws):
    """With a small max_xfer, a chain is run before the stream would need an automatic
    synchronize (which cannot cut a chain: its tokens are unbalanced)."""
    from vtakit.runtime import Runtime
    exe, x = kws
    y0, _ = _run(exe, x, chain=False)
    longest = max(len(p) for p in _vta_kernels(exe))
    with open_device("behavioral", exe.config) as dev, \
            LayerRecorder(dev, keep_outputs=False) as rec:
        vm = exe.vm(device=dev, hook=rec.hook, hook_outputs=False)
        rt = Runtime(dev, max_xfer=(2 * longest + 40) * exe.config.insn_bytes)
        vm.context._runtime = rt
        y = np.asarray(vm.run(x))
        vm.close()
    assert np.array_equal(y, y0)
    runs = [r for layer in rec.layers for r in layer.runs]
    assert 2 < len(runs) < sum(p.kind == "vta_layer" for p in exe.primitives)
    assert rt.stats["auto_syncs"] == 0


def _uop_loads(program):
    return [(k, i) for k, i in enumerate(program.insns) if i.opcode == Opcode.LOAD
            and not i.is_nop and i.memory_type == MemType.UOP]


def test_resident_micro_ops_are_not_loaded_again(kws):
    """A kernel bound after one that left its micro-ops at the same rows loads none of
    them (its flagless LOAD UOPs are gone); a row overwritten in between is loaded again
    (the LOAD UOP is trimmed to the rows that differ), never reused."""
    exe, _ = kws
    prog = next(p for p in _vta_kernels(exe) if _uop_loads(p))
    unknown = np.full(exe.config.uop_depth, -1, dtype=np.int64)
    assert chain_mod.reuse_uops(prog, unknown) is prog        # nothing known: unchanged
    rows = chain_mod.uop_rows(prog, unknown)
    same = chain_mod.reuse_uops(prog, rows)
    assert not any(not (i.push_prev_dep or i.push_next_dep or i.pop_prev_dep
                        or i.pop_next_dep) for _, i in _uop_loads(same))
    assert np.array_equal(chain_mod.uop_rows(same, rows), rows)
    # overwrite one row of the kernel's first LOAD UOP: exactly that row is loaded again
    k, first = _uop_loads(prog)[0]
    row = first.sram_base + first.x_size // 2
    dirty = rows.copy()
    dirty[row] ^= 1
    again = chain_mod.reuse_uops(prog, dirty)
    loads = _uop_loads(again)
    assert any(i.sram_base <= row < i.sram_base + i.x_size for _, i in loads)
    assert sum(i.x_size for _, i in loads) < sum(i.x_size for _, i in _uop_loads(prog))
    assert np.array_equal(chain_mod.uop_rows(again, dirty), rows)


def test_chain_drops_only_micro_ops_bound_in_the_same_stream(kws):
    """The chained KWS streams load fewer micro-ops than their kernels (the repeated
    layers' kernels stay resident); with the reuse off they load them all. A stream
    that something else was queued into since the chain's last kernel reuses nothing."""
    exe, x = kws
    isa = isa_for(exe.config)

    def uops_loaded(layers):
        n = 0
        for run in (r for layer in layers for r in layer.runs):
            for i in (isa.decode(w) for w in bytes_to_words(run.insns, INSN_BYTES)):
                if i.opcode == Opcode.LOAD and not i.is_nop and i.memory_type == MemType.UOP:
                    n += i.x_size * i.y_size
        return n

    y, layers = _run(exe, x)
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(chain_mod, "reuse_uops", lambda program, rows: program)
        y0, layers0 = _run(exe, x)
        assert np.array_equal(y, y0)
        assert uops_loaded(layers) < uops_loaded(layers0)
    with mp.context() as m:
        m.setattr(chain_mod, "_queued", lambda rt: object())   # never the recorded length
        y1, layers1 = _run(exe, x)
        assert np.array_equal(y1, y0)
        assert uops_loaded(layers1) == uops_loaded(layers0)
