"""One VTA layer launch: operands staged or read in place, weights resident, the result delivered.

Every way a layer's kernel runs goes through :class:`LayerLaunch`: the VM's
``vta_layer`` primitives (:mod:`.vta_layer`), the compiler's direct runs of a layer
(:func:`vtakit.compiler.vta.lower_layer`) and a plan's one-shot run
(:meth:`vtakit.compiler.ops.OpPlan.run`). A launch is four steps, each its own call
so a caller (or a measurement hook) sees where the device work ends and the host's
begins:

1. :meth:`LayerLaunch.stage`: bind the activation operands (a
   :class:`~.vm.objects.DeviceTensor` of the slot's size is read in place, a host
   array is packed, with the ``pre`` host step first when there is one, and uploaded)
   and the weights (uploaded once and kept resident, or staged per call);
2. :meth:`LayerLaunch.execute`: bind the Program and run it (``rt.synchronize``);
3. :meth:`LayerLaunch.requantize`: the ``post`` host step on the downloaded planes
   (an exact requantize, a rounding division, a border correction);
4. :meth:`LayerLaunch.deliver`: the packed result written into a device tensor, or
   unpacked (:meth:`LayerLaunch.unpack`), followed by the element-wise ``tail`` steps,
   into a host array.

:meth:`LayerLaunch.run` does 1 and 2 and downloads the planes; a kernel whose output
goes straight into a device tensor (no host step after it, one plane) stores there and
3 and 4 have nothing to do. The host steps (``pre`` inside 1, 3, 4) are separate calls,
so timing one is one line around it; each is logged through
:func:`.hosttime.timed` (staging uploads, the ``pre`` and ``post`` steps, downloads,
unpacking and the ``tail``), which costs one global read while no profile listens. The
one-time upload of resident weights is not a per-inference host step and is not logged.
"""

from __future__ import annotations

import numpy as np

from .hosttime import timed
from .layout import nchw_shape, pack_activation
from .vm.objects import DeviceTensor

__all__ = ["LayerLaunch", "LaunchResult"]


class LaunchResult:
    """What one :meth:`LayerLaunch.run` gave: the downloaded planes (None when the kernel
    stored straight into the device tensor ``out``) and the device's
    :class:`~.device.RunResult`."""

    __slots__ = ("y", "run")

    def __init__(self, y, run):
        self.y, self.run = y, run

    @property
    def cycles(self) -> int:
        return int(self.run.cycles)

    @property
    def dram_bytes(self) -> int:
        """The bytes the device's load and store modules moved (its ``*_nbytes`` counters)."""
        return int(sum(v for k, v in self.run.stats.items() if k.endswith("_nbytes")))


