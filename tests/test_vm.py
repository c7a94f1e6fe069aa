"""The VM on hand-built bytecode: recursion, tail jumps, closures, ADTs, hooks, overrides,
errors."""

import math

import numpy as np
import pytest
from vm_programs import PRIMS, closure_exe, factorial_exe, list_sum_exe

from vtakit.runtime import (Executable, PrimitiveEntry, PrimitiveError, register_func,
                            remove_global_func)
from vtakit.runtime.vm import (ON_LAYER, AllocStorage, AllocTensor, BytecodeError, Fatal,
                               GetField, InvokePacked, LoadConst, LoadConsti, Ret, Storage,
                               VirtualMachine, VMError, VMFunction)


@pytest.mark.parametrize("n", [0, 1, 5, 12])
def test_recursive_factorial(n):
    out = factorial_exe().run([np.array(n, np.int64)])
    assert out.dtype == np.int64 and out.shape == () and int(out) == math.factorial(n)


def test_tail_call_loop_runs_deep_without_stack():
    exe = factorial_exe(tail=True)
    assert int(exe.run([np.array(20, np.int64), np.array(1, np.int64)])) == math.factorial(20)
    # 5000 iterations of a Goto loop: no frames pile up
    out = exe.run({"n": np.array(5000, np.int64), "acc": np.array(1, np.int64)})
    assert out.shape == ()


def test_deep_recursion_uses_no_python_stack():
    # 3000 nested Invoke frames, more than Python's default recursion limit
    assert int(factorial_exe().run([np.array(3000, np.int64)])) == 0   # int64 wraps to 0


def test_closures():
    assert int(closure_exe().run([np.array(7, np.int64)])) == (2 * 10 + 7) + (3 * 10 + 7)


def test_adts_and_tags():
    total, head = list_sum_exe().run([np.array(v, np.int64) for v in (4, 5, 6)])
    assert int(total) == 15 and int(head) == 4


def test_storage_views_are_aligned():
    s = Storage(100, 64)
    assert s.buffer.ctypes.data % 64 == 0 and s.nbytes == 100
    t = s.tensor(16, (3, 4), "int32")
    t[...] = 7
    assert s.buffer[16:20].view(np.int32)[0] == 7


def test_hook_sees_every_layer():
    seen = []
    exe = factorial_exe()
    exe.run([np.array(3, np.int64)], hook=lambda name, out: seen.append((name, int(out))))
    # fact(3): eq, sub three times down to 0, eq at 0, then three multiplies
    names = [n for n, _ in seen]
    assert names == ["vmtest.eq", "vmtest.sub"] * 3 + ["vmtest.eq"] + ["vmtest.mul"] * 3
    assert [v for n, v in seen if n == "vmtest.mul"] == [1, 2, 6]


def test_registered_on_layer_hook():
    seen = []
    register_func(ON_LAYER, lambda name, out: seen.append(name))
    try:
        closure_exe().run([np.array(1, np.int64)])
    finally:
        remove_global_func(ON_LAYER)
    assert seen == ["vmtest.mul", "vmtest.add"] * 2 + ["vmtest.add"]


def test_hook_outputs_are_copies():
    kept = []
    factorial_exe().run([np.array(4, np.int64)], hook=lambda n, o: kept.append(o))
    assert all(not np.shares_memory(a, b) for a in kept for b in kept if a is not b)


def test_override_of_a_factory_primitive():
    """A registry function named like a primitive replaces what its factory would build."""
    register_func("vtakit.vm.primitive.testkind", lambda entry, ctx: _never)
    exe = Executable("default", [VMFunction("main", ["x"], 3, [
        AllocStorage(64, 64, 1), AllocTensor(1, 0, (2,), "float32", 2),
        InvokePacked(0, 1, (0, 2)), Ret(2)])],
        primitives=[PrimitiveEntry("fused_negative", "testkind", 1, 1)])
    x = np.array([1.5, -2], np.float32)
    try:
        with pytest.raises(VMError, match="factory function was called"):
            exe.run([x])
        register_func("fused_negative", lambda a: -a)
        np.testing.assert_array_equal(exe.run([x]), -x)
        # a wrong dtype from the user's function is an error, not a silent cast
        register_func("fused_negative", lambda a: -a.astype(np.float64), override=True)
        with pytest.raises(VMError, match=r"registered function 'fused_negative' returned "
                                          r"float64\[2\] for output 0; the compiled model "
                                          r"expects float32\[2\]"):
            exe.run([x])
    finally:
        remove_global_func("vtakit.vm.primitive.testkind")
        remove_global_func("fused_negative")


def _never(*args):
    raise RuntimeError("factory function was called")


