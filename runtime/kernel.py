"""Micro-op kernels: the uop sequences and loop nests that GEMM and ALU instructions run.

A :class:`UopKernel` is a frozen, hashable value, so the runtime can cache it in
the uop SRAM by value (reference 4.4): two kernels with equal uops, loops and
mode share one resident copy. Construction checks the config-independent
kernel rules; :meth:`UopKernel.check_config` checks a kernel against one
hardware configuration (field widths and SRAM depths).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..hw.config import VTAConfig
from ..hw.isa import AluOp, IsaError, alu_entry, alu_semantics, alu_violation, isa_for
from ..hw.spec import EXTENSIONS, LOOP_ITER_BITS, MAX_LOOP_EXTENT
from .errors import KernelError, SramRangeError

__all__ = ["UopKernel", "MAX_LOOPS"]

#: A kernel has at most two loops (they become iter_out and iter_in).
MAX_LOOPS = 2


def _ints(seq, n, what, kind):
    try:                                   # long lists (listed kernels) at numpy speed
        if len(seq) < 256:
            raise TypeError
        a = np.asarray(seq)
        if a.dtype.kind in "iu" and a.ndim == 2 and a.shape[1] == n and (a >= 0).all():
            return tuple(map(tuple, a.tolist()))
    except (TypeError, ValueError):
        pass
    try:                                   # well-formed lists at C speed
        out = tuple([tuple(map(int, item)) for item in seq])
        if all(len(v) == n for v in out) and (not out or min(map(min, out)) >= 0):
            return out
    except (TypeError, ValueError):
        pass
    out = []                               # the first bad entry, for the message
    for k, item in enumerate(seq):
        try:
            values = tuple(int(v) for v in item)
        except TypeError:
            raise KernelError(f"{kind} kernel: {what} {k} is {item!r}; expected a tuple of "
                              f"{n} integers") from None
        if len(values) != n:
            raise KernelError(f"{kind} kernel: {what} {k} is {item!r}; {kind} {what}s have "
                              f"{n} entries")
        if any(v < 0 for v in values):
            raise KernelError(f"{kind} kernel: {what} {k} is {item!r}; entries must be >= 0")
        out.append(values)
    return tuple(out)


def _use_imm(code, imm) -> bool:
    """``use_imm`` of an ALU kernel with this opcode and ``imm`` (see :class:`UopKernel`)."""
    e = alu_entry(code)
    return imm is not None and (e is None or e.tensor_imm is None)


#: Kernels :meth:`UopKernel.gemm` and :meth:`UopKernel.alu` built, by their arguments
#: (an operator builds the same reset, epilogue and GEMM kernels for tile after tile);
#: bounded, emptied when full.
_MEMO_SIZE = 4096
_made: dict = {}


def _recall(cls, kind, uops, loops, *rest) -> tuple:
    """``(key, kernel)``: the memo key of a builder's arguments (None when they are not
    hashable, e.g. lists of lists: not remembered) and the kernel built for them, or
    None. Equal keys build equal kernels (the builders convert each entry with int)."""
    try:
        key = (cls, kind, tuple(uops), tuple(loops), *rest)
        return key, _made.get(key)
    except TypeError:
        return None, None


def _remember(key, kernel):
    if key is not None:
        if len(_made) >= _MEMO_SIZE:
            _made.clear()
        _made[key] = kernel
    return kernel


#: Encoded uop words of the kernels :meth:`UopKernel.check_config` passed, by
#: ``(kernel, config)`` (a kernel is a value: every builder of the same config checks
#: and encodes it alike); read-only arrays; bounded, emptied when full.
_checked: dict = {}
_CHECKED_SIZE = 1 << 14


def clear_kernel_memo() -> None:
    """Forget the kernels the builders remember and the checks of
    :meth:`UopKernel.check_config` (what a never-seen model costs to build)."""
    _made.clear()
    _checked.clear()


@dataclass(frozen=True, eq=True)
class UopKernel:
    """A recorded micro-op kernel (build it with :meth:`gemm` or :meth:`alu`).

    Attributes
    ----------
    mode : str
        ``"gemm"`` or ``"alu"``.
    uops : tuple of (dst, src, wgt)
        Micro-ops in execution order (``wgt`` is 0 for ALU kernels).
    loops : tuple of (extent, dst_factor, src_factor, wgt_factor)
        Zero to two loops, outermost first (``wgt_factor`` is 0 for ALU kernels).
    reset : bool
        GEMM only: zero the addressed accumulators instead of accumulating.
    alu_op : AluOp or None
        ALU only: the operation.
    imm : int or None
        ALU only: the immediate field, or None. For most opcodes an int means ``use_imm``
        (the immediate is the operand) and None a tensor-tensor operation; for an opcode
        with ``tensor_imm`` (MULSHR) the operand is a tensor and ``imm`` its shift
        (:attr:`use_imm` says which).
    size : int
        Number of micro-ops (uop SRAM entries), ``len(uops)``.
    """

    mode: str
    uops: tuple
    loops: tuple
    reset: bool = False
    alu_op: AluOp | None = None
    imm: int | None = None
    size: int = field(default=0, init=False, repr=False, compare=False)
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    _iterations: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "size", len(self.uops))
        object.__setattr__(self, "_hash", hash((self.mode, self.uops, self.loops, self.reset,
                                                self.alu_op, self.imm)))

    def __hash__(self):
        return self._hash

    def __setstate__(self, state):
        """Unpickled: the hash is made again (a str's or an enum's hash is the process's
        own: another process's would miss every lookup here)."""
        self.__dict__.update(state)
        self.__post_init__()

    # ---------------------------------------------------------------- builders

    @classmethod
    def gemm(cls, uops, loops=(), reset=False, *, check_hazard=True) -> "UopKernel":
        """A GEMM kernel.

        Parameters
        ----------
        uops : sequence of (dst, src, wgt)
            Accumulator, input and weight SRAM indices of each micro-op.
        loops : sequence of (extent, dst_factor, src_factor, wgt_factor)
            Up to two loops, outer first: loop 0 becomes iter_out, loop 1 iter_in.
        reset : bool
            Zero ``ACC[dst]`` instead of accumulating (``reset_reg``).
        check_hazard : bool
            Enforce the accumulate-hazard rule of reference 3.4 (default). Our
            hardware forwards, so a kernel built with ``False`` still computes
            the sequential result; it only would not run on HLS/Chisel VTA.

        Raises
        ------
        KernelError
            On malformed uops or loops, more than two loops, or (non-reset
            kernels) a uop whose dst_idx equals one of the previous two uops'
            dst_idx in the kernel's iteration order.
        """
        key, kernel = _recall(cls, "gemm", uops, loops, bool(reset), bool(check_hazard))
        if kernel is not None:
            return kernel
        uops = _ints(uops, 3, "uop", "GEMM")
        loops = _ints(loops, 4, "loop", "GEMM")
        kernel = cls("gemm", uops, loops, bool(reset))
        kernel._check_common()
        if check_hazard and not reset:
            kernel._check_hazard()
        return _remember(key, kernel)

    @classmethod
    def alu(cls, op, uops, loops=(), imm=None) -> "UopKernel":
        """An ALU kernel.

        Parameters
        ----------
        op : AluOp or int
            An opcode of :data:`~vtakit.hw.isa.ALU_OPS` (MIN, MAX, ADD or SHR; with the
            ``requant`` extension also SRDHM, RSHR, MULSHR; with ``requant2`` REQ).
        uops : sequence of (dst, src)
            Destination and source accumulator indices of each micro-op.
        loops : sequence of (extent, dst_factor, src_factor)
            Up to two loops, outer first. One loop becomes the *inner* loop
            (iter_out = 1), as in TVM's runtime.
        imm : int or None
            None: tensor-tensor (``ACC[dst] = op(ACC[dst], ACC[src])``); an int:
            ``use_imm`` with this sign-extended 16-bit immediate. For MULSHR (an opcode
            with ``tensor_imm``): the shift ``k`` of ``ACC[dst] = (ACC[dst] * ACC[src]
            + 2^(k-1)) >> k``, required; for REQ its mode (0 requantize, 1 load RM from
            ``ACC[src]``, 2 load RP), required.

        Raises
        ------
        KernelError
            On malformed uops or loops, or an opcode and operand the ALU table does
            not allow (:func:`~vtakit.hw.isa.alu_violation`: an unknown opcode, SHR
            without an immediate, an immediate outside its opcode's range). An
            extension opcode is accepted here; :meth:`check_config` (which the
            builder runs) refuses it for a config without its extension.
        """
        key, kernel = _recall(cls, "alu", uops, loops, op, imm)
        if kernel is not None:
            return kernel
        try:
            code = int(op)
        except (TypeError, ValueError):
            raise KernelError(f"ALU kernel: opcode {op!r} is not an integer opcode") from None
        imm = None if imm is None else int(imm)
        # The rules of the base ISA, or of the extension that has the opcode (check_config
        # then asks whether the config enables it).
        ext = () if alu_semantics(code) is not None else tuple(EXTENSIONS)
        violation = alu_violation(code, _use_imm(code, imm), imm or 0, ext)
        if violation is not None and alu_semantics(code, ext) is None:
            violation = alu_violation(code, _use_imm(code, imm), imm or 0)
        if violation is not None:
            raise KernelError(f"ALU kernel: {violation}")
        op = AluOp(code) if code in AluOp._value2member_map_ else code
        uops = tuple((d, s, 0) for d, s in _ints(uops, 2, "uop", "ALU"))
        loops = tuple((e, d, s, 0) for e, d, s in _ints(loops, 3, "loop", "ALU"))
        kernel = cls("alu", uops, loops, False, op, imm)
        kernel._check_common()
        return _remember(key, kernel)

    # ----------------------------------------------------------------- queries

    @property
    def kind(self) -> str:
        return "GEMM" if self.mode == "gemm" else f"ALU {alu_entry(self.alu_op).name}"

    @property
    def use_imm(self) -> bool:
        """ALU only: the instruction's ``use_imm`` (the immediate is the operand)."""
        return self.mode == "alu" and _use_imm(self.alu_op, self.imm)

    def iterations(self) -> tuple[int, int, tuple, tuple]:
        """``(iter_out, iter_in, out_factors, in_factors)`` by the loop mapping of
        reference 4.4 (factors are ``(dst, src, wgt)``)."""
        if self._iterations is None:        # a kernel is a value: mapped once
            object.__setattr__(self, "_iterations", self._map_loops())
        return self._iterations

    def _map_loops(self) -> tuple:
        unit = (1, (0, 0, 0))
        loops = [(lp[0], lp[1:]) for lp in self.loops]
        if len(loops) == 0:
            outer, inner = unit, unit
        elif len(loops) == 1:
            outer, inner = (loops[0], unit) if self.mode == "gemm" else (unit, loops[0])
        else:
            outer, inner = loops
        return outer[0], inner[0], outer[1], inner[1]

    def max_indices(self) -> tuple[int, int, int] | None:
        """The largest dst, src and wgt index the kernel touches (None if it runs no uop)."""
        n_out, n_in, f_out, f_in = self.iterations()
        if n_out == 0 or n_in == 0:
            return None
        return tuple(max(u[j] for u in self.uops) + (n_out - 1) * f_out[j] + (n_in - 1) * f_in[j]
                     for j in range(3))

    # ------------------------------------------------------------------- rules

    def _check_common(self):
        if not self.uops:
            raise KernelError(f"{self.kind} kernel: no micro-ops; a kernel needs at least one")
        if len(self.loops) > MAX_LOOPS:
            raise KernelError(f"{self.kind} kernel: {len(self.loops)} loops; at most "
                              f"{MAX_LOOPS} are allowed (they map to iter_out and iter_in)")
        for k, lp in enumerate(self.loops):
            if lp[0] > MAX_LOOP_EXTENT:
                raise KernelError(f"{self.kind} kernel: loop {k} extent {lp[0]} exceeds the "
                                  f"{LOOP_ITER_BITS}-bit iteration field (max {MAX_LOOP_EXTENT})")

    def _check_hazard(self):
        """No uop may write the acc entry written by either of the two uops before it,
        in execution order (p, q, k). The index is linear in (p, q), so pairs that start in
        the inner iterations {0, 1, 2, I-2, I-1} of p = 0 cover every distinct case."""
        n_out, n_in, f_out, f_in = self.iterations()
        dst = [u[0] for u in self.uops]
        n = len(dst)
        total = n_out * n_in * n
        qs = sorted({q for q in (0, 1, 2, n_in - 2, n_in - 1) if 0 <= q < n_in})
        if total and not self._hazard_at(dst, qs, n_in, f_out, f_in, total):
            return
        for q in qs:        # a hazard: the first one in iteration order, for the message
            for k in range(n):
                t = q * n + k
                a = dst[k] + q * f_in[0]
                for dist in (1, 2):
                    t2 = t + dist
                    if t2 >= total:
                        break
                    p2, rest = divmod(t2, n_in * n)
                    q2, k2 = divmod(rest, n)
                    if dst[k2] + p2 * f_out[0] + q2 * f_in[0] == a:
                        raise KernelError(
                            f"GEMM kernel: accumulate hazard: uop {k2} (dst_idx={dst[k2]}) at "
                            f"iteration (p={p2}, q={q2}) writes acc[{a}], which uop {k} "
                            f"(dst_idx={dst[k]}) at (p=0, q={q}) wrote {dist} step"
                            f"{'s' if dist > 1 else ''} earlier; consecutive GEMM uops must "
                            "write different accumulators (reference 3.4): reorder the uops or "
                            "loops, or pass check_hazard=False")

    @staticmethod
    def _hazard_at(dst, qs, n_in, f_out, f_in, total) -> bool:
        """Whether :meth:`_check_hazard` finds a hazard, quickly: a pair inside one pass
        over the uops is at the same (p, q), so it is a hazard for every q exactly when
        the uops' own dst indices repeat at distance 1 or 2; only the pairs that cross
        into the next inner iteration (from the last two uops) depend on q."""
        n = len(dst)
        if any(a == b for a, b in zip(dst, dst[1:])) or \
                any(a == b for a, b in zip(dst, dst[2:])):
            return True
        for q in qs:
            for k in range(max(0, n - 2), n):
                a = dst[k] + q * f_in[0]
                for dist in (1, 2):
                    t2 = q * n + k + dist
                    if k + dist < n:
                        continue                # inside the pass: checked above
                    if t2 >= total:
                        break
                    p2, rest = divmod(t2, n_in * n)
                    q2, k2 = divmod(rest, n)
                    if dst[k2] + p2 * f_out[0] + q2 * f_in[0] == a:
                        return True
        return False

    def check_config(self, config: VTAConfig) -> np.ndarray:
        """Check the kernel against a config and return its encoded uop words (uint32,
        read-only: remembered by kernel and config, :data:`_checked`).

        Raises
        ------
        KernelError
            If the kernel does not fit the uop SRAM or a uop field / loop factor does
            not fit its bits.
        SramRangeError
            If an index after the loop arithmetic reaches past an SRAM's depth.
        """
        key = (self, config)
        words = _checked.get(key)
        if words is None:
            words = self._check_config(config)
            words.flags.writeable = False
            if len(_checked) >= _CHECKED_SIZE:
                _checked.clear()
            _checked[key] = words
        return words

    def _check_config(self, config: VTAConfig) -> np.ndarray:
        """:meth:`check_config`, uncached."""
        isa = isa_for(config)
        if self.mode == "alu":
            violation = alu_violation(self.alu_op, self.use_imm, self.imm or 0, config)
            if violation is not None:
                raise KernelError(f"{self.kind} kernel: {violation} (config {config.name})")
        if self.size > config.uop_depth:
            raise KernelError(f"{self.kind} kernel: {self.size} micro-ops do not fit the uop "
                              f"buffer of {config.uop_depth} entries")
        fmt = isa.gemm if self.mode == "gemm" else isa.alu
        for k, lp in enumerate(self.loops):
            for name, value in zip(("dst", "src", "wgt"), lp[1:]):
                if self.mode == "alu" and name == "wgt":
                    continue
                f = fmt[f"{name}_factor_out"]
                if value > f.max:
                    raise KernelError(f"{self.kind} kernel: loop {k} {name}_factor={value} does "
                                      f"not fit the {f.width}-bit {name} factor field "
                                      f"(max {f.max}) of config {config.name}")
        try:
            words = isa.encode_uops(self.uops)
        except IsaError as e:
            k, (d, s, w) = next((k, u) for k, u in enumerate(self.uops)
                                if _uop_error(isa, u) is not None)
            raise KernelError(f"{self.kind} kernel: uop {k} (dst={d}, src={s}, wgt={w}): "
                              f"{e} in config {config.name}") from None
        top = self.max_indices()
        if top is not None:
            checks = [("dst", top[0], "accumulator", config.acc_depth)]
            if self.mode == "gemm" and not self.reset:
                checks += [("src", top[1], "input", config.inp_depth),
                           ("wgt", top[2], "weight", config.wgt_depth)]
            elif self.mode == "alu" and not self.use_imm:
                checks.append(("src", top[1], "accumulator", config.acc_depth))
            for name, value, buf, depth in checks:
                if value >= depth:
                    raise SramRangeError(
                        f"{self.kind} kernel: {name} index reaches {value} (largest uop "
                        f"{name}_idx plus the loop offsets), past the {buf} buffer depth "
                        f"{depth} of config {config.name}")
        return words


def _uop_error(isa, uop):
    """The IsaError encoding ``uop`` raises, or None."""
    try:
        isa.encode_uop(*uop)
    except IsaError as e:
        return e
    return None
