"""ResNet-50 from the builder API: its structure, that it compiles for VTA, and (slow)
that the compiled model gives the same output on the behavioral model and the
Verilated RTL. bench/resnet50.py measures it; ResNet-18's builder is covered by
tests/test_ir.py and tests/test_passes.py."""

import numpy as np
import pytest

from vtakit.compiler import nn
from vtakit.compiler.build_model import compile_model
from vtakit.compiler.ir import Call, Op, TensorType, infer_types
from vtakit.compiler.ir.analysis import post_order
from vtakit.compiler.quant.calibrate import calibrate
from vtakit.hw.config import load_config
from vtakit.runtime.device import open_device
from vtakit.tools.demo import model_macs


def _calls(mod, name):
    return [e for e in post_order(mod["main"].body)
            if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name]


def _expected_convs(cin=3):
    """(out channels, in channels, kernel, stride, output size) of ResNet-50 v1's
    convolutions at 224 x 224, in the order the builder makes them (stem; per block
    1x1, 3x3, 1x1, then the projection)."""
    convs = [(64, cin, 7, 2, 112)]
    cin, size = 64, 56                                  # after the 3x3/2 max pool
    for i, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512))):
        for j in range(blocks):
            stride = 2 if i > 0 and j == 0 else 1
            size //= stride
            convs += [(width, cin, 1, stride, size), (width, width, 3, 1, size),
                      (4 * width, width, 1, 1, size)]
            if j == 0:
                convs.append((4 * width, cin, 1, stride, size))
            cin = 4 * width
    return convs


def test_resnet50_structure_at_224():
    mod = infer_types(nn.resnet50())
    assert mod["main"].body.checked_type == TensorType((1, 1000), "float32")
    convs = _calls(mod, "nn.conv2d")
    got = [(*c.args[1].checked_type.shape[:3], c.attrs["strides"]) for c in convs]
    want = _expected_convs()
    assert len(convs) == 53 and [g[:3] for g in got] == [w[:3] for w in want]
    assert [tuple(np.broadcast_to(g[3], 2)) for g in got] == [(w[3],) * 2 for w in want]
    assert [c.checked_type.shape for c in convs] == [(1, o, n, n) for o, _, _, _, n in want]
    dense = _calls(mod, "nn.dense")
    assert len(dense) == 1 and dense[0].args[1].checked_type.shape == (1000, 2048)
    assert len(_calls(mod, "add")) == 16 and len(_calls(mod, "nn.batch_norm")) == 53
    # 3.86 GMAC (He et al. 2015 give 3.8e9 FLOPs): the convolutions and the classifier
    macs = np.sum([o * i * k * k * n * n for o, i, k, _, n in want]) + 2048 * 1000
    assert model_macs(mod) == macs == 3_857_973_248


@pytest.fixture(scope="module")
def small():
    """ResNet-50 at 32 x 32 (10 classes), calibrated on one random image, compiled for
    ``default``; (executable, report, input)."""
    rng = np.random.default_rng(0)
    x, calib = (rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32) for _ in range(2))
    q = calibrate(nn.resnet50(image_shape=(3, 32, 32), num_classes=10), [calib])
    report = []
    exe = compile_model(q, load_config("default"), report=report)
    return exe, report, x


def test_resnet50_compiles_every_layer_for_vta(small):
    exe, report, x = small
    vta = [r for r in report if r.where == "vta"]
    kinds = [r.kind for r in vta]
    # 53 convolutions (16 with the block's residual add fused), the max pool, the global
    # average pool (a convolution on VTA) and the classifier
    assert kinds.count("conv2d_add") == 16 and kinds.count("conv2d") == 53 - 16 + 1
    assert kinds.count("max_pool2d") == 1 and kinds.count("dense") == 1 and len(vta) == 56
    assert all(r.roofline is not None and r.roofline.cycles > 0 for r in vta)
    assert [r.where for r in report if r.where != "vta"] == ["host", "host"]  # quantize, softmax
    y = exe.run(x)
    assert np.asarray(y).shape == (1, 10) and np.isclose(np.asarray(y).sum(), 1, atol=1e-3)


@pytest.mark.slow
def test_resnet50_224_behavioral_equals_verilator():
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32) for _ in range(3)]
    cfg = load_config("default")
    exe = compile_model(calibrate(nn.resnet50(), images[:2]), cfg)
    outs = {}
    for name in ("behavioral", "verilator"):
        with open_device(name, cfg) as dev:
            outs[name] = np.asarray(exe.run(images[2], device=dev))
    assert outs["behavioral"].shape == (1, 1000)
    np.testing.assert_array_equal(outs["behavioral"], outs["verilator"])
