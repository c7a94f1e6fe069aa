"""DRAM images and run results as ``.npz`` files (format: docs/reference/formats.md).

An image holds ``dram`` (uint8, the whole memory, byte address 0 first),
``insn_addr`` (byte address of the first instruction) and ``insn_count``. A
result holds the final ``dram`` (same length as the input image), ``cycles``
(-1 where a backend has no clock) and ``stats`` (JSON counters).

An image may also hold ``config``: the ``vta_config.json`` dictionary (JSON text)
of the hardware it was built for, so a tool can run it without being told the
config. Images without it still load (``config`` is then None).

Both ``save`` methods write ``<path>.npz`` when ``path`` does not end in ``.npz``
(as :func:`numpy.savez` does) and return the path they wrote.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..hw.errors import VtakitError
from ..hw.spec import INSN_BYTES

__all__ = ["DramImage", "RunRecord", "ImageError", "npz_path", "write_atomic"]


class ImageError(VtakitError, ValueError):
    """An unreadable or malformed image or result file."""


def npz_path(path):
    """The file ``numpy.savez`` writes for ``path``: ``.npz`` appended unless already there.

    File objects are returned unchanged."""
    if not isinstance(path, (str, os.PathLike)):
        return path
    path = Path(path)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def _open(path, keys):
    path = Path(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise ImageError(f"{path}: no such file") from None
    except OSError as e:
        raise ImageError(f"{path}: cannot read ({e.strerror})") from None
    if magic != b"PK\x03\x04":    # numpy would try to unpickle anything else
        raise ImageError(f"{path}: not a .npz archive (no zip header; write it with "
                         "numpy.savez or DramImage.save)")
    try:
        npz = np.load(path, allow_pickle=False)
    except Exception as e:  # numpy raises several types for a bad archive
        raise ImageError(f"{path}: not a .npz archive ({e})") from None
    with npz:
        missing = [k for k in keys if k not in npz.files]
        if missing:
            raise ImageError(f"{path}: missing array {missing[0]!r}; an image needs "
                             + ", ".join(keys))
        arrays = {}
        for k in npz.files:
            try:
                arrays[k] = npz[k]
            except Exception as e:  # truncated member, object array, bad header
                raise ImageError(f"{path}: array {k!r} is unreadable ({e})") from None
        return arrays


def write_atomic(path, write) -> Path:
    """Call ``write(file object)`` on a temporary file next to ``path``, then rename it
    onto ``path``: a failed or interrupted write never leaves a half-written file."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    except OSError as e:
        raise OSError(f"{path}: cannot write ({e.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise OSError(f"{path}: cannot write ({e.strerror or e})") from None
        raise
    return path


def _scalar(path, arrays, key):
    v = arrays[key]
    if v.shape != () or v.dtype.kind not in "iu":
        raise ImageError(f"{path}: {key!r} must be an integer scalar, got {v.dtype} {v.shape}")
    return int(v)


@dataclass
class DramImage:
    """A program ready to run: memory image plus the instruction range.

    Attributes
    ----------
    config : dict or None
        The ``VTAConfig.to_dict()`` of the hardware the program was built for,
        or None when unknown (images saved before this entry existed).
    """

    dram: np.ndarray
    insn_addr: int
    insn_count: int
    config: dict | None = None

    def __post_init__(self):
        self.dram = np.asarray(self.dram, dtype=np.uint8)
        if self.insn_addr < 0 or self.insn_count < 0:
            raise ImageError(f"insn_addr {self.insn_addr} and insn_count "
                             f"{self.insn_count} must be >= 0")
        if self.insn_addr % INSN_BYTES:
            raise ImageError(f"insn_addr 0x{self.insn_addr:x} is not {INSN_BYTES}-byte aligned")
        if self.insn_count < 0 or self.insn_addr + INSN_BYTES * self.insn_count > len(self.dram):
            raise ImageError(f"{self.insn_count} instructions at 0x{self.insn_addr:x} run past "
                             f"the end of the {len(self.dram)}-byte image")

    def save(self, path) -> Path:
        """Write the image; returns the path written (``.npz`` appended if missing)."""
        path = npz_path(path)
        extra = {} if self.config is None else {"config": np.array(json.dumps(self.config))}
        save = lambda f: np.savez_compressed(  # noqa: E731
            f, dram=self.dram, insn_addr=np.int64(self.insn_addr),
            insn_count=np.int64(self.insn_count), **extra)
        if not isinstance(path, (str, os.PathLike)):
            save(path)
            return path
        return write_atomic(path, save)

    @classmethod
    def load(cls, path) -> "DramImage":
        arrays = _open(path, ("dram", "insn_addr", "insn_count"))
        dram = arrays["dram"]
        if dram.dtype != np.uint8 or dram.ndim != 1:
            raise ImageError(f"{path}: 'dram' must be a 1-D uint8 array, got {dram.dtype} "
                             f"{dram.shape}")
        insn_addr = _scalar(path, arrays, "insn_addr")    # names the path itself
        insn_count = _scalar(path, arrays, "insn_count")
        config = None
        if "config" in arrays:
            try:
                config = json.loads(str(arrays["config"]))
            except json.JSONDecodeError as e:
                raise ImageError(f"{path}: 'config' is not JSON text ({e})") from None
            if not isinstance(config, dict):
                raise ImageError(f"{path}: 'config' must be a JSON object of VTA keys, got "
                                 f"{type(config).__name__}")
        try:
            return cls(dram, insn_addr, insn_count, config)
        except ImageError as e:
            raise ImageError(f"{path}: {e}") from None

    def resolve_config(self, requested=None):
        """The config to run or decode this image with.

        Parameters
        ----------
        requested : VTAConfig, preset name, JSON path or None
            The config asked for (e.g. ``--config``); None to use the image's own.

        Returns
        -------
        VTAConfig
            ``requested`` if given, else the image's recorded config, else ``default``.

        Raises
        ------
        ImageError
            If both are known and name different hardware.
        """
        from ..hw.config import load_config
        recorded = None
        if self.config is not None:
            recorded = load_config(self.config)
        if requested is None:
            return recorded if recorded is not None else load_config("default")
        config = load_config(requested)
        if recorded is not None and config.name != recorded.name:
            from ..hw.config import extension_note
            raise ImageError(f"the image was built for config {recorded.name}, not "
                             f"{config.name}{extension_note(recorded, config)}; leave the "
                             f"config out to use the image's")
        return config

    def instructions(self) -> bytes:
        return self.dram[self.insn_addr:self.insn_addr + INSN_BYTES * self.insn_count].tobytes()


@dataclass
class RunRecord:
    """The result of running an image: final memory, cycles and counters."""

    dram: np.ndarray
    cycles: int = -1
    stats: dict = field(default_factory=dict)

    def save(self, path) -> Path:
        """Write the result; returns the path written (``.npz`` appended if missing)."""
        path = npz_path(path)
        save = lambda f: np.savez_compressed(  # noqa: E731
            f, dram=np.asarray(self.dram, dtype=np.uint8), cycles=np.int64(self.cycles),
            stats=np.array(json.dumps(self.stats)))
        if not isinstance(path, (str, os.PathLike)):
            save(path)
            return path
        return write_atomic(path, save)

    @classmethod
    def load(cls, path) -> "RunRecord":
        arrays = _open(path, ("dram", "cycles", "stats"))
        return cls(arrays["dram"], _scalar(path, arrays, "cycles"), json.loads(str(arrays["stats"])))
