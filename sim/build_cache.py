"""The RTL build cache (``$VTAKIT_CACHE``): list, clean and prune it, least recently used first.

Every entry is a directory ``<cache>/<kind>/<name>`` (``kind`` is ``cxxrtl``,
``verilator``, or another tool's builds such as ``cocotb``). Its last use is the
modification time of its ``build.json`` (touched on every cache hit by
:func:`~vtakit.sim.rtl_build.get_build`), else of the directory.

Safe against concurrent processes: an entry is removed only under its build
lock (``<name>.lock``, taken without waiting: an entry being built or looked up is
skipped), by renaming it out of the way first (atomic) and deleting the renamed
copy, and never within :data:`GRACE_SECONDS` of its last use (a process may be
about to load the library it just found). A library already loaded stays valid
after its files are deleted (POSIX).

After every build the cache prunes itself to :func:`default_max_bytes`
(``$VTAKIT_CACHE_MAX``, e.g. ``2G``; default 2 GiB).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..hw.errors import InputError

__all__ = ["CacheEntry", "cache_entries", "prune", "clean", "parse_size", "format_size",
           "default_max_bytes", "touch", "build_once", "DEFAULT_MAX_BYTES", "GRACE_SECONDS"]

#: Size the cache prunes itself to after a build, unless ``$VTAKIT_CACHE_MAX`` says otherwise.
DEFAULT_MAX_BYTES = 2 << 30
#: An entry used this recently is never removed.
GRACE_SECONDS = 60.0

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text) -> int:
    """``"500M"``, ``"2G"``, ``"1.5GiB"``, ``"4096"`` -> bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise InputError(f"size {text!r} is not a number of bytes with an optional unit "
                         "K, M, G or T (e.g. 500M, 2G)")
    return int(float(m[1]) * _UNITS[m[2].upper()])


def format_size(n: int) -> str:
    for unit in ("G", "M", "K"):
        if n >= _UNITS[unit]:
            return f"{n / _UNITS[unit]:.1f}{unit}"
    return f"{n}B"


def default_max_bytes() -> int:
    """``$VTAKIT_CACHE_MAX`` (a size) or :data:`DEFAULT_MAX_BYTES`."""
    text = os.environ.get("VTAKIT_CACHE_MAX")
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(text)
    except ValueError as e:
        raise InputError(f"$VTAKIT_CACHE_MAX: {e}") from None


@dataclass
class CacheEntry:
    """One build directory: its kind, path, size in bytes and last use (epoch seconds)."""

    kind: str
    path: Path
    size: int
    last_used: float

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass    # removed meanwhile
    return total


def touch(path: Path) -> None:
    """Mark a build directory as used now."""
    try:
        os.utime(Path(path) / "build.json")
    except OSError:
        pass


def build_once(dest: Path, marker: str, build, *, root: Path) -> tuple[bool, dict]:
    """``(cached, meta)`` of the entry ``dest``: found when its ``marker`` file and its
    ``build.json`` exist (and touched), else made by ``build(tmp)``, which fills a fresh
    directory beside ``dest`` and returns the metadata written to its ``build.json``.

    The new entry is renamed into place (atomic) under the entry's lock, so concurrent
    processes build it once and never see half of one; a failed build leaves nothing, and
    an entry that lost files is replaced.
    Then the cache at ``root`` is pruned to :func:`default_max_bytes` (never ``dest``)."""
    def found():
        try:
            meta = json.loads((dest / "build.json").read_text())
        except FileNotFoundError:
            return None           # not built, or pruned meanwhile
        return meta if (dest / marker).exists() else None

    meta = found()
    if meta is not None:
        touch(dest)               # last use, for LRU pruning
        return True, meta
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f"{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # another process may be building the same entry
        meta = found()
        if meta is not None:
            return True, meta
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            meta = build(tmp)
            (tmp / "build.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
            shutil.rmtree(dest, ignore_errors=True)     # a damaged entry (files lost)
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    prune(root, default_max_bytes(), keep=[dest])
    return False, meta


def cache_entries(root: Path) -> list[CacheEntry]:
    """Every entry of the cache at ``root``, least recently used first."""
    entries = []
    root = Path(root)
    if not root.is_dir():
        return entries
    for kind in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for d in sorted(p for p in kind.iterdir() if p.is_dir() and not p.name.startswith(".")):
            try:
                meta = d / "build.json"
                used = (meta if meta.exists() else d).stat().st_mtime
            except OSError:
                continue
            entries.append(CacheEntry(kind.name, d, _size(d), used))
    entries.sort(key=lambda e: e.last_used)
    return entries


def _remove(entry: CacheEntry, now: float, grace: float) -> bool:
    """Remove one entry under its lock; False if it is in use or was used too recently."""
    if now - entry.last_used < grace:
        return False
    with open(entry.lock_path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False      # being built or looked up right now
        if not entry.path.exists():
            return False
        trash = entry.path.with_name(f".trash-{entry.path.name}-{os.getpid()}")
        os.rename(entry.path, trash)
    shutil.rmtree(trash, ignore_errors=True)
    try:
        entry.lock_path.unlink()
    except OSError:
        pass
    return True


def prune(root: Path, max_bytes: int, *, keep=(), grace: float = GRACE_SECONDS) -> list:
    """Remove least recently used entries until the cache holds at most ``max_bytes``.

    Entries in ``keep`` (paths) and entries in use are skipped. Returns the removed
    entries."""
    if max_bytes < 0:
        raise InputError(f"--max-size {max_bytes}: a cache size must be >= 0")
    keep = {Path(k).resolve() for k in keep}
    entries = cache_entries(root)
    total = sum(e.size for e in entries)
    removed, now = [], time.time()
    for e in entries:
        if total <= max_bytes:
            break
        if e.path.resolve() in keep:
            continue
        if _remove(e, now, grace):
            removed.append(e)
            total -= e.size
    return removed


def clean(root: Path, *, grace: float = 0.0) -> list:
    """Remove every entry not in use; returns the removed entries."""
    now = time.time()
    return [e for e in cache_entries(root) if _remove(e, now, grace)]
