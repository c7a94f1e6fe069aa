"""Formal check of the compute module with its ALU lane (``COMPUTE_OVERLAP``: 1) against
sequential execution.

The design under test is the real :class:`~vtakit.hw.compute.Compute` on the small config
of ``test_formal_compute`` with the key set (:data:`LANE_CONFIG`: 4 accumulator rows, two
banks of two). It is fed a program of 1..n instructions, each a GEMM or an ALU (MIN, MAX,
ADD) with any fields the decoder accepts, and, with :attr:`Run.deps`, any dependency
flags (pops and pushes), by :class:`~test_formal_compute.Program`; the uop and acc SRAMs
start with any contents. So the programs include one-uop ALUs the lane takes, beside
younger GEMMs in the other bank or followed by a GEMM in its own bank (held), ALUs the
lane refuses, and faults.

The spec is :class:`~test_formal_compute.Sequential`, running on its own (one micro-op a
cycle from the first cycle, well ahead of the module) and logging, per acc bank, the
writes of sequential execution in program order (row, value on lane
:data:`~test_formal_compute.LANE`, whether the out row is written too, the pops before
it), and for each token queue the number of writes per bank when each pushing
instruction completes. The two lanes write the banks in an interleaving the spec does not
know, but each bank has one user at a time and its writes come in program order; so:

* every acc write of a bank is that bank's next logged write (row and value), with the
  out write at the same row exactly when logged (its value the acc value's low bits), and
  only after the module popped every token the program pops up to its instruction;
* the k-th push to a token queue (g2l, g2s) happens only when every write logged up to
  the k-th pushing instruction has landed (at the latest at the edge of the push);
* when the module reports a fault, the spec stopped at an out-of-range micro-op of that
  instruction, and every logged write and push happened (the state of sequential
  execution up to the fault);
* at the last cycle of a check of :func:`lane_depth` cycles (which every program fits
  in: bounded liveness) the spec and the module are done: every logged write and push
  happened, every pop, and the module faulted exactly when the spec stopped.

BMC costs Yices more at each step, so the default suite checks a horizon of 18 cycles
(:data:`HORIZON`: every write, push and fault in it), ``-m slow`` the whole program (33)
and MIN/MAX (:data:`SLOW`).

The environment: the token sources (l2g, s2g) offer a token at any time but are never
empty two cycles in a row; the sinks (g2l, g2s) are token queues of one token whose
consumer takes it at any time but within two cycles.

Covers (so the checks are not vacuous): the lane writes one bank in the cycle a GEMM
writes the other; a GEMM accepted before the lane's last write to the GEMM's bank writes
that bank next (it was held); a lane instruction pushes after writing beside a GEMM.

Mutations (each must fail the check with a counterexample, within :data:`MUTANT_RUN`): the
lane's ``busy_bank`` tied low (no bank hold: a GEMM writes the lane's bank in the cycle the
lane does, one write is lost, and the next push comes before a write the spec made
before it); the lane's ``busy`` tied low (a GEMM lane instruction pushes before the
lane's older write). They replace :class:`~vtakit.hw.compute_lane.AluLane` by a subclass
(``Compute`` instantiates the lane by that global name).
"""

import dataclasses
import re

import pytest
from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Array, Assert, Assume, Const, Cover, Fragment, Signal, signed
from amaranth.lib import wiring

import vtakit.hw.compute as compute_module
from vtakit.hw.compute import Compute
from vtakit.hw.compute_lane import AluLane
from vtakit.hw.formal import Spec
from vtakit.hw.interfaces import ErrorCode
from vtakit.hw.queues import TokenQueue

from formal_util import prove, refute
from test_formal_compute import (CONFIG, ENGINE, LANE, WRITE_STAGE, Program, Run, Sequential,
                                 lanes_of, weight_tiles)

pytestmark = pytest.mark.formal

