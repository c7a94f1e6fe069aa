"""The VTA vector ALU: one ``BATCH * BLOCK_OUT``-lane int32 operation, combinational.

Opcodes and their semantics are those of the ALU table
(:data:`vtakit.hw.isa.ALU_OPS`): MIN and MAX are signed, ADD wraps modulo
``2**ACC_WIDTH``, SHR shifts every lane by one signed amount ``k`` taken from the
immediate (``k >= 0``: arithmetic right shift by ``k``; ``k < 0``: left shift by
``-k`` keeping the low bits). The Compute module rejects every opcode and operand
the table does not allow in the config (:func:`alu_illegal`) before anything reaches
this block, so every input combination here is legal. A legal opcode of the table
that this block does not implement (:data:`IMPLEMENTED`) fails elaboration.

With the ``requant`` extension (and only then: a config without it gives exactly the
HW_VER 0.0.2 ALU) each lane also has one 32x32 -> 64-bit signed multiplier, shared by
SRDHM and MULSHR, a per-lane rounding shifter for RSHR (its amount is the lane of the
tensor operand) and a rounding shifter for the product (SRDHM's 31, MULSHR's ``k`` from
the instruction's immediate). These three take :data:`REQUANT_STAGES` (4) stages, so that
no stage holds more than one multiply, one adder level of the product or a shift and an
increment:

0. (the compute pipeline's S{W}) the forwarded operands enter the registered
   multipliers, four 17x17 signed partial products per lane (on the ECP5 a
   ``MULT18X18D`` each, its input registers: :class:`~vtakit.hw.gemm.Multiplier`);
1. the partial products are registered (the DSPs' output registers); RSHR's nudge is
   added to the operand;
2. the partial products are summed into the 64-bit product; RSHR shifts;
3. the product is shifted by ``k - 1`` and rounded (an increment, then a halving):
   ``late``, written by the compute module in S{W+3}.

The compute module issues such micro-ops one per cycle and holds a later micro-op that
reads one of their results before it is in reach (in the SRAM or its forwarding
registers: issued fewer than :data:`REQUANT_STAGES` cycles after it), and a base micro-op
issues :data:`REQUANT_STAGES` cycles after the last of a requant instruction
(``hw/compute.py``, :class:`~vtakit.hw.compute.RequantHazard`); the base opcodes stay
combinational in S{W} (``result``).

With the ``requant2`` extension (an alternative to ``requant``) each lane instead has the
per-lane parameter registers ``RM`` and ``RP`` and one REQ pipeline of
:data:`REQ_STAGES` (8) stages, again at most one adder, one shift or one multiplier stage
each (``rq`` of the spec: :func:`~vtakit.hw.fixedpoint.requantize_word`):

0. (S{W}) the bias add ``x = a + b``;
1. the left shift ``x << max(s, 0)`` (double rounding) into the registered multipliers,
   with ``RM`` as the other operand; REQ.M / REQ.P load ``RM`` / ``RP`` here, at the end
   of this stage, so that a REQ micro-op reads them as every earlier micro-op left them;
   the REQ micro-op takes its copy of ``RP``'s fields with it;
2. the partial products are registered;
3. they are summed into the 64-bit product;
4. the product is rounded with the lane's ``k`` (31 for double rounding, SRDHM's
   ``INT32_MIN * INT32_MIN`` saturation included; ``clip(31 - s, 1, 62)`` for single
   rounding): a shift by ``k - 1``, an increment, a halving;
5. the rounding shift's nudge and the zero point shifted left by the shift ``r``
   (``floor((p + nudge) / 2^r) + zp == floor((p + nudge + zp * 2^r) / 2^r)``): one add;
6. the shift by ``r``;
7. the clamp to ``[lo, hi]`` (int8 compares): ``late``, written in S{W+7}.

:func:`late_stages` gives the stage count of the config's late opcodes (4 or 8); the
compute module's hold, gap and late write follow it.
"""

from functools import reduce
from operator import or_

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
from .gemm import Multiplier
from .isa import (INT32_MAX, INT32_MIN, REQ_LOAD_M, REQ_LOAD_P, REQ_RUN, AluOp, AluTableError,
                  alu_opcode_bits, alu_ops)
from .spec import IMM_MAX, IMM_MIN, SHIFT_LIMIT

