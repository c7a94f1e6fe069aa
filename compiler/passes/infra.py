"""The pass infrastructure: passes, ``Sequential``, ``PassContext`` and instruments.

A pass maps an :class:`IRModule` to a new one (``pass_(mod) -> mod``).  Calling
a pass runs it; a :class:`Sequential` runs each of its passes that the current
:class:`PassContext` enables: ``opt_level <= ctx.opt_level`` or named in
``ctx.required``, and not named in ``ctx.disabled`` (Relay's rule).
Instruments see every pass run (timing, IR dumps).  With
``config={"ir.debug": True}`` (or ``VTAKIT_IR_DEBUG=1``) the well-formedness
checker runs after every pass.
"""

from __future__ import annotations

import os
import pathlib
import time

from ..ir import IRModule, check_well_formed
from ..ir.analysis import deep_recursion
from ..ir.printer import astext

__all__ = ["PassInfo", "Pass", "ModulePass", "FunctionPass", "Sequential", "PassContext",
           "PassInstrument", "PassTimingInstrument", "DumpIR", "module_pass", "function_pass",
           "register_pass", "get_pass", "list_passes"]


class PassInfo:
    """A pass's name, optimization level and the passes it needs first."""

    __slots__ = ("name", "opt_level", "required")

    def __init__(self, name, opt_level=0, required=()):
        self.name, self.opt_level, self.required = name, int(opt_level), tuple(required)

    def __repr__(self):
        return f"PassInfo({self.name!r}, opt_level={self.opt_level})"


class PassContext:
    """The settings passes run under (a context manager; contexts nest).

    Parameters
    ----------
    opt_level : int
        Sequential runs the passes whose ``opt_level`` is at most this.
    required : iterable of str
        Passes run whatever their level.
    disabled : iterable of str
        Passes skipped by Sequential.
    config : dict
        Options for passes (``"ir.debug"``: check well-formedness after each pass).
    instruments : list of PassInstrument
    """

    _stack: list = []

    def __init__(self, opt_level=2, required=(), disabled=(), config=None, instruments=()):
        self.opt_level = int(opt_level)
        self.required = frozenset(required)
        self.disabled = frozenset(disabled)
        self.config = dict(config or {})
        self.instruments = list(instruments)
        both = self.required & self.disabled
        if both:
            raise ValueError(f"passes both required and disabled: {sorted(both)}")

    @classmethod
    def current(cls) -> "PassContext":
        return cls._stack[-1] if cls._stack else _DEFAULT

    def __enter__(self):
        PassContext._stack.append(self)
        for ins in self.instruments:
            ins.enter_pass_ctx()
        return self

    def __exit__(self, *exc):
        for ins in self.instruments:
            ins.exit_pass_ctx()
        PassContext._stack.pop()

    def pass_enabled(self, info: PassInfo) -> bool:
        if info.name in self.disabled:
            return False
        return info.name in self.required or info.opt_level <= self.opt_level

    @property
    def debug(self) -> bool:
        return bool(self.config.get("ir.debug", os.environ.get("VTAKIT_IR_DEBUG") == "1"))


_DEFAULT = PassContext()


class PassInstrument:
    """Hooks around pass runs; subclass and override what you need."""

    def enter_pass_ctx(self):
        pass

    def exit_pass_ctx(self):
        pass

    def run_before_pass(self, mod, info):
        pass

    def run_after_pass(self, mod, info):
        pass


class PassTimingInstrument(PassInstrument):
    """Wall time of every pass run, in run order (``timings``; ``render()`` a table)."""

    def __init__(self):
        self.timings: list[tuple[str, float]] = []
        self._start = []

    def run_before_pass(self, mod, info):
        self._start.append(time.perf_counter())

    def run_after_pass(self, mod, info):
        self.timings.append((info.name, time.perf_counter() - self._start.pop()))

    def render(self) -> str:
        total = sum(t for _, t in self.timings)
        width = max([len(n) for n, _ in self.timings] + [5])
        rows = [f"{'pass':<{width}}  {'ms':>9}"]
        rows += [f"{n:<{width}}  {t * 1e3:9.2f}" for n, t in self.timings]
        rows.append(f"{'total':<{width}}  {total * 1e3:9.2f}")
        return "\n".join(rows)


