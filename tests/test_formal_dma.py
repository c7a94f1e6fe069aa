"""Formal checks of the DRAM read arbiter and write arbiter (hw/dma.py), as the top
level instantiates them (4 read clients, 8 requests in flight; 1 write client, and 2
to exercise the arbitration), on the tiny config's 64-bit bus.

Environment: every client request is a free ``{addr, beats >= 1}`` obeying the stream
rules (held until accepted); the DRAM accepts requests at will and returns, for the
requests it accepted and in their order, exactly their beats (free timing, free data);
clients accept beats at will.

* Read arbiter (BMC): for a symbolic k-th request, it reaches the DRAM unchanged from
  exactly one client, and the beats numbered [before, before + beats) of the return
  stream (``before``: beats of the earlier requests) go to that client and no other,
  unchanged, with the DRAM's ready following that client's; no beat goes to a client
  that asked for none (nothing before the first request).
* Read arbiter, bounded liveness (BMC): with a fairness assumption (the DRAM accepts a
  request and returns a beat at least every other cycle, and a client accepts a beat at
  least every other cycle) and requests of at most 2 beats, every waiting request is
  accepted within a bound.
* Write arbiter (BMC; k-induction with fairness): a request goes to the DRAM unchanged
  from exactly one client, at most :data:`~vtakit.hw.spec.WRITE_AHEAD` requests ahead of
  the one whose beats are being sent (request-ahead), and the data beats are, in request
  order, exactly ``beats`` beats of each request, all from its client, unchanged.
"""

import pytest
from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Const, Cover, Signal

from vtakit.hw.config import load_config
from vtakit.hw.dma import DmaReadArbiter, DmaWriteArbiter
from vtakit.hw.formal import Spec
from vtakit.hw.spec import DMA_READ_AHEAD_BEATS, WRITE_AHEAD
from vtakit.hw.top import READ_PRIORITY

from formal_util import free_stream_source, prove, refute, stream_rules

pytestmark = pytest.mark.formal

CONFIG = load_config("tiny")
#: Counter width of the specs (enough for the BMC depths here).
COUNT = 8
#: Longest request of the read specs: a BMC run of a dozen cycles completes no longer
#: one; longer requests exercise nothing else (the beat counter is the same compare).
READ_MAX_BEATS = 3


def free_requests(m, clients, *, max_beats=None):
    for i, c in enumerate(clients):
        free_stream_source(m, c.req)
        m.d.comb += Assume(c.req.payload.beats != 0)
        if max_beats is not None:
            m.d.comb += Assume(c.req.payload.beats <= max_beats)


def dram_read_model(m, master):
    """A DRAM read port: free request acceptance, beats only for accepted requests.
    Returns (request fire, beat fire, beats owed)."""
    m.d.comb += [master.req.ready.eq(AnySeq(1)), master.data.valid.eq(AnySeq(1)),
                 master.data.payload.eq(AnySeq(len(master.data.payload)))]
    stream_rules(m, master.data, assume=True, name="dram_data")
    owed = Signal(COUNT)
    req_fire = master.req.valid & master.req.ready
    beat = master.data.valid & master.data.ready
    m.d.sync += owed.eq(owed + (req_fire * master.req.payload.beats) - beat)
    m.d.comb += Assume(~master.data.valid | (owed != 0))
    return req_fire, beat, owed


def one_client_forwards(m, clients, master_req):
    """Exactly one client's request is taken when the master's is, unchanged, and none
    otherwise. Returns the index signal of that client."""
    fires = [c.req.valid & c.req.ready for c in clients]
    taken = Signal(range(len(clients)))
    for i, f in enumerate(fires):
        with m.If(f):
            m.d.comb += [taken.eq(i), Assert(master_req.valid & master_req.ready),
                         Assert(master_req.payload.as_value() == clients[i].req.payload.as_value())]
            for j, g in enumerate(fires):
                if j != i:
                    m.d.comb += Assert(~g)
    with m.If(master_req.valid & master_req.ready):
        m.d.comb += Assert(sum(fires) == 1)
    return taken


