"""The VTA's DRAM ports as one AXI4 manager.

The VTA's DRAM protocol (:mod:`vtakit.hw.interfaces`) asks for bursts of any
number of beats at any bus-aligned address; AXI4 allows at most 256 beats per
burst and no burst across a 4 KiB boundary, so every request is cut into legal
bursts here (data beats pass through unchanged, in order: one ID, so the
subordinate returns read bursts in the order they were issued).

Ordering: the VTA treats a write as complete once its last data beat is
accepted, and every later read must see it. AXI only guarantees that after the
write response, so reads are held back while a burst whose last beat was sent
still waits for its response (``write_pending`` tells the shell to hold
``done`` back too, so the host never reads DRAM before the data is there).
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..hw.config import VTAConfig
from ..hw.interfaces import DRAM_ADDR_BITS, dma_read_signature, dma_write_signature
from .axi import AXI4_BOUNDARY, AXI4_MAX_BEATS, BURST_INCR, axi4_signature

__all__ = ["DramToAxi4"]

#: ``AxCACHE`` = normal non-cacheable bufferable (what Xilinx's DMA engines issue).
CACHE_NORMAL = 0b0011
#: Bursts sent but not answered, at most (an 8-bit counter).
MAX_OUTSTANDING_WRITES = 255


class DramToAxi4(wiring.Component):
    """Bridge from the VTA's ``dram_rd``/``dram_wr`` masters to an AXI4 manager.

    Parameters
    ----------
    config : VTAConfig
        Gives the bus width (``data_width`` of the AXI port).
    id_width : int
        Width of the AXI ID signals (every burst uses ID 0).

    Attributes
    ----------
    dram_rd : In(dma_read_signature(config))
    dram_wr : In(dma_write_signature(config))
    axi : Out(axi4_signature(addr_width=32, data_width=config.bus_width, id_width=id_width))
    write_pending : Out(1)
        A write burst is being transferred or waits for its response.
    read_error, write_error : Out(1)
        Sticky: some R beat / B response carried SLVERR or DECERR.
    clear_errors : In(1)
        Clears both error flags.
    """

    def __init__(self, config: VTAConfig, *, id_width: int = 1):
        self.config = config
        super().__init__({
            "dram_rd": In(dma_read_signature(config)),
            "dram_wr": In(dma_write_signature(config)),
            "axi": Out(axi4_signature(addr_width=DRAM_ADDR_BITS, data_width=config.bus_width,
                                      id_width=id_width)),
            "write_pending": Out(1),
            "read_error": Out(1),
            "write_error": Out(1),
            "clear_errors": In(1),
        })

    def _burst(self, m, addr, left, name):
        """Beats of the next legal burst from ``addr`` with ``left`` beats to go."""
        log_nb = exact_log2(self.config.bus_bytes)
        to_boundary = Signal(range(AXI4_BOUNDARY // self.config.bus_bytes + 1),
                             name=f"{name}_to_4k")
        m.d.comb += to_boundary.eq((Const(AXI4_BOUNDARY, 13) - addr[:12]) >> log_nb)
        capped = Signal(range(AXI4_MAX_BEATS + 1), name=f"{name}_capped")
        m.d.comb += capped.eq(Mux(left > AXI4_MAX_BEATS, AXI4_MAX_BEATS, left))
        beats = Signal(range(AXI4_MAX_BEATS + 1), name=f"{name}_beats")
        m.d.comb += beats.eq(Mux(to_boundary < capped, to_boundary, capped))
        return beats

    def elaborate(self, platform):
        m = Module()
        axi, rd, wr = self.axi, self.dram_rd, self.dram_wr
        log_nb = exact_log2(self.config.bus_bytes)

        # Write responses not yet received for bursts whose last beat was sent: reads wait.
        outstanding = Signal(range(MAX_OUTSTANDING_WRITES + 1))
        unacked = Signal(range(MAX_OUTSTANDING_WRITES + 1))
        aw_fire = axi.awvalid & axi.awready
        w_last_fire = axi.wvalid & axi.wready & axi.wlast
        b_fire = axi.bvalid & axi.bready
        m.d.sync += [outstanding.eq(outstanding + aw_fire - b_fire),
                     unacked.eq(unacked + w_last_fire - b_fire)]

        # ---- reads: cut each request into legal bursts; data passes through.
        rd_addr, rd_left, rd_busy = Signal(DRAM_ADDR_BITS), Signal(rd.req.payload.beats.shape()), Signal()
        rd_beats = self._burst(m, rd_addr, rd_left, "rd")
        # The barrier applies when an address is first offered: once ARVALID is up it stays
        # up until ARREADY (AXI4 A3.2.1), even if a write's last beat goes out meanwhile.
        ar_offered = Signal()
        m.d.sync += ar_offered.eq(axi.arvalid & ~axi.arready)
        m.d.comb += [
            rd.req.ready.eq(~rd_busy),
            axi.arvalid.eq(rd_busy & ((unacked == 0) | ar_offered)),
            axi.araddr.eq(rd_addr), axi.arlen.eq(rd_beats - 1), axi.arsize.eq(log_nb),
            axi.arburst.eq(BURST_INCR), axi.arcache.eq(CACHE_NORMAL), axi.arid.eq(0),
            rd.data.valid.eq(axi.rvalid), rd.data.payload.eq(axi.rdata),
            axi.rready.eq(rd.data.ready),
        ]
        with m.If(rd.req.valid & rd.req.ready):
            m.d.sync += [rd_addr.eq(rd.req.payload.addr), rd_left.eq(rd.req.payload.beats),
                         rd_busy.eq(rd.req.payload.beats != 0)]
        with m.If(axi.arvalid & axi.arready):
            m.d.sync += [rd_addr.eq(rd_addr + (rd_beats << log_nb)), rd_left.eq(rd_left - rd_beats)]
            with m.If(rd_left == rd_beats):
                m.d.sync += rd_busy.eq(0)

        # ---- writes: each request as address + data bursts; the next request is taken
        # during the last burst's beats (request-ahead, :data:`~vtakit.hw.spec.WRITE_AHEAD`).
        wr_addr, wr_left = Signal(DRAM_ADDR_BITS), Signal(wr.req.payload.beats.shape())
        burst_left = Signal(range(AXI4_MAX_BEATS + 1))
        wr_beats = self._burst(m, wr_addr, wr_left, "wr")
        m.d.comb += [
            axi.awaddr.eq(wr_addr), axi.awlen.eq(wr_beats - 1), axi.awsize.eq(log_nb),
            axi.awburst.eq(BURST_INCR), axi.awcache.eq(CACHE_NORMAL), axi.awid.eq(0),
            axi.wstrb.eq(-1), axi.wdata.eq(wr.data.payload), axi.wlast.eq(burst_left == 1),
            axi.bready.eq(1),
        ]
        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += wr.req.ready.eq(1)
                with m.If(wr.req.valid & (wr.req.payload.beats != 0)):
                    m.d.sync += [wr_addr.eq(wr.req.payload.addr), wr_left.eq(wr.req.payload.beats)]
                    m.next = "ADDRESS"
            with m.State("ADDRESS"):
                m.d.comb += axi.awvalid.eq(outstanding != MAX_OUTSTANDING_WRITES)
                with m.If(aw_fire):
                    m.d.sync += [burst_left.eq(wr_beats), wr_left.eq(wr_left - wr_beats),
                                 wr_addr.eq(wr_addr + (wr_beats << log_nb))]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [axi.wvalid.eq(wr.data.valid), wr.data.ready.eq(axi.wready)]
                # Request-ahead: once the request's last burst has its address, the next
                # request is taken while the beats stream (its address follows the last one).
                m.d.comb += wr.req.ready.eq(wr_left == 0)
                ahead = wr.req.valid & (wr_left == 0) & (wr.req.payload.beats != 0)
                with m.If(ahead):
                    m.d.sync += [wr_addr.eq(wr.req.payload.addr), wr_left.eq(wr.req.payload.beats)]
                with m.If(axi.wvalid & axi.wready):
                    m.d.sync += burst_left.eq(burst_left - 1)
                    with m.If(axi.wlast):
                        with m.If((wr_left == 0) & ~ahead):
                            m.next = "IDLE"
                        with m.Else():
                            m.next = "ADDRESS"
        m.d.comb += self.write_pending.eq(~fsm.ongoing("IDLE") | (outstanding != 0))

        with m.If(axi.bvalid & axi.bready & axi.bresp[1]):
            m.d.sync += self.write_error.eq(1)
        with m.If(axi.rvalid & axi.rready & axi.rresp[1]):
            m.d.sync += self.read_error.eq(1)
        with m.If(self.clear_errors):
            m.d.sync += [self.write_error.eq(0), self.read_error.eq(0)]
        return m