#: The config of ``test_formal_compute`` with the ALU lane.
LANE_CONFIG = dataclasses.replace(CONFIG, compute_overlap=1)
#: The SRAMs whose contents are free at the start (the program, the accumulators).
FREE = ("uop_mem", "acc_bank0", "acc_bank1")
#: The token queues (the module's ports) the push flags name.
PUSHES = ("g2l", "g2s")
POPS = ("l2g", "s2g")
#: Cycles an instruction may take beyond its micro-ops and the write stage: the footprint
#: check (2), the lane's start and its two extra stages, and waits for tokens.
SLACK = 6
#: The module gets its first command in this cycle: the spec (one micro-op a cycle from
#: cycle 0, one cycle to take an instruction) stays ahead of it, so that every write and
#: push of the module has its logged counterpart already.
LEAD = 2


def lane_depth(run):
    """Cycles in which every program of ``run`` is done (see :data:`SLACK`)."""
    return LEAD + run.n_insn * (run.max_uops + 1 + WRITE_STAGE + SLACK) + 3


def elaborated_lane(frag):
    """The :class:`AluLane` of an elaborated compute module."""
    for sub, name, _ in frag.subfragments:
        if name == "lane":
            return sub.origins[0]
    raise AssertionError("the compute module has no ALU lane (COMPUTE_OVERLAP off?)")


