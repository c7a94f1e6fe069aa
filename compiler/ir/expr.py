"""Expression nodes of the graph IR (Relay's design) and the IRModule.

Nodes are immutable after construction and hash by identity: a node used twice
is one shared subexpression (a dataflow graph), and a :class:`Var` is one
binding.  The only field set after construction is ``checked_type``, filled in
by type inference (:func:`vtakit.compiler.ir.infer_types` or the ``InferType``
pass); reading it before inference raises.
"""

from __future__ import annotations

import numpy as np

from .errors import WellFormedError
from .types import Type

__all__ = ["Expr", "Var", "Constant", "Call", "Tuple", "TupleGetItem", "Let", "If",
           "Function", "GlobalVar", "Op", "IRModule", "const"]


class Expr:
    """Base class of IR expressions."""

    __slots__ = ("_checked_type", "__weakref__")
    _fields: tuple = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} nodes are immutable")

    def _init(self, **fields):
        for k, v in fields.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_checked_type", None)

    @property
    def checked_type(self) -> Type:
        """The type found by type inference (run ``InferType`` first)."""
        if self._checked_type is None:
            from .describe import describe
            raise AttributeError(f"{describe(self)} has no checked_type: run InferType first")
        return self._checked_type

    def has_type(self) -> bool:
        return self._checked_type is not None

    def _set_type(self, ty):
        object.__setattr__(self, "_checked_type", ty)

    def __repr__(self):
        from .printer import astext
        return astext(self)

    # Relay-style conveniences for building graphs in Python.
    def __add__(self, other):
        return _binary("add", self, other)

    def __sub__(self, other):
        return _binary("subtract", self, other)

    def __mul__(self, other):
        return _binary("multiply", self, other)

    def __truediv__(self, other):
        return _binary("divide", self, other)

    def __getitem__(self, index):
        return TupleGetItem(self, index)

    def __iter__(self):
        # __getitem__ would otherwise make every Expr an endless iterable
        raise TypeError(f"{type(self).__name__} is not iterable (pass a list of Exprs)")


def _binary(name, a, b):
    from .op import get_op
    if not isinstance(b, Expr):
        b = const(b, a.checked_type.dtype if a.has_type() else None)
    return Call(get_op(name), [a, b])


class Var(Expr):
    """A local variable: a function parameter or a let binding.

    Parameters
    ----------
    name_hint : str
        The name shown by the printer (made unique there if needed).
    type_annotation : Type, optional
        Required on function parameters.
    """

    __slots__ = ("name_hint", "type_annotation")

    def __init__(self, name_hint: str, type_annotation: Type | None = None):
        if type_annotation is not None and not isinstance(type_annotation, Type):
            raise TypeError(f"type_annotation of %{name_hint} must be a Type, got "
                            f"{type_annotation!r}")
        self._init(name_hint=str(name_hint), type_annotation=type_annotation)
        if type_annotation is not None:
            self._set_type(type_annotation)


class Constant(Expr):
    """A constant tensor (a read-only numpy array; scalars are rank-0 arrays)."""

    __slots__ = ("data",)

    def __init__(self, data):
        arr = np.array(data)  # a private copy: the constant must not change under us
        if arr.dtype == np.float64 and not isinstance(data, np.ndarray):
            arr = arr.astype(np.float32)
        arr.flags.writeable = False
        self._init(data=arr)


def const(value, dtype=None) -> Constant:
    """A :class:`Constant` from a number or array (Python floats default to float32)."""
    arr = np.asarray(value)
    if dtype is not None:
        arr = arr.astype(dtype)
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64 and not isinstance(value, np.ndarray):
        arr = arr.astype(np.int32)
    return Constant(arr)


