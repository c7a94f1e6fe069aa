"""Algebraic data types: constructors and ``match`` through the text format, the pass
pipeline and the VM, checked against the reference interpreter."""

import numpy as np
import pytest

from vtakit.compiler.codegen import compile_vm
from vtakit.compiler.ir import (Call, Clause, Constructor, EvaluationError, FuncType, Function,
                                GlobalTypeVar, GlobalVar, If, IncompleteType, IRModule, Let,
                                Match, ParseError, PatternConstructor, PatternTuple, PatternVar,
                                PatternWildcard, TensorType, Tuple, TypeCall, TypeData,
                                TypeInferenceError, TypeVar, Var, WellFormedError, astext,
                                check_well_formed, const, evaluate, get_op, infer_types, parse,
                                structural_equal, values_equal)
from vtakit.compiler.ir.prelude import Prelude
from vtakit.compiler.passes import default_pipeline, get_pass, list_passes, vm_pipeline
from vtakit.runtime import Executable
from vtakit.runtime.vm import ADT, Opcode, VMError

I32 = TensorType((), "int32")


def op(name, *args):
    return Call(get_op(name), args)


def i32(v):
    return const(np.int32(v))


def pvar(v):
    return PatternVar(v)


def pcon(c, *subs):
    return PatternConstructor(c, subs)


def mk_list(p, values, elem=i32):
    out = p.nil
    for v in reversed(values):
        out = p.cons(elem(v), out)
    return out


def run_everywhere(mod, *args, plain=True):
    """The reference result, after checking that the text round trip, the whole pass
    pipeline and the VM (through a saved-and-loaded executable) all agree with it;
    ``plain``: the VM compiler also gets the program without the pipeline."""
    check_well_formed(mod)
    want = evaluate(mod, *args)
    back = parse(astext(mod))
    assert structural_equal(back, mod), astext(mod)
    assert values_equal(evaluate(back, *args), want)
    lowered = vm_pipeline()(default_pipeline()(mod))
    check_well_formed(lowered)
    assert values_equal(evaluate(lowered, *args), want)
    exe = Executable.from_bytes(compile_vm(lowered).to_bytes())
    got = exe.run(list(args))
    assert values_equal(got, want), (got, want)
    if plain:
        assert values_equal(compile_vm(mod).run(list(args)), want)
    return want


@pytest.fixture
def p():
    return Prelude()


def length_module(p):
    mod = IRModule(type_definitions=p.type_definitions)
    length = GlobalVar("length")
    lst, t = Var("l", p.list_of(I32)), Var("t")
    mod[length] = Function([lst], Match(lst, [
        Clause(pcon(p.cons, PatternWildcard(), pvar(t)), op("add", i32(1), Call(length, [t]))),
        Clause(pcon(p.nil), i32(0)),
    ]), I32)
    return mod, length


@pytest.mark.parametrize("values", [[], [7], [1, 2, 3, 4, 5]])
def test_list_length(p, values):
    mod, length = length_module(p)
    mod["main"] = Function([], Call(length, [mk_list(p, values)]))
    got = run_everywhere(mod)
    assert int(got) == len(values)


def sum_module(p):
    """sum with an accumulator: the recursive call is a tail call inside a clause."""
    mod = IRModule(type_definitions=p.type_definitions)
    sum_ = GlobalVar("sum")
    lst, acc, h, t = Var("l", p.list_of(I32)), Var("acc", I32), Var("h"), Var("t")
    mod[sum_] = Function([lst, acc], Match(lst, [
        Clause(pcon(p.cons, pvar(h), pvar(t)), Call(sum_, [t, op("add", acc, h)])),
        Clause(pcon(p.nil), acc),
    ]), I32)
    x = Var("x", I32)
    mod["main"] = Function([x], Call(sum_, [mk_list(p, [1, 2, 3]), x]))
    return mod


def test_list_sum_tail_recursive(p):
    mod = sum_module(p)
    assert int(run_everywhere(mod, np.int32(10))) == 16
    ops = [ins[0] for ins in compile_vm(mod).function("sum").code]
    assert Opcode.GOTO.value in ops and Opcode.INVOKE.value not in ops
    assert Opcode.GET_TAG.value in ops and Opcode.GET_FIELD.value in ops


