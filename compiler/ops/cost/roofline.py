"""The roofline of a VTA layer: the fewest cycles its config allows, whatever the schedule.

Three bounds, each a count of work at the hardware's peak rate (``B``, ``BI``, ``BO``:
the config's BATCH, BLOCK_IN, BLOCK_OUT; ``bus``: bytes per DRAM beat):

* **mac**: GEMM micro-ops, one per cycle, each ``B x BI x BO`` multiply-accumulates.
  A layer can use only the lanes its packed layout gives it (channels padded to whole
  blocks, batch to whole ``B``), so the bound counts the micro-ops that layout forces,
  not ``MACs / (B*BI*BO)``. Per output vector (one acc element: ``B x BO`` outputs):

  - convolution / dense (groups of whole blocks): ``ceil(Cg/BI) * taps``, ``Cg``
    the input channels per group (a 3-channel stem uses 3 of ``BI`` lanes) and
    ``taps`` the kernel positions of the output's window inside the input (``KH * KW``
    away from the border; taps that only read padding multiply zeros and need no
    micro-op);
  - depthwise and other block-diagonal grouped convolutions: ``taps`` (each
    micro-op does ``BI x BO`` MACs of which ``BO x Cg`` are useful: 1/BI for depthwise);
    average pooling and element-wise adds run this way (an all-ones or identity
    weight tile), an int8 residual adds one micro-op per output vector;
  - max pooling: int8 data reaches the accumulators only through the GEMM core, so
    one identity micro-op per input vector a window covers.

  ``lanes`` reports what fraction of the micro-ops' lanes do useful MACs.
* **alu**: ALU micro-ops, one per cycle, ``B x BO`` lanes each: per output vector, the
  epilogue's requantize shift, clip low and clip high (each when the layer has it),
  with the ALU extension ``"requant"`` the exact requantize's passes (one per
  per-channel row: SRDHM and RSHR, or MULSHR) and the output zero point's ADD, one ADD
  per border accumulator of a padding with a non-zero value corrected on the ALU
  (none with ``"requant2"``, whose REQ pass reads the border's bias + correction rows),
  and one SHR pass per byte plane after the first to store an int32 result; a fused
  residual add's passes (left shift, offset ADD, shift, clip: each when it has it);
  for pools, the window reduction and, for an average rounded on VTA, its rounding ADD and SHR. The
  reduction is a tree of two-operand MAX or ADD micro-ops whose leaves are the
  ``covered`` input vectors the windows read (padding adds nothing) and whose roots
  are the ``outputs``; overlapping windows may share subtrees (a separable pool does),
  so the bound is what any such tree needs: every micro-op merges two values into one
  and only outputs may stay unmerged, so ``covered - outputs`` micro-ops, and at least
  one per output whose window holds two or more inputs (for windows that do not
  overlap this is ``taps - 1`` per output, ``taps`` the window's positions inside the
  input). Plus one micro-op per accumulator a GEMM starts
  from: GEMM only accumulates, so every accumulator it writes is first set (a reset
  micro-op, or the ALU MIN that starts it from the bias, ``Epilogue.init``; a LOAD ACC
  would take ``B x BO x 4`` bytes of beats instead):
  one per output vector of a convolution or dense layer, one per input vector a max
  pool copies in, two per output vector of TFLite's exact ADD (one per operand). An
  int32 residual is read into the accumulators by the compute module (LOAD ACC): its
  beats count here instead of the reset. The bias costs nothing beyond that micro-op
  (the MIN init carries it).
* **dram**: bytes moved once each, in the packed layouts the kernel reads and writes
  (the plan's operands: data, weights, bias, residual, output planes), at one bus
  beat per cycle per direction (the design has one read and one write master), so
  ``max(read beats, write beats)``. Instructions and micro-ops are not counted.

GEMM and ALU micro-ops issue from the one compute module, so the compute bound is
their sum. With ``COMPUTE_OVERLAP`` (:attr:`Roofline.two_lanes`) an ALU micro-op may
run in the ALU lane beside a GEMM, one micro-op per cycle in each lane, GEMMs only in
their own: the compute bound is ``max(mac, ceil((mac + alu) / 2))``. The layer's
roofline is ``max(compute, dram)``; the binding bound (:attr:`Roofline.kind`) is
``"dram"`` when the DRAM bound is the larger, else the larger of ``"mac"`` and
``"alu"``. Every bound is work the layer cannot avoid on this
config, so a measured or predicted cycle count below the roofline is a bug (the tests
check the event model of :mod:`.perfmodel` on the demo CNN and DS-CNN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..layout import ceil_div
from .geometry import covered_positions

__all__ = ["Roofline", "plan_roofline", "covered_positions", "conv_roofline", "pool_roofline",
           "add_roofline", "rescaled_add_roofline"]


@dataclass(frozen=True)
class Roofline:
    """The bounds of one layer (cycles, except the byte counts and ``lanes``)."""

    mac: int                 # GEMM micro-ops the packed layout forces
    alu: int                 # ALU micro-ops (and compute-module LOAD ACC beats)
    dram: int                # max(read beats, write beats)
    read_bytes: int
    write_bytes: int
    macs: int = 0            # useful multiply-accumulates (0 for max pooling)
    lanes: float | None = None   # macs / (mac x B x BI x BO)
    two_lanes: bool = False  # COMPUTE_OVERLAP: ALU micro-ops may run beside the GEMMs

    @property
    def compute(self) -> int:
        """The compute module's bound: ``mac + alu``, with two lanes
        ``max(mac, ceil((mac + alu) / 2))``."""
        if self.two_lanes:
            return max(self.mac, ceil_div(self.mac + self.alu, 2))
        return self.mac + self.alu

    @property
    def cycles(self) -> int:
        """The roofline: ``max(compute, dram)``."""
        return max(self.compute, self.dram)

    @property
    def kind(self) -> str:
        """The binding bound: ``"dram"``, ``"mac"`` or ``"alu"``."""
        if self.dram > self.compute:
            return "dram"
        return "mac" if self.mac >= self.alu else "alu"


def _dram(plan, config):
    bus = config.bus_bytes
    ops = plan.operands
    rd = sum(op.nbytes for n, op in ops.items() if n != "out")
    wr = ops["out"].nbytes
    beats = lambda names: sum(ceil_div(ops[n].nbytes, bus) for n in names)  # noqa: E731
    dram = max(beats([n for n in ops if n != "out"]), beats(["out"]))
    return dram, rd, wr


def _epilogue_alu(epi) -> int:
    """ALU micro-ops per output vector the epilogue's arithmetic needs."""
    if epi.out_dtype == "int32":
        return epi.planes - 1
    if epi.requant is not None and epi.requant.extension == "requant2":
        rq = 1          # one REQ pass (the block's two setup micro-ops are not per vector)
    else:
        rq = 0 if epi.requant is None else epi.rows + bool(epi.requant.zero_point)
    # the fused add's emitted passes (its offset may ride on the MIN start: Epilogue.fold)
    add = 0 if epi.add is None else sum(map(len, epi.stages()[1:]))
    return int(bool(epi.shift)) + (epi.lo is not None) + (epi.hi is not None) + rq + add


