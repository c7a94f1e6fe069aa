"""The digits demo (``vtakit demo``): a shipped ONNX CNN, quantized, compiled and run on VTA.

Steps of :func:`run_demo`:

1. load ``digits_cnn.onnx`` (:mod:`vtakit.compiler.models`) and scikit-learn's
   ``load_digits`` split (offline: the data ships with scikit-learn);
2. float accuracy of the model on the whole test split (reference interpreter);
3. calibrate it to int8 with training images (:func:`~vtakit.compiler.quant.calibrate.calibrate`,
   power-of-two scales, so every conv/dense/pool layer runs whole on VTA) and compile
   it for the config (:func:`~vtakit.compiler.build_model.compile_model`);
4. run the whole test split through the VM on the behavioral model (int8 accuracy);
5. run the first ``count`` test images on an RTL backend (Verilator by default) and
   compare its predictions with the behavioral ones, reading the cycles and the GEMM
   counter of every kernel run (:class:`~vtakit.runtime.recorder.LayerRecorder`).

The latency per image is the cycles per image at VTA's clock (``fmax``, or the cached
``vtakit synth`` report of the config on ``target``: :mod:`~.latency`) plus the host
steps of an inference (:mod:`vtakit.runtime.hosttime`), averaged over the behavioral
run of the test split: measured on this machine, or estimated for an embedded host
(``host="cortex-a9"``).

Two GEMM figures are reported: *utilization*, the model's useful multiply-accumulates
divided by ``cycles x BATCH x BLOCK_IN x BLOCK_OUT`` (as ``bench/models.py``), and
*GEMM busy*, the GEMM micro-ops the core executed divided by the cycles (padding
lanes and accumulator resets included).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..hw.errors import InputError

__all__ = ["DemoResult", "run_demo", "format_demo", "model_macs", "rtl_build_cached",
           "CALIBRATION_SAMPLES"]

#: Training images used to calibrate the activation ranges.
CALIBRATION_SAMPLES = 64


@dataclass
class DemoResult:
    """What :func:`run_demo` measured (accuracies are fractions in [0, 1])."""

    config: str
    backend: str
    n_test: int
    float_accuracy: float
    int8_accuracy: float
    rtl_count: int
    rtl_agree: int
    rtl_int8_accuracy: float
    cycles_per_image: float          # measured on ``backend``; -1 without a clock
    #: the event model's cycles of every VTA layer's kernel (OpPlan.predicted), summed
    predicted_cycles_per_image: float
    gemm_utilization: float | None
    gemm_busy: float | None
    macs_per_image: int
    vta_layers: int
    host_layers: int
    wall: dict = field(default_factory=dict)   # step -> seconds
    host_us_per_image: float = 0.0   # the host steps of one inference (measured or estimated)
    host: str = "measured"
    fmax_mhz: float | None = None
    fmax_source: str = ""

    @property
    def vta_us_per_image(self) -> float | None:
        """Cycles per image (measured, else predicted) at :attr:`fmax_mhz`."""
        if self.fmax_mhz is None:
            return None
        cycles = (self.cycles_per_image if self.cycles_per_image >= 0
                  else self.predicted_cycles_per_image)
        return cycles / self.fmax_mhz

    @property
    def latency_us_per_image(self) -> float | None:
        vta = self.vta_us_per_image
        return None if vta is None else vta + self.host_us_per_image

    @property
    def accuracy_drop(self) -> float:
        """Float minus int8 accuracy, in percentage points."""
        return 100 * (self.float_accuracy - self.int8_accuracy)

    @property
    def ok(self) -> bool:
        """The acceptance criteria: int8 within 1 point of float, and the RTL predictions
        identical to the behavioral ones."""
        return self.accuracy_drop <= 1.0 and self.rtl_agree == self.rtl_count


def model_macs(mod) -> int:
    """Multiply-accumulates of one run of ``mod``'s conv2d and dense calls."""
    from ..compiler.ir import Call, Op, infer_types
    from ..compiler.ir.analysis import post_order
    mod = infer_types(mod)
    total = 0
    for fn in mod.functions.values():
        for e in post_order(fn.body):
            if isinstance(e, Call) and isinstance(e.op, Op) and \
                    e.op.name in ("nn.conv2d", "nn.dense"):
                w = e.args[1].checked_type.shape
                total += int(np.prod(e.checked_type.shape)) * int(np.prod(w[1:]))
    return total


def rtl_build_cached(backend: str, config) -> bool:
    """Whether the simulator library of a compiled RTL backend is already built (always
    True for the behavioral and pysim backends, which build nothing)."""
    from ..sim.rtl_build import FAST_BACKENDS, is_built
    return backend not in FAST_BACKENDS or is_built(backend, config)


