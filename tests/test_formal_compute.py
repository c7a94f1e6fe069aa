"""Formal check of the compute module (hw/compute.py) against the sequential spec.

The design under test is the real :class:`~vtakit.hw.compute.Compute` on a small config
(:data:`CONFIG`: BATCH 4 x BLOCK 2, so 8 int32 lanes; 4 micro-ops, 2 input rows, 2
weight rows, 4 accumulator rows). Its micro-op SRAM (the program's uops) and its
accumulator SRAM start with **any** contents (``free_memories``), the input SRAM holds
any constant rows, the weight SRAM two permutation tiles (:func:`weight_tiles`), and it
is fed a program of 1..n GEMM or ALU instructions (a :class:`Run`: its kind, n, and at
most so many uops an instruction) with any fields the decoder accepts (dependency flags
off, loops of at most 2 x 2 iterations, any legal operand), back to back.

Next to it, :class:`Sequential` is the spec: a register array of the accumulator rows
that applies each micro-op of the same program at once, in the p > q > k loop order,
with no pipeline (the GEMM and ALU lane arithmetic written out here, independently of
hw/gemm.py and hw/alu.py). It reads the program through a combinational port of the uop
SRAM and copies the accumulator rows the run starts from in the first cycle. It steps
in lockstep with the module's retirements (the cycle after ``uop_count`` moves, a
documented output), which keeps each BMC step a local check. A micro-op with an
out-of-range index stops it (the spec of a fault: the state of sequential execution up
to that micro-op).

Properties (BMC, :attr:`Run.depth` cycles, which every program of the run fits in):

* every cycle, each accumulator row of the module (a cycle ago) equals the spec's, on
  lane :data:`LANE` (every lane takes the same path through the pipeline; one lane keeps
  the solver's miter small), and a micro-op retires only when the spec has one to apply;
* when both are done (the module accepted every instruction and is ready again, or
  reported a fault, two cycles ago; the spec applied everything or stopped), the module
  reports a fault exactly when the spec stopped (code SRAM_OUT_OF_RANGE, the
  instruction's index);
* bounded liveness (no stall, the hazard logic never waits): an instruction of N uops
  holds ``cmd.ready`` low at most N + W cycles after it is accepted (W: the write stage), and every program
  is done within the depth.

Covers: a read-after-write at pipeline distance 1 and at distance 2 (a uop reading the
row one of the two uops before it wrote: the forwarded hazards), for GEMM accumulate and
for an ALU tensor operand, each reaching the end of the run without a fault.

Mutation: the forwarding of the two writes an acc read misses removed fails the
equality with a counterexample.
"""

import dataclasses
import re
from pathlib import Path

import pytest
from amaranth.asserts import AnyConst
from amaranth.hdl import Array, Assert, Assume, Const, Cover, Mux, Signal, signed
from amaranth.lib import data

from vtakit.hw.alu import alu_illegal
from vtakit.hw.compute import Compute, write_stage
from vtakit.hw.config import VTAConfig
from vtakit.hw.formal import Spec
from vtakit.hw.interfaces import ErrorCode
from vtakit.hw.isa import AluOp, Opcode, isa_for

from formal_util import prove, refute

pytestmark = pytest.mark.formal

#: The smallest config with 8 lanes (an input element must fill the 64-bit bus).
CONFIG = VTAConfig(log_batch=2, log_block=1, log_uop_buff_size=4, log_inp_buff_size=4,
                   log_wgt_buff_size=3, log_acc_buff_size=7)
