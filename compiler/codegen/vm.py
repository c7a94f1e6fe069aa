"""The VM compiler: an IRModule to an :class:`~vtakit.runtime.executable.Executable`.

It takes the IR in the shapes the front of the pipeline produces (after
``ToANormalForm``, ``LambdaLift``, ``InlinePrimitives`` and ``FuseOps``) and
also plainer ones: nested expressions, operator calls outside any primitive
function (each becomes a one-operator primitive), function literals (lifted
here into closures over their free variables) and globals used as values.

* a primitive function (``attrs["Primitive"]``) becomes one ``InvokePacked``:
  the ``lowerer`` hook may claim it (a VTA kernel, with the call's constant
  arguments bound into it: the weights it packs at compile time); otherwise it is a host
  primitive: steps over the host operators registered in the runtime by name
  (:mod:`vtakit.compiler.codegen.host`, :mod:`vtakit.runtime.host`);
* constants go to one pool, deduplicated by value;
* outputs of packed calls are planned in a per-function arena by liveness, and
  registers are allocated by liveness (:mod:`.regalloc`);
* a value that a VTA kernel produces and only VTA kernels read (as the lowerer
  declares with ``device_output`` / ``device_inputs``) stays in device DRAM in the
  packed activation layout: it is carved from a second, device arena, planned by
  liveness like the first, so consecutive layers neither unpack nor repack it and
  the executable records the DRAM it needs;
* a primitive that only reshapes (``reshape``, ``nn.batch_flatten``, ``squeeze``,
  ``expand_dims``) is a ``ReshapeTensor``: the same memory under the new shape (on the
  device too, where the packed bytes stay the same: (N, C, 1, 1) and (N, C));
* a call of a global to itself in tail position becomes moves and a ``Goto``; any
  other call in tail position a ``TailInvoke`` / ``TailInvokeClosure`` (the callee's
  frame replaces the caller's: mutual recursion runs in constant stack);
* a constructor call is an ``AllocADT`` of the constructor's tag (a field-less
  constructor used as a value too; tuples are tag 0), and a ``match`` a
  decision sequence: per clause, ``GetTag`` + ``LoadConsti`` + ``If`` for every
  constructor in its pattern and ``GetField`` for its sub-patterns, jumping to
  the next clause on a mismatch, and ``Fatal`` when the last clause fails too.
  A VM result of an ADT type is an ``ADT`` object (``tag``, ``fields``);
  :func:`vtakit.compiler.ir.values_equal` compares it with the reference
  interpreter's value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ...hw.errors import VtakitError
from ...runtime.executable import Executable
from ...runtime.layout import LayoutError, nchw_shape, packed_activation_nbytes
from ...runtime.module import PrimitiveEntry
from ...runtime.vm.bytecode import (DEVICES, AllocADT, AllocClosure, AllocStorage, AllocTensor,
                                    Fatal, GetField, GetTag, Goto, If, Invoke, InvokeClosure,
                                    InvokePacked, LoadConst, LoadConsti, Move, Opcode,
                                    ReshapeTensor, Ret, TailInvoke, TailInvokeClosure, VMFunction)
from ..ir import (Call, Constant, Constructor, Function, GlobalVar, IRModule, Let, Match, Op,
                  PatternConstructor, PatternVar, PatternWildcard, Tuple,
                  TupleGetItem, TupleType, TensorType, Var, free_vars, infer_types)
from ..ir import If as IRIf
from ..ir.analysis import global_vars_used, post_order
from .host import encode_primitive
from .regalloc import ALIGNMENT, allocate_registers, plan_memory

__all__ = ["compile_vm", "LoweredPrimitive", "VMCompileError"]

_LABEL = -1


class VMCompileError(VtakitError, ValueError):
    """IR the VM compiler cannot translate (the message names the node)."""


@dataclass
class LoweredPrimitive:
    """What a ``lowerer`` hook returns for a primitive it claims.

    Attributes
    ----------
    kind : str
        The primitive factory that builds the packed function at load time
        (registered as ``"vtakit.vm.primitive.<kind>"``).
    meta : dict
        JSON-serializable data for the factory.
    kernels : list of (str, bytes)
        Kernel-table entries (serialized Programs) the function launches.
    constants : list of numpy.ndarray
        Arrays (packed weights) added to the constant pool; their pool indices
        are given to the factory as ``meta["constants"]``.
    name : str, optional
        The primitive's name (default: derived from its operators).
    device_output : bool
        The function can write its (single) output into a device tensor
        (:class:`~vtakit.runtime.vm.objects.DeviceTensor`) instead of a host array.
    device_inputs : tuple of bool
        Per input: the function can read it from a device tensor. The VM compiler
        keeps a value on the device when its producer has ``device_output`` and every
        reader accepts it; the function must accept both forms.
    """

    kind: str
    meta: dict = field(default_factory=dict)
    kernels: list = field(default_factory=list)
    constants: list = field(default_factory=list)
    name: str | None = None
    device_output: bool = False
    device_inputs: tuple = ()


def _leaves(ty):
    if isinstance(ty, TensorType):
        return [ty]
    if isinstance(ty, TupleType):
        return [leaf for f in ty.fields for leaf in _leaves(f)]
    raise VMCompileError(f"a primitive must return tensors or tuples of tensors, not {ty!r}")


def _type_key(ty):
    """A hashable value identifying a type's shape and dtype (types hash by identity)."""
    if isinstance(ty, TensorType):
        return (tuple(ty.shape), ty.dtype)
    if isinstance(ty, TupleType):
        return tuple(_type_key(f) for f in ty.fields)
    return repr(ty)


