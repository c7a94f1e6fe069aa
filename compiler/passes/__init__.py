"""vtakit.compiler.passes: the pass infrastructure and the graph-IR passes.

Infrastructure (:mod:`.infra`): :class:`PassContext` (opt_level, required,
disabled, config, instruments), :class:`Sequential`, :func:`module_pass`,
:func:`function_pass`, :class:`PassTimingInstrument`, :class:`DumpIR`, the
registry (:func:`get_pass`, :func:`list_passes`).

Passes (each ``Pass()(mod) -> mod``): :func:`InferType`,
:func:`RemoveUnusedFunctions`, :func:`ToANormalForm`,
:func:`ToBasicBlockNormalForm`, :func:`EliminateCommonSubexpr`,
:func:`DeadCodeElimination`, :func:`FoldConstant`, :func:`SimplifyInference`,
:func:`FoldScaleAxis`, :func:`FuseOps`, :func:`FuseResidualAdd`, :func:`LambdaLift`,
:func:`InlinePrimitives`; pipelines :func:`default_pipeline`,
:func:`optimize_pipeline`, :func:`vm_pipeline`.
"""

from .basic import (DeadCodeElimination, EliminateCommonSubexpr, FoldConstant, InferType,
                    RemoveUnusedFunctions)
from .fuse_ops import FuseOps, fuse_function
from .infra import (DumpIR, FunctionPass, ModulePass, Pass, PassContext, PassInfo,
                    PassInstrument, PassTimingInstrument, Sequential, function_pass, get_pass,
                    list_passes, module_pass, register_pass)
from .lifting import InlinePrimitives, LambdaLift
from .normal_form import ToANormalForm, ToBasicBlockNormalForm
from .padding import FoldExplicitPadding
from .residual import FuseResidualAdd
from .pipeline import default_pipeline, optimize_pipeline, vm_pipeline
from .simplify import FoldScaleAxis, SimplifyInference

__all__ = [
    "PassContext", "PassInfo", "Pass", "ModulePass", "FunctionPass", "Sequential",
    "PassInstrument", "PassTimingInstrument", "DumpIR", "module_pass", "function_pass",
    "register_pass", "get_pass", "list_passes",
    "InferType", "RemoveUnusedFunctions", "ToANormalForm", "ToBasicBlockNormalForm",
    "EliminateCommonSubexpr", "DeadCodeElimination", "FoldConstant", "SimplifyInference",
    "FoldScaleAxis", "FoldExplicitPadding", "FuseOps", "fuse_function", "FuseResidualAdd", "LambdaLift",
    "InlinePrimitives",
    "default_pipeline", "optimize_pipeline", "vm_pipeline",
]
