"""The VM's object model: tensors, algebraic data types, closures and storage.

A tensor is a plain :class:`numpy.ndarray` (no wrapper, so host operators and
user functions receive arrays they can use directly and the dispatch loop pays
nothing for boxing). Tuples are ADTs of tag 0, as in TVM's VM.

A :class:`DeviceTensor` is a tensor the VM keeps in the accelerator's DRAM
between two VTA layers, in the packed activation layout, carved from a
:class:`DeviceStorage`; only VTA kernels read it in place. :meth:`DeviceTensor.numpy`
(also ``numpy.asarray``) downloads and unpacks it.
"""

from __future__ import annotations

import math

import numpy as np

from ..dram import PAGE_BYTES
from ..layout import packed_activation_shape, unpack_activation

__all__ = ["Tensor", "ADT", "Closure", "Storage", "DeviceStorage", "DeviceTensor", "to_python",
           "flatten"]

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


class DeviceStorage:
    """A block of device DRAM that device tensors are carved from (``AllocStorage`` on
    ``vta``); freed when the last tensor carved from it is dropped.

    Parameters
    ----------
    runtime : vtakit.runtime.Runtime
    nbytes : int
    alignment : int
        Must divide the DRAM page (allocations are page aligned).
    """

    __slots__ = ("nbytes", "runtime", "buffer")

    def __init__(self, runtime, nbytes: int, alignment: int = PAGE_BYTES):
        if PAGE_BYTES % alignment:
            raise ValueError(f"device storage alignment {alignment} does not divide the "
                             f"{PAGE_BYTES}-byte DRAM page")
        self.nbytes = nbytes
        self.runtime = runtime
        self.buffer = runtime.alloc(nbytes)

    def tensor(self, offset: int, shape, dtype) -> "DeviceTensor":
        """A device tensor of logical ``shape`` and ``dtype`` packed at byte ``offset``."""
        return DeviceTensor(self, offset, shape, dtype)

    def __del__(self):
        try:
            self.runtime.free(self.buffer)
        except Exception:       # the device was closed first: its DRAM is gone anyway
            pass

    def __repr__(self):
        return f"DeviceStorage({self.nbytes} bytes at 0x{self.buffer.addr:x})"


class DeviceTensor:
    """A tensor of logical ``shape`` ((N, C, H, W) or (N, K)) held in device DRAM in the
    packed activation layout (:mod:`vtakit.runtime.layout`).

    Attributes
    ----------
    shape : tuple
    dtype : numpy.dtype
    packed_shape : tuple
    nbytes : int
        Bytes of the packed form.
    buffer : vtakit.runtime.Buffer
        Its bytes, as a view of the storage's buffer (for ``Runtime.bind``).
    """

    __slots__ = ("storage", "offset", "shape", "dtype", "packed_shape", "nbytes", "buffer")

    def __init__(self, storage: DeviceStorage, offset: int, shape, dtype):
        self.storage, self.offset = storage, int(offset)
        self.shape, self.dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        self.packed_shape = packed_activation_shape(self.shape, storage.runtime.config)
        self.nbytes = math.prod(self.packed_shape) * self.dtype.itemsize
        self.buffer = storage.runtime.view(storage.buffer, self.offset, self.nbytes)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def reshape(self, shape) -> "DeviceTensor":
        """The same bytes under another logical shape, where the packed layout is the same
        (e.g. (N, C, 1, 1) and (N, C)); anything else would need a repack."""
        view = DeviceTensor(self.storage, self.offset, shape, self.dtype)
        if view.packed_shape != self.packed_shape or view.shape[:2] != self.shape[:2]:
            raise ValueError(f"a device tensor {list(self.shape)} cannot be reshaped to "
                             f"{list(view.shape)} in place: the packed layouts differ")
        return view

    def read_packed(self) -> np.ndarray:
        """Download the packed array."""
        return self.storage.runtime.download(self.buffer, self.dtype, self.packed_shape)

    def write_packed(self, packed) -> None:
        """Upload a packed array of :attr:`packed_shape` and :attr:`dtype`."""
        packed = np.asarray(packed)
        if packed.shape != self.packed_shape or packed.dtype != self.dtype:
            raise ValueError(f"device tensor {list(self.shape)} {self.dtype}: got a packed "
                             f"{packed.dtype} array of shape {list(packed.shape)}, expected "
                             f"{list(self.packed_shape)}")
        self.storage.runtime.upload(self.buffer, packed)

    def numpy(self) -> np.ndarray:
        """Download and unpack: a host array of :attr:`shape`."""
        x = unpack_activation(self.read_packed(), self.storage.runtime.config, *self.shape[:2])
        return x.reshape(self.shape)

    def __array__(self, dtype=None, copy=None):
        x = self.numpy()
        return x if dtype is None else x.astype(dtype)

    def __repr__(self):
        return f"DeviceTensor({self.dtype} {list(self.shape)} at 0x{self.buffer.addr:x})"


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
