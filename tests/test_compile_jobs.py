"""A model's VTA layers lowered in worker processes (``VTAKIT_COMPILE_JOBS``): the same
executable, byte for byte, and the same compile report as in one process; a layer
whose lowering fails in a worker is lowered again in the compiling process, which
raises its error as a one-process compile does."""

import importlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import vtakit

MODEL = Path(__file__).parent / "data" / "mltk" / "anomaly_detection.tflite"
executable = importlib.import_module("vtakit.compiler.vta.executable")


@pytest.fixture(autouse=True)
def forkable(monkeypatch, request):
    """Workers may be forked although an earlier test of this process left a thread
    running (a progress bar's monitor, a Dask client): what is tested here is what the
    workers give, not _can_fork's refusal, which its own test checks."""
    if "real_can_fork" not in request.keywords:
        monkeypatch.setattr(executable, "_can_fork", lambda: sys.platform.startswith("linux"))


def _compile(monkeypatch, jobs, config="default"):
    monkeypatch.setenv(executable.COMPILE_JOBS_ENV, str(jobs))
    report = []
    exe = vtakit.compile(MODEL, config=config, report=report)
    return exe.to_bytes(), [repr(r) for r in report]


def _watch_workers(monkeypatch):
    """The functions the workers lowered, per call of lower_in_workers."""
    real, seen = executable.lower_in_workers, []

    def watched(lower, funcs, report):
        got = real(lower, funcs, report)
        seen.append(len(got))
        return got
    monkeypatch.setattr(executable, "lower_in_workers", watched)
    return seen


@pytest.mark.parametrize("config", ["default", "tiny"])
def test_workers_give_the_executable_and_report_of_one_process(monkeypatch, config):
    one = _compile(monkeypatch, 1, config)
    seen = _watch_workers(monkeypatch)
    two = _compile(monkeypatch, 2, config)
    # anomaly detection's ten dense layers went to the workers
    assert seen and seen[0] >= 10
    assert two[0] == one[0]
    assert two[1] == one[1]


def test_a_layer_failing_in_a_worker_is_lowered_here(monkeypatch):
    one = _compile(monkeypatch, 1)
    parent, real = os.getpid(), executable.layer_spec
    calls = []

    def flaky(layer, shape, *args, **kw):
        if os.getpid() != parent and shape == (1, 640):
            raise RuntimeError("worker only")
        calls.append(shape)
        return real(layer, shape, *args, **kw)
    monkeypatch.setattr(executable, "layer_spec", flaky)
    seen = _watch_workers(monkeypatch)
    two = _compile(monkeypatch, 2)
    assert two == one
    # the workers lowered all layers but the failed one, which this process lowered
    assert seen[0] >= 9 and (1, 640) in calls


def test_a_layer_failing_everywhere_raises_as_in_one_process(monkeypatch):
    real = executable.layer_spec

    def broken(layer, shape, *args, **kw):
        if shape == (1, 128) and layer.kind == "dense":
            raise RuntimeError(f"broken layer {shape}")
        return real(layer, shape, *args, **kw)
    monkeypatch.setattr(executable, "layer_spec", broken)
    for jobs in (1, 2):
        with pytest.raises(RuntimeError, match=r"broken layer \(1, 128\)"):
            _compile(monkeypatch, jobs)


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_job_count_is_refused(monkeypatch, value):
    monkeypatch.setenv(executable.COMPILE_JOBS_ENV, value)
    with pytest.raises(ValueError, match=rf"VTAKIT_COMPILE_JOBS={value!r}: expected a whole"):
        vtakit.compile(MODEL, config="default")


def test_the_default_count_is_the_cpus_this_process_may_use(monkeypatch):
    """Unset, one job per CPU of the process's affinity mask (not the machine's count):
    the same count as the sweep's local cluster."""
    from vtakit.runtime.cpus import usable_cpus
    from vtakit.tools.cluster import default_workers
    monkeypatch.delenv(executable.COMPILE_JOBS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 5, 7}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert usable_cpus() == executable.compile_jobs() == default_workers() == 3
    monkeypatch.delattr(os, "sched_getaffinity")      # not on Linux: the machine's count
    assert executable.compile_jobs() == default_workers() == 64


def test_few_layers_stay_in_this_process(monkeypatch):
    monkeypatch.setenv(executable.COMPILE_JOBS_ENV, "2")
    assert executable.lower_in_workers(lambda f: f, [object()] * 3, None) == {}
    got = executable.lower_in_workers(lambda f: np.int64(7), list(range(5)), None)
    assert sorted(v for v, _ in got.values()) == [7] * 5


def test_a_result_the_workers_cannot_send_back_is_lowered_here(monkeypatch):
    """A lowerer's result that does not pickle (a local function) breaks the pool: every
    function is then lowered in this process."""
    monkeypatch.setenv(executable.COMPILE_JOBS_ENV, "2")
    funcs = list(range(6))
    assert executable.lower_in_workers(lambda f: (lambda: f), funcs, None) == {}


@pytest.mark.real_can_fork
def test_a_process_with_another_thread_lowers_everything_itself(monkeypatch):
    """Forking beside a running thread could copy a lock it holds: such a compile lowers
    every layer in this process, to the same executable."""
    import threading
    one = _compile(monkeypatch, 1)
    seen = _watch_workers(monkeypatch)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        two = _compile(monkeypatch, 2)
    finally:
        stop.set()
        other.join()
    assert seen == [0] and two == one


def test_by_default_a_small_model_stays_in_this_process(monkeypatch):
    """Without VTAKIT_COMPILE_JOBS only models of DEFAULT_PARALLEL_LAYERS layers or more
    go to workers (anomaly detection has ten): the plans stay cached here."""
    monkeypatch.delenv(executable.COMPILE_JOBS_ENV, raising=False)
    seen = _watch_workers(monkeypatch)
    vtakit.compile(MODEL, config="default")
    assert seen == [0] and executable.DEFAULT_PARALLEL_LAYERS > 10