def test_unresolvable_primitives():
    exe = Executable("default", [VMFunction("main", ["x"], 1, [Ret(0)])],
                     primitives=[PrimitiveEntry("nobody.registered", "global"),
                                 PrimitiveEntry("fused_x", "nokind")])
    with pytest.raises(PrimitiveError, match=r"^primitive 'nobody.registered' is not "
                                             "registered; register it"):
        exe.run([np.zeros(1)])
    exe.primitives = exe.primitives[1:]
    with pytest.raises(PrimitiveError, match=r"^primitive 'fused_x' is of kind 'nokind', but no "
                                             r"factory 'vtakit.vm.primitive.nokind' is "
                                             r"registered$"):
        exe.run([np.zeros(1)])


def test_runtime_errors_name_function_and_pc():
    exe = Executable("default", [VMFunction("main", ["x"], 2, [
        LoadConsti(3, 1), GetField(1, 0, 1), Ret(1)])])
    with pytest.raises(VMError, match=r"^main, instruction 1 \[\$1 = get_field \$1\[0\]\]: "
                                      r"GetField of a int, not an ADT$"):
        exe.run([np.zeros(1)])
    exe = Executable("default", [VMFunction("main", [], 1, [Fatal()])])
    with pytest.raises(VMError, match=r"^main, instruction 0 \[fatal\]: executed Fatal"):
        exe.run([])


def test_packed_error_names_the_primitive():
    exe = Executable("default", [VMFunction("main", ["a", "b"], 4, [
        AllocStorage(64, 64, 2), AllocTensor(2, 0, (3,), "int64", 3),
        InvokePacked(3, 1, (0, 1, 3)), Ret(3)])], primitives=PRIMS)
    with pytest.raises(VMError, match=r"invoke_packed vmtest.add in\(\$0 \$1\) out\(\$3\)\]: "
                                      r"ValueError: operands could not be broadcast"):
        exe.run([np.zeros(2, np.int64), np.zeros(4, np.int64)])


def test_verifier_rejects_out_of_range_operands():
    with pytest.raises(BytecodeError, match=r"^function 'main': instruction 0 \(LOAD_CONST\): "
                                            r"const constant 5 is out of range; there are 0 "
                                            r"constants$"):
        Executable("default", [VMFunction("main", [], 2, [LoadConst(5, 0), Ret(0)])])
    with pytest.raises(BytecodeError, match=r"instruction 0 \(LOAD_CONSTI\): the last "
                                            r"instruction must be Ret"):
        Executable("default", [VMFunction("main", [], 2, [LoadConsti(5, 0)])])
    with pytest.raises(BytecodeError, match=r"instruction 0 \(RET\): result register 7 is out "
                                            r"of range; there are 2 registers"):
        Executable("default", [VMFunction("main", [], 2, [Ret(7)])])


def test_input_checks():
    exe = factorial_exe()
    with pytest.raises(ValueError, match=r"the model takes 1 inputs \(n\), got 2"):
        exe.run([1, 2])
    with pytest.raises(ValueError, match=r"inputs \['m'\] do not match the model's inputs "
                                         r"\['n'\]"):
        exe.run({"m": 1})


def test_vm_object_reuse_and_invoke_by_name():
    exe = closure_exe()
    with VirtualMachine(exe) as vm:
        assert int(vm.invoke("main", np.array(0, np.int64))) == 50
        assert int(vm.invoke(1, np.array(2, np.int64), np.array(1, np.int64),
                             np.array(3, np.int64))) == 7
        with pytest.raises(VMError, match="the executable has no function 'nope'; it has "
                                          "main, lifted"):
            vm.invoke("nope")
        assert not vm.context.device_opened     # host-only: no simulator started


def test_alloc_tensor_reg_takes_its_shape_from_a_register():
    from vtakit.runtime.vm import AllocTensorReg
    exe = Executable("default", [VMFunction("main", ["x"], 4, [
        LoadConst(0, 1), AllocStorage(64, 64, 2), AllocTensorReg(2, 8, 1, "int32", 3),
        InvokePacked(3, 1, (0, 0, 3)), Ret(3)])],
        [np.array([2, 3], np.int64)], PRIMS)
    out = exe.run([np.ones((2, 3), np.int32)])
    assert out.shape == (2, 3) and out.dtype == np.int32 and (out == 2).all()


def test_invoke_arity_is_verified():
    from vtakit.runtime.vm import Invoke
    with pytest.raises(BytecodeError, match=r"instruction 0 \(INVOKE\): function 1 takes 2 "
                                            r"arguments, got 1"):
        Executable("default", [VMFunction("main", ["x"], 2, [Invoke(1, (0,), 1), Ret(1)]),
                               VMFunction("f", ["a", "b"], 2, [Ret(0)])])
