"""onnxruntime's fused integer kernels (CPU execution provider), formula by formula.

Plain numpy, exact: integer parts on int64, float parts in float32 in the order
onnxruntime's C++ evaluates them, one IEEE operation at a time (no fused
multiply-add), so the result does not depend on the host CPU. Every function
names the onnxruntime source it follows (paths in github.com/microsoft/onnxruntime).

Values are the *raw* tensor values (uint8 0..255 or int8 -128..127) and raw
zero points, as in the ONNX graph; outputs saturate to the same type.

Why not run onnxruntime itself: its u8s8 GEMM and convolution kernels on x86-64
CPUs without AVX-VNNI (``vpmaddubsw``) saturate the sum of two adjacent u8 x s8
products at 16 bits, so its answer depends on the CPU; and it fuses
int8-activation Conv / MatMul groups only on arm64 (``QDQIsInt8Allowed`` in
``core/optimizer/qdq_transformer/qdq_selector_action_transformer.h``). The
formulas here are what every CPU computes when nothing saturates (the
accumulation is exact in int32), which is what the kernels are meant to compute.
Three float kernels evaluate in a CPU-specific order (QLinearAdd, QLinearMul, the
logistic of QLinearSigmoid's table); they agree except within a hair of a
rounding tie, which :func:`near_tie` detects.
"""

from __future__ import annotations

import numpy as np

from .fixed_point import per_axis

__all__ = ["qrange", "quantize_linear", "dequantize_linear", "requantize_output",
           "conv_acc", "matmul_acc", "output_scale", "qlinear_add", "qlinear_mul",
           "qlinear_add_exact", "qlinear_mul_exact", "near_tie", "avg_pool",
           "avg_pool_out_size", "global_avg_pool", "softmax", "lookup_table", "apply_table",
           "logistic"]

_F = np.float32


def qrange(dtype) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def _sat(v, dtype):
    lo, hi = qrange(dtype)
    return np.clip(np.asarray(v, np.int64), lo, hi).astype(dtype)


def quantize_linear(x, scale, zero_point, dtype, axis=None):
    """QuantizeLinear: ``saturate(nearbyintf(x / scale) + zp)`` in float32.

    ``core/mlas/lib/quantize.cpp`` (MlasQuantizeLinear: divide, clamp to
    ``[qmin - zp, qmax - zp]``, round half to even, add zp).
    """
    x = np.asarray(x, _F)
    s = per_axis(np.asarray(scale, _F), x.ndim, axis)
    z = per_axis(np.asarray(zero_point, np.int64), x.ndim, axis)
    q = np.rint(np.clip((x / s).astype(_F), -2.0**31, 2.0**31 - 256)).astype(np.int64)
    return _sat(q + z, dtype)


def dequantize_linear(q, scale, zero_point, axis=None):
    """DequantizeLinear: ``float32(q - zp) * scale`` (one rounding: the product of a
    float32 and an integer below 2^24), ``core/providers/cpu/quantization/quantize_linear.cc``."""
    q = np.asarray(q)
    s = per_axis(np.asarray(scale, _F), q.ndim, axis)
    z = per_axis(np.asarray(zero_point, np.int64), q.ndim, axis)
    return ((q.astype(np.int64) - z).astype(_F) * s).astype(_F)


def requantize_output(acc, scale, zero_point, dtype, axis=None):
    """MlasRequantizeOutput (``core/mlas/lib/quantize.cpp``): ``float32(acc) * scale``,
    clamped to ``[qmin - zp, qmax - zp]``, rounded half to even (``cvtps2dq`` /
    ``fcvtns``), plus zp. ``scale`` per tensor or per channel along ``axis``."""
    acc = np.asarray(acc, np.int64)
    s = per_axis(np.asarray(scale, _F), acc.ndim, axis)
    lo, hi = qrange(dtype)
    f = (acc.astype(_F) * s).astype(_F)
    f = np.clip(f, _F(lo - int(zero_point)), _F(hi - int(zero_point)))
    return _sat(np.rint(f).astype(np.int64) + int(zero_point), dtype)


