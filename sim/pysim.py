"""The ``pysim`` backend: the VTA RTL on Amaranth's Python simulator.

:class:`DramPortModel` serves the top level's DRAM read and write ports from a
numpy byte image (one process, configurable read latency); :class:`PysimDevice`
drives the control/status registers like a host driver would (instruction
count and address, start, poll for done) and turns the latched error registers
into a :class:`~vtakit.sim.device.DeviceError`.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..hw.config import load_config
from .device import Device, DeviceError, RunResult
from .dram import DRAM

__all__ = ["DramPortModel", "PysimDevice"]


class DramPortModel:
    """A DRAM behind the DMA protocol of :mod:`vtakit.hw.interfaces`, for async testbenches.

    Reads: a request is accepted every cycle (any number outstanding); its beats
    are returned in order, the first ``read_latency`` cycles after the request,
    then one per cycle while the master is ready. Writes: one burst at a time,
    one beat per cycle.

    Parameters
    ----------
    memory : numpy.ndarray or callable
        The ``uint8`` byte image, or a function returning it (for images that
        may be reallocated between runs, like :attr:`DRAM.data`).
    bus_bytes : int
        Bus width in bytes.
    read_latency : int
        Cycles from an accepted read request to its first data beat (>= 1).

    Attributes
    ----------
    reads, writes : int
        Beats transferred so far (for throughput checks).
    """

    def __init__(self, memory, bus_bytes: int, *, read_latency: int = 1):
        if read_latency < 1:
            raise ValueError(f"read_latency must be >= 1 cycle, got {read_latency}")
        self._memory = memory if callable(memory) else (lambda: memory)
        self.bus_bytes = bus_bytes
        self.read_latency = read_latency
        self.reads = 0
        self.writes = 0
        self.clear()

    def clear(self):
        """Forget every outstanding transfer (the RTL was reset)."""
        self._pending = deque()    # [due cycle, addr, beats left]
        self._write = None         # [addr, beats left]
        self._cycle = 0

    def _check(self, mem, addr, nbytes, what):
        if addr + nbytes > len(mem):
            raise DeviceError(f"DRAM {what} of {nbytes} bytes at 0x{addr:x} is outside the "
                              f"{len(mem)}-byte DRAM image")

    def process(self, rd, wr):
        """An async process serving read port ``rd`` and write port ``wr`` (either may be None)."""
        nb = self.bus_bytes

        async def serve(ctx):
            sampled = []
            if rd is not None:
                sampled += [rd.req.valid, rd.req.payload.as_value(), rd.data.ready]
                ctx.set(rd.req.ready, 1)
            if wr is not None:
                sampled += [wr.req.valid, wr.req.payload.as_value(), wr.data.valid,
                            wr.data.payload]
                ctx.set(wr.req.ready, 1)
            showing = False
            w_ready = False
            async for _, _, *vals in ctx.tick().sample(*sampled):
                self._cycle += 1
                mem = self._memory()
                if rd is not None:
                    rq_valid, rq, d_ready = vals[:3]
                    vals = vals[3:]
                    pend = self._pending
                    if showing and d_ready:
                        self.reads += 1
                        head = pend[0]
                        head[1] += nb
                        head[2] -= 1
                        if head[2] == 0:
                            pend.popleft()
                    if rq_valid:
                        addr, beats = rq & 0xFFFFFFFF, rq >> 32
                        self._check(mem, addr, beats * nb, "read")
                        pend.append([self._cycle + self.read_latency, addr, beats])
                    now = bool(pend) and pend[0][0] <= self._cycle + 1
                    if now:
                        a = pend[0][1]
                        ctx.set(rd.data.payload, int.from_bytes(mem[a:a + nb].tobytes(), "little"))
                    if now != showing:
                        ctx.set(rd.data.valid, now)
                        showing = now
                if wr is not None:
                    wq_valid, wq, d_valid, d_payload = vals
                    if w_ready and d_valid:
                        self.writes += 1
                        a = self._write[0]
                        mem[a:a + nb] = np.frombuffer(d_payload.to_bytes(nb, "little"), np.uint8)
                        self._write[0] += nb
                        self._write[1] -= 1
                        if self._write[1] == 0:
                            self._write = None
                    elif not w_ready and wq_valid:
                        addr, beats = wq & 0xFFFFFFFF, wq >> 32
                        self._check(mem, addr, beats * nb, "write")
                        self._write = [addr, beats]
                    busy = self._write is not None
                    if busy != w_ready:
                        ctx.set(wr.req.ready, not busy)
                        ctx.set(wr.data.ready, busy)
                        w_ready = busy

        return serve
