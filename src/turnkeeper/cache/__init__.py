"""Caches in front of a store: an in-process LRU and (optionally) Redis.

Both follow one rule: entries are keyed by the session's `version`, which every write bumps,
so a cache can make reads cheaper but never older. `CachedStore` wraps any `Store` and keeps
its contract; `turnkeeper.open()` puts it in front of the backend when `lru_size` or `redis_url`
is configured. Redis keys are formatted in `cache.keys` only.
"""

from __future__ import annotations

from turnkeeper.cache.lru import SessionLRU
from turnkeeper.cache.store import CachedStore, cached

__all__ = ["CachedStore", "SessionLRU", "cached"]