class ReadRouting(Spec):
    def __init__(self, dut, *, cover_full=False):
        super().__init__()
        self.dut, self.cover_full = dut, cover_full

    def properties(self, m, platform):
        m.submodules.dut = arb = self.dut
        clients = list(arb.clients)
        free_requests(m, clients, max_beats=READ_MAX_BEATS)
        for c in clients:
            m.d.comb += c.data.ready.eq(AnySeq(1))
        req_fire, beat, owed = dram_read_model(m, arb.master)
        taken = one_client_forwards(m, clients, arb.master.req)

        # The symbolic k-th request: its client, its beats, the beats before it.
        k = AnyConst(3)
        n_req, requested, delivered = Signal(4), Signal(COUNT), Signal(COUNT)
        seen, t_client, t_beats, t_first = Signal(), Signal(range(len(clients))), \
            Signal(2), Signal(COUNT)
        with m.If(req_fire):
            m.d.sync += [n_req.eq(n_req + 1), requested.eq(requested + arb.master.req.payload.beats)]
            with m.If(n_req == k):
                m.d.sync += [seen.eq(1), t_client.eq(taken), t_beats.eq(arb.master.req.payload.beats),
                             t_first.eq(requested)]
        with m.If(beat):
            m.d.sync += delivered.eq(delivered + 1)
        # Every beat shown to a client comes from the DRAM, and to one client only.
        for i, c in enumerate(clients):
            with m.If(c.data.valid):
                m.d.comb += [Assert(arb.master.data.valid),
                             Assert(c.data.payload == arb.master.data.payload)]
                for j, d in enumerate(clients):
                    if j != i:
                        m.d.comb += Assert(~d.data.valid)
        with m.If(arb.master.data.valid):
            m.d.comb += Assert(sum(c.data.valid for c in clients) == 1)
        # The tracked request's beats go to its client.
        mine = seen & (delivered >= t_first) & (delivered < t_first + t_beats)
        for i, c in enumerate(clients):
            with m.If(mine & arb.master.data.valid & (t_client == i)):
                m.d.comb += [Assert(c.data.valid), Assert(arb.master.data.ready == c.data.ready)]
        if self.cover_full:
            m.d.comb += Cover(arb.master.req.ready & ~arb.master.req.valid
                              & sum(c.req.valid for c in clients).bool() & (owed != 0))
        else:
            m.d.comb += Cover(mine & beat & (delivered == t_first + t_beats - 1) & (t_beats == 2)
                              & (k == 2))


class MasterRequestHeld(Spec):
    """The stream rule on the arbiter's own request output: once valid, valid and
    payload hold until the DRAM accepts."""

    def __init__(self, dut):
        super().__init__()
        self.dut = dut

    def properties(self, m, platform):
        m.submodules.dut = arb = self.dut
        free_requests(m, list(arb.clients))
        for c in arb.clients:
            if hasattr(c.data, "valid") and isinstance(arb, DmaWriteArbiter):
                free_stream_source(m, c.data)
            else:
                m.d.comb += c.data.ready.eq(AnySeq(1))
        m.d.comb += arb.master.req.ready.eq(AnySeq(1))
        if isinstance(arb, DmaReadArbiter):
            dram_read_model(m, arb.master)
        else:
            m.d.comb += arb.master.data.ready.eq(AnySeq(1))
        stream_rules(m, arb.master.req, name="master_req")


class ReadLiveness(Spec):
    """Bounded liveness of the read arbiter with fairness (see the module docstring).
    With ``priority`` (the arbiter's priority clients), another client's wait counts
    only the cycles in which no priority client's request is taken: it is never held
    back for any other reason."""

    def __init__(self, dut, bound, priority=()):
        super().__init__()
        self.dut, self.bound, self.priority = dut, bound, tuple(priority)

    def properties(self, m, platform):
        m.submodules.dut = arb = self.dut
        clients = list(arb.clients)
        free_requests(m, clients, max_beats=2)
        req_fire, beat, owed = dram_read_model(m, arb.master)

        def fair(name, enabled, progress):
            """``progress`` is never missing two cycles in a row while ``enabled``."""
            missed = Signal(name=f"{name}_missed")
            m.d.sync += missed.eq(enabled & ~progress)
            with m.If(missed & enabled):
                m.d.comb += Assume(progress)

        fair("dram_req", arb.master.req.valid, arb.master.req.ready)
        fair("dram_beat", owed != 0, arb.master.data.valid)
        served = Signal()             # a priority client's request is taken
        if self.priority:
            m.d.comb += served.eq(sum(clients[p].req.valid & clients[p].req.ready
                                      for p in self.priority).bool())
        for i, c in enumerate(clients):
            m.d.comb += c.data.ready.eq(AnySeq(1))
            fair(f"client{i}", c.data.valid, c.data.ready)
            waited = Signal(range(self.bound + 2), name=f"client{i}_waited")
            passed = served if i not in self.priority else Const(0)
            with m.If(c.req.valid & ~c.req.ready & ~passed):
                m.d.sync += waited.eq(waited + 1)
            with m.Else():
                m.d.sync += waited.eq(0)
            m.d.comb += Assert(waited <= self.bound)
        m.d.comb += Cover(clients[0].req.valid & (clients[1].req.valid) & clients[2].req.valid
                          & clients[3].req.valid & (owed > 6))


