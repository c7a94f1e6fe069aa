"""The virtual machine: register frames and one dispatch loop.

Design for low overhead: instructions are tuples, opcodes plain ints tested
most-frequent first (a compiled CNN executes AllocTensor + InvokePacked per
layer), a frame is a Python list of registers, calls push
``(code, pc, registers, destination)`` on a list, and packed functions are
resolved to callables once when the VM is created.
"""

from __future__ import annotations

import traceback

import numpy as np

from ...hw.errors import VtakitError
from ..module import load_primitives
from ..registry import get_global_func
from .bytecode import Opcode, format_instruction
from .context import RuntimeContext
from .objects import ADT, Closure, DeviceStorage, DeviceTensor, Storage, to_python

__all__ = ["VirtualMachine", "VMError", "ON_LAYER"]

#: A function registered under this name sees every packed call's outputs, like ``hook``.
ON_LAYER = "vtakit.vm.on_layer"

_MOVE = Opcode.MOVE.value
_RET = Opcode.RET.value
_INVOKE = Opcode.INVOKE.value
_INVOKE_CLOSURE = Opcode.INVOKE_CLOSURE.value
_INVOKE_PACKED = Opcode.INVOKE_PACKED.value
_ALLOC_TENSOR = Opcode.ALLOC_TENSOR.value
_ALLOC_TENSOR_REG = Opcode.ALLOC_TENSOR_REG.value
_ALLOC_STORAGE = Opcode.ALLOC_STORAGE.value
_ALLOC_ADT = Opcode.ALLOC_ADT.value
_ALLOC_CLOSURE = Opcode.ALLOC_CLOSURE.value
_GET_FIELD = Opcode.GET_FIELD.value
_GET_TAG = Opcode.GET_TAG.value
_IF = Opcode.IF.value
_GOTO = Opcode.GOTO.value
_LOAD_CONST = Opcode.LOAD_CONST.value
_LOAD_CONSTI = Opcode.LOAD_CONSTI.value
_FATAL = Opcode.FATAL.value
_RESHAPE_TENSOR = Opcode.RESHAPE_TENSOR.value
_TAIL_INVOKE = Opcode.TAIL_INVOKE.value
_TAIL_INVOKE_CLOSURE = Opcode.TAIL_INVOKE_CLOSURE.value


class VMError(VtakitError, RuntimeError):
    """A failure while running bytecode; the message names the function, pc and instruction.

    Attributes
    ----------
    function : str
    pc : int
    """

    def __init__(self, message, function=None, pc=None):
        super().__init__(message)
        self.function, self.pc = function, pc


#: instructions after which the next packed call is not known from the code alone
_BRANCHES = frozenset((_IF, _GOTO, _RET, _INVOKE, _TAIL_INVOKE, _INVOKE_CLOSURE,
                       _TAIL_INVOKE_CLOSURE, _FATAL))


def _next_layers(funcs, packed) -> dict:
    """``{kernel: next kernel}``: for each ``vta_layer`` kernel, the one its function's
    straight-line code calls next (host calls between them allowed), when that is the
    same at every call site. A guess for a warm start, which checks it
    (:meth:`vtakit.runtime.chain.Chain.follow`)."""
    from ..vta_layer import VTALayerKernel
    seen: dict = {}
    for code, _ in funcs:
        last = None
        for ins in code:
            if ins[0] == _INVOKE_PACKED:
                f = packed[ins[1]]
                if isinstance(f, VTALayerKernel):
                    if last is not None:
                        seen.setdefault(last, set()).add(f)
                    last = f
            elif ins[0] in _BRANCHES:
                last = None
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def _value(v):
    """An If operand as a Python scalar (a 0-d or 1-element tensor, or an int)."""
    if v.__class__ is np.ndarray:
        if v.size != 1:
            raise VMError(f"If compares a tensor of shape {v.shape}; a condition must hold "
                          "one element")
        return v.item()
    return v


