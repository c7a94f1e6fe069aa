"""The root of every vtakit error, at the bottom of the import graph.

Every exception class of vtakit (hw, sim, runtime, compiler, boards, cli) derives from
:class:`VtakitError` besides its own standard base (``ValueError``, ``RuntimeError``,
...), so a caller can catch "anything vtakit reports about its input" in one clause,
and the command line can tell a user error (one line, exit 2) from an internal bug
(a traceback, exit 3).
"""

__all__ = ["VtakitError", "InputError"]


class VtakitError(Exception):
    """Base class of every error vtakit raises on purpose (bad input, a fault, a
    failed build); anything else escaping vtakit is a bug."""


class InputError(VtakitError, ValueError):
    """A value the caller passed (an option, an argument, an input file) that the function
    cannot use; the message says which and what would be right. Most modules raise a more
    specific subclass of :class:`VtakitError`; this one is for the rest."""
