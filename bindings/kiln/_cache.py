"""kiln.cache_info() and kiln.clear_cache(): the disk cache of compiled code that both entry points
and every process of the user share (docs/disk-cache.md)."""

from __future__ import annotations

from . import _C


def cache_info() -> dict:
    """The disk cache: `dir`, `enabled` (and `why_disabled` when not), `entries`, `bytes` (on
    disk) and `max_bytes` (the cap, KILN_CACHE_MAX_MB)."""
    return _C.cache_info()


def clear_cache() -> None:
    """Deletes every entry; later compiles store theirs again."""
    _C.clear_cache()
