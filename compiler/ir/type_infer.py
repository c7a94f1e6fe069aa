"""Type inference: fills ``checked_type`` on every node of a module or expression.

Types are context-free here (a node's type depends only on its operands), so
inference writes the found type into each node.  Function parameters need type
annotations; a recursive function (global or let-bound) needs its return type
(global) or its variable's type (let) annotated.

A constructor call is typed by instantiating its ADT's type parameters from
the arguments' types (``Cons(1i32, %t)`` is a ``List[int32]``); a parameter no
argument fixes stays an :class:`IncompleteType` (a bare ``Nil`` is a
``List[_]``), filled in by :func:`unify` where the value meets another type
(If branches, match clauses).  A match's pattern variables get their fields'
types, and a ``complete`` match must cover every value.
"""

from __future__ import annotations

from .adt import (Constructor, Match, PatternConstructor, PatternTuple, PatternVar,
                  is_exhaustive, pattern_vars)
from .describe import describe
from .errors import OpError, TypeInferenceError
from .expr import (Call, Constant, Function, GlobalVar, If, IRModule, Let, Op, Tuple,
                   TupleGetItem, Var)
from .analysis import post_order
from .types import (FuncType, IncompleteType, TensorType, TupleType, TypeCall, TypeVar,
                    substitute_type, type_compatible, unify)

__all__ = ["infer_types", "infer_expr_type"]


def _const_type(c):
    return TensorType(c.data.shape, c.data.dtype.name)


