"""The cost models of the operator library, in one package without an import cycle.

* :mod:`.geometry`: a convolution in block units (:class:`ConvProblem`), a tiling of
  it (:class:`ConvTiling`) and its loop nest, budgets and covered input positions;
* :mod:`.params`: the parameters of each model (:class:`SearchCost`, :class:`EventCost`
  over the common :class:`CostModel`; :data:`RTL_COST`);
* :mod:`.search`: the analytic estimate of a tiling (:func:`estimate`), what the tile
  search ranks with, and only that;
* :mod:`.events`: the event model of an instruction stream (:func:`predict_stream`,
  :func:`program_prediction`): the ONE predicted figure of a layer, which every plan
  gives as :meth:`~vtakit.compiler.ops.plan.OpPlan.predicted`;
* :mod:`.roofline`: the fewest cycles a config allows a layer
  (:meth:`~vtakit.compiler.ops.plan.OpPlan.roofline`).

Imports run geometry <- params <- search, geometry <- roofline, params <- events; none
of them imports a plan.
"""

from .events import StreamPrediction, predict_stream, program_prediction, stream_traffic
from .geometry import ConvProblem, ConvTiling, covered_positions
from .params import RTL_COST, CostModel, EventCost, SearchCost
from .roofline import Roofline, plan_roofline
from .search import Estimate, estimate

__all__ = ["ConvProblem", "ConvTiling", "covered_positions", "CostModel", "SearchCost", "EventCost", "RTL_COST",
           "Estimate", "estimate", "StreamPrediction", "predict_stream", "program_prediction",
           "stream_traffic", "Roofline", "plan_roofline"]
