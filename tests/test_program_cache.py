"""The programs OpPlan.program() shares across structurally identical plans: a cached
program is always the one the plan itself would emit, and two different plans never
share one. Also the stream caches below it (included instructions reused only while
unchanged, a finalized stream linked once, folded loop nests remembered)."""

import itertools

import numpy as np
import pytest

from vtakit.compiler.ops import plan as plan_module
from vtakit.compiler.ops import plan_add, plan_conv2d, plan_dense, plan_pool2d
from vtakit.compiler.ops.loops import Dim, _fold, fold_loops
from vtakit.compiler.ops.plan import clear_program_cache, plan_signature
from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import Format, MemType, isa_for
from vtakit.runtime import Program, ProgramBuilder, Runtime, Unit
from vtakit.sim import open_device

DEFAULT = VTAConfig.preset("default")
TINY = VTAConfig.preset("tiny")
X, W = (1, 20, 9, 7), (35, 20, 3, 3)


def variants():
    """Plans that differ from the first in one thing each (epilogue, shape, config, ...),
    plus structural twins of some of them."""
    conv = lambda cfg=DEFAULT, **kw: plan_conv2d(cfg, X, W, 2, 1, **{"bias": True, "shift": 9,
                                                                   "relu": True, **kw})
    return [conv(), conv(shift=8), conv(shift=0), conv(relu=False), conv(clip=(0, 100)),
            conv(clip=(-5, 127)), conv(clip=(0, 126)), conv(bias=False), conv(TINY),
            conv(border=True), conv(residual="int8"), conv(residual="int32"),
            plan_conv2d(DEFAULT, X, W, 1, 1, bias=True, shift=9, relu=True),
            plan_conv2d(DEFAULT, X, W, 2, 0, bias=True, shift=9, relu=True),
            plan_dense(DEFAULT, (4, 40), (20, 40), shift=3),
            plan_dense(DEFAULT, (4, 40), (20, 40), shift=4),
            plan_dense(DEFAULT, (4, 40), (20, 40), shift=3, out_dtype=np.int32),
            plan_add(DEFAULT, (1, 18, 5, 5), shift=1, clip=(-100, 100)),
            plan_add(DEFAULT, (1, 18, 5, 5), shift=1, clip=(-100, 99)),
            plan_add(DEFAULT, (1, 18, 5, 5), shift=2, clip=(-100, 100)),
            plan_pool2d(DEFAULT, (1, 16, 9, 9), "max", 3, 2, 1),
            plan_pool2d(DEFAULT, (1, 16, 9, 9), "max", 3, 2, 0),
            plan_pool2d(DEFAULT, (1, 16, 9, 9), "avg", 3, 2, 1),
            # twins: new objects, same structure
            conv(), conv(shift=8), conv(TINY), plan_add(DEFAULT, (1, 18, 5, 5), shift=1,
                                                        clip=(-100, 100))]


def test_cached_programs_are_the_freshly_emitted_ones_and_never_shared_wrongly():
    clear_program_cache()
    plans = variants()
    cached = [p.program() for p in plans]
    fresh = [p.emit_program() for p in plans]
    for plan, c, f in zip(plans, cached, fresh):
        assert c == f and c.to_bytes() == f.to_bytes(), plan.name
    for (i, a), (j, b) in itertools.combinations(enumerate(plans), 2):
        same_structure = plan_signature(a) == plan_signature(b)
        assert (cached[i] is cached[j]) == same_structure, (i, j)
        if not same_structure:     # every variant differs in its program, not only its key
            assert fresh[i].to_bytes() != fresh[j].to_bytes(), (i, j)
    twins = len(plans) - 4
    assert [cached[k] for k in range(twins, len(plans))] == [cached[0], cached[1], cached[8],
                                                              cached[17]]
    assert cached[twins] is cached[0]       # an identical plan reuses the program object


