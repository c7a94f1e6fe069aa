"""The text printer, in Relay's style.

::

    #[version = "0.0.5"]
    def @main(%x: Tensor[(1, 3, 8, 8), float32]) {
      %0 = nn.conv2d(%x, meta[Constant][0], padding=[1, 1, 1, 1]);
      let %y = nn.relu(%0);
      add(%y, 1f32)
    }
    #[metadata]
    Constant[0] = float32 (4, 3, 3, 3) AAAAAAAAAA...

Every non-atomic node is bound to a temporary ``%N`` in the innermost scope
enclosing all its uses (so sharing is kept and the text is well scoped); a
scope's result is printed inline.  Scalar constants are inline literals with a
dtype suffix; other constants go to the ``#[metadata]`` section (base64 of the
raw bytes), so printing is exact and :func:`parse` reads it back.  Operator
attributes equal to their defaults are left out.  A module's algebraic data
types come first::

    type List[A] {
      Cons(A, List[A]),
      Nil,
    }

and a match is ``match (%l) { Cons(%h, _) => { ... }, Nil => { ... }, }``
(``match?`` when it is not complete).
"""

from __future__ import annotations

import base64
import json
import re

import numpy as np

from .adt import Constructor, Match, PatternConstructor, PatternVar, PatternWildcard, TypeData
from .expr import (Call, Function, GlobalVar, If, IRModule, Let, Op, Tuple,
                   TupleGetItem, Var)
from .scopes import is_atom, place_nodes
from .types import (FuncType, GlobalTypeVar, IncompleteType, QuantParams, TensorType,
                    TupleType, Type, TypeCall, TypeVar)

__all__ = ["astext", "type_text", "type_data_text", "attr_text", "scalar_text",
           "DTYPE_SUFFIX"]

VERSION = '#[version = "0.0.5"]'

DTYPE_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8",
                "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
                "uint16": "u16", "uint32": "u32", "uint64": "u64"}

_NAME_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _shape_text(shape):
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _number(v):
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return str(int(v))


def _quant_text(q: QuantParams):
    def val(v):
        if isinstance(v, np.ndarray):
            return "[" + ", ".join(_number(x) for x in v.tolist()) + "]"
        return _number(v)
    axis = "" if q.axis is None else f", axis={q.axis}"
    return f"quant(scale={val(q.scale)}, zero_point={val(q.zero_point)}{axis})"


def type_text(t) -> str:
    """``Tensor[(1, 3), float32]``, ``(T1, T2)``, ``fn (T1) -> T2``."""
    if isinstance(t, TensorType):
        q = "" if t.quant is None else ", " + _quant_text(t.quant)
        return f"Tensor[{_shape_text(t.shape)}, {t.dtype}{q}]"
    if isinstance(t, TupleType):
        inner = ", ".join(type_text(f) for f in t.fields)
        return f"({inner},)" if len(t.fields) == 1 else f"({inner})"
    if isinstance(t, FuncType):
        return (f"fn ({', '.join(type_text(a) for a in t.arg_types)}) -> "
                f"{type_text(t.ret_type)}")
    if isinstance(t, TypeCall):
        args = f"[{', '.join(type_text(a) for a in t.args)}]" if t.args else ""
        return t.func.name + args
    if isinstance(t, (TypeVar, GlobalTypeVar)):
        return t.name
    if isinstance(t, IncompleteType):
        return "_"
    return object.__repr__(t)


def type_data_text(td: TypeData) -> str:
    """``type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}``."""
    params = f"[{', '.join(v.name for v in td.type_vars)}]" if td.type_vars else ""
    lines = [f"type {td.header.name}{params} {{"]
    for c in td.constructors:
        fields = f"({', '.join(type_text(t) for t in c.inputs)})" if c.inputs else ""
        lines.append(f"  {c.name_hint}{fields},")
    return "\n".join(lines + ["}"])


def attr_text(v) -> str:
    """An attribute value literal: numbers, ``"str"``, ``True``, ``None``, ``[a, b]``."""
    if v is None:
        return "None"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(attr_text(x) for x in v) + "]"
    if isinstance(v, np.ndarray):
        return attr_text(v.tolist())
    return _number(v)


