"""The Dask client of a sweep or a sharded run: an existing scheduler, or a LocalCluster.

``open_client(workers=N)`` starts ``N`` worker processes of one thread each (the
simulators and the compiler hold the GIL; one process per core is the useful
parallelism); ``open_client(scheduler="tcp://HOST:PORT")`` connects to a running
cluster (its workers must have vtakit installed). Either way the caller gets a
context manager that closes what it opened.
"""

from __future__ import annotations

import contextlib
import logging
from ..hw.errors import InputError
from ..runtime.cpus import usable_cpus

__all__ = ["open_client", "default_workers"]


def default_workers() -> int:
    """One worker per core this process may use."""
    return usable_cpus()


@contextlib.contextmanager
def open_client(workers: int | None = None, scheduler: str | None = None, client=None):
    """Yield a ``dask.distributed.Client``: ``client`` itself if given (left open), else one
    connected to ``scheduler``, else one of a new ``LocalCluster`` of ``workers`` processes
    (default: one per core)."""
    if client is not None:
        yield client
        return
    from distributed import Client, LocalCluster
    if scheduler:
        with Client(scheduler) as c:
            yield c
        return
    n = default_workers() if workers is None else int(workers)
    if n < 1:
        raise InputError(f"workers={n}; a sweep needs at least one worker")
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as c:
        yield c
