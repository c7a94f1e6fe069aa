"""The text parser: reads what :func:`astext` prints (Relay's text style).

``parse(text)`` returns an :class:`IRModule` for text made of ``def`` s, or an
expression otherwise; ``parse_expr`` always returns an expression.  Errors are
:class:`ParseError` s with line and column.
"""

from __future__ import annotations

import base64
import json
import re

import numpy as np

from .adt import (Clause, Constructor, Match, PatternConstructor, PatternTuple, PatternVar,
                  PatternWildcard, TypeData)
from .errors import IRError, ParseError
from .expr import (Call, Constant, Function, GlobalVar, If, IRModule, Let, Tuple,
                   TupleGetItem, Var)
from .op import get_op
from .printer import DTYPE_SUFFIX
from .types import (FuncType, GlobalTypeVar, IncompleteType, QuantParams, TensorType, TupleType,
                    TypeCall, TypeVar)

__all__ = ["parse", "parse_expr"]

_SUFFIX_DTYPE = {v: k for k, v in DTYPE_SUFFIX.items()}
_NUM = r"-?(?:\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|inf|nan)"
_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+|//[^\n]*|/\*.*?\*/|\#\[version[^\n]*)
  | (?P<local>%[A-Za-z0-9_]+)
  | (?P<global>@[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<scalar>""" + _NUM + r"""(?:f16|f32|f64|i8|i16|i32|i64|u8|u16|u32|u64))(?![A-Za-z0-9_])
  | (?P<number>""" + _NUM + r""")(?![A-Za-z0-9_])
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<arrow>->|=>)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<punct>[()\[\]{},;=:.?])
""", re.VERBOSE | re.DOTALL)


class _Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind, text, pos):
        self.kind, self.text, self.pos = kind, text, pos


def _tokenize(text):
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ParseError(f"{_where(text, pos)}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), pos))
        pos = m.end()
    toks.append(_Tok("eof", "", len(text)))
    return toks


def _where(text, pos):
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {col}"


def _split_metadata(text):
    head, sep, meta = text.partition("#[metadata]")
    consts = []
    if sep:
        for n, line in enumerate(meta.strip().splitlines()):
            m = re.match(r"^Constant\[(\d+)\] = (\w+) \(([\d, ]*)\) ?([A-Za-z0-9+/=]*)$",
                         line.strip())
            if not m or int(m.group(1)) != n:
                raise ParseError(f"bad metadata line {n + 1}: {line.strip()[:60]!r}")
            shape = tuple(int(d) for d in m.group(3).replace(" ", "").split(",") if d)
            raw = base64.b64decode(m.group(4))
            arr = np.frombuffer(raw, dtype=m.group(2)).reshape(shape)
            consts.append(Constant(arr))
    return head, consts


class _Parser:
    def __init__(self, text):
        self.text = text
        body, self.meta = _split_metadata(text)
        self.toks = _tokenize(body)
        self.i = 0
        self.scopes = [{}]
        self.globals = {}
        self.adts = {}           # ADT name -> GlobalTypeVar
        self.type_vars = {}      # type parameters of the definition being read
        self.constructors = {}   # name -> Constructor

    # ---- token helpers
    def peek(self, k=0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def error(self, msg, tok=None):
        tok = tok or self.peek()
        return ParseError(f"{_where(self.text, tok.pos)}: {msg}")

    def next(self):
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def accept(self, text):
        if self.peek().text == text and self.peek().kind in ("punct", "ident", "arrow"):
            return self.next()
        return None

    def expect(self, text):
        tok = self.accept(text)
        if tok is None:
            got = self.peek().text or "end of input"
            raise self.error(f"expected {text!r}, got {got!r}")
        return tok

    def expect_kind(self, kind, what):
        if self.peek().kind != kind:
            raise self.error(f"expected {what}, got {self.peek().text or 'end of input'!r}")
        return self.next()

    # ---- names
    def lookup(self, tok):
        for scope in reversed(self.scopes):
            if tok.text in scope:
                return scope[tok.text]
        raise self.error(f"unbound variable {tok.text}", tok)

    def bind(self, name, value, tok):
        if name in self.scopes[-1] and isinstance(value, Var):
            raise self.error(f"{name} is already defined in this scope", tok)
        self.scopes[-1][name] = value

    # ---- types
    def parse_type(self):
        tok = self.peek()
        if tok.text == "Tensor":
            self.next()
            self.expect("[")
            shape = self.parse_shape()
            self.expect(",")
            dtype = self.expect_kind("ident", "a dtype").text
            quant = None
            if self.accept(","):
                quant = self.parse_quant()
            self.expect("]")
            try:
                return TensorType(shape, dtype, quant)
            except TypeError as e:
                raise self.error(str(e), tok) from None
        if tok.text == "fn":
            self.next()
            self.expect("(")
            args = self.comma_list(")", self.parse_type)
            self.expect("->")
            return FuncType(args, self.parse_type())
        if tok.text == "(":
            self.next()
            fields = self.comma_list(")", self.parse_type)
            return TupleType(fields)
        if tok.kind == "ident" and tok.text in _DTYPES:
            self.next()
            return TensorType((), tok.text)
        if tok.kind == "ident" and tok.text in self.type_vars:
            self.next()
            return self.type_vars[tok.text]
        if tok.kind == "ident" and tok.text in self.adts:
            self.next()
            args = self.comma_list("]", self.parse_type) if self.accept("[") else []
            return TypeCall(self.adts[tok.text], args)
        if tok.kind == "ident" and tok.text == "_":
            self.next()
            return IncompleteType()
        raise self.error(f"expected a type, got {tok.text!r}")

    def parse_type_data(self):
        """``type Name[A, B] { Ctor(T, ...), Ctor2, }``"""
        self.expect("type")
        header = self.adts[self.expect_kind("ident", "a type name").text]
        names = self.comma_list("]", lambda: self.expect_kind("ident", "a type parameter").text) \
            if self.accept("[") else []
        self.type_vars = {n: TypeVar(n) for n in names}
        self.expect("{")
        ctors = self.comma_list("}", lambda: self.parse_constructor(header))
        self.type_vars = {}
        return TypeData(header, [TypeVar(n) for n in names], ctors)

    def parse_constructor(self, header):
        tok = self.expect_kind("ident", "a constructor name")
        if tok.text in self.constructors:
            raise self.error(f"constructor {tok.text} is defined twice", tok)
        inputs = self.comma_list(")", self.parse_type) if self.accept("(") else []
        self.constructors[tok.text] = Constructor(tok.text, inputs, header)
        return self.constructors[tok.text]

    # ---- match
    def parse_match(self):
        complete = not self.accept("?")
        self.expect("(")
        data = self.parse_expr()
        self.expect(")")
        self.expect("{")
        clauses = self.comma_list("}", self.parse_clause)
        if not clauses:
            raise self.error("a match needs at least one clause")
        return Match(data, clauses, complete)

    def parse_clause(self):
        self.scopes.append({})
        lhs = self.parse_pattern()
        self.expect("=>")
        rhs = self.block() if self.peek().text == "{" else self.parse_expr()
        self.scopes.pop()
        return Clause(lhs, rhs)

    def parse_pattern(self):
        tok = self.peek()
        if tok.kind == "ident" and tok.text == "_":
            self.next()
            return PatternWildcard()
        if tok.kind == "local":
            self.next()
            var = Var(tok.text[1:], self.parse_type() if self.accept(":") else None)
            self.bind(tok.text, var, tok)
            return PatternVar(var)
        if tok.text == "(":
            self.next()
            return PatternTuple(self.comma_list(")", self.parse_pattern))
        if tok.kind == "ident" and tok.text in self.constructors:
            self.next()
            subs = self.comma_list(")", self.parse_pattern) if self.accept("(") else []
            try:
                return PatternConstructor(self.constructors[tok.text], subs)
            except ValueError as e:
                raise self.error(str(e), tok) from None
        raise self.error(f"expected a pattern (_, %var, a constructor or a tuple), got "
                         f"{tok.text or 'end of input'!r}")

    def comma_list(self, close, item):
        out = []
        while not self.accept(close):
            out.append(item())
            if not self.accept(","):
                self.expect(close)
                break
        return out

    def parse_shape(self):
        self.expect("(")
        dims = self.comma_list(")", lambda: int(self.expect_kind("number", "a dimension").text))
        return tuple(dims)

    def parse_quant(self):
        self.expect("quant")
        self.expect("(")
        kw = {}
        for k, v in self.comma_list(")", self.parse_kwarg):
            kw[k] = v
        try:
            return QuantParams(**kw)
        except (TypeError, ValueError) as e:
            raise self.error(f"bad quantization parameters: {e}") from None

    # ---- attribute literals
    def parse_literal(self):
        tok = self.next()
        if tok.kind == "number":
            t = tok.text
            return float(t) if any(c in t for c in ".eEn") else int(t)
        if tok.kind == "string":
            return json.loads(tok.text)
        if tok.kind == "ident" and tok.text in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[tok.text]
        if tok.text == "[":
            return tuple(self.comma_list("]", self.parse_literal))
        raise self.error(f"expected an attribute value, got {tok.text!r}", tok)

    def parse_kwarg(self):
        name = self.expect_kind("ident", "an attribute name").text
        self.expect("=")
        return name, self.parse_literal()

    def is_kwarg(self):
        return self.peek().kind == "ident" and self.peek(1).text == "="

    # ---- expressions
    def parse_body(self):
        """``stmt* expr``: temporaries, let bindings, then the result."""
        lets = []
        while True:
            tok = self.peek()
            if tok.kind == "ident" and tok.text == "let":
                self.next()
                vtok = self.expect_kind("local", "a variable")
                ann = self.parse_type() if self.accept(":") else None
                var = Var(vtok.text[1:], ann)
                self.expect("=")
                # the variable is visible in its own value (recursive closures)
                self.bind(vtok.text, var, vtok)
                value = self.parse_expr()
                self.expect(";")
                lets.append((var, value))
            elif tok.kind == "local" and self.peek(1).text == "=":
                self.next()
                self.next()
                value = self.parse_expr()
                self.expect(";")
                self.bind(tok.text, value, tok)
            else:
                break
        result = self.parse_expr()
        for var, value in reversed(lets):
            result = Let(var, value, result)
        return result

    def block(self):
        self.expect("{")
        self.scopes.append({})
        body = self.parse_body()
        self.scopes.pop()
        self.expect("}")
        return body

    def parse_expr(self):
        e = self.parse_primary()
        while True:
            if self.peek().text == "." and self.peek().kind == "punct":
                self.next()
                idx = self.expect_kind("number", "a tuple index")
                e = TupleGetItem(e, int(idx.text))
            elif self.peek().text == "(" and self.peek().kind == "punct":
                tok = self.next()
                args = self.comma_list(")", self.parse_expr)
                e = self.make_call(e, args, {}, tok)
            else:
                return e

    def make_call(self, target, args, attrs, tok):
        try:
            return Call(target, args, attrs)
        except (IRError, TypeError, ValueError) as err:
            raise self.error(str(err), tok) from None

    def parse_primary(self):
        tok = self.peek()
        if tok.kind == "local":
            self.next()
            return self.lookup(tok)
        if tok.kind == "global":
            self.next()
            gv = self.globals.get(tok.text[1:])
            if gv is None:
                raise self.error(f"undefined global function {tok.text}", tok)
            return gv
        if tok.kind == "scalar":
            self.next()
            m = re.match(r"^(.*?)(f16|f32|f64|i8|i16|i32|i64|u8|u16|u32|u64)$", tok.text)
            dtype = _SUFFIX_DTYPE[m.group(2)]
            value = float(m.group(1)) if dtype.startswith("f") else int(m.group(1))
            return Constant(np.array(value, dtype=dtype))
        if tok.kind == "ident" and tok.text in ("True", "False"):
            self.next()
            return Constant(np.array(tok.text == "True"))
        if tok.kind == "ident" and tok.text == "meta":
            self.next()
            self.expect("[")
            self.expect("Constant")
            self.expect("]")
            self.expect("[")
            idx = int(self.expect_kind("number", "a metadata index").text)
            self.expect("]")
            if idx >= len(self.meta):
                raise self.error(f"meta[Constant][{idx}] is not in the metadata section "
                                 f"({len(self.meta)} constants)", tok)
            return self.meta[idx]
        if tok.text == "(":
            self.next()
            if self.accept(")"):
                return Tuple([])
            first = self.parse_expr()
            if self.accept(")"):
                return first
            self.expect(",")
            rest = self.comma_list(")", self.parse_expr)
            return Tuple([first] + rest)
        if tok.kind == "ident" and tok.text == "if":
            self.next()
            self.expect("(")
            cond = self.parse_expr()
            self.expect(")")
            then = self.block()
            self.expect("else")
            return If(cond, then, self.block())
        if tok.kind == "ident" and tok.text == "fn":
            self.next()
            return self.parse_function()
        if tok.kind == "ident" and tok.text == "match":
            self.next()
            return self.parse_match()
        if tok.kind == "ident" and tok.text in self.constructors:
            self.next()
            return self.constructors[tok.text]
        if tok.kind == "ident":
            self.next()
            try:
                op = get_op(tok.text)
            except IRError as err:
                raise self.error(str(err), tok) from None
            self.expect("(")
            args, attrs = [], {}
            while not self.accept(")"):
                if self.is_kwarg():
                    k, v = self.parse_kwarg()
                    attrs[k] = v
                else:
                    args.append(self.parse_expr())
                if not self.accept(","):
                    self.expect(")")
                    break
            return self.make_call(op, args, attrs, tok)
        raise self.error(f"expected an expression, got {tok.text or 'end of input'!r}")

    def parse_function(self, gv_name=None):
        self.expect("(")
        self.scopes.append({})
        params, attrs = [], {}
        while not self.accept(")"):
            if self.is_kwarg():
                k, v = self.parse_kwarg()
                attrs[k] = v
            else:
                vtok = self.expect_kind("local", "a parameter")
                ann = self.parse_type() if self.accept(":") else None
                var = Var(vtok.text[1:], ann)
                self.bind(vtok.text, var, vtok)
                params.append(var)
            if not self.accept(","):
                self.expect(")")
                break
        ret = self.parse_type() if self.accept("->") else None
        body = self.block()
        self.scopes.pop()
        return Function(params, body, ret, attrs)

    def parse_module(self):
        # every global and type is known before any body is read (mutual recursion)
        for k, tok in enumerate(self.toks[:-1]):
            if tok.text == "def" and self.toks[k + 1].kind == "global":
                name = self.toks[k + 1].text[1:]
                if name in self.globals:
                    raise self.error(f"@{name} is defined twice", self.toks[k + 1])
                self.globals[name] = GlobalVar(name)
            elif tok.text == "type" and tok.kind == "ident" and self.toks[k + 1].kind == "ident":
                name = self.toks[k + 1].text
                if name in self.adts:
                    raise self.error(f"type {name} is defined twice", self.toks[k + 1])
                self.adts[name] = GlobalTypeVar(name)
        mod = IRModule()
        while self.peek().text == "type":
            mod.add_type_data(self.parse_type_data())
        while self.peek().kind != "eof":
            self.expect("def")
            name = self.expect_kind("global", "a global name").text[1:]
            mod[self.globals[name]] = self.parse_function()
        return mod


_DTYPES = set(DTYPE_SUFFIX) | {"bool"}


def parse(text: str):
    """Parse a module (text with ``def`` s) or an expression."""
    p = _Parser(text)
    if p.peek().text in ("def", "type"):
        return p.parse_module()
    return _finish_expr(p)


def _finish_expr(p):
    # free variables of a bare expression are created on first use
    p.lookup = _free_lookup(p)
    e = p.parse_body()
    if p.peek().kind != "eof":
        raise p.error(f"unexpected {p.peek().text!r} after the expression")
    return e


def _free_lookup(p):
    orig = p.lookup

    def lookup(tok):
        try:
            return orig(tok)
        except ParseError:
            var = Var(tok.text[1:])
            p.scopes[0][tok.text] = var
            return var
    return lookup


def parse_expr(text: str):
    """Parse an expression (free ``%vars`` become fresh untyped Vars)."""
    return _finish_expr(_Parser(text))
