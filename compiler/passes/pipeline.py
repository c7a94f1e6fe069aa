"""The standard pass sequences."""

from __future__ import annotations

from .basic import (DeadCodeElimination, EliminateCommonSubexpr, FoldConstant, InferType,
                    RemoveUnusedFunctions)
from .fuse_ops import FuseOps
from .infra import Sequential, get_pass
from .lifting import InlinePrimitives, LambdaLift
from .padding import FoldExplicitPadding
from .residual import FuseResidualAdd  # noqa: F401  (VTA's pass, by name below)
from .normal_form import ToANormalForm
from .simplify import FoldScaleAxis, SimplifyInference

__all__ = ["default_pipeline", "optimize_pipeline", "vm_pipeline"]


def optimize_pipeline() -> Sequential:
    """Graph optimizations (Relay's build order): inference simplification, constant
    folding, explicit padding into convolutions, scale folding into weights, CSE, DCE."""
    return Sequential([
        RemoveUnusedFunctions(), InferType(), SimplifyInference(), FoldConstant(),
        FoldExplicitPadding(),
        FoldScaleAxis(), FoldConstant(), EliminateCommonSubexpr(), DeadCodeElimination(),
        InferType(),
    ], name="optimize")


def vm_pipeline(target_passes=("FuseResidualAdd",)) -> Sequential:
    """What the VM compiler needs after fusion: the target's own passes (registered
    names; the default is VTA's, :data:`vtakit.compiler.vta.target.VTA`: residual adds
    merged into the convolution feeding them, :class:`FuseResidualAdd`), A-normal form,
    primitive functions at their call sites, local functions lifted to globals, types
    filled in."""
    return Sequential([
        *(get_pass(name)() for name in target_passes),
        ToANormalForm(), InlinePrimitives(), LambdaLift(), InlinePrimitives(), InferType(),
    ], name="vm_lowering")


def default_pipeline() -> Sequential:
    """``optimize_pipeline()`` then FuseOps: the graph the code generators consume.

    Under the current PassContext (opt_level 2 by default; FoldScaleAxis and
    EliminateCommonSubexpr are level 3).  Follow with :func:`vm_pipeline` for the VM.
    """
    return Sequential([optimize_pipeline(), FuseOps(), InferType()], name="default")
