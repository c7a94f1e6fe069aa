"""Program builders shared by the instruction tests, the golden fixtures and the benchmarks.

Each ``build_<name>(rt, rng, ...)`` queues one program on a
:class:`~vtakit.runtime.Runtime` (without synchronizing) and returns a list of
:class:`Check`: the DRAM buffers to read back after the run and their expected
contents, computed independently with numpy. :data:`PROGRAMS` names the
variants that become golden fixtures.

The programs re-create the instruction tests of TVM's ``test_vta_insn.py``
(reference 6.1) and a tiled, double-buffered GEMM (two virtual threads, with
dependency tokens as TVM's coproc-sync pass inserts them, reference 4.5/4.7).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from vtakit.hw.fixedpoint import wrap_int32
from vtakit.hw.isa import AluOp, MemType
from vtakit.hw.spec import Unit
from vtakit.runtime import Buffer, UopKernel

__all__ = ["Check", "verify", "PROGRAMS", "PAD_CASES", "ALU_CASES", "alu_reference",
           "pack_inp", "pack_wgt", "unpack_out", "gemm_reference", "gemm_tiles",
           "build_runtime_array", "build_save_load_out", "build_padded_load", "build_gemm",
           "build_alu", "build_relu", "build_shift_and_scale", "build_gemm_tiled",
           "build_gemm_program", "pack_acc", "requant_ops"]

L, C, S = Unit.LOAD, Unit.COMPUTE, Unit.STORE


@dataclass
class Check:
    """A buffer to read back after the run and what it must hold."""

    name: str
    buf: Buffer
    expected: np.ndarray


def verify(rt, checks) -> None:
    """Download every checked buffer and compare it bit for bit with its expectation."""
    for c in checks:
        got = rt.download(c.buf, c.expected.dtype, c.expected.shape)
        if not np.array_equal(got, c.expected):
            bad = np.argwhere(got != c.expected)
            first = tuple(int(v) for v in bad[0])
            raise AssertionError(f"{c.name}: {len(bad)} of {c.expected.size} values differ; "
                                 f"first at {first}: got {got[first]}, expected "
                                 f"{c.expected[first]}")


def _upload(rt, array) -> Buffer:
    buf = rt.alloc(array.nbytes)
    rt.upload(buf, array)
    return buf


def _acc_data(rt, rng, rows, cols, lo, hi) -> np.ndarray:
    c = rt.config
    return rng.integers(lo, hi, size=(rows, cols, c.batch, c.block_out), dtype=np.int32)


def _copy_kernel(base, count, op=AluOp.SHR, imm=0) -> UopKernel:
    return UopKernel.alu(op, [(base, base)], [(count, 1, 1)], imm=imm)


def _compute_then_store(rt, sram_base, buf, elem_offset, x_size, y_size, x_stride):
    rt.dep_push(C, S)
    rt.dep_pop(C, S)
    rt.store_2d(sram_base, buf, elem_offset, x_size, y_size, x_stride)


# --------------------------------------------------------------- 6.1 re-creations

def build_runtime_array(rt, rng, rows=16, cols=16):
    """test_runtime_array: host -> device -> host; the program itself is empty."""
    c = rt.config
    x = rng.integers(-128, 128, size=(rows, cols, c.batch, c.block_out), dtype=np.int8)
    return [Check("array", _upload(rt, x), x)]


def build_save_load_out(rt, rng):
    """test_save_load_out: LOAD ACC, ALU SHR 0 (fills OUT), STORE; == input as int8."""
    x = _acc_data(rt, rng, 6, 6, 1, 10)
    xb, ob = _upload(rt, x), rt.alloc(x.size)
    rt.load_2d(MemType.ACC, 0, xb, 0, 6, 6, 6)
    rt.push_alu(_copy_kernel(0, 36))
    _compute_then_store(rt, 0, ob, 0, 6, 6, 6)
    return [Check("out", ob, x.astype(np.int8))]


#: Padded-load cases: (y_before, y_after, x_before, x_after) padding of a 3 x 5 ACC tile.
PAD_CASES = {"y_before": (2, 0, 0, 0), "y_after": (0, 2, 0, 0), "x_before": (0, 0, 2, 0),
             "x_after": (0, 0, 0, 2), "all": (1, 1, 1, 1)}


def build_padded_load(rt, rng, case="all"):
    """test_padded_load: a zero-padded ACC load, SHR 0, STORE == np.pad(input)."""
    yb, ya, xb_, xa = PAD_CASES[case]
    x = _acc_data(rt, rng, 3, 5, 0, 10)
    rows, cols = 3 + yb + ya, 5 + xb_ + xa
    src, ob = _upload(rt, x), rt.alloc(rows * cols * x[0, 0].size)
    rt.load_2d(MemType.ACC, 0, src, 0, 5, 3, 5, x_pad_before=xb_, y_pad_before=yb,
               x_pad_after=xa, y_pad_after=ya)
    rt.push_alu(_copy_kernel(0, rows * cols))
    _compute_then_store(rt, 0, ob, 0, cols, rows, cols)
    expected = np.pad(x, ((yb, ya), (xb_, xa), (0, 0), (0, 0))).astype(np.int8)
    return [Check("out", ob, expected)]


def alu_reference(op, a, b) -> np.ndarray:
    """The ALU on int32 lanes (semantics pins): b is an array or a sign-extended imm."""
    a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if op == AluOp.MIN:
        return np.minimum(a64, b64).astype(np.int32)
    if op == AluOp.MAX:
        return np.maximum(a64, b64).astype(np.int32)
    if op == AluOp.ADD:
        return wrap_int32(a64 + b64)
    k = int(b)
    return (a64 >> k).astype(np.int32) if k >= 0 else wrap_int32(a64 << -k)


#: ALU cases of test_alu: name -> (op, use a tensor operand, immediate range [lo, hi)).
ALU_CASES = {
    "shl_imm": (AluOp.SHR, False, (-4, 0)),     # a shift left is SHR by a negative amount
    "shr_imm": (AluOp.SHR, False, (1, 5)),
    "min_imm": (AluOp.MIN, False, (-8, 8)),
    "max_imm": (AluOp.MAX, False, (-8, 8)),
    "add_imm": (AluOp.ADD, False, (-8, 8)),
    "min_tensor": (AluOp.MIN, True, None),
    "max_tensor": (AluOp.MAX, True, None),
    "add_tensor": (AluOp.ADD, True, None),
}


def build_alu(rt, rng, case="add_tensor"):
    """test_alu: a (and b) int32 8x8 tiles in [-16, 16) -> one ALU op -> int8 store.

    The kernel is one uop under two loops (8 x 8), so both loop levels are used."""
    op, tensor, imm_range = ALU_CASES[case]
    a = _acc_data(rt, rng, 8, 8, -16, 16)
    n = 64
    ab, ob = _upload(rt, a), rt.alloc(a.size)
    rt.load_2d(MemType.ACC, 0, ab, 0, 8, 8, 8)
    if tensor:
        b = _acc_data(rt, rng, 8, 8, -16, 16)
        rt.load_2d(MemType.ACC, n, _upload(rt, b), 0, 8, 8, 8)
        kernel = UopKernel.alu(op, [(0, n)], [(8, 8, 8), (8, 1, 1)])
        expected = alu_reference(op, a, b)
    else:
        imm = int(rng.integers(*imm_range))
        kernel = UopKernel.alu(op, [(0, 0)], [(8, 8, 8), (8, 1, 1)], imm=imm)
        expected = alu_reference(op, a, imm)
    rt.push_alu(kernel)
    _compute_then_store(rt, 0, ob, 0, 8, 8, 8)
    return [Check("out", ob, expected.astype(np.int8))]


def build_relu(rt, rng):
    """test_relu: MAX 0 then MIN 127 on int32 in [-256, 256) == clip(a, 0, 127)."""
    a = _acc_data(rt, rng, 8, 10, -256, 256)
    ab, ob = _upload(rt, a), rt.alloc(a.size)
    rt.load_2d(MemType.ACC, 0, ab, 0, 10, 8, 10)
    rt.push_alu(_copy_kernel(0, 80, AluOp.MAX, 0))
    rt.push_alu(_copy_kernel(0, 80, AluOp.MIN, 127))
    _compute_then_store(rt, 0, ob, 0, 10, 8, 10)
    return [Check("out", ob, np.clip(a, 0, 127).astype(np.int8))]


def build_shift_and_scale(rt, rng):
    """test_shift_and_scale: ADD imm (shift in [0, 8)) then SHR imm (scale in [1, 5))."""
    a = _acc_data(rt, rng, 2, 8, -10, 10)
    shift, scale = int(rng.integers(0, 8)), int(rng.integers(1, 5))
    ab, ob = _upload(rt, a), rt.alloc(a.size)
    rt.load_2d(MemType.ACC, 0, ab, 0, 8, 2, 8)
    rt.push_alu(_copy_kernel(0, 16, AluOp.ADD, shift))
    rt.push_alu(_copy_kernel(0, 16, AluOp.SHR, scale))
    _compute_then_store(rt, 0, ob, 0, 8, 2, 8)
    return [Check("out", ob, ((a + shift) >> scale).astype(np.int8))]


# ------------------------------------------------------------------------ GEMM

def pack_inp(cfg, a) -> np.ndarray:
    """(M, K) int8 -> INP elements (M/B, K/BI, B, BI)."""
    m, k = a.shape
    return np.ascontiguousarray(
        a.reshape(m // cfg.batch, cfg.batch, k // cfg.block_in, cfg.block_in).transpose(0, 2, 1, 3))


def pack_wgt(cfg, w) -> np.ndarray:
    """(N, K) int8 -> WGT elements (N/BO, K/BI, BO, BI)."""
    n, k = w.shape
    return np.ascontiguousarray(
        w.reshape(n // cfg.block_out, cfg.block_out, k // cfg.block_in, cfg.block_in)
        .transpose(0, 2, 1, 3))


def pack_acc(cfg, c) -> np.ndarray:
    """(M, N) int32 -> ACC elements (M/B, N/BO, B, BO)."""
    m, n = c.shape
    return np.ascontiguousarray(
        c.reshape(m // cfg.batch, cfg.batch, n // cfg.block_out, cfg.block_out)
        .transpose(0, 2, 1, 3))


def unpack_out(cfg, o) -> np.ndarray:
    """OUT elements (M/B, N/BO, B, BO) -> (M, N)."""
    mo, no, b, bo = o.shape
    return o.transpose(0, 2, 1, 3).reshape(mo * b, no * bo)


def gemm_reference(a, w, bias, alu_ops) -> np.ndarray:
    """int8 (M, K) x int8 (N, K)^T (+ int32 bias) with int32 wrap-around, then the ALU
    ops in order, narrowed to int8 by truncation."""
    acc = a.astype(np.int64) @ w.astype(np.int64).T
    if bias is not None:
        acc = acc + bias
    acc = wrap_int32(acc)
    for op, imm in alu_ops:
        acc = alu_reference(op, acc, imm)
    return acc.astype(np.int8)


def gemm_tiles(cfg, m_o, k_o, n_o, vthreads, rows=32, cols=128):
    """Tile sizes (row blocks, column blocks) that divide the problem and fit one
    virtual thread's share of the input, weight and accumulator SRAMs."""
    inp, wgt, acc = (cfg.inp_depth // vthreads, cfg.wgt_depth // vthreads,
                     cfg.acc_depth // vthreads)
    nt = max(d for d in range(1, n_o + 1)
             if n_o % d == 0 and d <= max(1, cols // cfg.block_out) and d * k_o <= wgt)
    mt = max(d for d in range(1, m_o + 1)
             if m_o % d == 0 and d <= max(1, rows // cfg.batch) and d * k_o <= inp
             and d * nt <= acc)
    return mt, nt


def build_gemm_program(rt, a, w, bias=None, alu_ops=(), vthreads=2, tiles=None):
    """Queue a tiled GEMM ``out = alu_ops(a . w^T + bias)`` as int8; returns the output
    buffer and the packed expected result.

    Output tiles (mt x nt elements, the full K per tile) alternate between
    ``vthreads`` (1 or 2) virtual threads, each with its own part of every SRAM.
    Each tile runs load (INP, WGT) -> compute (bias LOAD ACC or reset GEMM, GEMM,
    ALU ops) -> store, with tokens as TVM's coproc-sync pass places them:
    l2g/g2s for every tile (RAW), and g2l/s2g for the WAR reuse of a thread's SRAM
    part by the tile ``vthreads`` later. The stream interleaves the threads'
    groups (all loads of a round, then all computes, then all stores), so one
    thread's loads overlap the other's GEMMs and stores.
    """
    cfg = rt.config
    m, k = a.shape
    n = w.shape[0]
    m_o, k_o, n_o = m // cfg.batch, k // cfg.block_in, n // cfg.block_out
    mt, nt = tiles or gemm_tiles(cfg, m_o, k_o, n_o, vthreads)
    ab = _upload(rt, pack_inp(cfg, a))
    wb = _upload(rt, pack_wgt(cfg, w))
    cb = _upload(rt, pack_acc(cfg, bias.astype(np.int32))) if bias is not None else None
    ob = rt.alloc(m * n)
    tile_list = [(i0, n0) for i0 in range(0, m_o, mt) for n0 in range(0, n_o, nt)]
    count = len(tile_list)
    parts = [(t * (cfg.inp_depth // vthreads), t * (cfg.wgt_depth // vthreads),
              t * (cfg.acc_depth // vthreads)) for t in range(vthreads)]
    kernels = []
    for inp0, wgt0, acc0 in parts:
        gemm = UopKernel.gemm([(acc0 + i * nt + j, inp0 + i * k_o, wgt0 + j * k_o)
                               for i in range(mt) for j in range(nt)], [(k_o, 0, 1, 1)])
        reset = UopKernel.gemm([(acc0, 0, 0)], [(mt, nt, 0, 0), (nt, 1, 0, 0)], reset=True)
        alus = [UopKernel.alu(op, [(acc0, acc0)], [(mt * nt, 1, 1)], imm=imm)
                for op, imm in alu_ops]
        kernels.append((gemm, reset, alus))

    def load(j):
        i0, n0 = tile_list[j]
        inp0, wgt0, _ = parts[j % vthreads]
        if j >= vthreads:
            rt.dep_pop(C, L)
        rt.load_2d(MemType.INP, inp0, ab, i0 * k_o, k_o, mt, k_o)
        rt.load_2d(MemType.WGT, wgt0, wb, n0 * k_o, k_o, nt, k_o)
        rt.dep_push(L, C)

    def compute(j):
        i0, n0 = tile_list[j]
        acc0 = parts[j % vthreads][2]
        gemm, reset, alus = kernels[j % vthreads]
        rt.dep_pop(L, C)
        if j >= vthreads:
            rt.dep_pop(S, C)
        if cb is not None:
            rt.load_2d(MemType.ACC, acc0, cb, i0 * n_o + n0, nt, mt, n_o)
        else:
            rt.push_gemm(reset)
        rt.push_gemm(gemm)
        for kern in alus:
            rt.push_alu(kern)
        if j + vthreads < count:
            rt.dep_push(C, L)
        rt.dep_push(C, S)

    def store(j):
        i0, n0 = tile_list[j]
        rt.dep_pop(C, S)
        rt.store_2d(parts[j % vthreads][2], ob, i0 * n_o + n0, nt, mt, n_o)
        if j + vthreads < count:
            rt.dep_push(S, C)

    for r in range(0, count, vthreads):
        group = range(r, min(r + vthreads, count))
        for phase in (load, compute, store):
            for j in group:
                phase(j)
    return ob


def build_gemm(rt, rng, schedule="default"):
    """test_gemm: x (4 row blocks, 2 K blocks), w (4 col blocks, 2 K blocks), int8 full
    range; y = clip((x . w^T) >> 8, 0, 127). ``default``: one thread, reset + GEMM
    kernels; ``smt``: the row blocks split over two virtual threads."""
    cfg = rt.config
    m, k, n = 4 * cfg.batch, 2 * cfg.block_in, 4 * cfg.block_out
    a = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
    w = rng.integers(-128, 128, size=(n, k), dtype=np.int8)
    ops = [(AluOp.SHR, 8), (AluOp.MAX, 0), (AluOp.MIN, 127)]
    vthreads, tiles = (1, (4, 4)) if schedule == "default" else (2, (2, 4))
    ob = build_gemm_program(rt, a, w, None, ops, vthreads, tiles)
    expected = pack_acc(cfg, gemm_reference(a, w, None, ops))
    return [Check("out", ob, expected)]


def requant_ops(k: int):
    """SHR by a shift that keeps a K-long int8 dot product mostly inside int8, then clip."""
    shift = 8 + max(0, (k.bit_length() - 1) // 2 - 1)
    return [(AluOp.SHR, shift), (AluOp.MIN, 127), (AluOp.MAX, -127)]


def build_gemm_tiled(rt, rng, m=128, k=128, n=128, tiles=None):
    """The tiled GEMM: int8 (m, k) x (n, k)^T + int32 bias (LOAD ACC), shift, clip to
    [-127, 127], int8 store; double-buffered over two virtual threads."""
    cfg = rt.config
    a = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
    w = rng.integers(-128, 128, size=(n, k), dtype=np.int8)
    bias = rng.integers(-(1 << 16), 1 << 16, size=(m, n), dtype=np.int32)
    ops = requant_ops(k)
    ob = build_gemm_program(rt, a, w, bias, ops, 2, tiles)
    return [Check("out", ob, pack_acc(cfg, gemm_reference(a, w, bias, ops)))]


#: Programs that become golden fixtures: name -> builder(rt, rng).
PROGRAMS = {
    "runtime_array": build_runtime_array,
    "save_load_out": build_save_load_out,
    **{f"padded_load_{case}": partial(build_padded_load, case=case) for case in PAD_CASES},
    "gemm_default": partial(build_gemm, schedule="default"),
    "gemm_smt": partial(build_gemm, schedule="smt"),
    **{f"alu_{case}": partial(build_alu, case=case) for case in ALU_CASES},
    "relu": build_relu,
    "shift_and_scale": build_shift_and_scale,
    "gemm_tiled": build_gemm_tiled,
}
