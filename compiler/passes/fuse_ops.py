"""FuseOps: group operator calls into primitive functions (Relay's algorithm).

Every operator call ends up inside a function with attribute ``Primitive=1``,
called where the group's result is needed::

    %0 = fn (%p0: Tensor[(1, 8, 8, 8), int8], %p1: Tensor[(16, 8, 3, 3), int8],
             %p2: Tensor[(16, 1, 1), int32], %p3: Tensor[(1, 16, 8, 8), int32],
             Primitive=1) -> Tensor[(1, 16, 8, 8), int8] {
      %1 = nn.conv2d(%p0, %p1, padding=[1, 1, 1, 1], out_dtype="int32");
      %2 = add(%1, %p2);
      %3 = add(%2, %p3);
      %4 = right_shift(%3, 8i32);
      %5 = clip(%4, a_min=-128.0, a_max=127.0);
      %6 = cast(%5, dtype="int8");
      nn.relu(%6)
    };
    %0(%x, meta[Constant][0], meta[Constant][1], %y)

Parameters are the group's inputs in order of first use; non-scalar constants
are parameters too (the caller passes them), scalar constants stay inline.

Grouping follows Relay: a post-dominator tree over the operator calls; an
``OUT_ELEMWISE_FUSABLE`` op (conv2d, dense, pooling) absorbs the chain up to
its immediate post-dominator when every edge on the way is element-wise
(a broadcast whose operand has the result's shape and dtype counts as
element-wise) and every op on the way is at most ``BROADCAST``; ``ELEMWISE`` /
``BROADCAST`` ops join an injective or reduction post-dominator; ``INJECTIVE``
ops and tuples join an injective post-dominator (second phase), so
``concatenate((%a, %b))`` takes tensors, not a tuple.  Values used by
anything other than an operator call or a tuple (lets, Ifs, projections,
function results) end a group; a tuple that joins no operator stays outside.
A third phase lets injective operands of such a tuple join it (Relay's).
"""

from __future__ import annotations

from ..ir import infer_types
from ..ir.analysis import children, post_order
from ..ir.expr import Call, Constant, Function, Op, Tuple, Var
from ..ir.op import OpPattern
from .infra import function_pass
from .rewrite import not_primitive, rebuild

__all__ = ["FuseOps", "fuse_function"]

_EW, _BC, _INJ, _RED, _OEF, _TUP, _OPQ = (
    OpPattern.ELEMWISE, OpPattern.BROADCAST, OpPattern.INJECTIVE, OpPattern.COMM_REDUCE,
    OpPattern.OUT_ELEMWISE_FUSABLE, OpPattern.TUPLE, OpPattern.OPAQUE)


def _is_op_call(n):
    return type(n) is Call and isinstance(n.op, Op)


def _fusable(n):
    return _is_op_call(n) or type(n) is Tuple


def _pattern(n):
    return n.op.pattern if type(n) is Call else _TUP


def _operands(n):
    return n.args if type(n) is Call else n.fields


class _Group:
    __slots__ = ("parent", "pattern", "anchor", "root_node")

    def __init__(self, node, pattern):
        self.parent = None
        self.pattern = pattern
        self.anchor = pattern == _OEF
        self.root_node = node

    def find(self):
        g = self
        while g.parent is not None:
            g = g.parent
        return g


class _DomNode:
    __slots__ = ("parent", "depth", "pattern")

    def __init__(self, parent, depth, pattern):
        self.parent, self.depth, self.pattern = parent, depth, pattern


def _edge_pattern(consumer, arg):
    p = consumer.op.pattern
    if p == _BC:
        rt, at = consumer.checked_type, arg.checked_type
        if getattr(rt, "shape", None) == getattr(at, "shape", 0) and \
                getattr(rt, "dtype", None) == getattr(at, "dtype", 0):
            return _EW
    return p


