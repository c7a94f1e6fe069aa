"""8N1 UART receiver and transmitter (for a board's host link).

The bit time is ``divisor`` clock cycles, which need not be a whole number (25 MHz /
3 Mbaud is 8.33): a 16-bit phase accumulator ticks once per bit on average, each tick
within one clock cycle of the ideal bit boundary, so the error does not add up over a
frame.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UartRx", "UartTx", "PHASE_BITS"]

#: Fraction bits of the bit-time accumulator.
PHASE_BITS = 16


def _step(divisor) -> int:
    if divisor < 4:
        raise ValueError(f"UART divisor {divisor}: need at least 4 cycles per bit")
    return round((1 << PHASE_BITS) / divisor)


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

    def __init__(self, divisor):
        self.divisor = divisor
        self.step = _step(divisor)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.d.sync += rx.eq(self.rx)   # one synchronizer stage against metastability
        phase = Signal(PHASE_BITS + 1)
        tick = Signal()
        m.d.comb += tick.eq(phase[PHASE_BITS])
        m.d.sync += phase.eq(phase[:PHASE_BITS] + self.step)
        shift = Signal(8)
        bits = Signal(range(9))
        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):   # start bit: the first tick half a bit later, in its middle
                    m.d.sync += [phase.eq((1 << (PHASE_BITS - 1)) + self.step), bits.eq(0)]
                    m.next = "START"
            with m.State("START"):
                with m.If(tick):
                    m.next = "DATA"
                    with m.If(rx):           # a glitch, not a start bit
                        m.next = "IDLE"
            with m.State("DATA"):
                with m.If(tick):
                    m.d.sync += [shift.eq((rx << 7) | (shift >> 1)), bits.eq(bits + 1)]
                    with m.If(bits == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(tick):
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

    def __init__(self, divisor):
        self.divisor = divisor
        self.step = _step(divisor)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        phase = Signal(PHASE_BITS + 1)
        frame = Signal(10, init=0x3FF)
        left = Signal(range(11))
        m.d.comb += [self.tx.eq(frame[0]), self.data.ready.eq(left == 0)]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [frame.eq((1 << 9) | (self.data.payload << 1)), left.eq(10),
                         phase.eq(self.step)]
        with m.Elif(left != 0):
            m.d.sync += phase.eq(phase[:PHASE_BITS] + self.step)
            with m.If(phase[PHASE_BITS]):
                m.d.sync += [frame.eq((1 << 9) | (frame >> 1)), left.eq(left - 1)]
        return m
