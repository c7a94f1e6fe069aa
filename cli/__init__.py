"""vtakit: a hardware-software co-design kit for the VTA deep-learning accelerator.

Subpackages: :mod:`vtakit.hw` (config, ISA, Amaranth RTL), :mod:`vtakit.sim`
(behavioral model and RTL simulation backends), :mod:`vtakit.runtime` (driver),
:mod:`vtakit.compiler` (operators and models), :mod:`vtakit.boards` (FPGA).
"""

__version__ = "0.1.0"


def load(path, *, config=None):
    """Load a compiled model (``.vtax``): :func:`vtakit.runtime.executable.load`.

    Returns an :class:`~vtakit.runtime.executable.Executable`; call ``.run(inputs,
    backend=...)`` on it."""
    from .runtime.executable import load as _load   # lazy: `import vtakit` stays light
    return _load(path, config=config)


def compile(path, *, config="default", report=None):  # noqa: A001 -- the product's verb
    """Compile a model file (``.tflite``) for ``config``: an
    :class:`~vtakit.runtime.executable.Executable` (``.save(path)``, ``.run(inputs)``);
    see :func:`vtakit.compiler.build_model.compile_model`."""
    from .compiler.build_model import compile_model
    return compile_model(path, config, report=report)
