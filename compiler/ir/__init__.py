"""vtakit.compiler.ir: a Relay-style functional graph IR.

* nodes (:mod:`.expr`): :class:`Var`, :class:`Constant`, :class:`Call`,
  :class:`Tuple`, :class:`TupleGetItem`, :class:`Let`, :class:`If`,
  :class:`Function`, :class:`GlobalVar`, :class:`IRModule`;
* types (:mod:`.types`): :class:`TensorType` (with :class:`QuantParams`),
  :class:`TupleType`, :class:`FuncType`;
* the operator registry (:mod:`.op`): :func:`register_op`, :func:`get_op`,
  :class:`OpPattern`; the core operators are in :mod:`.ops`;
* :func:`infer_types`, the reference interpreter :func:`evaluate`,
  :func:`structural_equal`, the well-formedness checker :func:`check_well_formed`,
  and the text format :func:`astext` / :func:`parse`.
"""

from .analysis import bound_vars, count_nodes, free_vars, post_order
from .errors import (EvaluationError, IRError, OpError, ParseError, TypeInferenceError,
                     WellFormedError)
from .expr import (Call, Constant, Expr, Function, GlobalVar, If, IRModule, Let, Op, Tuple,
                   TupleGetItem, Var, const)
from .interpreter import Closure, evaluate
from .op import REQUIRED, OpPattern, get_op, list_ops, register_op
from .printer import astext
from .parser import parse, parse_expr
from .structural import assert_structural_equal, structural_equal
from .type_infer import infer_expr_type, infer_types
from .types import FuncType, QuantParams, TensorType, TupleType, Type, type_compatible
from .wellformed import check_well_formed

__all__ = [
    "Type", "TensorType", "TupleType", "FuncType", "QuantParams", "type_compatible",
    "Expr", "Var", "Constant", "Call", "Tuple", "TupleGetItem", "Let", "If", "Function",
    "GlobalVar", "IRModule", "Op", "const",
    "OpPattern", "register_op", "get_op", "list_ops", "REQUIRED",
    "infer_types", "infer_expr_type", "evaluate", "Closure",
    "structural_equal", "assert_structural_equal", "check_well_formed",
    "astext", "parse", "parse_expr",
    "free_vars", "bound_vars", "post_order", "count_nodes",
    "IRError", "TypeInferenceError", "WellFormedError", "OpError", "ParseError",
    "EvaluationError",
]
