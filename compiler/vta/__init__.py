"""vtakit.compiler.vta: the graph IR's quantized layers lowered onto the operator library.

:mod:`.lower` recognizes a layer in the IR (:func:`match_layer`), plans it with
:mod:`vtakit.compiler.ops` and runs it on a runtime (:func:`lower_layer`,
:func:`run_graph`), or claims it for an executable (:func:`vm_lowerer`).
"""

from .lower import (VM_KIND, LayerRecord, LoweringError, VTALayer, function_roofline,
                    lower_layer, lower_primitive, match_layer, requantize_cost, run_graph,
                    split_layer, vm_lowerer)

__all__ = ["VTALayer", "LayerRecord", "match_layer", "split_layer", "lower_layer",
           "lower_primitive", "vm_lowerer", "VM_KIND", "run_graph", "requantize_cost",
           "function_roofline", "LoweringError"]
