"""Per-layer accuracy of a calibrated model: :func:`accuracy_report`.

Runs the float model and its calibrated int8 version on the same inputs and
compares, for every tensor the calibrator gave a scale, the quantized model's value
(dequantized) with the float model's: SQNR (dB) and cosine similarity, with the
observed float range and the scale, zero point and range chosen. A layer's *own*
SQNR is that of the noise it adds: its noise-to-signal ratio minus the worst of its
quantized inputs' (``10 log10(1 / (NSR_out - NSR_in))``); the layers with the lowest
are marked as losing the most (what onnxruntime's ``qdq_loss_debug`` and TFLite's
quantization debugger give their users).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Call, Function, Op, Tuple, evaluate, get_op
from ..ir.analysis import post_order
from .calibrate import quantize_model

__all__ = ["accuracy_report", "AccuracyReport", "LayerAccuracy"]

#: SQNR cap (dB) for tensors quantized without error and for the model input's inputs
_CAP = 120.0


@dataclass
class LayerAccuracy:
    """One quantized tensor: ``id`` (``"t<k>"``, the key of ``calibrate(ranges=...)``),
    the op that computes it, its shape, the observed float range, the chosen scale and
    zero point and the range they cover, SQNR (dB) and cosine against the float model
    on the samples, and ``own``: the SQNR (dB) of the noise this tensor adds to its
    worst quantized input's (120 when it adds none)."""

    id: str
    op: str
    shape: tuple
    observed: tuple
    scale: float
    zero_point: int
    covered: tuple
    sqnr: float
    cosine: float
    own: float


class AccuracyReport(list):
    """The :class:`LayerAccuracy` rows in graph order; ``worst(n)`` the ``n`` rows that
    lose the most; ``str()`` the table :func:`format` prints."""

    def worst(self, n=1):
        return sorted(self, key=lambda r: r.own)[:n]

    def format(self) -> str:
        worst = min((r.own for r in self), default=_CAP)
        lines = [f"{'tensor':<6} {'layer':<24} {'shape':<16} {'observed range':<20} "
                 f"{'scale':>10} {'zp':>4} {'covered range':<20} {'SQNR dB':>8} "
                 f"{'cosine':>8} {'own dB':>7}"]
        for r in self:
            mark = ""
            if r.own == worst:
                mark = "  <- loses the most"
            elif r.own < worst + 1:
                mark = "  <-"
            lines.append(
                f"{r.id:<6} {r.op[:24]:<24} {str(r.shape)[:16]:<16} "
                f"{_rng(r.observed):<20} {r.scale:>10.4g} {r.zero_point:>4} "
                f"{_rng(r.covered):<20} {r.sqnr:>8.1f} {r.cosine:>8.5f} {r.own:>7.1f}" + mark)
        return "\n".join(lines)

    def __str__(self):
        return self.format()


def _rng(r):
    return f"[{r[0]:.4g}, {r[1]:.4g}]"


def _op_name(node):
    """The layer's ops, e.g. ``conv2d+bias_add+relu``."""
    names = []
    while isinstance(node, Call) and isinstance(node.op, Op):
        names.append(node.op.name.removeprefix("nn."))
        if node.op.name not in ("nn.relu", "clip", "nn.bias_add") or not node.args:
            break
        node = node.args[0]
    return "+".join(reversed(names)) or "input"


def accuracy_report(mod, samples, **calibrate_options) -> AccuracyReport:
    """Calibrate ``mod`` (a float IRModule) on ``samples`` as :func:`calibrate` does
    (same options) and compare every quantized tensor with the float model's on those
    samples.

    Returns
    -------
    AccuracyReport
        One row per tensor that got its own scale, in graph order.
    """
    cal = quantize_model(mod, samples, **calibrate_options)
    q = cal.quantizer
    rows = [n for n in cal.stats if n in q.params and q.int_form(n) is not None
            or n in q.params and n in q.int_memo]
    deq = []
    for n in rows:
        e, s, z = q.int_memo[n] if q.int_memo.get(n) is not None else q.int_form(n)
        deq.append(Call(get_op("qnn.dequantize"), [e], {"scale": float(s),
                                                         "zero_point": int(z), "axis": None}))
    fprobe = Function(cal.func.params, Tuple(list(rows)))
    qprobe = Function(cal.func.params, Tuple(deq))
    samples = np.asarray(samples, np.float32)[:calibrate_options.get("max_samples")]
    fv = [[] for _ in rows]
    qv = [[] for _ in rows]
    for x in samples:
        for k, (a, b) in enumerate(zip(evaluate(fprobe, x), evaluate(qprobe, x))):
            fv[k].append(np.asarray(a, np.float64).ravel())
            qv[k].append(np.asarray(b, np.float64).ravel())
    nsr = {}
    report = AccuracyReport()
    for k, n in enumerate(rows):
        f, g = np.concatenate(fv[k]), np.concatenate(qv[k])
        nsr[n] = float(np.sum((f - g) ** 2)) / max(float(np.sum(f ** 2)), 1e-30)
        denom = np.linalg.norm(f) * np.linalg.norm(g)
        cos = float(f @ g / denom) if denom > 0 else float(np.array_equal(f, g))
        s, z = q.params[n]
        covered = (float(s) * (-128 - int(z)), float(s) * (127 - int(z)))
        obs = cal.stats[n]
        report.append(LayerAccuracy(cal.ids[n], _op_name(n), tuple(n.checked_type.shape),
                                    (float(obs.min()), float(obs.max())), float(s), int(z),
                                    covered, _db(nsr[n]), cos, _CAP))
    row_set = set(rows)
    feeding = {}
    for node in post_order(cal.func.body):  # the quantized tensors nearest upstream
        args = list(getattr(node, "args", None) or getattr(node, "fields", None) or [])
        if hasattr(node, "tuple_value"):
            args.append(node.tuple_value)
        up = set()
        for a in args:
            up |= {a} if a in row_set else feeding.get(a, set())
        feeding[node] = up
    for r, n in zip(report, rows):
        before = max((nsr[a] for a in feeding.get(n, ())), default=0.0)
        r.own = _db(nsr[n] - before)
    return report


def _db(nsr):
    """SQNR in dB of a noise-to-signal ratio (capped at 120 dB)."""
    return _CAP if nsr <= 10 ** (-_CAP / 10) else float(-10 * np.log10(nsr))
