"""Formal checks of the AXI shell's bridges (boards/axil_csr.py, boards/axi_dram.py).

:class:`~vtakit.boards.shell.VTAShell` connects its ``s_axil`` port straight to
:class:`AxiLiteToCsr` and its ``m_axi`` port straight to :class:`DramToAxi4`
(``wiring.connect``, no logic between), so the AXI rules of the shell's ports are the
bridges' rules, checked here on each bridge (the whole VTA behind them is too large
for these solvers).

* AXI4-Lite subordinate (k-induction, every reachable state): B and R held until
  ready with a stable payload; exactly one response per accepted write and per
  accepted read; an access outside the 256-byte CSR window, or a write with a partial
  strobe, answers SLVERR and has no effect (no CSR write, read data 0); an in-window
  access answers OKAY, writes the CSR at the address with the data, returns the CSR
  read data of the address.
* AXI4 manager (BMC): AW and W held until ready, AR, AW, W payloads stable (ARVALID held
  until ARREADY too, since the bridge's fix); every
  burst INCR of the bus size, at most 256 beats, never across a 4 KiB boundary; a
  DRAM request is cut into bursts that cover exactly its addresses, in order; each
  write burst has exactly ``awlen + 1`` W beats with WLAST on the last; a read address
  is first offered only when every written burst has its response; ``write_pending``
  while any write burst has no response. Covers: a request split at a 4 KiB
  boundary, a burst of 256 beats.
"""

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cover, Signal
from amaranth.utils import exact_log2

from vtakit.boards.axi import AXI4_BOUNDARY, AXI4_MAX_BEATS, BURST_INCR, RESP_OKAY, RESP_SLVERR
from vtakit.boards.axi_dram import DramToAxi4
from vtakit.boards.axil_csr import CSR_WINDOW_BITS, AxiLiteToCsr
from vtakit.hw.config import load_config
from vtakit.hw.formal import Spec

from formal_util import free_stream_source, prove, refute

pytestmark = pytest.mark.formal

CONFIG = load_config("tiny")


def channel(m, bus, prefix, payload, *, assume, name=None, hold_valid=True):
    """AXI handshake rule of channel ``prefix``: once ``xvalid``, ``xvalid`` and the
    payload signals hold until ``xready`` (without ``hold_valid``: the payload holds
    while valid stays high)."""
    valid, ready = getattr(bus, f"{prefix}valid"), getattr(bus, f"{prefix}ready")
    prop = Assume if assume else Assert
    waiting = Signal(name=f"{name or prefix}_waiting")
    m.d.sync += waiting.eq(valid & ~ready)
    if hold_valid:
        with m.If(waiting):
            m.d.comb += prop(valid)
    for field in payload:
        sig = getattr(bus, field)
        last = Signal.like(sig, name=f"{field}_last")
        m.d.sync += last.eq(sig)
        with m.If(waiting & valid):
            m.d.comb += prop(sig == last)


def free(m, bus, names):
    for n in names:
        sig = getattr(bus, n)
        m.d.comb += sig.eq(AnySeq(len(sig)))


class AxiLiteContract(Spec):
    def __init__(self, dut):
        super().__init__()
        self.dut = dut

    def properties(self, m, platform):
        m.submodules.dut = dut = self.dut
        bus, csr = dut.axil, dut.csr
        free(m, bus, ["awaddr", "awprot", "awvalid", "wdata", "wstrb", "wvalid", "bready",
                      "araddr", "arprot", "arvalid", "rready"])
        m.d.comb += csr.r_data.eq(AnySeq(32))
        # The host obeys the handshake rules; the subordinate must too.
        channel(m, bus, "aw", ["awaddr", "awprot"], assume=True)
        channel(m, bus, "w", ["wdata", "wstrb"], assume=True)
        channel(m, bus, "ar", ["araddr", "arprot"], assume=True)
        channel(m, bus, "b", ["bresp"], assume=False)
        channel(m, bus, "r", ["rdata", "rresp"], assume=False)

        aw = bus.awvalid & bus.awready
        w = bus.wvalid & bus.wready
        b = bus.bvalid & bus.bready
        ar = bus.arvalid & bus.arready
        r = bus.rvalid & bus.rready
        in_window = bus.awaddr[CSR_WINDOW_BITS:] == 0
        ok = in_window & (bus.wstrb == 0b1111)
        # One response per write: AW and W taken together, then one B.
        writes, reads = Signal(2), Signal(2)
        m.d.sync += [writes.eq(writes + aw - b), reads.eq(reads + ar - r)]
        m.d.comb += [Assert(aw == w), Assert(writes == bus.bvalid), Assert(reads == bus.rvalid)]
        expect_bresp, expect_rresp, expect_rdata = Signal(2), Signal(2), Signal(32)
        with m.If(aw):
            m.d.sync += expect_bresp.eq(RESP_SLVERR)
            with m.If(ok):
                m.d.sync += expect_bresp.eq(RESP_OKAY)
                m.d.comb += [Assert(csr.w_en), Assert(csr.addr == bus.awaddr[:CSR_WINDOW_BITS]),
                             Assert(csr.w_data == bus.wdata)]
        with m.If(~aw | ~ok):
            m.d.comb += Assert(~csr.w_en)       # an out-of-window write has no effect
        with m.If(ar):
            with m.If(bus.araddr[CSR_WINDOW_BITS:] == 0):
                m.d.comb += Assert(csr.addr == bus.araddr[:CSR_WINDOW_BITS])
                m.d.sync += [expect_rresp.eq(RESP_OKAY), expect_rdata.eq(csr.r_data)]
            with m.Else():
                m.d.sync += [expect_rresp.eq(RESP_SLVERR), expect_rdata.eq(0)]
        with m.If(bus.bvalid):
            m.d.comb += Assert(bus.bresp == expect_bresp)
        with m.If(bus.rvalid):
            m.d.comb += [Assert(bus.rresp == expect_rresp), Assert(bus.rdata == expect_rdata)]
        m.d.comb += [Cover(bus.bvalid & (bus.bresp == RESP_SLVERR)),
                     Cover(bus.rvalid & (bus.rresp == RESP_SLVERR)),
                     Cover(aw & bus.arvalid & ~bus.arready)]   # a read waits for a write