class WriteOrder(Spec):
    """With ``fair_beats``: requests of at most that many beats, and the clients' data
    and the DRAM's readies never low two cycles in a row; then the contract is
    k-inductive (a wrong count or owner shows within 3 * fair_beats + 2 cycles: a beat
    takes at most 3 cycles under these rules).

    The spec keeps the requests whose beats are not all sent, as the DRAM sees them:
    ``left``/``owner`` of the oldest one (its beats are the ones sent now), and
    ``ahead``/``a_beats``/``a_owner`` of one requested ahead (``WRITE_AHEAD == 1``)."""

    def __init__(self, dut, *, fair_beats=None):
        super().__init__()
        self.dut, self.fair_beats = dut, fair_beats

    def properties(self, m, platform):
        assert WRITE_AHEAD == 1
        m.submodules.dut = arb = self.dut
        clients = list(arb.clients)
        free_requests(m, clients, max_beats=self.fair_beats)
        for i, c in enumerate(clients):
            free_stream_source(m, c.data)
        master = arb.master
        m.d.comb += [master.req.ready.eq(AnySeq(1)), master.data.ready.eq(AnySeq(1))]
        if self.fair_beats is not None:
            for name, sig in [("dram_ready", master.data.ready), ("dram_req_ready", master.req.ready),
                              *((f"client{i}_data", c.data.valid) for i, c in enumerate(clients))]:
                low = Signal(name=f"{name}_low")
                m.d.sync += low.eq(~sig)
                m.d.comb += Assume(~low | sig)
        stream_rules(m, master.data, name="master_data")
        taken = one_client_forwards(m, clients, master.req)
        left, owner = Signal(17), Signal(range(len(clients)))
        ahead, a_beats, a_owner = Signal(), Signal(17), Signal(range(len(clients)))
        req_fire = master.req.valid & master.req.ready
        beat = master.data.valid & master.data.ready
        m.d.comb += Assert(~ahead | (left != 0))
        with m.If(req_fire):
            m.d.comb += Assert(~ahead)           # no more than WRITE_AHEAD ahead
        with m.If(master.data.valid):
            m.d.comb += Assert(left != 0)        # no beat beyond the requests'
        with m.If(beat):
            m.d.sync += left.eq(left - 1)
        with m.If((left == 0) | (beat & (left == 1))):      # the oldest one ends here
            with m.If(ahead):
                m.d.sync += [left.eq(a_beats), owner.eq(a_owner), ahead.eq(0)]
            with m.Elif(req_fire):
                m.d.sync += [left.eq(master.req.payload.beats), owner.eq(taken)]
        with m.Elif(req_fire):
            m.d.sync += [ahead.eq(1), a_beats.eq(master.req.payload.beats), a_owner.eq(taken)]
        # Busy exactly while a request has beats to send or a request waits.
        any_req = sum(c.req.valid for c in clients).bool()
        m.d.comb += Assert(arb.busy == ((left != 0) | any_req))
        if self.fair_beats is not None:
            m.d.comb += [Assert(left <= self.fair_beats), Assert(a_beats <= self.fair_beats)]
            # (for the induction) the arbiter's queue is the one seen from outside
            q = arb._queue
            m.d.comb += [Assert(q["left"] == left), Assert(q["ahead"] == ahead)]
            with m.If(left != 0):
                m.d.comb += Assert(q["owner"] == owner)
            with m.If(ahead):
                m.d.comb += [Assert(q["a_beats"] == a_beats), Assert(q["a_owner"] == a_owner)]
        for i, c in enumerate(clients):
            with m.If(c.data.valid & c.data.ready):
                m.d.comb += [Assert(owner == i), Assert(beat),
                             Assert(master.data.payload == c.data.payload)]
            with m.If(beat & (owner == i)):
                m.d.comb += Assert(c.data.ready)
        m.d.comb += Cover((left == 1) & beat & ahead & (a_owner != owner)
                          & (master.req.payload.beats == 3))


