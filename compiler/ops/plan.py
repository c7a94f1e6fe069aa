"""The common shape of every operator plan: operands, packing, lowering, running.

A plan is built once per operator shape and config (tiling chosen, kernels
decided). Lowering it gives a :class:`~vtakit.runtime.Program` whose buffer
slots are the plan's operands (:meth:`OpPlan.program`, no device involved); a
runtime binds that program to any device buffers (:meth:`OpPlan.lower`, what the
graph compiler does with its own buffers), while :meth:`OpPlan.run` is the
one-shot path the user API and tests take.

Plans that are structurally identical (same class, config and attributes, e.g. two
ResNet blocks with the same shapes, tiling and requantization) emit the same
program, so :meth:`OpPlan.program` emits it once per process: a bounded cache keyed
by :func:`plan_signature`, the complete description of every attribute of the plan.
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict

import numpy as np

from ...hw.errors import VtakitError
from ...runtime import Program, ProgramBuilder
from ...runtime.launch import LayerLaunch
from .cost.events import program_facts

__all__ = ["OpPlan", "Operand", "plan_signature", "clear_program_cache"]

#: Programs kept by :meth:`OpPlan.program` across plans (least recently used dropped).
PROGRAM_CACHE_SIZE = 64
#: Micro-ops one LOAD UOP of an emitted program may carry: consecutive kernel loads
#: are merged up to this size (:meth:`~vtakit.runtime.ProgramBuilder.coalesce_uop_loads`).
#: Each LOAD costs the compute module an instruction and a wait behind the load
#: module's bursts on the shared read port; a tile loads its own kernels (their SRAM
#: addresses differ by slot). Measured on Verilator against 64: keyword_spotting -0.6%,
#: visual_wake_words -1.1%, image_classification +0.3%, ResNet-18 -0.1%.
UOP_LOAD_RUN = 512
_programs: OrderedDict = OrderedDict()      # plan_signature -> Program


class _Unhashable(VtakitError):
    """A value :func:`_describe` cannot describe completely (the plan is not cached)."""


def _describe(value, depth=0):
    """A hashable value equal for two values exactly when they are the same structure:
    the exact type and the content, recursively. Floats by their bits (-0.0 is not
    0.0), numpy arrays by dtype, shape and bytes, dicts in order, an object of a
    vtakit class by every instance attribute (:func:`_attributes`). Anything else
    (a subclass of a builtin, a function, another library's object) raises
    :class:`_Unhashable`."""
    if depth > 32:
        raise _Unhashable("nested too deep")
    t = type(value)
    if value is None or t in (bool, int, str, bytes):
        return t, value
    if t is float:
        return t, value.hex()
    if t in (tuple, list):
        return t, tuple(_describe(v, depth + 1) for v in value)
    if t is dict:
        return t, tuple((_describe(k, depth + 1), _describe(v, depth + 1))
                        for k, v in value.items())
    if isinstance(value, enum.Enum):
        return t, value.name, _describe(value.value, depth + 1)
    if isinstance(value, np.dtype) and not value.hasobject:
        return t, value.str, str(value.descr)
    if (t is np.ndarray or isinstance(value, np.generic)) and not value.dtype.hasobject:
        return t, _describe(value.dtype), value.shape, value.tobytes()
    return t, _attributes(value, depth)


def _attributes(value, depth, skip=()):
    """Every instance attribute (``__slots__`` and ``__dict__``) of an object whose
    classes are all vtakit's own (plain Python state, nothing held in C)."""
    t = type(value)
    if not all(c is object or c.__module__.split(".")[0] == "vtakit" for c in t.__mro__):
        raise _Unhashable(f"cannot describe a {t.__module__}.{t.__qualname__}")
    names = []
    for c in t.__mro__:
        slots = getattr(c, "__slots__", ())
        for n in (slots,) if isinstance(slots, str) else slots:
            if n.startswith("__") and not n.endswith("__"):     # a private slot's real name
                n = f"_{c.__name__.lstrip('_')}{n}"
            if n not in ("__dict__", "__weakref__"):
                names.append(n)
    items = [(n, getattr(value, n)) for n in names if hasattr(value, n)]
    items += [kv for kv in getattr(value, "__dict__", {}).items() if kv[0] not in skip]
    return tuple((n, _describe(v, depth + 1)) for n, v in items)


def plan_signature(plan) -> tuple | None:
    """What the program of ``plan`` depends on: its class and every attribute of it,
    described by value (:func:`_describe`); two plans with equal signatures emit the
    same program. None if an attribute cannot be described (such a plan is emitted
    every time, never cached)."""
    try:
        return type(plan), plan.name, _attributes(plan, 0, skip=("_program",))
    except _Unhashable:
        return None


#: What :func:`clear_program_cache` also calls: the memos of modules that import this one
#: (:func:`on_clear`; this module may not import them).
_ON_CLEAR: list = []


def on_clear(fn):
    """Have :func:`clear_program_cache` call ``fn`` (a decorator: a module's memo of
    emission or search, emptied with the shared programs)."""
    _ON_CLEAR.append(fn)
    return fn


def clear_program_cache() -> None:
    """Forget the programs :meth:`OpPlan.program` shares across plans (and what emission
    remembers: the loop nests :func:`.loops.fold_loops` folded, the micro-op kernels
    :class:`~vtakit.runtime.UopKernel` built and checked, the instructions
    :meth:`~vtakit.runtime.ProgramBuilder.instructions` encoded, the convolutions' GEMM kernels
    :data:`.conv2d.GEMM_KERNELS` and the epilogues' ALU kernels
    :data:`.epilogue.TILE_KERNELS`; and the event model's predictions shared across
    programs and the conv2d searches' choices): what a never-seen model costs to emit."""
    from ...runtime.builder import clear_encoded
    from ...runtime.kernel import clear_kernel_memo
    from .cost.events import _SHARED_FACTS
    from .epilogue import TILE_KERNELS
    from .loops import _choose_cached, _fold_cached
    _programs.clear()
    _fold_cached.cache_clear()
    _choose_cached.cache_clear()
    clear_kernel_memo()
    clear_encoded()
    TILE_KERNELS.clear()
    _SHARED_FACTS.clear()
    for fn in _ON_CLEAR:
        fn()


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
        one slot per operand, named as in :attr:`operands`; no device is needed. A plan
        with the :func:`plan_signature` of one emitted before shares its program."""
        if self._program is None:
            key = plan_signature(self)
            program = _programs.get(key) if key is not None else None
            if program is None:
                program = self.emit_program()
                if key is not None:
                    _programs[key] = program
                    while len(_programs) > PROGRAM_CACHE_SIZE:
                        _programs.popitem(last=False)
            else:
                _programs.move_to_end(key)
            self._program = program
        return self._program

    def emit_program(self) -> Program:
        """The plan's program freshly emitted (what :meth:`program` caches)."""
        builder = ProgramBuilder(self.config, name=self.name)
        self.emit(builder, {name: builder.slot(name, op.nbytes)
                            for name, op in self.operands.items()})
        builder.coalesce_uop_loads(UOP_LOAD_RUN)
        return builder.build()

    def lower(self, rt, bufs: dict) -> None:
        """Append the operator to ``rt``'s stream with its operands in ``bufs``
        (operand name -> Buffer); no synchronize. Same as
        ``rt.bind(plan.program(), bufs)``."""
        rt.bind(self.program(), bufs)

    def predicted(self) -> float:
        """The layer's predicted cycles: the event model (:mod:`.cost.events`) on the
        kernel's stream bound alone (memoized with the Program). The one figure every
        report shows; a plan's analytic ``estimate`` (:mod:`.cost.search`) only ranks."""
        return program_facts(self.program())[0].cycles

    def roofline(self):
        """The fewest cycles the config allows this layer (a
        :class:`~.cost.roofline.Roofline`); None for a plan without one."""
        return None

    def inspect(self) -> dict:
        """Describe the kernel (its :meth:`program` as a stream of its own, fences and
        FINISH appended); no device is opened.

        Returns
        -------
        dict
            ``instructions`` (count, fences and FINISH included), ``by_opcode``
            (counts by opcode name), ``uops`` (micro-ops staged), ``dram`` (bytes by
            fsim counter name, :func:`.cost.events.stream_traffic`), ``predicted_cycles``
            (:meth:`predicted`).
        """
        program = self.program()
        prediction, dram, by_op = program_facts(program)
        return {"instructions": sum(by_op.values()), "by_opcode": dict(by_op),
                "uops": int(len(program.uops)), "dram": dict(dram),
                "predicted_cycles": prediction.cycles}

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
        """Allocate, upload, lower, synchronize, download and free (the runtime's
        :class:`~vtakit.runtime.launch.LayerLaunch`, every operand staged).

        Returns
        -------
        (numpy.ndarray, RunResult)
            The packed ``out`` operand and the device's run result.
        """
        self.check_packed(packed)
        out = self.operands["out"]
        launch = LayerLaunch(self.program(), self.config, out.shape, out.dtype, resident=False)
        res = launch.run(rt, {}, {n: packed[n] for n in self.operands if n != "out"})
        return res.y, res.run
