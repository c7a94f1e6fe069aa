"""The compute module's ALU lane (config key ``COMPUTE_OVERLAP``, ``tiny+overlap``): directed
programs on Verilator compared with the behavioral model bit for bit (final DRAM, counters,
faults), and the config key.

The programs are raw instruction streams, so that each case puts exactly the
instruction it tests next to the lane: an ALU epilogue of tile t (bank 0) beside the
GEMMs of tile t+1 (bank 1); a younger GEMM that writes the ALU's dst rows or its src
rows (it must wait); ALUs the lane refuses (two micro-ops, rows in both banks, a fault);
pushes from both lanes to the same queue and to different ones; a LOAD ACC of the
other bank and of the lane's bank while the lane runs; FINISH right behind a lane
instruction; a GEMM fault while the lane runs. The cycles of the epilogue program
with and without the overlap are printed (``-s``), not asserted. The lane alone (the
Amaranth simulator) takes enqueues on consecutive cycles, which the compute module does
not issue today.
"""

import numpy as np
import pytest

from vtakit.hw.config import ConfigError, VTAConfig, load_config
from vtakit.hw.isa import AluOp, MemType, Opcode, insns_to_bytes, isa_for
from vtakit.runtime.device import DeviceError, open_device

TINY = load_config("tiny")
OV = load_config("tiny+overlap")
ISA = isa_for(OV)
LANES = OV.batch * OV.block_out
HALF = OV.acc_depth // 2         # the first row of acc/out bank 1


# ----------------------------------------------------------------------- config


def test_overlap_key_round_trips_and_names_the_config():
    assert OV.compute_overlap == 1 and TINY.compute_overlap == 0
    assert OV.name == TINY.name + "+overlap"
    assert OV.to_dict()["COMPUTE_OVERLAP"] == 1 and "COMPUTE_OVERLAP" not in TINY.to_dict()
    assert VTAConfig.from_dict(OV.to_dict()) == OV
    both = load_config("tiny+requant2+overlap")
    assert both.extensions == ("requant2",) and both.compute_overlap == 1
    assert load_config("tiny+overlap+requant2") == both


@pytest.mark.parametrize("value", [2, -1, True, "1", 1.0])
def test_overlap_key_refuses_bad_values(value):
    with pytest.raises(ConfigError, match=r"COMPUTE_OVERLAP must be 0 or 1"):
        VTAConfig.from_dict({**TINY.to_dict(), "COMPUTE_OVERLAP": value})
    with pytest.raises(ConfigError, match=r"COMPUTE_OVERLAP=.*must be 0"):
        TINY.replace(compute_overlap=value)


# -------------------------------------------------------------- program builder


