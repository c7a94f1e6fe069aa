"""vtakit.runtime.vm: the virtual machine that runs compiled models.

:mod:`.bytecode` (instruction set, binary form, verifier), :mod:`.objects`
(tensor, device tensor, ADT, closure, storage), :mod:`.interpreter` (:class:`VirtualMachine`,
one dispatch loop), :mod:`.context` (device and kernels for packed functions).
"""

from .bytecode import (DTYPES, AllocADT, AllocClosure, AllocStorage, AllocTensor, AllocTensorReg,
                       BytecodeError, Fatal, GetField, GetTag, Goto, If, Invoke, InvokeClosure,
                       InvokePacked, LoadConst, LoadConsti, Move, Opcode, ReshapeTensor, Ret,
                       TailInvoke, TailInvokeClosure, VMFunction, format_instruction)
from .context import RuntimeContext
from .interpreter import ON_LAYER, VirtualMachine, VMError
from .objects import ADT, Closure, DeviceStorage, DeviceTensor, Storage, Tensor, to_python

__all__ = [
    "VirtualMachine", "VMError", "ON_LAYER", "RuntimeContext", "VMFunction", "Opcode", "DTYPES",
    "BytecodeError", "format_instruction",
    "Move", "Ret", "Invoke", "InvokeClosure", "InvokePacked", "AllocTensor", "AllocTensorReg",
    "AllocStorage", "AllocADT", "AllocClosure", "GetField", "GetTag", "If", "Goto", "LoadConst",
    "LoadConsti", "Fatal", "ReshapeTensor", "TailInvoke", "TailInvokeClosure",
    "Tensor", "ADT", "Closure", "Storage", "DeviceStorage", "DeviceTensor", "to_python",
]