class LaneVsSequential(Spec):
    """The module with its ALU lane against the logs of sequential execution (see the
    module docstring)."""

    def __init__(self, dut, run, *, depth=None, covers=False):
        super().__init__()
        self.dut, self.run, self.covers = dut, run, covers
        self.depth = lane_depth(run) if depth is None else depth

    def properties(self, m, platform):
        c = LANE_CONFIG
        dut, run = self.dut, self.run
        depth = self.depth
        a_w = c.log_acc_depth
        half = c.acc_depth // 2
        # Ports of the spec on the module's SRAMs (made before it is elaborated), then the
        # elaborated module: its bank write ports and its lane.
        uop_port = dut.uop_mem.read_port(domain="comb")
        acc_ports = [bank.read_port(domain="comb") for bank in dut.acc_banks
                     for _ in range(half)]
        frag = Fragment.get(dut, platform)
        lane = elaborated_lane(frag)
        m.submodules.dut = frag
        for r, port in enumerate(acc_ports):
            m.d.comb += port.addr.eq(r % half)
        acc = [port.data for port in acc_ports]
        bank_wr = [bank.write_ports[0] for bank in dut.acc_banks]
        out_wr = [dut.out_wr, dut.out_wr1]

        program = Program(m, run, c)
        inp_rows = [AnyConst(c.inp_elem_bits) for _ in range(c.inp_depth)]
        wgt_rows = weight_tiles(c)

        # The program back to back from cycle LEAD; SRAMs of constant rows; no loads.
        cycle = Signal(range(depth + 1))
        m.d.sync += cycle.eq(cycle + (cycle != depth))
        issued = Signal(range(run.n_insn + 1))
        m.d.comb += [
            dut.cmd.valid.eq((issued != program.count) & (cycle >= LEAD)),
            dut.cmd.payload.insn.eq(program.word(issued)),
            dut.cmd.payload.index.eq(issued),
        ]
        with m.If(dut.cmd.valid & dut.cmd.ready):
            m.d.sync += issued.eq(issued + 1)
        for port, rows in ((dut.inp_rd, inp_rows), (dut.wgt_rd, wgt_rows)):
            with m.If(port.en):
                m.d.sync += port.data.eq(Array(rows)[port.addr])
        # Token sources: a token at any time, never none two cycles in a row (and, once
        # offered, held until taken). Sinks: a queue of one token, taken within two cycles.
        for name in POPS:
            src = getattr(dut, name)
            m.d.comb += src.valid.eq(AnySeq(1))
            offered, idle = Signal(name=f"{name}_offered"), Signal(name=f"{name}_idle")
            m.d.sync += [offered.eq(src.valid & ~src.ready), idle.eq(~src.valid)]
            m.d.comb += [Assume(src.valid | ~(offered | idle))]
        for name in PUSHES:
            queue = TokenQueue(1)
            m.submodules[f"{name}_queue"] = queue
            wiring.connect(m, getattr(dut, name), queue.push)
            m.d.comb += queue.pop.ready.eq(AnySeq(1))
            held = Signal(name=f"{name}_held")
            m.d.sync += held.eq(queue.pop.valid)
            m.d.comb += Assume(queue.pop.ready | ~held)

        # ---------------------------------------------------------------- the spec
        spec = Sequential(m, program, uop_port, acc, inp_rows, wgt_rows, Const(1), c)
        n_log = run.n_insn * run.max_uops
        n_pops = {name: Signal(range(run.n_insn + 1), name=f"spec_pops_{name}")
                  for name in POPS}
        with m.If(spec.take):
            m.d.sync += [n_pops["l2g"].eq(n_pops["l2g"] + spec.next_hdr.pop_prev_dep),
                         n_pops["s2g"].eq(n_pops["s2g"] + spec.next_hdr.pop_next_dep)]

        def entry(name):
            return dict(row=Signal(a_w, name=f"{name}_row"),
                        val=Signal(signed(c.acc_width), name=f"{name}_val"),
                        out=Signal(name=f"{name}_out"), gemm=Signal(name=f"{name}_gemm"),
                        insn=Signal(range(run.n_insn), name=f"{name}_insn"),
                        **{p: Signal(range(run.n_insn + 1), name=f"{name}_{p}") for p in POPS})

        # per bank: the writes of sequential execution in program order (one spare entry
        # for an index past the end)
        logs = [[entry(f"log{b}_{i}") for i in range(n_log + 1)] for b in range(2)]
        n_wr = [Signal(range(n_log + 1), name=f"spec_writes{b}") for b in range(2)]
        for b in range(2):
            with m.If(spec.step & (spec.dst[a_w - 1] == b)):
                m.d.sync += n_wr[b].eq(n_wr[b] + 1)
                for i in range(n_log):
                    with m.If(n_wr[b] == i):
                        e = logs[b][i]
                        m.d.sync += [e["row"].eq(spec.dst),
                                     e["val"].eq(lanes_of(spec.new, c)[LANE]),
                                     e["out"].eq(spec.writes_out), e["gemm"].eq(spec.is_gemm),
                                     e["insn"].eq(spec.ptr - 1),
                                     *[e[p].eq(n_pops[p]) for p in POPS]]
        # per token queue: the writes per bank when each pushing instruction completed
        pending = {}
        pushes = {}
        n_push = {}
        for name, flag in zip(PUSHES, ("push_prev_dep", "push_next_dep")):
            pending[name] = p = Signal(name=f"spec_pending_{name}")
            n_push[name] = k = Signal(range(run.n_insn + 1), name=f"spec_pushes_{name}")
            pushes[name] = log = [[Signal(range(n_log + 1), name=f"push_{name}{i}_w{b}")
                                   for b in range(2)] for i in range(run.n_insn + 1)]
            with m.If(spec.started & ~spec.busy & p & ~spec.fault):
                m.d.sync += [p.eq(0), k.eq(k + 1)]
                for i in range(run.n_insn):
                    with m.If(k == i):
                        m.d.sync += [log[i][b].eq(n_wr[b]) for b in range(2)]
            with m.If(spec.take):
                m.d.sync += p.eq(getattr(spec.next_hdr, flag))
        spec_done = Signal()
        m.d.comb += spec_done.eq(spec.done & (spec.fault | ~(pending["g2l"] | pending["g2s"])))

        # -------------------------------------------------------------- the module
        def handshakes(name, kind):
            """(count, port): the transfers so far on the module's token port ``name``."""
            n = Signal(range(run.n_insn + 1), name=f"dut_{kind}_{name}")
            port = getattr(dut, name)
            with m.If(port.valid & port.ready):
                m.d.sync += n.eq(n + 1)
            return n, port

        dut_pops = {name: handshakes(name, "pops")[0] for name in POPS}
        dut_wr = [Signal(range(n_log + 1), name=f"dut_writes{b}") for b in range(2)]
        landed = []     # writes of each bank, those landing at this edge included
        for b in range(2):
            wr, out = bank_wr[b], out_wr[b]
            e = {key: Array(log[key] for log in logs[b])[dut_wr[b]] for key in logs[b][0]}
            landed.append(dut_wr[b] + wr.en)
            with m.If(wr.en):
                m.d.sync += dut_wr[b].eq(dut_wr[b] + 1)
                m.d.comb += [
                    Assert(dut_wr[b] < n_wr[b]),
                    Assert((wr.addr == e["row"][:a_w - 1]) & (e["row"][a_w - 1] == b)),
                    Assert(lanes_of(wr.data, c)[LANE] == e["val"]),
                    Assert(out.en == e["out"]),
                    *[Assert(dut_pops[p] >= e[p]) for p in POPS],
                ]
                with m.If(out.en):
                    m.d.comb += [
                        Assert(out.addr == wr.addr),
                        Assert(out.data.word_select(LANE, c.out_width)
                               == e["val"][:c.out_width]),
                    ]
            with m.Else():
                m.d.comb += Assert(~out.en)
        dut_push = {}
        for name in PUSHES:
            k, port = handshakes(name, "pushes")
            dut_push[name] = k
            with m.If(port.valid & port.ready):
                need = [Array(entry[b] for entry in pushes[name])[k] for b in range(2)]
                m.d.comb += [Assert(k < n_push[name]),
                             *[Assert(landed[b] >= need[b]) for b in range(2)]]

        all_done = [*(dut_wr[b] == n_wr[b] for b in range(2)),
                    *(dut_push[q] == n_push[q] for q in PUSHES),
                    *(dut_pops[p] == n_pops[p] for p in POPS)]
        with m.If(dut.error.valid):
            m.d.comb += [Assert(spec_done & spec.fault), *[Assert(x) for x in all_done[:4]],
                         Assert(dut.error.code == ErrorCode.SRAM_OUT_OF_RANGE),
                         Assert(dut.error.index == spec.ptr - 1)]
        with m.If((cycle == depth - 1) & (depth >= lane_depth(run))):
            m.d.comb += [Assert(spec_done), *[Assert(x) for x in all_done],
                         Assert(dut.error.valid == spec.fault)]
            with m.If(~spec.fault):
                m.d.comb += [Assert(issued == program.count), Assert(dut.cmd.ready)]

        if self.covers:
            end_ok = ~dut.error.valid
            # the lane writes one bank while a GEMM writes the other
            beside = Signal()
            with m.If(lane.wr_en & bank_wr[0].en & bank_wr[1].en):
                m.d.sync += beside.eq(1)
            m.d.comb += Cover(end_ok & beside)
            # a GEMM accepted before the lane's last write to its bank writes that bank
            # next (it waited for the lane)
            held = Signal()
            for b in range(2):
                lane_last = Signal(name=f"lane_last{b}")
                issued_then = Signal.like(issued, name=f"issued_at_lane{b}")
                e_gemm = Array(log["gemm"] for log in logs[b])[dut_wr[b]]
                e_insn = Array(log["insn"] for log in logs[b])[dut_wr[b]]
                with m.If(bank_wr[b].en):
                    m.d.sync += lane_last.eq(lane.wr_en & (lane.wr_addr[a_w - 1] == b))
                    with m.If(lane_last & e_gemm & (e_insn < issued_then)):
                        m.d.sync += held.eq(1)
                with m.If(lane.wr_en & (lane.wr_addr[a_w - 1] == b)):
                    m.d.sync += issued_then.eq(issued)
            m.d.comb += Cover(end_ok & held)
            if run.deps:
                # a lane instruction pushes after a younger GEMM was accepted
                lane_push = Signal()
                with m.If((lane.push_prev | lane.push_next) & beside):
                    m.d.sync += lane_push.eq(1)
                m.d.comb += Cover(end_ok & lane_push)