__all__ = ["VectorAlu", "SHIFT_BITS", "IMPLEMENTED", "REQUANT_OPS", "REQUANT_STAGES",
           "REQ_STAGES", "late_ops", "late_stages", "alu_illegal"]

#: Width of the signed shift amount (``-SHIFT_LIMIT..SHIFT_LIMIT``).
SHIFT_BITS = SHIFT_LIMIT.bit_length() + 1

#: The opcodes the lanes of :class:`VectorAlu` compute, each with the ISA extension whose
#: semantics its RTL has (None: a base opcode); a table entry at one of these codes with
#: another extension (or none) has no RTL.
IMPLEMENTED = {AluOp.MIN: None, AluOp.MAX: None, AluOp.ADD: None, AluOp.SHR: None,
               AluOp.SRDHM: "requant", AluOp.RSHR: "requant", AluOp.MULSHR: "requant",
               AluOp.REQ: "requant2"}

#: The opcodes that need the lane multiplier (generated only when one is legal).
REQUANT_OPS = (AluOp.SRDHM, AluOp.RSHR, AluOp.MULSHR)

#: Pipeline stages of a ``REQUANT_OPS`` micro-op's result (the base opcodes take one):
#: a micro-op issued fewer than this many cycles after one reads too early for its
#: result, and the compute module holds it when it depends on it (independent ones issue
#: one per cycle). The structure of :meth:`VectorAlu._requant_lane` fixes it (not a free
#: parameter).
REQUANT_STAGES = 4

#: Pipeline stages of a REQ micro-op's result (the ``requant2`` extension), as
#: ``REQUANT_STAGES`` for the ``requant`` opcodes; fixed by :meth:`VectorAlu._req_lane`.
REQ_STAGES = 8



def late_ops(config) -> tuple:
    """The opcodes legal in ``config`` whose result is ``VectorAlu.late`` (written
    :func:`late_stages` ``- 1`` stages after S{W}): SRDHM, RSHR, MULSHR with ``requant``,
    REQ with ``requant2``, none in the base ISA."""
    codes = {e.code for e in alu_ops(config)}
    return tuple(op for op in (*REQUANT_OPS, AluOp.REQ) if op in codes)


def late_stages(config) -> int:
    """The pipeline stages of the late opcodes' result in ``config``
    (:data:`REQUANT_STAGES` with ``requant``, :data:`REQ_STAGES` with ``requant2``); 1
    without either (the base opcodes' result is combinational in S{W})."""
    ops = late_ops(config)
    if not ops:
        return 1
    return REQ_STAGES if AluOp.REQ in ops else REQUANT_STAGES


def _check_implemented(config):
    missing = [str(e) for e in alu_ops(config)
               if e.code not in IMPLEMENTED or IMPLEMENTED[e.code] != e.extension]
    if missing:
        raise AluTableError(f"ALU opcode {', '.join(missing)} is legal in the ALU table "
                            f"(vtakit.hw.isa.ALU_OPS) but hw/alu.py has no RTL for it; "
                            f"implement it in VectorAlu or mark it base=False")


def alu_illegal(opcode, use_imm, imm, config=None):
    """The decoder rule, from the ALU table: true when an ALU instruction's ``alu_opcode``,
    ``use_imm`` and ``imm`` fields are no legal combination in ``config`` (None: the base
    ISA)."""
    ops = alu_ops(config)
    codes = [int(e.code) for e in ops]
    if codes == list(range(len(codes))):
        bad = opcode > codes[-1]
    else:
        bad = ~reduce(or_, [opcode == code for code in codes])
    for e in ops:
        rules = []
        if not e.tensor:
            rules.append(~use_imm)
        if not e.imm:
            rules.append(use_imm)
        lo, hi = e.imm_range
        if e.imm and (lo, hi) != (IMM_MIN, IMM_MAX):
            out = [imm > hi, imm < lo]
            rules.extend(out if not e.tensor else [use_imm & reduce(or_, out)])
        if e.tensor_imm is not None:      # the immediate is a third operand of use_imm=0
            lo, hi = e.tensor_imm
            rules.append(~use_imm & ((imm > hi) | (imm < lo)))
        if rules:
            bad = bad | ((opcode == e.code) & reduce(or_, rules))
    return bad