#: The compute pipeline's write stage on CONFIG (S0 issues).
WRITE_STAGE = write_stage(CONFIG)
#: Loop iteration counts are at most this (:func:`uop_count` relies on it being 2).
MAX_ITER = 2
#: The accumulator lane the equality is checked on (the pipeline moves whole rows, every
#: lane through the same path; checking one keeps the solver's miter small).
LANE = 0
#: Instruction kinds a run draws from (GEMM reset/accumulate; ALU by opcode).
KINDS = {"gemm": (), "add": (AluOp.ADD,), "min": (AluOp.MIN,), "max": (AluOp.MAX,),
         "shr": (AluOp.SHR,), "mixed": (AluOp.MIN, AluOp.MAX, AluOp.ADD),
         "lane": (AluOp.MIN, AluOp.MAX, AluOp.ADD), "lane_add": (AluOp.ADD,)}
#: Kinds whose instructions are each a GEMM or an ALU (any order); the others are all ALUs
#: (all GEMMs for "gemm").
BOTH = ("lane", "lane_add")


@dataclasses.dataclass(frozen=True)
class Run:
    """One proof: programs of 1..``n_insn`` instructions of ``kind``, each of at most
    ``max_uops`` micro-ops; with ``deps``, any dependency flags (pops and pushes)."""

    kind: str
    n_insn: int
    max_uops: int
    deps: bool = False

    @property
    def depth(self):
        """Cycles for every such program (N + 1 + the write stage cycles an
        instruction), the two cycles until the last write is visible, and one to
        compare."""
        return self.n_insn * (self.max_uops + 1 + WRITE_STAGE) + 3

    def __str__(self):
        return f"{self.kind}-{self.n_insn}x{self.max_uops}" + ("-deps" if self.deps else "")


#: The SRAMs whose contents are free at the start (the program, the accumulators).
FREE = ("uop_mem", "acc_mem")


def uop_count(loop):
    """Micro-ops of a loop instruction whose iteration counts are at most 2 (no multiplier:
    a multiplier of free values costs the solver far more than the design)."""
    length = (loop.uop_end - loop.uop_bgn).as_unsigned()[:len(loop.uop_end)]
    doublings = (loop.iter_out == 2) + (loop.iter_in == 2)
    return Mux((loop.iter_out == 0) | (loop.iter_in == 0), 0, length << doublings)


def weight_tiles(c=CONFIG):
    """The weight SRAM's rows: permutation tiles (row s: ``W[o][i] = 1`` where
    ``i = (o + s) mod BLOCK``), so every product selects an input lane and the proof is
    about which data go where, not about multipliers (which the RTL differential tests
    check against the behavioral model)."""
    rows = []
    for s in range(c.wgt_depth):
        word = 0
        for o in range(c.block_out):
            word |= 1 << (c.wgt_width * (o * c.block_in + (o + s) % c.block_in))
        rows.append(Const(word, c.wgt_elem_bits))
    return rows


def lanes_of(value, c=CONFIG):
    return data.ArrayLayout(signed(c.acc_width), c.batch * c.block_out)(value)


class Program:
    """``run.n_insn`` instructions of ``run.kind`` with any legal fields (constants of the
    run) and how many of them are issued."""

    def __init__(self, m, run, c=CONFIG):
        isa = isa_for(c)
        self.words = [AnyConst(c.insn_bits) for _ in range(run.n_insn)]
        self.count = AnyConst(range(run.n_insn + 1))
        m.d.comb += Assume((self.count >= 1) & (self.count <= run.n_insn))
        opcodes = ((Opcode.GEMM, Opcode.ALU) if run.kind in BOTH
                   else (Opcode.GEMM,) if run.kind == "gemm" else (Opcode.ALU,))
        for w in self.words:
            hdr, loop, alu = isa.finish.layout()(w), isa.gemm.layout()(w), isa.alu.layout()(w)
            n_uops = uop_count(loop)
            if not run.deps:
                m.d.comb += Assume(~(hdr.pop_prev_dep | hdr.pop_next_dep | hdr.push_prev_dep
                                     | hdr.push_next_dep))
            m.d.comb += [
                Assume(sum(hdr.opcode == op for op in opcodes) == 1),
                Assume(loop.uop_bgn <= loop.uop_end), Assume(loop.uop_end <= c.uop_depth),
                Assume(loop.iter_out <= MAX_ITER), Assume(loop.iter_in <= MAX_ITER),
                Assume(n_uops <= run.max_uops),
            ]
            with m.If(hdr.opcode == Opcode.ALU):
                m.d.comb += [
                    Assume(~alu_illegal(alu.alu_opcode, alu.use_imm, alu.imm, c)),
                    Assume(sum(alu.alu_opcode == op for op in KINDS[run.kind]) == 1),
                ]

    def word(self, index):
        return Array(self.words)[index]


