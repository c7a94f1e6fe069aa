"""vtakit.cli: the ``vtakit`` command line (:func:`~vtakit.cli.main.main`; one module per
subcommand in :mod:`vtakit.cli.commands`)."""

from .main import main

__all__ = ["main"]
