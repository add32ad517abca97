"""API keys verified lately, remembered for the `api_key_cache` setting's lifetime.

A service verifies the same few keys on every request; remembering a verified key (its record
and stored hash, by key id) saves a read of the store per request, one of a request's few
round trips on PostgreSQL (`bench/roundtrips_http.py`). Unlike the session caches this one is
not keyed by a version: a key is trusted until its lifetime lapses, so a revocation made
elsewhere (another replica, the CLI) takes effect within that lifetime. A revocation through
any `ApiKeys` over the same store object forgets the key at once: the remembered keys are one
`VerifiedKeys` per store object (`verified_keys_of`).
"""

from __future__ import annotations

import threading
import time
import weakref
from datetime import timedelta

from turnkeeper.recent import RecentlyUsed
from turnkeeper.types import ApiKey

__all__ = ["VERIFIED_KEYS", "VerifiedKeys", "verified_keys_of"]

VERIFIED_KEYS = 1024
"""Most keys a store's `VerifiedKeys` remembers (least recently verified forgotten first)."""


class VerifiedKeys:
    """Keys verified lately, by id: the record, its stored hash and until when (monotonic) it
    may be used without reading the store again. Thread-safe and bounded."""

    def __init__(self, size: int = VERIFIED_KEYS) -> None:
        self._entries: RecentlyUsed[str, tuple[ApiKey, str, float]] = RecentlyUsed(size)

    def get(self, key_id: str) -> tuple[ApiKey, str] | None:
        found = self._entries.get(key_id)
        if found is None:
            return None
        if found[2] <= time.monotonic():
            self._entries.forget(key_id)
            return None
        return found[0], found[1]

    def put(self, key: ApiKey, stored_hash: str, lifetime: timedelta) -> None:
        until = time.monotonic() + lifetime.total_seconds()
        self._entries.put(key.id, (key, stored_hash, until))

    def forget(self, key_id: str) -> None:
        self._entries.forget(key_id)


_BY_STORE: weakref.WeakKeyDictionary[object, VerifiedKeys] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


def verified_keys_of(store: object) -> VerifiedKeys:
    """The keys remembered for `store` (one set per store object, made on first use), shared
    by every `ApiKeys` over it, so that revoking through any of them forgets the key for all."""
    with _GUARD:
        verified = _BY_STORE.get(store)
        if verified is None:
            verified = _BY_STORE[store] = VerifiedKeys()
        return verified