class _Partition:
    def __init__(self, body, fuse_opt_level):
        # one graph through local (non-primitive) functions too: a value shared by a
        # closure and its surroundings is computed once
        self.nodes = post_order(body, descend=not_primitive)
        self.ops = [n for n in self.nodes if _fusable(n)]
        self.outputs = {n: [] for n in self.ops}   # node -> [(consumer, edge pattern)]
        self.extern = {body} if _fusable(body) else set()
        for n in self.nodes:
            if type(n) is Function:
                if not n.is_primitive() and n.body in self.outputs:
                    self.extern.add(n.body)
                continue
            for c in children(n):
                if c not in self.outputs:
                    continue
                if _is_op_call(n):
                    self.outputs[c].append((n, _edge_pattern(n, c)))
                elif type(n) is Tuple:
                    self.outputs[c].append((n, _INJ))
                else:
                    self.extern.add(c)
        self.groups = {n: _Group(n, _pattern(n)) for n in self.ops}
        if fuse_opt_level >= 1:
            self.dom = self.post_dominators()
            for phase in (0, 1, 2):
                self.run(phase)

    # ---- post-dominator tree
    def post_dominators(self):
        dom = {}
        for n in reversed(self.ops):  # consumers first
            if n in self.extern or not self.outputs[n]:
                dom[n] = _DomNode(None, 1, _OPQ)
                continue
            pattern = _EW
            parent = None
            for k, (c, p) in enumerate(self.outputs[n]):
                node = c
                if k == 0:
                    parent = node
                else:
                    parent, pattern = self.lca(parent, node, pattern, dom)
                pattern = max(pattern, p)
            dom[n] = _DomNode(parent, 1 if parent is None else dom[parent].depth + 1, pattern)
        return dom

    @staticmethod
    def lca(a, b, pattern, dom):
        while a is not b:
            if a is None or b is None:
                return None, pattern
            da, db = dom[a], dom[b]
            if da.depth < db.depth:
                pattern = max(pattern, db.pattern)
                b = db.parent
            elif db.depth < da.depth:
                pattern = max(pattern, da.pattern)
                a = da.parent
            else:
                pattern = max(pattern, da.pattern, db.pattern)
                a, b = da.parent, db.parent
        return a, pattern

    # ---- fusion
    def check_path(self, src, sink, fcond):
        seen = set()
        stack = [c for c, _ in self.outputs[src]]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n not in self.groups:
                return False
            if not fcond(self.groups[n].find().pattern, n is sink):
                return False
            if n is not sink:
                stack.extend(c for c, _ in self.outputs[n])
        return True

    def commit(self, src, sink):
        target = self.groups[sink].find()
        seen = set()
        stack = [src]
        while stack:
            n = stack.pop()
            if n is sink or n in seen:
                continue
            seen.add(n)
            child = self.groups[n].find()
            if child is not target:
                child.parent = target
                if child.anchor:
                    target.anchor = True
                    target.pattern = max(target.pattern, child.pattern)
            stack.extend(c for c, _ in self.outputs[n])

    def run(self, phase):
        for n in self.ops:
            g = self.groups[n].find()
            if g.pattern == _OPQ:
                continue
            d = self.dom[n]
            if d.parent is None:
                continue
            sink = d.parent
            if phase == 2:
                # injective ops join a tuple that an injective consumer absorbed
                own, root = self.groups[sink], self.groups[sink].find()
                if g.pattern <= _INJ and own.pattern == _TUP and root.pattern <= _INJ and \
                        self.check_path(n, sink, lambda k, s: k <= _INJ):
                    self.commit(n, sink)
                continue
            if g.pattern == _OEF:
                if phase == 0 and d.pattern <= _EW and self.check_path(
                        n, sink, lambda k, is_sink: k <= _BC):
                    self.commit(n, sink)
            elif g.pattern <= _BC:
                if d.pattern <= _INJ or d.pattern == _RED:
                    def fcond(k, is_sink):
                        return k <= _INJ or (is_sink and k in (_RED, _OEF))
                    if self.check_path(n, sink, fcond):
                        self.commit(n, sink)
            elif g.pattern in (_INJ, _TUP) and phase == 1:
                if d.pattern <= _INJ and self.check_path(n, sink, lambda k, s: k <= _INJ):
                    self.commit(n, sink)


def fuse_function(func: Function, fuse_opt_level=1) -> Function:
    """``func`` with its operator calls grouped into primitive functions."""
    part = _Partition(func.body, fuse_opt_level)
    members = {}
    for n in part.ops:
        members.setdefault(part.groups[n].find(), []).append(n)
    memo = {}
    for n in part.nodes:
        if _fusable(n):
            g = part.groups[n].find()
            if g.root_node is not n:
                continue  # computed inside its group's primitive function
            if type(n) is Tuple:  # a tuple is never a kernel of its own
                assert members[g] == [n], "a tuple group absorbed other nodes"
                memo[n] = rebuild(n, memo)
            else:
                memo[n] = _make_group(n, members[g], memo)
        elif type(n) is Function:
            if not n.is_primitive():
                memo[n] = rebuild(n, memo)
        else:
            memo[n] = rebuild(n, memo)
    body = memo.get(func.body, func.body)
    if body is func.body:
        return func
    return Function(func.params, body, func.ret_type, func.attrs)


def _make_group(root, nodes, memo):
    inside = set(nodes)
    params, outer_args, param_of, clone = [], [], {}, {}
    for n in nodes:  # post-order: operands first
        args = []
        for a in _operands(n):
            if a in inside:
                args.append(clone[a])
            elif type(a) is Constant and a.data.ndim == 0:
                args.append(a)
            else:
                if a not in param_of:
                    p = Var(f"p{len(params)}", a.checked_type)
                    param_of[a] = p
                    params.append(p)
                    outer_args.append(memo.get(a, a))
                args.append(param_of[a])
        new = Call(n.op, args, n.attrs) if type(n) is Call else Tuple(args)
        new._set_type(n.checked_type)
        clone[n] = new
    fn = Function(params, clone[root], root.checked_type, {"Primitive": 1})
    return Call(fn, outer_args)


@function_pass(opt_level=0, name="FuseOps")
class FuseOps:
    """Group operator calls into ``Primitive=1`` functions (see the module docstring).

    Parameters
    ----------
    fuse_opt_level : int
        0: every op alone in its own primitive function; -1 (default): 0 when
        the PassContext's opt_level is 0, else 1 (fusion).
    """

    def __init__(self, fuse_opt_level=-1):
        self.fuse_opt_level = fuse_opt_level

    def transform_function(self, func, mod, ctx):
        level = self.fuse_opt_level
        if level < 0:
            level = 0 if ctx.opt_level == 0 else 1
        infer_types(func, mod)
        return fuse_function(func, level)