def output_scale(x_scale, w_scale, y_scale, alpha=1.0):
    """The requantization scale of QLinearConv / QLinearMatMul / QGemm:
    ``alpha * x_scale * w_scale[i] / y_scale`` evaluated left to right in float32
    (``core/providers/cpu/quantization/qlinearconv.cc``, ``quant_gemm.cc``
    ComputeOutputScale, ``matmul_integer_base.h``)."""
    w = np.asarray(w_scale, _F)
    s = (_F(alpha) * _F(x_scale)).astype(_F) if alpha != 1.0 else _F(x_scale)
    return ((s * w).astype(_F) / _F(y_scale)).astype(_F)


def conv_acc(x, x_zp, w, w_zp, bias=None, *, strides=(1, 1), pads=(0, 0, 0, 0),
             dilations=(1, 1), group=1):
    """The int32 accumulator of QLinearConv (NCHW, OIHW): ``sum((x - zx) (w - zw)) + b``,
    exact (the padding holds ``zx``). ``pads`` are (top, left, bottom, right)."""
    x = np.asarray(x, np.int64) - int(x_zp)
    w = np.asarray(w, np.int64)
    wz = np.asarray(w_zp, np.int64)
    w = w - (wz.reshape(-1, 1, 1, 1) if wz.ndim else wz)
    t, l, b, r = pads
    x = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (wd - (kw - 1) * dw - 1) // sw + 1
    og = o // group
    out = np.zeros((n, o, oh, ow), np.int64)
    for g in range(group):
        xg = x[:, g * cg:(g + 1) * cg]
        wg = w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if bias is not None:
        out += np.asarray(bias, np.int64).reshape(1, -1, 1, 1)
    return out


def matmul_acc(a, a_zp, b, b_zp, bias=None):
    """The int32 accumulator of QLinearMatMul / QGemm: ``(a - za) @ (b - zb) + c``
    (``b`` is (K, N), ``b_zp`` scalar or per column), exact."""
    a = np.asarray(a, np.int64) - int(a_zp)
    b = np.asarray(b, np.int64) - np.asarray(b_zp, np.int64)
    acc = a @ b
    if bias is not None:
        acc = acc + np.asarray(bias, np.int64)
    return acc


def qlinear_add(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp, dtype):
    """QLinearAdd, the portable formula (``core/mlas/lib/qladd.cpp``,
    MlasQLinearAddKernelRawHelper), every operation in float32:

        c = saturate(nearbyintf((sA * (a - zA) + sB * (b - zB)) / sC) + zC)

    onnxruntime's vectorized kernels compute the same sum differently: AVX2 and
    NEON with 22-bit fixed-point ratios ``sA/sC``, ``sB/sC`` (MlasQLinearAddKernelAvx2Helper,
    MlasCalcQLinearAddParameters), SSE2 with the ratios in float32. All agree except
    where the exact value is within about 2^-20 of a rounding tie; so which one a
    CPU runs matters only there (:func:`near_tie` finds those inputs).
    """
    fa = ((np.asarray(a, np.int64) - int(a_zp)).astype(_F) * _F(a_scale)).astype(_F)
    fb = ((np.asarray(b, np.int64) - int(b_zp)).astype(_F) * _F(b_scale)).astype(_F)
    r = ((fa + fb).astype(_F) / _F(c_scale)).astype(_F)
    return _sat(np.rint(r).astype(np.int64) + int(c_zp), dtype)


def qlinear_add_exact(a, a_scale, a_zp, b, b_scale, b_zp, c_scale):
    """The real value QLinearAdd rounds (float64, before the output zero point)."""
    return ((np.asarray(a, np.int64) - int(a_zp)) * float(np.float32(a_scale))
            + (np.asarray(b, np.int64) - int(b_zp)) * float(np.float32(b_scale))) \
        / float(np.float32(c_scale))


