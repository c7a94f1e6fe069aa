"""FoldExplicitPadding: an ``nn.pad`` feeding a convolution becomes the convolution's own
padding (Relay's pass of the same name).

``nn.conv2d(nn.pad(x, pad_width, pad_value=v), w)`` with padding only on the spatial
axes becomes ``nn.conv2d(x, w, padding=..., pad_value=v)``. Quantized frontends pad
with the input zero point; folded, the convolution runs as one VTA layer (the
lowering corrects the border of VTA's zero padding, see
:mod:`vtakit.compiler.vta.lower`), its input stays where the previous layer left
it, and no padded copy is made.
"""

from __future__ import annotations

import numpy as np

from ..ir import infer_types, is_op as _is_op
from ..ir.expr import Call, Op
from .infra import function_pass
from .rewrite import not_primitive, transform

__all__ = ["FoldExplicitPadding"]


@function_pass(opt_level=0, name="FoldExplicitPadding")
class FoldExplicitPadding:
    """Fold spatial ``nn.pad`` into the ``nn.conv2d`` it feeds (when the convolution has
    no padding of its own or pads with the same value)."""

    def transform_function(self, func, mod, ctx):
        infer_types(func, mod)

        def post(old, new):
            if not (_is_op(new, "nn.conv2d") and _is_op(new.args[0], "nn.pad")):
                return new
            pad, a = new.args[0], new.attrs
            pw = [tuple(int(v) for v in p) for p in pad.attrs["pad_width"]]
            # the value as nn.pad writes it: in the input's dtype
            dtype = old.args[0].args[0].checked_type.dtype
            value = float(np.array(pad.attrs["pad_value"]).astype(dtype))
            if len(pw) != 4 or pw[0] != (0, 0) or pw[1] != (0, 0) or any(v < 0 for p in pw
                                                                        for v in p):
                return new
            if any(a["padding"]) and float(a.get("pad_value", 0.0)) != value:
                return new
            t, l, b, r = a["padding"]
            padding = (t + pw[2][0], l + pw[3][0], b + pw[2][1], r + pw[3][1])
            return Call(new.op, (pad.args[0], new.args[1]),
                        {**a, "padding": padding, "pad_value": value})

        return transform(func, post, descend=not_primitive)
