"""The ONNX backend test data the ``onnx`` wheel ships, through vtakit.

Runs every model of ``onnx/backend/test/data/{light,pytorch-converted,pytorch-operator,simple}``
(the data onnxruntime's and TVM's frontends test against) and prints one line per test:

* float, on the host: the model compiled as given (``compile_model``) and run by the VM,
  compared with the stored outputs (``--rtol``, default 1e-3): PASS, MISMATCH, REFUSED (a
  one-line :class:`~vtakit.hw.errors.VtakitError`, printed) or CRASH (anything else);
* quantized, on VTA (behavioral): tests whose model has a Conv/ConvTranspose/Gemm/MatMul
  and one float input, and the light zoo models: calibrated on 16 inputs (the test's input
  and 15 noisy copies), compiled for ``--config``, run; the cosine of its output against
  the float output, and how many of the Conv/Gemm layers run on VTA. PASS needs cosine
  >= 0.99 (and, for the light models, at least half of the layers on VTA).

The light models have no stored inputs: like onnx's backend runner, their input is
``arange(n).reshape(shape) / n``.

    python bench/onnx_suite.py [--only SUBSTR] [--no-quant] [--config default] [--json]

Exit status 1 if any test is MISMATCH or CRASH.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
import traceback

import numpy as np

FOLDERS = ("light", "pytorch-converted", "pytorch-operator", "simple")
MATMUL_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul"}


def data_root():
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _read_pb(path):
    import onnx
    from onnx import numpy_helper

    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def _graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def light_input(vi):
    """onnx's backend runner's input of a light model: ``arange(n).reshape(shape) / n``."""
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                  for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


class Case:
    """One backend test: its model file, inputs and expected outputs (lists of arrays)."""

    def __init__(self, name, folder, model_path, inputs, outputs):
        self.name, self.folder, self.model_path = name, folder, model_path
        self.inputs, self.outputs = inputs, outputs

    def load(self):
        import onnx

        return onnx.load(self.model_path)


def cases(root=None, folders=FOLDERS, only=None):
    """The backend tests under ``root`` (default: the installed onnx wheel's), sorted."""
    import onnx

    root = root or data_root()
    out = []
    for folder in folders:
        if folder == "light":
            for p in sorted(glob.glob(os.path.join(root, "light", "*.onnx"))):
                name = os.path.splitext(os.path.basename(p))[0]
                if only and only not in name:
                    continue
                m = onnx.load(p, load_external_data=False)
                ins = [light_input(vi) for vi in _graph_inputs(m)]
                outs = [_read_pb(f"{os.path.splitext(p)[0]}_output_{i}.pb")
                        for i in range(len(m.graph.output))]
                out.append(Case(name, folder, p, ins, outs))
            continue
        for d in sorted(glob.glob(os.path.join(root, folder, "*"))):
            name = os.path.basename(d)
            if only and only not in name:
                continue
            ds = os.path.join(d, "test_data_set_0")
            n_in = len(glob.glob(os.path.join(ds, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(ds, "output_*.pb")))
            out.append(Case(name, folder, os.path.join(d, "model.onnx"),
                            [_read_pb(os.path.join(ds, f"input_{i}.pb")) for i in range(n_in)],
                            [_read_pb(os.path.join(ds, f"output_{i}.pb"))
                             for i in range(n_out)]))
    return out


def _one_line(e):
    msg = str(e).splitlines()[0] if str(e) else ""
    msg = msg.split("; supported: ")[0]  # the importer's list of ops: once in the docs
    return f"{type(e).__name__}: {msg}"[:240]


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _flat(r)]
    return [np.asarray(result)]


def run_float(case, config="default", rtol=1e-3, atol=1e-5):
    """``(status, detail)`` of the model compiled as given and run on the host."""
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend import from_onnx
    from vtakit.hw.errors import VtakitError

    try:
        mod = from_onnx(case.model_path)
        exe = compile_model(mod, config)
        got = _flat(exe.run(list(case.inputs)))
    except VtakitError as e:
        return "REFUSED", _one_line(e)
    except Exception as e:  # noqa: BLE001  (a crash is what this reports)
        return "CRASH", _one_line(e) + " @ " + traceback.extract_tb(e.__traceback__)[-1].name
    if len(got) != len(case.outputs):
        return "MISMATCH", f"{len(got)} outputs, expected {len(case.outputs)}"
    worst = 0.0
    for g, want in zip(got, case.outputs):
        if g.shape != want.shape:
            return "MISMATCH", f"shape {g.shape}, expected {want.shape}"
        if want.dtype.kind == "f":
            err = np.abs(g.astype(np.float64) - want) - atol - rtol * np.abs(want)
            if err.size and err.max() > 0:
                return "MISMATCH", f"max |error| {np.abs(g - want).max():.3g}"
            rel = np.abs(g.astype(np.float64) - want) / (np.abs(want) + atol)
            worst = max(worst, float(rel.max()) if rel.size else 0.0)
        elif not np.array_equal(g, want):
            return "MISMATCH", f"{int((g != want).sum())} elements differ"
    return "PASS", f"max rel {worst:.1e}"


def quantizable(case, model):
    """A test the quantized run covers: a light model, or one float input and a matmul op."""
    if case.folder == "light":
        return True
    ins = _graph_inputs(model)
    return (len(ins) == 1 and ins[0].type.tensor_type.elem_type == 1
            and any(n.op_type in MATMUL_OPS for n in model.graph.node))


def calibration_samples(x, n=16, seed=0):
    """``x`` and ``n - 1`` copies with Gaussian noise of a tenth of its spread."""
    rng = np.random.default_rng(seed)
    spread = float(x.std()) or 1.0
    noisy = x[None] + rng.standard_normal((n - 1,) + x.shape).astype(np.float32) * (
        0.1 * spread)
    # the model's batch dim is the sample's first dim; stack whole inputs along a new axis
    return np.concatenate([x[None], noisy.astype(np.float32)])


def run_quant(case, reference, config="default", n_samples=16):
    """``(status, detail, cosine)``: calibrated, compiled and run on the behavioral VTA."""
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend import from_onnx
    from vtakit.compiler.quant.calibrate import calibrate
    from vtakit.hw.errors import VtakitError

    x = case.inputs[0]
    try:
        mod = from_onnx(case.model_path)
        q = calibrate(mod, calibration_samples(x, n_samples))
        report = []
        exe = compile_model(q, config, report=report)
        got = _flat(exe.run([x]))
    except VtakitError as e:
        return "REFUSED", _one_line(e), None
    except Exception as e:  # noqa: BLE001
        return "CRASH", _one_line(e) + " @ " + traceback.extract_tb(e.__traceback__)[-1].name, \
            None
    g = got[0].astype(np.float64).reshape(-1)
    r = np.asarray(reference, np.float64).reshape(-1)
    if g.shape != r.shape:
        return "MISMATCH", f"shape {got[0].shape} vs {np.shape(reference)}", None
    den = np.linalg.norm(g) * np.linalg.norm(r)
    cos = float(g @ r / den) if den else float(np.array_equal(g, r))
    layers = [rec for rec in report if rec.kind.split("_")[0] in ("conv2d", "dense")]
    on_vta = sum(rec.where == "vta" for rec in layers)
    ok = cos >= 0.99 and (case.folder != "light" or 2 * on_vta >= len(layers))
    return ("PASS" if ok else "MISMATCH"), f"cosine {cos:.4f}, {on_vta}/{len(layers)} " \
        f"Conv/Gemm layers on VTA", cos


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="run the tests whose name contains this")
    ap.add_argument("--folders", default=",".join(FOLDERS))
    ap.add_argument("--config", default="default")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--no-quant", action="store_true", help="float runs only")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)
    from tqdm import tqdm

    todo = cases(folders=args.folders.split(","), only=args.only)
    rows = []
    for case in tqdm(todo, desc="onnx backend tests", file=sys.stderr, disable=args.json):
        t0 = time.perf_counter()
        status, detail = run_float(case, args.config, args.rtol, args.atol)
        row = {"test": case.name, "folder": case.folder, "float": status,
               "float_detail": detail, "quant": None, "quant_detail": None, "cosine": None}
        if not args.no_quant and status == "PASS" and quantizable(case, case.load()):
            ref = case.outputs[0]
            row["quant"], row["quant_detail"], row["cosine"] = run_quant(case, ref, args.config)
        row["seconds"] = round(time.perf_counter() - t0, 2)
        rows.append(row)
        if not args.json:
            q = f"  | quant {row['quant']}: {row['quant_detail']}" if row["quant"] else ""
            tqdm.write(f"{status:8s} {case.folder}/{case.name}: {detail}{q}")
    totals = {s: sum(r["float"] == s for r in rows) for s in
              ("PASS", "MISMATCH", "REFUSED", "CRASH")}
    qtotals = {s: sum(r["quant"] == s for r in rows) for s in
               ("PASS", "MISMATCH", "REFUSED", "CRASH")}
    if args.json:
        print(json.dumps({"tests": rows, "float": totals, "quant": qtotals}, indent=1))
    else:
        print(f"float ({len(rows)} tests): " + ", ".join(f"{k} {v}" for k, v in totals.items()))
        if not args.no_quant:
            print(f"quantized on VTA ({sum(qtotals.values())} tests): "
                  + ", ".join(f"{k} {v}" for k, v in qtotals.items()))
    bad = totals["MISMATCH"] + totals["CRASH"] + qtotals["MISMATCH"] + qtotals["CRASH"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
