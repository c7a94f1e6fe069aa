"""Load a script of bench/ (or any file) as a module by its path: bench/ is not a package,
and a top-level name could be another installed package's."""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_script(path, name: str | None = None):
    """The module run from ``path`` (a file, or a script name of bench/ such as
    ``"costmodel"``), registered under ``name`` (default ``bench_<stem>``)."""
    path = Path(path)
    if not path.suffix:
        path = BENCH / f"{path}.py"
    spec = importlib.util.spec_from_file_location(name or f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
