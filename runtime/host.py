"""Host primitives: straight-line steps over the registered host operators.

The compiler (:mod:`vtakit.compiler.codegen.host`) serializes a fused primitive
function as a list of steps (JSON, deterministic); at load time :func:`host_factory`,
the ``"host"`` primitive factory, turns them into a destination-passing packed
function. A ``call`` step names an operator; its compute is the function registered
under that name (:mod:`vtakit.runtime.hostops`), so an executable needs no compiler
module to run. Steps (``ref`` is ``["p", i]``, parameter ``i``, or ``["n", j]``, the
value of step ``j``)::

    ["call", op name, {attribute: value}, [ref, ...]]
    ["const", constant-pool index]
    ["tuple", [ref, ...]]
    ["get", ref, field index]

Attribute values are JSON, tuples tagged as ``{"t": [...]}`` (:func:`encode_attr`).
"""

from __future__ import annotations

import json

from .hostops import get_hostop
from .hosttime import timed
from .module import PrimitiveError
from .vm.objects import flatten

__all__ = ["HostKernel", "host_factory", "encode_attr", "decode_attr"]


def encode_attr(v):
    """An attribute value as JSON (tuples tagged, so they come back as tuples)."""
    if isinstance(v, tuple):
        return {"t": [encode_attr(x) for x in v]}
    if isinstance(v, list):
        return [encode_attr(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"attribute value {v!r} cannot be serialized")


def decode_attr(v):
    """The inverse of :func:`encode_attr`."""
    if isinstance(v, dict):
        return tuple(decode_attr(x) for x in v["t"])
    if isinstance(v, list):
        return [decode_attr(x) for x in v]
    return v


def decode_attrs(attrs: dict) -> dict:
    return {k: decode_attr(v) for k, v in attrs.items()}


class HostKernel:
    """A decoded host primitive: runs its steps, writes its outputs (destination passing).

    Parameters
    ----------
    meta : dict
        ``{"params": n, "steps": [...], "out": ref}`` (see the module docstring).
    constants : list of numpy.ndarray
    num_outputs : int
    name : str
    """

    def __init__(self, meta: dict, constants, num_outputs: int, name: str):
        self.name, self.num_params, self.num_outputs = name, int(meta["params"]), num_outputs
        self.steps = []
        for s in meta["steps"]:
            if s[0] == "call":
                try:
                    compute = get_hostop(s[1])
                except KeyError as e:
                    raise PrimitiveError(f"host primitive {name!r}: {e}") from None
                self.steps.append(("call", compute, decode_attrs(s[2]),
                                   [tuple(r) for r in s[3]], str(s[1])))
            elif s[0] == "const":
                self.steps.append(("const", constants[s[1]]))
            elif s[0] == "tuple":
                self.steps.append(("tuple", [tuple(r) for r in s[1]]))
            elif s[0] == "get":
                self.steps.append(("get", tuple(s[1]), int(s[2])))
            else:
                raise PrimitiveError(f"host primitive {name!r}: unknown step {s[0]!r}")
        self.out = tuple(meta["out"])

    def __call__(self, *args):
        params = args[:self.num_params]
        vals = []

        def get(ref):
            return params[ref[1]] if ref[0] == "p" else vals[ref[1]]

        for s in self.steps:
            kind = s[0]
            if kind == "call":
                r = timed(s[4], s[1], *[get(a) for a in s[3]], **s[2])
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
            raise PrimitiveError(f"host primitive {self.name!r} produced {len(flat)} outputs, "
                                 f"the call passes {len(outs)}")
        for o, r in zip(outs, flat):
            o[...] = r


def host_factory(entry, ctx):
    """The ``"host"`` primitive factory: a :class:`HostKernel` from the entry's metadata."""
    return HostKernel(json.loads(entry.meta), ctx.constants, entry.num_outputs, entry.name)

