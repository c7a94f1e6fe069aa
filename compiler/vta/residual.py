"""A convolution whose requantized residual add is fused into its epilogue::

    cast(int8) <- clip <- qnn.add(rounding="vta") <- <conv2d layer>, other

the ``<conv2d layer>`` one of :mod:`.conv` (``cast(int8) <- clip <- qnn.requantize
(rounding "vta") <- [nn.bias_add] <- nn.conv2d``, either operand of the add) and
``other`` an int8 tensor of its output's shape (ResNet's shortcut). The primitive
comes from :class:`~vtakit.compiler.passes.residual.FuseResidualAdd`, which merges
the convolution's primitive into the add's when the convolution's output feeds nothing
else and :func:`fusible` says this strategy can run the pair.

The plan is the convolution's (:func:`.conv.conv_spec`: bias, rounding shift and clip
unchanged) with a second epilogue stage
(:class:`~vtakit.compiler.ops.epilogue.ResidualAdd`): SHR by ``-e_a``, ``other`` added
through the int8 residual's identity GEMM with weights ``2^e_b``, ADD of the zero
points' offset and the rounding constant, SHR ``k``, the add's clip. ``other`` is an
activation input (the plan's ``residual`` slot), read in place when the previous
layer left it on the device; the convolution's output never goes to DRAM.
"""

from __future__ import annotations

import numpy as np

from ..ir import Constant, Var
from ..ops.epilogue import EpilogueError, ResidualAdd
from ..quant.ops import add_shifts
from .conv import _vta_exact, conv_spec, match_conv, pack_gemm
from .registry import LoweringError, Spec, Strategy, VTALayer, int8_store, is_op

__all__ = ["fusible", "residual_stage", "STRATEGY"]

KIND = "conv2d_add"


def _conv_layer(e):
    """The conv2d layer rooted at ``e`` (``cast <- clip <- ...``), or None."""
    if not is_op(e, "cast") or not is_op(e.args[0], "clip"):
        return None
    c = e.args[0]
    return match_conv(c.args[0], e, (c.attrs["a_min"], c.attrs["a_max"]), e.attrs["dtype"])


def residual_stage(add_attrs, side: int, clip) -> ResidualAdd:
    """The epilogue's add stage of ``qnn.add`` attributes whose operand ``side`` (0: lhs)
    is the convolution; EpilogueError (or ValueError: scales no powers of two) when
    VTA cannot run it."""
    q = add_attrs
    ea, eb, k = add_shifts(q["lhs_scale"], q["rhs_scale"], q["out_scale"])
    za, zb = int(q["lhs_zero_point"]), int(q["rhs_zero_point"])
    if side == 1:
        ea, eb, za, zb = eb, ea, zb, za
    return ResidualAdd.make(ea, eb, k, (za, zb, int(q["out_zero_point"])), clip,
                            op="conv2d+add")


def _check(conv, add_attrs, side, clip, out_dtype) -> ResidualAdd:
    """The add stage when the strategy runs the pair; LoweringError saying why not."""
    a = conv.attrs
    if add_attrs["rounding"] != "vta":
        raise LoweringError(f"a residual add of rounding {add_attrs['rounding']!r} is no "
                            "power-of-two shift")
    if not int8_store(*clip, out_dtype) or not int8_store(*a["clip"], a["out_dtype"]):
        raise LoweringError("a fused residual add needs int8 stores of the convolution and "
                            "of the add")
    if not _vta_exact(a["requantize"]):
        raise LoweringError("a fused residual add needs the convolution's requantize to "
                            "be a VTA shift")
    try:
        return residual_stage(add_attrs, side, clip)
    except (EpilogueError, ValueError) as e:
        raise LoweringError(str(e)) from None


def fusible(conv_root, add, side: int, clip, out_dtype, data=None) -> bool:
    """Whether ``clip(qnn.add(...))`` cast to ``out_dtype``, whose operand ``side`` is the
    layer rooted at ``conv_root`` (whose input is ``data`` when given), runs as one layer
    of this strategy."""
    conv = _conv_layer(conv_root)
    if conv is None or not is_op(add, "qnn.add") or (data is not None and conv.data is not data):
        return False
    try:
        _check(conv, dict(add.attrs), side, clip, out_dtype)
    except LoweringError:
        return False
    return True


def _match(inner, root, clip, out_dtype):
    if out_dtype is None or not is_op(inner, "qnn.add") or inner.attrs["rounding"] != "vta":
        return None
    for side in (0, 1):
        conv, other = _conv_layer(inner.args[side]), inner.args[1 - side]
        if conv is not None and isinstance(other, (Var, Constant)):
            return VTALayer(KIND, root, conv.data, {
                **conv.attrs, "other": other, "add": dict(inner.attrs), "side": side,
                "add_clip": clip, "add_out_dtype": out_dtype})
    return None


def _spec(layer, shape, w_shape, config) -> Spec:
    a = layer.attrs
    stage = _check(layer, a["add"], a["side"], a["add_clip"], a["add_out_dtype"])
    spec = conv_spec(layer, shape, w_shape, config, residual="int8", add=stage)
    plan = spec.plan
    want = (plan.x_shape[0], plan.w_shape[0], plan.oh, plan.ow)
    t = getattr(a["other"], "checked_type", None)
    got = tuple(np.shape(a["other"].data)) if isinstance(a["other"], Constant) else (
        None if t is None else tuple(int(d) for d in t.shape))
    if got is not None and got != want:
        raise LoweringError(f"a residual add of shapes {list(want)} and {list(got)} "
                            "(broadcasting) is no fused epilogue")
    spec.why += (f"; residual add fused (SHR {-stage.ea}, identity GEMM x{1 << stage.eb}, "
                 f"ADD {stage.offset}, SHR {stage.shift}, clip)")
    return spec


def _pack(layer, spec, value):
    a, plan = layer.attrs, spec.plan
    bias = None if a["bias"] is None else value(a["bias"])
    shape = (plan.x_shape[0], plan.w_shape[0], plan.oh, plan.ow)
    packed = pack_gemm(layer, spec, value(a["weight"]), bias,
                       residual=np.zeros(shape, np.int8))
    del packed["residual"]
    return packed


#: before :data:`.add.STRATEGY`: its pattern is an add of a conv layer
STRATEGY = Strategy(KIND, _match, _spec, _pack, inputs={"other": "residual"}, priority=30)
