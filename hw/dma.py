"""DRAM arbiters: several DMA clients onto one read master and one write master.

Reads are split transactions: the read arbiter grants one request per cycle
(to a pending request of a priority client, else round robin among the clients
with a pending request; a granted request the master has not accepted yet keeps
its grant), remembers the client
and beat count of every outstanding request in a small FIFO, and routes the
returning beats, which come back in request order, to that client. So several
requests of several clients can be in flight and a stream of bursts runs at
one beat per cycle.

Every read client must accept the beats of its requests without waiting on
anything but itself (all VTA clients do: fetch only requests what its buffer
can hold, the load engines always make progress), otherwise one stalled client
would block the shared return channel.

Writes are a request followed by its data beats; the next request may be
issued while the beats of earlier ones stream (request-ahead, up to
:data:`~vtakit.hw.spec.WRITE_AHEAD` of them), so the write arbiter remembers the
client and beat count of every request whose beats are not all sent, in order,
and takes the data beats from the client at the head.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .interfaces import DMA_BEATS_BITS, dma_read_signature, dma_write_signature
from .spec import WRITE_AHEAD

__all__ = ["DmaReadArbiter", "DmaWriteArbiter"]


def _round_robin(m, valids, last, grant, any_valid, req, priority=()):
    """``grant`` = the first valid client after ``last`` (combinational), except while
    the request ``req`` offered in the previous cycle waits (valid, not ready): then the
    same client, so the request stays stable until accepted (the ``lib.stream`` rule; a
    client that became valid meanwhile waits for the next round). The clients of
    ``priority`` go first, each group in the round's order."""
    n = len(valids)
    m.d.comb += any_valid.eq(Cat(*valids).any())
    first = Signal.like(grant)
    with m.Switch(last):
        for l in range(n):
            with m.Case(l):
                order = [(l + k) % n for k in range(1, n + 1)]
                order = ([c for c in order if c in priority]
                         + [c for c in order if c not in priority])
                with m.If(valids[order[0]]):
                    m.d.comb += first.eq(order[0])
                for c in order[1:]:
                    with m.Elif(valids[c]):
                        m.d.comb += first.eq(c)
    waiting = Signal()
    held = Signal.like(grant)
    m.d.sync += [waiting.eq(req.valid & ~req.ready), held.eq(grant)]
    m.d.comb += grant.eq(Mux(waiting, held, first))