class NoBankHold(AluLane):
    """Mutation: ``busy_bank`` tied low (a GEMM micro-op never waits for the lane's bank)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.busy_bank.eq(0)
        return m


class NeverBusy(AluLane):
    """Mutation: ``busy`` tied low (pushes, faults and dispatches never wait for the lane)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.busy.eq(0)
        return m


@dataclasses.dataclass(frozen=True)
class LaneRun:
    """A check of :class:`LaneVsSequential`: the programs of ``run`` for ``depth`` cycles
    (default :func:`lane_depth`, the whole program and the end checks; a shorter horizon
    checks every write, push and fault within it, not the end)."""

    run: Run
    depth: int | None = None

    def __str__(self):
        return f"{self.run}@{self.depth or lane_depth(self.run)}"

    @property
    def cycles(self):
        return self.depth or lane_depth(self.run)


#: Two instructions, each a GEMM or an ALU (ADD: the comparisons of MIN and MAX cost the
#: solver far more than the order of the writes they take part in), of up to two micro-ops,
#: with any dependency flags, for 18 cycles: the lane's writes, a GEMM's beside them in the
#: other bank (step 12 at the earliest), a GEMM held for the lane's bank (its write at step
#: 15 at the earliest), the lane's pushes and the GEMM lane's. Each BMC step costs Yices
#: more than the one before: 18 steps take 87 s of CPU (424 s on a 2-core machine with a
#: load of 10), 14 steps 23 s.
HORIZON = LaneRun(Run("lane_add", 2, 2, deps=True), 18)
#: The mutations' check: they fail at step 13 (bank hold) and step 6 (busy).
MUTANT_RUN = LaneRun(Run("lane_add", 2, 2, deps=True), 14)
#: Only with ``-m slow`` (neither was run to completion: with MIN and MAX, step 11 alone
#: took Yices more than 8 minutes): the whole program (liveness and the end checks, depth
#: 33), and MIN and MAX for 14 cycles.
SLOW = [LaneRun(Run("lane_add", 2, 2, deps=True)), LaneRun(Run("lane", 2, 2, deps=True), 14)]
#: Covers: the lane beside a GEMM (step 13), a lane push after a younger GEMM's write (step
#: 14), a GEMM held for the lane's bank (step 16 with three micro-ops); the flags are
#: registers, a cycle after the event.
COVER = LaneRun(Run("lane_add", 2, 3, deps=True), 18)


