"""Quantized inference: the ``qnn.*`` operators and their exact integer arithmetic.

The quantized IR form (shared by the TFLite and ONNX frontends and the VTA
lowering): int8 activations, int8 symmetric weights (per tensor or per output
channel), and each conv/dense layer as

    [nn.pad(x, pad_value=zx)] -> nn.conv2d / nn.dense (int8 x int8 -> int32)
      -> nn.bias_add(bias - zx * sum(w)) -> qnn.requantize(scale, zero_point, rounding)
      -> clip(a_min, a_max) -> cast("int8")

Importing this package registers the operators of :data:`ops.QNN_OPS`
(``qnn.quantize``, ``qnn.dequantize``, ``qnn.requantize``, ``qnn.add``,
``qnn.mul``, ``qnn.avg_pool2d``, ``qnn.mean``) with the IR's op registry. Their
computes and the integer arithmetic under them are the runtime's
(:mod:`vtakit.runtime.hostops`: ``fixed_point``, ``qnn``, ``pool``, ``ort_kernels``),
so a compiled model runs without the compiler; ``fixed_point`` and ``ort_kernels``
are re-exported here.
"""

import numpy as np

from ...runtime.hostops import fixed_point, ort_kernels  # noqa: F401  (re-exported)
from ...runtime.hostops.fixed_point import (multiply_by_quantized_multiplier, quantize_multiplier,
                          requantize_onnx, requantize_tflite, requantize_vta, vta_shift)

__all__ = ["fixed_point", "quantize_multiplier", "multiply_by_quantized_multiplier",
           "requantize_tflite", "requantize_onnx", "requantize_vta", "vta_shift", "QNN_OPS",
           "ROUNDINGS", "activation_range"]


def activation_range(activation: str, scale: float, zero_point: int, dtype: str = "int8"):
    """TFLite's ``CalculateActivationRangeQuantized``: the clip bounds of a fused
    activation (``"NONE"``, ``"RELU"``, ``"RELU6"``, ``"RELU_N1_TO_1"``) on an output
    with ``scale`` and ``zero_point``; ``round(v / scale)`` in float32, half away."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)

    def q(v):
        return int(zero_point) + int(fixed_point.round_half_away(
            np.float32(v) / np.float32(scale)))

    if activation == "NONE":
        return qmin, qmax
    if activation == "RELU":
        return max(qmin, q(0.0)), qmax
    if activation == "RELU6":
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == "RELU_N1_TO_1":
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    raise ValueError(f"activation {activation!r}: expected NONE, RELU, RELU6 or RELU_N1_TO_1")


# Registers the qnn.* operators with the IR's op registry.
from . import ops  # noqa: E402,F401
from . import ort_ops  # noqa: E402,F401
from .ops import QNN_OPS, ROUNDINGS  # noqa: E402
