"""Graph IR: types, operators, type inference, interpreter, text format, errors."""

import numpy as np
import pytest

from vtakit.compiler import nn
from vtakit.compiler.ir import (Call, Function, GlobalVar, If, IRModule,
                                Let, OpError, OpPattern, ParseError, QuantParams, TensorType,
                                Tuple, TupleGetItem, TupleType, TypeInferenceError, Var,
                                WellFormedError, astext, check_well_formed, evaluate, get_op,
                                infer_types, parse, register_op, structural_equal)
from vtakit.compiler.ops.reference import conv2d_ref, dense_ref, group_conv2d_ref, max_pool2d_ref


def roundtrip(mod):
    """print -> parse -> print is the identity, and the parsed program is equal."""
    text = astext(mod)
    again = parse(text)
    assert astext(again) == text
    assert structural_equal(mod, again)
    return again


def test_types_and_quant_params():
    q = QuantParams([0.5, 0.25], [0, 1], axis=0)
    t = TensorType((2, 3), "int8", q)
    assert t == TensorType([2, 3], np.int8, QuantParams(np.array([0.5, 0.25]), [0, 1], 0))
    assert t != TensorType((2, 3), "int8")
    assert astext(t) == "Tensor[(2, 3), int8, quant(scale=[0.5, 0.25], zero_point=[0, 1], axis=0)]"
    with pytest.raises(ValueError, match="per-channel quantization parameters need an axis"):
        QuantParams([0.5, 0.25], 0)
    assert astext(TupleType([t.with_quant(None)])) == "(Tensor[(2, 3), int8],)"


def test_int8_conv_requant_chain_is_exact():
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 8, 6, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 8, 3, 3), dtype=np.int8)
    xv = nn.var("x", x.shape, "int8")
    acc = nn.conv2d(xv, nn.const(w), padding=1, strides=2, out_dtype="int32")
    y = nn.relu(nn.cast(nn.clip(nn.right_shift(acc, nn.const(9, "int32")), -128, 127), "int8"))
    mod = nn.module(y)
    infer_types(mod)
    assert mod["main"].body.checked_type == TensorType((1, 16, 3, 3), "int8")
    ref = conv2d_ref(x, w, stride=2, padding=1)
    expect = np.maximum(np.clip(ref >> 9, -128, 127), 0).astype(np.int8)
    out = evaluate(mod, x)
    assert out.dtype == np.int8 and np.array_equal(out, expect)
    roundtrip(mod)


def test_grouped_conv_dense_pool_match_references():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 8, 5, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 2, 3, 3), dtype=np.int8)
    e = nn.conv2d(nn.var("x", x.shape, "int8"), nn.const(w), groups=4, padding=1,
                  out_dtype="int32")
    assert np.array_equal(evaluate(e, x=x), group_conv2d_ref(x, w, padding=1, groups=4))
    a = rng.integers(-128, 128, (2, 16), dtype=np.int8)
    b = rng.integers(-128, 128, (4, 16), dtype=np.int8)
    d = nn.dense(nn.var("a", a.shape, "int8"), nn.const(b), out_dtype="int32")
    assert np.array_equal(evaluate(d, a=a), dense_ref(a, b))
    p = nn.max_pool2d(nn.var("x", x.shape, "int8"), 3, strides=2, padding=1)
    assert np.array_equal(evaluate(p, x=x), max_pool2d_ref(x, 3, 2, 1))


def test_float_ops_and_batch_norm():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 4, 4)).astype(np.float32)
    g, b, m, v = (rng.uniform(0.5, 1.5, 3).astype(np.float32) for _ in range(4))
    y = nn.batch_norm(nn.var("x", x.shape), *map(nn.const, (g, b, m, v)))
    out = evaluate(y, x=x)
    expect = (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5) * g[:, None, None] \
        + b[:, None, None]
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-6)
    s = evaluate(nn.softmax(nn.reshape(nn.var("x", x.shape), (2, -1))), x=x)
    np.testing.assert_allclose(s.sum(axis=1), 1, rtol=1e-6)
    c = nn.concatenate([nn.var("x", x.shape), nn.var("x2", x.shape)], axis=1)
    infer_types(c)
    assert c.checked_type.shape == (2, 6, 4, 4)


def test_if_and_recursion():
    # def @sum_to(%n) -> int32 { if (%n > 0) { %n + @sum_to(%n - 1) } else { 0 } }
    n = nn.var("n", (), "int32")
    f = GlobalVar("sum_to")
    one, zero = nn.const(1, "int32"), nn.const(0, "int32")
    body = If(nn.greater(n, zero), nn.add(n, Call(f, [nn.subtract(n, one)])), zero)
    k = nn.var("k", (), "int32")
    mod = IRModule({"sum_to": Function([n], body, TensorType((), "int32")),
                    "main": Function([k], Call(f, [k]))})
    infer_types(mod)
    assert int(evaluate(mod, np.int32(10))) == 55
    roundtrip(mod)