class Sequential:
    """The sequential spec (see the module docstring), in lockstep with the module's
    retirements: it applies its next micro-op, at once and in program order, in the cycle
    after ``retire`` (the module's ``uop_count`` moved). ``rows``: its accumulator rows;
    ``fault``: its next micro-op has an out-of-range index (it stops there); ``can_retire``:
    it has a micro-op to apply; ``done``: it applied the whole program or stopped;
    ``hazard``: sticky flags of the read-after-write distances it executed.

    For a spec that runs on its own (``retire`` always high: one micro-op a cycle), the
    steps are visible too: ``take`` (it takes the next instruction, ``next_hdr``: its
    header), ``step`` (it applies the micro-op of ``hdr``'s instruction: ``new`` to row
    ``dst``; ``writes_out``: not a GEMM reset, so the out row is written too) and ``busy``."""

    def __init__(self, m, program, uop_port, acc_start, inp_rows, wgt_rows, retire,
                 c=CONFIG):
        n_insn = len(program.words)
        isa = isa_for(c)
        self.rows = rows = [Signal(c.acc_elem_bits, name=f"spec_row{r}")
                            for r in range(c.acc_depth)]
        self.started = started = Signal()
        insn = Signal(c.insn_bits)
        self.ptr = ptr = Signal(range(n_insn + 1))
        busy = Signal()
        self.fault = fault = Signal()
        k = Signal(c.log_uop_depth + 1)
        q = Signal(range(MAX_ITER))
        p = Signal(range(MAX_ITER))
        hdr, loop, alu_f = (isa.finish.layout()(insn), isa.gemm.layout()(insn),
                            isa.alu.layout()(insn))
        is_gemm = hdr.opcode == Opcode.GEMM

        self.done = Signal()
        m.d.comb += self.done.eq(started & ~busy & ((ptr == program.count) | fault))
        self.busy, self.hdr, self.is_gemm = busy, hdr, is_gemm
        self.take = Signal()
        m.d.comb += self.take.eq(started & ~busy & ~fault & (ptr != program.count))
        self.next_hdr = isa.finish.layout()(program.word(ptr))

        # The first cycle copies the rows the run starts from.
        m.d.sync += started.eq(1)
        with m.If(~started):
            m.d.sync += [rows[r].eq(acc_start[r]) for r in range(c.acc_depth)]

        # Take the next instruction (a loop with nothing to do is done at once).
        with m.If(self.take):
            nxt = program.word(ptr)
            nl = isa.gemm.layout()(nxt)
            m.d.sync += [insn.eq(nxt), ptr.eq(ptr + 1), k.eq(nl.uop_bgn), q.eq(0), p.eq(0),
                         busy.eq((nl.uop_bgn != nl.uop_end) & (nl.iter_out != 0)
                                 & (nl.iter_in != 0))]

        # The next micro-op: its indices, whether they are in range, its result.
        m.d.comb += uop_port.addr.eq(k)
        uop = isa.uop.layout()(uop_port.data)
        src_fo = Mux(is_gemm, loop.src_factor_out, alu_f.src_factor_out)
        src_fi = Mux(is_gemm, loop.src_factor_in, alu_f.src_factor_in)
        dst = uop.dst_idx + p * loop.dst_factor_out + q * loop.dst_factor_in
        src = uop.src_idx + p * src_fo + q * src_fi
        wgt = uop.wgt_idx + p * loop.wgt_factor_out + q * loop.wgt_factor_in
        accumulate = is_gemm & ~loop.reset_reg
        tensor = ~is_gemm & ~alu_f.use_imm
        bad = ((dst >= c.acc_depth)
               | (accumulate & ((src >= c.inp_depth) | (wgt >= c.wgt_depth)))
               | (tensor & (src >= c.acc_depth)))

        a = lanes_of(Array(rows)[dst[:c.log_acc_depth]])
        b_row = lanes_of(Array(rows)[src[:c.log_acc_depth]])
        inp = data.ArrayLayout(data.ArrayLayout(signed(c.inp_width), c.block_in), c.batch)(
            Array(inp_rows)[src[:c.log_inp_depth]])
        wgt_t = data.ArrayLayout(data.ArrayLayout(signed(c.wgt_width), c.block_in),
                                 c.block_out)(Array(wgt_rows)[wgt[:c.log_wgt_depth]])
        imm = alu_f.imm
        new = Signal(c.acc_elem_bits)
        new_lanes = lanes_of(new)
        for bi in range(c.batch):
            for o in range(c.block_out):
                j = bi * c.block_out + o
                x = a[j]
                dot = sum(inp[bi][i] * wgt_t[o][i] for i in range(c.block_in))
                y = Mux(alu_f.use_imm, imm, b_row[j])
                by_op = {
                    AluOp.MIN: Mux(x < y, x, y),
                    AluOp.MAX: Mux(x > y, x, y),
                    AluOp.ADD: x + y,
                    AluOp.SHR: Mux(imm >= 0, x >> imm.as_unsigned()[:5],
                                   x << (-imm).as_unsigned()[:5]),
                }
                alu_lane = by_op[AluOp.MIN]
                for op, value in by_op.items():
                    alu_lane = Mux(alu_f.alu_opcode == op, value, alu_lane)
                lane = Mux(is_gemm, Mux(loop.reset_reg, 0, x + dot), alu_lane)
                m.d.comb += new_lanes[j].eq(lane[:c.acc_width])

        self.can_retire = busy & ~bad
        self.dst, self.new = dst[:c.log_acc_depth], new
        self.writes_out = ~(is_gemm & loop.reset_reg)
        self.step = Signal()
        m.d.comb += self.step.eq(busy & ~bad & retire)
        with m.If(busy & bad):
            m.d.sync += [fault.eq(1), busy.eq(0)]
        with m.Elif(busy & retire):
            for r in range(c.acc_depth):
                with m.If(dst == r):
                    m.d.sync += rows[r].eq(new)
            with m.If(k + 1 == loop.uop_end):
                m.d.sync += k.eq(loop.uop_bgn)
                with m.If(q + 1 == loop.iter_in):
                    m.d.sync += q.eq(0)
                    with m.If(p + 1 == loop.iter_out):
                        m.d.sync += busy.eq(0)
                    with m.Else():
                        m.d.sync += p.eq(p + 1)
                with m.Else():
                    m.d.sync += q.eq(q + 1)
            with m.Else():
                m.d.sync += k.eq(k + 1)

        # Read-after-write distances within an instruction (the pipeline's hazards).
        wrote = [Signal(name=f"spec_wrote{d}") for d in (1, 2)]
        wrote_at = [Signal(c.log_acc_depth, name=f"spec_wrote_at{d}") for d in (1, 2)]
        step = busy & ~bad & retire
        with m.If(step):
            m.d.sync += [wrote[0].eq(1), wrote_at[0].eq(dst), wrote[1].eq(wrote[0]),
                         wrote_at[1].eq(wrote_at[0])]
        with m.Elif(~busy):
            m.d.sync += [wrote[0].eq(0), wrote[1].eq(0)]
        self.hazard = {}
        for kind, reads, at in (("gemm", accumulate, dst), ("alu_src", tensor, src)):
            for d in (1, 2):
                flag = Signal(name=f"spec_hazard_{kind}{d}")
                with m.If(step & reads & wrote[d - 1] & (at == wrote_at[d - 1])
                          & ((d == 1) | (wrote_at[0] != at))):
                    m.d.sync += flag.eq(1)
                self.hazard[kind, d] = flag