class Op(Expr):
    """A registered primitive operator (get one with :func:`get_op`)."""

    __slots__ = ("name", "attrs", "infer_type", "compute", "pattern", "num_inputs",
                 "normalize_attrs", "description")

    def __init__(self, name, attrs, infer_type, compute, pattern, num_inputs=None,
                 normalize_attrs=None, description=""):
        self._init(name=name, attrs=dict(attrs), infer_type=infer_type, compute=compute,
                   pattern=pattern, num_inputs=num_inputs, normalize_attrs=normalize_attrs,
                   description=description)

    def __repr__(self):
        return f"Op({self.name})"


class Call(Expr):
    """A call of an operator, a global function, a function literal or a closure.

    Parameters
    ----------
    op : Op | GlobalVar | Function | Expr
    args : sequence of Expr
    attrs : dict, optional
        Operator attributes: checked against the op's declared attributes and
        completed with their defaults (only for ``Op`` calls).
    """

    __slots__ = ("op", "args", "attrs")

    def __init__(self, op, args, attrs=None):
        args = tuple(args)
        for i, a in enumerate(args):
            if not isinstance(a, Expr):
                raise TypeError(f"argument {i} of a call to {getattr(op, 'name', op)!r} "
                                f"is not an Expr: {a!r}")
        if isinstance(op, Op):
            from .op import check_attrs
            attrs = check_attrs(op, attrs or {}, len(args))
        elif not isinstance(op, Expr):
            raise TypeError(f"call target must be an Op, GlobalVar or expression, got {op!r}")
        elif attrs:
            raise TypeError("attrs are only allowed on operator calls")
        else:
            attrs = {}
        self._init(op=op, args=args, attrs=attrs)


class Tuple(Expr):
    """A tuple of expressions."""

    __slots__ = ("fields",)

    def __init__(self, fields):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Expr):
                raise TypeError(f"tuple field is not an Expr: {f!r}")
        self._init(fields=fields)


class TupleGetItem(Expr):
    """Field ``index`` of a tuple-valued expression."""

    __slots__ = ("tuple_value", "index")

    def __init__(self, tuple_value, index):
        if not isinstance(tuple_value, Expr):
            raise TypeError(f"TupleGetItem needs an Expr, got {tuple_value!r}")
        self._init(tuple_value=tuple_value, index=int(index))


class Let(Expr):
    """``let var = value; body``: binds ``var`` (and evaluates ``value`` once)."""

    __slots__ = ("var", "value", "body")

    def __init__(self, var, value, body):
        if not isinstance(var, Var):
            raise TypeError(f"a let binds a Var, got {var!r}")
        self._init(var=var, value=value, body=body)


class If(Expr):
    """``if (cond) { true_branch } else { false_branch }``; ``cond`` is a scalar bool."""

    __slots__ = ("cond", "true_branch", "false_branch")

    def __init__(self, cond, true_branch, false_branch):
        self._init(cond=cond, true_branch=true_branch, false_branch=false_branch)

    @property
    def then(self):
        return self.true_branch

    @property
    def else_(self):
        return self.false_branch


class Function(Expr):
    """A function literal.

    Parameters
    ----------
    params : sequence of Var
        Each with a type annotation.
    body : Expr
    ret_type : Type, optional
        Needed on recursive global functions.
    attrs : dict, optional
        e.g. ``{"Primitive": 1}`` for a fused kernel, ``{"Composite": "name"}``.
    """

    __slots__ = ("params", "body", "ret_type", "attrs")

    def __init__(self, params, body, ret_type=None, attrs=None):
        params = tuple(params)
        for p in params:
            if not isinstance(p, Var):
                raise TypeError(f"function parameters must be Vars, got {p!r}")
        if not isinstance(body, Expr):
            raise TypeError(f"function body must be an Expr, got {body!r}")
        self._init(params=params, body=body, ret_type=ret_type, attrs=dict(attrs or {}))

    def is_primitive(self) -> bool:
        return bool(self.attrs.get("Primitive", 0))

    def with_attr(self, key, value) -> "Function":
        attrs = dict(self.attrs)
        attrs[key] = value
        return Function(self.params, self.body, self.ret_type, attrs)


