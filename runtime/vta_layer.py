"""The ``"vta_layer"`` primitive kind: one quantized layer as a VTA kernel, all in data.

The compiler (:func:`vtakit.compiler.vta.vm_lowerer`) plans the layer, packs its
weights and records what running it takes; this factory runs it with the runtime
alone. The entry's metadata (JSON)::

    kernel          the kernel-table Program to bind
    constants       the constant-pool indices of the layer's arrays (the VM compiler
                    fills it); every ``k`` below indexes this list
    inputs          [[slot, ref], ...]: operands staged per call, ref ["p", i] the
                    primitive's parameter i or ["c", k] constant array k (NCHW or (N, C),
                    packed here); a DeviceTensor of the slot's size is read in place
    pre             (optional; absent: none) a host step (:class:`HostStep`) on the
                    ``data`` input before it is packed: {"op", "attrs", "constants"}
                    as ``post``, called as op(x, *constants, **attrs) on the NCHW int8
                    input (a DeviceTensor is downloaded first), giving the NCHW int8
                    array the kernel reads (``vtakit.op.vta.fold_input``: a thin
                    convolution's taps folded into its channels)
    weights         [[slot, k], ...]: constant array k, already packed as the kernel
                    reads it, uploaded once per VM and kept resident
    out             {"shape", "dtype"}: the kernel's ``out`` operand, (planes, N/b, C/c,
                    H, W, b, c)
    post            null, or a host step (:class:`HostStep`) on the downloaded planes:
                    {"op": a registered host op (vtakit.op.vta.*), "attrs": {...},
                    "constants": [k, ...]}, called as op(planes, *constants, **attrs),
                    giving the packed int8 result
    unpack          {"n", "c", "shape", "dtype"}: packed -> (N, C, H, W) or (N, C) of
                    ``shape``, cast to ``dtype`` (null: kept)
    tail            [step, ...]: element-wise host ops on the unpacked output, each
                    op(y, *constants, **attrs) (e.g. qnn.dequantize)
    device_inputs   per parameter: may arrive as a DeviceTensor
    device_output   the output may be a DeviceTensor (written in place, no unpacking)
    dram_weights, dram_scratch   device DRAM of the resident and the staged operands
    layer           {"kind", "where", "why", "macs", "tiling", "predicted_cycles",
                    "dram_bytes", "roofline"}: what the compiler planned, for reports only
                    ("predicted_cycles" is the planner's analytic estimate; the predicted
                    figure reports show is the event model's on the kernel)

Attribute values are encoded as in :mod:`.host` (tuples tagged).
"""

from __future__ import annotations

import math

import numpy as np

from .host import decode_attrs, encode_attr
from .hostops import get_hostop
from .launch import LayerLaunch
from .layout import unpack_activation
from .module import PrimitiveError
from .registry import RegistryError

__all__ = ["KIND", "HostStep", "VTALayerKernel", "vta_layer_factory"]

#: The primitive kind (factory ``"vtakit.vm.primitive.vta_layer"``).
KIND = "vta_layer"


class HostStep:
    """A host step of a VTA layer: the host op registered as ``op``
    (:mod:`.hostops`), called as ``op(y, *constants, **attrs)``.

    The compiler's strategies build them (a direct run calls them too); an executable
    stores :meth:`encode`'s data, which the factory reads back with :meth:`decode`.
    """

    def __init__(self, op: str, attrs=None, constants=()):
        self.op, self.attrs, self.constants = str(op), dict(attrs or {}), list(constants)
        self.func = get_hostop(self.op)

    def __call__(self, y):
        return np.asarray(self.func(y, *self.constants, **self.attrs))

    def encode(self, add_constant) -> dict:
        """JSON data; ``add_constant(array) -> index`` stores the constant arrays."""
        attrs = {k: encode_attr(v) for k, v in sorted(self.attrs.items())}
        return {"op": self.op, "attrs": attrs,
                "constants": [add_constant(c) for c in self.constants]}

    @classmethod
    def decode(cls, data: dict, constants) -> "HostStep":
        """The step of :meth:`encode`'s ``data``; ``constants[i]`` is its array ``i``."""
        return cls(data["op"], decode_attrs(data["attrs"]),
                   [constants[k] for k in data["constants"]])

    def __repr__(self):
        return f"HostStep({self.op!r}, {self.attrs!r}, {len(self.constants)} constants)"


