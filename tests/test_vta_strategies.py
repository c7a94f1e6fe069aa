"""The VTA strategy registry (vtakit.compiler.vta): every layer kind is one registration,
and the dilated convolution, added as one strategy module, runs natively on VTA."""

import numpy as np
import pytest

import vtakit.compiler.quant  # noqa: F401
from vtakit.compiler.codegen import compile_vm
from vtakit.compiler.ir import (Call, Constant, Function, IRModule, TensorType, Var, evaluate)
from vtakit.compiler.nn import call as _op
from vtakit.compiler.passes import default_pipeline, vm_pipeline
from vtakit.compiler.vta import (Strategy, lower_primitive, match_layer, register_strategy,
                                 strategies, vm_lowerer)
from vtakit.compiler.vta.dilated import dilate_kernel
from vtakit.compiler.ops.reference import group_conv2d_ref
from vtakit.hw.config import load_config
from vtakit.runtime import Runtime
from vtakit.sim import open_device


def _dilated(dilation, groups=1, pad_value=0.0, rounding="tflite", c=16, o=32):
    rng = np.random.default_rng(sum(dilation) + groups)
    x = Var("x", TensorType((1, c, 12, 12), "int8"))
    w = rng.integers(-30, 30, (o, c // groups, 3, 3)).astype(np.int8)
    b = rng.integers(-900, 900, o).astype(np.int32)
    y = _op("nn.conv2d", x, Constant(w), strides=(1, 1), padding=(2, 2, 2, 2),
            dilation=dilation, groups=groups, pad_value=pad_value, out_dtype="int32")
    y = _op("nn.bias_add", y, Constant(b), axis=1)
    scale = 2.0 ** -8 if rounding == "vta" else tuple(np.linspace(2e-3, 6e-3, o))
    y = _op("qnn.requantize", y, scale=scale, zero_point=-3, rounding=rounding,
            axis=None if rounding == "vta" else 1)
    y = _op("cast", _op("clip", y, a_min=-128, a_max=127), dtype="int8")
    return Function([x], y), rng.integers(-128, 128, (1, c, 12, 12)).astype(np.int8)


def test_every_kind_is_one_registration():
    kinds = [s.kind for s in strategies()]
    assert len(kinds) == len(set(kinds))
    assert {"conv2d", "dense", "conv2d_dilated", "max_pool2d", "avg_pool2d", "add"} <= set(kinds)
    with pytest.raises(ValueError, match="already registered"):
        register_strategy(Strategy("conv2d", lambda *a: None, None, None))


def test_dilate_kernel_equals_a_dilated_convolution():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 4, 11, 11)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 4, 3, 2)).astype(np.int8)
    wd = dilate_kernel(w, (2, 3))
    assert wd.shape == (6, 4, 5, 4) and not wd[:, :, 1::2].any() and not wd[:, :, :, 1::3].any()
    # the dilated convolution by its definition: taps every (2, 3) input positions
    out = np.zeros((1, 6, 7, 8), np.int64)
    for i in range(3):
        for j in range(2):
            patch = x[:, :, 2 * i:2 * i + 7, 3 * j:3 * j + 8].astype(np.int64)
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.int64))
    np.testing.assert_array_equal(group_conv2d_ref(x, wd, 1, 0, 1), out)


@pytest.mark.parametrize("dilation,groups,pad_value,rounding,where", [
    ((2, 2), 1, 0.0, "vta", "vta"),
    ((3, 2), 1, -128.0, "tflite", "vta+host"),
    ((2, 2), 16, 5.0, "vta", "vta")])        # depthwise, border correction on VTA
def test_dilated_conv_runs_on_vta(dilation, groups, pad_value, rounding, where):
    fn, x = _dilated(dilation, groups, pad_value, rounding, o=16 if groups > 1 else 32)
    layer = match_layer(fn.body)
    assert layer is not None and layer.kind == "conv2d_dilated"
    records = []
    got = lower_primitive(fn, records=records)(Runtime(open_device("behavioral", "default")), x)
    np.testing.assert_array_equal(got, evaluate(fn, x))
    assert [r.where for r in records] == [where]
    assert records[0].why.startswith(f"dilation {dilation[0]}x{dilation[1]}")
    assert records[0].dram_bytes_run > 0          # it ran on the device


def test_dilated_conv_in_an_executable():
    fn, x = _dilated((2, 2))
    mod = vm_pipeline()(default_pipeline()(IRModule({"main": fn})))
    cfg, report = load_config("default"), []
    exe = compile_vm(mod, config=cfg, lowerer=vm_lowerer(cfg, report))
    assert [(r.kind, r.where) for r in report] == [("conv2d_dilated", "vta+host")]
    assert any(k.startswith("vta_conv2d_dilated_") for k, _ in exe.kernels)
    with exe.vm() as vm:
        np.testing.assert_array_equal(vm.run(x), evaluate(fn, x))


_SHUFFLED = """
import hashlib, importlib, random, sys
modules = ["add", "conv", "dilated", "fold", "pool", "residual", "layers", "lower", "executable",
           "registry", "target"]
random.Random(int(sys.argv[1])).shuffle(modules)
for m in modules:
    importlib.import_module("vtakit.compiler.vta." + m)
import vtakit
from vtakit.compiler.vta import strategies
exe = vtakit.compile(sys.argv[2], config="default")
print(",".join(modules), ",".join(s.kind for s in strategies()),
      hashlib.sha1(exe.to_bytes()).hexdigest())
"""


def test_strategy_order_is_declared_not_imported():
    """The strategy modules imported in shuffled orders give one strategy order and
    byte-identical executables (ResNet-8: conv2d, residual adds, pool, dense)."""
    import subprocess
    import sys
    from pathlib import Path
    model = Path(__file__).parent / "data" / "mltk" / "image_classification.tflite"
    runs = []
    for seed in (0, 1, 2):
        r = subprocess.run([sys.executable, "-c", _SHUFFLED, str(seed), str(model)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs.append(r.stdout.split())
    assert len({order for order, _, _ in runs}) == 3          # three import orders
    assert len({(kinds, sha) for _, kinds, sha in runs}) == 1, runs
    assert runs[0][1] == "conv2d,dense,conv2d_add,add,conv2d_dilated,max_pool2d,avg_pool2d"
