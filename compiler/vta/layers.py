"""Quantized layers recognized and planned: the compiler's side of a VTA layer.

A *layer* is a chain the frontends produce, rooted at its final ``cast``/``clip``;
each kind is one strategy (:mod:`.registry`, listed by :mod:`.target`).
:func:`match_layer` recognizes one, :func:`split_layer` one followed by element-wise
host ops, :func:`layer_spec` plans it for an input shape (a
:class:`~.registry.Spec`: the operator library's plan and its host steps), and a
:class:`LayerRecord` says where it runs, why and what it is predicted to cost.
Running a planned layer is the runtime's (:class:`vtakit.runtime.launch.LayerLaunch`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Call, Constant, Op
from ..ops.roofline import Roofline, plan_roofline
from .registry import Spec, VTALayer, is_op, strategies

__all__ = ["LayerRecord", "match_layer", "split_layer", "weight_shape", "layer_spec",
           "fill_estimate", "function_roofline"]


def match_layer(expr) -> VTALayer | None:
    """The layer rooted at ``expr``, or None when ``expr`` does not end one: the first
    registered strategy whose pattern matches what lies under the final clip (and cast)."""
    out_dtype = None
    e = expr
    if is_op(e, "cast"):
        out_dtype = e.attrs["dtype"]
        e = e.args[0]
    if not is_op(e, "clip"):
        return None
    clip = (e.attrs["a_min"], e.attrs["a_max"])
    for strategy in strategies():
        layer = strategy.match(e.args[0], expr, clip, out_dtype)
        if layer is not None:
            return layer
    return None


def weight_shape(layer: VTALayer, value=None):
    """The shape of the layer's weight (an add's: its second operand's), None without one;
    ``value(expr)`` gives an operand's array when it is no typed expression."""
    w = layer.attrs.get("weight", layer.attrs.get("other"))
    if w is None:
        return None
    if isinstance(w, Constant):
        return tuple(w.data.shape)
    t = getattr(w, "checked_type", None)
    if t is not None and value is None:
        return tuple(t.shape)
    return tuple(np.shape(value(w)))


def layer_spec(layer: VTALayer, shape, w_shape, config) -> Spec:
    """Plan ``layer`` for input ``shape`` with its strategy (raises TilingError,
    LoweringError, ...); ``w_shape`` is :func:`weight_shape`."""
    return layer.strategy.plan(layer, tuple(int(d) for d in shape), w_shape, config)


@dataclass
class LayerRecord:
    """Where one layer ran, why, and what it cost."""

    kind: str
    shape: tuple
    where: str                       # "vta", "vta+host" (exact requantize on the host), "host"
    why: str
    tiling: str = ""
    #: the event model's cycles of the layer's kernel (:meth:`~vtakit.compiler.ops.plan.
    #: OpPlan.predicted`): the one predicted figure every report shows
    predicted_cycles: float = 0.0
    dram_bytes: int = 0
    cycles: int = -1
    host_seconds: float = 0.0
    macs: int = 0
    dram_bytes_run: int = 0          # measured: the device's load/store byte counters
    roofline: object = None          # the plan's Roofline (vtakit.compiler.ops.cost.roofline)
    #: the planner's analytic estimate (:mod:`vtakit.compiler.ops.cost.search`), what the
    #: tile search ranked with (the event model's figure for plans without a search)
    estimate_cycles: float = 0.0


def _describe_tiling(plan):
    if getattr(plan, "stream", ()):      # a dense layer's streamed schedule
        return f"streamed: tiles of {list(plan.stream)} output blocks, weights resident"
    if hasattr(plan, "describe_tiling"):  # a plan's own schedule (a streamed global pool)
        return plan.describe_tiling()
    t = getattr(plan, "tiling", None)
    return "" if t is None else repr(t)


def fill_estimate(rec, plan, spec=None):
    """The record's tiling, predicted cycles (:meth:`~vtakit.compiler.ops.plan.OpPlan.
    predicted`, the event model), analytic estimate, DRAM bytes and roofline from
    ``plan``; kept in ``spec`` (a plan's figures do not change), so a layer run again
    reuses them."""
    if spec is not None and spec.estimate is not None:
        (rec.tiling, rec.predicted_cycles, rec.estimate_cycles, rec.dram_bytes,
         rec.roofline) = spec.estimate
        return
    rec.tiling, rec.roofline = _describe_tiling(plan), plan_roofline(plan)
    rec.predicted_cycles = float(plan.predicted())
    est = None if getattr(plan, "stream", ()) else getattr(plan, "estimate", None)
    if est is not None:
        rec.estimate_cycles = float(est.cycles)
        rec.dram_bytes = int(est.read_bytes + est.write_bytes)
    else:
        info = plan.inspect()
        rec.estimate_cycles = float(info["predicted_cycles"])
        rec.dram_bytes = int(sum(info["dram"].values()))
    if spec is not None:
        spec.estimate = (rec.tiling, rec.predicted_cycles, rec.estimate_cycles,
                         rec.dram_bytes, rec.roofline)


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



def function_roofline(func, config) -> Roofline | None:
    """The roofline of a VTA layer primitive (a typed :class:`~vtakit.compiler.ir.Function`
    whose body is a quantized layer, as :func:`.executable.vm_lowerer` claims); None when
    the body is no VTA layer or does not fit ``config``."""
    layer, _ = split_layer(func.body)
    if layer is None or not func.params or layer.data is not func.params[0]:
        return None
    try:
        return plan_roofline(layer_spec(layer, func.params[0].checked_type.shape,
                                        weight_shape(layer), config).plan)
    except ValueError:          # TilingError, LoweringError, ...: the layer runs on the host
        return None
