"""Dependency-token queues and fetch -> module command queues.

Tokens carry no data (reference 3.1: order is implied by FIFO order), so a
token queue is an up/down counter with FIFO handshakes: ``push.ready`` falls
when ``depth`` tokens are held (a producer pushing into a full queue stalls,
as with a hardware FIFO) and ``pop.valid`` is high while any token is held.
"""

from amaranth.hdl import Module
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
        m.submodules.fifo = q = fifo.SyncFIFOBuffered(width=Command.as_shape().size,
                                                      depth=self.depth)
        m.d.comb += [
            q.w_data.eq(self.push.payload),
            q.w_en.eq(self.push.valid),
            self.push.ready.eq(q.w_rdy),
            self.pop.payload.eq(q.r_data),
            self.pop.valid.eq(q.r_rdy),
            q.r_en.eq(self.pop.ready),
            self.level.eq(q.level),
        ]
        return m