def scalar_text(arr) -> str:
    """An inline scalar constant: ``1.5f32``, ``-3i8``, ``True``."""
    v = arr.item()
    if arr.dtype == np.bool_:
        return "True" if v else "False"
    return _number(v) + DTYPE_SUFFIX[arr.dtype.name]


def _inline_const(c):
    return c.data.ndim == 0 and (c.data.dtype.name in DTYPE_SUFFIX or c.data.dtype == np.bool_)


class _Printer:
    def __init__(self):
        self.meta = []           # constants in the metadata section
        self.meta_index = {}

    # ---- names
    def new_def(self):
        self.names = {}          # node -> text reference
        self.used_names = set()
        self.temp = 0

    def var_name(self, v):
        if v in self.names:
            return self.names[v]
        base = v.name_hint if _NAME_OK.match(v.name_hint) else (
            "v" + re.sub(r"[^A-Za-z0-9_]", "_", v.name_hint))
        name, k = base, 1
        while name in self.used_names:
            name = f"{base}_{k}"
            k += 1
        self.used_names.add(name)
        self.names[v] = "%" + name
        return "%" + name

    def atom(self, e):
        t = type(e)
        if t is Var:
            return self.var_name(e)
        if t is GlobalVar:
            return "@" + e.name_hint
        if t is Op or t is Constructor:
            return e.name
        if _inline_const(e):
            return scalar_text(e.data)
        if e not in self.meta_index:
            self.meta_index[e] = len(self.meta)
            self.meta.append(e)
        return f"meta[Constant][{self.meta_index[e]}]"

    def param_text(self, p):
        name = self.var_name(p)
        return name if p.type_annotation is None else f"{name}: {type_text(p.type_annotation)}"

    # ---- scopes
    def block(self, body, scope, indent):
        """Lines of a scope ending with its result; returns the list of lines."""
        self.lines[scope] = lines = []
        result = self.ref(body, indent, inline_ok=True)
        lines.append(result)
        return [indent + line if not line.startswith("\n") else line for line in lines]

    def ref(self, e, indent, inline_ok=False):
        """Text for ``e``; binds it to a temporary in its scope unless atomic or inlined."""
        if is_atom(e):
            return self.atom(e)
        if e in self.names:
            return self.names[e]
        indent = self.indent_of(e)
        if type(e) is Let:
            return self.let_chain(e, indent, inline_ok)
        text = self.render(e, indent)
        if inline_ok and self.uses.get(e, 0) <= 1:
            return text
        name = f"%{self.temp}"
        self.temp += 1
        self.lines[self.scope_of[e]].append(f"{name} = {text};")
        self.names[e] = name
        return name

    def let_chain(self, e, indent, inline_ok):
        chain = []
        inline_ok = inline_ok and self.uses.get(e, 0) <= 1
        while type(e) is Let:
            chain.append(e)
            lines = self.lines[self.scope_of[e]]
            indent = self.indent_of(e)
            var = self.var_name(e.var)
            ann = "" if e.var.type_annotation is None else f": {type_text(e.var.type_annotation)}"
            value = e.value
            if not is_atom(value) and value not in self.names and type(value) is not Let \
                    and self.uses.get(value, 0) <= 1:
                text = self.render(value, indent)
            else:
                text = self.ref(value, indent)
            lines.append(f"let {var}{ann} = {text};")
            e = e.body
        result = self.ref(e, indent, inline_ok)
        for let in chain:  # a let's value is its body's
            self.names[let] = result
        return result

    def indent_of(self, e):
        """The indentation of the lines of the scope ``e`` is bound in (a match clause
        is indented twice: under the match, then under its pattern)."""
        s, levels = self.scope_of[e], 0
        while s is not None:
            levels += 2 if s.kind == "clause" else 1 if s.parent is not None else 0
            s = s.parent
        return self.base_indent + "  " * levels

    def sub_block(self, body, scope, indent):
        inner = self.block(body, scope, indent + "  ")
        return "{\n" + "\n".join(inner) + "\n" + indent + "}"

    def render(self, e, indent):
        t = type(e)
        if t is Call:
            args = [self.ref(a, indent) for a in e.args]
            if isinstance(e.op, Op):
                target = e.op.name
                for k, v in e.attrs.items():
                    if k not in e.op.attrs or e.op.attrs[k] != v or type(e.op.attrs[k]) != type(v):
                        args.append(f"{k}={attr_text(v)}")
            else:
                target = self.ref(e.op, indent)
                if type(e.op) is Function and target.startswith("fn"):
                    target = f"({target})"
            return f"{target}({', '.join(args)})"
        if t is Tuple:
            fields = [self.ref(f, indent) for f in e.fields]
            return f"({fields[0]},)" if len(fields) == 1 else f"({', '.join(fields)})"
        if t is TupleGetItem:
            return f"{self.ref(e.tuple_value, indent)}.{e.index}"
        if t is If:
            cond = self.ref(e.cond, indent)
            then_s, else_s = self.child_scopes[e]
            return (f"if ({cond}) {self.sub_block(e.true_branch, then_s, indent)} else "
                    f"{self.sub_block(e.false_branch, else_s, indent)}")
        if t is Function:
            (fs,) = self.child_scopes[e]
            return self.function_text("fn ", e, fs, indent)
        if t is Match:
            head = f"match{'' if e.complete else '?'} ({self.ref(e.data, indent)}) {{"
            clauses = [f"{indent}  {self.pattern_text(c.lhs)} => "
                       f"{self.sub_block(c.rhs, s, indent + '  ')}," for c, s in
                       zip(e.clauses, self.child_scopes[e])]
            return "\n".join([head] + clauses + [indent + "}"])
        raise TypeError(f"cannot print {t.__name__}")

    def pattern_text(self, p):
        t = type(p)
        if t is PatternWildcard:
            return "_"
        if t is PatternVar:
            return self.param_text(p.var)
        subs = [self.pattern_text(q) for q in p.patterns]
        if t is PatternConstructor:
            return p.constructor.name_hint + (f"({', '.join(subs)})" if subs else "")
        return f"({subs[0]},)" if len(subs) == 1 else f"({', '.join(subs)})"

    def function_text(self, head, f, scope, indent):
        params = [self.param_text(p) for p in f.params]
        params += [f"{k}={attr_text(v)}" for k, v in f.attrs.items()]
        ret = "" if f.ret_type is None else f" -> {type_text(f.ret_type)}"
        return f"{head}({', '.join(params)}){ret} {self.sub_block(f.body, scope, indent)}"

    def top(self, head, f):
        """A global definition or a top-level function/expression."""
        self.new_def()
        self.lines = {}
        if isinstance(f, Function):
            self.base_indent = "  "
            root, self.scope_of, self.child_scopes, self.uses = place_nodes(f.body)
            return self.function_text(head, f, root, "")
        self.base_indent = ""
        root, self.scope_of, self.child_scopes, self.uses = place_nodes(f)
        return "\n".join(self.block(f, root, ""))

    def metadata(self):
        if not self.meta:
            return ""
        out = ["#[metadata]"]
        for i, c in enumerate(self.meta):
            a = np.ascontiguousarray(c.data)
            data = base64.b64encode(a.tobytes()).decode("ascii")
            out.append(f"Constant[{i}] = {a.dtype.name} {_shape_text(a.shape)} {data}")
        return "\n".join(out) + "\n"


def astext(obj, show_meta_data=True) -> str:
    """The text of a module, function, expression or type (see the module docstring)."""
    if isinstance(obj, Type):
        return type_text(obj)
    if isinstance(obj, TypeData):
        return type_data_text(obj) + "\n"
    p = _Printer()
    from .analysis import deep_recursion
    with deep_recursion():
        if isinstance(obj, IRModule):
            parts = [VERSION] + [type_data_text(td) for td in obj.type_definitions.values()]
            for gv, f in obj.items():
                parts.append(p.top(f"def @{gv.name_hint}", f))
            text = "\n".join(parts) + "\n"
        elif isinstance(obj, Function):
            text = p.top("fn ", obj) + "\n"
        else:
            text = p.top(None, obj) + "\n"
    return text + p.metadata() if show_meta_data else text
