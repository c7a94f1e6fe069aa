"""Backend and config options: one test file runs on any backend (as PyMTL3's
``--test-verilog`` runs a test on the Verilated RTL).

``pytest --backend verilator tests/test_insn.py`` runs the instruction tests on the
Verilator RTL instead of the behavioral model; ``--config tiny`` restricts the tests
that take a ``preset`` to one config (a preset name or a ``vta_config.json``).

Tests opt in through fixtures:

* ``backend``: the backend name chosen by ``--backend`` (default ``behavioral``);
* ``preset``: parametrized by the test module's ``PRESETS`` list, or by ``--config``;
* ``open_backend(config, **options)``: a device of the chosen backend, one per
  (config, options) for the whole session (RTL builds are cached, SRAMs persist as on
  hardware);
* ``rt``: a :class:`~vtakit.runtime.Runtime` on ``open_backend(preset)``;
* ``run_cli(*argv)``: the command line run in this process, ``(code, stdout, stderr)``;
"""

import pytest

from vtakit.runtime.device import BACKENDS, open_device

#: Backends that show progress bars unless told not to.
_QUIET = {"pysim", "cxxrtl", "verilator"}


def pytest_addoption(parser):
    group = parser.getgroup("vtakit")
    group.addoption("--backend", default="behavioral", choices=sorted(BACKENDS),
                    help="backend of the backend-parametrized tests (default: behavioral)")
    group.addoption("--config", default=None, metavar="NAME|FILE",
                    help="run the preset-parametrized tests on this config only")


def _parametrizes(metafunc, name) -> bool:
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        names = names.split(",") if isinstance(names, str) else names
        if name in (n.strip() for n in names):
            return True
    return False


def pytest_generate_tests(metafunc):
    if "preset" in metafunc.fixturenames and not _parametrizes(metafunc, "preset"):
        config = metafunc.config.getoption("--config")
        presets = [config] if config else list(getattr(metafunc.module, "PRESETS", ["tiny"]))
        metafunc.parametrize("preset", presets, scope="module")


@pytest.fixture(scope="session")
def backend(request) -> str:
    return request.config.getoption("--backend")


@pytest.fixture(scope="session")
def open_backend(backend):
    devices = {}

    def get(config, **options):
        key = (str(config), tuple(sorted(options.items())))
        if key not in devices:
            extra = {"progress": False} if backend in _QUIET else {}
            devices[key] = open_device(backend, config, **extra, **options)
        return devices[key]
    yield get
    for dev in devices.values():
        dev.close()


@pytest.fixture
def rt(open_backend, preset):
    """A runtime on the session's device of the chosen backend and ``preset``."""
    from vtakit.runtime import Runtime
    return Runtime(open_backend(preset))


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """The calibrated digits CNN compiled for ``default``: ``(executable, its .vtax path,
    one test image, the folder holding both and the image as x.npy)``."""
    import numpy as np
    from vtakit.compiler.build_model import compile_model
    from vtakit.compiler.frontend.onnx import from_onnx
    from vtakit.compiler.models import digits_cnn_path, load_digits_split
    from vtakit.compiler.quant.calibrate import calibrate
    x_train, _, x_test, _ = load_digits_split()
    exe = compile_model(calibrate(from_onnx(digits_cnn_path()), x_train[:16, None]), "default")
    d = tmp_path_factory.mktemp("digits")
    np.save(d / "x.npy", x_test[:1])
    return exe, exe.save(d / "digits.vtax"), x_test[:1], d


@pytest.fixture
def run_cli(capsys):
    """``run_cli(*argv) -> (exit code, stdout, stderr)``: ``vtakit argv`` run in this
    process (arguments converted with ``str``; argparse's own rejection, a SystemExit,
    gives its code)."""
    from vtakit.cli.main import main

    def run(*argv):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return code, out, err
    return run
