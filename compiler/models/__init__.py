"""Models shipped with vtakit.

* ``digits_cnn.onnx``: a small float CNN for scikit-learn's ``load_digits``
  (input ``"input"`` (1, 1, 8, 8) float32 = pixels / 16, output ``"logits"``
  (1, 10)), trained with numpy by :mod:`vtakit.compiler.models.train_digits_cnn`
  (test accuracy 98.9% on the seeded 20% split).
"""

from importlib import resources

__all__ = ["digits_cnn_path", "load_digits_split"]


def digits_cnn_path():
    """Path of the shipped ``digits_cnn.onnx``.

    Returns
    -------
    pathlib.Path
    """
    return resources.files(__name__).joinpath("digits_cnn.onnx")


def load_digits_split(seed=0):
    """The digits data as the model expects it, split 80/20 as in training.

    Returns
    -------
    tuple
        ``(x_train, y_train, x_test, y_test)``: x float32 (N, 1, 8, 8) in [0, 1], y int64.
    """
    from .train_digits_cnn import load_split

    return load_split(seed)