def test_plans_differing_only_in_shift_or_clip_get_their_own_programs():
    clear_program_cache()
    base = plan_conv2d(DEFAULT, X, W, 2, 1, bias=True, shift=9, clip=(-128, 127))
    shifted = plan_conv2d(DEFAULT, X, W, 2, 1, bias=True, shift=10, clip=(-128, 127))
    clipped = plan_conv2d(DEFAULT, X, W, 2, 1, bias=True, shift=9, clip=(-128, 126))
    programs = [p.program() for p in (base, shifted, clipped)]
    imms = [sorted({i.imm for i in prog.insns if i.opcode.name == "ALU"}) for prog in programs]
    assert 9 in imms[0] and 10 not in imms[0]
    assert 10 in imms[1] and 9 not in imms[1]
    assert 127 in imms[0] and 126 not in imms[0] and 126 in imms[2]
    for p, prog in zip((base, shifted, clipped), programs):
        assert prog == p.emit_program()


def test_signature_describes_values_exactly():
    d = plan_module._describe
    assert d(0.0) != d(-0.0) and d(1) != d(1.0) != d(True) and d(1) != d(np.int64(1))
    assert d(np.zeros(3, np.int8)) != d(np.zeros(3, np.uint8))
    assert d(np.zeros(4, np.int8)) != d(np.zeros((2, 2), np.int8))
    assert d(np.array([1, 2])) != d(np.array([1, 3]))
    assert d({"a": 1, "b": 2}) != d({"b": 2, "a": 1})        # order is part of a dict
    assert d((1, 2)) != d([1, 2])
    for opaque in ({1, 2}, lambda: 0, np.random.default_rng(0), np.ma.array([1]),
                   np.array([object()])):
        with pytest.raises(plan_module._Unhashable):
            d(opaque)


class _Slotted:
    __slots__ = ("__hidden", "shown")
    __module__ = "vtakit.tests"

    def __init__(self, hidden, shown):
        self.__hidden, self.shown = hidden, shown


def test_signature_sees_every_slot_private_ones_too():
    d = plan_module._describe
    assert d(_Slotted(1, 2)) == d(_Slotted(1, 2))
    assert d(_Slotted(1, 2)) != d(_Slotted(3, 2)) != d(_Slotted(1, 3))


def test_a_plan_with_an_opaque_attribute_is_never_cached():
    clear_program_cache()
    a = plan_add(DEFAULT, (1, 18, 5, 5), shift=1)
    b = plan_add(DEFAULT, (1, 18, 5, 5), shift=1)
    a.hook = b.hook = lambda: None          # e.g. a callback: its behaviour is unknown
    assert plan_signature(a) is None
    assert a.program() == b.program() and a.program() is not b.program()
    assert not plan_module._programs


def test_the_cache_is_bounded(monkeypatch):
    clear_program_cache()
    monkeypatch.setattr(plan_module, "PROGRAM_CACHE_SIZE", 2)
    plans = [plan_add(DEFAULT, (1, 18, 5, 5), shift=s) for s in range(4)]
    for p in plans:
        p.program()
    assert len(plan_module._programs) == 2
    assert list(plan_module._programs) == [plan_signature(p) for p in plans[2:]]


# ------------------------------------------------------------- streams below it

def test_an_included_instruction_changed_by_the_stream_is_encoded_again():
    """A pop pending in the stream merges into the program's first compute instruction:
    the stream must carry the changed instruction, not the program's copy of it."""
    program = plan_add(DEFAULT, (1, 18, 5, 5), shift=1).program()
    rt = Runtime(open_device("behavioral", DEFAULT))
    bufs = {name: rt.alloc(size) for name, size in program.slots.items()}
    rt.dep_push(Unit.LOAD, Unit.COMPUTE)
    rt.dep_pop(Unit.LOAD, Unit.COMPUTE)
    rt.bind(program, bufs)
    first = next(i for i in rt.instructions if i.opcode.name in ("LOAD", "GEMM", "ALU")
                 and not (i.opcode.name == "LOAD" and i.memory_type in (MemType.INP,
                                                                        MemType.WGT)))
    assert first.pop_prev_dep == 1
    isa = isa_for(DEFAULT)
    for insn in rt.instructions:             # every word is its fields, re-encoded
        assert isa.decode(insn.word).fields == insn.fields
    rt.finalize()
    assert [i.word for i in rt.instructions] == [
        int.from_bytes(rt.device.read(rt._finalized[0] + 16 * k, 16).tobytes(), "little")
        for k in range(rt._finalized[1])]
    rt.reset()


