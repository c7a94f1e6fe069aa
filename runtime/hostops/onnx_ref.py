"""``onnx.reference``: one ONNX node run by onnx's own reference evaluator.

The ONNX frontend imports an operator that has no IR counterpart (Split, Slice, Gather,
Tile, Expand, Pow, Resize, Where, LRN, PRelu, Elu, ... on runtime tensors) as this host
operator: the node (its op type and attributes, inputs renamed ``i0, i1, ...``) is kept
serialized in the attributes, and the compute runs it with
:class:`onnx.reference.ReferenceEvaluator` at the node's opset, so the result is by
definition the one the ONNX specification's reference gives. ``onnx`` is a core
dependency of vtakit, so an executable holding such a step runs wherever vtakit does.
"""

from __future__ import annotations

import base64
import functools

import numpy as np

from . import hostop

__all__ = ["onnx_reference", "encode_node"]


def encode_node(node_bytes: bytes) -> str:
    """A serialized ``NodeProto`` as the ``node`` attribute (ASCII)."""
    return base64.b64encode(node_bytes).decode("ascii")


@functools.lru_cache(maxsize=256)
def _evaluator(node: str, opset: int):
    from onnx import NodeProto
    from onnx.reference import ReferenceEvaluator

    proto = NodeProto()
    proto.ParseFromString(base64.b64decode(node))
    return (ReferenceEvaluator(proto, opsets={"": int(opset)}), [n for n in proto.input if n],
            proto.op_type)


@hostop("onnx.reference")
def onnx_reference(*xs, node, opset, index, shape, dtype):
    """Output ``index`` of the serialized ONNX ``node`` on inputs ``xs``, checked to have
    the ``shape`` and ``dtype`` the compiler planned for."""
    ev, names, op_type = _evaluator(node, opset)
    out = np.asarray(ev.run(None, dict(zip(names, xs)))[index])
    if out.shape != tuple(shape) or out.dtype != np.dtype(dtype):
        raise ValueError(f"ONNX {op_type} output {index} is {out.dtype}{list(out.shape)} at "
                         f"run time; the compiled model planned {dtype}{list(shape)} (a shape "
                         f"that depends on the input values is not supported)")
    return out
