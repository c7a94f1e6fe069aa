"""Dependency-token queues and fetch -> module command queues.

Tokens carry no data (reference 3.1: order is implied by FIFO order), so a
token queue is an up/down counter with FIFO handshakes: ``push.ready`` falls
when ``depth`` tokens are held (a producer pushing into a full queue stalls,
as with a hardware FIFO) and ``pop.valid`` is high while any token is held.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from .interfaces import Command, CommandSignature, TokenSignature

__all__ = ["TokenQueue", "CommandQueue"]


class TokenQueue(wiring.Component):
    """A dependency-token queue of capacity ``depth``.

    Parameters
    ----------
    depth : int
        Capacity in tokens (>= 1).

    Attributes
    ----------
    push : In(TokenSignature)
        Producer side (``ready`` low while full).
    pop : Out(TokenSignature)
        Consumer side (``valid`` high while not empty).
    level : Out(range(depth + 1))
        Tokens held.
    """

    def __init__(self, depth: int):
        if not isinstance(depth, int) or depth < 1:
            self._MustUse__silence = True     # never elaborated: no "unused" warning
            raise ValueError(f"token queue depth must be a positive integer, got {depth!r}")
        self.depth = depth
        super().__init__({
            "push": In(TokenSignature),
            "pop": Out(TokenSignature),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.push.ready.eq(self.level != self.depth),
            self.pop.valid.eq(self.level != 0),
        ]
        inc = self.push.valid & self.push.ready
        dec = self.pop.valid & self.pop.ready
        with m.If(inc & ~dec):
            m.d.sync += self.level.eq(self.level + 1)
        with m.Elif(dec & ~inc):
            m.d.sync += self.level.eq(self.level - 1)
        return m


class CommandQueue(wiring.Component):
    """A FIFO of :class:`~vtakit.hw.interfaces.Command` (block RAM backed).

    Parameters
    ----------
    depth : int
        Capacity in commands.

    Attributes
    ----------
    push : In(CommandSignature)
    pop : Out(CommandSignature)
    level : Out(range(depth + 1))
    """

    def __init__(self, depth: int):
        if not isinstance(depth, int) or depth < 2:
            self._MustUse__silence = True
            raise ValueError(f"command queue depth must be an integer >= 2, got {depth!r}")
        self.depth = depth
        super().__init__({
            "push": In(CommandSignature),
            "pop": Out(CommandSignature),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        # The head is a register in front of the block RAM FIFO: the consumer decodes the
        # head in the cycle it decides (the compute module's overlapped accept), and a
        # block RAM's unregistered output (5.6 ns clock-to-out on the ECP5) in that path
        # was the design's worst one. A command pushed while the FIFO is empty and the
        # head free (or leaving) goes straight to the head, a cycle after the push; the
        # capacity stays ``depth``.
        m.submodules.fifo = q = fifo.SyncFIFOBuffered(width=Command.as_shape().size,
                                                      depth=self.depth - 1)
        head = Signal(Command.as_shape().size)
        head_valid = Signal()
        free = ~head_valid | self.pop.ready
        bypass = free & (q.level == 0)
        m.d.comb += q.r_en.eq(free)
        with m.If(q.r_rdy & q.r_en):
            m.d.sync += [head.eq(q.r_data), head_valid.eq(1)]
        with m.Elif(bypass & self.push.valid):
            m.d.sync += [head.eq(self.push.payload), head_valid.eq(1)]
        with m.Elif(self.pop.ready):
            m.d.sync += head_valid.eq(0)
        m.d.comb += [
            q.w_data.eq(self.push.payload),
            q.w_en.eq(self.push.valid & ~bypass),
            self.push.ready.eq(q.w_rdy),
            self.pop.payload.eq(head),
            self.pop.valid.eq(head_valid),
            self.level.eq(q.level + head_valid),
        ]
        return m
