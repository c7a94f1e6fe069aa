"""vtakit.compiler.ir: a Relay-style functional graph IR.

* nodes (:mod:`.expr`): :class:`Var`, :class:`Constant`, :class:`Call`,
  :class:`Tuple`, :class:`TupleGetItem`, :class:`Let`, :class:`If`,
  :class:`Function`, :class:`GlobalVar`, :class:`IRModule`;
* types (:mod:`.types`): :class:`TensorType` (with :class:`QuantParams`),
  :class:`TupleType`, :class:`FuncType`, and for algebraic data types
  :class:`TypeVar`, :class:`GlobalTypeVar`, :class:`TypeCall`, :class:`IncompleteType`;
* algebraic data types (:mod:`.adt`): :class:`TypeData`, :class:`Constructor`,
  :class:`Match` with :class:`Clause` and the patterns :class:`PatternWildcard`,
  :class:`PatternVar`, :class:`PatternConstructor`, :class:`PatternTuple`;
  :mod:`.prelude` defines ``List`` and ``Option``;
* the operator registry (:mod:`.op`): :func:`register_op`, :func:`get_op`,
  :class:`OpPattern`; the core operators are in :mod:`.ops`;
* :func:`infer_types`, the reference interpreter :func:`evaluate`,
  :func:`structural_equal`, the well-formedness checker :func:`check_well_formed`,
  and the text format :func:`astext` / :func:`parse`.
"""

from .adt import (Clause, Constructor, Match, Pattern, PatternConstructor, PatternTuple,
                  PatternVar, PatternWildcard, TypeData)
from .analysis import bound_vars, count_nodes, free_vars, is_op, post_order
from .errors import (EvaluationError, IRError, OpError, ParseError, TypeInferenceError,
                     WellFormedError)
from .expr import (Call, Constant, Expr, Function, GlobalVar, If, IRModule, Let, Op, Tuple,
                   TupleGetItem, Var, const)
from .interpreter import Closure, ConstructorValue, evaluate, values_equal
from .op import REQUIRED, OpPattern, get_op, list_ops, register_op
from .printer import astext
from .parser import parse, parse_expr
from .structural import assert_structural_equal, structural_equal
from .type_infer import infer_expr_type, infer_types
from .types import (FuncType, GlobalTypeVar, IncompleteType, QuantParams, TensorType, TupleType,
                    Type, TypeCall, TypeVar, type_compatible, unify)
from .wellformed import check_well_formed

__all__ = [
    "Type", "TensorType", "TupleType", "FuncType", "QuantParams", "type_compatible",
    "TypeVar", "GlobalTypeVar", "TypeCall", "IncompleteType", "unify",
    "TypeData", "Constructor", "Match", "Clause", "Pattern", "PatternWildcard", "PatternVar",
    "PatternConstructor", "PatternTuple",
    "Expr", "Var", "Constant", "Call", "Tuple", "TupleGetItem", "Let", "If", "Function",
    "GlobalVar", "IRModule", "Op", "const",
    "OpPattern", "register_op", "get_op", "list_ops", "REQUIRED",
    "infer_types", "infer_expr_type", "evaluate", "Closure", "ConstructorValue",
    "values_equal",
    "structural_equal", "assert_structural_equal", "check_well_formed",
    "astext", "parse", "parse_expr",
    "free_vars", "bound_vars", "post_order", "count_nodes", "is_op",
    "IRError", "TypeInferenceError", "WellFormedError", "OpError", "ParseError",
    "EvaluationError",
]
