"""The VM's object model: tensors, algebraic data types, closures and storage.

A tensor is a plain :class:`numpy.ndarray` (no wrapper, so host operators and
user functions receive arrays they can use directly and the dispatch loop pays
nothing for boxing). Tuples are ADTs of tag 0, as in TVM's VM.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Tensor", "ADT", "Closure", "Storage", "to_python", "flatten"]

#: The VM's tensor type.
Tensor = np.ndarray


class ADT:
    """A value of an algebraic data type: a constructor tag and its fields.

    Parameters
    ----------
    tag : int
        0 for a tuple; an IR constructor's ``tag`` (1, 2, ... in its type definition)
        for a value it built.
    fields : tuple
        The field values.
    """

    __slots__ = ("tag", "fields")

    def __init__(self, tag: int, fields):
        self.tag = tag
        self.fields = tuple(fields)

    def __len__(self):
        return len(self.fields)

    def __getitem__(self, i):
        return self.fields[i]

    def __iter__(self):
        return iter(self.fields)

    def __repr__(self):
        return f"ADT(tag={self.tag}, fields={self.fields!r})"


class Closure:
    """A VM function together with the values of its free variables.

    Parameters
    ----------
    func_index : int
        Index of the lifted function in the executable.
    captured : tuple
        Free-variable values; they become the callee's first registers, before
        the call's arguments.
    """

    __slots__ = ("func_index", "captured")

    def __init__(self, func_index: int, captured):
        self.func_index = func_index
        self.captured = tuple(captured)

    def __repr__(self):
        return f"Closure(func={self.func_index}, captured={len(self.captured)})"


class Storage:
    """A block of memory that tensors are carved from (``AllocStorage``).

    Parameters
    ----------
    nbytes : int
    alignment : int
        Byte alignment of the block's start (tensor offsets are planned
        relative to it).
    """

    __slots__ = ("nbytes", "buffer")

    def __init__(self, nbytes: int, alignment: int = 64):
        self.nbytes = nbytes
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        start = -raw.ctypes.data % alignment
        self.buffer = raw[start:start + nbytes]

    def tensor(self, offset: int, shape, dtype) -> np.ndarray:
        """A tensor view of ``shape`` and ``dtype`` at byte ``offset``."""
        return np.ndarray(shape, dtype, self.buffer, offset)

    def __repr__(self):
        return f"Storage({self.nbytes} bytes)"


def to_python(value):
    """A VM result as plain Python: tuples (ADTs of tag 0) become Python tuples,
    recursively; tensors and closures stay as they are, and constructor values stay
    ADTs (``tag``, ``fields``) with their fields converted."""
    if value.__class__ is ADT:
        fields = tuple(to_python(v) for v in value.fields)
        return fields if value.tag == 0 else ADT(value.tag, fields)
    return value


def flatten(value):
    """The tensors of a (nested) tuple result, depth first; a tensor alone yields itself."""
    if isinstance(value, tuple):
        for x in value:
            yield from flatten(x)
    else:
        yield value