# ---------------------------------------------------------------- mutants (known bugs)

class ReadArbiterWrongMaster(DmaReadArbiter):
    """Bug: client 0 also sees every beat meant for client 1."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.clients[1].data.valid):
            m.d.comb += self.clients[0].data.valid.eq(1)
        return m


class ReadArbiterExtraBeat(DmaReadArbiter):
    """Bug: the beat counter compares with ``beats`` instead of ``beats - 1``: one beat
    too many goes to a request's client."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        tags = m.submodules["tags"]
        # Hold the head one beat longer on 1-beat requests (``count`` is internal, so
        # the bug is modelled on the FIFO's read enable).
        extra = Signal()
        beat = self.master.data.valid & self.master.data.ready
        with m.If(beat & (tags.r_data[2:] == 1) & ~extra):
            m.d.comb += tags.r_en.eq(0)
            m.d.sync += extra.eq(1)
        with m.Elif(beat):
            m.d.sync += extra.eq(0)
        return m


class ReadArbiterStarves(DmaReadArbiter):
    """Bug: fixed priority to client 0 instead of round robin (client 1 starves)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.clients[0].req.valid):
            m.d.comb += [self.master.req.payload.eq(self.clients[0].req.payload),
                         self.clients[1].req.ready.eq(0), self.clients[2].req.ready.eq(0),
                         self.clients[3].req.ready.eq(0),
                         self.clients[0].req.ready.eq(self.master.req.ready
                                                      & m.submodules["tags"].w_rdy)]
        return m


class WriteArbiterEarlyRequest(DmaWriteArbiter):
    """Bug: a request is issued while the owner FIFO is full (one more ahead than the
    DRAM takes; its owner is lost)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        req, c = self.master.req, self.clients[0]
        m.d.comb += [req.valid.eq(c.req.valid), c.req.ready.eq(req.ready)]
        return m


class WriteArbiterEarlyRelease(DmaWriteArbiter):
    """Bug: the oldest request is released one beat early (at 2 beats left) when one is
    granted ahead of it, so its last beat comes from that one's client."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        q = self._queue
        beat = self.master.data.valid & self.master.data.ready
        with m.If(beat & (q["left"] == 2) & q["ahead"]):
            m.d.sync += [q["left"].eq(q["a_beats"]), q["owner"].eq(q["a_owner"]),
                         q["ahead"].eq(0)]
        return m


class WriteArbiterWrongClientData(DmaWriteArbiter):
    """Bug: the data beats always come from client 0, whoever owns the burst."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.master.data.payload.eq(self.clients[0].data.payload)
        return m


# ------------------------------------------------------------------------- proofs

READ_DEPTH = 8
LIVENESS_BOUND = 7


@pytest.mark.parametrize("outstanding, ahead", [(8, DMA_READ_AHEAD_BEATS), (8, None),
                                                (2, None), (8, 3)])
def test_read_arbiter_routing_bmc(outstanding, ahead, tmp_path):
    # (8, DMA_READ_AHEAD_BEATS): as the top level builds it; 2: the routing FIFO fills
    # within the BMC depth; a read-ahead of 3 beats holds requests back within it.
    prove(ReadRouting(DmaReadArbiter(CONFIG, 4, max_outstanding=outstanding,
                                     max_beats=ahead)),
          f"rd_routing{outstanding}_{ahead}", tmp_path, mode="bmc", depth=READ_DEPTH)


def test_read_arbiter_full_routing_fifo_reachable(tmp_path):
    # With 2 requests in flight, a waiting client is held back by the full FIFO.
    prove(ReadRouting(DmaReadArbiter(CONFIG, 4, max_outstanding=2), cover_full=True),
          "rd_full_cover", tmp_path, mode="cover", depth=READ_DEPTH)


def test_read_arbiter_routing_cover(tmp_path):
    prove(ReadRouting(DmaReadArbiter(CONFIG, 4)), "rd_routing_cover", tmp_path, mode="cover",
          depth=READ_DEPTH)


