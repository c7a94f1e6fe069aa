"""Shared by the ISA-extension compile tests: a TFLite model compiled whole on VTA, and
its outputs against LiteRT's reference kernels (``BUILTIN_REF``) bit for bit."""

import numpy as np


def compile_whole_on_vta(path, config, kinds, extension):
    """Compile ``path`` for ``config``; every layer of ``kinds`` must run whole on VTA by
    the ISA extension ``extension`` (its name in the layer's reason). Returns
    ``(executable, those layers)``."""
    import vtakit
    report = []
    exe = vtakit.compile(path, config=config, report=report)
    layers = [r for r in report if r.kind in kinds]
    assert layers
    assert all(r.where == "vta" and f"'{extension}'" in r.why for r in layers), \
        [(r.kind, r.where, r.why) for r in layers if r.where != "vta" or extension not in r.why]
    return exe, layers


def assert_equals_litert(exe, path, n, seed=5):
    """``exe`` equals LiteRT's ``BUILTIN_REF`` kernels bit for bit on ``n`` inputs."""
    import ai_edge_litert.interpreter as litert

    from vtakit.compiler.frontend import from_tflite
    from vtakit.testing import model_inputs
    it = litert.Interpreter(model_path=str(path),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    (i,), (o,) = it.get_input_details(), it.get_output_details()
    for x in model_inputs(from_tflite(path)["main"].params[0].type_annotation, n, seed):
        it.set_tensor(i["index"], x)
        it.invoke()
        np.testing.assert_array_equal(np.asarray(exe.run([x])), it.get_tensor(o["index"]))
