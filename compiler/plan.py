"""The common shape of every operator plan: operands, packing, lowering, running.

A plan is built once per operator shape and config (tiling chosen, kernels
decided) and can then be lowered into any runtime stream with any device
buffers: the graph compiler reuses :meth:`OpPlan.lower` with its own buffers,
while :meth:`OpPlan.run` is the one-shot path the user API and tests take.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["OpPlan", "Operand"]


class Operand:
    """A DRAM operand of a plan: name, packed shape and dtype (``out`` is the result)."""

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(int(s) for s in shape), np.dtype(dtype)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def __repr__(self):
        return f"Operand({self.name!r}, {self.shape}, {self.dtype.name})"


class OpPlan:
    """Base class of operator plans.

    Attributes
    ----------
    config : VTAConfig
    operands : dict of str -> Operand
        Every DRAM buffer :meth:`lower` needs; ``"out"`` is written, the rest read.
    """

    name = "op"

    def __init__(self, config):
        self.config = config
        self.operands: dict[str, Operand] = {}

    def lower(self, rt, bufs: dict) -> None:  # pragma: no cover - abstract
        """Append the operator's instructions to ``rt``'s stream (no synchronize)."""
        raise NotImplementedError

    def inspect(self) -> dict:
        """Lower into a scratch stream (a behavioral device with fresh buffers, never
        run) and describe the kernel.

        Returns
        -------
        dict
            ``instructions`` (count, fences and FINISH included), ``by_opcode``
            (counts by opcode name), ``uops`` (micro-ops staged), ``dram`` (bytes by
            fsim counter name, :func:`.perfmodel.stream_traffic`), ``predicted_cycles``
            (:func:`.perfmodel.predict_stream`).
        """
        from ..runtime import Runtime
        from ..sim import open_device
        from .perfmodel import predict_stream, stream_traffic

        rt = Runtime(open_device("behavioral", self.config))
        bufs = {name: rt.alloc(op.nbytes) for name, op in self.operands.items()}
        self.lower(rt, bufs)
        rt.finalize()
        insns = rt.instructions
        by_op: dict[str, int] = {}
        for insn in insns:
            name = getattr(insn.opcode, "name", str(insn.opcode))
            by_op[name] = by_op.get(name, 0) + 1
        info = {"instructions": len(insns), "by_opcode": by_op, "uops": int(len(rt.uops)),
                "dram": stream_traffic(insns, self.config),
                "predicted_cycles": predict_stream(insns, self.config).cycles}
        rt.reset()
        return info

    def check_packed(self, packed: dict) -> None:
        for name, op in self.operands.items():
            if name == "out":
                continue
            if name not in packed:
                raise ValueError(f"{self.name}: missing operand {name!r}; the plan needs "
                                 + ", ".join(n for n in self.operands if n != "out"))
            a = packed[name]
            if a.shape != op.shape or a.dtype != op.dtype:
                raise ValueError(f"{self.name}: operand {name!r} is {a.dtype} {a.shape}, the "
                                 f"plan expects {op.dtype} {op.shape}")

    def run(self, rt, packed: dict):
        """Allocate, upload, lower, synchronize, download and free.

        Returns
        -------
        (numpy.ndarray, RunResult)
            The packed ``out`` operand and the device's run result.
        """
        self.check_packed(packed)
        bufs = {}
        try:
            for name, op in self.operands.items():
                bufs[name] = rt.alloc(op.nbytes)
                if name != "out":
                    rt.upload(bufs[name], packed[name])
            try:
                self.lower(rt, bufs)
            except BaseException:
                rt.reset()          # drop the half-built stream
                raise
            result = rt.synchronize()
            out = self.operands["out"]
            return rt.download(bufs["out"], out.dtype, out.shape), result
        finally:
            for buf in bufs.values():
                rt.free(buf)