class Program:
    """A raw stream with its uops, inp, wgt and acc data, run on a device of ``OV``'s
    shapes; every LOAD reads the one region of its memory type (row ``i`` of the region
    is ``dram_base`` ``i``)."""

    ROWS = {"inp": 64, "wgt": 16, "acc": OV.acc_depth}

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.inp = rng.integers(-8, 8, (self.ROWS["inp"], OV.batch * OV.block_in), np.int8)
        self.wgt = rng.integers(-8, 8, (self.ROWS["wgt"], OV.block_out * OV.block_in), np.int8)
        self.acc = rng.integers(-2000, 2000, (self.ROWS["acc"], LANES)).astype(np.int32)
        self.uops = []
        self.words = []
        self.stores = []        # (sram row, rows)

    def uop(self, dst, src=0, wgt=0):
        self.uops.append(ISA.encode_uop(dst, src, wgt))
        return len(self.uops) - 1

    def load(self, mt, sram, dram, n, **flags):
        self.words.append(("load", mt, sram, dram, n, flags))

    def gemm(self, u, loops, reset=False, n_uops=1, **flags):
        (eo, do, so, wo), (ei, di, si, wi) = loops
        self.words.append(ISA.encode(Opcode.GEMM, reset_reg=int(reset), uop_bgn=u,
                                     uop_end=u + n_uops, iter_out=eo, iter_in=ei,
                                     dst_factor_out=do, dst_factor_in=di,
                                     src_factor_out=so, src_factor_in=si,
                                     wgt_factor_out=wo, wgt_factor_in=wi, **flags))

    def alu(self, op, u, loops, imm=None, n_uops=1, **flags):
        (eo, do, so), (ei, di, si) = loops
        self.words.append(ISA.encode(Opcode.ALU, alu_opcode=int(op), use_imm=int(imm is not None),
                                     imm=imm or 0, uop_bgn=u, uop_end=u + n_uops,
                                     iter_out=eo, iter_in=ei, dst_factor_out=do,
                                     dst_factor_in=di, src_factor_out=so, src_factor_in=si,
                                     **flags))

    def store(self, sram, n, **flags):
        self.words.append(("store", sram, len(self.stores), n, flags))
        self.stores.append((sram, n))

    def finish(self, **flags):
        self.words.append(ISA.encode(Opcode.FINISH, **flags))

    def run(self, config, backend):
        """(out bytes of every STORE, stats, cycles, error triple or None)."""
        opts = {} if backend == "behavioral" else {"progress": False, "max_cycles": 2_000_000}
        with open_device(backend, config, **opts) as dev:
            regions = {}
            for name, arr in (("uop", np.array(self.uops, np.uint32)), ("inp", self.inp),
                              ("wgt", self.wgt), ("acc", self.acc)):
                regions[name] = dev.alloc(max(arr.nbytes, 64))
                dev.write(regions[name], arr.view(np.uint8).ravel())
            out_rows = sum(n for _, n in self.stores)
            out_bytes = OV.out_elem_bits // 8
            regions["out"] = dev.alloc(max(out_rows * out_bytes, 64))
            dev.write(regions["out"], np.zeros(out_rows * out_bytes, np.uint8))
            elem = {MemType.UOP: (4, "uop"), MemType.INP: (OV.inp_elem_bits // 8, "inp"),
                    MemType.WGT: (OV.wgt_elem_bits // 8, "wgt"),
                    MemType.ACC: (OV.acc_elem_bits // 8, "acc")}
            words = []
            offsets = np.cumsum([0] + [n for _, n in self.stores])
            for w in self.words:
                if isinstance(w, tuple) and w[0] == "load":
                    _, mt, sram, dram, n, flags = w
                    size, name = elem[mt]
                    words.append(ISA.encode(Opcode.LOAD, memory_type=mt, sram_base=sram,
                                            dram_base=regions[name] // size + dram, y_size=1,
                                            x_size=n, x_stride=n, **flags))
                elif isinstance(w, tuple):
                    _, sram, k, n, flags = w
                    words.append(ISA.encode(Opcode.STORE, memory_type=MemType.OUT,
                                            sram_base=sram,
                                            dram_base=regions["out"] // out_bytes + int(offsets[k]),
                                            y_size=1, x_size=n, x_stride=n, **flags))
                else:
                    words.append(w)
            addr = dev.alloc(16 * len(words))
            dev.write(addr, insns_to_bytes(words))
            try:
                result = dev.run(addr, len(words))
            except DeviceError as e:
                return None, None, None, (int(e.code), int(e.module), e.index)
            out = bytes(dev.read(regions["out"], out_rows * out_bytes))
            stats = {k: int(result.stats[k]) for k in ("gemm_counter", "alu_counter")
                     if k in (result.stats or {})}
            return out, stats, result.cycles, None


def check(prog, *, label=""):
    """The program on Verilator (``tiny+overlap``) equals the behavioral model; returns
    the RTL cycles."""
    want = prog.run(OV, "behavioral")
    got = prog.run(OV, "verilator")
    assert got[3] == want[3], (label, got[3], want[3])
    assert got[0] == want[0], label
    if want[1]:
        assert got[1] == want[1], label
    if want[3] is None:
        assert len(set(want[0])) > 4, "the stored rows should vary"
    return got[2]


def prologue(p):
    """LOAD UOP (every uop), all ACC rows, INP and WGT with a token for the first GEMM."""
    p.load(MemType.UOP, 0, 0, len(p.uops))
    p.load(MemType.ACC, 0, 0, OV.acc_depth)
    p.load(MemType.INP, 0, 0, 64)
    p.load(MemType.WGT, 0, 0, 16, push_next_dep=1)


def tile(p, base, rows, bias, *, push_store=True, pop_load=False, k=4, epilogue=True):
    """GEMM reset + accumulate of ``rows`` rows at ``base`` (k inp/wgt pairs each), then
    the epilogue: ADD bias row (tensor), SHR 3, MAX 0, MIN 127 (pushes to store)."""
    r = p.uop(base)
    g = p.uop(base, 0, 0)
    p.gemm(r, ((rows, 1, 0, 0), (1, 0, 0, 0)), reset=True, pop_prev_dep=int(pop_load))
    p.gemm(g, ((rows, 1, 1, 0), (k, 0, 1, 1)))
    if epilogue:
        epi(p, base, rows, bias, push_store=push_store)


def epi(p, base, rows, bias, *, push_store=True):
    a = p.uop(base, bias)
    e = p.uop(base)
    p.alu(AluOp.ADD, a, ((1, 0, 0), (rows, 1, 0)))
    p.alu(AluOp.SHR, e, ((1, 0, 0), (rows, 1, 0)), imm=3)
    p.alu(AluOp.MAX, e, ((1, 0, 0), (rows, 1, 0)), imm=0)
    p.alu(AluOp.MIN, e, ((1, 0, 0), (rows, 1, 0)), imm=127, push_next_dep=int(push_store))


def epilogue_program(tiles=4, rows=48):
    """Tiles alternating between the banks, each ALU epilogue beside the next GEMMs."""
    p, body = Program(1), Program(1)
    bases = [(t % 2) * HALF + (t // 2 % 2) * 64 for t in range(tiles)]
    for t, base in enumerate(bases):
        tile(body, base, rows, bias=(HALF - 8 if base < HALF else OV.acc_depth - 8) + t % 8,
             pop_load=t == 0)
    p.uops = body.uops
    prologue(p)
    p.words += body.words
    for t, base in enumerate(bases):
        p.store(base, rows, pop_prev_dep=1, push_prev_dep=int(t == tiles - 1))
    p.finish(pop_next_dep=1)
    return p


# ------------------------------------------------------------------------- tests


def test_epilogue_beside_next_tiles_gemms_equals_the_model(capsys):
    p = epilogue_program()
    cycles = check(p, label="epilogue")
    base = p.run(TINY, "verilator")
    assert base[0] == p.run(OV, "behavioral")[0]
    with capsys.disabled():
        print(f"\n  epilogue program: tiny {base[2]} cycles, tiny+overlap {cycles} cycles")


def _hazard_program(kind):
    p, q = Program(2), Program(2)
    if kind == "gemm_writes_alu_dst":
        # the lane's SHR over rows 0..47, then a GEMM accumulating into rows 10..19
        tile(q, 0, 48, HALF - 8, pop_load=True, epilogue=False)
        e = q.uop(0)
        q.alu(AluOp.SHR, e, ((1, 0, 0), (48, 1, 0)), imm=2)
        g = q.uop(10, 3, 1)
        q.gemm(g, ((10, 1, 1, 0), (1, 0, 0, 0)), push_next_dep=1)
        stores = [(0, 48)]
    elif kind == "gemm_writes_alu_src":
        # the lane's ADD of rows 200, 201 into rows 100..131, then a GEMM into rows 200, 201
        tile(q, 100, 32, 200, pop_load=True, epilogue=False)
        a = q.uop(100, 200)
        q.alu(AluOp.ADD, a, ((2, 16, 1), (16, 1, 0)))
        g = q.uop(200, 5, 2)
        q.gemm(g, ((2, 1, 1, 1), (1, 0, 0, 0)), push_next_dep=1)
        e = q.uop(100)
        q.alu(AluOp.MAX, e, ((1, 0, 0), (32, 1, 0)), imm=0, push_next_dep=1)
        stores = [(200, 2), (100, 32)]
    elif kind == "multi_uop_and_cross_bank_alus":
        tile(q, HALF - 16, 32, 8, pop_load=True, epilogue=False)
        two = q.uop(HALF - 16, 8)
        q.uop(HALF - 15, 9)
        q.alu(AluOp.ADD, two, ((16, 2, 0), (1, 0, 0)), n_uops=2)      # two micro-ops
        cross = q.uop(HALF - 16)
        q.alu(AluOp.SHR, cross, ((1, 0, 0), (32, 1, 0)), imm=1)        # rows in both banks
        g = q.uop(HALF + 2, 1, 3)
        q.gemm(g, ((4, 1, 1, 0), (1, 0, 0, 0)), push_next_dep=1)
        stores = [(HALF - 16, 32)]
    elif kind == "pushes_and_loads_beside_the_lane":
        # the lane runs tile 0's epilogue (bank 0, pushing to store) while: a LOAD ACC of
        # bank 1, tile 1's GEMMs (bank 1), one pushing to the load module, which loads
        # new inp rows that the next GEMM pops; then a LOAD ACC of bank 0 and tile 1's
        # epilogue
        tile(q, 0, 40, HALF - 8, pop_load=True)
        q.load(MemType.ACC, OV.acc_depth - 4, 16, 4)
        tile(q, HALF, 40, OV.acc_depth - 4, epilogue=False)
        g = q.uop(HALF, 7, 2)
        q.gemm(g, ((40, 1, 0, 0), (1, 0, 0, 0)), push_prev_dep=1)
        q.load(MemType.INP, 0, 32, 16, pop_next_dep=1, push_next_dep=1)
        g = q.uop(HALF, 0, 5)
        q.gemm(g, ((16, 1, 1, 0), (1, 0, 0, 0)), pop_prev_dep=1)
        q.load(MemType.ACC, HALF - 8, 40, 4)
        epi(q, HALF, 40, OV.acc_depth - 3)
        stores = [(0, 40), (HALF, 40)]
    elif kind == "load_acc_across_banks_beside_the_lane":
        # the lane runs the epilogue of rows HALF..HALF+95 (bank 1) while a LOAD ACC of
        # bank 0 reaches rows HALF..HALF+63 that it reads and writes: the LOAD waits for
        # the lane (beside it, its writes would race the lane's); a MIN then shows them
        tile(q, HALF, 96, OV.acc_depth - 8, pop_load=True, push_store=False)
        q.load(MemType.ACC, HALF - 2, 100, 66)
        e = q.uop(HALF)
        q.alu(AluOp.MIN, e, ((1, 0, 0), (96, 1, 0)), imm=127, push_next_dep=1)
        stores = [(HALF, 96)]
    else:
        raise AssertionError(kind)
    p.uops = q.uops
    prologue(p)
    p.words += q.words
    for i, (row, n) in enumerate(stores):
        p.store(row, n, pop_prev_dep=1, push_prev_dep=int(i == len(stores) - 1))
    p.finish(pop_next_dep=1)
    return p


@pytest.mark.parametrize("kind", ["gemm_writes_alu_dst", "gemm_writes_alu_src",
                                  "multi_uop_and_cross_bank_alus",
                                  "pushes_and_loads_beside_the_lane",
                                  "load_acc_across_banks_beside_the_lane"])
def test_hazards_equal_the_model(kind):
    check(_hazard_program(kind), label=kind)


def test_finish_right_behind_a_lane_instruction():
    p, q = Program(4), Program(4)
    tile(q, HALF + 32, 24, OV.acc_depth - 8, push_store=False, pop_load=True)
    p.uops = q.uops
    prologue(p)
    p.words += q.words
    p.finish()
    want, got = p.run(OV, "behavioral"), p.run(OV, "verilator")
    assert got[3] is None and want[3] is None
    assert got[1] == want[1] and got[1]["alu_counter"] == 4 * 24


def test_gemm_fault_beside_the_lane_reports_after_the_lane():
    """A GEMM micro-op out of range while the lane runs the older epilogue: the fault
    is the GEMM's, as on the model."""
    p = Program(3)
    q = Program(3)
    tile(q, 0, 48, HALF - 8, push_store=False, pop_load=True)
    bad = q.uop(OV.acc_depth - 2, 0, 0)
    q.gemm(bad, ((4, 1, 0, 0), (1, 0, 0, 0)))       # rows acc_depth-2 .. +1: out of range
    p.uops = q.uops
    prologue(p)
    p.words += q.words
    p.finish()
    want, got = p.run(OV, "behavioral"), p.run(OV, "verilator")
    assert want[3] is not None and got[3] == want[3]


#: Micro-ops at the edges of each SRAM range check of S1 (``tiny+overlap`` computes them as
#: the offset's high bits, the index's and the carry out of the low bits' sum): ``carry``
#: crosses the depth by the low bits' carry, ``high`` by an offset of the depth alone,
#: ``edge`` ends on the last row (no fault).
RANGE_EDGES = [(op, case) for op in ("dst", "inp", "wgt", "alu_src")
               for case in ("carry", "high", "edge")]


def _range_edge_program(op, case):
    p, q = Program(5), Program(5)
    tile(q, 0, 8, HALF - 8, pop_load=True, epilogue=False)
    depth = {"dst": OV.acc_depth, "inp": OV.inp_depth, "wgt": OV.wgt_depth,
             "alu_src": OV.acc_depth}[op]
    # (first index, factor, iterations): the last index is depth - 1 (edge), depth + 1
    # (carry: the low bits of index + offset carry out) or 3 + depth (high: an offset of
    # the depth, whose low bits are 0)
    first, factor, n = {"carry": (depth - 6, 1, 8), "high": (3, depth // 2, 3),
                        "edge": (depth - 8, 1, 8)}[case]
    if op == "dst":
        u = q.uop(first)
        q.gemm(u, ((n, factor, 0, 0), (1, 0, 0, 0)), reset=True)
    elif op in ("inp", "wgt"):
        u = q.uop(16, first if op == "inp" else 0, first if op == "wgt" else 0)
        q.gemm(u, ((n, 1, factor if op == "inp" else 0, factor if op == "wgt" else 0),
                   (1, 0, 0, 0)))
    else:   # a tensor ALU (src in the other bank: the GEMM lane runs it)
        u = q.uop(16, first)
        q.alu(AluOp.ADD, u, ((n, 1, factor), (1, 0, 0)))
    epi(q, 0, 24, HALF - 8)
    p.uops = q.uops
    # the last inp/wgt rows hold data too (an edge reads them; before the prologue's
    # token to the first GEMM)
    p.load(MemType.INP, OV.inp_depth - 8, 0, 8)
    p.load(MemType.WGT, OV.wgt_depth - 8, 0, 8)
    prologue(p)
    p.words += q.words
    p.store(0, 24, pop_prev_dep=1, push_prev_dep=1)
    p.finish(pop_next_dep=1)
    return p


@pytest.mark.parametrize("op,case", RANGE_EDGES)
def test_range_check_edges_equal_the_model(op, case):
    """S1's range checks at their edges (a fault, or none, at the same instruction as
    the model's): the carry out of the low bits and an offset beyond the depth alone
    fault, a last index of depth - 1 does not."""
    p = _range_edge_program(op, case)
    want = p.run(OV, "behavioral")
    assert (want[3] is None) == (case == "edge"), want[3]
    check(p, label=f"{op} {case}")


@pytest.mark.parametrize("count,seed", [
    (20, 3),
    pytest.param(300, 7, marks=pytest.mark.slow),
])
def test_fuzz_campaign_finds_no_difference(tmp_path, count, seed):
    """Random legal programs (sim/fuzz_gen) on ``tiny+overlap``: Verilator equals the model
    (DRAM, counters, faults); the slow campaign is the one the lane was checked with."""
    from vtakit.sim.fuzz import fuzz
    report = fuzz(OV, ["behavioral", "verilator"], count, seed, out_dir=tmp_path,
                  progress=False)
    assert report.programs == count and report.instructions > 10 * count
    assert not report.mismatches, report.mismatches[0].description


def _conv_on(config, backend, x, w, b):
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.runtime import Runtime
    opts = {} if backend == "behavioral" else {"progress": False}
    with open_device(backend, config, **opts) as dev:
        rt = Runtime(dev)
        plan = plan_conv2d(config, x.shape, w.shape, 1, 1, bias=True, shift=8, clip=(0, 127))
        bufs = {nm: rt.alloc(op.nbytes) for nm, op in plan.operands.items()}
        for nm, arr in plan.pack(x, w, b).items():
            rt.upload(bufs[nm], arr)
        plan.lower(rt, bufs)
        rt.finalize()
        insns = list(rt.instructions)
        cycles = rt.synchronize().cycles
        out = plan.operands["out"]
        y = plan.unpack(rt.download(bufs["out"], out.dtype, out.shape))
    return y, cycles, insns, plan.tiling


def test_compiled_conv2d_on_the_lane_equals_numpy(capsys):
    """A 3x3 convolution compiled for ``tiny+overlap`` (the next tile's start before each
    epilogue): the Verilator result equals numpy's and the model's, and it holds the same
    instructions as the ``tiny`` build, reordered."""
    from vtakit.compiler.ops import reference as R
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (1, 16, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    b = rng.integers(-16384, 16384, 32).astype(np.int32)
    want = R.epilogue_ref(R.conv2d_ref(x, w, 1, 1), bias=b, shift=8, clip=(0, 127))
    got, cycles, insns, tiling = _conv_on(OV, "verilator", x, w, b)
    model, _, _, _ = _conv_on(OV, "behavioral", x, w, b)
    base, base_cycles, base_insns, _ = _conv_on(TINY, "verilator", x, w, b)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(model, want)
    np.testing.assert_array_equal(base, want)
    # the same instructions, reordered (micro-op addresses may differ: the uop cache
    # places kernels in the order they are first used)
    kinds = [sorted(str(i).split(" uop_bgn")[0] for i in s) for s in (insns, base_insns)]
    assert kinds[0] == kinds[1]
    with capsys.disabled():
        print(f"\n  conv2d 14x14 16->32 3x3 ({tiling}): tiny {base_cycles} cycles, "
              f"tiny+overlap {cycles} cycles")


def _add_conv_on(config, backend, order, x, w, b, r, add, tiling, beside=False,
                 in_slots=None, out_slots=None):
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.runtime import Runtime
    opts = {} if backend == "behavioral" else {"progress": False}
    with open_device(backend, config, **opts) as dev:
        rt = Runtime(dev)
        plan = plan_conv2d(config, x.shape, w.shape, bias=True, shift=7, clip=(-128, 127),
                           residual="int8", add=add, min_init=(b, w), tiling=tiling)
        if order is not None:
            plan.add_order, plan.post_beside, plan.in_slots = order, beside, in_slots
            plan.out_slots = out_slots
            plan._set_tiling(tiling, None, plan.estimate)
        y, run = plan.run(rt, plan.pack(x, w, b, r))
        y, cycles = plan.unpack(y), run.cycles
    return y, cycles, plan


@pytest.mark.parametrize("order, beside, slots, acc", [
    ("pre", False, None, None), ("split", False, None, None), ("pre", True, 3, None),
    ("split", False, 3, None), ("split", True, 3, None), ("split", False, 3, 4),
    ("pre", True, 3, 4)])
@pytest.mark.parametrize("ea, offset", [(1, -128), (2, -127)])
def test_compiled_fused_add_on_the_lane_equals_numpy(order, beside, slots, acc, ea, offset,
                                                     capsys):
    """A 1x1 convolution with a fused residual add (ResNet's) compiled for
    ``tiny+overlap`` in both orders of the add's tiles (:meth:`run_add`), its passes
    after the residual GEMM between the next tile's groups or not (``post_beside``),
    with two or three inp/wgt slots (``in_slots``), two or four acc slots
    (``out_slots``), its offset folded into the init
    (``ea=1``) or kept: Verilator equals the model and numpy (Epilogue.reference)."""
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.epilogue import ResidualAdd
    from vtakit.compiler.ops.tiling import ConvTiling
    rng = np.random.default_rng(7 + ea)
    x = rng.integers(-128, 128, (1, 64, 8, 8), dtype=np.int8)
    w = rng.integers(-4, 5, (64, 64, 1, 1), dtype=np.int8)
    b = rng.integers(-3000, 3000, 64).astype(np.int32)
    r = rng.integers(-128, 128, (1, 64, 8, 8), dtype=np.int8)
    add = ResidualAdd(ea, 0, offset, 2 - ea, -128, 127)
    tiling = ConvTiling(tn=1, tco=2, th=2, tw=8, tci=2, order="sp_outer", nthreads=2)
    got, cycles, plan = _add_conv_on(OV, "verilator", order, x, w, b, r, add, tiling,
                                     beside, slots, acc)
    model, _, _ = _add_conv_on(OV, "behavioral", order, x, w, b, r, add, tiling, beside,
                               slots, acc)
    assert (plan.add_order, plan.post_beside, plan.in_slots, plan.out_slots) == (
        order, beside, slots, acc)
    base, base_cycles, _ = _add_conv_on(TINY, "behavioral", None, x, w, b, r, add, tiling)
    assert plan.epilogue.fold == (ea == 1)
    want = plan.epilogue.reference(R.conv2d_ref(x, w, 1, 0), bias=b, residual=r)
    np.testing.assert_array_equal(model, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(base, want)
    with capsys.disabled():
        print(f"\n  conv2d + add 8x8 64->64 1x1 ({order}, beside {beside}, slots {slots}, "
              f"acc slots {acc}, "
              f"fold {plan.epilogue.fold}): tiny+overlap {cycles} cycles")


def test_compiled_conv2d_passes_beside_the_next_groups_equal_numpy(capsys):
    """A 1x1 convolution (MIN init, two input chunks) compiled for ``tiny+overlap`` with
    its epilogue's passes between the next tile's groups (``post_beside``) and without,
    and with four acc slots (``out_slots``): Verilator equals numpy for each, and the
    streams with and without ``post_beside`` differ in order only."""
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.tiling import ConvTiling
    from vtakit.runtime import Runtime
    rng = np.random.default_rng(11)
    x = rng.integers(-128, 128, (1, 64, 8, 8), dtype=np.int8)
    w = rng.integers(-4, 5, (32, 64, 1, 1), dtype=np.int8)
    b = rng.integers(-3000, 3000, 32).astype(np.int32)
    tiling = ConvTiling(tn=1, tco=2, th=2, tw=8, tci=2, order="sp_outer", nthreads=2)
    want = R.epilogue_ref(R.conv2d_ref(x, w, 1, 0), bias=b, shift=7, clip=(-128, 127))
    streams = {}
    for beside, acc in ((False, None), (True, None), (True, 4)):
        with open_device("verilator", OV, progress=False) as dev:
            rt = Runtime(dev)
            plan = plan_conv2d(OV, x.shape, w.shape, bias=True, shift=7, clip=(-128, 127),
                               min_init=(b, w), tiling=tiling)
            assert plan.epilogue.init
            plan.post_beside, plan.out_slots, plan._program = beside, acc, None
            bufs = {nm: rt.alloc(op.nbytes) for nm, op in plan.operands.items()}
            for nm, arr in plan.pack(x, w, b).items():
                rt.upload(bufs[nm], arr)
            plan.lower(rt, bufs)
            rt.finalize()
            # (micro-op addresses may differ: the uop cache places kernels in the
            # order they are first used)
            streams[beside, acc] = [str(i).split(" uop_bgn")[0] for i in rt.instructions]
            cycles = rt.synchronize().cycles
            out = plan.operands["out"]
            got = plan.unpack(rt.download(bufs["out"], out.dtype, out.shape))
        np.testing.assert_array_equal(got, want)
        with capsys.disabled():
            print(f"\n  conv2d 8x8 64->32 1x1 (beside {beside}, acc slots {acc}): "
                  f"tiny+overlap {cycles} cycles")
    assert streams[True, None] != streams[False, None]
    assert sorted(streams[True, None]) == sorted(streams[False, None])


def _lane_writes(enq_cycles):
    """The lane alone (Amaranth simulator), micro-op ``k`` with dst ``10 k``:
    ALU instructions ``i`` (uop ``2 i + 1``, two iterations, bank 0) enqueued at the
    given cycles; the acc rows it writes, in order."""
    from amaranth.hdl import Module
    from amaranth.sim import Simulator

    from vtakit.hw.compute_lane import AluLane

    m = Module()
    m.submodules.lane = lane = AluLane(OV)
    m.d.comb += [lane.push_prev_ready.eq(1), lane.push_next_ready.eq(1)]
    insns = [ISA.encode(Opcode.ALU, alu_opcode=int(AluOp.ADD), use_imm=1, imm=1,
                        uop_bgn=2 * i + 1, uop_end=2 * i + 2, iter_out=1, iter_in=2,
                        dst_factor_out=0, dst_factor_in=1, src_factor_out=0, src_factor_in=0)
             for i in range(len(enq_cycles))]
    writes = []

    async def bench(ctx):
        for cycle in range(len(insns) * 4 + 20):
            i = enq_cycles.index(cycle) if cycle in enq_cycles else None
            ctx.set(lane.enq, i is not None)
            if i is not None:
                assert not ctx.get(lane.full)
                ctx.set(lane.enq_insn, insns[i])
                ctx.set(lane.enq_uop, ISA.encode_uop(10 * (2 * i + 1)))
            if ctx.get(lane.wr_en):
                writes.append(ctx.get(lane.wr_addr))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return writes


@pytest.mark.parametrize("enq_cycles", [[0, 1, 2, 3], [0, 5, 6, 20], [2, 3, 4, 5, 6, 7]])
def test_lane_runs_back_to_back_enqueues_in_order(enq_cycles):
    """Enqueues on consecutive cycles (one fills the slot after the head in the cycle the
    head starts, which the compute module does not do today): each instruction runs its
    own micro-op, in order."""
    want = [a for i in range(len(enq_cycles)) for a in (10 * (2 * i + 1), 10 * (2 * i + 1) + 1)]
    assert _lane_writes(enq_cycles) == want


def test_compiled_int32_plane_slots_by_bank_equal_numpy(capsys):
    """A 3x3 convolution with an int32 result (three byte planes, the plane shifts
    skewed behind the GEMMs) compiled for ``tiny+overlap`` with its acc slots placed by
    bank (``Conv2dPlan.plane_banks``, the planner's choice), one after another, and
    alternating banks with the shifts two tiles apart (``plane_skew`` 2): Verilator
    equals the model and numpy for each."""
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.compiler.ops import reference as R
    from vtakit.runtime import Runtime
    rng = np.random.default_rng(13)
    x = rng.integers(-128, 128, (1, 16, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    b = rng.integers(-2 ** 20, 2 ** 20, 32).astype(np.int32)
    want = R.conv2d_ref(x, w, 1, 1) + b[None, :, None, None]
    chosen = None
    for pick in ("planner", None, "skew"):
        for backend in ("verilator", "behavioral"):
            opts = {} if backend == "behavioral" else {"progress": False}
            with open_device(backend, OV, **opts) as dev:
                rt = Runtime(dev)
                plan = plan_conv2d(OV, x.shape, w.shape, 1, 1, bias=True, out_dtype="int32",
                                   result_bytes=3)
                if pick is None:
                    plan.plane_banks, plan.plane_skew, plan._program = None, 1, None
                elif pick == "skew":
                    plan.plane_banks, plan.plane_skew = plan.SKEWED_BANKS[3], 2
                    plan._program = None
                else:
                    chosen = plan.plane_banks
                got, run = plan.run(rt, plan.pack(x, w, b))
                got, cycles = plan.unpack(got), run.cycles
            np.testing.assert_array_equal(got, want, err_msg=f"{backend} {pick}")
            if backend == "verilator":
                with capsys.disabled():
                    print(f"\n  conv2d int32 14x14 16->32 3x3 (plane_banks "
                          f"{plan.plane_banks}, skew {plan.plane_skew}): tiny+overlap "
                          f"{cycles} cycles")
    assert chosen is not None


@pytest.mark.parametrize("seed", [1, 2])
def test_lane_busy_bank_follows_its_instructions_cycle_by_cycle(seed):
    """``busy_bank`` (a register since the lane's timing work) against a reference built
    from the lane's ports: an instruction of bank ``b`` counts from the cycle after its
    enqueue to the cycle of its last write (no push flag) or of its last push handshake,
    inclusive; random enqueues of both banks, push flags and stalled token queues. A bank
    bit a cycle late or early (the enqueue or the retire missing from the register's next
    value) fails it; ``busy`` is the OR of the two bits. ``full`` (a register too, since
    the second timing stop) is high exactly when the lane holds :data:`LANE_DEPTH`
    instructions (a burst of enqueues fills it)."""
    from amaranth.hdl import Module
    from amaranth.sim import Simulator

    from vtakit.hw.compute_lane import LANE_DEPTH, AluLane

    rng = np.random.default_rng(seed)
    m = Module()
    m.submodules.lane = lane = AluLane(OV)
    seen = {"retired": 0, "held": 0, "full": 0}

    async def bench(ctx):
        inside = []     # [bank, writes left, push_prev pending, push_next pending]
        for cycle in range(400):
            want = [any(e[0] == b for e in inside) for b in range(2)]
            got = ctx.get(lane.busy_bank)
            assert [bool(got >> b & 1) for b in range(2)] == want, cycle
            assert ctx.get(lane.busy) == any(want), cycle
            assert ctx.get(lane.full) == (len(inside) == LANE_DEPTH), cycle
            seen["full"] += len(inside) == LANE_DEPTH
            seen["held"] += all(want)
            rate = 0.9 if 100 <= cycle < 160 else 0.3     # a burst fills the lane
            enq = cycle < 320 and not ctx.get(lane.full) and rng.random() < rate
            ready = [bool(rng.random() < 0.6) for _ in range(2)]
            ctx.set(lane.push_prev_ready, ready[0])
            ctx.set(lane.push_next_ready, ready[1])
            ctx.set(lane.enq, enq)
            if enq:
                k, it_out, it_in = int(rng.integers(20)), int(rng.integers(1, 3)), int(rng.integers(1, 4))
                bank = int(rng.integers(2))
                pp, pn = (bool(rng.random() < 0.2) for _ in range(2))
                ctx.set(lane.enq_insn, ISA.encode(
                    Opcode.ALU, alu_opcode=int(AluOp.ADD), use_imm=1, imm=1, uop_bgn=k,
                    uop_end=k + 1, iter_out=it_out, iter_in=it_in, dst_factor_out=1,
                    dst_factor_in=2, src_factor_out=0, src_factor_in=0))
                ctx.set(lane.enq_uop, ISA.encode_uop(10 * k))
                ctx.set(lane.enq_bank, bank)
                ctx.set(lane.enq_push_prev, pp)
                ctx.set(lane.enq_push_next, pn)
            # what leaves at this edge (the lane's tokens go out in program order: only
            # the oldest instruction writes its last row or pushes)
            if ctx.get(lane.wr_en):
                first = next(e for e in inside if e[1])
                first[1] -= 1
            for j, port in ((2, lane.push_prev), (3, lane.push_next)):
                if ctx.get(port):
                    assert inside[0][j] and not inside[0][1], cycle
                    if ready[j - 2]:
                        inside[0][j] = False
            if inside and not any(inside[0][1:]):
                inside.pop(0)
                seen["retired"] += 1
            if enq:
                inside.append([bank, it_out * it_in, pp, pn])
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen["retired"] > 40 and seen["held"] > 20 and seen["full"] > 5, seen


def test_compiled_int32_alu_reset_equals_numpy(capsys):
    """A 3x3 convolution with an int32 result and no bias tile whose accumulators start
    from two ALU passes a step ahead (``Conv2dPlan.alu_reset``: SHR 31 then MAX 0 in the
    ALU lane instead of a GEMM reset), slots alternating banks, plane shifts skewed:
    Verilator equals the model and numpy on ``tiny+overlap``."""
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.compiler.ops import reference as R
    from vtakit.runtime import Runtime
    rng = np.random.default_rng(14)
    x = rng.integers(-128, 128, (1, 16, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    want = R.conv2d_ref(x, w, 1, 1)
    for backend in ("verilator", "behavioral"):
        opts = {} if backend == "behavioral" else {"progress": False}
        with open_device(backend, OV, **opts) as dev:
            plan = plan_conv2d(OV, x.shape, w.shape, 1, 1, out_dtype="int32", result_bytes=3)
            plan.plane_banks, plan.plane_skew, plan.alu_reset = (0, 1) * 4, 2, True
            plan._program = None
            assert len(list(plan.tiles())) > 8
            got, run = plan.run(Runtime(dev), plan.pack(x, w))
            got = plan.unpack(got)
        np.testing.assert_array_equal(got, want, err_msg=backend)
        if backend == "verilator":
            with capsys.disabled():
                print(f"\n  conv2d int32 14x14 16->32 3x3, alu_reset: tiny+overlap "
                      f"{run.cycles} cycles")


def _plans_equal_on_verilator_and_model(cases, x, capsys):
    """Each ``(name, make)`` of ``cases`` (``make() -> (plan, weight, numpy result)``) run
    on Verilator (``tiny+overlap``) and on the behavioral model: both equal numpy."""
    from vtakit.runtime import Runtime
    for name, make in cases:
        for backend in ("verilator", "behavioral"):
            opts = {} if backend == "behavioral" else {"progress": False}
            with open_device(backend, OV, **opts) as dev:
                plan, w, want = make()
                got, run = plan.run(Runtime(dev), plan.pack(x, w))
                got = plan.unpack(got)
            np.testing.assert_array_equal(got, want, err_msg=f"{backend} {name}")
            if backend == "verilator":
                with capsys.disabled():
                    print(f"\n  {name}: tiny+overlap {run.cycles} cycles")


def test_compiled_int32_mid_shifts_split_first_row_loads_equal_numpy(capsys):
    """Keyword spotting's depthwise layer with the plane shifts amid the next tile's GEMMs
    (``plane_skew`` ``MID``, the longest run of rows in two kernels, with and without
    ``alu_reset``; with it ``weights_ahead``) and its 1x1 layer with ``split_first`` and ``row_loads``, compiled
    for ``tiny+overlap``: Verilator equals the model and numpy."""
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.cost.geometry import ConvTiling
    from vtakit.compiler.ops.tokens import MID
    rng = np.random.default_rng(15)
    x = rng.integers(-128, 128, (1, 64, 25, 5), dtype=np.int8)
    wd = rng.integers(-128, 128, (64, 1, 3, 3), dtype=np.int8)
    wp = rng.integers(-128, 128, (64, 64, 1, 1), dtype=np.int8)

    def depthwise(zero):
        p = plan_conv2d(OV, x.shape, wd.shape, 1, 1, groups=64, out_dtype="int32",
                        result_bytes=3, tiling=ConvTiling(1, 1, 13, 5, 1, "co_outer", 2,
                                                          resident=True))
        p.plane_banks, p.plane_skew, p.alu_reset, p._program = (0, 1) * 3, MID, zero, None
        p.weights_ahead = zero
        return p, wd, R.group_conv2d_ref(x, wd, 1, 1, 64)

    def pointwise():
        p = plan_conv2d(OV, x.shape, wp.shape, 1, 0, out_dtype="int32", result_bytes=3,
                        tiling=ConvTiling(1, 2, 5, 5, 64 // OV.block, "sp_outer", 2,
                                          resident=True))
        p.split_first, p.row_loads, p._program = True, True, None
        return p, wp, R.conv2d_ref(x, wp, 1, 0)

    _plans_equal_on_verilator_and_model((("depthwise MID", lambda: depthwise(False)),
                                         ("depthwise MID alu_reset", lambda: depthwise(True)),
                                         ("1x1 split_first row_loads", pointwise)), x, capsys)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_main_idle_register_equals_its_definition_cycle_by_cycle(seed):
    """``main_idle`` (a register since the lane's second timing stop: the dispatch of a
    lane instruction reads it) against its definition, every cycle (the Amaranth
    simulator): no micro-op in flight in S1..S{W-1} and no token travelling. Random
    GEMM/ALU streams with push flags (one-micro-op ALUs of one bank go to the lane, the
    others and GEMMs beside it are held), whose results equal the model's. A term of the
    next value missing (a stage, the issue, a travelling token) makes the register a cycle
    early or late and fails it."""
    from test_rtl_compute import ComputeBench, check_against_model

    rng = np.random.default_rng(seed)
    uops = [ISA.encode_uop(int(rng.integers(0, 2)) * HALF + int(rng.integers(0, 24)),
                           int(rng.integers(0, 16)), int(rng.integers(0, 16)))
            for _ in range(16)]
    insns = []
    for _ in range(40):
        bgn = int(rng.integers(0, 16))
        one = rng.random() < 0.5            # one micro-op: the lane takes it (an ALU)
        loop = dict(uop_bgn=bgn, uop_end=bgn + 1 if one else int(rng.integers(bgn, 17)),
                    iter_out=int(rng.integers(1, 4)), iter_in=int(rng.integers(1, 4)),
                    dst_factor_out=int(rng.integers(0, 9)), dst_factor_in=int(rng.integers(0, 4)),
                    src_factor_out=int(rng.integers(0, 9)), src_factor_in=int(rng.integers(0, 4)),
                    push_prev_dep=int(rng.random() < 0.2), push_next_dep=int(rng.random() < 0.2))
        if rng.random() < 0.4:
            insns.append(ISA.encode(Opcode.GEMM, reset_reg=int(rng.random() < 0.15),
                                    wgt_factor_out=int(rng.integers(0, 9)),
                                    wgt_factor_in=int(rng.integers(0, 4)), **loop))
        else:
            op = AluOp(int(rng.integers(0, 4)))
            imm = int(rng.integers(-8, 9)) if op == AluOp.SHR else int(rng.integers(-999, 999))
            insns.append(ISA.encode(Opcode.ALU, alu_opcode=op, use_imm=int(
                op == AluOp.SHR or rng.random() < 0.5), imm=imm, **loop))
    insns.append(ISA.encode(Opcode.FINISH))
    acc = rng.integers(-2**20, 2**20, (OV.acc_depth, LANES))
    bench = ComputeBench(OV)
    dut = bench.dut
    dut.probe_main_idle = True
    seen = {"idle": 0, "busy": 0, "cycles": 0}

    async def watch(ctx):
        async for _, _, reg, now, err in ctx.tick().sample(
                dut.main_idle_reg, dut.main_idle_now, dut.error.valid):
            assert err or reg == now, seen
            seen["idle" if now else "busy"] += 1
            seen["cycles"] += 1

    r = bench.run(insns, uop=uops, acc=acc, max_cycles=20_000, watch=[watch])
    assert check_against_model(OV, bench, r, insns, uops, acc) is None
    assert seen["idle"] > 20 and seen["busy"] > 200 and r.alu_count > 100, (seen, r.alu_count)


@pytest.mark.parametrize("seed", [1, 2])
def test_lane_takes_exactly_the_alus_whose_rows_stay_in_one_bank(seed):
    """The footprint check (carry-outs after the uop SRAM since the lane's second timing
    stop) against a reference written from the rule: a one-micro-op base ALU goes to the
    ALU lane exactly when its dst rows ``dst .. dst + span`` and, for a tensor operand,
    its src rows all lie in the bank of ``dst``. Random instructions around the banks'
    edges (spans that end on the last row of a bank, cross it by one, or start in the
    other bank), each identified by its micro-op, watched at the lane's enqueue (the
    Amaranth simulator); the results equal the model's. A check that ignored the carry
    out of the low bits or the src's bank takes the wrong instructions."""

    rng = np.random.default_rng(seed)
    uops, insns, want = [], [], set()
    while len(insns) < 28:
        io, ii = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        fo, fi = int(rng.integers(0, 5)), int(rng.integers(0, 3))
        so, si = int(rng.integers(0, 5)), int(rng.integers(0, 3))
        dspan, sspan = (io - 1) * fo + (ii - 1) * fi, (io - 1) * so + (ii - 1) * si
        bank = int(rng.integers(2))
        # the last row on a bank's edge, one past it, or anywhere in the bank
        end = bank * HALF + HALF - 1 + int(rng.choice([0, 1, -1, -int(rng.integers(2, 40))]))
        dst, src = end - dspan, int(rng.integers(0, OV.acc_depth))
        if rng.random() < 0.5:
            src = dst + int(rng.integers(-4, 5))
        imm = rng.random() < 0.4
        if min(dst, src) < 0 or max(dst + dspan, src + sspan) >= OV.acc_depth:
            continue                       # a fault stops the program: not this test
        k = len(uops)
        uops.append(ISA.encode_uop(dst, src, 0))
        op = AluOp(int(rng.integers(0, 4)))
        insns.append(ISA.encode(
            Opcode.ALU, alu_opcode=op, use_imm=int(imm or op == AluOp.SHR),
            imm=int(rng.integers(-4, 5)) if op == AluOp.SHR else int(rng.integers(-99, 99)),
            uop_bgn=k, uop_end=k + 1, iter_out=io, iter_in=ii, dst_factor_out=fo,
            dst_factor_in=fi, src_factor_out=so, src_factor_in=si))
        stays = (dst + dspan) // HALF == dst // HALF
        if imm or op == AluOp.SHR:
            src_ok = True
        else:
            src_ok = src // HALF == dst // HALF and (src + sspan) // HALF == dst // HALF
        if stays and src_ok:
            want.add(k)
    insns.append(ISA.encode(Opcode.FINISH))
    assert 6 <= len(want) <= len(insns) - 7, want
    acc = rng.integers(-2**20, 2**20, (OV.acc_depth, LANES))
    _, taken = run_watching_lane(OV, insns, uops, acc, max_cycles=20_000)
    assert [ISA.decode(w).fields["uop_bgn"] for w in taken] == sorted(want)


def run_watching_lane(config, insns, uops, acc, *, max_cycles):
    """``insns`` on the compute module of ``config`` (``COMPUTE_OVERLAP``), checked against
    the behavioral model's datapath; returns (the run, the instruction words the ALU lane
    took, in the order it took them: ``Compute.probe_lane``)."""
    from test_rtl_compute import ComputeBench, check_against_model
    bench = ComputeBench(config)
    bench.dut.probe_lane = True
    taken = []

    async def watch(ctx):
        dut = bench.dut
        async for _, _, enq, insn in ctx.tick().sample(dut.lane_enq, dut.lane_enq_insn):
            if enq:
                taken.append(int(insn))

    r = bench.run(insns, uop=uops, acc=acc, max_cycles=max_cycles, watch=[watch])
    assert check_against_model(config, bench, r, insns, uops, acc) is None
    return r, taken


def test_compiled_int32_depthwise_runner_up_equals_numpy(capsys):
    """A plan that became another tiling's plan (``Conv2dPlan._adopt``, what
    ``RUNNERS_UP`` does: keyword spotting's depthwise layer re-ranked, then th 9 with its
    own flags and plane slots), compiled for ``tiny+overlap``: Verilator equals the model
    and numpy."""
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.cost.geometry import ConvTiling
    from vtakit.runtime import Runtime
    rng = np.random.default_rng(18)
    x = rng.integers(-128, 128, (1, 64, 25, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (64, 1, 3, 3), dtype=np.int8)
    want = R.group_conv2d_ref(x, w, 1, 1, 64)
    tiling = ConvTiling(1, 1, 9, 5, 1, "co_outer", 2, resident=True)
    for backend in ("verilator", "behavioral"):
        opts = {} if backend == "behavioral" else {"progress": False}
        with open_device(backend, OV, **opts) as dev:
            plan = plan_conv2d(OV, x.shape, w.shape, 1, 1, groups=64, out_dtype="int32",
                               result_bytes=3)
            other = plan_conv2d(OV, x.shape, w.shape, 1, 1, groups=64, out_dtype="int32",
                                result_bytes=3, tiling=tiling)
            plan._adopt(other)
            assert plan.tiling == tiling and plan.plane_banks == other.plane_banks
            got, run = plan.run(Runtime(dev), plan.pack(x, w))
            got = plan.unpack(got)
        np.testing.assert_array_equal(got, want, err_msg=backend)
        if backend == "verilator":
            with capsys.disabled():
                print(f"\n  depthwise th 9 (adopted, plane_banks {plan.plane_banks}, skew "
                      f"{plan.plane_skew}): tiny+overlap {run.cycles} cycles")


def test_compiled_int32_spread_shifts_and_head_rows_equal_numpy(capsys):
    """Every plane of tile t - 1 shifted amid tile t's GEMMs, spread over them
    (``plane_skew`` ``SPREAD``, the longest run of rows in three kernels; with and
    without ``alu_reset``), and a 1x1 layer whose first output position's tiles are split
    by rows (``head_rows``), compiled for ``tiny+overlap``: Verilator equals the model
    and numpy."""
    from vtakit.compiler.ops import plan_conv2d
    from vtakit.compiler.ops import reference as R
    from vtakit.compiler.ops.tokens import SPREAD
    rng = np.random.default_rng(18)
    x = rng.integers(-128, 128, (1, 16, 12, 6), dtype=np.int8)
    w3 = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    w1 = rng.integers(-128, 128, (32, 16, 1, 1), dtype=np.int8)

    def spread(zero):
        p = plan_conv2d(OV, x.shape, w3.shape, 1, 1, out_dtype="int32", result_bytes=3)
        p.plane_banks, p.plane_skew, p.alu_reset, p._program = (0, 1) * 2, SPREAD, zero, None
        assert len(list(p.tiles())) > 2
        return p, w3, R.conv2d_ref(x, w3, 1, 1)

    def head():
        p = plan_conv2d(OV, x.shape, w1.shape, 1, 0, out_dtype="int32", result_bytes=3)
        p.head_rows, p._program = 1, None
        assert list(p.tiles())[0][5] == 1
        return p, w1, R.conv2d_ref(x, w1, 1, 0)

    _plans_equal_on_verilator_and_model((("SPREAD", lambda: spread(False)),
                                         ("SPREAD alu_reset", lambda: spread(True)),
                                         ("head_rows", head)), x, capsys)
