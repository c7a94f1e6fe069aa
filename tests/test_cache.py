"""The RTL build cache: list, clean, LRU prune, locks (fake entries in a private cache)."""

import fcntl
import os
import time

import pytest

from vtakit.cli.main import main
from vtakit.sim import build_cache
from vtakit.sim.build_cache import cache_entries, clean, parse_size, prune


def entry(root, kind, name, size, age):
    d = root / kind / name
    d.mkdir(parents=True)
    (d / "libvta.so").write_bytes(b"x" * size)
    (d / "build.json").write_text("{}")
    t = time.time() - age
    os.utime(d / "build.json", (t, t))
    return d


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VTAKIT_CACHE", str(tmp_path))
    entry(tmp_path, "cxxrtl", "old", 1000, 3000)
    entry(tmp_path, "verilator", "mid", 1000, 2000)
    entry(tmp_path, "cxxrtl", "new", 1000, 1000)
    return tmp_path


def names(root):
    return [e.path.name for e in cache_entries(root)]


def test_entries_least_recently_used_first(cache):
    assert names(cache) == ["old", "mid", "new"]
    assert [e.size for e in cache_entries(cache)] == [1002, 1002, 1002]


def test_prune_removes_least_recently_used(cache):
    removed = prune(cache, 2100)
    assert [e.path.name for e in removed] == ["old"]
    assert names(cache) == ["mid", "new"]
    assert not (cache / "cxxrtl" / "old").exists()
    assert not list(cache.glob("*/.trash-*"))


def test_touch_makes_an_entry_recent(cache):
    build_cache.touch(cache / "cxxrtl" / "old")
    prune(cache, 2100)
    assert names(cache) == ["new", "old"]


def test_prune_skips_locked_and_recent_entries(cache):
    with open(cache / "cxxrtl" / "old.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)       # another process is building/looking it up
        removed = prune(cache, 0)
    assert [e.path.name for e in removed] == ["mid", "new"]
    assert names(cache) == ["old"]
    entry(cache, "cxxrtl", "fresh", 10, 0)       # used just now: within the grace period
    assert prune(cache, 0, grace=60) and names(cache) == ["fresh"]


def test_clean(cache):
    assert len(clean(cache)) == 3 and names(cache) == []


def test_parse_size():
    assert parse_size("2G") == 2 << 30 and parse_size("500M") == 500 << 20
    assert parse_size("1.5KiB") == 1536 and parse_size("4096") == 4096
    with pytest.raises(ValueError, match=r"^size '12x' is not a number of bytes with an "
                                         r"optional unit K, M, G or T \(e.g. 500M, 2G\)$"):
        parse_size("12x")


def test_cli(cache, capsys):
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("cxxrtl/old") and out[-1] == f"3 entries, 2.9K in {cache}"
    assert main(["cache", "prune", "--max-size", "2K"]) == 0
    assert capsys.readouterr().out == "removed 1 entries (1002B); 2.0K left (limit 2.0K)\n"
    with pytest.raises(SystemExit) as e:
        main(["cache", "prune", "--max-size", "lots"])
    assert e.value.code == 2
    assert "argument --max-size: size 'lots' is not a number" in capsys.readouterr().err
    assert main(["cache", "clean"]) == 0
    assert capsys.readouterr().out == f"removed 2 entries (2.0K) from {cache}\n"


def test_env_default_size(monkeypatch):
    monkeypatch.setenv("VTAKIT_CACHE_MAX", "3M")
    assert build_cache.default_max_bytes() == 3 << 20
    monkeypatch.setenv("VTAKIT_CACHE_MAX", "x")
    with pytest.raises(ValueError, match=r"^\$VTAKIT_CACHE_MAX: size 'x' is not"):
        build_cache.default_max_bytes()


def test_build_once_builds_once_and_leaves_nothing_after_a_failure(tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    calls = []

    def build(tmp):
        calls.append(tmp)
        time.sleep(0.2)                 # the others wait on the entry's lock meanwhile
        (tmp / "libvta.so").write_bytes(b"lib")
        return {"key": "k"}

    dest = tmp_path / "verilator" / "vta-k"
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda _: build_cache.build_once(dest, "libvta.so", build,
                                                             root=tmp_path), range(3)))
    assert len(calls) == 1 and sorted(c for c, _ in got) == [False, True, True]
    assert all(meta == {"key": "k"} for _, meta in got)
    assert (dest / "libvta.so").read_bytes() == b"lib"
    assert build_cache.build_once(dest, "libvta.so", build, root=tmp_path) == (True, {"key": "k"})

    def broken(tmp):
        (tmp / "half").write_text("x")
        raise RuntimeError("compiler crashed")

    other = tmp_path / "verilator" / "vta-other"
    with pytest.raises(RuntimeError, match="crashed"):
        build_cache.build_once(other, "libvta.so", broken, root=tmp_path)
    assert not other.exists()
    assert not [p for p in other.parent.iterdir() if p.name.startswith(".vta-other")]
    # an entry that lost its library is built again
    (dest / "libvta.so").unlink()
    assert build_cache.build_once(dest, "libvta.so", build, root=tmp_path)[0] is False
    assert len(calls) == 2
