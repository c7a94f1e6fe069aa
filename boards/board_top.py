"""A self-contained board design: the VTA, on-chip DRAM and a UART host link.

The ULX3S's SDRAM would need a controller; a small config's programs fit in
block RAM, so :class:`OnChipDram` serves the VTA's DRAM ports from on-chip
memory and :class:`HostBridge` lets a host reach the registers and that memory
over the board's UART (8N1), by the protocol of :mod:`vtakit.boards.link` (described in
``docs/reference/board-protocol.md``): bulk DRAM reads and writes with CRC-32, the
VTA's registers, identification words, and the bridge's own registers (the range of
DRAM the VTA wrote, a DMA request beyond the DRAM, the VTA's reset, zeroing the DRAM).

The host must not access DRAM while the VTA runs (the bridge and the VTA
share the memory's ports; the bridge wins).
"""

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..hw.config import VTAConfig
from ..hw.interfaces import CsrSignature, Reg, dma_read_signature, dma_write_signature
from ..hw.spec import WRITE_AHEAD
from .link import (BRIDGE_WORDS, CRC_INIT, CRC_POLY, CRC_RESIDUE, DEFAULT_BAUD,
                   IDLE_BYTE_TIMES, INFO_WORDS, MAX_WORDS, SYNC, BridgeReg, Control, Op, Space,
                   Status, info_words)
from .uart import UartRx, UartTx

__all__ = ["OnChipDram", "HostBridge", "BoardTop", "crc32_update", "SIM_CYCLES_PER_BIT",
           "board_verilog", "board_sources"]

#: Clock cycles per UART bit of a simulated board (``vtakit board-sim``): the fewest the
#: UART takes, so a simulated link moves bytes in few cycles.
SIM_CYCLES_PER_BIT = 4


def crc32_update(m, crc, byte):
    """The CRC-32 register (:mod:`vtakit.boards.link`) after one more byte: a signal of
    ``m``'s combinational domain (one per bit step, so the expression stays small)."""
    c = crc ^ byte
    for _ in range(8):
        step = Signal(32)
        m.d.comb += step.eq(Mux(c[0], (c >> 1) ^ CRC_POLY, c >> 1))
        c = step
    return c


