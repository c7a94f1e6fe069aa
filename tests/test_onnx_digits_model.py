"""The shipped digits CNN: its training script is deterministic and re-creates the file."""

import numpy as np
import pytest


from vtakit.compiler.models import digits_cnn_path  # noqa: E402
from vtakit.compiler.models.train_digits_cnn import to_onnx, train  # noqa: E402


def test_training_is_deterministic():
    a, acc_a = train(seed=0, epochs=2, log=None, limit=256)
    b, acc_b = train(seed=0, epochs=2, log=None, limit=256)
    assert acc_a == acc_b and acc_a > 0.3  # it learns (chance is 0.1)
    assert to_onnx(a).SerializeToString() == to_onnx(b).SerializeToString()


@pytest.mark.slow
def test_script_recreates_the_shipped_file():
    net, acc = train(seed=0, log=None)
    assert acc >= 0.97
    assert to_onnx(net).SerializeToString() == digits_cnn_path().read_bytes()


def test_shipped_file_is_small_and_valid():
    import onnx

    data = digits_cnn_path().read_bytes()
    assert len(data) < 32_000
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["input"]
    assert np.prod([d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]) == 64