class DmaReadArbiter(wiring.Component):
    """N read clients onto one read master.

    Parameters
    ----------
    config : VTAConfig
    n_clients : int
    max_outstanding : int
        Requests in flight at once (the depth of the routing FIFO).
    max_beats : int or None
        Read-ahead: a request is issued only while at most this many requested beats
        have not returned yet (None: no limit but ``max_outstanding``). Beats return in
        request order, so a request waits for every beat requested before it: without
        the limit, one client's LOAD (the compute module's micro-ops or bias) waits
        behind up to ``max_outstanding`` bursts another client queued (the load
        module's, up to 256 beats each); with it, behind at most ``max_beats`` plus
        one burst, while the next burst still starts as the previous one drains, so
        a DRAM latency of up to ``max_beats`` cycles stays hidden.
    priority : tuple of int
        Clients whose pending requests are granted before the others' (round robin
        within each group). The top level gives it to the compute module's
        loaders: a LOAD there stalls every GEMM and ALU behind it, while the load
        module's bursts run ahead of the compute module anyway (the ``gemm_tiled``
        fixture on Verilator: 23,771 cycles instead of 25,304). Another client waits
        only while a priority client's requests are taken; those never come back to
        back for long in VTA (the compute module waits for each LOAD to finish; with
        ``UOP_STREAM`` a LOAD UOP streams beside the GEMMs after it, and taking the
        compute module's loaders out of the group then changed nothing on Verilator:
        image classification 57,998 cycles either way on ``default+requant2+uopstream``).

    Attributes
    ----------
    clients : array of In(dma_read_signature(config))
    master : Out(dma_read_signature(config))
    busy : Out(1)
        High while any request is pending or in flight.
    """

    def __init__(self, config: VTAConfig, n_clients: int, *, max_outstanding: int = 8,
                 max_beats: int | None = None, priority: tuple = ()):
        self._n = n_clients
        self._max = max_outstanding
        self._max_beats = max_beats
        self._priority = tuple(priority)
        super().__init__({
            "clients": In(dma_read_signature(config)).array(n_clients),
            "master": Out(dma_read_signature(config)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._n
        cbits = max(1, (n - 1).bit_length())
        # Unbuffered FIFO: an entry written on a request is readable the next cycle,
        # in time for the first beat of a one-cycle-latency DRAM.
        m.submodules.tags = tags = fifo.SyncFIFO(width=cbits + DMA_BEATS_BITS, depth=self._max)

        last = Signal(cbits, init=n - 1)
        grant = Signal(cbits)
        any_req = Signal()
        req = self.master.req
        _round_robin(m, [c.req.valid for c in self.clients], last, grant, any_req, req,
                     self._priority)

        room = Signal(init=1)
        m.d.comb += [req.valid.eq(any_req & tags.w_rdy & room)]
        with m.Switch(grant):
            for i, c in enumerate(self.clients):
                with m.Case(i):
                    m.d.comb += [req.payload.eq(c.req.payload),
                                 c.req.ready.eq(req.ready & tags.w_rdy & room)]
        m.d.comb += [tags.w_en.eq(req.valid & req.ready),
                     tags.w_data.eq(Cat(grant, req.payload.beats))]
        with m.If(req.valid & req.ready):
            m.d.sync += last.eq(grant)

        # Return channel: beats go to the client at the head of the tag FIFO.
        head_client = tags.r_data[:cbits]
        head_beats = tags.r_data[cbits:]
        count = Signal(DMA_BEATS_BITS)
        data = self.master.data
        for i, c in enumerate(self.clients):
            mine = tags.r_rdy & (head_client == i)
            m.d.comb += [c.data.payload.eq(data.payload), c.data.valid.eq(data.valid & mine)]
            with m.If(mine):
                m.d.comb += data.ready.eq(c.data.ready)
        beat = data.valid & data.ready
        with m.If(beat):
            m.d.sync += count.eq(count + 1)
            with m.If(count == head_beats - 1):
                m.d.sync += count.eq(0)
                m.d.comb += tags.r_en.eq(1)
        m.d.comb += self.busy.eq(tags.r_rdy | any_req)
        if self._max_beats is not None:     # beats requested and not yet returned
            inflight = Signal(range(self._max * (1 << DMA_BEATS_BITS) + 1))
            issued = Mux(req.valid & req.ready, req.payload.beats, 0)
            m.d.sync += inflight.eq(inflight + issued - beat)
            m.d.comb += room.eq(inflight <= self._max_beats)
        return m


class DmaWriteArbiter(wiring.Component):
    """M write clients onto one write master, with request-ahead.

    A request is granted (round robin) while fewer than ``1 + WRITE_AHEAD`` granted
    requests have beats left to send; the data beats come from the client of the oldest
    one, until its last beat (then the one granted ahead of it, if any, is the oldest). So a client's next burst is requested while its current
    one's beats stream, and the beats of consecutive bursts follow each other without a
    gap when the DRAM port accepts the requests ahead.

    Attributes
    ----------
    clients : array of In(dma_write_signature(config))
    master : Out(dma_write_signature(config))
    busy : Out(1)
        High while a request is pending or beats of a granted request are to be written.
    """

    def __init__(self, config: VTAConfig, n_clients: int):
        self._n = n_clients
        super().__init__({
            "clients": In(dma_write_signature(config)).array(n_clients),
            "master": Out(dma_write_signature(config)),
            "busy": Out(1),
        })
        # The oldest granted request with beats to send (``left`` of them, 0: none) and
        # its client; one granted ahead of it (``ahead``), which moves up at its last beat
        # (built here so that the formal checks can relate them to their own).
        self._queue = dict(left=Signal(DMA_BEATS_BITS), owner=Signal(range(n_clients)),
                           ahead=Signal(), a_beats=Signal(DMA_BEATS_BITS),
                           a_owner=Signal(range(n_clients)))

    def elaborate(self, platform):
        m = Module()
        n = self._n
        assert WRITE_AHEAD == 1     # the oldest granted request and one ahead of it
        last = Signal(range(n), init=n - 1)
        grant = Signal(range(n))
        any_req = Signal()
        req, data = self.master.req, self.master.data
        _round_robin(m, [c.req.valid for c in self.clients], last, grant, any_req, req)
        q = self._queue
        left, owner, ahead, a_beats, a_owner = (q[k] for k in ("left", "owner", "ahead",
                                                                "a_beats", "a_owner"))
        m.d.comb += req.valid.eq(any_req & ~ahead)
        for i, c in enumerate(self.clients):
            with m.If(grant == i):
                m.d.comb += [req.payload.eq(c.req.payload), c.req.ready.eq(req.ready & ~ahead)]
            with m.If((left != 0) & (owner == i)):
                m.d.comb += [data.payload.eq(c.data.payload), data.valid.eq(c.data.valid),
                             c.data.ready.eq(data.ready)]
        fire = req.valid & req.ready
        beat = data.valid & data.ready
        with m.If(fire):
            m.d.sync += last.eq(grant)
        with m.If(beat):
            m.d.sync += left.eq(left - 1)
        with m.If((left == 0) | (beat & (left == 1))):      # the oldest one ends here
            with m.If(ahead):
                m.d.sync += [left.eq(a_beats), owner.eq(a_owner), ahead.eq(0)]
            with m.Elif(fire):
                m.d.sync += [left.eq(req.payload.beats), owner.eq(grant)]
        with m.Elif(fire):
            m.d.sync += [ahead.eq(1), a_beats.eq(req.payload.beats), a_owner.eq(grant)]
        m.d.comb += self.busy.eq((left != 0) | any_req)
        return m