class OnChipDram(wiring.Component):
    """``size`` bytes of block RAM behind the VTA's DRAM ports, plus a 32-bit host port.

    Addresses wrap modulo ``size``. The VTA side follows the DRAM protocol of
    :mod:`vtakit.hw.interfaces` (one beat per cycle once a burst started; one write
    request accepted ahead, :data:`~vtakit.hw.spec.WRITE_AHEAD`).

    Attributes
    ----------
    dram_rd, dram_wr : In(dma_read_signature / dma_write_signature)
    host_r_addr, host_w_addr, host_w_data : In(32); host_w_en, host_r_en : In(1)
    host_r_data : Out(32)
        The word read by ``host_r_en`` one cycle earlier.
    """

    def __init__(self, config: VTAConfig, size: int):
        if size & (size - 1) or size < config.bus_bytes:
            raise ValueError(f"on-chip DRAM size {size}: need a power of two >= the bus width")
        self.config, self.size = config, size
        super().__init__({
            "dram_rd": In(dma_read_signature(config)), "dram_wr": In(dma_write_signature(config)),
            "host_r_addr": In(32), "host_w_addr": In(32), "host_w_data": In(32),
            "host_w_en": In(1), "host_r_en": In(1), "host_r_data": Out(32),
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

        # VTA writes: the burst whose beats are written (w_*), and one request accepted
        # ahead of it (n_*: request-ahead, WRITE_AHEAD), which moves up at its last beat.
        assert WRITE_AHEAD == 1
        w_addr, w_left = Signal(abits), Signal(wr.req.payload.beats.shape())
        n_valid, n_addr, n_beats = Signal(), Signal(abits), Signal(wr.req.payload.beats.shape())
        m.d.comb += [wr.req.ready.eq(~n_valid), wr.data.ready.eq(w_left != 0)]
        accept = wr.req.valid & wr.req.ready
        beat = wr.data.valid & wr.data.ready
        with m.If(beat):
            m.d.sync += [w_addr.eq(w_addr + 1), w_left.eq(w_left - 1)]
        with m.If((w_left == 0) | (beat & (w_left == 1))):     # the burst ends at this edge
            with m.If(n_valid):
                m.d.sync += [w_addr.eq(n_addr), w_left.eq(n_beats), n_valid.eq(0)]
            with m.Elif(accept):
                m.d.sync += [w_addr.eq(wr.req.payload.addr[log_nb:]),
                             w_left.eq(wr.req.payload.beats)]
        with m.If(accept & (w_left != 0) & ~(beat & (w_left == 1))):
            m.d.sync += [n_valid.eq(1), n_addr.eq(wr.req.payload.addr[log_nb:]),
                         n_beats.eq(wr.req.payload.beats)]

        # Port sharing: the host wins (it only accesses DRAM while the VTA is idle).
        lane, w_lane = Signal(range(max(2, nb // 4))), Signal(range(max(2, nb // 4)))
        host_word = self.host_r_addr[log_nb:log_nb + abits]
        m.d.comb += lane.eq(self.host_r_addr[2:log_nb]) if nb > 4 else lane.eq(0)
        m.d.comb += w_lane.eq(self.host_w_addr[2:log_nb]) if nb > 4 else w_lane.eq(0)
        with m.If(self.host_w_en):
            m.d.comb += [wp.addr.eq(self.host_w_addr[log_nb:log_nb + abits]),
                         wp.data.eq(self.host_w_data.replicate(nb // 4)),
                         wp.en.eq(Const(0b1111, 4) << (w_lane * 4))]
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
    """The link protocol of :mod:`vtakit.boards.link`, driving a CSR bus and a DRAM host port.

    Parameters
    ----------
    divisor : float
        Clock cycles per UART bit.
    dram_size, bus_bytes : int
        Bytes of DRAM, and of the VTA's DRAM bus (to track its requests).
    info : list of int
        The identification words (:func:`vtakit.boards.link.info_words`).

    Attributes
    ----------
    rx : In(1); tx : Out(1)
    csr : Out(CsrSignature)
    dram_r_addr, dram_w_addr, dram_w_data : Out(32); dram_r_en, dram_w_en : Out(1)
    dram_r_data : In(32)
        The word read by ``dram_r_en`` one cycle earlier.
    irq : In(1)
        The VTA's done-or-error.
    rd_req, wr_req : In(1); rd_addr, wr_addr : In(32); rd_beats, wr_beats : In(16)
        The VTA's DRAM requests (handshakes): tracked for the written range and for
        requests beyond the DRAM.
    vta_rst : Out(1)
        Reset pulse of the VTA.
    running, framing, busy : Out(1)
        The VTA was started and has not reported done; a frame is being received; a
        reply is being sent or the DRAM is being zeroed.
    """

    def __init__(self, divisor, *, dram_size: int, bus_bytes: int, info: list):
        self.divisor, self.dram_size, self.info = divisor, dram_size, info
        self.bus_bytes = bus_bytes
        self.idle_cycles = int(IDLE_BYTE_TIMES * 10 * divisor)
        super().__init__({
            "rx": In(1), "tx": Out(1), "csr": Out(CsrSignature),
            "dram_r_addr": Out(32), "dram_r_en": Out(1), "dram_r_data": In(32),
            "dram_w_addr": Out(32), "dram_w_data": Out(32), "dram_w_en": Out(1),
            "irq": In(1), "rd_req": In(1), "rd_addr": In(32), "rd_beats": In(16),
            "wr_req": In(1), "wr_addr": In(32), "wr_beats": In(16),
            "vta_rst": Out(1), "running": Out(1), "framing": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.urx = urx = UartRx(self.divisor)
        m.submodules.utx = utx = UartTx(self.divisor)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx), urx.data.ready.eq(1)]
        got, byte = urx.data.valid, urx.data.payload
        space_words = {Space.DRAM: self.dram_size // 4, Space.CSR: 16, Space.INFO: INFO_WORDS,
                       Space.BRIDGE: BRIDGE_WORDS}

        # A reply for the transmitter (dropped if it is still sending the previous one).
        rq_valid, rq_status, rq_seq, rq_read = Signal(), Signal(8), Signal(8), Signal()
        rq_space, rq_addr, rq_count = Signal(2), Signal(32), Signal(16)
        m.d.sync += rq_valid.eq(0)

        def reply(status, read=False):
            m.d.sync += [rq_valid.eq(1), rq_status.eq(status), rq_seq.eq(seq), rq_read.eq(read),
                         rq_space.eq(space), rq_addr.eq(addr), rq_count.eq(count)]

        # ---- receiver
        crc = Signal(32)
        crc_next = crc32_update(m, crc, byte)
        hdr = Signal(96)                       # header (8 bytes) and its CRC
        cmd, seq, addr, count = hdr[0:8], hdr[8:16], hdr[16:48], hdr[48:64]
        op, space = cmd[4:8], cmd[0:4]
        n = Signal(range(16))
        word, lane = Signal(32), Signal(2)
        w_addr, left = Signal(32), Signal(16)
        last_seq = Signal(9, init=0x100)
        idle = Signal(range(self.idle_cycles + 1))
        zero_addr = Signal(32)
        csr_write = Signal()
        clear_track = Signal()
        start = Signal()
        m.d.comb += [self.csr.w_data.eq(word), self.dram_w_data.eq(Cat(word[8:], byte)),
                     self.dram_w_addr.eq(w_addr)]
        with m.FSM() as rx_fsm:
            with m.State("HUNT"):
                with m.If(got & (byte == SYNC)):
                    m.d.sync += [crc.eq(CRC_INIT), n.eq(0), idle.eq(0)]
                    m.next = "HEADER"
            with m.State("HEADER"):
                with m.If(idle == self.idle_cycles):      # a frame that stops is dropped
                    m.next = "HUNT"
                with m.If(got):
                    m.d.sync += [crc.eq(crc_next), hdr.eq(Cat(hdr[8:], byte)), n.eq(n + 1)]
                    with m.If(n == 11):
                        m.next = "HUNT"
                        with m.If(crc_next == CRC_RESIDUE):
                            m.next = "DECODE"
            with m.State("DECODE"):
                write = op == Op.WRITE
                legal = (((op == Op.READ) | write) & (space <= Space.BRIDGE) & (count != 0)
                         & (count <= MAX_WORDS) & (addr[:2] == 0)
                         & ~(write & (space != Space.DRAM) & (count != 1))
                         & ~(write & (space == Space.INFO)))
                words = Signal(32)
                with m.Switch(space):
                    for s, w in space_words.items():
                        with m.Case(s):
                            m.d.comb += words.eq(w)
                inside = (addr[2:] + count) <= words
                m.next = "HUNT"
                with m.If(~legal):
                    reply(Status.BAD_COMMAND)
                with m.Elif(~inside):
                    reply(Status.OUT_OF_RANGE)
                with m.Elif(~write):
                    reply(Status.OK, read=True)
                with m.Else():
                    m.d.sync += [crc.eq(CRC_INIT), w_addr.eq(addr), left.eq(count), lane.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(idle == self.idle_cycles):      # a frame that stops is dropped
                    m.next = "HUNT"
                with m.If(got):
                    m.d.sync += [crc.eq(crc_next), word.eq(Cat(word[8:], byte)), lane.eq(lane + 1)]
                    with m.If(lane == 3):
                        # DRAM words are written as they arrive; a bad CRC is answered and
                        # the host writes the words again
                        m.d.comb += self.dram_w_en.eq(space == Space.DRAM)
                        m.d.sync += [w_addr.eq(w_addr + 4), left.eq(left - 1)]
                        with m.If(left == 1):
                            m.d.sync += n.eq(0)
                            m.next = "DATA_CRC"
            with m.State("DATA_CRC"):
                with m.If(idle == self.idle_cycles):      # a frame that stops is dropped
                    m.next = "HUNT"
                with m.If(got):
                    m.d.sync += [crc.eq(crc_next), n.eq(n + 1)]
                    with m.If(n == 3):
                        m.next = "HUNT"
                        with m.If(crc_next == CRC_RESIDUE):
                            m.next = "EXECUTE"
                        with m.Else():
                            reply(Status.BAD_CRC)
            with m.State("EXECUTE"):
                # A register write repeating the last write's seq is a retry: not again.
                again = last_seq == seq
                m.d.sync += last_seq.eq(seq)
                m.next = "HUNT"
                reply(Status.OK)
                with m.If(~again & (space == Space.CSR)):
                    m.d.comb += csr_write.eq(1)
                    m.d.comb += start.eq((addr[:8] == Reg.CTRL) & word[0])
                with m.If(~again & (space == Space.BRIDGE) & (addr[2:] == BridgeReg.CONTROL)):
                    m.d.comb += [self.vta_rst.eq(word[0] != 0),
                                 clear_track.eq(word[1] != 0)]
                    with m.If(word & Control.ZERO_DRAM):
                        m.d.sync += [zero_addr.eq(0), rq_valid.eq(0)]
                        m.next = "ZERO"
            with m.State("ZERO"):
                m.d.comb += [self.dram_w_en.eq(1), self.dram_w_addr.eq(zero_addr),
                             self.dram_w_data.eq(0)]
                m.d.sync += zero_addr.eq(zero_addr + 4)
                with m.If(zero_addr == self.dram_size - 4):
                    reply(Status.OK)
                    m.next = "HUNT"
        framing = ~rx_fsm.ongoing("HUNT") & ~rx_fsm.ongoing("ZERO")
        with m.If(framing & (idle != self.idle_cycles)):
            m.d.sync += idle.eq(Mux(got, 0, idle + 1))

        # ---- tracking of the VTA's requests
        wr_lo, wr_hi = Signal(32, init=0xFFFF_FFFF), Signal(32)
        range_fault, fault_write, fault_addr = Signal(), Signal(), Signal(32)
        log_nb = exact_log2(self.bus_bytes)
        wr_end = Signal(34)
        rd_end = Signal(34)
        m.d.comb += [wr_end.eq(self.wr_addr + (self.wr_beats << log_nb)),
                     rd_end.eq(self.rd_addr + (self.rd_beats << log_nb))]
        with m.If(clear_track):
            m.d.sync += [wr_lo.eq(0xFFFF_FFFF), wr_hi.eq(0), range_fault.eq(0), fault_write.eq(0)]
        with m.Else():
            with m.If(self.wr_req):
                with m.If(self.wr_addr < wr_lo):
                    m.d.sync += wr_lo.eq(self.wr_addr)
                with m.If(wr_end > wr_hi):
                    m.d.sync += wr_hi.eq(Mux(wr_end[32:] != 0, 0xFFFF_FFFF, wr_end[:32]))
            with m.If(~range_fault):
                with m.If(self.wr_req & (wr_end > self.dram_size)):
                    m.d.sync += [range_fault.eq(1), fault_write.eq(1), fault_addr.eq(self.wr_addr)]
                with m.Elif(self.rd_req & (rd_end > self.dram_size)):
                    m.d.sync += [range_fault.eq(1), fault_addr.eq(self.rd_addr)]
        with m.If(start):
            m.d.sync += self.running.eq(1)
        with m.Elif(self.irq | self.vta_rst):
            m.d.sync += self.running.eq(0)

        # ---- transmitter
        t_status, t_seq, t_read, t_space = Signal(8), Signal(8), Signal(), Signal(2)
        t_addr, t_left, t_word, k = Signal(32), Signal(16), Signal(32), Signal(2)
        tcrc = Signal(32)
        m.d.comb += [self.csr.addr.eq(Mux(csr_write, addr[:8], t_addr[:8])),
                     self.csr.w_en.eq(csr_write), self.dram_r_addr.eq(t_addr)]
        send = utx.data.valid & utx.data.ready
        tcrc_next = crc32_update(m, tcrc, utx.data.payload)
        with m.FSM() as tx_fsm:
            with m.State("IDLE"):
                with m.If(rq_valid):
                    m.d.sync += [t_status.eq(rq_status), t_seq.eq(rq_seq),
                                 t_read.eq(rq_read & (rq_status == Status.OK)),
                                 t_space.eq(rq_space), t_addr.eq(rq_addr), t_left.eq(rq_count),
                                 tcrc.eq(CRC_INIT)]
                    m.next = "SYNC"
            with m.State("SYNC"):
                m.d.comb += [utx.data.valid.eq(1), utx.data.payload.eq(SYNC)]
                with m.If(send):
                    m.next = "STATUS"
            with m.State("STATUS"):
                m.d.comb += [utx.data.valid.eq(1), utx.data.payload.eq(t_status)]
                with m.If(send):
                    m.d.sync += tcrc.eq(tcrc_next)
                    m.next = "SEQ"
            with m.State("SEQ"):
                m.d.comb += [utx.data.valid.eq(1), utx.data.payload.eq(t_seq)]
                with m.If(send):
                    m.d.sync += [tcrc.eq(tcrc_next), k.eq(0)]
                    m.next = "CRC"
                    with m.If(t_read):
                        m.next = "FETCH"
            with m.State("FETCH"):
                m.d.comb += self.dram_r_en.eq(t_space == Space.DRAM)
                m.next = "LATCH"
            with m.State("LATCH"):
                info = Signal(32)
                with m.Switch(t_addr[2:6]):
                    for i, w in enumerate(self.info):
                        with m.Case(i):
                            m.d.comb += info.eq(w)
                bridge = Signal(32)
                with m.Switch(t_addr[2:5]):
                    for i, v in enumerate([wr_lo, wr_hi, Cat(range_fault, fault_write),
                                           fault_addr, last_seq]):
                        with m.Case(i):
                            m.d.comb += bridge.eq(v)
                with m.If(~csr_write):
                    m.d.sync += t_word.eq(Mux(t_space == Space.DRAM, self.dram_r_data,
                                          Mux(t_space == Space.CSR, self.csr.r_data,
                                          Mux(t_space == Space.INFO, info, bridge))))
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [utx.data.valid.eq(1), utx.data.payload.eq(t_word[:8])]
                with m.If(send):
                    m.d.sync += [tcrc.eq(tcrc_next), t_word.eq(t_word >> 8),
                                 k.eq(k + 1)]
                    with m.If(k == 3):
                        m.d.sync += [t_addr.eq(t_addr + 4), t_left.eq(t_left - 1)]
                        m.next = "FETCH"
                        with m.If(t_left == 1):
                            m.next = "CRC"
            with m.State("CRC"):
                m.d.comb += [utx.data.valid.eq(1), utx.data.payload.eq((~tcrc).word_select(k, 8))]
                with m.If(send):
                    m.d.sync += k.eq(k + 1)
                    with m.If(k == 3):
                        m.next = "IDLE"
        m.d.comb += [self.framing.eq(framing),
                     self.busy.eq(~tx_fsm.ongoing("IDLE") | rx_fsm.ongoing("ZERO") | rq_valid)]
        return m


class BoardTop(wiring.Component):
    """VTA + :class:`OnChipDram` + :class:`HostBridge`; pins: ``uart_rx``, ``uart_tx``, ``leds``
    (LED 0: the VTA reports done or error; LED 1: a run is going; LED 2: a frame is being
    received; LED 3: the bridge is replying or zeroing the DRAM).

    Parameters
    ----------
    config : VTAConfig
    dram_size : int
        Bytes of on-chip DRAM (a power of two).
    clk_hz : int
        Clock frequency, for the UART's bit time.
    baud : int
    cycles_per_bit : float, optional
        The UART's bit time in clock cycles instead of ``clk_hz / baud`` (a simulated board
        uses :data:`SIM_CYCLES_PER_BIT`; the identification words still give ``baud``).
    """

    def __init__(self, config: VTAConfig, *, dram_size: int = 128 * 1024, clk_hz: int = 25_000_000,
                 baud: int = DEFAULT_BAUD, cycles_per_bit=None):
        from ..hw.top import VTA
        self.config = config
        self.vta = VTA(config)
        self.dram = OnChipDram(config, dram_size)
        self.bridge = HostBridge(cycles_per_bit or clk_hz / baud, dram_size=dram_size,
                                 bus_bytes=config.bus_bytes,
                                 info=info_words(config, dram_size, clk_hz, baud))
        super().__init__({"uart_rx": In(1), "uart_tx": Out(1), "leds": Out(8)})

    def elaborate(self, platform):
        m = Module()
        br = self.bridge
        # The bridge resets the VTA and the DRAM's VTA side (not the memory's contents).
        m.submodules.vta = ResetInserter(br.vta_rst)(self.vta)
        m.submodules.dram = ResetInserter(br.vta_rst)(self.dram)
        m.submodules.bridge = br
        vta, dram = self.vta, self.dram
        wiring.connect(m, vta.dram_rd, dram.dram_rd)
        wiring.connect(m, vta.dram_wr, dram.dram_wr)
        wiring.connect(m, br.csr, vta.csr)
        rd, wr = vta.dram_rd.req, vta.dram_wr.req
        m.d.comb += [
            br.rx.eq(self.uart_rx), self.uart_tx.eq(br.tx),
            dram.host_r_addr.eq(br.dram_r_addr), dram.host_r_en.eq(br.dram_r_en),
            dram.host_w_addr.eq(br.dram_w_addr), dram.host_w_data.eq(br.dram_w_data),
            dram.host_w_en.eq(br.dram_w_en), br.dram_r_data.eq(dram.host_r_data),
            br.irq.eq(vta.irq),
            br.rd_req.eq(rd.valid & rd.ready), br.rd_addr.eq(rd.payload.addr),
            br.rd_beats.eq(rd.payload.beats),
            br.wr_req.eq(wr.valid & wr.ready), br.wr_addr.eq(wr.payload.addr),
            br.wr_beats.eq(wr.payload.beats),
            self.leds[0].eq(vta.irq), self.leds[1].eq(br.running),
            self.leds[2].eq(br.framing), self.leds[3].eq(br.busy),
        ]
        return m


def board_verilog(config: VTAConfig, *, dram_size: int, cycles_per_bit=None,
                  name: str = "board_top") -> str:
    """The Verilog of :class:`BoardTop` (deterministic: no source locations)."""
    from amaranth.back import verilog
    top = BoardTop(config, dram_size=dram_size, cycles_per_bit=cycles_per_bit)
    return verilog.convert(top, name=name, emit_src=False)


def board_sources() -> list:
    """The files that determine :func:`board_verilog`'s text besides the protocol's
    constants (:func:`vtakit.boards.link.protocol_constants`): every ``hw/`` source, this
    module and the UART."""
    from pathlib import Path
    from .. import hw
    here = Path(__file__).resolve().parent
    return (sorted(Path(hw.__file__).resolve().parent.glob("*.py"))
            + [here / "board_top.py", here / "uart.py"])
