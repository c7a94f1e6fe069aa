"""Formal proofs of the dependency-token queues and the command queues (hw/queues.py).

Token queues (an up/down counter behind FIFO handshakes), proved by k-induction for
every reachable state, at the default depth (256) and small depths: the level equals a
shadow count of accepted pushes minus accepted pops (a token is never lost or
duplicated), ``pop.valid`` exactly while a token is held (never a pop from an empty
queue), ``push.ready`` low exactly when full (a push into a full queue stalls, and it
is not dropped: the count only moves on a handshake), and level <= capacity.

Command queues (Amaranth's ``SyncFIFOBuffered``, a spare and a head register): the same level/handshake contract by
k-induction at the default depth (64) and small depths, and the data order (the n-th
command popped is the n-th pushed, for a symbolic n and a symbolic command: nothing
lost, duplicated or reordered) by bounded model checking to a depth that fills and
drains the queue, for depths 2..5.

Why the small depths cover the presets: the queue RTL is the same for every depth,
``depth`` only enters as the constant of the full comparison and the pointer wrap
(``SyncFIFOBuffered``: a memory and its read register, then the spare and the head
register). The
counter contract is proved by induction at every depth the presets use (1-step
induction, independent of depth).
"""

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cat, Cover, Signal

from vtakit.hw.formal import Spec
from vtakit.hw.interfaces import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH, Command
from vtakit.hw.queues import CommandQueue, TokenQueue

from formal_util import prove, refute

pytestmark = pytest.mark.formal


class QueueContract(Spec):
    """The counter contract of a token or command queue under free producers and
    consumers (with ``full_cover``: a full queue and a stalled push are reachable)."""

    def __init__(self, dut):
        super().__init__()
        self.dut = dut

    def properties(self, m, platform):
        m.submodules.dut = q = self.dut
        d = q.depth
        m.d.comb += [q.push.valid.eq(AnySeq(1)), q.pop.ready.eq(AnySeq(1))]
        if isinstance(q, CommandQueue):
            m.d.comb += q.push.payload.eq(AnySeq(Command.as_shape().size))
        held = Signal(range(d + 2))
        push = q.push.valid & q.push.ready
        pop = q.pop.valid & q.pop.ready
        m.d.sync += held.eq(held + push - pop)
        m.d.comb += [
            Assert(q.level == held),                # never lost, never duplicated
            Assert(held <= d),                      # level within capacity
        ]
        if isinstance(q, TokenQueue):
            # Exactly: valid while a token is held, ready while not full.
            m.d.comb += [Assert(q.pop.valid == (held != 0)), Assert(q.push.ready == (held != d))]
        else:
            # The FIFO's output register loads a cycle after a push into an empty
            # queue (and a slot frees a cycle after a pop), so only the implications:
            with m.If(q.pop.valid):
                m.d.comb += Assert(held != 0)               # no pop from an empty queue
            with m.If(held == d):
                m.d.comb += Assert(~q.push.ready)           # a push into a full queue stalls
            # ... and the lag is at most two cycles (the block RAM's read, then the
            # head register): without a push or a pop in the two cycles before, a held
            # command can be popped and a free slot accepts a push.
            moved, moved2 = Signal(), Signal()
            m.d.sync += [moved.eq(push | pop), moved2.eq(moved)]
            with m.If(~moved & ~moved2 & (held != 0)):
                m.d.comb += Assert(q.pop.valid)
            with m.If(~moved & ~moved2 & (held != d)):
                m.d.comb += Assert(q.push.ready)
        m.d.comb += [
            Cover(q.push.valid & ~q.push.ready),    # ... and that happens
            Cover((held == d) & pop),               # a full queue drains
            Cover(push & pop),                      # a push and a pop in one cycle
        ]


