"""VTA layers in executables: the ``lowerer`` hook of the VM compiler.

:func:`vm_lowerer` claims every fused primitive whose body is a quantized layer of a
registered strategy (optionally followed by element-wise host ops such as
``qnn.dequantize``) whose weights are constants and whose plan fits the config. It
plans the layer once, here: the Program goes into the executable's kernel table, the
weights packed by the strategy into its constant pool, and the rest (operand slots,
host steps, unpacking) into the primitive's metadata, which the runtime's
``vta_layer`` factory (:mod:`vtakit.runtime.vta_layer`, where the schema is) runs
without the compiler.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import multiprocessing
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ...runtime.cpus import usable_cpus
from ...runtime.dram import whole_pages
from ...runtime.vta_layer import KIND, HostStep
from ..ir import Call, Constant, Op, post_order
from ..ops.epilogue import EpilogueError
from ..ops.layout import LayoutError
from ..ops.tiling import TilingError
from .layers import LayerRecord, fill_estimate, layer_spec, split_layer, weight_shape
from .registry import LoweringError

__all__ = ["VM_KIND", "split_layer", "vm_lowerer", "lower_in_workers", "compile_jobs",
           "COMPILE_JOBS_ENV"]

#: Primitive-factory kind of VTA layers in executables ("vtakit.vm.primitive.vta_layer").
VM_KIND = KIND


def _value(e):
    """A weight operand's array (the lowerer claims layers with constant weights only)."""
    if not isinstance(e, Constant):
        raise LoweringError(f"operand %{getattr(e, 'name_hint', '?')} is no constant: its "
                            "packing would depend on the run")
    return e.data


class _Constants:
    """The layer's constant arrays, in the order the VM compiler pools them."""

    def __init__(self):
        self.arrays = []

    def add(self, array) -> int:
        self.arrays.append(np.asarray(array))
        return len(self.arrays) - 1


def _layer_meta(func, layer, tail, spec, rec, kernel):
    """The ``vta_layer`` metadata (see :mod:`vtakit.runtime.vta_layer`) and the arrays."""
    plan, strategy, consts = spec.plan, layer.strategy, _Constants()
    packed = strategy.pack(layer, spec, _value)     # fills spec.post's border correction
    params = list(func.params)

    def ref(e):
        if any(e is p for p in params):
            return ["p", next(i for i, p in enumerate(params) if e is p)]
        return ["c", consts.add(_value(e))]

    inputs = [["data", ref(layer.data)]] + [[slot, ref(layer.attrs[attr])]
                                            for attr, slot in strategy.inputs.items()]
    weights = [[slot, consts.add(a)] for slot, a in packed.items()]
    out = plan.operands["out"]
    shape = tuple(int(d) for d in layer.root.checked_type.shape)
    dtype = layer.attrs.get("out_dtype")
    staged = {"data", "out", *strategy.inputs.values()}
    dram = {n: whole_pages(op.nbytes) for n, op in plan.operands.items()}
    roofline = None if rec.roofline is None else dataclasses.asdict(rec.roofline)
    meta = {
        "kernel": kernel, "inputs": inputs, "weights": weights,
        "out": {"shape": [int(d) for d in out.shape], "dtype": np.dtype(out.dtype).name},
        "post": None if spec.post is None else spec.post.encode(consts.add),
        "unpack": {"n": shape[0], "c": shape[1], "shape": list(shape),
                   "dtype": None if dtype is None else np.dtype(dtype).name},
        "tail": [HostStep(c.op.name, c.attrs, [a.data for a in c.args[1:]]).encode(consts.add)
                 for c in tail],
        "dram_weights": sum(v for n, v in dram.items() if n not in staged),
        "dram_scratch": sum(v for n, v in dram.items() if n in staged),
        "layer": {"kind": layer.kind, "where": rec.where, "why": rec.why, "macs": rec.macs,
                  # the analytic estimate under its 1.0 name (format unchanged); reports
                  # predict a kernel with the event model (OpPlan.predicted)
                  "tiling": rec.tiling, "predicted_cycles": rec.estimate_cycles,
                  "dram_bytes": rec.dram_bytes, "roofline": roofline},
    }
    if spec.pre is not None:
        meta["pre"] = spec.pre.encode(consts.add)
    return meta, consts.arrays