def map_module(p):
    """map(fn (%v) { %v * %k + 1 }, [1, 2, 3]) with %k a main parameter captured."""
    mod = IRModule(type_definitions=p.type_definitions)
    map_ = GlobalVar("map")
    f = Var("f", FuncType([I32], I32))
    lst, h, t = Var("l", p.list_of(I32)), Var("h"), Var("t")
    mod[map_] = Function([f, lst], Match(lst, [
        Clause(pcon(p.cons, pvar(h), pvar(t)),
               p.cons(Call(f, [h]), Call(map_, [f, t]))),
        Clause(pcon(p.nil), p.nil),
    ]), p.list_of(I32))
    k, v = Var("k", I32), Var("v", I32)
    lam = Function([v], op("add", op("multiply", v, k), i32(1)))
    mod["main"] = Function([k], Call(map_, [lam, mk_list(p, [1, 2, 3])]))
    return mod


def test_map_with_a_closure(p):
    mod = map_module(p)
    got = run_everywhere(mod, np.int32(10))
    assert values_equal(got, evaluate(IRModule({"main": Function([], mk_list(p, [11, 21, 31]))},
                                               p.type_definitions)))
    # the VM result is the VM's ADT object: Cons is tag 1, Nil tag 2 (0 is the tuple's)
    vm = compile_vm(mod).run([np.int32(10)])
    assert isinstance(vm, ADT) and vm.tag == p.cons.tag == 1
    assert int(vm.fields[0]) == 11 and vm.fields[1].fields[1].fields[1].tag == p.nil.tag == 2


def append_reverse_module(p):
    mod = IRModule(type_definitions=p.type_definitions)
    L = p.list_of(I32)
    append, reverse = GlobalVar("append"), GlobalVar("reverse")
    a, b, h, t = Var("a", L), Var("b", L), Var("h"), Var("t")
    mod[append] = Function([a, b], Match(a, [
        Clause(pcon(p.cons, pvar(h), pvar(t)), p.cons(h, Call(append, [t, b]))),
        Clause(pcon(p.nil), b),
    ]), L)
    lst, h2, t2 = Var("l", L), Var("h"), Var("t")
    mod[reverse] = Function([lst], Match(lst, [
        Clause(pcon(p.cons, pvar(h2), pvar(t2)),
               Call(append, [Call(reverse, [t2]), p.cons(h2, p.nil)])),
        Clause(pcon(p.nil), p.nil),
    ]), L)
    mod["main"] = Function([], Call(reverse, [Call(append, [mk_list(p, [1, 2]),
                                                             mk_list(p, [3, 4, 5])])]))
    return mod


def to_pylist(value):
    out = []
    while value.fields:
        out.append(int(value.fields[0]))
        value = value.fields[1]
    return out


def test_reverse_of_append(p):
    got = run_everywhere(append_reverse_module(p))
    assert to_pylist(got) == [5, 4, 3, 2, 1]


def option_module(p):
    """Nested patterns: Some(Cons(%x, Nil)) -> x; Some(Cons(%x, Cons(%y, _))) -> x + y;
    Some(Nil) -> -1; None_ -> -2."""
    mod = IRModule(type_definitions=p.type_definitions)
    o = Var("o", p.option_of(p.list_of(I32)))
    x, x2, y = Var("x"), Var("x"), Var("y")
    f = GlobalVar("classify")
    mod[f] = Function([o], Match(o, [
        Clause(pcon(p.some, pcon(p.cons, pvar(x), pcon(p.nil))), x),
        Clause(pcon(p.some, pcon(p.cons, pvar(x2), pcon(p.cons, pvar(y), PatternWildcard()))),
               op("add", x2, y)),
        Clause(pcon(p.some, pcon(p.nil)), i32(-1)),
        Clause(pcon(p.none), i32(-2)),
    ]))
    return mod, f


@pytest.mark.parametrize("arg, want", [("one", 7), ("three", 3), ("empty", -1), ("none", -2)])
def test_option_with_nested_patterns(p, arg, want):
    mod, f = option_module(p)
    value = {"one": p.some(mk_list(p, [7])), "three": p.some(mk_list(p, [1, 2, 3])),
             "empty": p.some(p.nil), "none": p.none}[arg]
    mod["main"] = Function([], Call(f, [value]))
    assert int(run_everywhere(mod)) == want


def test_tuple_pattern_and_wildcard(p):
    """match ((%a, Some(%b))) { (%x, Some(%y)) => x - y, (_, None_) => 0, }"""
    mod = IRModule(type_definitions=p.type_definitions)
    a, b = Var("a", I32), Var("b", I32)
    x, y = Var("x"), Var("y")
    pick = Var("pick", TensorType((), "bool"))
    opt = If(pick, p.some(b), p.none)
    body = Match(Tuple([a, opt]), [
        Clause(PatternTuple([pvar(x), pcon(p.some, pvar(y))]), op("subtract", x, y)),
        Clause(PatternTuple([PatternWildcard(), pcon(p.none)]), i32(0)),
    ])
    mod["main"] = Function([a, b, pick], body)
    assert int(run_everywhere(mod, np.int32(9), np.int32(4), np.bool_(True))) == 5
    assert int(run_everywhere(mod, np.int32(9), np.int32(4), np.bool_(False))) == 0


