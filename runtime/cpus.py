"""How many CPUs this process may use: one count for the compile workers
(:func:`vtakit.compiler.vta.executable.compile_jobs`), the sweep's local cluster
(:func:`vtakit.tools.cluster.default_workers`) and the RTL builds' ``make -j``."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask on Linux, else every CPU the
    machine reports); at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:          # not on Linux
        return max(1, os.cpu_count() or 1)