def _bar(iterable, desc, progress):
    from ..runtime.progress import bar
    return bar(iterable, desc=desc, unit="img", enable=progress)


def _start_build(backend, cfg, progress, log):
    """Build the RTL simulator of ``backend`` in a child process (elaboration is Python
    and would hold this process's interpreter) while the behavioral phase runs; a future
    of the build, or ``None`` when it is cached."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ..sim.rtl_build import FAST_BACKENDS, cache_root, get_build, require_toolchain
    if backend in FAST_BACKENDS:
        require_toolchain(backend)       # one clear line now, not a failure after the images
    if rtl_build_cached(backend, cfg):
        return None
    log(f"building the {backend} simulator of {cfg.name} in the background (first run only; "
        f"later runs reuse {cache_root()})")
    # fork: no thread runs yet, and the child needs no re-import of the command line.
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    future = pool.submit(get_build, backend, cfg, progress=progress)
    pool.shutdown(wait=False)
    return future


def _predict(exe, images, device, desc, progress, recorder=None):
    """The predicted class of each image. One VM runs them all: it parses the primitives
    and plans each layer's kernel once, where ``exe.run`` per image would redo both."""
    preds = np.empty(len(images), np.int64)
    hook = None if recorder is None else recorder.hook
    with exe.vm(device=device, hook=hook) as vm:
        for i, x in enumerate(_bar(images, desc, progress)):
            if recorder is not None:
                recorder.start()
            y = vm.run(x[None], func=exe.entry)
            preds[i] = int(np.argmax(np.asarray(y)))
    return preds


def run_demo(config="default", backend: str = "verilator", count: int = 20, *,
             test_limit: int | None = None, progress: bool = True, log=print,
             fmax: float | None = None, target: str | None = None,
             host: str = "measured") -> DemoResult:
    """Run the digits demo; see the module docstring.

    Parameters
    ----------
    config : str, path or VTAConfig
        Hardware config to compile for.
    backend : str
        Backend of the subset run (``verilator``, ``cxxrtl``, ``pysim`` or ``behavioral``).
    count : int
        Number of test images run on ``backend`` (0 skips that run).
    test_limit : int, optional
        Run only the first images of the test split on the behavioral model (tests).
    progress : bool
        tqdm progress bars on stderr.
    log : callable
        Receives the progress messages (one line each).
    fmax, target : optional
        VTA's clock in MHz, or the FPGA target whose cached synthesis report of the
        config gives it (:func:`~.latency.fmax_mhz`); neither: no latency.
    host : str
        ``measured`` (this machine), or a host cost table (:func:`~.latency.load_host`).

    Returns
    -------
    DemoResult
    """
    from ..hw.config import load_config
    from ..runtime.device import check_backend, open_device
    from ..runtime.recorder import LayerRecorder
    from ..compiler.build_model import compile_model
    from ..compiler.frontend.onnx import from_onnx
    from ..compiler.ir import evaluate
    from ..compiler.models import digits_cnn_path, load_digits_split
    from ..compiler.quant.calibrate import calibrate

    if count < 0:
        raise InputError(f"count={count}; the number of RTL images must be >= 0")
    check_backend(backend)               # fail now, not after the behavioral phase
    cfg = load_config(config)
    from ..runtime.hosttime import HostTimer
    from .latency import fmax_mhz, host_seconds, load_host
    fmax, fmax_source = fmax_mhz(cfg, target, fmax)     # a missing report fails now
    host_model = load_host(host)
    build = _start_build(backend, cfg, progress, log) if count else None
    wall = {}
    t = time.perf_counter()
    x_train, _, x_test, y_test = load_digits_split()
    if test_limit is not None:
        x_test, y_test = x_test[:test_limit], y_test[:test_limit]
    count = min(count, len(x_test))
    path = digits_cnn_path()
    # The float model on the whole split at once (the importer takes the batch shape).
    batch = from_onnx(path, shapes={"input": tuple(x_test.shape)})
    float_pred = np.asarray(evaluate(batch, x_test)).argmax(axis=1)
    wall["float"] = time.perf_counter() - t

    t = time.perf_counter()
    float_mod = from_onnx(path)
    qmod = calibrate(float_mod, x_train[:CALIBRATION_SAMPLES, None])
    report = []
    exe = compile_model(qmod, cfg, report=report)
    wall["compile"] = time.perf_counter() - t
    vta_layers = sum(r.where != "host" for r in report)
    log(f"compiled digits_cnn.onnx for {cfg.name}: {vta_layers} layer(s) on VTA, "
        f"{len(report) - vta_layers} on the host ({wall['compile']:.2f} s)")

    t = time.perf_counter()
    with open_device("behavioral", cfg) as dev, HostTimer() as timer:
        beh_pred = _predict(exe, x_test, dev, "behavioral", progress)
    host_us = 1e6 * host_seconds(timer.take(), host_model) / max(len(x_test), 1)
    wall["behavioral"] = time.perf_counter() - t

    rtl_pred = np.empty(0, np.int64)
    cycles, gemm_ops = -1, 0
    if count:
        t = time.perf_counter()
        if build is not None:
            build.result()        # wait for the background build; raises its error
        with open_device(backend, cfg) as dev:
            wall["rtl_open"] = time.perf_counter() - t
            t = time.perf_counter()
            with LayerRecorder(dev, keep_outputs=False) as rec:
                rtl_pred = _predict(exe, x_test[:count], dev, backend, progress, rec)
                runs = rec.runs
        wall["rtl"] = time.perf_counter() - t
        if runs and all(r.cycles >= 0 for r in runs):
            cycles = sum(r.cycles for r in runs)
        gemm_ops = sum(int(r.stats.get("gemm_counter", 0)) for r in runs)

    macs = model_macs(qmod)
    peak = cfg.batch * cfg.block_in * cfg.block_out
    per_image = cycles / count if cycles >= 0 and count else -1.0
    return DemoResult(
        config=cfg.name, backend=backend, n_test=len(x_test),
        float_accuracy=float(np.mean(float_pred == y_test)),
        int8_accuracy=float(np.mean(beh_pred == y_test)),
        rtl_count=count, rtl_agree=int(np.sum(rtl_pred == beh_pred[:count])),
        rtl_int8_accuracy=float(np.mean(rtl_pred == y_test[:count])) if count else float("nan"),
        cycles_per_image=per_image,
        predicted_cycles_per_image=float(sum(r.predicted_cycles for r in report)),
        gemm_utilization=macs / (per_image * peak) if per_image > 0 else None,
        gemm_busy=gemm_ops / cycles if cycles > 0 else None,
        macs_per_image=macs, vta_layers=vta_layers, host_layers=len(report) - vta_layers,
        wall=wall, host_us_per_image=host_us, host=host, fmax_mhz=fmax,
        fmax_source=fmax_source)