class VectorAlu(wiring.Component):
    """Lane-wise ``result = op(a, b)``.

    Parameters
    ----------
    config : VTAConfig
        Sizes every port.
    late : bool
        Build the extension's late opcodes (default); False: the base opcodes only (the
        ALU lane of :mod:`~vtakit.hw.compute_lane` with ``requant2``, whose REQ micro-ops
        use the compute module's REQ pipeline).

    Attributes
    ----------
    op : In(alu_opcode_bits(config))
        A legal opcode of the ALU table in the config (MIN, MAX, ADD, SHR; with the
        ``requant`` extension also SRDHM, RSHR, MULSHR; with ``requant2`` also REQ).
    a : In(acc_elem_bits)
        Destination operand, int32 lane ``j`` in bits ``[32*(j+1)-1 : 32*j]``.
    b : In(acc_elem_bits)
        Second operand of MIN/MAX/ADD (a tensor element or the broadcast immediate), the
        per-lane multiplier of SRDHM/MULSHR and the per-lane shift of RSHR.
    shift : In(signed(6))
        The low 6 bits of the immediate: SHR's amount ``k`` in ``-31..31``; read unsigned,
        MULSHR's ``k`` in ``1..62`` (the same for every lane); REQ's sub-operation in
        its low two bits (0: REQ, 1: REQ.M, 2: REQ.P).
    result : Out(acc_elem_bits)
        The base opcodes' result, combinational.
    late_en : In(1)
        Only with the ``requant`` or ``requant2`` extension: a late opcode (SRDHM, RSHR,
        MULSHR; REQ and its setup forms REQ.M and REQ.P) presents its inputs this cycle
        (the stages of ``late`` load only then).
    late : Out(acc_elem_bits)
        Only with an extension: the late opcode's result of the inputs presented with
        ``late_en`` ``late_stages(config) - 1`` cycles before (meaningless for REQ.M and
        REQ.P, which write no SRAM).
    """

    def __init__(self, config: VTAConfig, late: bool = True):
        _check_implemented(config)
        self._config = c = config
        self._late = late
        ports = {
            "op": In(alu_opcode_bits(c)),
            "a": In(c.acc_elem_bits),
            "b": In(c.acc_elem_bits),
            "shift": In(signed(SHIFT_BITS)),
            "result": Out(c.acc_elem_bits),
        }
        if late and late_ops(c):
            ports["late_en"] = In(1)
            ports["late"] = Out(c.acc_elem_bits)
        super().__init__(ports)

    def elaborate(self, platform):
        c = self._config
        m = Module()
        lanes = c.batch * c.block_out
        a = data.ArrayLayout(signed(c.acc_width), lanes)(self.a)
        b = data.ArrayLayout(signed(c.acc_width), lanes)(self.b)

        # The shift amounts are per instruction, so they are decoded once, not per lane.
        left = self.shift < 0
        right_amount = self.shift.as_unsigned()[:SHIFT_BITS - 1]
        left_amount = (-self.shift).as_unsigned()[:SHIFT_BITS - 1]

        requant = {e.code for e in alu_ops(c)} & set(REQUANT_OPS) if self._late else set()
        req = AluOp.REQ in late_ops(c) and self._late
        if requant and req:
            raise AluTableError("hw/alu.py builds the requant or the requant2 lanes, not both; "
                                "the config makes SRDHM, RSHR, MULSHR and REQ legal")
        if requant and requant != set(REQUANT_OPS):
            raise AluTableError(f"hw/alu.py builds SRDHM, RSHR and MULSHR together; the config "
                                f"makes only {', '.join(AluOp(o).name for o in sorted(requant))} "
                                f"legal")
        if requant:
            # The per-instruction inputs travel with the lanes: the opcode and the shift of
            # the product's rounding (``k - 1``: 30 for SRDHM, MULSHR's ``k - 1`` in 0..61).
            valid = [self.late_en]
            ops, ks = [self.op], [Mux(self.op == AluOp.SRDHM, 30,
                                      self.shift.as_unsigned() - 1)[:SHIFT_BITS]]
            for s in range(1, REQUANT_STAGES):
                v = Signal(name=f"requant_valid{s}")
                op_s = Signal.like(self.op, name=f"requant_op{s}")
                k_s = Signal(SHIFT_BITS, name=f"requant_k{s}")
                m.d.sync += v.eq(valid[-1])
                with m.If(valid[-1]):
                    m.d.sync += [op_s.eq(ops[-1]), k_s.eq(ks[-1])]
                valid.append(v)
                ops.append(op_s)
                ks.append(k_s)
            stages = (valid, ops, ks)
        if req:
            # REQ's control, shared by the lanes: the valid flags of stages 1..6 and the
            # sub-operation in stage 1 (only REQ itself goes on from there).
            req_valid = [self.late_en, Signal(name="req_valid1")]
            req_kind = Signal(2, name="req_kind1")
            m.d.sync += req_valid[1].eq(self.late_en)
            with m.If(self.late_en):
                m.d.sync += req_kind.eq(self.shift.as_unsigned()[:2])
            req_valid.append(Signal(name="req_valid2"))
            m.d.sync += req_valid[2].eq(req_valid[1] & (req_kind == REQ_RUN))
            for s in range(3, REQ_STAGES - 1):
                v = Signal(name=f"req_valid{s}")
                m.d.sync += v.eq(req_valid[-1])
                req_valid.append(v)
            req_stages = (req_valid, req_kind)

        out, late = [], []
        for j in range(lanes):
            x, y = a[j], b[j]
            shifted = Mux(left, (x << left_amount)[:c.acc_width], (x >> right_amount)[:c.acc_width])
            lane = Mux(self.op == AluOp.SHR, shifted,
                       Mux(self.op == AluOp.ADD, (x + y)[:c.acc_width],
                           Mux((x < y) ^ (self.op == AluOp.MAX), x, y)))
            out.append(lane[:c.acc_width])
            if requant:
                late.append(self._requant_lane(m, j, x, y, *stages))
            if req:
                late.append(self._req_lane(m, j, x, y, *req_stages))
        m.d.comb += self.result.eq(Cat(out))
        if requant or req:
            m.d.comb += self.late.eq(Cat(late))
        return m

    def _requant_lane(self, m, j, x, y, valid, ops, ks):
        """Lane ``j`` of SRDHM, RSHR and MULSHR (the ``requant`` extension) of the inputs
        presented ``REQUANT_STAGES - 1`` cycles before (``valid``, ``ops``, ``ks``: the
        ``late_en`` flag, the opcode and the rounding shift of each stage)."""
        w = self._config.acc_width
        half = w // 2

        def reg(stage, value, name, shape=None):
            r = Signal(shape if shape is not None else len(value), name=f"requant_{name}{j}")
            with m.If(valid[stage - 1]):
                m.d.sync += r.eq(value)
            return r

        # The 32x32 product from four 17x17 signed products (the low halves zero-extended)
        # in registered multipliers (an ECP5 MULT18X18D each, with its input and output
        # registers): operands registered at the end of stage 0, products at the end of 1.
        parts = {}
        xs = (Cat(x[:half], Const(0, 1)).as_signed(), x[half:].as_signed())
        ys = (Cat(y[:half], Const(0, 1)).as_signed(), y[half:].as_signed())
        for name, (xa, yb) in {"ll": (0, 0), "lh": (0, 1), "hl": (1, 0), "hh": (1, 1)}.items():
            mul = Multiplier(len(xs[xa]), len(ys[yb]))
            m.submodules[f"requant_mul{j}_{name}"] = mul
            m.d.comb += [mul.a.eq(xs[xa]), mul.b.eq(ys[yb]),
                         mul.en.eq(valid[0]), mul.en_product.eq(valid[1])]
            parts[name] = mul.p
        # stage 2: the partial products summed (ll and hh do not overlap: one adder left)
        prod = reg(3, (Cat(parts["ll"][:w], parts["hh"]).as_signed()
                       + ((parts["lh"] + parts["hl"]) << half))[:2 * w].as_signed(),
                   "prod", signed(2 * w))
        # SRDHM: gemmlowp's (ab + nudge) / 2^31 truncated equals floor((ab + 2^30) / 2^31)
        # for either sign of ab; only INT32_MIN * INT32_MIN leaves the int32 range.
        # MULSHR: floor((ab + 2^(k-1)) / 2^k), low 32 bits. Both are
        # (floor(ab / 2^(k-1)) + 1) >> 1 (k = 31 for SRDHM): shift, then a 33-bit increment.
        x1, y1 = reg(1, x, "x", signed(w)), reg(1, y, "y", signed(w))
        min_min = reg(3, reg(2, (x1 == INT32_MIN) & (y1 == INT32_MIN), "min_min"), "min_min_r")
        q = (prod >> ks[3])[:w + 1]
        rounded = ((q + 1) >> 1)[:w]
        product = Mux(min_min & (ops[3] == AluOp.SRDHM), INT32_MAX, rounded)
        # RSHR: round half away from zero = floor((x + 2^(e-1) - [x < 0]) / 2^e), e in
        # 1..31 (e > 31 acts as 31, e = 0 leaves x); e < 0 shifts left (0 past 31).
        # Stage 1 adds the nudge, stage 2 shifts.
        e = Mux(y1 > 31, 31, y1[:5])
        nudge = (Const(1, 32) << e)[1:] - (x1[w - 1] & (e != 0))
        nudged = reg(2, x1 + nudge, "rshr_sum", signed(w + 1))
        e2 = reg(2, e, "rshr_e", 5)
        left = reg(2, Mux(y1 < -31, 0, (x1 << (-y1)[:5])[:w]), "rshr_left", w)
        neg = reg(2, y1 < 0, "rshr_neg", 1)
        rshr = reg(3, Mux(neg, left, (nudged >> e2)[:w]), "rshr", w)
        return Mux(ops[3] == AluOp.RSHR, rshr, product)

    def _req_lane(self, m, j, x, y, valid, kind):
        """Lane ``j`` of REQ (the ``requant2`` extension): its parameter registers ``RM``
        and ``RP``, loaded by REQ.M and REQ.P in stage 1, and ``rq(x + y, RM, RP)`` of the
        inputs presented ``REQ_STAGES - 1`` cycles before (``valid``: the flags of stages
        0..6, stage 0 being ``late_en``; ``kind``: the sub-operation in stage 1)."""
        w = self._config.acc_width
        half = w // 2
        run1 = valid[1] & (kind == REQ_RUN)     # a REQ in stage 1 (REQ.M/P stop there)
        enable = [valid[0], run1] + valid[2:]   # enable[s]: load the registers of stage s+1

        def reg(stage, value, name, shape=None):
            """``value`` of stage ``stage - 1`` registered into stage ``stage``."""
            r = Signal(shape if shape is not None else len(value), name=f"req_{name}{j}")
            with m.If(enable[stage - 1]):
                m.d.sync += r.eq(value)
            return r

        # stage 0 (S{W}): the bias add (wraps), and the operand of a setup micro-op
        x1 = reg(1, (x + y)[:w], "x", signed(w))
        b1 = reg(1, y, "b", signed(w))

        # stage 1: the parameter registers. RP is kept decoded: the left shift l, the
        # product's rounding shift k - 1, the rounding shift r, double rounding, zp, lo, hi.
        rm = Signal(signed(w), name=f"req_rm{j}")
        rp_l = Signal(5, name=f"req_rp_l{j}")
        rp_k = Signal(6, name=f"req_rp_k{j}")
        rp_r = Signal(5, name=f"req_rp_r{j}")
        rp_double = Signal(name=f"req_rp_double{j}")
        rp_zp = Signal(signed(8), name=f"req_rp_zp{j}")
        rp_lo = Signal(signed(8), name=f"req_rp_lo{j}")
        rp_hi = Signal(signed(8), name=f"req_rp_hi{j}")
        with m.If(valid[1] & (kind == REQ_LOAD_M)):
            m.d.sync += rm.eq(b1)
        with m.If(valid[1] & (kind == REQ_LOAD_P)):
            s, single = b1[0:6].as_signed(), b1[6]
            # single: k = clip(31 - s, 1, 62), so k - 1 = clip(30 - s, 0, 61); double: 31
            k_single = Mux(s == 31, 0, Mux(s == -32, 61, (30 - s)[:6]))
            # double: l = max(s, 0); r = max(-s, 0), 32 acting as 31
            m.d.sync += [
                rp_l.eq(Mux(single | (s < 0), 0, s[:5])),
                rp_k.eq(Mux(single, k_single, 30)),
                rp_r.eq(Mux(single | (s >= 0), 0, Mux(s == -32, 31, (-s)[:5]))),
                rp_double.eq(~single),
                rp_zp.eq(b1[8:16]), rp_lo.eq(b1[16:24]), rp_hi.eq(b1[24:32]),
            ]
        # the left shift (keeping the low 32 bits) into the registered multipliers: the
        # 32x32 product from four 17x17 signed products (the low halves zero-extended), an
        # ECP5 MULT18X18D each (operands registered at the end of stage 1, products at
        # the end of stage 2)
        xs = (x1 << rp_l)[:w]
        parts = {}
        xh = (Cat(xs[:half], Const(0, 1)).as_signed(), xs[half:].as_signed())
        mh = (Cat(rm[:half], Const(0, 1)).as_signed(), rm[half:].as_signed())
        for name, (xa, mb) in {"ll": (0, 0), "lh": (0, 1), "hl": (1, 0), "hh": (1, 1)}.items():
            mul = Multiplier(len(xh[xa]), len(mh[mb]))
            m.submodules[f"req_mul{j}_{name}"] = mul
            m.d.comb += [mul.a.eq(xh[xa]), mul.b.eq(mh[mb]),
                         mul.en.eq(enable[1]), mul.en_product.eq(enable[2])]
            parts[name] = mul.p
        # REQ's copy of the parameters, carried to the stage that uses each
        k = reg(2, rp_k, "k")
        r = reg(2, rp_r, "r")
        double = reg(2, rp_double, "double")
        zp = reg(2, rp_zp, "zp", signed(8))
        lo = reg(2, rp_lo, "lo", signed(8))
        hi = reg(2, rp_hi, "hi", signed(8))

        # stage 3: the partial products summed (ll and hh do not overlap)
        prod = reg(4, (Cat(parts["ll"][:w], parts["hh"]).as_signed()
                       + ((parts["lh"] + parts["hl"]) << half))[:2 * w].as_signed(),
                   "prod", signed(2 * w))
        k, r, double = reg(3, k, "k_3"), reg(3, r, "r_3"), reg(3, double, "double_3")
        zp, lo, hi = (reg(3, zp, "zp_3", signed(8)), reg(3, lo, "lo_3", signed(8)),
                      reg(3, hi, "hi_3", signed(8)))
        k, r, double = reg(4, k, "k_4"), reg(4, r, "r_4"), reg(4, double, "double_4")
        zp, lo, hi = (reg(4, zp, "zp_4", signed(8)), reg(4, lo, "lo_4", signed(8)),
                      reg(4, hi, "hi_4", signed(8)))

        # stage 4: the product's rounding, (floor(ab / 2^(k-1)) + 1) >> 1 (SRDHM for k =
        # 31, MULSHR's single rounding otherwise), low 32 bits; only INT32_MIN * INT32_MIN
        # = 2^62 leaves the int32 range with double rounding: SRDHM saturates it.
        q = (prod >> k)[:w + 1]
        rounded = ((q + 1) >> 1)[:w]
        p = reg(5, Mux(double & (prod == 1 << (2 * w - 2)), INT32_MAX, rounded), "p", signed(w))
        # the nudge of the rounding shift (round half away from zero: 2^(r-1), less one
        # for p < 0; none for r = 0) and the zero point times 2^r: disjoint bits
        zp_r = zp << r
        c_pos = reg(5, zp_r | (Const(1, w) << r)[1:w], "c_pos", signed(w + 8))
        c_neg = reg(5, zp_r | ((Const(1, w) << r) - 1)[1:w], "c_neg", signed(w + 8))
        r, lo, hi = reg(5, r, "r_5"), reg(5, lo, "lo_5", signed(8)), reg(5, hi, "hi_5", signed(8))

        # stage 5: p + nudge + zp * 2^r (exact: |.| < 2^39)
        n = reg(6, p + Mux(p < 0, c_neg, c_pos), "n", signed(w + 9))
        r, lo, hi = reg(6, r, "r_6"), reg(6, lo, "lo_6", signed(8)), reg(6, hi, "hi_6", signed(8))

        # stage 6: the shift, y = wrap32(rounding_shift(p, r) + zp)
        y_ = reg(7, (n >> r)[:w], "y", signed(w))
        lo, hi = reg(7, lo, "lo_7", signed(8)), reg(7, hi, "hi_7", signed(8))

        # stage 7: min(max(y, lo), hi) with int8 lo, hi: above 127 it is hi, below -128
        # min(lo, hi), else the int8 compares
        above = ~y_[w - 1] & y_[7:w - 1].any()
        below = y_[w - 1] & ~y_[7:w - 1].all()
        y8 = y_[:8].as_signed()
        t = Mux(y8 < lo, lo, y8)
        clamped = Mux(above, hi, Mux(below, Mux(lo > hi, hi, lo), Mux(t > hi, hi, t)))
        return Cat(clamped, clamped[7].replicate(w - 8))
