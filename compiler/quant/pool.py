"""Transitional: the pooling computes moved to :mod:`vtakit.runtime.hostops.pool`."""

from ...runtime.hostops.pool import divide_round, pool_counts  # noqa: F401
