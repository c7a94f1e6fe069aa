"""Dependency-token queues and fetch -> module command queues.

Tokens carry no data (reference 3.1: order is implied by FIFO order), so a
token queue is an up/down counter with FIFO handshakes: ``push.ready`` falls
when ``depth`` tokens are held (a producer pushing into a full queue stalls,
as with a hardware FIFO) and ``pop.valid`` is high while any token is held.
"""

from amaranth.hdl import Module, Mux, Signal
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
        # Two registers in front of the block RAM FIFO: the head (``s0``, what the consumer
        # sees) and a spare (``s1``). The consumer decodes the head in the cycle it decides
        # (the compute module's overlapped accept; the load module's accept in the cycle of
        # its last SRAM write), and neither a block RAM's unregistered output (5.6 ns
        # clock-to-out on the ECP5) nor its enables may depend on that decision: the FIFO
        # is read while the spare is empty, a push bypasses the FIFO while it is empty and
        # the spare is free, and ``push.ready`` is the count of held commands below
        # ``depth`` -- all from registers. ``pop.ready`` only steers which register loads
        # what. A command pushed into an empty queue is at the head a cycle after the push,
        # as before; the capacity stays ``depth`` (the FIFO's own, one more than it can
        # then hold, keeps its ``w_rdy`` out of ``push.ready``).
        width = Command.as_shape().size
        m.submodules.fifo = q = fifo.SyncFIFOBuffered(width=width, depth=self.depth)
        s0, s1 = Signal(width), Signal(width)
        v0, v1 = Signal(), Signal()
        pop = v0 & self.pop.ready
        bypass = (q.level == 0) & ~v1
        push = self.push.valid & self.push.ready
        total = Signal(range(self.depth + 3))
        room = total < self.depth
        m.d.comb += [
            total.eq(q.level + v0 + v1),
            q.r_en.eq(~v1),
            q.w_data.eq(self.push.payload),
            q.w_en.eq(self.push.valid & room & ~bypass),
            self.push.ready.eq(room),
            self.pop.payload.eq(s0),
            self.pop.valid.eq(v0),
            self.level.eq(total),
        ]
        # The next command after the head: the spare, else the FIFO's output, else a
        # bypassing push (the FIFO is empty then).
        fill = q.r_rdy & ~v1            # read from the FIFO this cycle
        incoming = Signal(width)
        m.d.comb += incoming.eq(Mux(fill, q.r_data, self.push.payload))
        has_in = fill | bypass & push
        with m.If(~v0 | pop):
            # The head loads the spare (nothing comes in while it is full), or the
            # incoming command, or empties.
            with m.If(v1):
                m.d.sync += [s0.eq(s1), v1.eq(0)]
            with m.Else():
                m.d.sync += [s0.eq(incoming), v0.eq(has_in)]
        with m.Elif(has_in):
            m.d.sync += [s1.eq(incoming), v1.eq(1)]
        return m