def test_wildcard_clause_and_returned_tuple_of_adts(p):
    """A catch-all clause, and a tuple of ADT values as the program's result."""
    mod = IRModule(type_definitions=p.type_definitions)
    o = Var("o", p.option_of(I32))
    v = Var("v")
    head = Function([o], Match(o, [Clause(pcon(p.some, pvar(v)), v),
                                   Clause(PatternWildcard(), i32(42))]))
    g = GlobalVar("get_or_42")
    mod[g] = head
    x = Var("x", I32)
    mod["main"] = Function([x], Tuple([Call(g, [p.none]), Call(g, [p.some(x)]), p.some(x)]))
    got = run_everywhere(mod, np.int32(3))
    assert int(got[0]) == 42 and int(got[1]) == 3 and got[2].tag == p.some.tag
    # the last clause is irrefutable: no Fatal needed
    ops = [ins[0] for ins in compile_vm(mod).function("get_or_42").code]
    assert Opcode.FATAL.value not in ops


def incomplete_module(p):
    mod = IRModule(type_definitions=p.type_definitions)
    lst, h = Var("l", p.list_of(I32)), Var("h")
    head = GlobalVar("head")
    mod[head] = Function([lst], Match(lst, [Clause(pcon(p.cons, pvar(h), PatternWildcard()), h)],
                                      complete=False))
    return mod, head


def test_incomplete_match_fails_the_same_way(p):
    mod, head = incomplete_module(p)
    mod["main"] = Function([], Call(head, [mk_list(p, [4, 5])]))
    assert int(run_everywhere(mod)) == 4
    assert "match? (%l) {" in astext(mod)
    mod["main"] = Function([], Call(head, [p.nil]))
    with pytest.raises(EvaluationError, match=r"^match\? \(%l\): no clause matches the value "
                                              r"Nil \(add a clause for it\)$"):
        evaluate(mod)
    exe = compile_vm(vm_pipeline()(default_pipeline()(mod)))
    with pytest.raises(VMError, match=r"^head, instruction \d+ \[fatal\]: executed Fatal"):
        exe.run([])


def test_complete_match_must_cover_every_value(p):
    lst, h = Var("l", p.list_of(I32)), Var("h")
    mod = IRModule({"main": Function([lst], Match(lst, [
        Clause(pcon(p.cons, pvar(h), pcon(p.nil)), h), Clause(pcon(p.nil), i32(0))]))},
        p.type_definitions)
    with pytest.raises(TypeInferenceError, match=r"^match \(%l\): the clauses do not cover "
                                                 r"every List\[Tensor\[\(\), int32\]\] value"):
        infer_types(mod)


def test_text_format(p):
    mod, length = length_module(p)
    mod["main"] = Function([], Call(length, [mk_list(p, [1])]))
    text = astext(mod)
    assert "type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}" in text
    assert "Cons(_, %t) => {" in text and "def @length(%l: List[Tensor[(), int32]])" in text
    src = """
    type Pair[A, B] { MkPair(A, B), }
    def @main(%x: int32) -> int32 {
      match (MkPair(%x, 2i32)) {
        MkPair(%a, %b) => add(%a, %b),
      }
    }
    """
    mod2 = parse(src)
    assert int(run_everywhere(mod2, np.int32(5))) == 7
    with pytest.raises(ParseError, match=r"has 1 sub-pattern\(s\); the constructor has 2"):
        parse(src.replace("MkPair(%a, %b) =>", "MkPair(%a) =>"))


def test_type_errors_name_the_node(p):
    bad = IRModule({"main": Function([], p.cons(i32(1), p.cons(const(np.float32(1)), p.nil)))},
                   p.type_definitions)
    with pytest.raises(TypeInferenceError, match=r"^Cons\(constant\(\):int32, Cons\(\.\.\.\)\): "
                                                 r"field 1 of Cons has type List\[Tensor\[\(\), "
                                                 r"float32\]\], expected List\[Tensor\[\(\), "
                                                 r"int32\]\]$"):
        infer_types(bad)
    # a bare Nil's element type is unknown until it meets a typed value
    c = Var("c", TensorType((), "bool"))
    ok = IRModule({"main": Function([c], If(c, p.nil, p.cons(i32(1), p.nil)))},
                  p.type_definitions)
    infer_types(ok)
    assert ok["main"].body.true_branch.checked_type == TypeCall(p.List, [IncompleteType()])
    assert ok["main"].body.checked_type == p.list_of(I32)