def test_a_program_included_in_a_builder_keeps_its_instructions():
    program = plan_add(DEFAULT, (1, 18, 5, 5), shift=1).program()
    b = ProgramBuilder(DEFAULT, name="add")
    b.include(program, {n: b.slot(n, size) for n, size in program.slots.items()})
    built = b.build()
    assert built == program
    assert [i.fields for i in built.insns] == [i.fields for i in program.insns]


def test_from_bytes_gives_back_a_live_writer_and_decodes_anything_else():
    plan = plan_add(DEFAULT, (1, 18, 5, 5), shift=1)
    program = plan.program()
    data = program.to_bytes()
    assert Program.from_bytes(data) is program
    fresh = Program.from_bytes(plan.emit_program().to_bytes())     # writer collected
    assert fresh is not program and fresh == program
    assert [i.fields for i in fresh.insns] == [i.fields for i in program.insns]


def test_fold_loops_remembers_only_what_it_would_compute():
    dims = [Dim("co", 2, 16, 0, 16), Dim("ci", 4, 0, 1, 1, reduce=True), Dim("w", 7, 1, 1)]
    a = fold_loops(dims, (3, 5, 0))
    assert a is fold_loops(list(dims), [3, 5, 0])
    assert a == _fold(tuple(dims), (3, 5, 0))
    np_dims = [Dim("co", np.int64(2), 16, 0, 16), *dims[1:]]      # not cached, same result
    assert fold_loops(np_dims, (3, 5, 0)) == a


def test_format_decode_is_field_extract():
    fmt = Format("T", 128, 64, [("a", 3), ("b", 5, True), ("c", 16, True), ("d", 1, True),
                                ("e", 40)])
    rng = np.random.default_rng(0)
    for _ in range(2000):
        word = int(rng.integers(0, 1 << 62)) << 66 | int(rng.integers(0, 1 << 62))
        assert fmt.decode(word) == {f.name: f.extract(word) for f in fmt.fields}


def test_config_tables_by_memory_type():
    for cfg in (DEFAULT, TINY, VTAConfig.preset("4x8")):
        for mt, name in ((0, "uop"), (1, "wgt"), (2, "inp"), (3, "acc"), (4, "out")):
            assert cfg.elem_bytes(MemType(mt)) == cfg.elem_bytes(mt) == \
                getattr(cfg, f"{name}_elem_bytes")
            assert cfg.depth(mt) == getattr(cfg, f"{name}_depth")
        with pytest.raises(KeyError):
            cfg.elem_bytes(5)


# ------------------------------------------------- predictions kept with a program

def test_program_stream_is_the_stream_the_runtime_binds():
    """The model engine predicts each kernel on program_stream (no device): it must be
    the runtime's stream of the program bound alone, field for field but the DRAM
    addresses (which the event model does not read)."""
    from vtakit.compiler.ops.perfmodel import predict_stream, program_stream

    rt = Runtime(open_device("behavioral", DEFAULT))
    strip = lambda insns: [(i.opcode, {k: v for k, v in i.fields.items() if k != "dram_base"})
                           for i in insns]
    for plan in variants():
        if plan.config != DEFAULT:
            continue
        program = plan.program()
        bufs = {name: rt.alloc(size) for name, size in program.slots.items()}
        rt.bind(program, bufs)
        rt.finalize()
        bound = rt.instructions
        rt.reset()
        for b in bufs.values():
            rt.free(b)
        mine = program_stream(program)
        assert strip(mine) == strip(bound), plan.name
        assert mine[-1].opcode.name == "FINISH"
        assert predict_stream(mine, DEFAULT) == predict_stream(bound, DEFAULT)


