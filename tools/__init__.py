"""Tools over the public API: design-space sweeps on Dask (:mod:`vtakit.tools.sweep`),
their points (:mod:`.point`), Pareto sets and plots (:mod:`.pareto`), and sharded
layer-by-layer RTL comparisons (:mod:`.shard`).

``vtakit.sweep(...)`` is :func:`vtakit.tools.sweep.sweep`.
"""
