"""Common algebraic data types (Relay's prelude, in part): ``List`` and ``Option``.

::

    from vtakit.compiler.ir import IRModule, prelude
    p = prelude.Prelude()
    mod = IRModule(type_definitions=p.type_definitions)
    one = p.cons(const(1), p.nil)          # Cons(1i32, Nil)
    ty = p.list_of(scalar_type("int32"))   # List[Tensor[(), int32]]

Each :class:`Prelude` makes fresh definitions, so modules built from different
preludes never share constructor objects.
"""

from __future__ import annotations

from .adt import Constructor, TypeData
from .types import GlobalTypeVar, TypeCall, TypeVar

__all__ = ["Prelude"]


class Prelude:
    """``type List[A] { Cons(A, List[A]), Nil }`` and ``type Option[A] { Some(A), None_ }``.

    Attributes
    ----------
    List, Option : GlobalTypeVar
    cons, nil, some, none : Constructor
    list_data, option_data : TypeData
    """

    def __init__(self):
        a = TypeVar("A")
        self.List = GlobalTypeVar("List")
        self.cons = Constructor("Cons", [a, TypeCall(self.List, [a])], self.List)
        self.nil = Constructor("Nil", [], self.List)
        self.list_data = TypeData(self.List, [a], [self.cons, self.nil])
        b = TypeVar("A")
        self.Option = GlobalTypeVar("Option")
        self.some = Constructor("Some", [b], self.Option)
        self.none = Constructor("None_", [], self.Option)
        self.option_data = TypeData(self.Option, [b], [self.some, self.none])

    @property
    def type_definitions(self) -> list:
        return [self.list_data, self.option_data]

    def list_of(self, elem) -> TypeCall:
        """The type ``List[elem]``."""
        return TypeCall(self.List, [elem])

    def option_of(self, elem) -> TypeCall:
        """The type ``Option[elem]``."""
        return TypeCall(self.Option, [elem])