def test_constructor_not_in_module_is_reported(p):
    mod = IRModule({"main": Function([], p.none)})
    with pytest.raises(WellFormedError, match=r"constructor None_ of type Option is not defined "
                                              r"in the module"):
        check_well_formed(mod)


def test_user_defined_type_and_let_bound_local_recursion():
    """A monomorphic tree type and a let-bound recursive closure (lambda-lifted)."""
    Tree = GlobalTypeVar("Tree")
    leaf = Constructor("Leaf", [I32], Tree)
    node = Constructor("Node", [TypeCall(Tree), TypeCall(Tree)], Tree)
    mod = IRModule(type_definitions=[TypeData(Tree, [], [leaf, node])])
    walk = Var("walk", FuncType([TypeCall(Tree)], I32))
    t, v, l_, r = Var("t", TypeCall(Tree)), Var("v"), Var("l"), Var("r")
    scale = Var("scale", I32)
    fn = Function([t], Match(t, [
        Clause(pcon(leaf, pvar(v)), op("multiply", v, scale)),
        Clause(pcon(node, pvar(l_), pvar(r)), op("add", Call(walk, [l_]), Call(walk, [r]))),
    ]), I32)
    tree = node(node(leaf(i32(1)), leaf(i32(2))), leaf(i32(3)))
    mod["main"] = Function([scale], Let(walk, fn, Call(walk, [tree])))
    # a let-bound recursive closure needs LambdaLift before the VM compiler
    assert int(run_everywhere(mod, np.int32(10), plain=False)) == 60


def test_generic_type_parameters_unify():
    A = TypeVar("A")
    Box = GlobalTypeVar("Box")
    box = Constructor("Box", [A], Box)
    td = TypeData(Box, [A], [box])
    mod = IRModule({"main": Function([], box(box(i32(3))))}, [td])
    infer_types(mod)
    assert mod["main"].body.checked_type == TypeCall(Box, [TypeCall(Box, [I32])])


def test_closure_inside_a_clause_captures_a_pattern_variable(p):
    """add_head(l, m) = match l { Cons(h, _) => map(fn (v) { v + h }, m), Nil => m }"""
    mod = map_module(p)
    L = p.list_of(I32)
    lst, m, h, v = Var("l", L), Var("m", L), Var("h"), Var("v", I32)
    add_head = GlobalVar("add_head")
    mod[add_head] = Function([lst, m], Match(lst, [
        Clause(pcon(p.cons, pvar(h), PatternWildcard()),
               Call(mod.get_global_var("map"), [Function([v], op("add", v, h)), m])),
        Clause(pcon(p.nil), m),
    ]), L)
    k = Var("k", I32)
    mod["main"] = Function([k], Call(add_head, [p.cons(k, p.nil), mk_list(p, [1, 2])]))
    assert to_pylist(run_everywhere(mod, np.int32(100))) == [101, 102]


@pytest.mark.parametrize("name", sorted(list_passes()))
def test_every_pass_keeps_adt_programs_meaning(p, name):
    mod = append_reverse_module(p)
    want = evaluate(mod)
    out = get_pass(name)()(mod)
    check_well_formed(out)
    assert values_equal(evaluate(out), want)
    assert structural_equal(parse(astext(out)), out)


def test_substitute_renames_pattern_variables_with_their_uses(p):
    from vtakit.compiler.passes.rewrite import substitute
    lst, h, h2 = Var("l", p.list_of(I32)), Var("h"), Var("h2")
    m = Match(lst, [Clause(pcon(p.cons, pvar(h), PatternWildcard()), h),
                    Clause(PatternWildcard(), i32(0))])
    out = substitute(m, {h: h2})
    assert out.clauses[0].lhs.patterns[0].var is h2 and out.clauses[0].rhs is h2
    assert out.clauses[1].lhs is m.clauses[1].lhs and out.data is lst
    assert structural_equal(Function([lst], out), Function([lst], m))


def test_run_named_refuses_an_adt_output(p):
    """run() returns an ADT result as it is; run_named (and so ``vtakit run -o OUT.npz``),
    which maps outputs to arrays, says which output is not a tensor."""
    mod = IRModule(type_definitions=p.type_definitions)
    mod["main"] = Function([], mk_list(p, [4, 5]))
    exe = compile_vm(vm_pipeline()(default_pipeline()(mod)))
    got = exe.run([])
    assert isinstance(got, ADT) and got.tag == p.cons.tag and int(got.fields[0]) == 4
    with pytest.raises(TypeError, match=r"^output 'output' is a ADT \(ADT\(tag=1"):
        exe.run_named([])