def test_program_prediction_is_kept_per_program_and_cost_model():
    from dataclasses import replace

    from vtakit.compiler.ops.perfmodel import (predict_stream, program_prediction,
                                               program_stream, stream_traffic)
    from vtakit.compiler.ops.tiling import RTL_COST

    clear_program_cache()
    plans = [plan_conv2d(DEFAULT, X, W, 2, 1, bias=True, shift=9, relu=True),
             plan_pool2d(DEFAULT, (1, 16, 9, 9), "max", 3, 2, 1)]
    slow = replace(RTL_COST, insn_cycles=40)
    for plan in plans:
        program = plan.program()
        insns = program_stream(program)
        for cost in (RTL_COST, slow, RTL_COST):
            pred, traffic = program_prediction(program, cost)
            # the micro-ops: with the ALU lane (``default``) the model follows them
            assert pred == predict_stream(insns, DEFAULT, cost, uops=program.uops)
            assert traffic == stream_traffic(insns, DEFAULT)
            traffic["inp_load_nbytes"] = -1          # the caller's copy
        assert program_prediction(program, slow)[0].cycles > \
            program_prediction(program, RTL_COST)[0].cycles
        info = plan.inspect()
        assert info["predicted_cycles"] == predict_stream(insns, DEFAULT,
                                                          uops=program.uops).cycles
        assert info["instructions"] == len(insns)
        # an equal program emitted afresh is predicted afresh, to the same figures
        fresh = plan.emit_program()
        assert fresh is not program and not fresh.memo
        assert program_prediction(fresh)[0] == program_prediction(program)[0]
    # two different programs never share a prediction
    a, b = (program_prediction(p.program())[0] for p in plans)
    assert a.cycles != b.cycles


def _endings():
    """Small programs ending every way a stream's fences treat differently: a store
    (whose push the fence sets), a load, a compute instruction, pops pending on each
    stage, a flag the fence would set already set, no instruction at all."""
    from vtakit.hw.isa import AluOp
    from vtakit.runtime import UopKernel
    k = UopKernel.alu(AluOp.ADD, [(0, 0)], [(16, 1, 1)], imm=3)

    def load(b, s):
        b.load_2d(MemType.ACC, 0, s, 0, 16, 1, 16)

    def alu(b, s):
        b.push_alu(k)

    def store(b, s):
        b.dep_push(Unit.COMPUTE, Unit.STORE)
        b.dep_pop(Unit.COMPUTE, Unit.STORE)
        b.store_2d(0, s, 0, 16, 1, 16)

    def inp(b, s):
        b.load_2d(MemType.INP, 0, s, 0, 16, 1, 16)

    def pushed(b, s):           # the store already pushes to compute
        store(b, s)
        b.dep_push(Unit.STORE, Unit.COMPUTE)

    def pops(*pairs):
        return lambda b, s: [b.dep_pop(a, c) for a, c in pairs]

    for parts in ([load, alu, store], [load, alu], [inp], [load, alu, store, pushed],
                  [load, pops((Unit.STORE, Unit.COMPUTE), (Unit.LOAD, Unit.COMPUTE))],
                  [load, alu, store, pops((Unit.COMPUTE, Unit.STORE))],
                  [inp, pops((Unit.COMPUTE, Unit.LOAD))], [pops((Unit.STORE, Unit.COMPUTE))],
                  []):
        b = ProgramBuilder(DEFAULT, name="t")
        s = b.slot("s", 4096)
        for part in parts:
            part(b, s)
        yield b.build()


def test_a_program_finished_alone_is_the_general_include_and_finish():
    from vtakit.runtime.builder import finished_alone

    programs = list(_endings()) + [p.program() for p in variants()]
    for program in programs:
        b = ProgramBuilder(program.config, name=program.name)
        b.include(program, {n: b.slot(n, size) for n, size in program.slots.items()})
        b.finish()
        general = b.instructions()
        mine = finished_alone(program)
        assert [i.word for i in mine] == [i.word for i in general], program
        assert [i.fields for i in mine] == [i.fields for i in general]
        assert [i.word for i in general] == [i.word for i in b.build().insns]
    # the fence sets a push flag on a program's last store: that one is encoded again
    p = next(_endings())
    assert finished_alone(p)[len(p) - 1].word != p.insns[-1].word


