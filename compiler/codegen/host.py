"""Host primitives: a fused primitive function evaluated with the IR operators' numpy computes.

The compiler serializes a primitive function as a straight-line list of steps
(JSON, deterministic); at load time :func:`host_factory` (registered as the
``"host"`` primitive factory) turns the steps back into a destination-passing
packed function. Operator computes are looked up by name in the IR op registry,
so an executable only needs the modules that register its operators imported
(recorded in its ``requires``).
"""

from __future__ import annotations

import json

from ...runtime.module import FACTORY_PREFIX
from ...runtime.registry import get_global_func, register_func
from ...runtime.vm.objects import flatten
from ..ir import Call, Constant, Function, Let, Op, Tuple, TupleGetItem, Var
from ..ir.op import get_op

__all__ = ["encode_primitive", "host_factory", "HostKernel"]


def _attr(v):
    """An attribute value as JSON (tuples tagged, so they come back as tuples)."""
    if isinstance(v, tuple):
        return {"t": [_attr(x) for x in v]}
    if isinstance(v, list):
        return [_attr(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"attribute value {v!r} cannot be serialized")


def _unattr(v):
    if isinstance(v, dict):
        return tuple(_unattr(x) for x in v["t"])
    if isinstance(v, list):
        return [_unattr(x) for x in v]
    return v


def encode_primitive(func: Function, add_constant) -> tuple[dict, list[str]]:
    """The steps of a primitive function, and the modules defining its operators.

    Parameters
    ----------
    func : Function
        Straight-line body: operator calls, constants, tuples, tuple fields, lets.
    add_constant : callable
        ``add_constant(array) -> index`` in the executable's constant pool.

    Returns
    -------
    (dict, list of str)
    """
    refs: dict = {p: ["p", i] for i, p in enumerate(func.params)}
    steps, modules = [], set()

    def visit(e):
        if e in refs:
            return refs[e]
        if isinstance(e, Constant):
            step = ["const", add_constant(e.data)]
        elif isinstance(e, Call) and isinstance(e.op, Op):
            args = [visit(a) for a in e.args]
            attrs = {k: _attr(v) for k, v in sorted(e.attrs.items())}
            step = ["call", e.op.name, attrs, args]
            mod = getattr(e.op.compute, "__module__", "") or ""
            if mod.startswith("vtakit."):
                modules.add(mod)
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
    return {"params": len(func.params), "steps": steps, "out": out}, sorted(modules)


class HostKernel:
    """A decoded host primitive: runs its steps, writes its outputs (destination passing).

    Parameters
    ----------
    meta : dict
        ``encode_primitive``'s result.
    constants : list of numpy.ndarray
    num_outputs : int
    name : str
    """

    def __init__(self, meta: dict, constants, num_outputs: int, name: str):
        self.name, self.num_params, self.num_outputs = name, int(meta["params"]), num_outputs
        self.steps = []
        for s in meta["steps"]:
            if s[0] == "call":
                op = get_op(s[1])
                attrs = {k: _unattr(v) for k, v in s[2].items()}
                self.steps.append(("call", op.compute, attrs, [tuple(r) for r in s[3]]))
            elif s[0] == "const":
                self.steps.append(("const", constants[s[1]]))
            elif s[0] == "tuple":
                self.steps.append(("tuple", [tuple(r) for r in s[1]]))
            elif s[0] == "get":
                self.steps.append(("get", tuple(s[1]), int(s[2])))
            else:
                raise ValueError(f"host primitive {name!r}: unknown step {s[0]!r}")
        self.out = tuple(meta["out"])

    def __call__(self, *args):
        params = args[:self.num_params]
        vals = []

        def get(ref):
            return params[ref[1]] if ref[0] == "p" else vals[ref[1]]

        for s in self.steps:
            kind = s[0]
            if kind == "call":
                r = s[1](*[get(a) for a in s[3]], **s[2])
                vals.append(tuple(r) if isinstance(r, (tuple, list)) else r)
            elif kind == "const":
                vals.append(s[1])
            elif kind == "tuple":
                vals.append(tuple(get(a) for a in s[1]))
            else:
                vals.append(get(s[1])[s[2]])
        result = get(self.out)
        outs = args[self.num_params:]
        flat = list(flatten(result))
        if len(flat) != len(outs):
            raise ValueError(f"host primitive {self.name!r} produced {len(flat)} outputs, the "
                             f"call passes {len(outs)}")
        for o, r in zip(outs, flat):
            o[...] = r



def host_factory(entry, ctx):
    """The ``"host"`` primitive factory: a :class:`HostKernel` from the entry's metadata."""
    return HostKernel(json.loads(entry.meta), ctx.constants, entry.num_outputs, entry.name)


if get_global_func(FACTORY_PREFIX + "host", allow_missing=True) is None:
    register_func(FACTORY_PREFIX + "host", host_factory)
