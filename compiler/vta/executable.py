"""VTA layers in executables: the ``lowerer`` hook of the VM compiler and the primitive
factory that runs a stored layer.

:func:`vm_lowerer` claims every fused primitive whose body is a quantized layer of a
registered strategy (optionally followed by element-wise host ops such as
``qnn.dequantize``) and whose plan fits the config; the layer's Program goes into the
executable's kernel table.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ...runtime.dram import whole_pages
from ..ir import Call, Constant, Op, post_order
from ..ops.epilogue import EpilogueError
from ..ops.layout import LayoutError
from ..ops.tiling import TilingError
from .lower import (LayerRecord, LoweringError, _fill_estimate, layer_spec, lower_layer,
                    match_layer, weight_shape)

__all__ = ["VM_KIND", "split_layer", "vm_lowerer"]

#: Primitive-factory kind of VTA layers in executables ("vtakit.vm.primitive.vta_layer").
VM_KIND = "vta_layer"


def split_layer(body):
    """``(layer, tail)``: the layer inside ``body`` and the element-wise calls applied
    after it (innermost first; each takes the layer's value as its first argument and
    constants otherwise), or ``(None, [])``."""
    tail = []
    e = body
    while True:
        layer = match_layer(e)
        if layer is not None:
            return layer, tail[::-1]
        if (isinstance(e, Call) and isinstance(e.op, Op) and e.args
                and all(isinstance(a, Constant) for a in e.args[1:])
                and e.op.pattern <= 1):       # ELEMWISE or BROADCAST
            tail.append(e)
            e = e.args[0]
            continue
        return None, []


def _apply_tail(y, tail):
    for call in tail:
        y = call.op.compute(y, *[a.data for a in call.args[1:]], **call.attrs)
    return np.asarray(y)


def vm_lowerer(config, report: list | None = None):
    """A ``lowerer`` hook for :func:`vtakit.compiler.codegen.compile_vm`.

    It claims every fused primitive whose body is a quantized layer (optionally
    followed by element-wise host ops such as ``qnn.dequantize``) and whose plan
    fits ``config``; the executable stores the primitive's IR text and the
    ``vta_layer`` factory runs it with :func:`lower_layer` on the VM's runtime.
    ``report`` receives one :class:`LayerRecord` per primitive seen (where it will
    run and why, tiling, predicted cycles, DRAM bytes). The layer's Program goes into
    the executable's kernel table; the factory binds that stored Program (checked
    against the plan it recomputes for packing) rather than lowering again.
    """
    from ..codegen import LoweredPrimitive
    from ..ir import astext
    _register_factory()

    def lower(func):
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
        except (TilingError, EpilogueError, LayoutError, LoweringError, ValueError) as e:
            rec.where, rec.why = "host", f"{type(e).__name__}: {e}"
            if report is not None:
                report.append(rec)
            return None
        plan = spec.plan
        rec.where, rec.why, rec.macs = spec.where, spec.why, spec.macs
        _fill_estimate(rec, plan)
        if report is not None:
            report.append(rec)
        blob = plan.program().to_bytes()
        kernel = f"vta_{layer.kind}_{hashlib.sha1(blob).hexdigest()[:12]}"
        int8 = lambda e: getattr(e.checked_type, "dtype", None) == "int8"  # noqa: E731
        # the run's tensors are staged per call (when not on the device), the rest resident
        inputs = [layer.attrs[a] for a in layer.strategy.inputs]
        staged = {"data", "out", *layer.strategy.inputs.values()}
        dram = {n: whole_pages(op.nbytes) for n, op in plan.operands.items()}
        meta = {"ir": astext(func), "kernel": kernel,
                "dram_weights": sum(v for n, v in dram.items() if n not in staged),
                "dram_scratch": sum(v for n, v in dram.items() if n in staged)}
        return LoweredPrimitive(
            VM_KIND, meta, kernels=[(kernel, blob)], name=f"vta_{layer.kind}",
            device_output=not tail and int8(func.body),
            device_inputs=tuple(int8(p) and (p is layer.data or any(p is e for e in inputs))
                                for p in func.params))
    return lower


def _vta_layer_factory(entry, ctx):
    from ..ir import parse_expr
    func = parse_expr(entry.meta_dict["ir"])
    layer, tail = split_layer(func.body)
    if layer is None:
        raise LoweringError(f"primitive {entry.name}: its IR is not a quantized layer")
    lowered = lower_layer(layer)
    meta = entry.meta_dict
    if "kernel" in meta:
        lowered.program = ctx.program(meta["kernel"])
    lowered.keep_resident()
    ctx.on_close(lowered.release)
    n_in = len(func.params)

    def run(*args):
        ins, out = args[:n_in], args[n_in]
        env = dict(zip(func.params, ins))
        if tail:
            out[...] = _apply_tail(lowered(ctx.runtime, ins[0], env), tail)
        else:
            lowered(ctx.runtime, ins[0], env, out=out)
    return run


def _register_factory():
    from ...runtime.registry import get_global_func, register_func
    name = "vtakit.vm.primitive." + VM_KIND
    if get_global_func(name, allow_missing=True) is None:
        register_func(name, _vta_layer_factory)


_register_factory()
