"""The core operators (Relay names and semantics, NCHW data, OIHW weights).

Importing this package registers them; :func:`vtakit.compiler.ir.get_op` does so on
first use.  Integer inputs compute exactly in their dtype (or ``out_dtype``),
wrapping like the hardware would.
"""

from . import elemwise, nn, onnx_ref, reduce, transform  # noqa: F401  (registration side effects)

__all__: list[str] = []
