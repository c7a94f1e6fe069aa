"""The compiler half of the ISA extension ``"requant"``: TFLite's exact requantization as
a VTA epilogue (SRDHM, RSHR, MULSHR by per-channel rows) and TFLite's exact ADD, the
border rows of a non-zero padding, checked against the numpy
TFLite arithmetic of :mod:`vtakit.compiler.quant.fixed_point` (itself checked against
LiteRT) and, for a whole model, against LiteRT's reference kernels."""

from pathlib import Path

import numpy as np
import pytest

from vtakit.compiler.ops.conv2d import plan_conv2d
from vtakit.compiler.ops.dense import plan_dense
from vtakit.compiler.ops.epilogue import EpilogueError, Requant
from vtakit.compiler.quant import fixed_point as fp
from vtakit.compiler.ops.reference import group_conv2d_ref
from vtakit.hw.config import load_config
from vtakit.runtime import Runtime
from vtakit.sim import open_device

from litert_check import assert_equals_litert, compile_whole_on_vta

DATA = Path(__file__).parent / "data" / "mltk"
TINY_RQ = load_config("tiny").replace(extensions=("requant",))


def _tflite(acc, scale, zp, single):
    """TFLite's requantize (axis 1), clip to int8."""
    y = fp.requantize_tflite(acc, scale, zp, axis=1, single_rounding=single)
    return np.clip(y.astype(np.int64), -128, 127).astype(np.int8)


def _requant(scale, zp, channels, single):
    m, s = fp.quantize_multiplier(np.broadcast_to(scale, (channels,)), single_rounding=single)
    return Requant.make(m, s, zp, single_rounding=single)


def test_requant_rows():
    m, s = np.array([1 << 30, 3 << 29, 0]), np.array([2, -7, 0])
    rq, rows = Requant.make(m, s, -5, single_rounding=False)
    assert (rq.rounding, rq.left, rq.zero_point, rq.rows) == ("double", True, -5, 3)
    np.testing.assert_array_equal(rows, [[-2, 0, 0], m, [0, 7, 0]])
    rq, rows = Requant.make(m, [2, 0, 0], 0, single_rounding=False)   # no right shift
    assert (rq.left, rq.right, rq.rows) == (True, False, 2)
    rq, rows = Requant.make(m, [-3, -3, 9], 0, single_rounding=True)
    assert (rq.rounding, rq.k, rq.rows) == ("single", 34, 1)      # m = 0 takes any shift
    np.testing.assert_array_equal(rows, [m])
    with pytest.raises(EpilogueError, match="per-channel shifts"):
        Requant.make(m, [-3, -4, 0], 0, single_rounding=True)
    with pytest.raises(EpilogueError, match="zero point 40000"):
        Requant.make(m, s, 40000, single_rounding=False)


def test_requant_needs_the_extension():
    rq, _ = _requant(0.01, 0, 16, False)
    with pytest.raises(EpilogueError, match=r"EXTENSIONS \[\] \(add \"requant\"\)"):
        plan_conv2d(load_config("tiny"), (1, 16, 4, 4), (16, 16, 3, 3), bias=True,
                    requant=rq, clip=(-128, 127))


