"""What packed functions of an executable may use at run time: the device and the kernels.

The device is opened on first use, so a model whose primitives all run on the
host never starts a simulator.
"""

from __future__ import annotations

__all__ = ["RuntimeContext"]


class RuntimeContext:
    """The execution environment handed to primitive factories.

    Parameters
    ----------
    config : VTAConfig
        The hardware the executable was built for.
    backend : str
        Device backend (``behavioral``, ``pysim``, ``cxxrtl``, ``verilator``).
    device : Device, optional
        An open device to use instead of opening one (it is not closed by :meth:`close`).
    device_options : dict, optional
        Keyword arguments of :func:`vtakit.sim.open_device`.
    kernels : dict of str -> bytes
        The executable's kernel table (serialized Programs by name).
    constants : list of numpy.ndarray
        The executable's constant pool.
    programs : callable, optional
        ``programs(name) -> Program``: the kernels already parsed (the executable's).
    chain : bool
        Let consecutive device-resident layers run as one instruction stream
        (:mod:`vtakit.runtime.chain`); False: every layer synchronizes.

    Attributes
    ----------
    chain : Chain or None
        The chain state of :attr:`runtime` (None when chaining is off).
    next_layer : dict
        kernel -> the ``vta_layer`` kernel expected to run next on the device (the VM
        fills it from its code): a kernel's stream ends with that one's warm-start head
        (:meth:`vtakit.runtime.chain.Chain.follow`); a guess, checked when it runs.
    """

    def __init__(self, config, backend="behavioral", *, device=None, device_options=None,
                 kernels=None, constants=(), programs=None, chain=True):
        if device is None:
            # An unknown backend fails here, before any layer runs, not at the first kernel.
            from ..device import BACKENDS, DeviceError
            if backend not in BACKENDS:
                raise DeviceError(f"unknown backend {backend!r}; backends are "
                                  f"{', '.join(BACKENDS)}")
        if device is not None and device.config != config:
            from ...hw.config import extension_note
            from ..device import DeviceError
            raise DeviceError(f"the executable is built for config {config.name}, not the "
                              f"device's {device.config.name}"
                              + extension_note(config, device.config))
        self.config = config
        self.backend = backend
        self.device_options = dict(device_options or {})
        self.kernels = dict(kernels or {})
        self.constants = constants
        self._device = device
        self._owns_device = device is None
        self._runtime = None
        self._closers = []
        self._programs = {}
        self._parse = programs
        from ..chain import Chain
        self.chain = Chain() if chain else None
        self.next_layer = {}

    @property
    def device(self):
        """The device (opened on first access)."""
        if self._device is None:
            from ..device import open_device
            self._device = open_device(self.backend, self.config, **self.device_options)
        return self._device

    @property
    def device_opened(self) -> bool:
        return self._device is not None

    @property
    def runtime(self):
        """A :class:`vtakit.runtime.Runtime` over :attr:`device` (created on first access)."""
        if self._runtime is None:
            from ..driver import Runtime
            self._runtime = Runtime(self.device)
        return self._runtime

    def kernel(self, name: str) -> bytes:
        """A kernel-table entry by name."""
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"the executable has no kernel {name!r}; its kernels are "
                           + (", ".join(self.kernels) or "none")) from None

    def program(self, name: str):
        """A kernel-table entry as a :class:`~vtakit.runtime.program.Program` (parsed once)."""
        prog = self._programs.get(name)
        if prog is None:
            from ..program import Program
            blob = self.kernel(name)
            prog = self._programs[name] = (self._parse(name) if self._parse is not None
                                           else Program.from_bytes(blob))
        return prog

    def on_close(self, func) -> None:
        """Call ``func()`` when the context closes (a kernel freeing its DRAM buffers)."""
        self._closers.append(func)

    def end_chain(self):
        """Run an open chain (the VM does at the end of a call); its RunResult or None."""
        if self.chain is not None and self.chain.open:
            return self.chain.close(self.runtime)
        return None

    def close(self) -> None:
        try:
            if self.chain is not None and self._runtime is not None:
                self.chain.abort(self._runtime)
            while self._closers:
                self._closers.pop()()
        finally:                        # the device is released even if a closer failed
            if self._runtime is not None and self._device is not None \
                    and not self._owns_device:
                self._runtime.release()     # a device the caller keeps gets its DRAM back
            if self._owns_device and self._device is not None:
                self._device.close()
                self._device = None
            self._runtime = None
