"""Train the demo's digits CNN with numpy only and write it as ONNX.

The network (input ``(1, 1, 8, 8)`` float32, pixels of scikit-learn's
``load_digits`` divided by 16; output ``(1, 10)`` logits)::

    conv3x3(1->8) -> BN -> ReLU -----------------------+
    conv3x3(8->8) -> BN -> ReLU -> conv3x3(8->8) -> BN -> add -> ReLU
    -> MaxPool 2x2 -> conv3x3(8->16) -> BN -> ReLU -> AveragePool 2x2
    -> Flatten -> Gemm(64->10)

so it exercises conv, batch norm, ReLU, both poolings, a residual add and a
dense layer. Training is plain mini-batch Adam with hand-written backward
passes (batch statistics in BN while training, running statistics in the
exported graph); it is seeded, so the same numpy gives the same file.

Run ``python -m vtakit.compiler.models.train_digits_cnn [-o FILE]`` to
re-create the shipped ``digits_cnn.onnx``.
"""

import argparse
from pathlib import Path

import numpy as np

__all__ = ["load_split", "train", "to_onnx", "main"]

_EPS = 1e-5
_MOMENTUM = 0.9


# ---- numpy layers --------------------------------------------------------------------------

def _im2col(x, k, pad):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.empty((n, c, k, k, h, w), x.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + h, j:j + w]
    # (n*h*w, c*k*k): one row per output pixel, OIHW weight order per row
    return cols.transpose(0, 4, 5, 1, 2, 3).reshape(n * h * w, c * k * k)


def _col2im(dcols, shape, k, pad):
    n, c, h, w = shape
    d = dcols.reshape(n, h, w, c, k, k).transpose(0, 3, 4, 5, 1, 2)
    dxp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dcols.dtype)
    for i in range(k):
        for j in range(k):
            dxp[:, :, i:i + h, j:j + w] += d[:, :, i, j]
    return dxp[:, :, pad:pad + h, pad:pad + w]


class _Conv:
    """3x3 'same' convolution, stride 1 (the only kind this network needs)."""

    def __init__(self, rng, cin, cout):
        self.w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (cin * 9))).astype(np.float32)
        self.b = np.zeros(cout, np.float32)

    def params(self):
        return [self.w, self.b]

    def forward(self, x):
        self.shape = x.shape
        self.cols = _im2col(x, 3, 1)
        n, _, h, w = x.shape
        y = self.cols @ self.w.reshape(len(self.w), -1).T + self.b
        return y.reshape(n, h, w, -1).transpose(0, 3, 1, 2)

    def backward(self, dy):
        d = dy.transpose(0, 2, 3, 1).reshape(-1, dy.shape[1])
        self.grads = [(d.T @ self.cols).reshape(self.w.shape), d.sum(0)]
        return _col2im(d @ self.w.reshape(len(self.w), -1), self.shape, 3, 1)


class _BN:
    def __init__(self, c):
        self.g = np.ones(c, np.float32)
        self.b = np.zeros(c, np.float32)
        self.mean = np.zeros(c, np.float32)
        self.var = np.ones(c, np.float32)

    def params(self):
        return [self.g, self.b]

    def forward(self, x, train):
        if train:
            mu = x.mean((0, 2, 3))
            var = x.var((0, 2, 3))
            self.mean[:] = _MOMENTUM * self.mean + (1 - _MOMENTUM) * mu
            self.var[:] = _MOMENTUM * self.var + (1 - _MOMENTUM) * var
        else:
            mu, var = self.mean, self.var
        self.inv = 1 / np.sqrt(var + _EPS)
        self.xhat = (x - mu[:, None, None]) * self.inv[:, None, None]
        return self.g[:, None, None] * self.xhat + self.b[:, None, None]

    def backward(self, dy):
        m = dy.shape[0] * dy.shape[2] * dy.shape[3]
        self.grads = [(dy * self.xhat).sum((0, 2, 3)), dy.sum((0, 2, 3))]
        dxh = dy * self.g[:, None, None]
        s1 = dxh.sum((0, 2, 3))[:, None, None]
        s2 = (dxh * self.xhat).sum((0, 2, 3))[:, None, None]
        return self.inv[:, None, None] / m * (m * dxh - s1 - self.xhat * s2)


