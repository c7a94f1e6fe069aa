"""FuseResidualAdd: a convolution's primitive merged into the residual add it feeds.

FuseOps leaves ResNet's residual add in a primitive of its own: ``qnn.add``'s int32
output makes the edge from the convolution a broadcast one, so the convolution's
int8 output goes to DRAM and the add reads it back. After FuseOps, this pass merges
a primitive ``A`` (a quantized conv2d layer) into its consumer ``B`` (``cast <- clip
<- qnn.add(p_i, p_j)`` of two parameters) when ``A``'s output feeds ``B`` only and
:func:`vtakit.compiler.vta.residual.fusible` says the VTA strategy runs the pair (a
power-of-two add, int8 stores, shapes equal, shifts and offset the ALU holds). The
merged primitive takes ``A``'s parameters (the convolution's input first) then
``B``'s other one (the shortcut); its body is ``B``'s with ``A``'s in place of the
parameter. Anything else stays as it is.
"""

from __future__ import annotations

from ..ir import infer_types, is_op as _is_op
from ..ir.expr import Call, Function, Op, Var
from .infra import function_pass
from .rewrite import not_primitive, substitute, transform, user_counts

__all__ = ["FuseResidualAdd"]


def _primitive(e):
    return type(e) is Call and type(e.op) is Function and e.op.is_primitive()


def _add_body(fn):
    """``(add, clip, out_dtype, [i, j])`` when ``fn``'s body is ``cast <- clip <-
    qnn.add`` of two distinct parameters ``params[i]``, ``params[j]``; else None."""
    e = fn.body
    if not (_is_op(e, "cast") and _is_op(e.args[0], "clip") and _is_op(e.args[0].args[0],
                                                                         "qnn.add")):
        return None
    clip, add = e.args[0], e.args[0].args[0]
    idx = [next((i for i, p in enumerate(fn.params) if p is a), None) for a in add.args]
    if None in idx or idx[0] == idx[1]:
        return None
    return add, (clip.attrs["a_min"], clip.attrs["a_max"]), e.attrs["dtype"], idx


def _same_type(a, b) -> bool:
    ta, tb = getattr(a, "checked_type", None), getattr(b, "checked_type", None)
    return (ta is not None and tb is not None and getattr(ta, "dtype", None) == "int8"
            and getattr(tb, "dtype", None) == "int8"
            and tuple(int(d) for d in ta.shape) == tuple(int(d) for d in tb.shape))


def _merge(fa, fb, idx, side):
    """The primitive of ``fa`` (fresh parameters) in place of ``fb``'s parameter
    ``idx[side]``: parameters ``fa``'s then ``fb``'s other one."""
    fresh = [Var(p.name_hint, p.type_annotation) for p in fa.params]
    a_body = substitute(fa.body, dict(zip(fa.params, fresh)))
    keep = fb.params[idx[1 - side]]
    body = substitute(fb.body, {fb.params[idx[side]]: a_body})
    return Function(fresh + [keep], body, fb.ret_type, fb.attrs)


@function_pass(opt_level=0, name="FuseResidualAdd")
class FuseResidualAdd:
    """Merge a conv2d layer's primitive into the residual add primitive that is its only
    user (see the module docstring)."""

    def transform_function(self, func, mod, ctx):
        from ..vta.residual import fusible
        infer_types(func, mod)
        counts = user_counts(func, descend=not_primitive)

        def post(old, new):
            if not _primitive(new) or len(new.args) != 2:
                return new
            found = _add_body(new.op)
            if found is None:
                return new
            add, clip, out_dtype, idx = found
            for side in (0, 1):
                prod_old, prod = old.args[idx[side]], new.args[idx[side]]
                if counts.get(prod_old, 0) != 1 or not _primitive(prod):
                    continue
                fa = prod.op
                if not fa.params or not _same_type(prod_old, old.args[idx[1 - side]]):
                    continue
                if not fusible(fa.body, add, side, clip, out_dtype, data=fa.params[0]):
                    continue
                merged = _merge(fa, new.op, idx, side)
                return Call(merged, tuple(prod.args) + (new.args[idx[1 - side]],))
            return new

        return transform(func, post, descend=not_primitive)