def vm_lowerer(config, report: list | None = None):
    """A ``lowerer`` hook for :func:`vtakit.compiler.codegen.compile_vm`.

    It claims every fused primitive whose body is a quantized layer (optionally
    followed by element-wise host ops such as ``qnn.dequantize``) with constant
    weights whose plan fits ``config``, and returns it as data: the Program, the
    packed weights and the metadata of a ``vta_layer`` primitive. ``report`` receives
    one :class:`LayerRecord` per primitive seen (where it will run and why, tiling,
    predicted cycles, DRAM bytes).
    """
    from ..codegen import LoweredPrimitive
    ahead = {}      # id(function) -> (what lower returned, its report records), prefetched

    def claims(func) -> bool:
        layer, _ = split_layer(func.body)
        return layer is not None and layer.data is func.params[0]

    def lower(func):
        got = ahead.pop(id(func), None)
        if got is None:
            return lower_here(func)
        if report is not None:
            report.extend(got[1])
        return got[0]

    def prefetch(funcs):
        """Lower the layers among ``funcs`` in worker processes
        (:func:`lower_in_workers`); :func:`lower` then returns what a worker made."""
        ahead.update(lower_in_workers(lower_here, [f for f in funcs if claims(f)], report))

    def lower_here(func):
        layer, tail = split_layer(func.body)
        if layer is None or layer.data is not func.params[0]:
            if report is not None and func.params:
                ops = [n.op.name for n in post_order(func.body)
                       if isinstance(n, Call) and isinstance(n.op, Op)]
                t = func.params[0].checked_type
                report.append(LayerRecord(
                    "+".join(dict.fromkeys(ops)) or "host", tuple(getattr(t, "shape", ())),
                    "host", "not a quantized conv/dense/pool layer: numpy on the host"))
            return None
        shape = tuple(func.params[0].checked_type.shape)
        rec = LayerRecord(layer.kind, shape, "vta", "")
        try:
            spec = layer_spec(layer, shape, weight_shape(layer), config)
            plan = spec.plan
            rec.where, rec.why, rec.macs = spec.where, spec.why, spec.macs
            fill_estimate(rec, plan)
            blob = plan.program().to_bytes()
            kernel = f"vta_{layer.kind}_{hashlib.sha1(blob).hexdigest()[:12]}"
            meta, arrays = _layer_meta(func, layer, tail, spec, rec, kernel)
        except (TilingError, EpilogueError, LayoutError, LoweringError, ValueError) as e:
            rec = LayerRecord(layer.kind, shape, "host", f"{type(e).__name__}: {e}")
            if report is not None:
                report.append(rec)
            return None
        if report is not None:
            report.append(rec)
        int8 = lambda e: getattr(e.checked_type, "dtype", None) == "int8"  # noqa: E731
        inputs = [layer.attrs[a] for a in layer.strategy.inputs]
        # a pre step re-lays the input out on the host: it arrives as a host array
        data = layer.data if spec.pre is None else None
        return LoweredPrimitive(
            VM_KIND, meta, kernels=[(kernel, blob)], constants=arrays,
            name=f"vta_{layer.kind}", device_output=not tail and int8(func.body),
            device_inputs=tuple(int8(p) and (p is data or any(p is e for e in inputs))
                                for p in func.params))
    lower.prefetch = prefetch
    return lower