def test_let_closure_and_tuples():
    x = nn.var("x", (3,))
    y = Var("y", TensorType((3,)))
    fv = Var("f")
    inner = Function([y], nn.multiply(y, x))
    body = Let(fv, inner, Tuple([Call(fv, [x]), TupleGetItem(Tuple([x, x]), 1)]))
    mod = IRModule({"main": Function([x], body)})
    infer_types(mod)
    out = evaluate(mod, np.array([1, 2, 3], np.float32))
    assert np.array_equal(out[0], [1, 4, 9]) and np.array_equal(out[1], [1, 2, 3])
    roundtrip(mod)


def test_printer_style_and_sharing():
    x = nn.var("x", (1, 4))
    a = nn.relu(x)
    mod = nn.module(nn.add(a, nn.multiply(a, nn.const(2.0))))
    text = astext(mod)
    assert text == ('#[version = "0.0.5"]\n'
                    'def @main(%x: Tensor[(1, 4), float32]) {\n'
                    '  %0 = nn.relu(%x);\n'
                    '  %1 = multiply(%0, 2.0f32);\n'
                    '  add(%0, %1)\n'
                    '}\n')
    assert roundtrip(mod)


def test_resnet18_builder_roundtrip_and_shape():
    mod = nn.resnet18(image_shape=(3, 32, 32), num_classes=10)
    infer_types(mod)
    assert mod["main"].body.checked_type == TensorType((1, 10), "float32")
    again = roundtrip(mod)
    x = np.random.default_rng(0).normal(size=(1, 3, 32, 32)).astype(np.float32)
    assert np.array_equal(evaluate(mod, x), evaluate(again, x))


def test_bad_ir_type_mismatch_names_the_node():
    x = nn.var("x", (1, 3, 8, 8))
    w = nn.const(np.zeros((4, 2, 3, 3), np.float32))
    with pytest.raises(TypeInferenceError, match=r"^nn\.conv2d\(%x, constant\(4, 2, 3, 3\)"
                       r":float32\): nn\.conv2d with groups=1: data has 3 channels"):
        infer_types(nn.module(nn.conv2d(x, w)))
    with pytest.raises(TypeInferenceError,
                       match=r"^add\(%x, %y\): operands must have one dtype, got float32 and "
                             r"int8$"):
        infer_types(nn.module(nn.add(x, nn.var("y", (1,), "int8"))))


def test_bad_ir_unbound_variable():
    x, y = nn.var("x", (2,)), nn.var("y", (2,))
    mod = IRModule({"main": Function([x], nn.add(x, y))})
    with pytest.raises(WellFormedError, match=r"^in @main: variable %y is free"):
        check_well_formed(mod)
    with pytest.raises(ParseError, match=r"^line 2, column 11: unbound variable %y$"):
        parse('def @main(%x: Tensor[(2), float32]) {\n  add(%x, %y)\n}\n')
    twice = Function([x], Let(x, x, x))
    with pytest.raises(WellFormedError, match=r"variable %x is bound twice"):
        check_well_formed(IRModule({"main": twice}))


def test_bad_ir_unknown_op_and_attribute():
    with pytest.raises(OpError, match=r"^unknown operator 'nn.conv3d'; did you mean nn.conv2d"):
        get_op("nn.conv3d")
    x = nn.var("x", (1, 3, 8, 8))
    with pytest.raises(OpError, match=r"^nn\.max_pool2d has no attribute 'kernel' \(its "
                                      r"attributes: pool_size, strides, padding\)$"):
        nn.call("nn.max_pool2d", x, kernel=2)
    with pytest.raises(OpError, match=r"^nn\.max_pool2d needs attribute 'pool_size'$"):
        nn.call("nn.max_pool2d", x)
    with pytest.raises(ParseError, match=r"^line 2, column 3: unknown operator 'relu'"):
        parse('def @main(%x: Tensor[(2), float32]) {\n  relu(%x)\n}\n')
    with pytest.raises(TypeInferenceError, match=r"parameter %y of fn \(%y\) has no type"):
        y = Var("y")
        infer_types(IRModule({"main": Function([y], y)}))


def test_register_op_by_other_packages():
    name = "test.double_int"
    if name not in __import__("vtakit.compiler.ir", fromlist=["list_ops"]).list_ops():
        register_op(name, attrs={"k": 2}, infer_type=lambda ts, a: ts[0],
                    compute=lambda x, k: (x * k).astype(x.dtype), pattern=OpPattern.ELEMWISE,
                    num_inputs=1)
    with pytest.raises(OpError, match="already registered"):
        register_op(name, infer_type=None, compute=None)
    e = nn.call(name, nn.var("x", (2,), "int8"), k=3)
    assert np.array_equal(evaluate(e, x=np.array([1, -2], np.int8)), [3, -6])
    assert parse(astext(e).strip()).attrs == {"k": 3}


def test_evaluate_argument_errors():
    mod = nn.module(nn.relu(nn.var("x", (2,))))
    with pytest.raises(Exception, match=r"argument %x: expected \(2,\) float32, got \(3,\)"):
        evaluate(mod, np.zeros(3, np.float32))
    assert np.array_equal(evaluate(mod, x=np.array([-1, 1], np.float32)), [0, 1])
