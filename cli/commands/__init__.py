"""Subcommands of the ``vtakit`` command line, one module each."""