def test_remembered_kernels_are_the_ones_the_builders_would_build(monkeypatch):
    from vtakit.hw.isa import AluOp
    from vtakit.runtime import KernelError, UopKernel
    from vtakit.runtime import kernel as kernel_module

    hazard = ((0, 0, 0), (1, 0, 0), (0, 1, 1))
    calls = [lambda: UopKernel.gemm(((0, 1, 2), (3, 4, 5), (6, 7, 8)), ((2, 16, 0, 0),)),
             lambda: UopKernel.gemm(((0, 1, 2), (3, 4, 5), (6, 7, 8)), ((2, 16, 0, 0),), True),
             lambda: UopKernel.gemm(((0, 1, 2), (3, 4, 5), (6, 7, 9)), ((2, 16, 0, 0),)),
             lambda: UopKernel.gemm(hazard, check_hazard=False),
             lambda: UopKernel.gemm(hazard, reset=True),
             lambda: UopKernel.alu(AluOp.ADD, ((0, 0), (1, 1)), ((4, 2, 2),), imm=3),
             lambda: UopKernel.alu(AluOp.ADD, ((0, 0), (1, 1)), ((4, 2, 2),), imm=4),
             lambda: UopKernel.alu(AluOp.MAX, ((0, 0), (1, 1)), ((4, 2, 2),), imm=3),
             lambda: UopKernel.alu(AluOp.ADD, ((0, 0), (1, 1)), ((4, 2, 2),)),
             lambda: UopKernel.alu(AluOp.SHR, [(0, 0)], [(4, 1, 1)], imm=2)]
    kernel_module.clear_kernel_memo()
    fresh = []
    for make in calls:
        kernel_module.clear_kernel_memo()
        fresh.append(make())
    kernel_module.clear_kernel_memo()
    for _ in range(2):
        for make, want in zip(calls, fresh):
            got = make()
            assert got == want and got.mode == want.mode and got.imm == want.imm
            assert type(got.uops[0][0]) is int
    assert len({k for k in fresh}) == len(fresh)            # all different
    # a kernel remembered without the hazard check is still refused with it
    with pytest.raises(KernelError, match="accumulate hazard"):
        UopKernel.gemm(hazard)
    # equal arguments of other types build the same value
    assert UopKernel.gemm([[0, 1, 2], [3, 4, 5], [6, 7, 8]], [[2, 16, 0, 0]]) == fresh[0]
    assert UopKernel.gemm(((np.int64(0), 1, 2), (3, 4.0, 5), (6, 7, 8)),
                          ((2, 16, 0, 0),)) == fresh[0]
    with pytest.raises(KernelError, match="entries must be >= 0"):
        UopKernel.gemm(((0, -1, 2),))
    clear_program_cache()
    assert not kernel_module._made
    monkeypatch.setattr(kernel_module, "_MEMO_SIZE", 3)
    for make in calls:
        make()
    assert 0 < len(kernel_module._made) <= 3


# ------------------------------------------- what the event model and the search share


def test_programs_differing_only_in_immediates_share_one_prediction():
    """The event model reads no ALU immediate but whether it is zero (REQ passes): two
    layers that differ in their shift and clip (same passes) share one prediction, which
    is what each predicts alone; a layer without the shift pass does not share it."""
    from dataclasses import replace

    from vtakit.compiler.ops.cost.events import (predict_stream, program_facts,
                                                 program_stream, timing_key)
    from vtakit.compiler.ops.tiling import RTL_COST

    clear_program_cache()
    a, b, c = (plan_conv2d(DEFAULT, X, W, 2, 1, bias=True, shift=s, clip=clip).program()
               for s, clip in ((9, (-128, 127)), (10, (-100, 126)), (0, (-128, 127))))
    assert a.to_bytes() != b.to_bytes()
    assert timing_key(a, RTL_COST) == timing_key(b, RTL_COST) != timing_key(c, RTL_COST)
    assert timing_key(a, RTL_COST) != timing_key(a, replace(RTL_COST, insn_cycles=40))
    shared = program_facts(a)[0]
    assert program_facts(b)[0] is shared
    assert shared == predict_stream(program_stream(b), DEFAULT, uops=b.uops)
    assert program_facts(c)[0] is not shared


