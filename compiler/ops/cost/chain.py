"""The predicted cycles of chained layers: one stream, one prediction.

Layers that hand a device tensor to the next one run chained
(:mod:`vtakit.runtime.chain`): their kernels, rewritten at each boundary, are one
instruction stream with one synchronize. Summing the layers' own predictions would
count every head and tail that the chain overlaps, so a chain is predicted as the
runtime builds it: :class:`ChainPredictor` replays the runtime's
:class:`~vtakit.runtime.chain.Chain` on a device-less runtime (:class:`DryRuntime`)
and runs the event model (:func:`~.events.predict_stream`) on each stream it would
synchronize. A kernel that runs alone gets exactly :func:`~.events.program_prediction`,
unless it starts warm (:func:`~vtakit.runtime.chain.warm_split`: it uses micro-ops the
stream before loaded, which the dry runtime keeps, :func:`~.events.uop_sram`).
"""

from __future__ import annotations

from .events import predict_stream, program_prediction, program_stream, stream_traffic, uop_sram
from .params import RTL_COST

__all__ = ["DryRuntime", "ChainPredictor", "StreamRun"]


class StreamRun:
    """One synchronize of the dry runtime: the programs bound (in order), the event
    model's :class:`~.events.StreamPrediction`, the stream's DRAM traffic, and its
    instructions and uop staging (what :func:`~.events.predict_stream` reads, its
    ``uops=``) when it chains several programs or starts warm (None for a kernel alone:
    its :func:`~.events.program_stream` and ``Program.uops``), and the uop SRAM it
    started with (``sram=``; None: zeros)."""

    __slots__ = ("programs", "prediction", "traffic", "insns", "uops", "sram")

    def __init__(self, programs, prediction, traffic, insns=None, uops=None, sram=None):
        self.programs, self.prediction, self.traffic = programs, prediction, traffic
        self.insns, self.uops, self.sram = insns, uops, sram

    @property
    def cycles(self) -> int:
        return int(self.prediction.cycles)


class DryRuntime:
    """What :class:`~vtakit.runtime.chain.Chain` uses of a Runtime, with no device:
    ``bind`` queues into a :class:`~vtakit.runtime.builder.ProgramBuilder` (buffers are
    any objects with ``addr`` and ``nbytes``), ``synchronize`` predicts the stream."""

    def __init__(self, config, cost=RTL_COST):
        self.config, self.cost = config, cost
        self.runs: list[StreamRun] = []
        self.stats = dict(syncs=0)
        self._sram = None       # the uop SRAM the last stream left (with COMPUTE_OVERLAP)
        self.reset()

    @property
    def instructions(self) -> list:
        """The pending stream's instructions (empty when nothing is queued)."""
        return [] if self._stream.empty else self._stream.instructions()

    def reset(self) -> None:
        from ....runtime.builder import ProgramBuilder, Slot

        class _Stream(ProgramBuilder):
            def _resolve_slot(self, buf, call):
                return Slot(f"buffer_{buf.addr:x}", buf.nbytes, buf.addr)
        self._stream = _Stream(self.config)
        self._bound = []

    def fits(self, *programs) -> bool:
        return True

    def bind(self, program, bufs: dict) -> None:
        self._stream.include(program, dict(bufs), call="bind")
        self._bound.append(program)

    def dep_pop(self, src, dst) -> None:
        self._stream.dep_pop(src, dst)

    def free(self, buf) -> None:
        pass

    def synchronize(self):
        bound, insns, uops, sram = self._bound, None, None, self._sram
        if len(bound) == 1 and "warm_of" not in bound[0].memo:
            # a kernel alone: the runtime's stream of it, memoized
            prediction, traffic = program_prediction(bound[0], self.cost)
        else:
            self._stream.finish()
            insns, uops = self._stream.instructions(), self._stream.uops
            prediction = predict_stream(insns, self.config, self.cost, uops=uops,
                                        sram=self._sram)
            traffic = stream_traffic(insns, self.config)
        if getattr(self.config, "compute_overlap", 0):
            self._sram = (uop_sram(insns, self.config, uops, self._sram) if insns is not None
                          else uop_sram(program_stream(bound[0]), self.config, bound[0].uops,
                                        self._sram))
        run = StreamRun(tuple(bound), prediction, traffic, insns, uops,
                        None if insns is None else sram)
        self.runs.append(run)
        self.stats["syncs"] += 1
        self.reset()
        return run


class ChainPredictor:
    """Predicts a sequence of layer launches as the runtime chains them.

    Call :meth:`launch` per VTA layer in call order with its kernel, its buffers
    (``{slot: object with addr, nbytes}``: device tensors at their arena offsets, staged
    operands at addresses of their own) and whether it stores straight into a device
    tensor; each returns the :class:`StreamRun` that layer's call synchronizes (None
    while its chain stays open). :meth:`close` runs what is still open.
    """

    def __init__(self, config, cost=RTL_COST, *, chain: bool = True):
        from ....runtime.chain import Chain
        self.rt = DryRuntime(config, cost)
        self.chain = Chain() if chain else None

    def launch(self, program, bufs: dict, direct: bool, prefetch=None):
        """``prefetch``: as :meth:`~vtakit.runtime.chain.Chain.follow`'s (the layer
        expected next, for a warm start)."""
        if self.chain is None:
            self.rt.bind(program, bufs)
            return self.rt.synchronize()
        return self.chain.follow(self.rt, program, bufs, direct, prefetch)

    def close(self):
        return None if self.chain is None else self.chain.close(self.rt)
