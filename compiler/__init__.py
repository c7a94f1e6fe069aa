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
__all__ = ["ir", "nn", "passes", "ops", "vta", "compile_model"]


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "compile_model":
        from .build_model import compile_model
        return compile_model
    if not name.startswith("_"):                # the operator library's API (ops.__all__)
        ops = importlib.import_module(".ops", __name__)
        if name in ops.__all__:
            return getattr(ops, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