class AxiManagerContract(Spec):
    """The AXI4 manager rules of :class:`DramToAxi4`; ``ar_held=False`` leaves out "ARVALID
    held until ARREADY" (the mutants that break only other rules). The bridge once dropped
    ARVALID when a write's last beat went out while a read address waited: this proof
    found it (a counterexample in 4 cycles)."""

    def __init__(self, dut, *, ar_held=True):
        super().__init__()
        self.dut, self.ar_held = dut, ar_held

    def properties(self, m, platform):
        m.submodules.dut = dut = self.dut
        axi, rd, wr = dut.axi, dut.dram_rd, dut.dram_wr
        nb = CONFIG.bus_bytes
        log_nb = exact_log2(nb)
        # The VTA side: aligned requests of >= 1 beats that stay in the 32-bit space.
        for port in (rd, wr):
            free_stream_source(m, port.req)
            p = port.req.payload
            m.d.comb += [Assume(p.beats != 0), Assume(p.addr[:log_nb] == 0),
                         Assume((p.addr >> log_nb) + p.beats <= (1 << (32 - log_nb)))]
        free_stream_source(m, wr.data)
        m.d.comb += [rd.data.ready.eq(AnySeq(1)), dut.clear_errors.eq(AnySeq(1))]
        # The subordinate: free readiness, responses only for what it was sent.
        free(m, axi, ["awready", "wready", "arready", "bvalid", "bresp", "bid", "rvalid",
                      "rdata", "rresp", "rid", "rlast"])
        channel(m, axi, "b", ["bresp", "bid"], assume=True)
        channel(m, axi, "r", ["rdata", "rresp", "rid", "rlast"], assume=True)
        aw = axi.awvalid & axi.awready
        wbeat = axi.wvalid & axi.wready
        b = axi.bvalid & axi.bready
        ar = axi.arvalid & axi.arready
        r = axi.rvalid & axi.rready
        unanswered, r_owed = Signal(9), Signal(24)   # last W beat sent, no B yet; R beats owed
        m.d.sync += [unanswered.eq(unanswered + (wbeat & axi.wlast) - b),
                     r_owed.eq(r_owed + (ar * (axi.arlen + 1)) - r)]
        m.d.comb += [Assume(~axi.bvalid | (unanswered != 0)), Assume(~axi.rvalid | (r_owed != 0))]

        # The manager obeys the handshake rules.
        addr_fields = ["addr", "len", "size", "burst", "id", "cache", "prot", "lock"]
        channel(m, axi, "ar", [f"ar{f}" for f in addr_fields], assume=False,
                hold_valid=self.ar_held)
        channel(m, axi, "aw", [f"aw{f}" for f in addr_fields], assume=False)
        channel(m, axi, "w", ["wdata", "wstrb", "wlast"], assume=False)

        for ch, port in (("ar", rd), ("aw", wr)):
            valid = getattr(axi, f"{ch}valid")
            addr, length = getattr(axi, f"{ch}addr"), getattr(axi, f"{ch}len")
            beats = length + 1
            with m.If(valid):
                m.d.comb += [
                    Assert(getattr(axi, f"{ch}burst") == BURST_INCR),
                    Assert(getattr(axi, f"{ch}size") == log_nb),
                    Assert(beats <= AXI4_MAX_BEATS),
                    Assert(addr[:12] + (beats << log_nb) <= AXI4_BOUNDARY),   # no 4 KiB crossing
                ]
            # The bursts of a request cover exactly its addresses, in order.
            exp_addr, exp_left = Signal(32, name=f"{ch}_exp_addr"), Signal(17, name=f"{ch}_exp_left")
            fire = valid & getattr(axi, f"{ch}ready")
            with m.If(port.req.valid & port.req.ready):
                m.d.comb += Assert(exp_left == 0)
                m.d.sync += [exp_addr.eq(port.req.payload.addr), exp_left.eq(port.req.payload.beats)]
            with m.If(valid):
                m.d.comb += [Assert(exp_left != 0), Assert(addr == exp_addr),
                             Assert(beats <= exp_left)]
            with m.If(fire):
                m.d.sync += [exp_addr.eq(exp_addr + (beats << log_nb)), exp_left.eq(exp_left - beats)]
            setattr(self, f"{ch}_left", exp_left)
            m.d.comb += Cover(fire & (addr[:12] + (beats << log_nb) == AXI4_BOUNDARY)
                              & (beats < exp_left) & (beats < 4))
        m.d.comb += Cover(ar & (axi.arlen == AXI4_MAX_BEATS - 1))

        # W: exactly awlen + 1 beats per burst after its AW, WLAST on the last, the data
        # of the VTA's beats.
        w_left = Signal(9)
        with m.If(aw):
            m.d.comb += Assert(w_left == 0)
            m.d.sync += w_left.eq(axi.awlen + 1)
        with m.If(axi.wvalid):
            m.d.comb += [Assert(w_left != 0), Assert(axi.wlast == (w_left == 1)),
                         Assert(axi.wdata == wr.data.payload), Assert(axi.wstrb == (1 << nb) - 1)]
        with m.If(wr.data.valid & wr.data.ready):
            m.d.comb += Assert(wbeat)
        with m.If(wbeat):
            m.d.sync += w_left.eq(w_left - 1)
        # A read address is first offered only when every written burst is answered (a
        # read after a write sees it); pending while any burst is unanswered.
        ar_again = Signal()
        m.d.sync += ar_again.eq(axi.arvalid & ~axi.arready)
        with m.If(axi.arvalid & ~ar_again):
            m.d.comb += Assert(unanswered == 0)
        with m.If(unanswered != 0):
            m.d.comb += Assert(dut.write_pending)


