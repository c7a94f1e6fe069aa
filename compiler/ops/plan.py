"""The common shape of every operator plan: operands, packing, lowering, running.

A plan is built once per operator shape and config (tiling chosen, kernels
decided). Lowering it gives a :class:`~vtakit.runtime.Program` whose buffer
slots are the plan's operands (:meth:`OpPlan.program`, no device involved); a
runtime binds that program to any device buffers (:meth:`OpPlan.lower`, what the
graph compiler does with its own buffers), while :meth:`OpPlan.run` is the
one-shot path the user API and tests take.
"""

from __future__ import annotations

import math

import numpy as np

from ...runtime import Program, ProgramBuilder

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
        Every DRAM buffer the kernel addresses (the slots of :meth:`program`);
        ``"out"`` is written, the rest read.
    """

    name = "op"

    def __init__(self, config):
        self.config = config
        self.operands: dict[str, Operand] = {}
        self._program: Program | None = None

    def emit(self, builder, slots: dict) -> None:  # pragma: no cover - abstract
        """Queue the operator's instructions into ``builder`` (a
        :class:`~vtakit.runtime.ProgramBuilder`), addressing the operands through
        ``slots`` (operand name -> slot)."""
        raise NotImplementedError

    def program(self) -> Program:
        """The operator as a :class:`~vtakit.runtime.Program` (built once, then cached):
        one slot per operand, named as in :attr:`operands`; no device is needed."""
        if self._program is None:
            builder = ProgramBuilder(self.config, name=self.name)
            self.emit(builder, {name: builder.slot(name, op.nbytes)
                                for name, op in self.operands.items()})
            self._program = builder.build()
        return self._program

    def lower(self, rt, bufs: dict) -> None:
        """Append the operator to ``rt``'s stream with its operands in ``bufs``
        (operand name -> Buffer); no synchronize. Same as
        ``rt.bind(plan.program(), bufs)``."""
        rt.bind(self.program(), bufs)

    def inspect(self) -> dict:
        """Describe the kernel (its :meth:`program` as a stream of its own, fences and
        FINISH appended); no device is opened.

        Returns
        -------
        dict
            ``instructions`` (count, fences and FINISH included), ``by_opcode``
            (counts by opcode name), ``uops`` (micro-ops staged), ``dram`` (bytes by
            fsim counter name, :func:`.perfmodel.stream_traffic`), ``predicted_cycles``
            (:func:`.perfmodel.predict_stream`).
        """
        from .perfmodel import predict_stream, stream_traffic

        program = self.program()
        stream = ProgramBuilder(self.config, name=self.name)
        stream.include(program, {name: stream.slot(name, nbytes)
                                 for name, nbytes in program.slots.items()})
        stream.finish()
        insns = stream.build().insns
        by_op: dict[str, int] = {}
        for insn in insns:
            by_op[insn.opcode.name] = by_op.get(insn.opcode.name, 0) + 1
        return {"instructions": len(insns), "by_opcode": by_op, "uops": int(len(program.uops)),
                "dram": stream_traffic(insns, self.config),
                "predicted_cycles": predict_stream(insns, self.config).cycles}

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