def test_timing_key_keeps_whether_an_alu_immediate_is_zero():
    """A REQ pass with immediate 0 is the per-vector pass, others set up its rows: the
    key tells 0 from non-zero and nothing more."""
    from vtakit.compiler.ops.cost.events import timing_key
    from vtakit.compiler.ops.tiling import RTL_COST
    from vtakit.hw.isa import AluOp, Opcode

    isa = isa_for(DEFAULT)

    def program(imm):
        word = isa.encode(Opcode.ALU, uop_bgn=0, uop_end=1, iter_out=1, iter_in=1,
                          alu_opcode=int(AluOp.SHR), use_imm=1, imm=imm)
        return Program(DEFAULT, [isa.decode(word)], uops=[0])

    keys = [timing_key(program(imm), RTL_COST) for imm in (0, 3, 4, -2)]
    assert keys[0] != keys[1] == keys[2] == keys[3]


def _searched_layer(shift, clip):
    """A 1x1 layer whose search tries an option on ``default`` (post_beside)."""
    w = np.ones((64, 256, 1, 1), np.int8)
    return plan_conv2d(DEFAULT, (1, 256, 14, 14), w.shape, 1, 0, bias=True, shift=shift,
                       clip=clip, min_init=(np.zeros(64, np.int64), w))


class _Recording(dict):
    """A memo that remembers what was stored in it."""

    def __init__(self):
        super().__init__()
        self.stored = []

    def __setitem__(self, key, value):
        self.stored.append(key)
        super().__setitem__(key, value)


def test_a_layer_differing_only_in_immediates_takes_the_searched_choices(monkeypatch):
    """The second of two layers that differ only in their epilogue's immediates takes
    the first's choices from the memo (no search of its own stores any), and ends with
    the plan and the program a search of its own gives it."""
    import importlib
    conv2d = importlib.import_module("vtakit.compiler.ops.conv2d")
    memo = _Recording()
    monkeypatch.setattr(conv2d, "_SEARCHED", memo)
    clear_program_cache()
    first = _searched_layer(9, (-128, 127))
    assert first.post_beside and len(memo.stored) == 1      # the search chose something
    second = _searched_layer(10, (-100, 120))
    assert len(memo.stored) == 1 and second.post_beside
    clear_program_cache()
    fresh = _searched_layer(10, (-100, 120))
    assert len(memo.stored) == 2
    assert second._snapshot() == fresh._snapshot()
    assert second.program().to_bytes() == fresh.program().to_bytes()
    assert first.program().to_bytes() != second.program().to_bytes()
    # a layer of another shape has its own entry
    plan_conv2d(DEFAULT, (1, 256, 14, 14), (32, 256, 1, 1), 1, 0, bias=True, shift=9)
    assert len(memo.stored) == 3 and memo.stored[2] != memo.stored[0]


def test_a_memoized_search_whose_program_differs_is_searched_again(monkeypatch):
    """Where the memo's choices give the layer a program the event model could tell from
    the memoized search's result, the layer searches itself."""
    import importlib
    conv2d = importlib.import_module("vtakit.compiler.ops.conv2d")
    memo = _Recording()
    monkeypatch.setattr(conv2d, "_SEARCHED", memo)
    clear_program_cache()
    _searched_layer(9, (-128, 127))
    monkeypatch.setattr(conv2d, "timing_key", lambda program, cost: object())
    second = _searched_layer(10, (-100, 120))
    assert len(memo.stored) == 2 and memo.stored[0] == memo.stored[1]
    assert second.post_beside