# ---------------------------------------------------------------- mutants (known bugs)

class CsrAcceptsOutOfWindow(AxiLiteToCsr):
    """Bug: writes outside the CSR window are answered OKAY (and alias into it)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        bus = self.axil
        with m.If(bus.awvalid & bus.wvalid & ~bus.bvalid):
            m.d.comb += self.csr.w_en.eq(bus.wstrb == 0b1111)
            m.d.sync += bus.bresp.eq(RESP_OKAY)
        return m


class CsrDropsResponse(AxiLiteToCsr):
    """Bug: the read response is withdrawn after one cycle even if not taken."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.axil.rvalid):
            m.d.sync += self.axil.rvalid.eq(0)
        return m


class BridgeCrosses4K(DramToAxi4):
    """Bug: bursts are capped at 256 beats but not cut at 4 KiB boundaries."""

    def _burst(self, m, addr, left, name):
        beats = Signal(range(AXI4_MAX_BEATS + 1), name=f"{name}_beats")
        m.d.comb += beats.eq(left)
        with m.If(left > AXI4_MAX_BEATS):
            m.d.comb += beats.eq(AXI4_MAX_BEATS)
        return beats


class BridgeNoReadBarrier(DramToAxi4):
    """Bug: reads do not wait for the responses of written bursts."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.axi.arvalid.eq(~self.dram_rd.req.ready)   # rd_busy, barrier removed
        return m


# ------------------------------------------------------------------------- proofs

AXI_DEPTH = 10


def test_axil_contract_proved(tmp_path):
    prove(AxiLiteContract(AxiLiteToCsr()), "axil", tmp_path, mode="prove", depth=3)


def test_axil_cover(tmp_path):
    prove(AxiLiteContract(AxiLiteToCsr()), "axil_cover", tmp_path, mode="cover", depth=4)


@pytest.mark.parametrize("depth", [8, pytest.param(AXI_DEPTH, marks=pytest.mark.slow)])
def test_axi_manager_bmc(depth, tmp_path):
    prove(AxiManagerContract(DramToAxi4(CONFIG)), f"axi{depth}", tmp_path,
          mode="bmc", depth=depth)


def test_axi_manager_cover(tmp_path):
    prove(AxiManagerContract(DramToAxi4(CONFIG)), "axi_cover", tmp_path,
          mode="cover", depth=AXI_DEPTH)


# ------------------------------------------------------------------ mutation checks

@pytest.mark.parametrize("mutant", [CsrAcceptsOutOfWindow, CsrDropsResponse])
def test_axil_mutant_caught(mutant, tmp_path):
    refute(AxiLiteContract(mutant()), mutant.__name__, tmp_path, mode="prove", depth=3)


@pytest.mark.parametrize("mutant", [BridgeCrosses4K, BridgeNoReadBarrier])
def test_axi_manager_mutant_caught(mutant, tmp_path):
    refute(AxiManagerContract(mutant(CONFIG), ar_held=False), mutant.__name__, tmp_path,
           mode="bmc", depth=AXI_DEPTH)
