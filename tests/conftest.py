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
