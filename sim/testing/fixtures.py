"""Golden fixtures: programs built by the runtime, with the behavioral model's result.

Each ``tests/fixtures/<name>__<preset>.npz`` holds a :class:`~vtakit.runtime.image.DramImage`
(``dram``, ``insn_addr``, ``insn_count``: the whole device DRAM with the program,
before the run), ``expected_dram`` (the behavioral model's final DRAM, same length)
and ``preset``. Every fixture's output was checked against numpy when it was
generated (``tests/fixtures/generate.py``).

Replay one on any backend::

    from vtakit.testing import load_fixtures, assert_replay
    for fx in load_fixtures("tiny"):
        assert_replay(fx, open_device("verilator", fx.preset))
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtakit.runtime.compare import first_difference as _first_difference
from vtakit.runtime.image import DramImage

__all__ = ["Fixture", "FIXTURE_DIR", "load_fixtures", "fixture_path", "assert_replay",
           "first_difference"]

#: The golden fixtures of a source checkout (``tests/fixtures``); an installed package
#: has none unless ``$VTAKIT_FIXTURES`` names a directory of them.
FIXTURE_DIR = Path(os.environ.get("VTAKIT_FIXTURES")
                   or Path(__file__).resolve().parents[2] / "tests" / "fixtures")


@dataclass
class Fixture:
    """One golden program: ``image`` to run, ``expected`` final DRAM (uint8)."""

    name: str
    preset: str
    image: DramImage
    expected: np.ndarray

    @property
    def id(self) -> str:
        return f"{self.name}__{self.preset}"


def fixture_path(name: str, preset: str) -> Path:
    return FIXTURE_DIR / f"{name}__{preset}.npz"


def _load(path: Path) -> Fixture:
    with np.load(path, allow_pickle=False) as npz:
        image = DramImage(npz["dram"], int(npz["insn_addr"]), int(npz["insn_count"]))
        expected, preset = npz["expected_dram"], str(npz["preset"])
    name, _, file_preset = path.stem.rpartition("__")
    if file_preset != preset or expected.shape != image.dram.shape or expected.dtype != np.uint8:
        raise ValueError(f"{path}: inconsistent fixture (preset {preset!r}, expected_dram "
                         f"{expected.dtype} {expected.shape}, dram {image.dram.shape})")
    return Fixture(name, preset, image, expected)


def load_fixtures(preset: str | None = None) -> list[Fixture]:
    """Every fixture (of one preset if given), sorted by name then preset."""
    if not FIXTURE_DIR.is_dir():
        raise FileNotFoundError(f"no golden fixtures at {FIXTURE_DIR}: they live in a source "
                                "checkout's tests/fixtures (or set VTAKIT_FIXTURES)")
    paths = sorted(FIXTURE_DIR.glob("*__*.npz"))
    fixtures = [_load(p) for p in paths]
    return [f for f in fixtures if preset is None or f.preset == preset]


def first_difference(got: np.ndarray, expected: np.ndarray) -> str | None:
    """None if equal, else a sentence locating the first differing byte
    (:func:`vtakit.runtime.compare.first_difference`)."""
    got, expected = np.asarray(got, dtype=np.uint8), np.asarray(expected, dtype=np.uint8)
    if got.shape != expected.shape:
        return f"final DRAM has {got.size} bytes, expected {expected.size}"
    d = _first_difference(expected, got)
    if d is None:
        return None
    return (f"{d.count} bytes differ; first at 0x{d.index[0]:x}: got 0x{d.actual:02x}, "
            f"expected 0x{d.expected:02x}")


def assert_replay(fixture: Fixture, device) -> None:
    """Run a fixture's image on a device and assert the final DRAM is byte-identical."""
    record = device.run_image(fixture.image)
    diff = first_difference(record.dram, fixture.expected)
    if diff is not None:
        raise AssertionError(f"fixture {fixture.id} on {device.name}: {diff}")