def format_demo(r: DemoResult) -> str:
    """The demo's summary table (plain text)."""
    def pct(v):
        return "n/a" if v is None else f"{100 * v:.1f}%"
    lines = [
        f"digits CNN (load_digits, {r.n_test} test images) on VTA config {r.config}",
        f"  float accuracy (reference)      {pct(r.float_accuracy)}",
        f"  VTA int8 accuracy (behavioral)  {pct(r.int8_accuracy)}  "
        f"({abs(r.accuracy_drop):.1f} points {'below' if r.accuracy_drop >= 0 else 'above'} "
        "float)",
    ]
    if r.rtl_count:
        lines.append(f"  behavioral vs {r.backend}".ljust(34)
                     + f"{r.rtl_agree}/{r.rtl_count} predictions identical")
    cyc = ("n/a (no clock)" if r.cycles_per_image < 0 else f"{r.cycles_per_image:,.0f}")
    lines += [
        f"  cycles per image ({r.backend})".ljust(34)
        + f"{cyc}  (predicted {r.predicted_cycles_per_image:,.0f})",
        f"  GEMM utilization                {pct(r.gemm_utilization)}  "
        f"({r.macs_per_image:,} MACs/image; GEMM busy {pct(r.gemm_busy)})",
        f"  layers                          {r.vta_layers} on VTA, {r.host_layers} on the host",
    ]
    where = "measured" if r.host == "measured" else f"estimated, {r.host}"
    if r.fmax_mhz is None:
        lines.append(f"  host time per image             {r.host_us_per_image:,.1f} us ({where}); "
                     "latency needs --fmax MHZ or --target FPGA")
    else:
        basis = "cycles" if r.cycles_per_image >= 0 else "predicted cycles"
        lines.append(f"  latency per image               {r.latency_us_per_image:,.1f} us = VTA "
                     f"{r.vta_us_per_image:,.1f} us ({basis} at {r.fmax_mhz:g} MHz, "
                     f"{r.fmax_source}) + host {r.host_us_per_image:,.1f} us ({where})")
    beh = r.wall.get("behavioral", 0.0)
    w = (f"compile {r.wall.get('compile', 0):.2f} s, behavioral {beh:.1f} s "
         f"({1e3 * beh / max(r.n_test, 1):.0f} ms/img)")
    if "rtl" in r.wall:
        w += (f", {r.backend} {r.wall['rtl']:.1f} s "
              f"({1e3 * r.wall['rtl'] / max(r.rtl_count, 1):.0f} ms/img)")
    lines.append(f"  wall time                       {w}")
    lines.append("  result: " + ("OK (int8 within 1 point of float; RTL == behavioral)" if r.ok
                                 else "FAILED acceptance (see above)"))
    return "\n".join(lines)
