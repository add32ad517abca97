"""A `Store` that caches the costly reads of another `Store`, and keeps the same contract.

Nothing above it knows a cache is there. Writes go straight to the store. The reads a context
build repeats — message pages and tails, counts, per-session statistics — are cached under keys
that carry the session's `version`, which every write bumps. Before each cached read the wrapper
reads the session row itself (a primary-key lookup) to learn the current version, so a reader
that comes after an acknowledged append asks for a key that did not exist before it: no reader,
on any replica, can get a window that misses an acknowledged append.

A value is cached only if the version did not move while it was read from the store (checked by
reading the row again), so an entry always holds exactly what its version contained.

One write is not a reason to read again: an append made through this wrapper learns the version
it wrote (`VersionedAppendStore`), and the session's in-process entries of the version before it
are carried to that version (`SessionLRU.advance`): each page becomes the page of its query over
the page plus the appended messages, summaries stay, counts and statistics are dropped. The
append is the only write between the two versions, so the carried pages are exactly what a read
would return. It is the difference between a chat turn reading its history from the database
after every append or not: measured in bench/results/http-append-carry.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from turnkeeper import metrics, records
from turnkeeper.cache import keys
from turnkeeper.cache.lru import Carried, SessionLRU
from turnkeeper.config import Settings
from turnkeeper.errors import SessionErased, SessionNotFound
from turnkeeper.storage.base import (
    AdminStore,
    ErasureStore,
    RetentionStore,
    SessionLookupStore,
    Store,
    StoreWrapper,
    SummaryStore,
    VersionedAppendStore,
    VersionedReadStore,
    WithoutVersion,
)
from turnkeeper.types import (
    ErasedSession,
    Message,
    MessageDraft,
    MessageQuery,
    Session,
    SessionStats,
    SummaryCheckpoint,
)

if TYPE_CHECKING:  # without importing redis at run time
    from turnkeeper.cache.redis_cache import RedisCache

T = TypeVar("T")

ERASED_MARKER_TTL = timedelta(hours=1)
"""How long Redis keeps the marker of an erased session (at least the cache TTL): a replica that
read the session before the erasure may try to write an entry of it until then."""


def _encode_messages(messages: Sequence[Message]) -> bytes:
    return _dump([records.message_record(m) for m in messages])


def _decode_messages(raw: bytes) -> tuple[Message, ...]:
    return tuple(records.message_from_record(record) for record in json.loads(raw))


def _encode_count(value: int) -> bytes:
    return str(value).encode()


def _decode_count(raw: bytes) -> int:
    return int(raw)


def _encode_stats(stats: SessionStats) -> bytes:
    return _dump(records.stats_record(stats))


def _decode_stats(raw: bytes) -> SessionStats:
    return records.stats_from_record(json.loads(raw))


def _encode_summary(checkpoint: SummaryCheckpoint | None) -> bytes:
    return _dump(None if checkpoint is None else records.summary_record(checkpoint))


def _decode_summary(raw: bytes) -> SummaryCheckpoint | None:
    record = json.loads(raw)
    return None if record is None else records.summary_from_record(record)


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


class CachedStore(StoreWrapper):
    """`Store` over another store, with an in-process LRU and/or Redis in front of its reads.

    It has the capabilities of the store it wraps, and only those (`StoreWrapper`; the methods
    it hands straight on are `PASSED_THROUGH`). The cached reads of a capability
    (`latest_summary`, `session_stats`) sit beside the methods passed through and are reached
    only through the capability that has them."""

    def __init__(
        self,
        inner: Store,
        *,
        lru: SessionLRU | None = None,
        redis: RedisCache | None = None,
    ) -> None:
        super().__init__(inner, PASSED_THROUGH)
        self.lru = lru
        self.redis = redis
        self._ns = keys.namespace(inner.url)
        self._says_versions = isinstance(inner, VersionedAppendStore)
        """Asked once: a protocol's `isinstance` looks up each of its methods, a cost an
        append would pay every time."""
        if isinstance(inner, ErasureStore):
            self.erase_session = self._erase_session
        if isinstance(inner, SessionLookupStore):
            self.lookup_session = self._lookup_session
        if isinstance(inner, RetentionStore):
            self.delete_messages_before = self._delete_messages_before

    # -- the cache rule ---------------------------------------------------------------------

    def _cached(
        self,
        session_id: str,
        slot: Hashable,
        key_for: Callable[[int], str],
        load: Callable[[], T],
        encode: Callable[[T], bytes],
        decode: Callable[[bytes], T],
        *,
        known_version: int | None = None,
        load_versioned: Callable[[], tuple[T, int | None]] | None = None,
    ) -> tuple[T, int]:
        """The value under the session's version, and that version: in the LRU under `slot`,
        in Redis under `key_for(version)`.

        The version is `known_version` when the caller read the session already (a request
        reads its session first), else the session row's. On a miss, `load_versioned` reads
        the value with the version of the same snapshot, and the value is kept under that;
        a value read without it is kept only if the session's version did not move meanwhile
        (one more read of the row)."""
        if known_version is not None:
            version = known_version
        else:
            version = self.inner.get_session(session_id).version
        if self.lru is not None:
            held = self.lru.get(session_id, version, slot)
            if held is not None:
                metrics.CACHE_HITS.labels("lru").inc()
                return held, version
        if self.redis is not None:
            raw = self.redis.get(key_for(version))
            if raw is not None:
                value = decode(raw)
                metrics.CACHE_HITS.labels("redis").inc()
                if self.lru is not None:
                    self.lru.put(session_id, version, slot, value)
                return value, version
        metrics.CACHE_MISSES.inc()
        value, read_at = load_versioned() if load_versioned is not None else (load(), None)
        if read_at is None:  # the value says nothing of its version: did the row move?
            read_at = self.inner.get_session(session_id).version
            if read_at != version:
                return value, read_at  # written meanwhile: of no known version, not kept
        if self.lru is not None:
            self.lru.put(session_id, read_at, slot, value)
        if self.redis is not None:
            self.redis.set(
                key_for(read_at), encode(value), unless=keys.erased(self._ns, session_id)
            )
        return value, read_at

    # -- cached reads -----------------------------------------------------------------------

    def read_messages(self, session_id: str, query: MessageQuery = MessageQuery()) -> list[Message]:
        return self._page(session_id, None, query)[0]

    def read_messages_at(
        self, session_id: str, version: int, query: MessageQuery = MessageQuery()
    ) -> list[Message]:
        return self._page(session_id, version, query)[0]

    def read_messages_versioned(
        self, session_id: str, query: MessageQuery = MessageQuery()
    ) -> tuple[list[Message], int | None]:
        return self._page(session_id, None, query)

    def _page(
        self, session_id: str, known_version: int | None, query: MessageQuery
    ) -> tuple[list[Message], int | None]:
        """A page and the version it is of: from the caches under the version (the caller's,
        else the session row's), else from the store with the version of its snapshot."""

        def load_versioned() -> tuple[tuple[Message, ...], int | None]:
            if isinstance(self.inner, VersionedReadStore):
                page, version = self.inner.read_messages_versioned(session_id, query)
                return tuple(page), version
            return tuple(self.inner.read_messages(session_id, query)), None

        try:
            page, version = self._cached(
                session_id,
                ("messages", query),
                lambda version: keys.messages(self._ns, session_id, version, query),
                lambda: tuple(self.inner.read_messages(session_id, query)),
                _encode_messages,
                _decode_messages,
                known_version=known_version,
                load_versioned=load_versioned,
            )
        except SessionNotFound:
            return self.inner.read_messages(session_id, query), None
        return list(page), version

    def count_messages(
        self, session_id: str, *, before_seq: int | None = None, include_internal: bool = True
    ) -> int:
        def load() -> int:
            return self.inner.count_messages(
                session_id, before_seq=before_seq, include_internal=include_internal
            )

        try:
            count, _ = self._cached(
                session_id,
                ("count", before_seq, include_internal),
                lambda version: keys.count(
                    self._ns,
                    session_id,
                    version,
                    before_seq=before_seq,
                    include_internal=include_internal,
                ),
                load,
                _encode_count,
                _decode_count,
            )
        except SessionNotFound:
            return load()
        return count

    # -- the rest of the core goes to the store ---------------------------------------------

    def get_session(self, session_id: str) -> Session:
        try:
            return self.inner.get_session(session_id)
        except SessionErased:
            self._forget(session_id)  # erased elsewhere: what this process holds goes too
            raise

    def _lookup_session(self, ref: str, project: str) -> Session:
        try:
            return cast(SessionLookupStore, self.inner).lookup_session(ref, project)
        except SessionErased:
            self._forget(ref)
            raise

    append_messages = WithoutVersion(Store.append_messages)

    def append_messages_versioned(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None = None,
        now: datetime,
    ) -> tuple[list[Message], int | None]:
        """The append, and the in-process entries carried to the version it wrote (see the
        module), where the store says which version that is (`VersionedAppendStore`); else the
        version is None and nothing is carried."""
        if not self._says_versions:
            return self.inner.append_messages(
                session_id, drafts, expected_last_seq=expected_last_seq, now=now
            ), None
        stored, version = cast(VersionedAppendStore, self.inner).append_messages_versioned(
            session_id, drafts, expected_last_seq=expected_last_seq, now=now
        )
        if version is not None and self.lru is not None:
            self.lru.advance(session_id, version - 1, version, _carried_over(stored))
        return stored, version

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            if self.redis is not None:
                self.redis.close()

    # -- erasure ----------------------------------------------------------------------------

    def _erase_session(self, session_id: str, *, now: datetime) -> ErasedSession | None:
        """The store's erasure, then every cached entry of the session: this process's, and
        Redis's — after a marker that stops any replica from writing one again (`keys`)."""
        erased = cast(ErasureStore, self.inner).erase_session(session_id, now=now)
        if erased is not None:
            self._forget(session_id, everywhere=True)
        return erased

    def _delete_messages_before(self, session_id: str, cutoff: datetime) -> int | None:
        """The store's deletion of old messages, then every cached entry of the session, here
        and in Redis. The version it bumps already keeps every reader, on any replica, from
        the entries of before (each key carries its version); forgetting them takes the
        deleted text out of the caches now rather than when they age out. No marker: the
        session lives on and is cached again at its new version (so a replica that read the
        old version just before may still write an entry of it, which no reader asks for and
        which ages out with the TTL)."""
        deleted = cast(RetentionStore, self.inner).delete_messages_before(session_id, cutoff)
        if deleted:
            if self.lru is not None:
                self.lru.forget(session_id)
            if self.redis is not None:
                self.redis.forget(keys.of_session(self._ns, session_id))
        return deleted

    def _forget(self, session_id: str, *, everywhere: bool = False) -> None:
        """Drop the session's entries from the LRU, and with `everywhere` from Redis."""
        if self.lru is not None:
            self.lru.forget(session_id)
        if everywhere and self.redis is not None:
            self.redis.forget(
                keys.of_session(self._ns, session_id),
                marker=keys.erased(self._ns, session_id),
                marker_ttl=ERASED_MARKER_TTL,
            )

    # -- cached reads of capabilities (each reached only through its capability) -----------

    def latest_summary(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> SummaryCheckpoint | None:
        # A cached "none yet" is safe too: saving a checkpoint bumps the version.
        def load() -> SummaryCheckpoint | None:
            return cast(SummaryStore, self.inner).latest_summary(session_id, upto_seq=upto_seq)

        try:
            summary, _ = self._cached(
                session_id,
                ("summary", upto_seq),
                lambda version: keys.summary(self._ns, session_id, version, upto_seq=upto_seq),
                load,
                _encode_summary,
                _decode_summary,
            )
        except SessionNotFound:  # the contract: a missing session has no checkpoint (None)
            return load()
        return summary

    def session_stats(self, session_id: str) -> SessionStats:
        stats, _ = self._cached(
            session_id,
            ("stats",),
            lambda version: keys.stats(self._ns, session_id, version),
            lambda: cast(AdminStore, self.inner).session_stats(session_id),
            _encode_stats,
            _decode_stats,
        )
        return stats


def _carried_over(appended: Sequence[Message]) -> Callable[[Hashable, Any], Carried | None]:
    """How an LRU entry of a session reads after `appended` were added to it (see the module):
    a page is its query's page after the append (`_page_after`), a summary checkpoint is
    unchanged, the rest is dropped."""

    def carry(slot: Hashable, value: Any) -> Carried | None:
        match slot:
            case ("messages", MessageQuery() as query):
                return _page_after(query, value, appended)
            case ("summary", _):
                return Carried(value)
        return None

    return carry


def _page_after(
    query: MessageQuery, page: tuple[Message, ...], appended: Sequence[Message]
) -> Carried:
    """`query`'s page after `appended` were stored, from its page before.

    When every appended message is above the page's newest (a fresh append always is), the
    ones the query selects extend the page at its newest end and push out, past its limit,
    what falls off the other: a page of a long session is carried in one step, not sorted and
    weighed again message by message on every append. Otherwise (the page is empty, or a
    retried message is among them) the page is the query's page over both, one per seq."""
    if page and min(m.seq for m in appended) > max(page[0].seq, page[-1].seq):
        fresh = sorted(
            (m for m in appended if query.selects(m)),
            key=lambda m: m.seq,
            reverse=query.newest_first,
        )
        if query.newest_first:
            grown = (*fresh, *page)
            kept = grown if query.limit is None else grown[: query.limit]
            return Carried(kept, added=fresh, removed=grown[len(kept) :])
        room = len(fresh) if query.limit is None else max(0, query.limit - len(page))
        return Carried((*page, *fresh[:room]), added=fresh[:room])
    by_seq = {m.seq: m for m in page} | {m.seq: m for m in appended}
    rebuilt = tuple(query.page(by_seq.values()))
    return Carried(rebuilt, added=(rebuilt,), removed=(page,))


PASSED_THROUGH = (
    *("list_summaries", "save_summary"),  # SummaryStore (a save bumps the version)
    *("expire_sessions", "project_stats"),  # AdminStore
    *("get_agent_state", "list_agent_states", "update_agent_state"),  # AgentStateStore
    "read_traces",  # TraceStore
    "import_session",  # TransferStore
    *("create_api_key", "find_api_key", "list_api_keys", "revoke_api_key"),  # ApiKeyStore
    "exclusive_lock",  # LockingStore
    # ForkStore: forking writes only the new branch (nothing cached yet) and reads the source
    # inside the backend's transaction, so it invalidates nothing.
    *("fork_session", "list_branches", "fork_origin"),
    # ErasureStore: `erase_session` is bound to `_erase_session` (it forgets what is cached).
    *("tombstones", "lift_tombstones", "legal_holds", "held_sessions"),
    *("set_session_hold", "set_project_hold"),  # a hold is not cached: it changes no version
    # TurnAttemptStore: shared state between processes, read as it changes: never cached.
    *("begin_turn_attempt", "renew_turn_attempt", "end_turn_attempt", "get_turn_attempt"),
    "message_seq_runs",  # SeqRunStore
    # RetentionStore: `delete_messages_before` is bound to `_delete_messages_before`.
    "count_messages_before",
    # CutPointStore: the cut point is a field of the session row, which is never cached.
    "move_cut_point",
    "search_messages",  # SearchStore
    "messages_with_words",  # WordMatchStore
)
"""The optional store methods a `CachedStore` hands straight to its store, when it has them."""


def cached(store: Store, settings: Settings) -> CachedStore:
    """`store` behind the caches `settings` configure (`lru_size`, `redis_url`)."""
    redis = None
    if settings.redis_url is not None:
        from turnkeeper.cache.redis_cache import RedisCache

        redis = RedisCache(
            settings.redis_url, timeout=settings.redis_timeout, ttl=settings.cache_ttl
        )
    lru = SessionLRU(settings.lru_size, settings.lru_max_bytes) if settings.lru_size else None
    return CachedStore(store, lru=lru, redis=redis)