#: Environment variable: how many processes lower a model's VTA layers (1: this process
#: alone; default: the CPUs this process may run on).
COMPILE_JOBS_ENV = "VTAKIT_COMPILE_JOBS"
#: Fewer VTA layers than this are lowered in this process (a worker costs a fork).
MIN_PARALLEL_LAYERS = 4
#: Without ``$VTAKIT_COMPILE_JOBS``, fewer VTA layers than this are lowered in this
#: process: the memos a compile fills (programs, searches, predictions) stay in the
#: process that did the work, so a worker's are lost when it ends, and a process that
#: compiles the same smaller models again and again (a notebook, the test suite) is
#: faster lowering them itself (keyword spotting, 11 layers: 5.2 s with two workers,
#: 7.0 s in one process the first time, far less the next).
DEFAULT_PARALLEL_LAYERS = 24
#: Runs of neighbouring layers each worker takes, about (see :func:`lower_in_workers`).
CHUNKS_PER_JOB = 4
_WORK = None        # (lower, functions, report) the forked workers read


def compile_jobs() -> int:
    """The processes :func:`lower_in_workers` may use: ``$VTAKIT_COMPILE_JOBS`` (a whole
    number >= 1), else the CPUs this process may run on."""
    value = os.environ.get(COMPILE_JOBS_ENV, "").strip()
    if not value:
        return usable_cpus()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{COMPILE_JOBS_ENV}={value!r}: expected a whole number of "
                         "processes >= 1 (1 lowers every layer in this process)")
    return int(value)


def _can_fork() -> bool:
    """Workers are forked (they inherit the model and the lowerer, nothing is pickled on
    the way in): only on Linux, from a process with no other Python thread (a thread
    holding a lock at the fork would leave it held in the child) that is not a daemon
    (which may have no children: e.g. a multiprocessing pool's worker)."""
    return (sys.platform.startswith("linux") and threading.active_count() == 1
            and not multiprocessing.current_process().daemon)


def _lower_one(i):
    lower, funcs, report = _WORK
    n = len(report) if report is not None else 0
    try:
        got = lower(funcs[i])
    except Exception:           # lowered again in the parent, which raises it as usual
        return i, False, None, []
    return i, True, got, ([] if report is None else report[n:])


def lower_in_workers(lower, funcs, report) -> dict:
    """``{id(f): (lower(f), the report records it added)}`` for ``funcs`` lowered in
    :func:`compile_jobs` forked worker processes, in runs of neighbouring functions
    (about :data:`CHUNKS_PER_JOB` a worker, in the order given); the lowering is
    deterministic, so each result is what ``lower`` makes
    in this process. A function whose lowering raised is left out (lowered here again,
    where its error is raised). Empty (everything is then lowered here) with fewer than
    :data:`MIN_PARALLEL_LAYERS` functions (:data:`DEFAULT_PARALLEL_LAYERS` when
    ``$VTAKIT_COMPILE_JOBS`` is not set), one job, where workers cannot be forked, or
    when the pool fails (a worker died, a result could not be sent back)."""
    global _WORK
    jobs = min(compile_jobs(), len(funcs))
    least = (MIN_PARALLEL_LAYERS if os.environ.get(COMPILE_JOBS_ENV, "").strip()
             else DEFAULT_PARALLEL_LAYERS)
    if jobs < 2 or len(funcs) < least or not _can_fork():
        return {}
    _WORK = (lower, funcs, report)
    # the model's objects out of the workers' garbage collections: a collection touching
    # them would copy their pages into each worker
    gc.freeze()
    try:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            # runs of neighbouring layers (a ResNet stage's blocks) in one worker, whose
            # memos then serve them all; several runs a worker for balance
            results = list(pool.map(_lower_one, range(len(funcs)),
                                    chunksize=max(1, len(funcs) // (CHUNKS_PER_JOB * jobs))))
    except Exception:           # the pool's own failure: lower every function here
        return {}
    finally:
        gc.unfreeze()
        _WORK = None
    return {id(funcs[i]): (got, records) for i, ok, got, records in results if ok}
