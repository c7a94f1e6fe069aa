"""The roofline, at its former place: :mod:`vtakit.compiler.ops.cost.roofline`."""

from .cost.roofline import *  # noqa: F401,F403
from .cost.roofline import __all__  # noqa: F401