class ComputeVsSequential(Spec):
    """The module against :class:`Sequential` (see the module docstring)."""

    def __init__(self, dut, run, *, covers=False):
        super().__init__()
        self.dut, self.run, self.covers = dut, run, covers

    def properties(self, m, platform):
        c = CONFIG
        dut = self.dut
        # Ports of the spec on the module's SRAMs: the program and the accumulators.
        uop_port = dut.uop_mem.read_port(domain="comb")
        acc_ports = [dut.acc_mem.read_port(domain="comb") for _ in range(c.acc_depth)]
        m.submodules.dut = dut
        for r, port in enumerate(acc_ports):
            m.d.comb += port.addr.eq(r)
        acc = [port.data for port in acc_ports]

        run = self.run
        program = Program(m, run)
        inp_rows = [AnyConst(c.inp_elem_bits) for _ in range(c.inp_depth)]
        wgt_rows = weight_tiles()

        # The module's environment: the program back to back, SRAMs of constant rows,
        # no loads (DMA idle), no tokens needed, room for every push.
        issued = Signal(range(run.n_insn + 1))
        m.d.comb += [
            dut.cmd.valid.eq(issued != program.count),
            dut.cmd.payload.insn.eq(program.word(issued)),
            dut.cmd.payload.index.eq(issued),
            dut.g2l.ready.eq(1), dut.g2s.ready.eq(1),
        ]
        with m.If(dut.cmd.valid & dut.cmd.ready):
            m.d.sync += issued.eq(issued + 1)
        for port, rows in ((dut.inp_rd, inp_rows), (dut.wgt_rd, wgt_rows)):
            with m.If(port.en):
                m.d.sync += port.data.eq(Array(rows)[port.addr])

        # A micro-op retired (its write landed) in the previous cycle: uop_count moved.
        last_count = Signal(32)
        m.d.sync += last_count.eq(dut.uop_count)
        retire = dut.uop_count != last_count
        spec = Sequential(m, program, uop_port, acc, inp_rows, wgt_rows, retire)
        m.d.comb += Assert((dut.uop_count == last_count) | (dut.uop_count == last_count + 1))
        with m.If(retire):
            m.d.comb += Assert(spec.can_retire)

        # Every cycle, the rows the module held a cycle ago are the spec's.
        before = [Signal(c.acc_elem_bits, name=f"dut_row{r}") for r in range(c.acc_depth)]
        m.d.sync += [before[r].eq(acc[r]) for r in range(c.acc_depth)]
        with m.If(spec.started):
            m.d.comb += [Assert(lanes_of(before[r])[LANE] == lanes_of(spec.rows[r])[LANE])
                         for r in range(c.acc_depth)]

        # Done: every instruction accepted and ready again (or a fault) for two cycles,
        # so the last write has landed.
        ended = (issued == program.count) & dut.cmd.ready | dut.error.valid
        ended_before = Signal()
        m.d.sync += ended_before.eq(ended)
        both = Signal()
        m.d.comb += both.eq(ended & ended_before & spec.done)
        with m.If(both):
            m.d.comb += Assert(dut.error.valid == spec.fault)
            with m.If(dut.error.valid):
                # the index of the instruction the spec stopped in (the module may
                # have taken the next one already: an overlapped dispatch)
                m.d.comb += [Assert(dut.error.code == ErrorCode.SRAM_OUT_OF_RANGE),
                             Assert(dut.error.index == spec.ptr - 1)]

        # Bounded liveness: an instruction of N uops holds ready low <= N + W cycles,
        # and the whole program is done within the BMC depth.
        isa = isa_for(c)
        cur = isa.gemm.layout()(Signal(c.insn_bits, name="current"))
        m.d.sync += cur.as_value().eq(Mux(dut.cmd.valid & dut.cmd.ready,
                                          dut.cmd.payload.insn, cur.as_value()))
        waited = Signal(range(run.depth + 1))
        with m.If(dut.cmd.ready | dut.error.valid):
            m.d.sync += waited.eq(0)
        with m.Else():
            m.d.sync += waited.eq(waited + 1)
        m.d.comb += Assert(waited <= uop_count(cur) + WRITE_STAGE)
        cycle = Signal(range(run.depth + 1))
        m.d.sync += cycle.eq(cycle + (cycle != run.depth))
        with m.If(cycle == run.depth - 1):
            m.d.comb += Assert(both)

        if self.covers:
            for (kind, d), flag in spec.hazard.items():     # (within an instruction)
                if (kind == "gemm") == (run.kind == "gemm") and run.max_uops > d:
                    m.d.comb += Cover(both & ~dut.error.valid & flag)
            if run.n_insn > 1:
                # an overlapped dispatch: the next instruction taken while the spec still
                # has micro-ops of the previous one to apply
                overlapped = Signal()
                with m.If(dut.cmd.valid & dut.cmd.ready & (issued != 0) & spec.can_retire):
                    m.d.sync += overlapped.eq(1)
                m.d.comb += Cover(both & ~dut.error.valid & overlapped)