@pytest.mark.parametrize("ahead", [None, DMA_READ_AHEAD_BEATS])
def test_read_arbiter_liveness_bmc(ahead, tmp_path):
    # with requests of at most 2 beats the read-ahead as built never holds one back
    prove(ReadLiveness(DmaReadArbiter(CONFIG, 4, max_beats=ahead), LIVENESS_BOUND),
          f"rd_live_{ahead}", tmp_path, mode="bmc", depth=LIVENESS_BOUND + 2)


def test_read_arbiter_with_priority_routes_bmc(tmp_path):
    # the top level's arbiter: the compute module's clients (2, 3) first
    prove(ReadRouting(DmaReadArbiter(CONFIG, 4, max_beats=DMA_READ_AHEAD_BEATS,
                                     priority=READ_PRIORITY)),
          "rd_routing_priority", tmp_path, mode="bmc", depth=READ_DEPTH)


def test_read_arbiter_with_priority_liveness_bmc(tmp_path):
    # a priority client waits no longer than in the round; another one only while a
    # priority client's requests are taken
    prove(ReadLiveness(DmaReadArbiter(CONFIG, 4, max_beats=DMA_READ_AHEAD_BEATS,
                                      priority=READ_PRIORITY), LIVENESS_BOUND, READ_PRIORITY),
          "rd_live_priority", tmp_path, mode="bmc", depth=LIVENESS_BOUND + 2)


def test_read_arbiter_with_priority_starving_caught(tmp_path):
    # without the priority exemption the other clients' plain bound fails: the
    # priority is real
    refute(ReadLiveness(DmaReadArbiter(CONFIG, 4, priority=READ_PRIORITY), LIVENESS_BOUND),
           "rd_live_priority_plain", tmp_path, mode="bmc", depth=LIVENESS_BOUND + 2)


@pytest.mark.parametrize("n", [1, 2])
def test_write_arbiter_bmc(n, tmp_path):
    prove(WriteOrder(DmaWriteArbiter(CONFIG, n)), f"wr{n}", tmp_path, mode="bmc", depth=16)


@pytest.mark.parametrize("n", [1, 2])
def test_write_arbiter_proved_with_fairness(n, tmp_path):
    prove(WriteOrder(DmaWriteArbiter(CONFIG, n), fair_beats=2), f"wr{n}_fair", tmp_path,
          mode="prove", depth=10)


def test_write_arbiter_cover(tmp_path):
    prove(WriteOrder(DmaWriteArbiter(CONFIG, 2)), "wr_cover", tmp_path, mode="cover", depth=12)


@pytest.mark.parametrize("arbiter,n", [(DmaReadArbiter, 4), (DmaReadArbiter, 2),
                                       (DmaWriteArbiter, 2)])
def test_master_request_held_until_accepted(arbiter, n, tmp_path):
    # A waiting request keeps its grant, so it stays stable until accepted.
    prove(MasterRequestHeld(arbiter(CONFIG, n)), f"{arbiter.__name__}{n}_held", tmp_path,
          mode="bmc", depth=8)


def test_single_client_write_request_held(tmp_path):
    # The top's write arbiter has one client: proved for every reachable state.
    prove(MasterRequestHeld(DmaWriteArbiter(CONFIG, 1)), "wr1_held", tmp_path, mode="prove",
          depth=4)


# ------------------------------------------------------------------ mutation checks

@pytest.mark.parametrize("mutant", [ReadArbiterWrongMaster, ReadArbiterExtraBeat])
def test_read_arbiter_mutant_caught(mutant, tmp_path):
    refute(ReadRouting(mutant(CONFIG, 4)), mutant.__name__, tmp_path, mode="bmc",
           depth=READ_DEPTH)


def test_read_arbiter_starvation_caught(tmp_path):
    refute(ReadLiveness(ReadArbiterStarves(CONFIG, 4), LIVENESS_BOUND), "rd_starves", tmp_path,
           mode="bmc", depth=LIVENESS_BOUND + 2)


@pytest.mark.parametrize("mutant,n", [(WriteArbiterEarlyRequest, 1),
                                      (WriteArbiterEarlyRelease, 2),
                                      (WriteArbiterWrongClientData, 2)])
def test_write_arbiter_mutant_caught(mutant, n, tmp_path):
    refute(WriteOrder(mutant(CONFIG, n)), mutant.__name__, tmp_path, mode="bmc", depth=10)