class DumpIR(PassInstrument):
    """Write the module's text after each pass to ``folder/NNN_passname.txt``."""

    def __init__(self, folder, show_meta_data=False):
        self.folder = pathlib.Path(folder)
        self.show_meta_data = show_meta_data
        self.count = 0

    def enter_pass_ctx(self):
        self.folder.mkdir(parents=True, exist_ok=True)

    def run_after_pass(self, mod, info):
        path = self.folder / f"{self.count:03d}_{info.name}.txt"
        path.write_text(astext(mod, show_meta_data=self.show_meta_data))
        self.count += 1


class Pass:
    """Base class: ``pass_(mod) -> mod`` under the current PassContext."""

    info: PassInfo

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"pass {self.info.name} needs an IRModule, got "
                            f"{type(mod).__name__}")
        ctx = PassContext.current()
        for ins in ctx.instruments:
            ins.run_before_pass(mod, self.info)
        with deep_recursion():
            out = self.transform(mod, ctx)
        if ctx.debug:
            check_well_formed(out)
        for ins in ctx.instruments:
            ins.run_after_pass(out, self.info)
        return out

    def transform(self, mod, ctx):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}({self.info.name!r}, opt_level={self.info.opt_level})"


class ModulePass(Pass):
    """A pass from a function ``fn(mod, ctx) -> mod``."""

    def __init__(self, fn, info: PassInfo):
        self.fn, self.info = fn, info

    def transform(self, mod, ctx):
        return self.fn(mod, ctx)


class FunctionPass(Pass):
    """A pass applying ``fn(func, mod, ctx) -> func`` to each global function
    (primitive functions are left alone, as in Relay)."""

    def __init__(self, fn, info: PassInfo):
        self.fn, self.info = fn, info

    def transform(self, mod, ctx):
        new = {}
        for gv, func in mod.items():
            new[gv] = func if func.is_primitive() else self.fn(func, mod, ctx)
        changed = {gv: f for gv, f in new.items() if f is not mod[gv]}
        return mod.with_functions(changed) if changed else mod


class Sequential(Pass):
    """Run passes in order, each only if the current PassContext enables it.

    The ``required`` passes of a pass's info run first when missing (by name,
    from the registry).
    """

    def __init__(self, passes, opt_level=0, name="Sequential"):
        self.passes = list(passes)
        self.info = PassInfo(name, opt_level)

    def __call__(self, mod):
        # a Sequential is not itself instrumented (its passes are)
        ctx = PassContext.current()
        for p in self.passes:
            if isinstance(p, Sequential) or ctx.pass_enabled(p.info):
                for req in p.info.required:
                    mod = get_pass(req)()(mod)
                mod = p(mod)
        return mod


_REGISTRY: dict[str, tuple] = {}


#: The modules of the built-in passes, imported by name on the first lookup.
PASS_MODULES = ("basic", "fuse_ops", "lifting", "normal_form", "padding", "residual", "simplify")


def _load_builtins() -> None:
    import importlib
    for name in PASS_MODULES:
        importlib.import_module(f"{__package__}.{name}")


def register_pass(name, factory, opt_level):
    """Record a pass factory under ``name`` (done by the decorators)."""
    _REGISTRY[name] = (factory, opt_level)


def get_pass(name):
    """The factory of the registered pass ``name`` (call it to get the pass)."""
    _load_builtins()
    try:
        return _REGISTRY[name][0]
    except KeyError:
        raise KeyError(f"no pass named {name!r}; registered: {', '.join(sorted(_REGISTRY))}") \
            from None


def list_passes() -> dict[str, int]:
    """Registered pass names and their opt levels."""
    _load_builtins()
    return {n: lvl for n, (_, lvl) in sorted(_REGISTRY.items())}


def _decorator(kind, opt_level, name, required):
    def wrap(fn):
        info = PassInfo(name or fn.__name__, opt_level, required)
        if isinstance(fn, type):  # a class with transform_module / transform_function
            def make(*args, **kwargs):
                obj = fn(*args, **kwargs)
                method = obj.transform_module if kind is ModulePass else obj.transform_function
                return kind(method, info)
            register_pass(info.name, make, opt_level)
            return make
        p = kind(fn, info)
        register_pass(info.name, lambda: p, opt_level)
        return p
    return wrap


def module_pass(opt_level=0, name=None, required=()):
    """Decorator: ``@module_pass(opt_level=1)`` on ``fn(mod, ctx) -> mod`` gives a
    :class:`ModulePass` (on a class: a factory of passes, registered by name)."""
    return _decorator(ModulePass, opt_level, name, required)


def function_pass(opt_level=0, name=None, required=()):
    """Decorator: ``@function_pass(opt_level=1)`` on ``fn(func, mod, ctx) -> func``."""
    return _decorator(FunctionPass, opt_level, name, required)