def _op_names(func):
    names, stack, seen = [], [func.body], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Call):
            if isinstance(e.op, Op):
                names.append(e.op.name)
            stack.extend(reversed(e.args))
        elif isinstance(e, Tuple):
            stack.extend(reversed(e.fields))
        elif isinstance(e, TupleGetItem):
            stack.append(e.tuple_value)
        elif isinstance(e, Let):
            stack.extend([e.body, e.value])
    return list(reversed(names))


class _Builder:
    """Tables shared by every function of the executable."""

    def __init__(self, mod, lowerer, config):
        self.mod, self.lowerer, self.config = mod, lowerer, config
        #: primitive name -> the callable a lowerer returned (process-local functions)
        self.local = {}
        #: packed index -> (device_inputs, device_output) of a lowered primitive
        self.device = {}
        self.functions: list[VMFunction] = []
        self.index: dict[str, int] = {}
        self.pending: list = []
        self.constants, self._const_key = [], {}
        self.primitives, self._prim_key, self._prim_names = [], {}, set()
        self.kernels = []
        #: packed index -> the call's argument positions it takes (constants bound)
        self.kept = {}
        #: primitive key -> its function with the call's constants bound, made by
        #: :meth:`prefetch` for :meth:`primitive`
        self._bound = {}

    def constant(self, arr) -> int:
        arr = np.asarray(arr)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._const_key:
            self._const_key[key] = len(self.constants)
            self.constants.append(arr)
        return self._const_key[key]

    def declare(self, name, params, free=(), self_global=False) -> int:
        i = len(self.functions)
        self.functions.append(VMFunction(name, [v.name_hint for v in (*free, *params)], 0))
        self.index[name] = i
        return i

    def unique(self, base) -> str:
        name, k = base, 1
        while name in self._prim_names:
            name, k = f"{base}_{k}", k + 1
        self._prim_names.add(name)
        return name

    def prefetch(self, calls) -> None:
        """Offer the lowerer the primitives of ``calls`` (``(func, key, call)``, in the order
        :meth:`primitive` will take them) ahead, with their constants bound, when it
        can lower several at once (its ``prefetch``: e.g. in worker processes); what it
        returns for each function then does not change."""
        ahead = getattr(self.lowerer, "prefetch", None)
        if ahead is None:
            return
        funcs = []
        for func, key, call in calls:
            consts = _constant_args(func, key, call)
            if not consts:
                continue
            key = key + (tuple((i, id(c)) for i, c in consts.items()),)
            if key not in self._prim_key and key not in self._bound:
                self._bound[key] = _bind(func, consts)
                funcs.append(self._bound[key])
        ahead(funcs)

    def primitive(self, func: Function, key, call=None) -> tuple[int, list]:
        """The packed index of a primitive function and its output types.

        The ``lowerer`` sees the function with the call's constant arguments (weights)
        bound into it, so what it claims can be prepared from them at compile time;
        the call then passes only the other arguments (:meth:`kept_args`). A primitive
        it leaves to the host keeps its parameters."""
        out_types = _leaves(func.body.checked_type)
        consts = _constant_args(func, key, call) if self.lowerer is not None else {}
        if consts:
            key = key + (tuple((i, id(c)) for i, c in consts.items()),)
        if key in self._prim_key:
            return self._prim_key[key], out_types
        base = func.attrs.get("global_symbol") or func.attrs.get("name") or \
            ("fused_" + "_".join(n.replace(".", "_") for n in _op_names(func)))[:80]
        n_in, n_out = len(func.params), len(out_types)
        if consts:
            bound = self._bound.pop(key, None)
            lowered = self.lowerer(_bind(func, consts) if bound is None else bound)
            if lowered is not None:
                kept = tuple(i for i in range(n_in) if i not in consts)
                self.kept[len(self.primitives)] = kept
                n_in = len(kept)
        else:
            lowered = self.lowerer(func) if self.lowerer is not None else None
        if lowered is None:
            meta = encode_primitive(func, self.constant)
            entry = PrimitiveEntry(self.unique(base), "host", n_in, n_out,
                                   json.dumps(meta, sort_keys=True, separators=(",", ":")))
        elif isinstance(lowered, LoweredPrimitive):
            meta = dict(lowered.meta)
            if lowered.constants:
                meta["constants"] = [self.constant(c) for c in lowered.constants]
            known = {k for k, _ in self.kernels}
            for name, blob in lowered.kernels:
                if name not in known:
                    self.kernels.append((name, bytes(blob)))
                    known.add(name)
            entry = PrimitiveEntry(self.unique(lowered.name or base), lowered.kind, n_in, n_out,
                                   json.dumps(meta, sort_keys=True, separators=(",", ":")))
            if n_out == 1 and (lowered.device_output or any(lowered.device_inputs)):
                self.device[len(self.primitives)] = (tuple(lowered.device_inputs),
                                                     lowered.device_output)
        elif callable(lowered):
            # a process-local function: kept beside the executable under the
            # primitive's name (nothing goes into the process-wide registry)
            name = self.unique(base)
            self.local[name] = lowered
            entry = PrimitiveEntry(name, "global", n_in, n_out)
        else:
            raise VMCompileError(f"the lowerer returned {type(lowered).__name__} for {base}; "
                                 "expected None, a LoweredPrimitive or a callable")
        self._prim_key[key] = len(self.primitives)
        self.primitives.append(entry)
        return self._prim_key[key], out_types

    def kept_args(self, index, n: int) -> tuple:
        """The argument positions of a call of primitive ``index`` (of ``n`` arguments)
        that the packed call passes."""
        return self.kept.get(index, tuple(range(n)))