def conv_roofline(plan, config) -> Roofline:
    n, c, h, w = plan.x_shape
    o, cg, kh, kw = plan.w_shape
    b, bi, bo = config.batch, config.block_in, config.block_out
    (sh, sw), (t, l, _, _) = plan.stride, plan.padding
    taps = (int(covered_positions(h, kh, sh, t, plan.oh)[0].sum())
            * int(covered_positions(w, kw, sw, l, plan.ow)[0].sum()))   # over all outputs
    nb, ob = ceil_div(n, b), ceil_div(o, bo)
    vectors = nb * ob * plan.oh * plan.ow
    mac = nb * ob * taps * (1 if plan.problem.diag else ceil_div(cg, bi))
    epi = plan.epilogue
    macs = n * o * cg * taps
    if epi.residual == "int8":
        mac += vectors
        macs += n * o * plan.oh * plan.ow
    # border ADDs, unless the REQ pass reads bias + correction rows (folded_border)
    alu = vectors * _epilogue_alu(epi) + plan.problem.border_vectors * (
        not getattr(plan, "folded_border", False))
    dram, rd, wr = _dram(plan, config)
    if epi.residual == "int32":
        alu += ceil_div(plan.operands["residual"].nbytes, config.bus_bytes)
    else:
        alu += vectors                       # reset: GEMM accumulates onto zeros
    return Roofline(mac, alu, dram, rd, wr, macs, macs / (mac * b * bi * bo),
                    two_lanes=bool(config.compute_overlap))


def pool_roofline(plan, config) -> Roofline:
    n, c, h, w = plan.x_shape
    (kh, kw), (sh, sw), (t, l, _, _) = plan.kernel, plan.stride, plan.padding
    taps_h, rows = covered_positions(h, kh, sh, t, plan.oh)
    taps_w, cols = covered_positions(w, kw, sw, l, plan.ow)
    blocks = plan.nb * plan.cb
    mac = blocks * rows * cols
    vectors = blocks * plan.oh * plan.ow
    multi = blocks * int((np.outer(taps_h, taps_w) > 1).sum())     # outputs of 2+ inputs
    alu = mac + max(mac - vectors, multi)                           # reset, reduce
    if plan.kind == "avg":
        alu += vectors * (plan.planes - 1 if plan.host_divide else 2)
    dram, rd, wr = _dram(plan, config)
    return Roofline(mac, alu, dram, rd, wr, two_lanes=bool(config.compute_overlap))


def add_roofline(plan, config) -> Roofline:
    vectors = plan.elements
    dram, rd, wr = _dram(plan, config)
    return Roofline(0, vectors * (1 + _epilogue_alu(plan.epilogue)), dram, rd, wr,
                    two_lanes=bool(config.compute_overlap))


def rescaled_add_roofline(plan, config) -> Roofline:
    """TFLite's exact ADD: two identity micro-ops per output vector (one per operand) and
    the ALU passes: zero point, shift and requantize of each operand, the sum, the
    output's requantize and clip, and the two resets the identity GEMMs start from."""
    vectors = plan.elements
    per = sum(2 + rq.rows for rq in plan.rescale) + 1 + _epilogue_alu(plan.epilogue) + 2
    dram, rd, wr = _dram(plan, config)
    return Roofline(2 * vectors, vectors * per, dram, rd, wr,
                    two_lanes=bool(config.compute_overlap))


def plan_roofline(plan) -> Roofline | None:
    """The :class:`Roofline` of a planned layer (its :meth:`roofline`: conv2d, dense, pool
    and add plans of the operator library answer one); None for a plan of another kind."""
    roofline = getattr(plan, "roofline", None)
    return roofline() if roofline is not None else None
