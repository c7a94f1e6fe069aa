"""A process-wide registry of type-erased functions, in the manner of TVM's PackedFunc registry.

Compiled models call host operators and VTA kernels by name through this
registry, and users register their own functions: a custom host operator that
overrides the compiled one, or a debug hook. A registered function takes and
returns the VM's values: numpy arrays (tensors), ``int``, ``float``, ``str``,
tuples of values and other functions.

Names are dotted strings (``"vtakit.vm.on_layer"``, ``"fused_nn_conv2d_add"``).
Registering a name twice is an error unless ``override=True``, so two packages
cannot silently replace each other's functions.

Examples
--------
>>> from vtakit.runtime.registry import register_func, get_global_func, remove_global_func
>>> @register_func("demo.twice")
... def twice(x):
...     return 2 * x
>>> get_global_func("demo.twice")(21)
42
>>> remove_global_func("demo.twice")
"""

from __future__ import annotations

import difflib
import threading

from ..hw.errors import VtakitError

__all__ = ["register_func", "get_global_func", "list_global_func_names", "remove_global_func",
           "RegistryError"]

_FUNCS: dict[str, object] = {}
_LOCK = threading.Lock()


class RegistryError(VtakitError, KeyError):
    """A missing name, a name registered twice, or a value that is not callable."""

    def __str__(self):   # KeyError quotes its message; this one is a sentence
        return str(self.args[0]) if self.args else ""


def _check_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise RegistryError(f"a registered function needs a non-empty string name, got {name!r}")
    return name


def register_func(name, func=None, *, override: bool = False):
    """Register ``func`` under ``name``; without ``func``, return a decorator.

    Parameters
    ----------
    name : str
        The global name. (As a decorator without arguments, ``@register_func``
        registers the function under its ``__name__``.)
    func : callable, optional
        The function. When omitted, a decorator is returned that registers and
        returns the function it decorates.
    override : bool
        Replace an existing registration instead of raising.

    Returns
    -------
    callable
        ``func`` (or the decorator).

    Raises
    ------
    RegistryError
        If ``name`` is already registered and ``override`` is false, or ``func``
        is not callable.
    """
    if callable(name) and func is None:          # bare @register_func
        return register_func(name.__name__, name, override=override)
    _check_name(name)

    def register(f):
        if not callable(f):
            raise RegistryError(f"register_func({name!r}): expected a callable, got "
                                f"{type(f).__name__}")
        with _LOCK:
            if name in _FUNCS and not override:
                raise RegistryError(f"function {name!r} is already registered; pass "
                                    "override=True to replace it")
            _FUNCS[name] = f
        return f

    return register if func is None else register(func)


def get_global_func(name: str, allow_missing: bool = False):
    """The function registered under ``name``.

    Parameters
    ----------
    name : str
    allow_missing : bool
        Return None instead of raising when nothing is registered under ``name``.

    Raises
    ------
    RegistryError
        If ``name`` is not registered (the message suggests close names).
    """
    f = _FUNCS.get(name)
    if f is None and not allow_missing:
        _check_name(name)
        close = difflib.get_close_matches(name, list(_FUNCS), n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise RegistryError(f"no function registered under {name!r}{hint}")
    return f


def remove_global_func(name: str) -> None:
    """Remove a registration (a test or a plug-in unloading itself).

    Raises
    ------
    RegistryError
        If ``name`` is not registered.
    """
    with _LOCK:
        if _FUNCS.pop(name, None) is None:
            raise RegistryError(f"cannot remove {name!r}: no function is registered under it")


def list_global_func_names() -> list[str]:
    """Every registered name, sorted."""
    return sorted(_FUNCS)
