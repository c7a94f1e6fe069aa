"""Hand-built VM executables shared by the VM and executable tests.

The host operators are registry functions ("vmtest.*", returning their result);
the VM passes them outputs allocated from storage, as compiled code does.
"""

import numpy as np

from vtakit.runtime import Executable, PrimitiveEntry, get_global_func, register_func
from vtakit.runtime.vm import (AllocADT, AllocClosure, AllocStorage, AllocTensor, Fatal, GetField,
                               GetTag, Goto, If, Invoke, InvokeClosure, InvokePacked, LoadConst,
                               LoadConsti, Move, Ret, VMFunction)

OPS = {
    "vmtest.eq": (lambda a, b: np.equal(a, b), 2),
    "vmtest.sub": (lambda a, b: np.subtract(a, b), 2),
    "vmtest.mul": (lambda a, b: np.multiply(a, b), 2),
    "vmtest.add": (lambda a, b: np.add(a, b), 2),
}
for _name, (_f, _) in OPS.items():
    if get_global_func(_name, allow_missing=True) is None:
        register_func(_name, _f)

PRIMS = [PrimitiveEntry(name, "global", n, 1) for name, (_, n) in OPS.items()]
EQ, SUB, MUL, ADD = range(4)


def scalar_out(storage_reg, dst, dtype="int64"):
    """A fresh storage + a scalar tensor in it (2 instructions)."""
    return [AllocStorage(64, 64, storage_reg), AllocTensor(storage_reg, 0, (), dtype, dst)]


def factorial_exe(tail=False) -> Executable:
    """fact(n) = n == 0 ? 1 : n * fact(n - 1); with ``tail``, the accumulator form
    fact(n, acc) whose self tail call is a Move + Goto."""
    consts = [np.array(0, np.int64), np.array(1, np.int64)]
    if not tail:
        code = [
            LoadConst(0, 1),                       # 0: zero
            *scalar_out(2, 3, "bool"),             # 1-2
            InvokePacked(EQ, 1, (0, 1, 3)),        # 3: $3 = n == 0
            LoadConsti(1, 4),                      # 4
            If(3, 4, 1, 3),                        # 5: -> 6 or 8
            LoadConst(1, 5),                       # 6
            Ret(5),                                # 7
            LoadConst(1, 5),                       # 8: one
            *scalar_out(6, 7),                     # 9-10
            InvokePacked(SUB, 1, (0, 5, 7)),       # 11: n - 1
            Invoke(0, (7,), 8),                    # 12: fact(n - 1)
            *scalar_out(9, 10),                    # 13-14
            InvokePacked(MUL, 1, (0, 8, 10)),      # 15
            Ret(10),                               # 16
        ]
        funcs = [VMFunction("main", ["n"], 11, code)]
    else:
        code = [
            LoadConst(0, 2),
            *scalar_out(3, 4, "bool"),
            InvokePacked(EQ, 1, (0, 2, 4)),
            LoadConsti(1, 5),
            If(4, 5, 1, 2),                        # 5: -> 6 or 7
            Ret(1),                                # 6
            LoadConst(1, 6),                       # 7
            *scalar_out(7, 8),
            InvokePacked(SUB, 1, (0, 6, 8)),       # 10
            *scalar_out(9, 10),
            InvokePacked(MUL, 1, (0, 1, 10)),      # 13
            Move(8, 0), Move(10, 1),               # 14-15
            Goto(-16),                             # 16 -> 0
        ]
        funcs = [VMFunction("main", ["n", "acc"], 11, code)]
    return Executable("default", funcs, consts, PRIMS)


def closure_exe() -> Executable:
    """main(x) = let k = 10 in let f = fn(y) { y * k + x } in f(2) + f(3)."""
    lifted = VMFunction("lifted", ["k", "x", "y"], 7, [      # captured k, x; then y
        *scalar_out(3, 4),
        InvokePacked(MUL, 1, (2, 0, 4)),
        *scalar_out(5, 6),
        InvokePacked(ADD, 1, (4, 1, 6)),
        Ret(6),
    ])
    main = VMFunction("main", ["x"], 10, [
        LoadConst(0, 1),                      # k
        AllocClosure(1, (1, 0), 2),           # f
        LoadConst(1, 3), LoadConst(2, 4),
        InvokeClosure(2, (3,), 5),
        InvokeClosure(2, (4,), 6),
        *scalar_out(7, 8),
        InvokePacked(ADD, 1, (5, 6, 8)),
        Ret(8),
    ])
    consts = [np.array(10, np.int64), np.array(2, np.int64), np.array(3, np.int64)]
    return Executable("default", [main, lifted], consts, PRIMS)


def list_sum_exe() -> Executable:
    """A cons list as ADTs (Nil tag 0, Cons tag 1), summed recursively; main(a, b, c)
    builds [a, b, c] and returns (sum, length-3 list's head)."""
    sum_ = VMFunction("sum", ["xs"], 9, [
        GetTag(0, 1),
        LoadConsti(1, 2),
        If(1, 2, 2, 1),                       # Cons -> 4, Nil -> 3
        Goto(9),                              # 3 -> 12
        GetField(0, 0, 3),                    # 4: head
        GetField(0, 1, 4),                    # 5: tail
        Invoke(1, (4,), 5),                   # 6
        *scalar_out(6, 7),                    # 7-8
        InvokePacked(ADD, 1, (3, 5, 7)),      # 9
        Ret(7),                               # 10
        Fatal(),                              # 11 (unreachable)
        LoadConst(0, 8),                      # 12: Nil -> 0
        Ret(8),
    ])
    main = VMFunction("main", ["a", "b", "c"], 10, [
        AllocADT(0, (), 3),
        AllocADT(1, (2, 3), 4),
        AllocADT(1, (1, 4), 5),
        AllocADT(1, (0, 5), 6),
        Invoke(1, (6,), 7),
        GetField(6, 0, 8),
        AllocADT(0, (7, 8), 9),               # a tuple
        Ret(9),
    ])
    return Executable("default", [main, sum_], [np.array(0, np.int64)], PRIMS)
