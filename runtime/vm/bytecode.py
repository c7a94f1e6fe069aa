"""The VM's instruction set: opcodes, operand layouts, binary encoding, checking, text.

The instruction set is TVM Relay VM's. An instruction is a plain tuple
``(opcode, operand, ...)`` so the dispatch loop reads it with one index per
operand; the constructors below (:func:`Move`, :func:`InvokePacked`, ...) build
them. Register operands are indices into the current frame; jump offsets are
relative to the jumping instruction, as in TVM.

=================  ===========================================================
instruction        operands (in tuple order)
=================  ===========================================================
Move               src, dst
Ret                result
Invoke             func_index, args, dst
InvokeClosure      closure, args, dst           (callee registers: captured + args)
InvokePacked       packed_index, output_size, args   (outputs are the last ``output_size`` args)
AllocTensor        storage, offset, shape, dtype, dst   (a view of the storage at byte offset)
AllocTensorReg     storage, offset, shape_reg, dtype, dst
AllocStorage       size, alignment, dst, device   (device 0: host memory; 1: device DRAM,
                   whose tensors are in VTA's packed activation layout)
AllocADT           tag, fields, dst
AllocClosure       func_index, captured, dst
GetField           obj, index, dst
GetTag             obj, dst
If                 test, target, true_offset, false_offset   (jump by true_offset when
                   the two registers hold equal values, else by false_offset)
Goto               offset
LoadConst          const_index, dst
LoadConsti         value, dst
Fatal              (none)
ReshapeTensor      src, shape, dst   (the same memory under another shape; a device
                   tensor only where the packed bytes stay the same)
TailInvoke         func_index, args   (Invoke in tail position: the callee's frame
                   replaces the caller's, and its Ret returns to the caller's caller)
TailInvokeClosure  closure, args
=================  ===========================================================

In the binary form (the ``.vtax`` code section) each instruction is a run of
little-endian int64 words: the opcode, then its operands, a register list or a
shape as a count followed by its items, a dtype as an index in :data:`DTYPES`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from ...hw.errors import VtakitError

__all__ = [
    "Opcode", "DTYPES", "VMFunction", "BytecodeError",
    "Move", "Ret", "Invoke", "InvokeClosure", "InvokePacked", "AllocTensor", "AllocTensorReg",
    "AllocStorage", "AllocADT", "AllocClosure", "GetField", "GetTag", "If", "Goto", "LoadConst",
    "LoadConsti", "Fatal", "ReshapeTensor", "TailInvoke", "TailInvokeClosure",
    "encode_function", "decode_function", "verify_function", "format_instruction", "DEVICES",
]


class Opcode(enum.IntEnum):
    MOVE = 0
    RET = 1
    INVOKE = 2
    INVOKE_CLOSURE = 3
    INVOKE_PACKED = 4
    ALLOC_TENSOR = 5
    ALLOC_TENSOR_REG = 6
    ALLOC_STORAGE = 7
    ALLOC_ADT = 8
    ALLOC_CLOSURE = 9
    GET_FIELD = 10
    GET_TAG = 11
    IF = 12
    GOTO = 13
    LOAD_CONST = 14
    LOAD_CONSTI = 15
    FATAL = 16
    RESHAPE_TENSOR = 17
    TAIL_INVOKE = 18
    TAIL_INVOKE_CLOSURE = 19


#: Where an AllocStorage allocates, by its code: host memory or the accelerator's DRAM.
DEVICES = ("host", "vta")

#: Tensor element types an AllocTensor may name, by their code in the binary form.
DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64")
_DTYPE_CODE = {name: i for i, name in enumerate(DTYPES)}

# Operand kinds: r register, R register list, f function, p packed function,
# c constant, n non-negative integer, i integer, S shape, d dtype, o jump offset.
_LAYOUT = {
    Opcode.MOVE: (("src", "r"), ("dst", "r")),
    Opcode.RET: (("result", "r"),),
    Opcode.INVOKE: (("func", "f"), ("args", "R"), ("dst", "r")),
    Opcode.INVOKE_CLOSURE: (("closure", "r"), ("args", "R"), ("dst", "r")),
    Opcode.INVOKE_PACKED: (("packed", "p"), ("output_size", "n"), ("args", "R")),
    Opcode.ALLOC_TENSOR: (("storage", "r"), ("offset", "n"), ("shape", "S"), ("dtype", "d"),
                          ("dst", "r")),
    Opcode.ALLOC_TENSOR_REG: (("storage", "r"), ("offset", "n"), ("shape", "r"), ("dtype", "d"),
                              ("dst", "r")),
    Opcode.ALLOC_STORAGE: (("size", "n"), ("alignment", "n"), ("dst", "r"), ("device", "n")),
    Opcode.ALLOC_ADT: (("tag", "n"), ("fields", "R"), ("dst", "r")),
    Opcode.ALLOC_CLOSURE: (("func", "f"), ("captured", "R"), ("dst", "r")),
    Opcode.GET_FIELD: (("obj", "r"), ("index", "n"), ("dst", "r")),
    Opcode.GET_TAG: (("obj", "r"), ("dst", "r")),
    Opcode.IF: (("test", "r"), ("target", "r"), ("true_offset", "o"), ("false_offset", "o")),
    Opcode.GOTO: (("offset", "o"),),
    Opcode.LOAD_CONST: (("const", "c"), ("dst", "r")),
    Opcode.LOAD_CONSTI: (("value", "i"), ("dst", "r")),
    Opcode.FATAL: (),
    Opcode.RESHAPE_TENSOR: (("src", "r"), ("shape", "S"), ("dst", "r")),
    Opcode.TAIL_INVOKE: (("func", "f"), ("args", "R")),
    Opcode.TAIL_INVOKE_CLOSURE: (("closure", "r"), ("args", "R")),
}

#: Instructions after which control never falls through to the next one.
_TERMINATORS = (Opcode.RET, Opcode.GOTO, Opcode.IF, Opcode.FATAL, Opcode.TAIL_INVOKE,
                Opcode.TAIL_INVOKE_CLOSURE)


class BytecodeError(VtakitError, ValueError):
    """Malformed bytecode; ``index`` is the instruction and ``word`` its first word."""

    def __init__(self, message, index=None, word=None, function=None):
        super().__init__(message)
        self.index, self.word, self.function = index, word, function


# --------------------------------------------------------------------- constructors

def Move(src, dst):
    return (Opcode.MOVE.value, src, dst)


def Ret(result):
    return (Opcode.RET.value, result)


def Invoke(func_index, args, dst):
    return (Opcode.INVOKE.value, func_index, tuple(args), dst)


def InvokeClosure(closure, args, dst):
    return (Opcode.INVOKE_CLOSURE.value, closure, tuple(args), dst)


def InvokePacked(packed_index, output_size, args):
    return (Opcode.INVOKE_PACKED.value, packed_index, output_size, tuple(args))


def AllocTensor(storage, offset, shape, dtype, dst):
    return (Opcode.ALLOC_TENSOR.value, storage, offset, tuple(int(s) for s in shape),
            np.dtype(dtype).name, dst)


def AllocTensorReg(storage, offset, shape_reg, dtype, dst):
    return (Opcode.ALLOC_TENSOR_REG.value, storage, offset, shape_reg, np.dtype(dtype).name, dst)


def AllocStorage(size, alignment, dst, device=0):
    return (Opcode.ALLOC_STORAGE.value, size, alignment, dst, device)


def AllocADT(tag, fields, dst):
    return (Opcode.ALLOC_ADT.value, tag, tuple(fields), dst)


def AllocClosure(func_index, captured, dst):
    return (Opcode.ALLOC_CLOSURE.value, func_index, tuple(captured), dst)


def GetField(obj, index, dst):
    return (Opcode.GET_FIELD.value, obj, index, dst)


def GetTag(obj, dst):
    return (Opcode.GET_TAG.value, obj, dst)


def If(test, target, true_offset, false_offset):
    return (Opcode.IF.value, test, target, true_offset, false_offset)


def Goto(offset):
    return (Opcode.GOTO.value, offset)


def LoadConst(const_index, dst):
    return (Opcode.LOAD_CONST.value, const_index, dst)


def LoadConsti(value, dst):
    return (Opcode.LOAD_CONSTI.value, int(value), dst)


def Fatal():
    return (Opcode.FATAL.value,)


def ReshapeTensor(src, shape, dst):
    return (Opcode.RESHAPE_TENSOR.value, src, tuple(int(s) for s in shape), dst)


def TailInvoke(func_index, args):
    return (Opcode.TAIL_INVOKE.value, func_index, tuple(args))


def TailInvokeClosure(closure, args):
    return (Opcode.TAIL_INVOKE_CLOSURE.value, closure, tuple(args))


# --------------------------------------------------------------------- functions

@dataclass
class VMFunction:
    """One function of an executable.

    Attributes
    ----------
    name : str
    params : list of str
        Parameter names; a call puts its arguments in registers 0..len(params)-1.
    num_regs : int
        Registers of a frame.
    code : list of tuple
        The instructions.
    arena_bytes : int
        Size of the memory-planned storage the function allocates on entry (0 if none).
    naive_bytes : int
        What its planned tensors would take without reuse (for reports).
    dram_bytes : int
        Size of its memory-planned device DRAM (tensors kept on the accelerator between
        layers, in the packed layout), allocated on entry (0 if none).
    """

    name: str
    params: list
    num_regs: int
    code: list = field(default_factory=list)
    arena_bytes: int = 0
    naive_bytes: int = 0
    dram_bytes: int = 0


def encode_function(func: VMFunction) -> np.ndarray:
    """The function's instructions as int64 words (see the module docstring)."""
    words: list[int] = []
    for ins in func.code:
        op = Opcode(ins[0])
        words.append(op.value)
        for (_, kind), value in zip(_LAYOUT[op], ins[1:]):
            if kind in "RS":
                words.append(len(value))
                words.extend(value)
            elif kind == "d":
                words.append(_DTYPE_CODE[value])
            else:
                words.append(value)
    return np.array(words, dtype="<i8")


