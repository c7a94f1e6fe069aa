"""The numpy computes of host operators, registered by operator name.

A compiled model's host steps (the primitives the VM evaluates in numpy, the exact
requantize after a VTA kernel, the element-wise ops after a layer) name these
functions; an executable records the names and attributes, never a Python module,
so it runs with :mod:`vtakit.runtime` alone. The compiler's operator registry
(:mod:`vtakit.compiler.ir`) takes each operator's ``compute`` from here: one
definition, used by the IR interpreter and the runtime alike.

Every function is registered in :mod:`vtakit.runtime.registry` as
``"vtakit.op." + operator name`` (``"vtakit.op.qnn.requantize"``); the steps of VTA
layers as ``"vtakit.op.vta.*"``. A compute is ``f(*arrays, **attrs)``, exact in the
integer dtypes. Modules: :mod:`.elemwise`, :mod:`.nn`, :mod:`.reduce`,
:mod:`.transform` (the core operators), :mod:`.qnn` and :mod:`.pool` (quantized
operators over the integer arithmetic of :mod:`.fixed_point`), :mod:`.ort`
(onnxruntime's kernels, :mod:`.ort_kernels`), :mod:`.onnx_ref` (an ONNX node run by onnx's
reference evaluator), :mod:`.vta` (host steps of VTA layers
on packed results).
"""

from __future__ import annotations

import importlib

from ..registry import get_global_func, register_func

__all__ = ["PREFIX", "MODULES", "hostop", "get_hostop", "hostop_names"]

#: Registry prefix of host operators: ``PREFIX + op name``.
PREFIX = "vtakit.op."


#: The modules of the built-in host operators, found by name (as the device backends
#: are): imported on the first lookup or registration, so they import this package
#: and it imports none of them.
MODULES = ("elemwise", "nn", "onnx_ref", "ort", "pool", "qnn", "reduce", "transform", "vta")
_state = {"loaded": False}


def _load_builtins() -> None:
    if _state["loaded"]:
        return
    _state["loaded"] = True          # before the imports: their registrations come here
    try:
        for name in MODULES:
            importlib.import_module(f"{__name__}.{name}")
    except BaseException:
        _state["loaded"] = False
        raise


def hostop(name: str, func=None, *, override: bool = False):
    """Register ``func`` as the compute of operator ``name`` (a decorator without ``func``);
    the built-in operators are registered first, so a user's own needs ``override``."""
    _load_builtins()
    return register_func(PREFIX + name, func, override=override)


def get_hostop(name: str, allow_missing: bool = False):
    """The compute registered for operator ``name`` (a one-line
    :class:`~vtakit.runtime.registry.RegistryError` naming close names when missing)."""
    _load_builtins()
    return get_global_func(PREFIX + name, allow_missing=allow_missing)


def hostop_names() -> list[str]:
    """The operator names with a registered compute, sorted."""
    from ..registry import list_global_func_names
    _load_builtins()
    return [n[len(PREFIX):] for n in list_global_func_names() if n.startswith(PREFIX)]

