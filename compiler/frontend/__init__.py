"""Model frontends: files of other frameworks -> :class:`~vtakit.compiler.ir.IRModule`.

* :func:`from_tflite` (:mod:`.tflite`): int8 TFLite flatbuffers.
"""

from .tflite import SUPPORTED_OPS as TFLITE_OPS
from .tflite import TFLiteError, from_tflite

__all__ = ["from_tflite", "TFLiteError", "TFLITE_OPS"]