def decode_function(words) -> tuple[list, list]:
    """Instructions and the word index of each, from int64 words.

    Raises
    ------
    BytecodeError
        On an unknown opcode, a negative count or dtype code out of range, or
        words ending inside an instruction.
    """
    words = [int(w) for w in words]
    code, starts = [], []
    pos, n = 0, len(words)
    while pos < n:
        start, index = pos, len(code)
        op = words[pos]
        if op not in Opcode._value2member_map_:
            raise BytecodeError(f"instruction {index}: unknown opcode {op}", index, start)
        pos += 1
        ins = [op]
        for name, kind in _LAYOUT[Opcode(op)]:
            if pos >= n:
                raise BytecodeError(f"instruction {index} ({Opcode(op).name}): code ends "
                                    f"inside its operand {name!r}", index, start)
            value = words[pos]
            pos += 1
            if kind in "RS":
                if value < 0 or pos + value > n:
                    raise BytecodeError(f"instruction {index} ({Opcode(op).name}): {name} has "
                                        f"{value} items, past the end of the code", index, start)
                ins.append(tuple(words[pos:pos + value]))
                pos += value
            elif kind == "d":
                if not 0 <= value < len(DTYPES):
                    raise BytecodeError(f"instruction {index} ({Opcode(op).name}): dtype code "
                                        f"{value} is not one of 0..{len(DTYPES) - 1}",
                                        index, start)
                ins.append(DTYPES[value])
            else:
                ins.append(value)
        code.append(tuple(ins))
        starts.append(start)
    return code, starts


