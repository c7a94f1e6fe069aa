"""vtakit.compiler: models to VTA executables.

Three parts, imported on demand (``import vtakit.compiler`` loads none of them):

* the graph compiler (TVM's Relay half): the IR :mod:`.ir`, its passes
  :mod:`.passes`, quantization :mod:`.quant`, the frontends :mod:`.frontend`, VM
  code generation :mod:`.codegen`, the network builder :mod:`.nn` and the build
  entry :func:`compile_model` (:mod:`.build_model`);
* the operator library :mod:`.ops` (TVM's TOPI half: plans, operands, epilogues,
  layouts, integer references, schedules), which imports only ``hw`` and
  ``runtime``;
* the VTA lowering :mod:`.vta`: the graph's quantized layers onto the operator
  library.

The operator library's functions (``conv2d``, ``plan_conv2d``, ...) are also
reachable here, as ``vtakit.compiler.conv2d`` etc.
"""

import importlib

_SUBMODULES = {"ir", "nn", "passes", "quant", "frontend", "codegen", "models", "ops", "vta",
               "build_model"}
#: The operator library's API (vtakit.compiler.ops.__all__; a test checks they agree).
_OPS_API = {
    "conv2d", "group_conv2d", "dense", "add", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
    "plan_conv2d", "plan_dense", "plan_add", "plan_pool2d", "plan_avg_pool_gemm",
    "plan_add_gemm", "Conv2dPlan", "DensePlan", "AddPlan", "PoolPlan", "OpPlan", "Operand",
    "assemble_planes", "Epilogue", "EpilogueError", "LayoutError", "ConvProblem", "ConvTiling",
    "CostModel", "Estimate", "TilingError", "search_tiles", "best_tiling", "Roofline",
    "plan_roofline"}

__all__ = sorted(_OPS_API | {"ir", "nn", "passes", "compile_model"})


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "compile_model":
        from .build_model import compile_model
        return compile_model
    if name in _OPS_API:
        return getattr(importlib.import_module(".ops", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
