"""Model frontends: files of other frameworks to the graph IR."""

from .onnx import OnnxImportError, from_onnx

__all__ = ["from_onnx", "OnnxImportError"]