class GlobalVar(Expr):
    """The name of a global function of an :class:`IRModule` (resolved by name)."""

    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str):
        self._init(name_hint=str(name_hint))

    @property
    def name(self):
        return self.name_hint


class IRModule:
    """A set of named global functions (``main`` is the entry point) and the
    algebraic data types they use.

    Parameters
    ----------
    functions : dict of (GlobalVar | str) -> Function
        Global vars are resolved by name, so a body may refer to ``GlobalVar("f")``
        objects other than the key.
    type_definitions : iterable of TypeData, optional
        See :meth:`add_type_data`.
    """

    def __init__(self, functions=None, type_definitions=()):
        self._by_name: dict[str, tuple[GlobalVar, Function]] = {}
        self._types: dict = {}
        for td in type_definitions:
            self.add_type_data(td)
        for key, func in (functions or {}).items():
            self[key] = func

    def add_type_data(self, type_data) -> None:
        """Define an algebraic data type (a :class:`~.adt.TypeData`); its name and its
        constructors' names must be new to the module."""
        from .adt import TypeData
        if not isinstance(type_data, TypeData):
            raise TypeError(f"add_type_data needs a TypeData, got {type(type_data).__name__}")
        name = type_data.header.name
        old = self._types.get(name)
        if old is type_data:
            return
        if old is not None:
            raise WellFormedError(f"the module already defines type {name}")
        for c in type_data.constructors:
            clash = self.get_constructor(c.name_hint, None)
            if clash is not None:
                raise WellFormedError(f"constructor {c.name_hint} of type {name} is already "
                                      f"defined by type {clash.belong_to.name}")
        self._types[name] = type_data

    @property
    def type_definitions(self) -> dict:
        """ADT name -> TypeData, in definition order."""
        return dict(self._types)

    def get_constructor(self, name: str, default=KeyError):
        """The constructor called ``name`` among the module's type definitions."""
        for td in self._types.values():
            for c in td.constructors:
                if c.name_hint == name:
                    return c
        if default is KeyError:
            raise WellFormedError(f"the module defines no constructor {name}")
        return default

    @classmethod
    def from_expr(cls, expr) -> "IRModule":
        """A module whose ``main`` is ``expr`` (a Function, or closed over its free vars)."""
        if not isinstance(expr, Function):
            from .analysis import free_vars
            expr = Function(free_vars(expr), expr)
        return cls({"main": expr})

    def __setitem__(self, key, func):
        gv = key if isinstance(key, GlobalVar) else GlobalVar(key)
        if not isinstance(func, Function):
            raise TypeError(f"global @{gv.name_hint} must be a Function, got "
                            f"{type(func).__name__}")
        old = self._by_name.get(gv.name_hint)
        if old is not None and not isinstance(key, GlobalVar):
            gv = old[0]
        self._by_name[gv.name_hint] = (gv, func)

    def __getitem__(self, key) -> Function:
        name = key.name_hint if isinstance(key, GlobalVar) else key
        try:
            return self._by_name[name][1]
        except KeyError:
            raise WellFormedError(f"the module has no global function @{name}; it has "
                                  f"{', '.join('@' + n for n in self._by_name) or 'none'}") \
                from None

    def __contains__(self, key):
        name = key.name_hint if isinstance(key, GlobalVar) else key
        return name in self._by_name

    def __len__(self):
        return len(self._by_name)

    def __iter__(self):
        return iter(self._by_name)

    @property
    def functions(self) -> dict:
        """GlobalVar -> Function, in definition order."""
        return {gv: f for gv, f in self._by_name.values()}

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self._by_name:
            self[name]  # raises the error listing the globals
        return self._by_name[name][0]

    def items(self):
        return [(gv, f) for gv, f in self._by_name.values()]

    def with_functions(self, functions) -> "IRModule":
        """A new module: these functions replace (or add to) this module's."""
        mod = IRModule(type_definitions=self._types.values())
        mod._by_name = dict(self._by_name)
        for key, f in functions.items():
            mod[key] = f
        return mod

    def __repr__(self):
        from .printer import astext
        return astext(self)