def forwarding_removed(c=CONFIG):
    """Mutation: the acc reads never take the writes in flight."""
    dut = Compute(c)
    dut.forwarding = False
    return dut


#: The runs of the default suite. Two instructions of two micro-ops: the second
#: dispatched while the first drains (an overlapped dispatch).
RUNS = [Run("gemm", 1, 3), Run("add", 1, 3), Run("mixed", 2, 2)]
#: Proofs only with ``-m slow``. Since the write stage moved to S6 (depth 21), the proof
#: of the two-instruction run takes Yices more than 12 minutes (steps 11 and on), while
#: its cover and its mutation (satisfiable queries) still take seconds and stay in the
#: default suite; the overlapped dispatch is also replayed bit for bit on every RTL
#: backend against the behavioral model.
SLOW_RUNS = [Run("mixed", 2, 2), Run("min", 1, 3), Run("max", 1, 3), Run("shr", 1, 2)]
#: Engine: memories as registers (4 rows), which Yices solves faster than arrays.
ENGINE = "smtbmc --nomem yices"


def check_run(spec, name, tmp_path, run, mode="bmc", check=prove):
    return check(spec, name, tmp_path, mode=mode, depth=run.depth, engine=ENGINE,
                 free_memories=FREE)


@pytest.mark.parametrize("run", [r for r in RUNS if r not in SLOW_RUNS]
                         + [pytest.param(r, marks=pytest.mark.slow) for r in SLOW_RUNS],
                         ids=str)
def test_compute_equals_sequential_bmc(run, tmp_path):
    check_run(ComputeVsSequential(Compute(CONFIG), run), f"compute_{run.kind}", tmp_path, run)


@pytest.mark.parametrize("run", RUNS, ids=str)
def test_compute_forwarded_hazards_reachable(run, tmp_path):
    check_run(ComputeVsSequential(Compute(CONFIG), run, covers=True),
              f"compute_{run.kind}_cover", tmp_path, run, mode="cover")


@pytest.mark.parametrize("run", RUNS, ids=str)
def test_compute_without_forwarding_caught(run, tmp_path):
    name = f"compute_{run.kind}_no_fwd"
    check_run(ComputeVsSequential(forwarding_removed(), run), name, tmp_path, run, check=refute)
    # ... and it is the row equality that fails (not liveness or the retire check).
    line = next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                if "Assert(lanes_of(before[r])" in text)
    log = (tmp_path / name / "logfile.txt").read_text()
    assert re.search(rf"failed assertion .*test_formal_compute\.py:{line} ", log), log[-2000:]
