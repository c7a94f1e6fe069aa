"""The VTA target described as data: its strategies and its own graph passes.

A :class:`Target` names its layer strategies (``"module:attribute"`` of a
:class:`~.registry.Strategy`, imported when first asked for) and the passes it adds
to the graph pipeline (by registered pass name,
:func:`vtakit.compiler.passes.get_pass`). The order patterns are tried in is each
strategy's declared ``priority``, never an import order: importing the strategy
modules registers nothing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

__all__ = ["Target", "VTA"]


@dataclass(frozen=True)
class Target:
    """A compilation target.

    Attributes
    ----------
    name : str
    strategy_names : tuple of str
        ``"module:attribute"`` of each layer strategy.
    passes : tuple of str
        The target's own graph passes (registered names), run after fusion.
    """

    name: str
    strategy_names: tuple
    passes: tuple = ()

    def strategies(self) -> tuple:
        """The strategies, by ascending priority (two with one priority are an error)."""
        return _load(self.strategy_names)


@cache
def _load(names: tuple) -> tuple:
    found = []
    for name in names:
        module, attr = name.split(":")
        found.append(getattr(importlib.import_module(module), attr))
    found.sort(key=lambda s: s.priority)
    for a, b in zip(found, found[1:]):
        if a.priority == b.priority:
            raise ValueError(f"strategies {a.kind!r} and {b.kind!r} share priority {a.priority}")
    return tuple(found)


#: VTA (HW_VER 0.0.2 and its extensions): every layer kind it runs, and the residual
#: add fused into the convolution feeding it.
VTA = Target(
    "vta",
    strategy_names=(
        "vtakit.compiler.vta.fold:CONV2D",          # 10: conv2d (thin inputs folded)
        "vtakit.compiler.vta.conv:DENSE",           # 20
        "vtakit.compiler.vta.residual:STRATEGY",    # 30: before add (an add of a conv)
        "vtakit.compiler.vta.add:STRATEGY",         # 40
        "vtakit.compiler.vta.dilated:STRATEGY",     # 50
        "vtakit.compiler.vta.pool:MAX_POOL2D",      # 60
        "vtakit.compiler.vta.pool:AVG_POOL2D",      # 70
    ),
    passes=("FuseResidualAdd",),
)
