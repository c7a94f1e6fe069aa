"""vtakit.compiler.ops: the operator library (TVM's TOPI half), over ``hw`` and ``runtime`` only.

Every function takes a :class:`vtakit.runtime.Runtime` and framework-layout numpy
arrays:

* :func:`conv2d`, :func:`group_conv2d`, :func:`dense`: int8 x int8 with a fused
  epilogue (bias, residual, rounding shift, ReLU/clip), int8 (or int32) result; their
  plans also take TFLite's exact requantize (:class:`Requant`) on a config with the
  ALU extension ``"requant"``;
* :func:`add`, :func:`max_pool2d`, :func:`avg_pool2d`, :func:`global_avg_pool2d`
  (add and average pooling run on the GEMM core by default, ``engine="alu"`` on
  the ALU; max pooling on the ALU);
* ``plan_*`` functions return plans (:class:`Conv2dPlan`, ...) whose ``program()``
  is the kernel as a device-independent :class:`vtakit.runtime.Program` (one
  buffer slot per packed DRAM operand, named as in ``operands``), whose
  ``lower(rt, bufs)`` binds it into a runtime's stream with caller-owned buffers
  and whose ``estimate`` is the cost model's prediction; :func:`search_tiles`
  ranks tilings; :func:`plan_roofline` gives a plan's :class:`Roofline` (the fewest
  cycles the config allows it, :mod:`.roofline`).

Integer references of every operator are in :mod:`.reference`, layout packing in
:mod:`.layout`, the schedules in :mod:`.tiling` (tile search and cost model),
:mod:`.loops` (loop folding) and :mod:`.tokens` (dependency tokens between units).
The graph compiler reaches this library only through :mod:`vtakit.compiler.vta`.
"""

from .conv2d import Conv2dPlan, assemble_planes, conv2d, group_conv2d, plan_conv2d
from .dense import DensePlan, dense, plan_dense
from .elementwise import AddPlan, add, plan_add, plan_add_gemm
from .epilogue import Epilogue, EpilogueError, Requant
from .layout import LayoutError
from .plan import OpPlan, Operand
from .pool import (PoolPlan, avg_pool2d, global_avg_pool2d, max_pool2d, plan_avg_pool_gemm,
                   plan_pool2d)
from .roofline import Roofline, plan_roofline
from .tiling import (ConvProblem, ConvTiling, CostModel, Estimate, EventCost, SearchCost,
                     TilingError, best_tiling, search_tiles)

__all__ = [
    "conv2d", "group_conv2d", "dense", "add", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
    "plan_conv2d", "plan_dense", "plan_add", "plan_pool2d", "plan_avg_pool_gemm",
    "plan_add_gemm",
    "Conv2dPlan", "DensePlan", "AddPlan", "PoolPlan", "OpPlan", "Operand", "assemble_planes",
    "Epilogue", "EpilogueError", "Requant", "LayoutError",
    "ConvProblem", "ConvTiling", "CostModel", "SearchCost", "EventCost", "Estimate", "TilingError", "search_tiles",
    "best_tiling", "Roofline", "plan_roofline",
]