def qlinear_mul(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp, dtype):
    """QLinearMul (``core/mlas/lib/qlmul.cpp``): ``m = float32(sA * sB / sC)``;
    ``c = saturate(nearbyintf(float32((a - zA) * (b - zB)) * m) + zC)``."""
    m = ((_F(a_scale) * _F(b_scale)).astype(_F) / _F(c_scale)).astype(_F)
    fa = (np.asarray(a, np.int64) - int(a_zp)).astype(_F)
    fb = (np.asarray(b, np.int64) - int(b_zp)).astype(_F)
    r = ((fa * fb).astype(_F) * m).astype(_F)
    return _sat(np.rint(r).astype(np.int64) + int(c_zp), dtype)


def qlinear_mul_exact(a, a_scale, a_zp, b, b_scale, b_zp, c_scale):
    return ((np.asarray(a, np.int64) - int(a_zp)) * (np.asarray(b, np.int64) - int(b_zp))
            * float(np.float32(a_scale)) * float(np.float32(b_scale)) / float(np.float32(c_scale)))


def near_tie(exact, tol=2.0**-20):
    """Where a real value to be rounded lies within ``tol`` (relative, at least
    absolute) of a half-integer: the inputs on which onnxruntime's CPU-specific
    variants of a float kernel may round differently."""
    exact = np.asarray(exact, np.float64)
    frac = np.abs(exact - np.floor(exact) - 0.5)
    return frac <= tol * np.maximum(1.0, np.abs(exact))


def global_avg_pool(x, x_scale, x_zp, y_scale, y_zp, dtype):
    """QLinearGlobalAveragePool (NCHW, ``core/mlas/lib/qlgavgpool.cpp``): the exact
    integer sum of each channel minus ``zx * n``, requantized by MlasRequantizeOutput
    with ``scale = float32(sx / float32(sy * float32(n)))``."""
    x = np.asarray(x, np.int64)
    n = int(np.prod(x.shape[2:]))
    acc = x.sum(axis=tuple(range(2, x.ndim)), keepdims=True) - int(x_zp) * n
    scale = _F(_F(x_scale) / _F(_F(y_scale) * _F(n)))
    return requantize_output(acc, scale, y_zp, dtype)


def logistic(x):
    """1 / (1 + exp(-x)) in float32, rounded once from double (MlasComputeLogistic's
    polynomial is within an ulp of it; a table entry differs only if a value lands
    within an ulp of a rounding boundary of the output grid)."""
    x = np.asarray(x, np.float64)
    return (1.0 / (1.0 + np.exp(-x))).astype(_F)


def lookup_table(fn, x_scale, x_zp, y_scale, y_zp, dtype):
    """The 256-entry table of QLinearSigmoid / QLinearLeakyRelu / QLinearConcat's
    requantization (``contrib_ops/cpu/quantization/qlinear_lookup_table.cc``,
    QlinearBuildLookupTable): every input value dequantized (float32), ``fn``
    applied, quantized back with QuantizeLinear. Indexed by ``value - qmin``."""
    lo, hi = qrange(dtype)
    v = np.arange(lo, hi + 1, dtype=np.int64)
    f = dequantize_linear(v, x_scale, x_zp)
    return quantize_linear(fn(f), y_scale, y_zp, dtype)


def apply_table(x, table, dtype):
    lo, _ = qrange(dtype)
    return table[np.asarray(x, np.int64) - lo]


