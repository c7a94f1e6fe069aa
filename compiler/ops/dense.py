"""int8 dense (fully connected) layers and matrix products on VTA.

The packed dense data layout (N/b, K/c, b, c) is the activation layout with
H = W = 1, so a dense layer is lowered as a 1x1 convolution on a 1x1 image:
the tiler then tiles batch blocks (``tn``), output blocks and input chunks, and
the whole tile is one LOAD per operand and one GEMM instruction whose micro-op
loops cover the reduction.
"""

from __future__ import annotations

import numpy as np

from .conv2d import Conv2dPlan, _residual_kind, assemble_planes
from .epilogue import Epilogue, accumulation_bound
from .layout import unpack_dense_data
from .tiling import SearchCost
from .operands import check_fits, check_operand

__all__ = ["DensePlan", "plan_dense", "dense"]


class DensePlan(Conv2dPlan):
    """A planned dense layer ``(N, K) x (O, K)^T``; operands as :class:`Conv2dPlan`
    with H = W = 1 (same bytes as the dense packed layouts)."""

    name = "dense"

    def __init__(self, config, x_shape, w_shape, *, epilogue: Epilogue = Epilogue(),
                 tiling=None, cost: SearchCost = SearchCost()):
        (n, k), (o, k2) = x_shape, w_shape
        self.dense_shapes = ((int(n), int(k)), (int(o), int(k2)))
        super().__init__(config, (n, k, 1, 1), (o, k2, 1, 1), 1, 0, epilogue=epilogue,
                         tiling=tiling, cost=cost)

    def pack(self, x, w, bias=None, residual=None, requant=None) -> dict:
        """Pack (N, K) int8 data, (O, K) int8 weights, (O,) bias, (N, O) residual,
        (rows, O) requantize rows."""
        x, w = np.asarray(x), np.asarray(w)
        if (x.shape, w.shape) != self.dense_shapes:
            raise ValueError(f"dense: got x{list(x.shape)} w{list(w.shape)}, the plan is for "
                             f"x{list(self.dense_shapes[0])} w{list(self.dense_shapes[1])}")
        res = None if residual is None else np.asarray(residual)[:, :, None, None]
        return super().pack(x[:, :, None, None], w[:, :, None, None], bias, res, requant)

    def unpack(self, out) -> np.ndarray:
        """Packed ``out`` -> (N, O)."""
        n, o = self.dense_shapes[0][0], self.dense_shapes[1][0]
        planes = [unpack_dense_data(pl[:, :, 0, 0], self.config, n, o) for pl in out]
        return planes[0] if len(planes) == 1 else assemble_planes(planes)


def plan_dense(config, x_shape, w_shape, *, bias=False, shift=0, relu=False, clip=None,
               residual=False, out_dtype=np.int8, tiling=None,
               cost: SearchCost = SearchCost(), requant=None, result_bytes=4,
               min_init=None) -> DensePlan:
    """Plan a dense layer without running it (``bias``/``residual`` are flags here;
    ``requant`` an :class:`.epilogue.Requant`; ``min_init`` as for
    :func:`.conv2d.plan_conv2d`)."""
    epi = Epilogue.make(bias=bias, residual=residual, shift=shift, clip=clip, relu=relu,
                        out_dtype=out_dtype, op="dense", requant=requant,
                        result_bytes=result_bytes)
    if min_init is not None:
        epi = epi.with_min_init(min_init[0], accumulation_bound(min_init[1]))
    return DensePlan(config, x_shape, w_shape, epilogue=epi, tiling=tiling, cost=cost)


def dense(rt, x, w, *, bias=None, shift=0, relu=False, clip=None, residual=None,
          out_dtype=np.int8, tiling=None) -> np.ndarray:
    """Run ``y = epilogue(x @ w.T + bias + residual)`` on the device of ``rt``.

    ``x`` is (N, K) int8, ``w`` (O, K) int8, ``bias`` (O,) int32, ``residual`` (N, O);
    the epilogue arguments are those of :func:`conv2d`. Returns (N, O) ``out_dtype``.
    """
    x = check_operand("dense", "x", x, (2,))
    w = check_operand("dense", "w", w, (2,))
    check_fits("dense", rt, x, w)
    plan = plan_dense(rt.config, np.shape(x), np.shape(w), bias=bias is not None,
                      shift=shift, relu=relu, clip=clip, residual=_residual_kind(residual),
                      out_dtype=out_dtype, tiling=tiling, min_init=(bias, w))
    out, _ = plan.run(rt, plan.pack(x, w, bias, residual))
    return plan.unpack(out)
