"""Imports every built-in pass module (so the registry knows them)."""

from . import basic, fuse_ops, lifting, normal_form, simplify  # noqa: F401

__all__: list[str] = []