class _Inferer:
    def __init__(self, mod):
        self.mod = mod
        self.global_types = {}
        self.in_progress = set()
        self.typed_matches = set()
        self.param_of, self.match_of = {}, {}

    def global_type(self, gv, node):
        name = gv.name_hint
        if name in self.global_types:
            return self.global_types[name]
        if self.mod is None or name not in self.mod:
            where = f" in {describe(node)}" if node is not None else ""
            raise TypeInferenceError(f"unknown global function @{name}{where}")
        func = self.mod[name]
        if name in self.in_progress:
            if func.ret_type is None:
                raise TypeInferenceError(f"recursive function @{name} needs a return type "
                                         f"annotation (def @{name}(...) -> Type)")
            return FuncType([self.param_type(p, func) for p in func.params], func.ret_type)
        self.in_progress.add(name)
        ty = self.infer(func)
        self.in_progress.discard(name)
        self.global_types[name] = ty
        return ty

    @staticmethod
    def param_type(p, func):
        if p.type_annotation is None:
            raise TypeInferenceError(f"parameter %{p.name_hint} of {describe(func)} has no "
                                     f"type annotation")
        return p.type_annotation

    def infer(self, expr):
        nodes = post_order(expr)
        let_values = {n.var: n.value for n in nodes if type(n) is Let}
        # updated, not replaced: inferring a global's type may nest inside another's
        self.param_of.update({p: n for n in nodes if type(n) is Function for p in n.params})
        self.match_of.update({v: n for n in nodes if type(n) is Match
                              for c in n.clauses for v in pattern_vars(c.lhs)})
        for node in nodes:
            node._set_type(self.node_type(node, let_values))
        return expr.checked_type

    def node_type(self, node, let_values):
        t = type(node)
        if t is Call:
            return self.call_type(node)
        if t is Var:
            if node.type_annotation is not None:
                return node.type_annotation
            if node in self.match_of:
                self.type_patterns(self.match_of[node])
                return node.checked_type
            value = let_values.get(node)
            if value is None and node in self.param_of:
                self.param_type(node, self.param_of[node])
            if value is None:
                raise TypeInferenceError(f"variable %{node.name_hint} is unbound here or "
                                         f"needs a type annotation")
            if not value.has_type():
                raise TypeInferenceError(f"let %{node.name_hint} is used in its own value: "
                                         f"annotate its type to make the recursion typable")
            return value.checked_type
        if t is Constant:
            return _const_type(node)
        if t is Tuple:
            return TupleType([f.checked_type for f in node.fields])
        if t is TupleGetItem:
            tt = node.tuple_value.checked_type
            if not isinstance(tt, TupleType):
                raise TypeInferenceError(f"{describe(node)}: expected a tuple, got {tt!r}")
            if not 0 <= node.index < len(tt.fields):
                raise TypeInferenceError(f"{describe(node)}: index {node.index} out of range "
                                         f"for a {len(tt.fields)}-tuple")
            return tt.fields[node.index]
        if t is Let:
            ann = node.var.type_annotation
            if ann is not None and not type_compatible(ann, node.value.checked_type):
                raise TypeInferenceError(f"let %{node.var.name_hint}: annotated {ann!r} but "
                                         f"the value has type {node.value.checked_type!r}")
            if ann is None:
                node.var._set_type(node.value.checked_type)
            return node.body.checked_type
        if t is If:
            ct = node.cond.checked_type
            if not (isinstance(ct, TensorType) and ct.shape == () and
                    ct.dtype in ("bool", "int8", "int32", "int64", "uint8")):
                raise TypeInferenceError(f"{describe(node)}: the condition must be a scalar "
                                         f"bool, got {ct!r}")
            a, b = node.true_branch.checked_type, node.false_branch.checked_type
            ty = unify(a, b)
            if ty is None:
                raise TypeInferenceError(f"{describe(node)}: branches have types {a!r} and "
                                         f"{b!r}, expected one type")
            return ty
        if t is Match:
            return self.match_type(node)
        if t is Constructor:
            if node.inputs:
                raise TypeInferenceError(f"constructor {node.name_hint} takes "
                                         f"{len(node.inputs)} field(s): call it "
                                         f"({node.name_hint}(...)) instead of using it as a value")
            return _instantiate(node, {})
        if t is Function:
            params = [self.param_type(p, node) for p in node.params]
            body = node.body.checked_type
            if node.ret_type is not None:
                ret = unify(body, node.ret_type)  # the body's quantization wins, as before
                if ret is None:
                    raise TypeInferenceError(f"{describe(node)}: annotated return type "
                                             f"{node.ret_type!r} but the body has type {body!r}")
                body = ret
            return FuncType(params, body)
        if t is GlobalVar:
            return self.global_type(node, None)
        if t is Op:
            raise TypeInferenceError(f"operator {node.name} used as a value (call it instead)")
        raise TypeInferenceError(f"unknown node kind {t.__name__}")

    def call_type(self, call):
        arg_types = [a.checked_type for a in call.args]
        op = call.op
        if isinstance(op, Op):
            try:
                ty = op.infer_type(arg_types, call.attrs)
            except (TypeError, ValueError, OpError) as e:
                raise TypeInferenceError(f"{describe(call)}: {e}") from None
            return ty
        if isinstance(op, Constructor):
            return self.constructor_call_type(call, arg_types)
        ft = op.checked_type
        if not isinstance(ft, FuncType):
            raise TypeInferenceError(f"{describe(call)}: calling a non-function of type {ft!r}")
        if len(ft.arg_types) != len(arg_types):
            raise TypeInferenceError(f"{describe(call)}: expected {len(ft.arg_types)} "
                                     f"argument(s), got {len(arg_types)}")
        for i, (want, got) in enumerate(zip(ft.arg_types, arg_types)):
            if not type_compatible(want, got):
                raise TypeInferenceError(f"{describe(call)}: argument {i} has type {got!r}, "
                                         f"expected {want!r}")
        return ft.ret_type

    def constructor_call_type(self, call, arg_types):
        ctor = call.op
        if len(arg_types) != len(ctor.inputs):
            raise TypeInferenceError(f"{describe(call)}: constructor {ctor.name_hint} takes "
                                     f"{len(ctor.inputs)} field(s), got {len(arg_types)}")
        subst = {}
        for i, (want, got) in enumerate(zip(ctor.inputs, arg_types)):
            if not _solve(want, got, subst) or \
                    not type_compatible(substitute_type(want, subst), got):
                raise TypeInferenceError(
                    f"{describe(call)}: field {i} of {ctor.name_hint} has type {got!r}, "
                    f"expected {substitute_type(want, subst)!r}")
        return _instantiate(ctor, subst)

    # ---------------------------------------------------------------- match
    def type_patterns(self, match):
        """Check ``match``'s patterns against its data's type and type their variables."""
        if match in self.typed_matches:
            return
        self.typed_matches.add(match)
        ty = match.data.checked_type
        for k, clause in enumerate(match.clauses):
            self.bind_pattern(clause.lhs, ty, f"{describe(match)}, clause {k}")

    def bind_pattern(self, p, ty, where):
        t = type(p)
        if t is PatternVar:
            ann = p.var.type_annotation
            if ann is not None and not type_compatible(ann, ty):
                raise TypeInferenceError(f"{where}: %{p.var.name_hint} is annotated {ann!r} "
                                         f"but matches a {ty!r}")
            if ann is None:
                p.var._set_type(ty)
        elif t is PatternConstructor:
            ctor = p.constructor
            if isinstance(ty, IncompleteType):
                ty = _instantiate(ctor, {})
            if not (isinstance(ty, TypeCall) and ty.func == ctor.belong_to):
                raise TypeInferenceError(f"{where}: pattern {ctor.name_hint}(...) of type "
                                         f"{ctor.belong_to.name} cannot match a {ty!r}")
            subst = dict(zip(ctor.type_data.type_vars, ty.args))
            for q, field in zip(p.patterns, ctor.inputs):
                self.bind_pattern(q, substitute_type(field, subst), where)
        elif t is PatternTuple:
            if isinstance(ty, IncompleteType):
                ty = TupleType([IncompleteType()] * len(p.patterns))
            if not (isinstance(ty, TupleType) and len(ty.fields) == len(p.patterns)):
                raise TypeInferenceError(f"{where}: a {len(p.patterns)}-tuple pattern cannot "
                                         f"match a {ty!r}")
            for q, field in zip(p.patterns, ty.fields):
                self.bind_pattern(q, field, where)

    def match_type(self, match):
        self.type_patterns(match)
        ty = match.clauses[0].rhs.checked_type
        for k, clause in enumerate(match.clauses[1:], 1):
            new = unify(ty, clause.rhs.checked_type)
            if new is None:
                raise TypeInferenceError(f"{describe(match)}: clause {k} has type "
                                         f"{clause.rhs.checked_type!r}, the clauses before it "
                                         f"{ty!r}; expected one type")
            ty = new
        if match.complete and not is_exhaustive([c.lhs for c in match.clauses]):
            raise TypeInferenceError(f"{describe(match)}: the clauses do not cover every "
                                     f"{match.data.checked_type!r} value; add a clause (e.g. "
                                     "a wildcard _) or mark the match incomplete (match?)")
        return ty


