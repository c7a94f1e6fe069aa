"""The event model, at its former place: :mod:`vtakit.compiler.ops.cost.events`."""

from .cost.events import *  # noqa: F401,F403
from .cost.events import __all__  # noqa: F401