@pytest.mark.parametrize("groups,single", [(1, False), (16, False), (1, True)])
def test_conv_requant_epilogue_equals_tflite(groups, single):
    rng = np.random.default_rng(groups + single)
    c, o = 16, 24 if groups == 1 else 16
    x = rng.integers(-128, 128, (1, c, 6, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (o, c // groups, 3, 3), dtype=np.int8)
    bias = rng.integers(-5000, 5000, o).astype(np.int32)
    # per-channel scales around 2^-8, one above 1 (a left shift first) unless single
    scale = (rng.uniform(1, 2, o) * 2.0 ** rng.integers(-14, -6, o)) if not single else \
        rng.uniform(0.5, 1, o) * 2.0 ** -9
    if not single:
        scale[3] = 3.7
    rq, rows = _requant(scale, -3, o, single)
    plan = plan_conv2d(TINY_RQ, x.shape, w.shape, 1, 1, groups=groups, bias=True,
                       requant=rq, clip=(-128, 127))
    rt = Runtime(open_device("behavioral", TINY_RQ))
    out, _ = plan.run(rt, plan.pack(x, w, bias, requant=rows))
    acc = fp.wrap_int32(group_conv2d_ref(x, w, 1, 1, groups).astype(np.int64) + bias[:, None, None])
    np.testing.assert_array_equal(plan.unpack(out), _tflite(acc, scale, -3, single))
    assert plan.inspect()["instructions"] > 0


def test_dense_single_rounding_equals_tflite():
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (3, 40), dtype=np.int8)
    w = rng.integers(-128, 128, (20, 40), dtype=np.int8)
    bias = rng.integers(-1 << 14, 1 << 14, 20).astype(np.int32)
    scale = 0.00123
    rq, rows = _requant(scale, 7, 20, True)
    plan = plan_dense(TINY_RQ, x.shape, w.shape, bias=True, requant=rq, clip=(-128, 127))
    rt = Runtime(open_device("behavioral", TINY_RQ))
    out, _ = plan.run(rt, plan.pack(x, w, bias, requant=rows))
    acc = fp.wrap_int32(x.astype(np.int64) @ w.T.astype(np.int64) + bias)
    np.testing.assert_array_equal(plan.unpack(out), _tflite(acc, scale, 7, True))


def _whole_on_vta_equals_litert(name, n, n_layers=None):
    """With the extension no conv/dense layer requantizes on the host, and the compiled
    model equals LiteRT's reference kernels bit for bit on ``n`` inputs."""
    path = DATA / f"{name}.tflite"
    config = load_config("default").replace(extensions=("requant",))
    exe, layers = compile_whole_on_vta(path, config, ("conv2d", "dense", "add"), "requant")
    assert n_layers in (None, len(layers))
    assert_equals_litert(exe, path, n)


def test_keyword_spotting_whole_on_vta_equals_litert():
    """DS-CNN: 5 conv, 4 depthwise, 1 dense layer."""
    _whole_on_vta_equals_litert("keyword_spotting", 2, 10)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["anomaly_detection", "keyword_spotting",
                                  "image_classification", "visual_wake_words"])
def test_mlperf_tiny_whole_on_vta_equals_litert(name):
    _whole_on_vta_equals_litert(name, 8)


def test_conv_requant_on_verilator_equals_behavioral():
    """Small conv (SRDHM, RSHR), dense (MULSHR) and TFLite ADD layers (tiny + requant) on
    the Verilator RTL and the behavioral model, bit for bit against TFLite's arithmetic."""
    rng = np.random.default_rng(11)
    x = rng.integers(-128, 128, (1, 8, 5, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 8, 3, 3), dtype=np.int8)
    bias = rng.integers(-3000, 3000, 16).astype(np.int32)
    scale = rng.uniform(1, 2, 16) * 2.0 ** rng.integers(-14, -7, 16)
    scale[0] = 2.5                                   # a left shift row too
    rq, rows = _requant(scale, 5, 16, False)
    plan = plan_conv2d(TINY_RQ, x.shape, w.shape, 1, 1, bias=True, requant=rq,
                       clip=(-128, 127))
    acc = fp.wrap_int32(group_conv2d_ref(x, w, 1, 1).astype(np.int64) + bias[:, None, None])
    want = _tflite(acc, scale, 5, False)
    xd, wd = x.reshape(1, -1)[:, :72], w.reshape(16, -1)[:, :72]
    drq, drows = _requant(0.0007, -9, 16, True)      # MULSHR
    dplan = plan_dense(TINY_RQ, xd.shape, wd.shape, bias=True, requant=drq, clip=(-128, 127))
    dwant = _tflite(fp.wrap_int32(xd.astype(np.int64) @ wd.T.astype(np.int64) + bias),
                    0.0007, -9, True)
    from vtakit.compiler.ops.elementwise import RescaledAddPlan
    from vtakit.compiler.quant.ops import add as qadd
    from vtakit.compiler.vta.add import _tflite_rescales
    q = dict(lhs_scale=0.02, lhs_zero_point=3, rhs_scale=0.07, rhs_zero_point=-9,
             out_scale=0.05, out_zero_point=1, rounding="tflite")
    ra, rb, ro, arows = _tflite_rescales(q)
    aplan = RescaledAddPlan(TINY_RQ, x.shape, rescale_a=ra, rescale_b=rb, rescale_out=ro,
                            zero_points=(3, -9), clip=(-128, 127), tile=60)
    xb = x[:, ::-1].copy()
    awant = np.clip(qadd(x, xb, **q), -128, 127).astype(np.int8)
    for backend in ("behavioral", "verilator"):
        dev = open_device(backend, TINY_RQ)
        try:
            rt = Runtime(dev)
            out, _ = plan.run(rt, plan.pack(x, w, bias, requant=rows))
            dout, _ = dplan.run(rt, dplan.pack(xd, wd, bias, requant=drows))
            aout, _ = aplan.run(rt, aplan.pack(x, xb, arows))
        finally:
            dev.close()
        assert dev.name == backend
        np.testing.assert_array_equal(plan.unpack(out), want, err_msg=backend)
        np.testing.assert_array_equal(dplan.unpack(dout), dwant, err_msg=backend)
        np.testing.assert_array_equal(aplan.unpack(aout), awant, err_msg=backend)


@pytest.mark.parametrize("stride,padding,groups", [(1, 1, 1), (2, (0, 0, 1, 1), 16),
                                                   (2, (4, 1, 5, 2), 1)])
def test_border_rows_equal_padding_with_a_value(stride, padding, groups):
    """border=True: a padding value's contribution, one per-channel row per border
    rectangle added on the ALU, equals convolving the input padded with that value."""
    from vtakit.compiler.ops.conv2d import border_cases
    from vtakit.compiler.ops.reference import epilogue_ref, normalize_padding
    rng = np.random.default_rng(3)
    kh, kw = (10, 4) if padding == (4, 1, 5, 2) else (3, 3)
    x = rng.integers(-128, 128, (1, 16, 10, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 16 // groups, kh, kw), dtype=np.int8)
    bias = rng.integers(-3000, 3000, 16).astype(np.int32)
    t, l, b, r = normalize_padding(padding)
    xv = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=-128)
    want_acc = group_conv2d_ref(xv, w, stride, 0, groups).astype(np.int64)
    corr = fp.wrap_int32(want_acc - group_conv2d_ref(x, w, stride, padding, groups))
    cfg = load_config("tiny")
    plan = plan_conv2d(cfg, x.shape, w.shape, stride, padding, groups=groups, bias=True,
                       shift=9, clip=(-128, 127), border=True)
    cases = border_cases(10, 8, kh, kw, plan.stride, plan.padding, plan.oh, plan.ow)
    assert plan.border_cases == cases and 0 < len(cases) < plan.oh * plan.ow
    out, _ = plan.run(Runtime(open_device("behavioral", cfg)),
                      plan.pack(x, w, bias, border=corr))
    np.testing.assert_array_equal(plan.unpack(out), epilogue_ref(
        fp.wrap_int32(want_acc), bias=bias, shift=9, clip=(-128, 127)))


@pytest.mark.parametrize("scales,zps", [((0.031, 0.0123, 0.041), (-7, 12, -3)),
                                        ((0.002, 0.05, 0.03), (0, -128, 5))])
def test_tflite_add_exact(scales, zps):
    """TFLite's ADD (both operands rescaled from 20 fractional bits) on the extension
    equals the numpy TFLite arithmetic of qnn.add; several tiles (tile=37)."""
    from vtakit.compiler.ops.elementwise import RescaledAddPlan
    from vtakit.compiler.quant.ops import add as qadd
    from vtakit.compiler.vta.add import _tflite_rescales
    rng = np.random.default_rng(1)
    shape = (1, 20, 7, 5)
    a, b = (rng.integers(-128, 128, shape, dtype=np.int8) for _ in range(2))
    q = dict(lhs_scale=scales[0], lhs_zero_point=zps[0], rhs_scale=scales[1],
             rhs_zero_point=zps[1], out_scale=scales[2], out_zero_point=zps[2],
             rounding="tflite")
    ra, rb, ro, rows = _tflite_rescales(q)
    plan = RescaledAddPlan(TINY_RQ, shape, rescale_a=ra, rescale_b=rb, rescale_out=ro,
                           zero_points=zps[:2], clip=(-128, 127), tile=37)
    out, _ = plan.run(Runtime(open_device("behavioral", TINY_RQ)), plan.pack(a, b, rows))
    np.testing.assert_array_equal(plan.unpack(out),
                                  np.clip(qadd(a, b, **q), -128, 127).astype(np.int8))


def test_lowering_decision():
    """The strategy lowers TFLite's roundings to the extension only where the ALU is
    exact, and says why not otherwise."""
    from vtakit.compiler.vta.conv import _exact_requant
    rq = {"rounding": "tflite_single", "scale": np.array([0.001, 0.01]), "zero_point": 0}
    why = _exact_requant(rq, 2, TINY_RQ, "dense")
    assert isinstance(why, str) and "per-channel shifts" in why
    assert _exact_requant(dict(rq, scale=0.001), 2, TINY_RQ, "dense")[0].rounding == "single"
    assert _exact_requant(dict(rq, rounding="tflite"), 2, TINY_RQ, "conv2d")[0].rows == 2
    assert _exact_requant(rq, 2, load_config("tiny"), "dense") is None        # no extension
    assert _exact_requant(dict(rq, rounding="onnx"), 2, TINY_RQ, "dense") is None
