"""vtakit: a hardware-software co-design kit for the VTA deep-learning accelerator.

Subpackages: :mod:`vtakit.hw` (rule table, config, ISA, Amaranth RTL), :mod:`vtakit.runtime`
(driver and the device contract), :mod:`vtakit.sim` (behavioral model and RTL simulation
backends), :mod:`vtakit.compiler` (operators and models), :mod:`vtakit.testing` (program
generators and golden fixtures), :mod:`vtakit.boards` (FPGA), :mod:`vtakit.cli` (the
``vtakit`` command line).

The names below are the small public API, imported on first use (``import vtakit`` loads
no subpackage)::

    import vtakit
    rt = vtakit.Runtime(vtakit.open_device("behavioral", "default"))
"""

import importlib

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_API = {
    "VtakitError": "vtakit.hw.errors",
    "VTAConfig": "vtakit.hw.config",
    "load_config": "vtakit.hw.config",
    "Unit": "vtakit.hw.spec",
    "ErrorCode": "vtakit.hw.spec",
    "Device": "vtakit.runtime.device",
    "DeviceError": "vtakit.runtime.device",
    "DeviceFault": "vtakit.runtime.device",
    "open_device": "vtakit.runtime.device",
    "DramImage": "vtakit.runtime.image",
    "Runtime": "vtakit.runtime.driver",
    "load": "vtakit.runtime.executable",
    "Executable": "vtakit.runtime.executable",
    "sweep": "vtakit.tools.sweep",
}

__all__ = ["__version__", "compile", *_API]


def compile(path, *, config="default", calibrate=None, report=None,  # noqa: A001
            calibrate_options=None):
    """Compile a model file (``.tflite``, ``.onnx``) for ``config``: an
    :class:`~vtakit.runtime.executable.Executable` (``.save(path)``, ``.run(inputs,
    backend=...)``). ``calibrate`` (samples of shape ``(N, *input shape)`` or a ``.npy``
    path) quantizes a float model, with ``calibrate_options`` for
    :func:`vtakit.compiler.quant.calibrate.calibrate` (``method``, ``asymmetric``, ...); see
    :func:`vtakit.compiler.build_model.compile_model`."""
    from .compiler.build_model import compile_model
    return compile_model(path, config, calibrate=calibrate, report=report,
                         calibrate_options=calibrate_options)


def __getattr__(name):
    try:
        module = _API[name]
    except KeyError:
        raise AttributeError(f"module 'vtakit' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)


def __dir__():
    return sorted(set(globals()) | set(_API))
