"""``onnx.reference``: an ONNX node the IR has no operator for, run on the host by onnx's
reference evaluator (compute: :mod:`vtakit.runtime.hostops.onnx_ref`).

Attributes: ``node`` (the serialized ``NodeProto``, inputs renamed), ``opset``, ``index``
(which output), ``shape`` and ``dtype`` (that output's type, known at import time).
"""

from __future__ import annotations

import numpy as np

from ....runtime.hostops import get_hostop
from ..op import REQUIRED, OpPattern, register_op
from ..types import TensorType

__all__: list[str] = []


def _type(types, attrs):
    for i, t in enumerate(types):
        if not isinstance(t, TensorType):
            raise TypeError(f"onnx.reference: argument {i} must be a tensor, got {t!r}")
    return TensorType(attrs["shape"], attrs["dtype"])


register_op("onnx.reference",
            attrs={"node": REQUIRED, "opset": REQUIRED, "index": 0, "shape": REQUIRED,
                   "dtype": REQUIRED},
            infer_type=_type, compute=get_hostop("onnx.reference"), pattern=OpPattern.OPAQUE,
            normalize_attrs=lambda a: {**a, "shape": tuple(int(d) for d in a["shape"]),
                                       "dtype": np.dtype(a["dtype"]).name,
                                       "opset": int(a["opset"]), "index": int(a["index"])})