class LayerLaunch:
    """The launch of one kernel (a :class:`~.program.Program`) with its operands.

    Parameters
    ----------
    program : Program
        The kernel; its slots are the operands (``"out"`` is the result).
    config : VTAConfig
        What host activations are packed for.
    out_shape, out_dtype
        The ``out`` operand: (planes, N/b, C/c, H, W, b, c) or (planes, N/b, C/c, b, c).
    pre, post : callable, optional
        Host steps: ``pre(x)`` on the NCHW ``data`` input before it is packed (the input
        is then never read in place), ``post(planes)`` on the downloaded planes giving
        the packed result; without ``post`` the result is plane 0.
    resident : bool
        Keep the weights uploaded between calls (until :meth:`release`); otherwise they
        are staged every call.
    """

    def __init__(self, program, config, out_shape, out_dtype, *, pre=None, post=None,
                 resident=True):
        self.program, self.config = program, config
        self.out_shape, self.out_dtype = tuple(int(d) for d in out_shape), np.dtype(out_dtype)
        self.pre, self.post = pre, post
        #: slot -> (runtime, buffer) of the weights uploaded so far; None: not kept
        self._resident = {} if resident else None

    def release(self) -> None:
        """Free the resident weights."""
        for rt, buf in (self._resident or {}).values():
            try:
                rt.free(buf)
            except Exception:   # the device is already closed
                pass
        if self._resident is not None:
            self._resident = {}

    def stores_directly(self, out, tail=False) -> bool:
        """Whether the kernel stores its result straight into ``out``: a device tensor of
        the result's size, one plane, no host step after the kernel."""
        return (self.post is None and not tail and self.out_shape[0] == 1
                and isinstance(out, DeviceTensor) and out.nbytes == self.program.slots["out"])

    # ------------------------------------------------------------------ the steps

    def stage(self, rt, activations: dict, weights: dict, scratch: list) -> dict:
        """Buffers for every slot but ``out``: ``activations`` (slot -> DeviceTensor or
        host array, NCHW or (N, C)) read in place or packed and uploaded, ``weights``
        (slot -> packed array) resident or uploaded; staged buffers go to ``scratch``."""
        slots, bufs = self.program.slots, {}
        for slot, v in activations.items():
            pre = self.pre if slot == "data" else None
            if pre is None and isinstance(v, DeviceTensor) and v.nbytes == slots[slot]:
                bufs[slot] = v.buffer               # left on the device by the last layer
                continue
            x = (timed("download", np.asarray, v) if isinstance(v, DeviceTensor)
                 else np.asarray(v))
            x = x.reshape(nchw_shape(x.shape))
            if pre is not None:
                x = timed(_op_name(pre), pre, x)
            bufs[slot] = _staged(rt, slots[slot], scratch,
                                 timed("pack", pack_activation, x.astype(np.int8), self.config))
        for slot, array in weights.items():
            if self._resident is None:
                bufs[slot] = _staged(rt, slots[slot], scratch, array)
                continue
            if slot not in self._resident:
                buf = rt.alloc(slots[slot])
                rt.upload(buf, array)
                self._resident[slot] = (rt, buf)
            bufs[slot] = self._resident[slot][1]
        return bufs

    def execute(self, rt, bufs: dict):
        """Bind the kernel to ``bufs`` and run it; the device's RunResult."""
        try:
            rt.bind(self.program, bufs)
        except BaseException:
            rt.reset()              # drop the half-built stream
            raise
        return rt.synchronize()

    def requantize(self, planes) -> np.ndarray:
        """The ``post`` host step on the downloaded planes (plane 0 without one)."""
        return planes[0] if self.post is None else timed(_op_name(self.post), self.post, planes)

    def execute_chained(self, rt, bufs: dict, chain, direct: bool, prefetch=None):
        """:meth:`execute` within a chain (:mod:`.chain`): the kernel follows the chain's
        last one and, when it stores directly into a device tensor (``direct``), waits
        for the next layer: returns None. Otherwise the stream runs: the device's
        RunResult; with ``prefetch`` (:meth:`prefetch_for`) it ends with the warm-start
        head of the layer expected next (:meth:`.chain.Chain.follow`)."""
        return chain.follow(rt, self.program, bufs, direct, prefetch)

    def prefetch_for(self, weights: dict):
        """``prefetch(rt) -> (program, buffers)`` for :meth:`.chain.Chain.follow`: this
        launch as the layer expected next, its resident ``weights`` (slot -> packed
        array) uploaded when first asked; None when its weights are staged per call."""
        if self._resident is None:
            return None
        return lambda rt: (self.program, self.stage(rt, {}, weights, []))

    def run(self, rt, activations: dict, weights: dict, out=None, *,
            tail=False, chain=None, prefetch=None) -> LaunchResult:
        """Stage, execute and download (see the module docstring).

        ``out`` is where the result goes: a device tensor the kernel stores into when
        :meth:`stores_directly` (``tail``: element-wise host steps follow). The result's
        ``y`` is every downloaded plane (None when the kernel stored into ``out``); the
        caller applies :meth:`requantize` and :meth:`deliver`. With ``chain`` (a
        :class:`~.chain.Chain`) the kernel runs chained (:meth:`execute_chained`); when
        it leaves the chain open the result's ``run`` is None (nothing ran yet);
        ``prefetch`` (:meth:`prefetch_for` of the layer expected next) is passed on.
        """
        scratch = []
        try:
            bufs = self.stage(rt, activations, weights, scratch)
            direct = self.stores_directly(out, tail)
            bufs["out"] = out.buffer if direct else _staged(rt, self.program.slots["out"],
                                                            scratch)
            if chain is None:
                res = self.execute(rt, bufs)
            else:
                res = self.execute_chained(rt, bufs, chain, direct, prefetch)
                if res is None:         # the chain's run frees them
                    chain.scratch += scratch
                    scratch = []
            if direct:
                return LaunchResult(None, res)
            return LaunchResult(timed("download", rt.download, bufs["out"], self.out_dtype,
                                      self.out_shape), res)
        finally:
            for buf in scratch:
                rt.free(buf)

    @staticmethod
    def deliver(y, out, unpack, tail=()):
        """Put the packed result ``y`` where it goes: nothing to do when the kernel
        stored it (``y`` None), written packed into a device tensor ``out``, or
        ``unpack(y)`` then the ``tail`` steps, into the host array ``out`` when given.
        Returns the device tensor ``out``, else the host result."""
        if y is None:
            return out
        if isinstance(out, DeviceTensor):
            timed("upload", out.write_packed, y.astype(out.dtype, copy=False))
            return out
        y = timed("unpack", unpack, y)
        for step in tail:
            y = timed(_op_name(step), step, y)
        if out is not None:
            out[...] = y
        return y


def _staged(rt, nbytes, scratch, array=None):
    """A buffer of ``nbytes`` freed after the call (``array`` uploaded into it: a host
    step, timed)."""
    buf = rt.alloc(nbytes)
    scratch.append(buf)
    if array is not None:
        timed("upload", rt.upload, buf, array)
    return buf


def _op_name(step) -> str:
    """The name a host step is timed under: its host op's name (a
    :class:`~.vta_layer.HostStep`), else its function's."""
    return getattr(step, "op", None) or getattr(step, "__name__", "host")
