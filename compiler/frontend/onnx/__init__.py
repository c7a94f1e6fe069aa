"""ONNX models to the graph IR: :func:`from_onnx`.

Float models become float IR (NCHW, OIHW, Relay op names); QDQ models
(``QuantizeLinear``/``DequantizeLinear`` around float ops, as written by
``onnxruntime.quantization.quantize_static``) and operator-format models
(``QLinearConv``, ``QLinearMatMul``) become the integer *quantized IR form*
shared with the TFLite frontend:

    [nn.pad(x, zx)] -> nn.conv2d/nn.dense(int8, int8 -> int32) -> nn.bias_add(int32)
    -> qnn.requantize(rounding="onnx") -> clip -> cast(int8)

Activations are int8 in the IR: a uint8 ONNX tensor ``u`` with zero point
``z`` is carried exactly as ``u - 128`` with zero point ``z - 128``, and turned
back into uint8 only where it leaves the graph.

How nodes are imported:

* a node whose inputs are all known at compile time (initializers,
  ``Constant``, ``Shape`` of a static tensor, ...) is evaluated right away
  with onnx's own reference implementation, so shape arithmetic (Shape,
  Gather, Unsqueeze, Concat, Cast, Slice, ...) never reaches the IR;
* a DequantizeLinear output stays a *quantized value* (int8 expression plus
  scale and zero point) until an op needs it as float; Conv, Gemm and MatMul
  whose inputs are quantized and whose only consumer is a QuantizeLinear
  (possibly through Relu or Clip) become the integer layer above; MaxPool,
  Reshape, Flatten, Transpose, Identity and Concat (equal parameters) work on
  the int8 values directly; Add, Mul, AveragePool, GlobalAveragePool, Softmax,
  Sigmoid and LeakyRelu between a DequantizeLinear and a QuantizeLinear of the
  same type get the formula of the kernel onnxruntime fuses them into
  (``qnn.add``/``qnn.mul`` rounding ``"onnx"``, the ``qnn.ort_*`` ops and
  ``qnn.lut``, formulas in :mod:`vtakit.runtime.hostops.ort_kernels`), so a
  ``quantize_static`` model equals :func:`~vtakit.compiler.quant.ort_reference.run_reference`
  bit for bit; every other op on quantized values runs in float between
  ``qnn.dequantize`` and ``qnn.quantize`` (the QDQ semantics; for Concat that
  is QLinearConcat's requantization exactly);
* ``If`` becomes an IR ``If`` (or one branch, when the condition is
  constant); ``Loop`` becomes a recursive global function ``@loop_N`` whose
  parameters are the iteration count, the condition, the loop-carried values
  and the outer values the body reads.

* any other standard op runs on the host as ``onnx.reference`` (onnx's reference
  evaluator, :mod:`vtakit.runtime.hostops.onnx_ref`); sequences, optionals, strings
  and training ops are refused in one line (docs/reference/onnx-support.md).

Opsets before 11 are first converted by ``onnx.version_converter``; QDQ models are
imported as the onnxruntime CPU session of class ``ort_cpu`` fuses them
(:func:`vtakit.compiler.quant.ort_reference.ort_graph`). Both are recorded in
``main.attrs["import_notes"]``, which ``vtakit compile --report`` prints.

The package: :mod:`.registry` (values, the converter registry, shared helpers),
:mod:`.importer` (graphs, nodes, :func:`from_onnx`), :mod:`.nn` (float ops),
:mod:`.qdq` (Q/DQ and the integer layers, built by
:func:`vtakit.compiler.quant.layer.quantized_layer`), :mod:`.ort` (onnxruntime's fused
kernels and com.microsoft ops), :mod:`.control_flow` (If, Loop).

The main function's parameters are the graph inputs (same names, dtypes and
shapes; unknown dims are taken from ``shapes`` or default to 1); it returns
the graph output, or a tuple of them in graph order, and records their names
in its ``"output_names"`` attribute.
"""

from __future__ import annotations

from ... import quant  # noqa: F401  (registers the qnn.* operators)
# the converters, registered by their modules' decorators, in dependency order
from . import qdq, ort, nn, control_flow  # noqa: F401,E402
from .importer import from_onnx, supported_ops
from .registry import CONVERT_TO, OPSET_RANGE, OnnxImportError

__all__ = ["from_onnx", "OnnxImportError", "SUPPORTED_OPS", "OPSET_RANGE", "CONVERT_TO"]

#: ONNX op types the importer converts (default domain, then onnxruntime's com.microsoft
#: ops); every other standard op runs in onnx's reference evaluator on the host
SUPPORTED_OPS = supported_ops()