class _Net:
    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.c1, self.n1 = _Conv(rng, 1, 8), _BN(8)
        self.c2, self.n2 = _Conv(rng, 8, 8), _BN(8)
        self.c3, self.n3 = _Conv(rng, 8, 8), _BN(8)
        self.c4, self.n4 = _Conv(rng, 8, 16), _BN(16)
        self.fw = (rng.standard_normal((10, 64)) * np.sqrt(1 / 64)).astype(np.float32)
        self.fb = np.zeros(10, np.float32)
        self.layers = [self.c1, self.n1, self.c2, self.n2, self.c3, self.n3, self.c4, self.n4]

    def params(self):
        return [p for layer in self.layers for p in layer.params()] + [self.fw, self.fb]

    def forward(self, x, train=False):
        a1 = np.maximum(self.n1.forward(self.c1.forward(x), train), 0)
        a2 = np.maximum(self.n2.forward(self.c2.forward(a1), train), 0)
        s = self.n3.forward(self.c3.forward(a2), train) + a1
        a3 = np.maximum(s, 0)
        n = len(x)
        p = a3.reshape(n, 8, 4, 2, 4, 2)
        m = p.max((3, 5))
        self.pool_mask = p == m[:, :, :, None, :, None]
        a4 = np.maximum(self.n4.forward(self.c4.forward(m), train), 0)
        avg = a4.reshape(n, 16, 2, 2, 2, 2).mean((3, 5))
        self.cache = (a1, a2, a3, a4, avg.reshape(n, 64))
        return self.cache[4] @ self.fw.T + self.fb

    def backward(self, dlogits):
        a1, a2, a3, a4, flat = self.cache
        n = len(dlogits)
        fgrads = [dlogits.T @ flat, dlogits.sum(0)]
        davg = (dlogits @ self.fw).reshape(n, 16, 2, 1, 2, 1)
        da4 = np.broadcast_to(davg / 4, (n, 16, 2, 2, 2, 2)).reshape(n, 16, 4, 4) * (a4 > 0)
        dm = self.c4.backward(self.n4.backward(da4))
        # ties in max pooling are split evenly (they are measure-zero in practice)
        mask = self.pool_mask / self.pool_mask.sum((3, 5), keepdims=True)
        da3 = (dm[:, :, :, None, :, None] * mask).reshape(n, 8, 8, 8) * (a3 > 0)
        da2 = self.c3.backward(self.n3.backward(da3)) * (a2 > 0)
        da1 = da3 + self.c2.backward(self.n2.backward(da2))
        da1 = da1 * (a1 > 0)
        self.c1.backward(self.n1.backward(da1))
        return [g for layer in self.layers for g in layer.grads] + fgrads


# ---- training ------------------------------------------------------------------------------

def _load_digits():
    """scikit-learn's ``load_digits()`` images (N, 8, 8) float64 and targets, read from the
    CSV file its wheel ships, without importing scikit-learn (and SciPy: seconds)."""
    import gzip
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("sklearn")
    if spec is not None and spec.submodule_search_locations:
        path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
        if path.exists():
            with gzip.open(path) as f:        # what load_digits reads, the same way
                data = np.loadtxt(f, delimiter=",")
            return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
    from sklearn.datasets import load_digits     # another layout: the public loader
    data = load_digits()
    return data.images, data.target


def load_split(seed=0):
    """``load_digits`` scaled to [0, 1] as (N, 1, 8, 8) float32, split 80/20 (seeded).

    Returns
    -------
    tuple
        ``(x_train, y_train, x_test, y_test)``.
    """
    images, target = _load_digits()
    x = (images / 16.0).astype(np.float32)[:, None]
    y = target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    tr, te = order[:cut], order[cut:]
    return x[tr], y[tr], x[te], y[te]


