"""An AXI4-Lite subordinate in front of the VTA's control/status register bus.

The CSR bus (:data:`vtakit.hw.interfaces.CsrSignature`) reads combinationally
and writes on a clock edge, one access per cycle. A write is taken when both
its address and its data are offered (the two channels are accepted in the
same cycle, which AXI4-Lite allows), a read when no write is taken in that
cycle. Writes with a partial ``wstrb`` and accesses outside the 256-byte
register window are answered SLVERR and have no effect (registers are 32-bit
words; a host driver always writes whole words).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..hw.interfaces import CsrSignature
from .axi import RESP_OKAY, RESP_SLVERR, axi4_lite_signature

__all__ = ["AxiLiteToCsr", "CSR_WINDOW_BITS"]

#: The CSR bus addresses 256 bytes.
CSR_WINDOW_BITS = 8


class AxiLiteToCsr(wiring.Component):
    """AXI4-Lite subordinate driving a CSR bus.

    Parameters
    ----------
    addr_width : int
        Width of ``awaddr``/``araddr`` (at least 8; 12 gives the 4 KiB window
        Vivado's address editor expects).

    Attributes
    ----------
    axil : In(axi4_lite_signature(addr_width=addr_width))
    csr : Out(CsrSignature)
    """

    def __init__(self, *, addr_width: int = 12):
        if addr_width < CSR_WINDOW_BITS:
            raise ValueError(f"addr_width {addr_width}: the CSR window needs at least "
                             f"{CSR_WINDOW_BITS} address bits")
        super().__init__({
            "axil": In(axi4_lite_signature(addr_width=addr_width)),
            "csr": Out(CsrSignature),
        })

    def elaborate(self, platform):
        m = Module()
        bus, csr = self.axil, self.csr

        def in_window(addr):
            return (addr[CSR_WINDOW_BITS:] == 0) if len(addr) > CSR_WINDOW_BITS else 1

        take_write = Signal()
        take_read = Signal()
        m.d.comb += [
            take_write.eq(bus.awvalid & bus.wvalid & ~bus.bvalid),
            take_read.eq(bus.arvalid & ~bus.rvalid & ~take_write),
            bus.awready.eq(take_write), bus.wready.eq(take_write), bus.arready.eq(take_read),
            csr.addr.eq(bus.araddr[:CSR_WINDOW_BITS]),
            csr.w_data.eq(bus.wdata),
        ]
        write_ok = in_window(bus.awaddr) & (bus.wstrb == 0b1111)
        with m.If(take_write):
            m.d.comb += [csr.addr.eq(bus.awaddr[:CSR_WINDOW_BITS]), csr.w_en.eq(write_ok)]
            m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(RESP_OKAY)]
            with m.If(~write_ok):
                m.d.sync += bus.bresp.eq(RESP_SLVERR)
        with m.Elif(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        with m.If(take_read):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(csr.r_data), bus.rresp.eq(RESP_OKAY)]
            with m.If(~in_window(bus.araddr)):
                m.d.sync += [bus.rdata.eq(0), bus.rresp.eq(RESP_SLVERR)]
        with m.Elif(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m