def _instantiate(ctor, subst):
    """The ADT type a constructor builds, its parameters taken from ``subst``."""
    if ctor.type_data is None:
        raise TypeInferenceError(f"constructor {ctor.name_hint} belongs to no type definition "
                                 "(make a TypeData of it)")
    return TypeCall(ctor.belong_to, [subst.get(v, IncompleteType())
                                     for v in ctor.type_data.type_vars])


def _solve(template, actual, subst) -> bool:
    """Bind the TypeVars of ``template`` so that it describes ``actual`` (into ``subst``)."""
    if isinstance(template, TypeVar):
        new = unify(subst[template], actual) if template in subst else actual
        if new is None:
            return False
        subst[template] = new
        return True
    if isinstance(template, TypeCall) and isinstance(actual, TypeCall):
        pairs = zip(template.args, actual.args) if template.func == actual.func else ()
    elif isinstance(template, TupleType) and isinstance(actual, TupleType):
        pairs = zip(template.fields, actual.fields)
    elif isinstance(template, FuncType) and isinstance(actual, FuncType):
        pairs = zip((*template.arg_types, template.ret_type), (*actual.arg_types, actual.ret_type))
    else:
        pairs = ()
    return all(_solve(t, a, subst) for t, a in pairs)


def infer_types(mod_or_expr, mod=None):
    """Type every node of a module (returned as is) or an expression (its type returned).

    Raises
    ------
    TypeInferenceError
        Naming the node and what was expected.
    """
    if isinstance(mod_or_expr, IRModule):
        inf = _Inferer(mod_or_expr)
        for gv, _ in mod_or_expr.items():
            gv._set_type(inf.global_type(gv, None))
        return mod_or_expr
    return _Inferer(mod).infer(mod_or_expr)


def infer_expr_type(expr, mod=None):
    """The type of ``expr`` (typing every node under it)."""
    return _Inferer(mod).infer(expr)