def avg_pool_out_size(size, kernel, stride, pad_begin, pad_end, ceil_mode=False):
    """One spatial output size of a pool (onnxruntime's PoolAttributes::SetOutputSize)."""
    span = size + pad_begin + pad_end - kernel
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def avg_pool(x, x_scale, x_zp, y_scale, y_zp, dtype, *, kernel, strides=(1, 1),
             pads=(0, 0, 0, 0), count_include_pad=False, ceil_mode=False):
    """QLinearAveragePool, 2-D NCHW (``contrib_ops/cpu/quantization/qlinear_pool.cc``):

        d = float32(sx * (x - zx))                 (every input, dequantize_array)
        s = d[h0, w0] + d[h0, w0 + 1] + ...        (float32, row by row in window order,
                                                    over the window's part inside the input)
        y = saturate(nearbyintf(s / count / sy + zy))   (float32 at each step)

    ``count`` is the window's size inside the input, or the whole kernel with
    ``count_include_pad``; the zero point is added before rounding, in the raw
    (uint8 or int8) domain. A kernel covering the whole unpadded input is
    QLinearGlobalAveragePool instead (onnxruntime's own fallback): integer sum.
    """
    x = np.asarray(x)
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = strides
    t, l, b, r = pads
    if (kh, kw) == (h, w) and not any(pads):
        return global_avg_pool(x, x_scale, x_zp, y_scale, y_zp, dtype)
    oh = avg_pool_out_size(h, kh, sh, t, b, ceil_mode)
    ow = avg_pool_out_size(w, kw, sw, l, r, ceil_mode)
    d = ((x.astype(np.int64) - int(x_zp)).astype(_F) * _F(x_scale)).astype(_F)
    # zeros around the input: adding +0.0 leaves a float32 sum unchanged, so summing
    # every kernel tap in row-major order is the window-order sum over the valid taps
    ph, pw = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    dp = np.zeros((n, c, max(ph, t + h), max(pw, l + w)), _F)
    dp[:, :, t:t + h, l:l + w] = d
    s = np.zeros((n, c, oh, ow), _F)
    for i in range(kh):
        for j in range(kw):
            s = (s + dp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]).astype(_F)
    if count_include_pad:
        cnt = np.full((oh, ow), kh * kw)
    else:
        h0 = np.arange(oh) * sh - t
        w0 = np.arange(ow) * sw - l
        rows = np.minimum(h0 + kh, h) - np.maximum(h0, 0)
        cols = np.minimum(w0 + kw, w) - np.maximum(w0, 0)
        cnt = rows[:, None] * cols[None, :]
    v = ((s / cnt.astype(_F)).astype(_F) / _F(y_scale)).astype(_F)
    v = (v + _F(int(y_zp))).astype(_F)
    return _sat(np.rint(v).astype(np.int64), dtype)


def softmax(x, x_scale, y_scale, y_zp, dtype, axis=-1):
    """QLinearSoftmax (``contrib_ops/cpu/quantization/qlinear_softmax.cc``), opset 13
    semantics along ``axis`` (``D`` elements), float table:

        shift = max(0, ln(FLT_MAX / D) - 5) / sx                     (double)
        T[i]  = float32(exp((i - 255 + shift) * sx)),  i = 0..255    (double exp)
        u     = x - max(x) + 255                                     (table index)
        S     = T[u_0] + T[u_1] + ...                (float32, in order along the axis)
        y     = nearbyintf(T[u] * floor(1.0f / sy) / S) + zy          (float32)

    ``floor(1 / sy)`` is 254, not 255, for ``sy = float32(1/255)``; the result
    saturates (onnxruntime 1.32 measured: 127, not a wrapped -128, for int8 when
    ``T[u] * 256 / S`` rounds to 256).
    """
    x = np.moveaxis(np.asarray(x, np.int64), axis, -1)
    d = x.shape[-1]
    shift = max(0.0, float(np.log(np.finfo(np.float32).max / d)) - 5.0) / float(_F(x_scale))
    i = np.arange(256, dtype=np.float64)
    table = np.exp((i - 255 + shift) * float(_F(x_scale))).astype(_F)
    # int8: onnxruntime indexes a rotated table by uint8(x + 127 - max): the same entry
    t = table[x - x.max(axis=-1, keepdims=True) + 255]
    s = np.cumsum(t, axis=-1, dtype=_F)[..., -1]   # float32, one addition after another
    ys = _F(np.floor(_F(1.0) / _F(y_scale)))
    q = np.rint(((t * ys).astype(_F) / s[..., None]).astype(_F)).astype(np.int64) + int(y_zp)
    return np.moveaxis(_sat(q, dtype), -1, axis)
