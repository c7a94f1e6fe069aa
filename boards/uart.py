"""8N1 UART receiver and transmitter (for a board's host link)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UartRx", "UartTx"]


class UartRx(wiring.Component):
    """Receives bytes on ``rx`` (idle high), ``divisor`` clock cycles per bit.

    Attributes
    ----------
    rx : In(1)
    data : Out(stream.Signature(8))
        A received byte; a byte not taken before the next one arrives is lost.
    """

    rx: In(1)
    data: Out(stream.Signature(8))

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"UART divisor {divisor}: need at least 4 cycles per bit")
        self.divisor = divisor
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.d.sync += rx.eq(self.rx)   # one synchronizer stage against metastability
        timer = Signal(range(self.divisor * 3 // 2 + 1))
        shift = Signal(8)
        bits = Signal(range(9))
        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):   # start bit: sample the data bits in their middles
                    m.d.sync += [timer.eq(self.divisor * 3 // 2 - 1), bits.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [shift.eq((rx << 7) | (shift >> 1)), bits.eq(bits + 1),
                                 timer.eq(self.divisor - 1)]
                    with m.If(bits == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    with m.If(rx):
                        m.d.sync += [self.data.payload.eq(shift), self.data.valid.eq(1)]
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """Sends bytes on ``tx``, ``divisor`` clock cycles per bit.

    Attributes
    ----------
    data : In(stream.Signature(8))
    tx : Out(1)
    """

    data: In(stream.Signature(8))
    tx: Out(1)

    def __init__(self, divisor: int):
        self.divisor = divisor
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        frame = Signal(10, init=0x3FF)
        left = Signal(range(11))
        m.d.comb += [self.tx.eq(frame[0]), self.data.ready.eq(left == 0)]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [frame.eq((1 << 9) | (self.data.payload << 1)), left.eq(10),
                         timer.eq(self.divisor - 1)]
        with m.Elif(left != 0):
            m.d.sync += timer.eq(timer - 1)
            with m.If(timer == 0):
                m.d.sync += [frame.eq((1 << 9) | (frame >> 1)), left.eq(left - 1),
                             timer.eq(self.divisor - 1)]
        return m