def verify_function(func: VMFunction, *, num_funcs: int, num_packed: int, num_consts: int,
                    func_params=None) -> None:
    """Check every operand is in range, so the VM can never index out of its tables.

    Parameters
    ----------
    func : VMFunction
    num_funcs, num_packed, num_consts : int
        Sizes of the executable's function, packed-function and constant tables.
    func_params : list of int, optional
        Parameter count of every function (checks the arity of each Invoke).

    Raises
    ------
    BytecodeError
        Naming the instruction index, the operand and the allowed range.
    """
    n = len(func.code)
    if func.num_regs < len(func.params):
        raise BytecodeError(f"{func.num_regs} registers cannot hold {len(func.params)} "
                            "parameters")
    if n == 0:
        raise BytecodeError("the function has no instructions", 0, 0)
    limits = {"r": func.num_regs, "f": num_funcs, "p": num_packed, "c": num_consts}
    what = {"r": "register", "f": "function", "p": "packed function", "c": "constant"}
    for pc, ins in enumerate(func.code):
        op = Opcode(ins[0])

        def fail(msg):
            raise BytecodeError(f"instruction {pc} ({op.name}): {msg}", pc)

        if len(ins) != len(_LAYOUT[op]) + 1:
            fail(f"expected {len(_LAYOUT[op])} operands, got {len(ins) - 1}")
        for (name, kind), value in zip(_LAYOUT[op], ins[1:]):
            items = value if kind == "R" else (value,)
            if kind in "rRfpc":
                limit = limits["r" if kind == "R" else kind]
                for v in items:
                    if not 0 <= v < limit:
                        noun = what["r" if kind == "R" else kind]
                        fail(f"{name} {noun} {v} is out of range; there are {limit} {noun}s")
            elif kind == "n" and value < 0:
                fail(f"{name} must be non-negative, got {value}")
            elif kind == "S" and any(s < 0 for s in value):
                fail(f"shape {value} has a negative dimension")
            elif kind == "o" and not 0 <= pc + value < n:
                fail(f"{name} {value} jumps to {pc + value}, outside 0..{n - 1}")
        if op == Opcode.INVOKE_PACKED and ins[2] > len(ins[3]):
            fail(f"output_size {ins[2]} exceeds its {len(ins[3])} arguments")
        if op == Opcode.ALLOC_STORAGE and (ins[2] <= 0 or ins[2] & (ins[2] - 1)):
            fail(f"alignment {ins[2]} is not a power of two")
        if op == Opcode.ALLOC_STORAGE and ins[4] >= len(DEVICES):
            fail(f"device {ins[4]} is not one of 0..{len(DEVICES) - 1} ({', '.join(DEVICES)})")
        if op in (Opcode.INVOKE, Opcode.TAIL_INVOKE) and func_params is not None and \
                len(ins[2]) != func_params[ins[1]]:
            fail(f"function {ins[1]} takes {func_params[ins[1]]} arguments, got {len(ins[2])}")
    if Opcode(func.code[-1][0]) not in _TERMINATORS:
        raise BytecodeError(f"instruction {n - 1} ({Opcode(func.code[-1][0]).name}): the last "
                            "instruction must be Ret, Goto, If, Fatal or a tail call", n - 1)


