"""The VTA strategy registry: one registration per VTA operator kind.

TVM's VTA registers its conv2d and dense strategies with the graph compiler; here
each kind of quantized layer that runs on VTA is one :class:`Strategy`:

* ``match(inner, root, clip, out_dtype)``: the pattern. ``inner`` is the expression
  under the layer's final ``clip`` (and ``cast``), ``root`` the layer's root; returns
  a :class:`VTALayer` or None;
* ``plan(layer, shape, w_shape, config)``: how the layer runs for one input shape, a
  :class:`Spec` (the operator library's plan, the host steps before and after it as
  :class:`~vtakit.runtime.vta_layer.HostStep`: a registered host op with its
  attributes and constants, so an executable stores it as data; where and why);
  raises :class:`LoweringError` (or the library's TilingError, ...) when it cannot;
* ``pack(layer, spec, value)``: the plan's constant operands packed in the layout the
  kernel reads (``value(expr)`` gives a weight operand's array);
* ``inputs``: the layer's activation operands besides ``data`` (attribute -> the
  plan's operand slot), staged per call or read in place like ``data``;
* ``unpack(plan, y, x_shape)``: the packed result back in the framework layout (an
  executable records it as the packed activation layout of the layer's output type).

* ``priority``: where its pattern is tried (ascending; the first match wins).

A new operator kind is one module defining its :class:`Strategy` (plus its plan in
:mod:`vtakit.compiler.ops` when the library lacks one) and one line in the target
description (:data:`.target.VTA`); a user's plug-in may be added with
:func:`register_strategy` instead. Every kind runs the same way (direct runs,
executables, reports). Nothing is registered by importing a module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...hw.errors import VtakitError
from ..ir import Call, is_op  # noqa: F401  (is_op re-exported for the strategies)

__all__ = ["Strategy", "VTALayer", "Spec", "LoweringError", "register_strategy", "strategies",
           "get_strategy", "is_op", "int8_store"]


class LoweringError(VtakitError, ValueError):
    """A layer that the operator library cannot run (the graph runs it on the host)."""


@dataclass
class VTALayer:
    """One recognized quantized layer.

    Attributes
    ----------
    kind : str
        The strategy's kind: ``"conv2d"``, ``"dense"``, ``"avg_pool2d"``, ...
    root : Call
        The layer's last call (its value is the layer's output).
    data : Expr
        The layer's input (before any explicit pad).
    attrs : dict
        What the strategy needs: weight and bias (Constant or Var expressions), strides,
        padding (top, left, bottom, right), pad_value, groups, requantize attributes,
        clip (lo, hi), out_dtype, pool_size, ...
    """

    kind: str
    root: Call
    data: object
    attrs: dict = field(default_factory=dict)

    @property
    def strategy(self) -> "Strategy":
        return get_strategy(self.kind)


@dataclass
class Spec:
    """How a layer runs for one input shape: the plan, what the host does before it (on
    the NCHW input) and after it (on the packed result), and where/why for reports."""

    plan: object
    post: object          # None, or a runtime HostStep: f(packed out planes) -> packed result
    border: float | None  # a non-zero pad value, whose border contribution is corrected
    where: str
    why: str
    macs: int = 0
    consts: dict = field(default_factory=dict)   # packed weight operands (filled on use)
    params: tuple = ()    # the weight arrays they were packed from (kept: ids key the cache)
    #: the border correction, packed int32, when the host adds it (filled on use)
    correction: np.ndarray | None = None
    #: (tiling, predicted cycles, estimate cycles, DRAM bytes, roofline) of the plan, for
    #: the records
    #: (filled on use)
    estimate: tuple | None = None
    #: the (rows, O) int32 requantize rows of an exact requantize on VTA (the ALU
    #: extension ``"requant"``)
    requant_rows: np.ndarray | None = None
    #: None, or a runtime HostStep: f(NCHW int8 input) -> the NCHW int8 array the plan
    #: reads as ``data`` (a re-layout such as :mod:`.fold`'s), run on the host before
    #: packing (the input is never read in place from the device then)
    pre: object = None


def _default_unpack(plan, y, x_shape):
    return plan.unpack(y[None])


@dataclass(frozen=True)
class Strategy:
    """One VTA operator kind (see the module docstring)."""

    kind: str
    match: Callable
    plan: Callable
    pack: Callable
    inputs: dict = field(default_factory=dict)
    unpack: Callable = _default_unpack
    #: patterns are tried in ascending priority (the first match wins): declared, so
    #: the order never depends on which module was imported first
    priority: int = 100


#: Strategies a user added (:func:`register_strategy`), beside the target's.
_ADDED: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy, replace: bool = False) -> Strategy:
    """Add a plug-in strategy (a user's, before compiling) to those of the target
    (:data:`.target.VTA`); it is tried in the order of its ``priority``.
    ``replace=True`` replaces the kind's strategy."""
    if not replace and strategy.kind in {s.kind for s in strategies()}:
        raise ValueError(f"a VTA strategy for {strategy.kind!r} is already registered")
    _ADDED[strategy.kind] = strategy
    return strategy


def strategies() -> tuple:
    """The target's strategies (:data:`.target.VTA`) and the added ones, by priority
    (a replaced kind by its replacement)."""
    from .target import VTA
    chosen = {s.kind: s for s in VTA.strategies()}
    chosen.update(_ADDED)
    return tuple(sorted(chosen.values(), key=lambda s: s.priority))


def get_strategy(kind: str) -> Strategy:
    for s in strategies():
        if s.kind == kind:
            return s
    raise LoweringError(f"no VTA strategy for layer kind {kind!r}; registered: "
                        f"{', '.join(s.kind for s in strategies())}")


def int8_store(lo, hi, out_dtype) -> bool:
    """Whether a result clipped to [lo, hi] and cast to ``out_dtype`` is what VTA's int8
    store writes (otherwise the int32 result goes to the host)."""
    return out_dtype is not None and np.dtype(out_dtype) == np.int8 and -128 <= lo <= hi <= 127
