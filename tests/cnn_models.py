"""Small float ONNX models with random but fixed weights, for the calibration tests:
a residual CNN, an inverted-residual (MobileNetV2-style) CNN, a LeNet-like CNN and an
MLP. Each builder returns an ``onnx.ModelProto`` with one input ``x``."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def tensor(self, arr):
        name = f"t{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    def node(self, op, inputs, **attrs):
        out = f"n{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x, cin, cout, k=3, s=1, g=1, act="relu", gain=2.0):
        w = self.rng.normal(0, (gain / (cin // g * k * k)) ** 0.5, (cout, cin // g, k, k))
        y = self.node("Conv", [x, self.tensor(w), self.tensor(self.rng.normal(0, 0.1, cout))],
                      kernel_shape=[k, k], strides=[s, s], group=g, pads=[k // 2] * 4)
        if act == "relu":
            return self.node("Relu", [y])
        if act == "relu6":
            return self.node("Clip", [y, self.tensor(0.0), self.tensor(6.0)])
        return y

    def dense(self, x, cin, cout, act=None, gain=2.0):
        w = self.rng.normal(0, (gain / cin) ** 0.5, (cout, cin))
        y = self.node("Gemm", [x, self.tensor(w), self.tensor(self.rng.normal(0, 0.1, cout))],
                      transB=1)
        return self.node("Relu", [y]) if act == "relu" else y

    def model(self, name, y, in_shape, out_shape):
        self.nodes[-1].output[0] = "y"
        graph = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, in_shape)], [helper.make_tensor_value_info(
                "y", TensorProto.FLOAT, out_shape)], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return m


def resnet(seed=0):
    """Conv stem, two residual blocks (the second strided, with a 1x1 projection),
    global average pool, classifier."""
    b = _Builder(seed)
    y = b.conv("x", 3, 16)
    z = b.conv(b.conv(y, 16, 16), 16, 16, act=None)
    y = b.node("Relu", [b.node("Add", [y, z])])
    z = b.conv(b.conv(y, 16, 32, s=2), 32, 32, act=None)
    p = b.conv(y, 16, 32, k=1, s=2, act=None)
    y = b.node("Relu", [b.node("Add", [p, z])])
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y])])
    b.dense(y, 32, 10)
    return b.model("resnet", "y", (1, 3, 16, 16), (1, 10))


def inverted_residual(seed=1):
    """MobileNetV2-style: ReLU6, expansion 1x1, depthwise 3x3, linear projection,
    residual adds, global average pool, classifier."""
    b = _Builder(seed)
    y = b.conv("x", 3, 16, s=2, act="relu6")
    for cin, cout, s, t in [(16, 16, 1, 4), (16, 24, 2, 4), (24, 24, 1, 4)]:
        z = b.conv(y, cin, cin * t, k=1, act="relu6")
        z = b.conv(z, cin * t, cin * t, s=s, g=cin * t, act="relu6")
        z = b.conv(z, cin * t, cout, k=1, act=None, gain=1.0)
        y = b.node("Add", [y, z]) if s == 1 and cin == cout else z
    y = b.node("Flatten", [b.node("GlobalAveragePool", [b.conv(y, 24, 48, k=1, act="relu6")])])
    b.dense(y, 48, 10)
    return b.model("inverted_residual", "y", (1, 3, 32, 32), (1, 10))


def lenet(seed=2):
    """Conv, max pool, conv, average pool, two dense layers."""
    b = _Builder(seed)
    y = b.node("MaxPool", [b.conv("x", 1, 6, k=5)], kernel_shape=[2, 2], strides=[2, 2])
    y = b.node("AveragePool", [b.conv(y, 6, 16, k=5)], kernel_shape=[2, 2], strides=[2, 2])
    y = b.node("Flatten", [y])
    y = b.dense(y, 16 * 7 * 7, 64, act="relu")
    b.dense(y, 64, 10)
    return b.model("lenet", "y", (1, 1, 28, 28), (1, 10))


def mlp(seed=3):
    b = _Builder(seed)
    y = b.dense("x", 64, 128, act="relu")
    y = b.dense(y, 128, 64, act="relu")
    b.dense(y, 64, 10)
    return b.model("mlp", "y", (1, 64), (1, 10))


MODELS = {"resnet": resnet, "inverted_residual": inverted_residual, "lenet": lenet, "mlp": mlp}


def samples(model, n, seed):
    """``n`` inputs for ``model`` (N, *input shape): smooth random patterns (low-pass
    noise) of varying contrast and brightness, so that the outputs differ from input
    to input."""
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (n, *dims))
    if len(dims) == 4:  # blur: neighbouring pixels alike, as in images
        for ax in (3, 4):
            x = (x + np.roll(x, 1, axis=ax) + np.roll(x, -1, axis=ax)) / 3
    shape = (n,) + (1,) * len(dims)
    x = x * rng.uniform(0.5, 2.0, shape) + rng.uniform(-0.5, 0.5, shape)
    return x.astype(np.float32)
