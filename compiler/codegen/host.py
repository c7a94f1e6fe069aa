"""Host primitives: the encoder of a fused primitive function's steps.

The compiler serializes a primitive function as a straight-line list of steps
(JSON, deterministic, see :mod:`vtakit.runtime.host`); at load time the runtime's
``"host"`` primitive factory runs them with the host operators registered by name
(:mod:`vtakit.runtime.hostops`), so an executable records no Python module.
"""

from __future__ import annotations

from ...runtime.host import HostKernel, encode_attr, host_factory
from ..ir import Call, Constant, Function, Let, Op, Tuple, TupleGetItem, Var

__all__ = ["encode_primitive", "host_factory", "HostKernel"]


def encode_primitive(func: Function, add_constant) -> dict:
    """The steps of a primitive function.

    Parameters
    ----------
    func : Function
        Straight-line body: operator calls, constants, tuples, tuple fields, lets.
    add_constant : callable
        ``add_constant(array) -> index`` in the executable's constant pool.

    Returns
    -------
    dict
        ``{"params": n, "steps": [...], "out": ref}``.
    """
    refs: dict = {p: ["p", i] for i, p in enumerate(func.params)}
    steps = []

    def visit(e):
        if e in refs:
            return refs[e]
        if isinstance(e, Constant):
            step = ["const", add_constant(e.data)]
        elif isinstance(e, Call) and isinstance(e.op, Op):
            args = [visit(a) for a in e.args]
            attrs = {k: encode_attr(v) for k, v in sorted(e.attrs.items())}
            step = ["call", e.op.name, attrs, args]
        elif isinstance(e, Tuple):
            step = ["tuple", [visit(f) for f in e.fields]]
        elif isinstance(e, TupleGetItem):
            step = ["get", visit(e.tuple_value), e.index]
        elif isinstance(e, Var):
            raise ValueError(f"primitive function uses the free variable %{e.name_hint}")
        else:
            raise ValueError(f"a primitive function may hold only operator calls, constants "
                             f"and tuples, not {type(e).__name__}")
        steps.append(step)
        refs[e] = ["n", len(steps) - 1]
        return refs[e]

    body = func.body
    while isinstance(body, Let):      # an A-normal-form primitive: bind and go on
        refs[body.var] = visit(body.value)
        body = body.body
    out = visit(body)
    return {"params": len(func.params), "steps": steps, "out": out}
