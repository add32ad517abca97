"""The caches make repeated reads cheaper, never older, and never required.

The contract suite already runs over a Redis-cached PostgreSQL store (`store` fixture); these
tests pin what only the cache does: the version rule across replicas, TTLs, the LRU bound, and
a real Redis server stopped, frozen and restarted mid-test.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from prometheus_client import REGISTRY

import turnkeeper
from tests.cache.conftest import RedisServer
from tests.conftest import Clock, make_sqlite_store
from turnkeeper.cache import CachedStore, SessionLRU, keys
from turnkeeper.cache.redis_cache import RedisCache
from turnkeeper.config import Settings
from turnkeeper.logs import capture_events
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.sql.postgres import PostgresStore
from turnkeeper.types import MessageQuery


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def redis_only(settings: Settings) -> Settings:
    """Settings that say what a store with Redis and no in-process LRU has: `lru_size` 0
    (so the service remembers no windows either, and every build reads through Redis)."""
    return settings.model_copy(update={"lru_size": 0})


def redis_hits() -> float:
    return metric("turnkeeper_cache_hits_total", layer="redis")


def newest(tk: Turnkeeper, session_id: str) -> str:
    """The content of the last message of a freshly built window."""
    return (
        tk.context(session_id, strategy="sliding_window", budget_tokens=4000).messages[-1].content
    )


def test_replicas_sharing_redis_never_serve_a_window_missing_an_acknowledged_append(
    postgres_url: str, redis_server: str, settings: Settings, clock: Clock
) -> None:
    def replica() -> Turnkeeper:
        store = CachedStore(
            PostgresStore(postgres_url), lru=SessionLRU(100), redis=RedisCache(redis_server)
        )
        return Turnkeeper(store, settings, clock=clock)

    with replica() as writer, replica() as reader:
        session = writer.create_session(key="shared")
        writer.append(session, "system", "You are terse.")
        for turn in range(30):
            newest(reader, session.id)  # caches the window of the current version
            assert newest(reader, session.id) == newest(writer, session.id)
            writer.append(session, "user", f"turn {turn}")
            assert newest(reader, session.id) == f"turn {turn}"
            assert [m.content for m in reader.history(session.id)][-1] == f"turn {turn}"


def test_repeated_reads_are_served_from_the_caches(
    tmp_path: Path, redis_server: str, settings: Settings, clock: Clock
) -> None:
    lru = SessionLRU(100)
    tk = Turnkeeper(
        CachedStore(make_sqlite_store(tmp_path / "c.db"), lru=lru, redis=RedisCache(redis_server)),
        settings,
        clock=clock,
    )
    session = tk.create_session()
    for i in range(40):
        tk.append(session, "user", f"message {i}")
    lru_hits, window_hits, misses = (
        metric("turnkeeper_cache_hits_total", layer="lru"),
        metric("turnkeeper_cache_hits_total", layer="window"),
        metric("turnkeeper_cache_misses_total"),
    )
    first = tk.context(session, strategy="truncate")
    assert metric("turnkeeper_cache_misses_total") > misses
    misses = metric("turnkeeper_cache_misses_total")
    # The same window again is the one remembered for this version; other reads of the
    # same messages come from the LRU.
    assert tk.context(session, strategy="truncate") == first
    assert metric("turnkeeper_cache_hits_total", layer="window") == window_hits + 1
    assert metric("turnkeeper_cache_misses_total") == misses
    assert tk.history(session) == tk.history(session)
    assert metric("turnkeeper_cache_hits_total", layer="lru") > lru_hits
    # A second process (an empty LRU) finds the same entries in Redis.
    lru_cold = Turnkeeper(
        CachedStore(make_sqlite_store(tmp_path / "c.db"), redis=RedisCache(redis_server)),
        settings,
        clock=clock,
    )
    before = redis_hits()
    assert lru_cold.context(session.id, strategy="truncate") == first
    assert redis_hits() > before
    tk.close()
    lru_cold.close()


def test_redis_entries_expire_after_the_cache_ttl(
    tmp_path: Path, redis_server: str, settings: Settings, clock: Clock
) -> None:
    store = make_sqlite_store(tmp_path / "ttl.db")
    tk = Turnkeeper(CachedStore(store, redis=RedisCache(redis_server)), settings, clock=clock)
    session = tk.create_session()
    tk.append(session, "user", "hello")
    tk.history(session)
    version = tk.get_session(session.id).version
    key = keys.messages(keys.namespace(store.url), session.id, version, MessageQuery())
    client = redis.Redis.from_url(redis_server)
    assert 110 <= client.ttl(key) <= 120  # the default two minutes
    client.close()
    tk.close()


def test_the_lru_keeps_only_the_most_recent_sessions_and_their_current_version() -> None:
    lru = SessionLRU(2)
    lru.put("a", 1, "k", "a1")
    lru.put("b", 1, "k", "b1")
    assert lru.get("a", 1, "k") == "a1"  # a is now the most recently used
    lru.put("c", 1, "k", "c1")
    assert lru.get("b", 1, "k") is None and len(lru) == 2
    assert lru.get("a", 2, "k") is None  # a newer version never sees older entries
    lru.put("a", 2, "k", "a2")
    lru.put("a", 1, "k", "late reader of v1")  # ignored: v2 is already held
    assert lru.get("a", 2, "k") == "a2" and lru.get("a", 1, "k") is None


def test_open_puts_the_caches_in_front_of_the_store_when_configured(
    tmp_path: Path, redis_server: str
) -> None:
    url = f"sqlite:///{tmp_path / 'o.db'}"
    with turnkeeper.open(url, redis_url=redis_server) as tk:
        assert isinstance(tk.store, CachedStore)
        assert tk.store.redis is not None and tk.store.lru is not None
        assert tk.store.lru.max_sessions == 100
    with turnkeeper.open(url, lru_size=0) as tk:
        assert not isinstance(tk.store, CachedStore)


def test_redis_stopped_mid_test_falls_back_to_the_store_warns_once_and_resumes_after_restart(
    private_redis: RedisServer, tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    cache = RedisCache(private_redis.url, retry_after=timedelta(milliseconds=200))
    tk = Turnkeeper(
        CachedStore(make_sqlite_store(tmp_path / "f.db"), redis=cache),
        redis_only(settings),
        clock=clock,
    )
    session = tk.create_session()
    tk.append(session, "system", "You are terse.")
    tk.append(session, "user", "before the outage")
    newest(tk, session.id)
    before = redis_hits()
    assert newest(tk, session.id) == "before the outage"
    assert redis_hits() > before

    private_redis.stop()
    bypasses = metric("turnkeeper_cache_bypass_total")
    with capture_events() as logs:
        for i in range(5):
            tk.append(session, "user", f"during the outage {i}")
            assert newest(tk, session.id) == f"during the outage {i}"
            time.sleep(0.1)  # outlast retry_after: each retry fails again, still one warning
    warnings = [e for e in logs if e["event"] == "redis_cache_unavailable"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
    assert metric("turnkeeper_cache_bypass_total") >= bypasses + 5
    assert not cache.available

    private_redis.start()
    time.sleep(0.3)
    with capture_events() as logs:
        tk.append(session, "user", "after the restart")
        assert newest(tk, session.id) == "after the restart"
        before = redis_hits()
        assert newest(tk, session.id) == "after the restart"
    assert redis_hits() > before, "cache use resumed"
    assert [e["event"] for e in logs if e["event"].startswith("redis_cache")] == [
        "redis_cache_restored"
    ]
    assert cache.available
    tk.close()


def test_a_frozen_redis_costs_a_short_timeout_not_a_failed_request(
    private_redis: RedisServer, tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    cache = RedisCache(private_redis.url, timeout=timedelta(milliseconds=50))
    tk = Turnkeeper(
        CachedStore(make_sqlite_store(tmp_path / "slow.db"), redis=cache),
        redis_only(settings),
        clock=clock,
    )
    session = tk.create_session()
    tk.append(session, "user", "hello")
    newest(tk, session.id)
    assert private_redis.process is not None
    pid = private_redis.process.pid
    os.kill(pid, signal.SIGSTOP)  # Redis stops answering but keeps its connections open
    try:
        bypasses = metric("turnkeeper_cache_bypass_total")
        start = time.monotonic()
        tk.append(session, "user", "while Redis is frozen")
        assert newest(tk, session.id) == "while Redis is frozen"
        assert time.monotonic() - start < 1.0
        assert metric("turnkeeper_cache_bypass_total") > bypasses
    finally:
        os.kill(pid, signal.SIGCONT)
    tk.close()


@pytest.mark.parametrize("broken_url", ["redis://127.0.0.1:1/0"])
def test_an_unreachable_redis_at_start_up_is_not_an_error(broken_url: str, tmp_path: Path) -> None:
    with turnkeeper.open(f"sqlite:///{tmp_path / 'u.db'}", redis_url=broken_url) as tk:
        session = tk.create_session()
        tk.append(session, "user", "the store is the source of truth")
        assert [m.content for m in tk.history(session)] == ["the store is the source of truth"]


def test_a_page_read_at_a_known_version_is_answered_for_that_version(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    """A build passes the version it read the session at: the cache answers for it without
    reading the session row (here shown by an older version still getting its own page after
    another process's append, which this cache cannot carry its pages over)."""
    store = CachedStore(make_sqlite_store(tmp_path / "v.db"), lru=SessionLRU(100))
    tk = Turnkeeper(store, settings, clock=clock)
    other = Turnkeeper(make_sqlite_store(tmp_path / "v.db"), settings, clock=clock)
    session = tk.create_session()
    tk.append(session, "user", "a")
    first = tk.get_session(session).version
    assert [m.content for m in store.read_messages_at(session.id, first)] == ["a"]
    other.append(session.id, "user", "b")
    other.close()
    second = tk.get_session(session).version
    hits = metric("turnkeeper_cache_hits_total", layer="lru")
    assert [m.content for m in store.read_messages_at(session.id, first)] == ["a"]
    assert metric("turnkeeper_cache_hits_total", layer="lru") == hits + 1
    assert [m.content for m in store.read_messages_at(session.id, second)] == ["a", "b"]
    assert [m.content for m in store.read_messages(session.id)] == ["a", "b"]
    tk.close()


def test_a_page_read_after_a_write_is_kept_under_the_version_it_was_read_at(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    """A known version older than the row's: the page read is the current one, cached under
    the current version (read with the page, in one statement), never under the old one."""
    store = CachedStore(make_sqlite_store(tmp_path / "w.db"), lru=SessionLRU(100))
    tk = Turnkeeper(store, settings, clock=clock)
    session = tk.create_session()
    tk.append(session, "user", "a")
    stale = tk.get_session(session).version
    tk.append(session, "user", "b")
    current = tk.get_session(session).version
    assert [m.content for m in store.read_messages_at(session.id, stale)] == ["a", "b"]
    hits = metric("turnkeeper_cache_hits_total", layer="lru")
    page, version = store.read_messages_versioned(session.id)
    assert ([m.content for m in page], version) == (["a", "b"], current)
    assert metric("turnkeeper_cache_hits_total", layer="lru") == hits + 1
    tk.close()