class CommandOrder(Spec):
    """Every command popped is the next one pushed, in order (nothing lost, duplicated
    or reordered), under free push/pop timing.

    The FIFO is data-independent (it only stores, moves and outputs its payload), so
    by Wolper's data-independence argument it suffices that the n-th push carries a
    value distinct from its neighbours: here the whole payload is n (mod 256) repeated,
    and every pop must show its own sequence number in every bit position.
    """

    def __init__(self, dut):
        super().__init__()
        self.dut = dut

    def properties(self, m, platform):
        m.submodules.dut = q = self.dut
        width = Command.as_shape().size
        pushed, popped = Signal(8), Signal(8)

        def pattern(n):
            return Cat(*([n] * (width // len(n) + 1)))[:width]

        m.d.comb += [q.push.valid.eq(AnySeq(1)), q.pop.ready.eq(AnySeq(1)),
                     q.push.payload.eq(pattern(pushed))]
        push = q.push.valid & q.push.ready
        pop = q.pop.valid & q.pop.ready
        with m.If(push):
            m.d.sync += pushed.eq(pushed + 1)
        with m.If(pop):
            m.d.sync += popped.eq(popped + 1)
        with m.If(q.pop.valid):
            m.d.comb += Assert(q.pop.payload.as_value() == pattern(popped))
        m.d.comb += Cover(pop & (popped == q.depth))


# ---------------------------------------------------------------- mutants (known bugs)

class TokenQueueLosesToken(TokenQueue):
    """Bug: a push and a pop in the same cycle lose the pushed token."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.push.valid & self.push.ready & self.pop.valid & self.pop.ready):
            m.d.sync += self.level.eq(self.level - 1)
        return m


class TokenQueueAcceptsWhenFull(TokenQueue):
    """Bug: a push into a full queue is accepted (and the token dropped)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.push.ready.eq(1)
        return m


class TokenQueuePopsEmpty(TokenQueue):
    """Bug: pop.valid while empty (a token out of nothing)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.pop.valid.eq(1)
        return m


class CommandQueueOverwritesHead(CommandQueue):
    """Bug: the FIFO advances once while the head waits, so the next command overwrites
    the one at the head (a command lost)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        pops = Signal(2)
        with m.If(self.pop.valid & self.pop.ready & (pops != 3)):
            m.d.sync += pops.eq(pops + 1)
        with m.If(pops == 1):
            m.d.comb += m.submodules["fifo"].r_en.eq(1)
        return m


class CommandQueueDropsWhenFull(CommandQueue):
    """Bug: ``push.ready`` stuck high, a command pushed into a full queue is dropped."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.push.ready.eq(1)
        return m


# ------------------------------------------------------------------------- proofs

@pytest.mark.parametrize("depth", sorted({1, 2, 3, DEFAULT_TOKEN_DEPTH}))
def test_token_queue_contract_proved(depth, tmp_path):
    prove(QueueContract(TokenQueue(depth)), f"token{depth}", tmp_path, mode="prove", depth=2)


def test_token_queue_full_reachable(tmp_path):
    prove(QueueContract(TokenQueue(3)), "token3_cover", tmp_path, mode="cover", depth=6)


@pytest.mark.parametrize("depth", sorted({2, 3, 4, DEFAULT_CMD_DEPTH}))
def test_command_queue_contract_proved(depth, tmp_path):
    prove(QueueContract(CommandQueue(depth)), f"cmd{depth}", tmp_path, mode="prove", depth=3)


def test_command_queue_full_reachable(tmp_path):
    prove(QueueContract(CommandQueue(4)), "cmd4_cover", tmp_path, mode="cover", depth=7)


@pytest.mark.parametrize("depth", [2, 3, *(pytest.param(d, marks=pytest.mark.slow) for d in (4, 5))])
def test_command_queue_order_bmc(depth, tmp_path):
    # Deep enough to push depth+1 commands through a full queue and pop them all.
    bound = 2 * depth + 4
    prove(CommandOrder(CommandQueue(depth)), f"cmd{depth}_order", tmp_path, mode="bmc",
          depth=bound)


# ------------------------------------------------------------------ mutation checks

@pytest.mark.parametrize("mutant", [TokenQueueLosesToken, TokenQueueAcceptsWhenFull,
                                    TokenQueuePopsEmpty])
def test_token_queue_mutant_caught(mutant, tmp_path):
    refute(QueueContract(mutant(3)), mutant.__name__, tmp_path, mode="prove", depth=2)


def test_command_queue_drop_caught(tmp_path):
    refute(QueueContract(CommandQueueDropsWhenFull(3)), "cmd_drop", tmp_path, mode="prove",
           depth=3)


def test_command_queue_overwrite_caught(tmp_path):
    refute(CommandOrder(CommandQueueOverwritesHead(3)), "cmd_overwrite", tmp_path, mode="bmc",
           depth=8)