class VirtualMachine:
    """Runs an :class:`~vtakit.runtime.executable.Executable`.

    Parameters
    ----------
    exe : Executable
    backend : str
        Device backend for VTA kernels (opened only if a kernel runs).
    device : Device, optional
        An already open device to use (``backend`` is then ignored).
    device_options : dict, optional
        Keyword arguments of :func:`vtakit.sim.open_device`.
    hook : callable, optional
        ``hook(name, output)`` after every packed call (every layer): ``name`` is the
        primitive's name, ``output`` a copy of its output tensor (a tuple of copies
        for several outputs), on the host in the model's layout (a tensor kept on the
        device is downloaded and unpacked for it). A function registered as
        :data:`ON_LAYER` is called too. A hook that sees outputs turns chaining off
        (a chained layer's output exists only once its chain has run).
    hook_outputs : bool
        False: ``hook`` is called with ``None`` for the output (it only marks where a
        layer ends, e.g. a :class:`~vtakit.runtime.recorder.LayerRecorder` that keeps
        no outputs), and chaining stays on.
    chain : bool
        Run consecutive device-resident layers as one instruction stream with one
        synchronize (:mod:`vtakit.runtime.chain`); False: every layer synchronizes.

    Attributes
    ----------
    module : Module
        The resolved primitives.
    context : RuntimeContext
    """

    def __init__(self, exe, backend: str = "behavioral", *, device=None, device_options=None,
                 hook=None, hook_outputs=True, chain=True):
        self.exe = exe
        on_layer = get_global_func(ON_LAYER, allow_missing=True)
        sees = on_layer is not None or (hook is not None and hook_outputs)
        self.context = RuntimeContext(exe.config, backend, device=device,
                                      device_options=device_options,
                                      kernels=dict(exe.kernels), constants=exe.constants,
                                      programs=getattr(exe, "program", None),
                                      chain=chain and not sees)
        self.module = load_primitives(exe.primitives, self.context,
                                      getattr(exe, "local_functions", None))
        self.packed_names = [p.name for p in exe.primitives]
        self._packed = [self.module.get_function(n) for n in self.packed_names]
        self._funcs = [(f.code, f.num_regs) for f in exe.functions]
        self._names = [f.name for f in exe.functions]
        self._index = {f.name: i for i, f in enumerate(exe.functions)}
        self._consts = list(exe.constants)
        hooks = [h for h in (hook, on_layer) if h]
        self._hook = self._combine(hooks, sees) if hooks else None
        if self.context.chain is not None:
            self.context.next_layer = _next_layers(self._funcs, self._packed)

    @staticmethod
    def _combine(hooks, outputs=True):
        if not outputs:
            def marker(name, outputs):
                for h in hooks:
                    h(name, None)
            return marker

        def hook(name, outputs):
            value = tuple(o.numpy() if o.__class__ is DeviceTensor else o.copy() for o in outputs)
            value = value[0] if len(value) == 1 else value
            for h in hooks:
                h(name, value)
        return hook

    # ----------------------------------------------------------------- API
    def invoke(self, func="main", *args):
        """Call a function of the executable (name or index) with VM values; returns a VM value."""
        index = self._index.get(func) if isinstance(func, str) else func
        if index is None or not 0 <= index < len(self._funcs):
            raise VMError(f"the executable has no function {func!r}; it has "
                          + ", ".join(self._names))
        nparams = len(self.exe.functions[index].params)
        if len(args) != nparams:
            raise VMError(f"{self._names[index]} takes {nparams} arguments, got {len(args)}")
        ctx = self.context
        try:
            result = self._run(index, args)
        except BaseException:
            if ctx.chain is not None and ctx.chain.open:
                ctx.chain.abort(ctx.runtime)        # drop the half-built stream
            raise
        ctx.end_chain()         # a chain still open (none in a compiled model) runs here
        return result

    def run(self, *args, func="main"):
        """:meth:`invoke` with tuples returned as Python tuples."""
        return to_python(self.invoke(func, *args))

    def close(self) -> None:
        """Release the device (if the VM opened one) and kernel resources."""
        self.context.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ----------------------------------------------------------------- the loop
    def _run(self, func_index, args):
        funcs, packed, consts, hook = self._funcs, self._packed, self._consts, self._hook
        code, nregs = funcs[func_index]
        regs = [None] * nregs
        regs[:len(args)] = args
        stack = []
        pc = 0
        try:
            while True:
                ins = code[pc]
                op = ins[0]
                if op == _INVOKE_PACKED:
                    argv = [regs[r] for r in ins[3]]
                    packed[ins[1]](*argv)
                    if hook is not None and ins[2]:
                        hook(self.packed_names[ins[1]], argv[-ins[2]:])
                    pc += 1
                elif op == _ALLOC_TENSOR:
                    regs[ins[5]] = regs[ins[1]].tensor(ins[2], ins[3], ins[4])
                    pc += 1
                elif op == _MOVE:
                    regs[ins[2]] = regs[ins[1]]
                    pc += 1
                elif op == _LOAD_CONST:
                    regs[ins[2]] = consts[ins[1]]
                    pc += 1
                elif op == _IF:
                    if _value(regs[ins[1]]) == _value(regs[ins[2]]):
                        pc += ins[3]
                    else:
                        pc += ins[4]
                elif op == _GOTO:
                    pc += ins[1]
                elif op == _RET:
                    result = regs[ins[1]]
                    if not stack:
                        return result
                    code, pc, regs, dst = stack.pop()
                    regs[dst] = result
                    pc += 1
                elif op == _INVOKE or op == _TAIL_INVOKE:
                    if op == _INVOKE:
                        stack.append((code, pc, regs, ins[3]))
                    code, nregs = funcs[ins[1]]
                    new = [None] * nregs
                    new[:len(ins[2])] = [regs[r] for r in ins[2]]
                    regs, pc = new, 0
                elif op == _INVOKE_CLOSURE or op == _TAIL_INVOKE_CLOSURE:
                    if op == _INVOKE_CLOSURE:
                        stack.append((code, pc, regs, ins[3]))
                    code, regs = self._closure_frame(regs[ins[1]], [regs[r] for r in ins[2]])
                    pc = 0
                else:
                    self._register_op(ins, regs)
                    pc += 1
        except Exception as e:
            err = self._error(e, code, pc)
            # The tracebacks keep this frame and the failing packed function's: drop their
            # tensors (device DRAM included) now, not when the exception is dropped; the
            # VMError names the function, instruction and cause.
            regs = stack = argv = None     # noqa: F841
            if e.__traceback__ is not None:
                traceback.clear_frames(e.__traceback__.tb_next)
            raise err from e

    def _register_op(self, ins, regs) -> None:
        """The instructions that only set one register (storage, ADTs, closures, shapes),
        rarer than the ones :meth:`_run` dispatches itself."""
        op = ins[0]
        if op == _ALLOC_STORAGE:
            regs[ins[3]] = (DeviceStorage(self.context.runtime, ins[1], ins[2])
                            if ins[4] else Storage(ins[1], ins[2]))
        elif op == _ALLOC_ADT:
            regs[ins[3]] = ADT(ins[1], [regs[r] for r in ins[2]])
        elif op == _GET_FIELD:
            obj = regs[ins[1]]
            if obj.__class__ is not ADT:
                raise VMError(f"GetField of a {type(obj).__name__}, not an ADT")
            regs[ins[3]] = obj.fields[ins[2]]
        elif op == _GET_TAG:
            obj = regs[ins[1]]
            if obj.__class__ is not ADT:
                raise VMError(f"GetTag of a {type(obj).__name__}, not an ADT")
            regs[ins[2]] = obj.tag
        elif op == _LOAD_CONSTI:
            regs[ins[2]] = ins[1]
        elif op == _ALLOC_CLOSURE:
            regs[ins[3]] = Closure(ins[1], [regs[r] for r in ins[2]])
        elif op == _ALLOC_TENSOR_REG:
            shape = regs[ins[3]]
            shape = tuple(int(s) for s in (shape.tolist() if isinstance(shape, np.ndarray)
                                           else shape))
            regs[ins[5]] = regs[ins[1]].tensor(ins[2], shape, ins[4])
        elif op == _RESHAPE_TENSOR:
            regs[ins[3]] = regs[ins[1]].reshape(ins[2])
        elif op == _FATAL:
            raise VMError("executed Fatal (a match with no matching clause)")
        else:
            raise VMError(f"unknown opcode {op}")

    def _closure_frame(self, clo, args):
        """(code, registers) of a call of closure ``clo`` with ``args``."""
        if clo.__class__ is not Closure:
            raise VMError(f"InvokeClosure of a {type(clo).__name__}, not a closure")
        code, nregs = self._funcs[clo.func_index]
        vals = clo.captured + tuple(args)
        if len(vals) > nregs:
            raise VMError(f"closure of {self._names[clo.func_index]} called with "
                          f"{len(vals)} values for {nregs} registers")
        regs = [None] * nregs
        regs[:len(vals)] = vals
        return code, regs

    def _error(self, e, code, pc):
        name = next((self._names[i] for i, (c, _) in enumerate(self._funcs) if c is code), "?")
        try:
            text = format_instruction(code[pc], packed_names=self.packed_names,
                                      func_names=self._names)
        except Exception:   # a corrupt instruction: report what we have
            text = repr(code[pc]) if 0 <= pc < len(code) else f"pc out of range ({len(code)})"
        detail = str(e.args[0]) if isinstance(e, VMError) and e.args else f"{type(e).__name__}: {e}"
        return VMError(f"{name}, instruction {pc} [{text}]: {detail}", name, pc)
