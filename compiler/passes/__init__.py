"""vtakit.compiler.passes: the pass infrastructure and the graph-IR passes (in progress)."""

__all__: list[str] = []
