"""``vtakit cache list|clean|prune --max-size SIZE``: the RTL build cache ($VTAKIT_CACHE)."""

from __future__ import annotations

import time

from ...sim.build_cache import (cache_entries, clean, default_max_bytes, format_size, parse_size,
                               prune)
from ...sim.rtl_build import cache_root

__all__ = ["register"]


def register(sub):
    p = sub.add_parser("cache", help="list, clean or prune the RTL build cache")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    csub.add_parser("list", help="entries, least recently used first, with sizes").set_defaults(
        func=run_list)
    csub.add_parser("clean", help="remove every entry not in use").set_defaults(func=run_clean)
    pr = csub.add_parser("prune", help="remove least recently used entries down to a size")
    pr.add_argument("--max-size", metavar="SIZE", type=_size,
                    help="largest cache size, e.g. 500M or 2G (default: $VTAKIT_CACHE_MAX, "
                         "else 2G)")
    pr.set_defaults(func=run_prune)


def _size(text):
    import argparse
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def run_list(args):
    root = cache_root()
    entries = cache_entries(root)
    now = time.time()
    for e in entries:
        age = (now - e.last_used) / 3600
        print(f"{format_size(e.size):>8}  {age:8.1f} h ago  {e.kind}/{e.path.name}")
    print(f"{len(entries)} entries, {format_size(sum(e.size for e in entries))} in {root}")


def run_clean(args):
    removed = clean(cache_root())
    print(f"removed {len(removed)} entries ({format_size(sum(e.size for e in removed))}) "
          f"from {cache_root()}")


def run_prune(args):
    limit = args.max_size if args.max_size is not None else default_max_bytes()
    removed = prune(cache_root(), limit)
    left = sum(e.size for e in cache_entries(cache_root()))
    print(f"removed {len(removed)} entries ({format_size(sum(e.size for e in removed))}); "
          f"{format_size(left)} left (limit {format_size(limit)})")
