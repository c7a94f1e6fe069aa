"""Random model inputs, as the tests and benchmarks draw them."""

from __future__ import annotations

import numpy as np

__all__ = ["model_inputs"]


def model_inputs(t, n: int = 1, seed: int = 0) -> list:
    """``n`` random inputs of tensor type ``t`` (an IR ``TensorType``, e.g. a model
    parameter's ``type_annotation``) from one generator: int8 over its whole range,
    float32 uniform in [-4, 4)."""
    rng = np.random.default_rng(seed)
    if t.dtype == "int8":
        return [rng.integers(-128, 128, t.shape).astype(np.int8) for _ in range(n)]
    return [rng.uniform(-4, 4, t.shape).astype(np.float32) for _ in range(n)]