def train(seed=0, epochs=30, batch=32, lr=3e-3, log=print, limit=None):
    """Train the network (on the first ``limit`` training images if given); returns
    ``(net, test_accuracy)``."""
    x_tr, y_tr, x_te, y_te = load_split(seed)
    x_tr, y_tr = x_tr[:limit], y_tr[:limit]
    net = _Net(seed)
    params = net.params()
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    rng = np.random.default_rng(seed + 1)
    step = 0
    for epoch in range(epochs):
        order = rng.permutation(len(x_tr))
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            logits = net.forward(x_tr[idx], train=True)
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            p[np.arange(len(idx)), y_tr[idx]] -= 1
            grads = net.backward(p / len(idx))
            step += 1
            for k, (param, g) in enumerate(zip(params, grads)):
                m[k] = 0.9 * m[k] + 0.1 * g
                v[k] = 0.999 * v[k] + 0.001 * g * g
                mh = m[k] / (1 - 0.9 ** step)
                vh = v[k] / (1 - 0.999 ** step)
                param -= (lr * mh / (np.sqrt(vh) + 1e-8)).astype(np.float32)
        if log and (epoch + 1) % 5 == 0:
            acc = (net.forward(x_te).argmax(1) == y_te).mean()
            log(f"epoch {epoch + 1}: test accuracy {acc:.4f}")
    return net, float((net.forward(x_te).argmax(1) == y_te).mean())


def to_onnx(net, opset=13):
    """The trained network as an ONNX ``ModelProto`` (inference form, batch 1)."""
    from onnx import TensorProto, helper, numpy_helper

    inits = []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    nodes = []

    def conv_bn(x, conv, bn, name):
        w = init(f"{name}.weight", conv.w)
        b = init(f"{name}.bias", conv.b)
        nodes.append(helper.make_node("Conv", [x, w, b], [f"{name}.conv"], name=f"{name}.conv",
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        args = [init(f"{name}.bn.{k}", getattr(bn, k)) for k in ("g", "b", "mean", "var")]
        nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv"] + args,
                                      [f"{name}.bn"], name=f"{name}.bn", epsilon=_EPS))
        return f"{name}.bn"

    def relu(x, out):
        nodes.append(helper.make_node("Relu", [x], [out], name=out))
        return out

    a1 = relu(conv_bn("input", net.c1, net.n1, "conv1"), "relu1")
    a2 = relu(conv_bn(a1, net.c2, net.n2, "conv2"), "relu2")
    s = conv_bn(a2, net.c3, net.n3, "conv3")
    nodes.append(helper.make_node("Add", [s, a1], ["residual"], name="residual"))
    a3 = relu("residual", "relu3")
    nodes.append(helper.make_node("MaxPool", [a3], ["pool1"], name="pool1",
                                  kernel_shape=[2, 2], strides=[2, 2]))
    a4 = relu(conv_bn("pool1", net.c4, net.n4, "conv4"), "relu4")
    nodes.append(helper.make_node("AveragePool", [a4], ["pool2"], name="pool2",
                                  kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("Flatten", ["pool2"], ["flat"], name="flatten", axis=1))
    nodes.append(helper.make_node("Gemm", ["flat", init("fc.weight", net.fw), init("fc.bias", net.fb)],
                                  ["logits"], name="fc", transB=1))
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="vtakit.train_digits_cnn")
    # a fixed IR version keeps the file loadable by older onnxruntime releases
    model.ir_version = 8
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path,
                        default=Path(__file__).with_name("digits_cnn.onnx"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args(argv)
    net, acc = train(args.seed, args.epochs)
    import onnx

    model = to_onnx(net)
    onnx.checker.check_model(model)
    onnx.save(model, str(args.output))
    print(f"test accuracy {acc:.4f}; wrote {args.output} ({args.output.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