class VTALayerKernel:
    """The packed function of one ``vta_layer`` entry (destination passing:
    ``f(*inputs, out)``); its resident weights are freed by :meth:`release`."""

    def __init__(self, entry, ctx):
        meta = entry.meta_dict
        self.name, self.ctx, self.config = entry.name, ctx, ctx.config
        try:
            pool = [ctx.constants[k] for k in meta.get("constants", ())]
        except (TypeError, IndexError) as e:
            raise PrimitiveError(f"primitive {entry.name!r}: bad constant index ({e})") from None
        self.num_inputs = entry.num_inputs
        where = f"primitive {entry.name!r}"
        try:
            self.program = ctx.program(meta["kernel"])
            self.inputs = [(str(s), (str(r[0]), int(r[1]))) for s, r in meta["inputs"]]
            self.weights = [(str(s), pool[int(k)]) for s, k in meta["weights"]]
            self.out_shape = tuple(int(d) for d in meta["out"]["shape"])
            self.out_dtype = np.dtype(meta["out"]["dtype"])
            u = meta["unpack"]
            self.unpack = (int(u["n"]), int(u["c"]), tuple(int(d) for d in u["shape"]),
                           None if u["dtype"] is None else np.dtype(u["dtype"]))
            self.pre = None if meta.get("pre") is None else HostStep.decode(meta["pre"], pool)
            self.post = None if meta["post"] is None else HostStep.decode(meta["post"], pool)
            self.tail = [HostStep.decode(s, pool) for s in meta["tail"]]
        except RegistryError as e:
            raise PrimitiveError(f"{where}: {e}") from None
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise PrimitiveError(f"{where}: bad vta_layer metadata ({type(e).__name__}: {e})") \
                from None
        self.pool = pool
        self._check(where)
        self.launch = LayerLaunch(self.program, self.config, self.out_shape, self.out_dtype,
                                  pre=self.pre, post=self.post)

    def _check(self, where):
        slots = dict(self.program.slots)
        names = [s for s, _ in self.inputs] + [s for s, _ in self.weights] + ["out"]
        if sorted(names) != sorted(slots):
            raise PrimitiveError(f"{where}: kernel {self.program.name!r} has slots "
                                 f"{sorted(slots)}, the metadata gives {sorted(names)}")
        for slot, array in self.weights:
            if array.nbytes != slots[slot]:
                raise PrimitiveError(f"{where}: the packed {slot!r} has {array.nbytes} bytes, "
                                     f"the kernel reads {slots[slot]}")
        if math.prod(self.out_shape) * self.out_dtype.itemsize != slots["out"]:
            raise PrimitiveError(f"{where}: out {self.out_dtype}{list(self.out_shape)} does not "
                                 f"fill the kernel's {slots['out']}-byte out slot")
        for _, (kind, i) in self.inputs:
            if kind not in ("p", "c") or not 0 <= i < (self.num_inputs if kind == "p"
                                                       else len(self.pool)):
                raise PrimitiveError(f"{where}: input reference {[kind, i]} is out of range")

    def release(self) -> None:
        """Free the resident weights."""
        self.launch.release()

    def _unpack(self, y):
        n, c, shape, dtype = self.unpack
        y = unpack_activation(y, self.config, n, c).reshape(shape)
        return y if dtype is None or y.dtype == dtype else y.astype(dtype)

    def __call__(self, *args):
        ins, out = args[:self.num_inputs], args[self.num_inputs]
        activations = {slot: ins[i] if kind == "p" else self.pool[i]
                       for slot, (kind, i) in self.inputs}
        launch = self.launch
        nxt = self.ctx.next_layer.get(self)
        prefetch = None if nxt is None else nxt.launch.prefetch_for(dict(nxt.weights))
        planes = launch.run(self.ctx.runtime, activations, dict(self.weights), out,
                            tail=bool(self.tail), chain=self.ctx.chain, prefetch=prefetch).y
        y = None if planes is None else launch.requantize(planes)      # host step
        launch.deliver(y, out, self._unpack, self.tail)                 # unpack, tail: host


def vta_layer_factory(entry, ctx):
    """The ``"vta_layer"`` primitive factory."""
    kernel = VTALayerKernel(entry, ctx)
    ctx.on_close(kernel.release)
    return kernel

