"""An append through the cache carries the session's in-process pages to the version it wrote
(`CachedStore`, `SessionLRU.advance`): the next read is served without the store, and is
exactly what the store would answer, for every kind of page."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

import turnkeeper
from tests.conftest import make_sqlite_store
from turnkeeper.cache import CachedStore, SessionLRU
from turnkeeper.cache import lru as lru_module
from turnkeeper.cache.lru import Carried, weigh
from turnkeeper.storage.base import read_messages_at
from turnkeeper.types import MessageDraft, MessageQuery, NewSession, Role

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def misses() -> float:
    return REGISTRY.get_sample_value("turnkeeper_cache_misses_total") or 0.0


def draft(n: int, *, internal: bool = False) -> MessageDraft:
    return MessageDraft(
        id=f"m-{n}", role=Role.USER, content=f"message {n}", tokens=3, created_at=NOW,
        internal=internal,
    )  # fmt: skip


def test_a_page_read_after_an_append_is_served_from_memory(tmp_path: Path) -> None:
    store = CachedStore(make_sqlite_store(tmp_path / "c.db"), lru=SessionLRU(10))
    session = store.create_session(NewSession(project="p"), now=NOW)
    store.append_messages(session.id, [draft(n) for n in range(1, 6)], now=NOW)
    tail = MessageQuery(newest_first=True, limit=3)
    version = store.get_session(session.id).version
    assert [m.seq for m in read_messages_at(store, session.id, version, tail)] == [5, 4, 3]
    before = misses()
    store.append_messages(session.id, [draft(6)], now=NOW)
    version = store.get_session(session.id).version
    page = read_messages_at(store, session.id, version, tail)
    assert [m.seq for m in page] == [6, 5, 4]
    assert misses() == before  # carried over the append, not read again
    assert page == store.inner.read_messages(session.id, tail)
    store.close()


def test_a_write_the_cache_did_not_make_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    cached = CachedStore(make_sqlite_store(path), lru=SessionLRU(10))
    other = make_sqlite_store(path)  # another process, say: its appends pass no cache here
    session = cached.create_session(NewSession(project="p"), now=NOW)
    cached.append_messages(session.id, [draft(1)], now=NOW)
    query = MessageQuery(newest_first=True, limit=5)
    cached.read_messages(session.id, query)
    other.append_messages(session.id, [draft(2)], now=NOW)
    cached.append_messages(session.id, [draft(3)], now=NOW)  # two versions on: nothing carried
    before = misses()
    assert [m.seq for m in cached.read_messages(session.id, query)] == [3, 2, 1]
    assert misses() == before + 1
    cached.close()
    other.close()


def test_the_lru_carries_only_the_version_before_the_write() -> None:
    lru = SessionLRU(10)
    lru.put("s", 3, "page", ("a",))
    lru.put("s", 3, "count", 1)
    lru.advance("s", 2, 4, lambda slot, value: Carried(value))  # not the version held
    assert lru.get("s", 3, "page") == ("a",)
    lru.advance(
        "s",
        3,
        4,
        lambda slot, value: Carried((*value, "b"), added=("b",)) if slot == "page" else None,
    )
    assert lru.get("s", 4, "page") == ("a", "b") and lru.get("s", 4, "count") is None
    assert lru.get("s", 3, "page") is None
    assert lru.weight == weigh(("a", "b"))  # the count's weight went, the page's is its new one


QUERIES = st.builds(
    MessageQuery,
    from_seq=st.none() | st.integers(1, 12),
    to_seq=st.none() | st.integers(1, 12),
    include_internal=st.booleans(),
    newest_first=st.booleans(),
    limit=st.none() | st.integers(1, 6),
)
BATCHES = st.lists(
    st.tuples(st.integers(1, 16), st.booleans()), min_size=1, max_size=3, unique_by=lambda d: d[0]
)
"""An append: (message number, internal) per draft; a number stored before is a retry."""


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(BATCHES, st.lists(QUERIES, max_size=3)), max_size=8))
def test_carried_pages_are_what_the_store_answers(
    steps: list[tuple[list[tuple[int, bool]], list[MessageQuery]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = CachedStore(make_sqlite_store(Path(tmp) / "c.db"), lru=SessionLRU(10))
        session = store.create_session(NewSession(project="p"), now=NOW)
        internal_of: dict[int, bool] = {}
        read: set[MessageQuery] = set()
        for batch, queries in steps:
            drafts = [draft(n, internal=internal_of.setdefault(n, hidden)) for n, hidden in batch]
            store.append_messages(session.id, drafts, now=NOW)
            version = store.get_session(session.id).version
            for query in queries:  # read through the cache: kept, then carried by later appends
                cached = read_messages_at(store, session.id, version, query)
                assert cached == store.inner.read_messages(session.id, query)
            read.update(queries)
            # The weight carried step by step is what weighing the pages held now gives.
            held = [store.lru.get(session.id, version, ("messages", q)) for q in read]
            assert store.lru.weight == sum(weigh(page) for page in held if page is not None)
        store.close()


def test_carrying_a_long_page_over_an_append_weighs_only_the_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent loop appends to a session whose whole history is cached, every turn: the page
    carried must not be weighed again message by message (that made each append cost the
    session's length: an agent loop's CPU grew with the square of its turns)."""
    store = CachedStore(make_sqlite_store(tmp_path / "c.db"), lru=SessionLRU(10))
    session = store.create_session(NewSession(project="p"), now=NOW)
    store.append_messages(session.id, [draft(n) for n in range(1, 1001)], now=NOW)
    everything = MessageQuery(newest_first=True)
    store.read_messages(session.id, everything)
    weighed: list[object] = []
    plain_weigh = lru_module.weigh
    monkeypatch.setattr(lru_module, "weigh", lambda v: weighed.append(v) or plain_weigh(v))
    store.append_messages(session.id, [draft(1001), draft(1002)], now=NOW)
    version = store.get_session(session.id).version
    page = read_messages_at(store, session.id, version, everything)
    assert [m.seq for m in page[:3]] == [1002, 1001, 1000] and len(page) == 1002
    assert len(weighed) <= 2  # the two appended messages, not the 1,002 of the page
    store.close()


def test_a_turn_after_an_append_reads_no_messages_with_the_default_configuration(
    tmp_path: Path,
) -> None:
    """Through `turnkeeper.open` as users call it: the window after an append is built from
    the pages the append carried, and holds the appended message."""
    with turnkeeper.open(f"sqlite:///{tmp_path / 'default.db'}") as tk:
        session = tk.create_session(key="chat")
        tk.append(session, "system", "Be brief.")
        for turn in range(5):
            tk.append(session, "user", f"question {turn}")
            tk.append(session, "assistant", f"answer {turn}")
        tk.context(session, strategy="sliding_window", budget_tokens=2000)
        before = misses()
        tk.append(session, "user", "one more")
        window = tk.context(session, strategy="sliding_window", budget_tokens=2000)
        assert window.messages[-1].content == "one more"
        assert misses() == before
