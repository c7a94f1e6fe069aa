"""A self-contained board design: the VTA, on-chip DRAM and a UART host link.

The ULX3S's SDRAM would need a controller; a small config's programs fit in
block RAM, so :class:`OnChipDram` serves the VTA's DRAM ports from on-chip
memory and :class:`HostBridge` lets a host reach the registers and that memory
over the board's UART (8N1). Protocol (every number little-endian; ``A`` a
32-bit byte address, ``D`` a 32-bit word):

======  ==========  =================================================
byte    then        effect / reply
======  ==========  =================================================
0x01    A, D        write register A (``vtakit.hw.interfaces.Reg``); reply 0x01
0x02    A           read register A; reply D
0x03    A, D        write DRAM word at A (4-aligned); reply 0x03
0x04    A           read DRAM word at A; reply D
======  ==========  =================================================

The host must not access DRAM while the VTA runs (the bridge and the VTA
share the memory's ports; the bridge wins).
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..hw.config import VTAConfig
from ..hw.interfaces import CsrSignature, dma_read_signature, dma_write_signature
from .uart import UartRx, UartTx

__all__ = ["OnChipDram", "HostBridge", "BoardTop", "CMD_REG_WRITE", "CMD_REG_READ",
           "CMD_DRAM_WRITE", "CMD_DRAM_READ"]

CMD_REG_WRITE, CMD_REG_READ, CMD_DRAM_WRITE, CMD_DRAM_READ = 0x01, 0x02, 0x03, 0x04


class OnChipDram(wiring.Component):
    """``size`` bytes of block RAM behind the VTA's DRAM ports, plus a 32-bit host port.

    Addresses wrap modulo ``size``. The VTA side follows the DRAM protocol of
    :mod:`vtakit.hw.interfaces` (one beat per cycle once a burst started).

    Attributes
    ----------
    dram_rd, dram_wr : In(dma_read_signature / dma_write_signature)
    host_addr, host_w_data : In(32); host_w_en, host_r_en : In(1)
    host_r_data : Out(32)
        The word read by ``host_r_en`` one cycle earlier.
    """

    def __init__(self, config: VTAConfig, size: int):
        if size & (size - 1) or size < config.bus_bytes:
            raise ValueError(f"on-chip DRAM size {size}: need a power of two >= the bus width")
        self.config, self.size = config, size
        super().__init__({
            "dram_rd": In(dma_read_signature(config)), "dram_wr": In(dma_write_signature(config)),
            "host_addr": In(32), "host_w_data": In(32), "host_w_en": In(1), "host_r_en": In(1),
            "host_r_data": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        nb = self.config.bus_bytes
        log_nb, words = exact_log2(nb), self.size // nb
        m.submodules.mem = mem = memory.Memory(shape=8 * nb, depth=words, init=[])
        rp, wp = mem.read_port(), mem.write_port(granularity=8)
        rd, wr = self.dram_rd, self.dram_wr
        abits = exact_log2(words)

        # VTA reads: one word per cycle while the consumer keeps up.
        r_addr, r_left, r_valid = Signal(abits), Signal(rd.req.payload.beats.shape()), Signal()
        advance = (r_left != 0) & (~r_valid | rd.data.ready)
        m.d.comb += [rd.req.ready.eq(r_left == 0), rd.data.valid.eq(r_valid),
                     rd.data.payload.eq(rp.data)]
        with m.If(rd.req.valid & rd.req.ready):
            m.d.sync += [r_addr.eq(rd.req.payload.addr[log_nb:]), r_left.eq(rd.req.payload.beats)]
        with m.If(advance):
            m.d.sync += [r_valid.eq(1), r_addr.eq(r_addr + 1), r_left.eq(r_left - 1)]
        with m.Elif(rd.data.ready):
            m.d.sync += r_valid.eq(0)

        # VTA writes.
        w_addr, w_left = Signal(abits), Signal(wr.req.payload.beats.shape())
        m.d.comb += [wr.req.ready.eq(w_left == 0), wr.data.ready.eq(w_left != 0)]
        with m.If(wr.req.valid & wr.req.ready):
            m.d.sync += [w_addr.eq(wr.req.payload.addr[log_nb:]), w_left.eq(wr.req.payload.beats)]
        with m.If(wr.data.valid & wr.data.ready):
            m.d.sync += [w_addr.eq(w_addr + 1), w_left.eq(w_left - 1)]

        # Port sharing: the host wins (it only accesses DRAM while the VTA is idle).
        lane = Signal(range(max(2, nb // 4)))
        host_word = self.host_addr[log_nb:log_nb + abits]
        m.d.comb += lane.eq(self.host_addr[2:log_nb]) if nb > 4 else lane.eq(0)
        with m.If(self.host_w_en):
            m.d.comb += [wp.addr.eq(host_word), wp.data.eq(self.host_w_data.replicate(nb // 4)),
                         wp.en.eq(Const(0b1111, 4) << (lane * 4))]
        with m.Else():
            m.d.comb += [wp.addr.eq(w_addr), wp.data.eq(wr.data.payload),
                         wp.en.eq((wr.data.valid & wr.data.ready).replicate(nb))]
        with m.If(self.host_r_en):
            m.d.comb += [rp.addr.eq(host_word), rp.en.eq(1)]
        with m.Else():
            m.d.comb += [rp.addr.eq(r_addr), rp.en.eq(advance)]
        r_lane = Signal.like(lane)
        m.d.sync += r_lane.eq(lane)
        m.d.comb += self.host_r_data.eq(rp.data.word_select(r_lane, 32))
        return m


class HostBridge(wiring.Component):
    """The UART command protocol of this module, driving a CSR bus and a DRAM host port.

    Attributes
    ----------
    rx : In(1); tx : Out(1)
    csr : Out(CsrSignature)
    dram_addr, dram_w_data : Out(32); dram_w_en, dram_r_en : Out(1); dram_r_data : In(32)
    """

    def __init__(self, divisor: int):
        self.divisor = divisor
        super().__init__({
            "rx": In(1), "tx": Out(1), "csr": Out(CsrSignature),
            "dram_addr": Out(32), "dram_w_data": Out(32), "dram_w_en": Out(1),
            "dram_r_en": Out(1), "dram_r_data": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.urx = urx = UartRx(self.divisor)
        m.submodules.utx = utx = UartTx(self.divisor)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx)]
        cmd, addr, data = Signal(8), Signal(32), Signal(32)
        count = Signal(range(9))
        reply, reply_left = Signal(32), Signal(range(5))
        m.d.comb += [self.csr.addr.eq(addr), self.csr.w_data.eq(data), self.dram_addr.eq(addr),
                     self.dram_w_data.eq(data), utx.data.payload.eq(reply[:8])]
        with m.FSM():
            with m.State("CMD"):
                m.d.comb += urx.data.ready.eq(1)
                with m.If(urx.data.valid):
                    m.d.sync += [cmd.eq(urx.data.payload), count.eq(0)]
                    with m.If((urx.data.payload >= CMD_REG_WRITE) & (urx.data.payload <= CMD_DRAM_READ)):
                        m.next = "ARGS"
            with m.State("ARGS"):
                m.d.comb += urx.data.ready.eq(1)
                writes = (cmd == CMD_REG_WRITE) | (cmd == CMD_DRAM_WRITE)
                with m.If(urx.data.valid):
                    m.d.sync += count.eq(count + 1)
                    with m.If(count < 4):
                        m.d.sync += addr.eq(Cat(addr[8:], urx.data.payload))
                    with m.Else():
                        m.d.sync += data.eq(Cat(data[8:], urx.data.payload))
                    with m.If(((count == 3) & ~writes) | (count == 7)):
                        m.next = "EXEC"
            with m.State("EXEC"):
                with m.Switch(cmd):
                    with m.Case(CMD_REG_WRITE):
                        m.d.comb += self.csr.w_en.eq(1)
                        m.d.sync += [reply.eq(CMD_REG_WRITE), reply_left.eq(1)]
                        m.next = "REPLY"
                    with m.Case(CMD_REG_READ):
                        m.d.sync += [reply.eq(self.csr.r_data), reply_left.eq(4)]
                        m.next = "REPLY"
                    with m.Case(CMD_DRAM_WRITE):
                        m.d.comb += self.dram_w_en.eq(1)
                        m.d.sync += [reply.eq(CMD_DRAM_WRITE), reply_left.eq(1)]
                        m.next = "REPLY"
                    with m.Case(CMD_DRAM_READ):
                        m.d.comb += self.dram_r_en.eq(1)
                        m.next = "DRAM_READ"
            with m.State("DRAM_READ"):   # the memory's read port answers one cycle later
                m.d.sync += [reply.eq(self.dram_r_data), reply_left.eq(4)]
                m.next = "REPLY"
            with m.State("REPLY"):
                m.d.comb += utx.data.valid.eq(1)
                with m.If(utx.data.ready):
                    m.d.sync += [reply.eq(reply >> 8), reply_left.eq(reply_left - 1)]
                    with m.If(reply_left == 1):
                        m.next = "CMD"
        return m


class BoardTop(wiring.Component):
    """VTA + :class:`OnChipDram` + :class:`HostBridge`; pins: ``uart_rx``, ``uart_tx``, ``leds``
    (LED 0 lit while the VTA reports done or error).

    Parameters
    ----------
    config : VTAConfig
    dram_size : int
        Bytes of on-chip DRAM (a power of two).
    clk_hz : int
        Clock frequency, for the UART divisor.
    baud : int
    """

    def __init__(self, config: VTAConfig, *, dram_size: int = 128 * 1024, clk_hz: int = 25_000_000,
                 baud: int = 115_200):
        from ..hw.top import VTA
        self.config = config
        self.vta = VTA(config)
        self.dram = OnChipDram(config, dram_size)
        self.bridge = HostBridge(round(clk_hz / baud))
        super().__init__({"uart_rx": In(1), "uart_tx": Out(1), "leds": Out(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.vta = vta = self.vta
        m.submodules.dram = dram = self.dram
        m.submodules.bridge = br = self.bridge
        wiring.connect(m, vta.dram_rd, dram.dram_rd)
        wiring.connect(m, vta.dram_wr, dram.dram_wr)
        wiring.connect(m, br.csr, vta.csr)
        m.d.comb += [
            br.rx.eq(self.uart_rx), self.uart_tx.eq(br.tx),
            dram.host_addr.eq(br.dram_addr), dram.host_w_data.eq(br.dram_w_data),
            dram.host_w_en.eq(br.dram_w_en), dram.host_r_en.eq(br.dram_r_en),
            br.dram_r_data.eq(dram.host_r_data),
            self.leds[0].eq(vta.irq),   # LED 0: done or error
        ]
        return m