def check_lane(spec_of, name, tmp_path, lane_run, mode="bmc", check=prove):
    spec = spec_of(lane_run)
    return check(spec, name, tmp_path, mode=mode, depth=lane_run.cycles, engine=ENGINE,
                 free_memories=FREE)


def with_slow(fast, slow):
    return list(fast) + [pytest.param(r, marks=pytest.mark.slow) for r in slow]


# the BMC at HORIZON: reported 313-424 s wall while written; on main it did not finish in 40 min
# (niced beside CI): -m slow for now; the cover and the NeverBusy mutant run by default
@pytest.mark.parametrize("lane_run", with_slow([], [HORIZON, *SLOW]), ids=str)
def test_lane_equals_sequential_bmc(lane_run, tmp_path):
    check_lane(lambda r: LaneVsSequential(Compute(LANE_CONFIG), r.run, depth=r.cycles),
               f"lane_{lane_run.run}", tmp_path, lane_run)


def test_lane_beside_gemm_reachable(tmp_path):
    check_lane(lambda r: LaneVsSequential(Compute(LANE_CONFIG), r.run, depth=r.cycles,
                                          covers=True),
               "lane_cover", tmp_path, COVER, mode="cover")


# NoBankHold: reported caught at step 13 in about a minute while the test was written, but
# at the test's final form Yices runs past 5 (idle) to 12 (loaded) minutes at 14 steps,
# on the lane branch and on main alike (2026-11-30): -m slow until the cause is known
@pytest.mark.parametrize("mutant", [pytest.param(NoBankHold, marks=pytest.mark.slow),
                                    NeverBusy], ids=lambda k: k.__name__)
def test_lane_mutant_caught(mutant, tmp_path, monkeypatch):
    # Compute instantiates its lane by the module's global name ``AluLane``
    monkeypatch.setattr(compute_module, "AluLane", mutant)
    name = f"lane_{mutant.__name__}"
    check_lane(lambda r: LaneVsSequential(Compute(LANE_CONFIG), r.run, depth=r.cycles), name,
               tmp_path, MUTANT_RUN, check=refute)
    log = (tmp_path / name / "logfile.txt").read_text()
    failed = re.findall(r"failed assertion .*test_formal_lane\.py:(\d+) ", log)
    assert failed, log[-2000:]
    print(f"{mutant.__name__}: failed assertion at line {failed[0]}")
