"""vtakit.compiler.vta: the graph IR's quantized layers lowered onto the operator library.

One strategy per VTA operator kind (:mod:`.registry`: pattern, plan, constant packing,
priority), defined by :mod:`.conv` (conv2d, dense; :mod:`.fold` plans conv2d with thin
inputs folded), :mod:`.dilated`, :mod:`.pool` (average and max pooling), :mod:`.add`
and :mod:`.residual` (a convolution with the residual add it feeds fused into its
epilogue), and listed, with the target's own passes, by the target description
(:mod:`.target`). :mod:`.layers` matches and plans a layer; :mod:`.executable` claims
layers for executables (:func:`vm_lowerer`); :mod:`.lower` runs one directly on a
runtime (:func:`lower_layer`, :func:`run_graph`) through the runtime's launcher.
"""

from .executable import VM_KIND, vm_lowerer
from .layers import split_layer
from .lower import (LayerRecord, LoweringError, VTALayer, function_roofline, layer_spec,
                    lower_layer, lower_primitive, match_layer, requantize_cost, run_graph,
                    weight_shape)
from .registry import Spec, Strategy, register_strategy, strategies
from .target import VTA, Target

__all__ = ["VTALayer", "LayerRecord", "match_layer", "split_layer", "lower_layer",
           "lower_primitive", "vm_lowerer", "VM_KIND", "run_graph", "requantize_cost",
           "function_roofline", "layer_spec", "weight_shape", "LoweringError", "Strategy",
           "Spec", "register_strategy", "strategies", "Target", "VTA"]
