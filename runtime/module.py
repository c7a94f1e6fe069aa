"""Runtime modules: named collections of packed functions that an executable imports.

An executable's primitive table names every function its bytecode calls with
``InvokePacked``; each entry has a *kind* saying how to build it:

* ``"global"``: a function of the registry (:mod:`vtakit.runtime.registry`),
  looked up by the entry's name;
* any other kind ``K``: a factory builds it from the entry's metadata and the
  :class:`~.vm.context.RuntimeContext`: the one registered as
  ``"vtakit.vm.primitive.K"`` (a plug-in's own kind), else the built-in one
  :data:`PRIMITIVE_KINDS` names: ``"host"`` (steps over the registered host operators,
  :mod:`.host`) and ``"vta_layer"`` (a kernel-table Program with its packed weights
  and host steps, :mod:`.vta_layer`), imported when an executable first uses it.

A function registered in the registry under a primitive's name overrides it
(a user's own host operator). Such a function returns its outputs; factory-made
functions write into the output tensors the VM passes after the inputs, as TVM's
destination-passing packed functions do.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass

import numpy as np

from ..hw.errors import VtakitError
from .registry import get_global_func

__all__ = ["Module", "PrimitiveEntry", "PrimitiveError", "FACTORY_PREFIX", "PRIMITIVE_KINDS",
           "primitive_factory", "load_primitives"]

#: Registry prefix of primitive factories: ``FACTORY_PREFIX + kind``.
FACTORY_PREFIX = "vtakit.vm.primitive."

#: The built-in primitive kinds: kind -> ``"module:factory"``, imported when first used.
PRIMITIVE_KINDS = {
    "host": "vtakit.runtime.host:host_factory",
    "vta_layer": "vtakit.runtime.vta_layer:vta_layer_factory",
}


class PrimitiveError(VtakitError, RuntimeError):
    """A primitive that cannot be resolved, or a user function returning the wrong outputs."""


@dataclass(frozen=True)
class PrimitiveEntry:
    """One entry of an executable's primitive table.

    Attributes
    ----------
    name : str
        The function's name (what a registry override must be called).
    kind : str
        ``"global"`` or the name of a primitive factory.
    num_inputs, num_outputs : int
    meta : str
        JSON text the factory reads (deterministic: keys sorted).
    """

    name: str
    kind: str = "global"
    num_inputs: int = 1
    num_outputs: int = 1
    meta: str = "{}"

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "num_inputs": self.num_inputs,
                "num_outputs": self.num_outputs, "meta": self.meta}

    @classmethod
    def from_json(cls, d: dict) -> "PrimitiveEntry":
        return cls(str(d["name"]), str(d["kind"]), int(d["num_inputs"]), int(d["num_outputs"]),
                   str(d["meta"]))

    @property
    def meta_dict(self) -> dict:
        return json.loads(self.meta)


class Module:
    """A named set of packed functions, with imported modules searched after its own.

    Parameters
    ----------
    name : str
    functions : dict of str -> callable, optional
    """

    def __init__(self, name: str, functions=None):
        self.name = name
        self._functions = dict(functions or {})
        self.imported_modules: list[Module] = []

    def add_function(self, name: str, func) -> None:
        self._functions[name] = func

    def import_module(self, module: "Module") -> None:
        """Make ``module``'s functions visible through :meth:`get_function`."""
        self.imported_modules.append(module)

    def function_names(self) -> list[str]:
        """This module's own function names (not the imported ones), in insertion order."""
        return list(self._functions)

    def get_function(self, name: str, query_imports: bool = True, allow_missing: bool = False):
        """The function called ``name`` (here, then in the imported modules, depth first).

        Raises
        ------
        KeyError
            If no module has it and ``allow_missing`` is false.
        """
        f = self._functions.get(name)
        if f is None and query_imports:
            for m in self.imported_modules:
                f = m.get_function(name, allow_missing=True)
                if f is not None:
                    break
        if f is None and not allow_missing:
            raise KeyError(f"module {self.name!r} has no function {name!r}")
        return f

    def __repr__(self):
        return (f"Module({self.name!r}, {len(self._functions)} functions, "
                f"{len(self.imported_modules)} imports)")


def _returning(func, entry: PrimitiveEntry):
    """Adapt a function that returns its outputs to the VM's destination passing."""
    n_out = entry.num_outputs
    if n_out == 0:
        return func
    name = entry.name

    def call(*args):
        result = func(*args[:-n_out])
        outs = args[-n_out:]
        if n_out == 1:
            result = (result,)
        elif not isinstance(result, (tuple, list)) or len(result) != n_out:
            raise PrimitiveError(f"registered function {name!r} must return a tuple of {n_out} "
                                 f"arrays, got {type(result).__name__}")
        for i, (out, r) in enumerate(zip(outs, result)):
            r = np.asarray(r)
            if r.shape != out.shape or r.dtype != out.dtype:
                raise PrimitiveError(f"registered function {name!r} returned {r.dtype}"
                                     f"{list(r.shape)} for output {i}; the compiled model "
                                     f"expects {out.dtype}{list(out.shape)}")
            out[...] = r

    return call


def primitive_factory(kind: str):
    """The factory of primitive ``kind``: a plug-in's registered as ``FACTORY_PREFIX + kind``,
    else the built-in one of :data:`PRIMITIVE_KINDS`; None when there is neither."""
    factory = get_global_func(FACTORY_PREFIX + kind, allow_missing=True)
    if factory is None and kind in PRIMITIVE_KINDS:
        module, name = PRIMITIVE_KINDS[kind].split(":")
        factory = getattr(importlib.import_module(module), name)
    return factory


def load_primitives(entries, ctx, local=None) -> Module:
    """Resolve an executable's primitive table into a module.

    ``local`` (name -> function, what an executable compiled in this process keeps
    beside its table) and registry overrides come first; ``"global"`` entries must be
    registered; other kinds are built by their factories (:func:`primitive_factory`).

    Returns
    -------
    Module
        Named ``"primitives"``: one function per entry, by entry name; a module
        per factory kind is imported into it.

    Raises
    ------
    PrimitiveError
        Naming the entry and what is missing.
    """
    root = Module("primitives")
    by_kind: dict[str, Module] = {}
    for entry in entries:
        override = (local or {}).get(entry.name) or get_global_func(entry.name,
                                                                     allow_missing=True)
        if override is not None:
            root.add_function(entry.name, _returning(override, entry))
            continue
        if entry.kind == "global":
            raise PrimitiveError(f"primitive {entry.name!r} is not registered; register it with "
                                 "vtakit.runtime.register_func before running")
        factory = primitive_factory(entry.kind)
        if factory is None:
            raise PrimitiveError(f"primitive {entry.name!r} is of kind {entry.kind!r}, but no "
                                 f"factory {FACTORY_PREFIX + entry.kind!r} is registered")
        module = by_kind.get(entry.kind)
        if module is None:
            module = by_kind[entry.kind] = Module(entry.kind)
            root.import_module(module)
        module.add_function(entry.name, factory(entry, ctx))
    return root