def _constant_args(func, key, call) -> dict:
    """``{position: Constant}``: the call's constant arguments of a primitive function."""
    if call is None or key[0] != "fn":
        return {}
    return {i: a for i, a in enumerate(call.args) if isinstance(a, Constant)}


def _bind(func: Function, consts: dict) -> Function:
    """``func`` with the parameters at ``consts``' positions replaced by the constants,
    typed."""
    from ..passes.rewrite import substitute
    body = substitute(func.body, {func.params[i]: c for i, c in consts.items()})
    params = [p for i, p in enumerate(func.params) if i not in consts]
    bound = Function(params, body, func.ret_type, func.attrs)
    return infer_types(IRModule({"main": bound}))["main"]


class _FunctionCompiler:
    def __init__(self, b: _Builder, index: int, params, free=(), self_global=None,
                 device=False):
        self.b, self.index, self.self_global = b, index, self_global
        #: whether values may stay on the device (one frame of this function at a time)
        self.device = device
        self.code, self.nregs, self.nlabels = [], 0, 0
        self.env = {}
        for v in (*free, *params):
            self.env[v] = self.reg()
        self.params = [self.env[v] for v in (*free, *params)]
        self.arena = self.reg()
        self.dram = self.reg()
        self.readers = {}
        self.body_label = self.label()

    def reg(self) -> int:
        self.nregs += 1
        return self.nregs - 1

    def label(self) -> int:
        self.nlabels += 1
        return self.nlabels - 1

    def emit(self, ins):
        self.code.append(ins)

    def place(self, label):
        self.code.append((_LABEL, label))

    # -------------------------------------------------------------- expressions
    def value(self, e, memo):
        while isinstance(e, Let):
            self.env[e.var] = self.value(e.value, memo)
            e = e.body
        r = memo.get(e)
        if r is not None:
            return r
        r = self._value(e, memo)
        memo[e] = r
        return r

    def _value(self, e, memo):
        if isinstance(e, Var):
            if e not in self.env:
                raise VMCompileError(f"variable %{e.name_hint} is unbound")
            return self.env[e]
        if isinstance(e, Constant):
            r = self.reg()
            self.emit(LoadConst(self.b.constant(e.data), r))
            return r
        if isinstance(e, Tuple):
            fields = [self.value(f, memo) for f in e.fields]
            r = self.reg()
            self.emit(AllocADT(0, fields, r))
            return r
        if isinstance(e, TupleGetItem):
            t = self.value(e.tuple_value, memo)
            r = self.reg()
            self.emit(GetField(t, e.index, r))
            return r
        if isinstance(e, IRIf):
            r = self.reg()
            then, else_, end = self.label(), self.label(), self.label()
            self.branch(e.cond, memo, then, else_)
            self.place(then)
            self.emit(Move(self.value(e.true_branch, dict(memo)), r))
            self.emit(Goto(end))
            self.place(else_)
            self.emit(Move(self.value(e.false_branch, dict(memo)), r))
            self.place(end)
            return r
        if isinstance(e, Match):
            r, end = self.reg(), self.label()

            def arm(rhs, memo):
                self.emit(Move(self.value(rhs, memo), r))
                self.emit(Goto(end))

            self.match(e, memo, arm)
            self.place(end)
            return r
        if isinstance(e, Constructor):
            if e.inputs:
                raise VMCompileError(f"constructor {e.name_hint} used as a value: call it with "
                                     f"its {len(e.inputs)} field(s)")
            r = self.reg()
            self.emit(AllocADT(e.tag, (), r))
            return r
        if isinstance(e, Function):
            if e.is_primitive():
                raise VMCompileError("a primitive function can only be called, not used as a "
                                     "value")
            return self.closure(e)
        if isinstance(e, GlobalVar):
            func = self.b.mod[e.name_hint]
            if func.is_primitive():
                raise VMCompileError(f"primitive global @{e.name_hint} used as a value")
            r = self.reg()
            self.emit(AllocClosure(self.b.index[e.name_hint], (), r))
            return r
        if isinstance(e, Call):
            return self.call(e, memo)
        raise VMCompileError(f"cannot compile a {type(e).__name__} node")

    def branch(self, cond, memo, then, else_):
        c = self.value(cond, memo)
        one = self.reg()
        self.emit(LoadConsti(1, one))
        self.emit(If(c, one, then, else_))

    def match(self, e: Match, memo, arm):
        """Each clause's pattern test, then ``arm(rhs, memo)`` (which must not fall
        through); a value no clause matches reaches ``Fatal``."""
        data = self.value(e.data, memo)
        for clause in e.clauses:
            fail = self.label()
            self.test(clause.lhs, data, fail)
            arm(clause.rhs, dict(memo))
            self.place(fail)
        if not _irrefutable(e.clauses[-1].lhs):
            self.emit(Fatal())

    def test(self, p, reg, fail):
        """Code that jumps to ``fail`` unless register ``reg`` matches pattern ``p``,
        binding the pattern's variables."""
        t = type(p)
        if t is PatternVar:
            self.env[p.var] = reg
            return
        if t is PatternConstructor:
            tag, want, ok = self.reg(), self.reg(), self.label()
            self.emit(GetTag(reg, tag))
            self.emit(LoadConsti(p.constructor.tag, want))
            self.emit(If(tag, want, ok, fail))
            self.place(ok)
        for i, q in enumerate(getattr(p, "patterns", ())):
            if type(q) is not PatternWildcard:
                field = self.reg()
                self.emit(GetField(reg, i, field))
                self.test(q, field, fail)

    def closure(self, func: Function) -> int:
        free = [v for v in free_vars(func)]
        for v in free:
            if v not in self.env:
                raise VMCompileError(f"variable %{v.name_hint} is unbound")
        name = f"{self.b.functions[self.index].name}_lambda{len(self.b.functions)}"
        index = self.b.declare(name, func.params, free)
        self.b.pending.append((index, func, free, None))
        r = self.reg()
        self.emit(AllocClosure(index, [self.env[v] for v in free], r))
        return r

    def call(self, e: Call, memo):
        op = e.op
        prim = _primitive_of(self.b.mod, e)
        if prim is not None and _view_shape(prim[0]) is None:
            kept = self.b.kept_args(self.b.primitive(*prim, e)[0], len(e.args))
            return self.packed(*prim, [self.value(e.args[i], memo) for i in kept], e)
        args = [self.value(a, memo) for a in e.args]
        if prim is not None:
            r = self.reg()
            self.emit(ReshapeTensor(args[0], _view_shape(prim[0]), r))
            return r
        if isinstance(op, Constructor):
            r = self.reg()
            self.emit(AllocADT(op.tag, args, r))
            return r
        if isinstance(op, GlobalVar):
            r = self.reg()
            self.emit(Invoke(self.b.index[op.name_hint], args, r))
            return r
        target = self.value(op, memo)
        r = self.reg()
        self.emit(InvokeClosure(target, args, r))
        return r

    def on_device(self, index, call) -> bool:
        """Whether packed call ``call`` (of primitive ``index``) leaves its output on the
        device: it can, and every reader takes it from there."""
        return (self.device and self.b.device.get(index, ((), False))[1]
                and self.device_readers(call))

    def device_readers(self, value) -> bool:
        """Whether every reader of ``value`` is a primitive that accepts a device input
        there, or a reshape keeping the packed bytes whose readers all do."""
        readers = self.readers.get(value)
        if not readers:
            return False
        for reader in readers:
            if reader is None:
                return False
            user, i = reader
            func, key = _primitive_of(self.b.mod, user)
            shape = _view_shape(func)
            if shape is not None:
                if not (_same_packing(func.params[0].checked_type.shape, shape)
                        and self.device_readers(user)):
                    return False
                continue
            index = self.b.primitive(func, key, user)[0]
            kept = self.b.kept_args(index, len(user.args))
            ins = self.b.device.get(index, ((), False))[0]
            if i not in kept or kept.index(i) >= len(ins) or not ins[kept.index(i)]:
                return False
        return True

    def packed(self, func, key, args, call=None):
        index, out_types = self.b.primitive(func, key, call)
        outs = []
        arena = self.dram if self.on_device(index, call) else self.arena
        for t in out_types:
            r = self.reg()
            self.emit(AllocTensor(arena, 0, t.shape, t.dtype, r))
            outs.append(r)
        self.emit(InvokePacked(index, len(outs), [*args, *outs]))
        return self.rebuild(func.body.checked_type, iter(outs))

    def rebuild(self, ty, outs):
        if isinstance(ty, TensorType):
            return next(outs)
        fields = [self.rebuild(f, outs) for f in ty.fields]
        r = self.reg()
        self.emit(AllocADT(0, fields, r))
        return r

    # -------------------------------------------------------------- tail position
    def tail(self, e, memo):
        while isinstance(e, Let):
            if e.body is e.var:         # `let %x = v; %x` (A-normal form): v is in tail position
                e = e.value
                continue
            self.env[e.var] = self.value(e.value, memo)
            e = e.body
        if isinstance(e, IRIf) and e not in memo:
            then, else_ = self.label(), self.label()
            self.branch(e.cond, memo, then, else_)
            self.place(then)
            self.tail(e.true_branch, dict(memo))
            self.place(else_)
            self.tail(e.false_branch, dict(memo))
            return
        if isinstance(e, Match) and e not in memo:
            self.match(e, memo, self.tail)
            return
        if (isinstance(e, Call) and isinstance(e.op, GlobalVar) and self.self_global is not None
                and e.op.name_hint == self.self_global):
            args = [self.value(a, memo) for a in e.args]
            # parallel assignment: copy arguments that are parameters first
            params = set(self.params)
            staged = []
            for a in args:
                if a in params:
                    t = self.reg()
                    self.emit(Move(a, t))
                    a = t
                staged.append(a)
            for a, p in zip(staged, self.params):
                self.emit(Move(a, p))
            self.emit(Goto(self.body_label))
            return
        if isinstance(e, Call) and e not in memo and _primitive_of(self.b.mod, e) is None \
                and not isinstance(e.op, Constructor):
            # any other call in tail position: the callee's frame replaces this one
            args = [self.value(a, memo) for a in e.args]
            if isinstance(e.op, GlobalVar):
                self.emit(TailInvoke(self.b.index[e.op.name_hint], args))
            else:
                self.emit(TailInvokeClosure(self.value(e.op, memo), args))
            return
        self.emit(Ret(self.value(e, memo)))

    # -------------------------------------------------------------- finishing
    def finish(self, body) -> VMFunction:
        self.readers = _primitive_readers(self.b.mod, body)
        # Lower the primitives in the order they run (placement asks about readers
        # ahead), so the primitive table, names and reports follow execution order.
        calls = []
        for node in post_order(body, descend=lambda n: not isinstance(n, Function)):
            prim = _primitive_of(self.b.mod, node) if isinstance(node, Call) else None
            if prim is not None and _view_shape(prim[0]) is None:
                calls.append((*prim, node))
        self.b.prefetch(calls)
        for func, key, node in calls:
            self.b.primitive(func, key, node)
        self.place(self.body_label)
        self.tail(body, {})
        code, arena_size, naive = plan_memory(self.code, self.arena, self.reg)
        if arena_size:
            code.insert(0, AllocStorage(arena_size, ALIGNMENT, self.arena))
        config = self.b.config
        # device tensors start on whole DMA elements (the arena itself on a page)
        align = max(ALIGNMENT, config.inp_elem_bytes, config.out_elem_bits // 8)
        vta = DEVICES.index("vta")
        code, dram_size, _ = plan_memory(
            code, self.dram, self.reg, alignment=align, device=vta,
            nbytes=lambda shape, dtype: packed_activation_nbytes(shape, dtype, config))
        if dram_size:
            code.insert(0, AllocStorage(dram_size, align, self.dram, vta))
        code = _resolve_labels(code)
        code, nregs = allocate_registers(code, len(self.params))
        f = self.b.functions[self.index]
        f.code, f.num_regs, f.arena_bytes, f.naive_bytes = code, nregs, arena_size, naive
        f.dram_bytes = dram_size
        return f


def _primitive_of(mod, call):
    """``(primitive function, cache key)`` when ``call`` calls a primitive (an operator,
    a primitive function literal or a primitive global), else None."""
    op = call.op
    if isinstance(op, Op):
        params = [Var(f"p{i}", a.checked_type) for i, a in enumerate(call.args)]
        func = Function(params, Call(op, params, call.attrs))
        func.body._set_type(call.checked_type)
        return func, ("op", op.name, json.dumps(call.attrs, sort_keys=True, default=repr),
                      tuple(_type_key(a.checked_type) for a in call.args))
    if isinstance(op, GlobalVar):
        op = mod[op.name_hint]
    if isinstance(op, Function) and op.is_primitive():
        return op, ("fn", id(op))
    return None


#: Operators that only reshape: a primitive of one of them alone becomes a ReshapeTensor.
_VIEW_OPS = frozenset({"reshape", "nn.batch_flatten", "squeeze", "expand_dims"})


def _view_shape(func):
    """The output shape when primitive ``func`` only reshapes its one input, else None."""
    body = func.body
    if (len(func.params) == 1 and isinstance(body, Call) and isinstance(body.op, Op)
            and body.op.name in _VIEW_OPS and len(body.args) == 1
            and body.args[0] is func.params[0]):
        t_in, t_out = func.params[0].checked_type, body.checked_type
        if (isinstance(t_in, TensorType) and isinstance(t_out, TensorType)
                and t_in.dtype == t_out.dtype
                and int(np.prod(t_in.shape)) == int(np.prod(t_out.shape))):
            return tuple(t_out.shape)
    return None


def _same_packing(a, b) -> bool:
    """Whether activations of shapes ``a`` and ``b`` have the same packed bytes: (N, C) is
    (N, C, 1, 1)."""
    try:
        return nchw_shape(a) == nchw_shape(b)
    except LayoutError:             # not an activation: never on the device
        return False


def _primitive_readers(mod, body) -> dict:
    """Who reads each value of a function body: ``{call: [(reader call, argument index) or
    None]}``, where None is any read other than as a primitive call's argument (returned,
    in a tuple or an If, passed to a function or captured by a closure). Let-bound
    variables are followed to the calls they name."""
    bound, reads = {}, []
    reads.append((body, None))
    for e in post_order(body, descend=lambda n: not isinstance(n, Function)):
        if isinstance(e, Let):
            bound[e.var] = e.value
            reads.append((e.body, None))
        elif isinstance(e, Call):
            prim = _primitive_of(mod, e) is not None
            reads += [(a, (e, i) if prim else None) for i, a in enumerate(e.args)]
            if not isinstance(e.op, (Op, GlobalVar, Constructor)):
                reads.append((e.op, None))
        elif isinstance(e, Tuple):
            reads += [(f, None) for f in e.fields]
        elif isinstance(e, TupleGetItem):
            reads.append((e.tuple_value, None))
        elif isinstance(e, IRIf):
            reads += [(x, None) for x in (e.cond, e.true_branch, e.false_branch)]
        elif isinstance(e, Match):
            reads += [(x, None) for x in (e.data, *(c.rhs for c in e.clauses))]
        elif isinstance(e, Function) and not e.is_primitive():
            reads += [(v, None) for v in free_vars(e)]

    def origin(e):
        while isinstance(e, Var) and e in bound:
            e = bound[e]
        return e
    readers = {}
    for e, reader in reads:
        readers.setdefault(origin(e), []).append(reader)
    return readers


def _irrefutable(p) -> bool:
    """Whether every value matches ``p`` (no constructor test in it)."""
    if type(p) is PatternConstructor:
        return False
    return all(_irrefutable(q) for q in getattr(p, "patterns", ()))


def _resolve_labels(code):
    where, pc = {}, 0
    for ins in code:
        if ins[0] == _LABEL:
            where[ins[1]] = pc
        else:
            pc += 1
    out = []
    for ins in code:
        if ins[0] == _LABEL:
            continue
        pc = len(out)
        if ins[0] == Opcode.IF.value:
            ins = If(ins[1], ins[2], where[ins[3]] - pc, where[ins[4]] - pc)
        elif ins[0] == Opcode.GOTO.value:
            ins = Goto(where[ins[1]] - pc)
        out.append(ins)
    return out


def _io(types, names, default):
    out = []
    for i, t in enumerate(types):
        name = names[i] if names and i < len(names) else (
            default if len(types) == 1 else f"{default}{i}")
        if isinstance(t, TensorType):
            out.append({"name": name, "shape": list(t.shape), "dtype": t.dtype})
        else:
            out.append({"name": name, "shape": None, "dtype": None})
    return out


def compile_vm(mod, *, config="default", lowerer=None, entry: str = "main") -> Executable:
    """Compile a module (or a function, as ``main``) to an executable.

    Parameters
    ----------
    mod : IRModule or Function
    config : VTAConfig, preset name or path
        The hardware the executable is built for (recorded in its header).
    lowerer : callable, optional
        ``lowerer(prim_func) -> LoweredPrimitive | callable | None``: claims a
        primitive function (e.g. for VTA); None leaves it to the host. It sees the
        function with the call's constant arguments (a layer's weights) bound into
        its body, so it can prepare them (pack them) now; a claimed primitive takes
        the other arguments only.
    entry : str

    Returns
    -------
    Executable

    Raises
    ------
    VMCompileError
    """
    if isinstance(mod, Function):
        mod = IRModule({entry: mod})
    infer_types(mod)
    from ...hw.config import load_config
    config = load_config(config)
    b = _Builder(mod, lowerer, config)
    names = [entry] + [n for n in mod if n != entry]
    for name in names:
        if not mod[name].is_primitive():
            b.declare(name, mod[name].params)
    # Device tensors only in the entry function, and only if nothing calls it: one frame
    # of it at a time, so the executable's peak DRAM is a bound.
    called = {g.name_hint for name in names for g in global_vars_used(mod[name].body)}
    for name in names:
        func = mod[name]
        if func.is_primitive():
            continue
        b.pending.append((b.index[name], func, (), name))
        while b.pending:
            index, f, free, self_global = b.pending.pop(0)
            _FunctionCompiler(b, index, f.params, free, self_global,
                              device=self_global == entry and entry not in called).finish(f.body)
    main = mod[entry]
    ret = main.body.checked_type
    outs = ret.fields if isinstance(ret, TupleType) else [ret]
    exe = Executable(
        config, b.functions, b.constants, b.primitives, b.kernels, entry,
        _io([p.type_annotation for p in main.params], [p.name_hint for p in main.params], "in"),
        _io(list(outs), main.attrs.get("output_names"), "output"))
    exe.local_functions.update(b.local)
    return exe
