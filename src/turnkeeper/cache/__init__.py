"""The cache layer: the one place turnkeeper remembers what it read.

What is cached, keyed by what, invalidated how:

- **Session reads** (`CachedStore`, in front of the backend when `lru_size` or `redis_url` is
  set): message pages, message counts, per-session statistics and the latest summary
  checkpoint. Each entry is keyed by the session's `version` (`cache.keys`: database, session,
  version, what was asked), which every write to the session bumps. Nothing is ever
  invalidated: after a write the next reader asks for a key that did not exist before it, so
  no reader, on any replica, gets a window that misses an acknowledged append; old entries age
  out. Held in an in-process LRU (`SessionLRU`: the `lru_size` most recent sessions, at most
  `lru_max_bytes`, only their current version) and, optionally, in Redis (`RedisCache`, each
  entry for `cache_ttl`; never needed for correctness: an unreachable Redis is a miss). Redis
  key formats live in `cache.keys` only. One write is carried rather than read again: an
  append made through the `CachedStore` learns the version it wrote, and the session's
  in-process pages of the version before become those of the version after (the page plus
  the appended messages); kept because it pays on a reported figure (HTTP on SQLite,
  `bench/results/http-append-carry.md`). An erased session (`ErasureStore`) is the one thing
  removed rather than left to age out: its in-process entries and every Redis key of it go,
  after a marker that every Redis write checks in the same call, so no replica writes one back.
- **Verified API keys** (`cache.api_keys`): the record and stored hash of a key verified
  lately, by key id, for the `api_key_cache` lifetime (a few seconds). Not version-keyed: a
  revocation through the same store object forgets the key at once, one made elsewhere (another
  replica, the CLI) takes effect when the lifetime lapses.
- **The last window per session** (`cache.windows`, `WindowCache`; a service's, when `lru_size`
  is set): the window built for one set of arguments, keyed by the session's `version` and
  those arguments, so an unchanged session asked again gets it without a build; with it, the
  entries that build rendered, so a build for other arguments at the same version reuses them
  instead of rendering each message again. Kept because it pays on reported figures (the warm
  build, `bench/results/r26-service.md`; the rebuild, 0.72× without it,
  `bench/results/r26-window-speed.md`).
Two memories outside this package are not caches of reads: the settings built per process
(`config.load_settings`, keyed by the overrides, the whole environment and the config file's
size and modification time, so any change builds them again) and the token encodings loaded
once per process (`tokens.counter_for`).
"""

from __future__ import annotations

from turnkeeper.cache.lru import SessionLRU
from turnkeeper.cache.store import CachedStore, cached

__all__ = ["CachedStore", "SessionLRU", "cached"]