def format_instruction(ins, *, packed_names=None, func_names=None) -> str:
    """One instruction as text, e.g. ``invoke_packed fused_add(out=1) $0 $1 $2``."""
    op = Opcode(ins[0])
    reg = "${}".format
    regs = lambda rs: " ".join(map(reg, rs))  # noqa: E731
    fname = (lambda i: func_names[i]) if func_names else (lambda i: f"@{i}")
    pname = (lambda i: packed_names[i]) if packed_names else (lambda i: f"packed[{i}]")
    a = ins[1:]
    text = {
        Opcode.MOVE: lambda: f"{reg(a[1])} = move {reg(a[0])}",
        Opcode.RET: lambda: f"ret {reg(a[0])}",
        Opcode.INVOKE: lambda: f"{reg(a[2])} = invoke {fname(a[0])}({regs(a[1])})",
        Opcode.INVOKE_CLOSURE: lambda: f"{reg(a[2])} = invoke_closure {reg(a[0])}({regs(a[1])})",
        Opcode.INVOKE_PACKED: lambda: (f"invoke_packed {pname(a[0])} "
                                       f"in({regs(a[2][:len(a[2]) - a[1]])}) "
                                       f"out({regs(a[2][len(a[2]) - a[1]:])})"),
        Opcode.ALLOC_TENSOR: lambda: (f"{reg(a[4])} = alloc_tensor {reg(a[0])}+{a[1]} "
                                      f"{a[3]}{list(a[2])}"),
        Opcode.ALLOC_TENSOR_REG: lambda: (f"{reg(a[4])} = alloc_tensor_reg {reg(a[0])}+{a[1]} "
                                          f"{a[3]} shape={reg(a[2])}"),
        Opcode.ALLOC_STORAGE: lambda: (f"{reg(a[2])} = alloc_storage {a[0]} bytes align {a[1]}"
                                       + (f" on {DEVICES[a[3]]}" if a[3] else "")),
        Opcode.ALLOC_ADT: lambda: f"{reg(a[2])} = alloc_adt tag {a[0]} ({regs(a[1])})",
        Opcode.ALLOC_CLOSURE: lambda: f"{reg(a[2])} = alloc_closure {fname(a[0])} [{regs(a[1])}]",
        Opcode.GET_FIELD: lambda: f"{reg(a[2])} = get_field {reg(a[0])}[{a[1]}]",
        Opcode.GET_TAG: lambda: f"{reg(a[1])} = get_tag {reg(a[0])}",
        Opcode.IF: lambda: (f"if {reg(a[0])} == {reg(a[1])} goto {a[2]:+d} else {a[3]:+d}"),
        Opcode.GOTO: lambda: f"goto {a[0]:+d}",
        Opcode.LOAD_CONST: lambda: f"{reg(a[1])} = load_const {a[0]}",
        Opcode.LOAD_CONSTI: lambda: f"{reg(a[1])} = load_consti {a[0]}",
        Opcode.FATAL: lambda: "fatal",
        Opcode.RESHAPE_TENSOR: lambda: f"{reg(a[2])} = reshape_tensor {reg(a[0])} {list(a[1])}",
        Opcode.TAIL_INVOKE: lambda: f"tail_invoke {fname(a[0])}({regs(a[1])})",
        Opcode.TAIL_INVOKE_CLOSURE: lambda: f"tail_invoke_closure {reg(a[0])}({regs(a[1])})",
    }[op]
    return text()
