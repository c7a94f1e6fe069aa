"""Model frontends: files of other frameworks -> :class:`~vtakit.compiler.ir.IRModule`.

* :func:`from_tflite` (:mod:`.tflite`): int8 TFLite flatbuffers.
* :func:`from_onnx` (:mod:`.onnx`): ONNX models, float, QDQ or QLinear (opsets up to 22).
"""

from .onnx import SUPPORTED_OPS as ONNX_OPS
from .onnx import OnnxImportError, from_onnx
from .tflite import SUPPORTED_OPS as TFLITE_OPS
from .tflite import TFLiteError, from_tflite

__all__ = ["from_tflite", "TFLiteError", "TFLITE_OPS", "from_onnx", "OnnxImportError", "ONNX_OPS"]
