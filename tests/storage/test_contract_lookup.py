"""The reads a request makes in one round trip, on every backend (`store` and `tk` fixtures:
memory, SQLite, PostgreSQL, PostgreSQL behind the caches): `lookup_session` (a session by id,
else by key) answers exactly what `get_session` and then `find_session_by_key` would;
`read_messages_versioned` gives a page with the session's version of the same snapshot, and a
page read for a version known already (`read_messages_at`) is the current page;
`append_messages_versioned` gives the version its write left (None for a retry that wrote
nothing)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from turnkeeper.errors import SessionNotFound
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import (
    SessionLookupStore,
    Store,
    VersionedAppendStore,
    VersionedReadStore,
    lookup_session,
    read_messages_at,
)
from turnkeeper.types import MessageDraft, MessageQuery, NewSession, Role, SessionStatus

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def test_every_bundled_backend_looks_up_in_one_call(store: Store) -> None:
    assert isinstance(store, SessionLookupStore)


def test_a_session_is_found_by_id_and_by_key(store: Store) -> None:
    made = store.create_session(NewSession(project="alpha", key="support-42"), now=NOW)
    assert lookup_session(store, made.id, "alpha") == made
    assert lookup_session(store, "support-42", "alpha") == made
    assert lookup_session(store, made.id, "beta") == made  # an id is not scoped by project


def test_a_key_is_looked_up_in_the_project_given(store: Store) -> None:
    store.create_session(NewSession(project="alpha", key="support-42"), now=NOW)
    with pytest.raises(SessionNotFound):
        lookup_session(store, "support-42", "beta")
    with pytest.raises(SessionNotFound):
        lookup_session(store, "nobody", "alpha")


def test_an_id_wins_over_a_key_that_equals_it(store: Store) -> None:
    named = store.create_session(NewSession(project="alpha"), now=NOW)
    keyed = store.create_session(NewSession(project="alpha", key=named.id), now=NOW)
    assert lookup_session(store, named.id, "alpha") == named
    assert store.find_session_by_key("alpha", named.id) == keyed


def test_a_key_gives_the_session_find_session_by_key_gives(store: Store) -> None:
    old = store.create_session(NewSession(project="alpha", key="k"), now=NOW)
    store.set_status(old.id, SessionStatus.ARCHIVED, now=NOW + timedelta(seconds=1))
    live = store.create_session(NewSession(project="alpha", key="k"), now=NOW)
    assert lookup_session(store, "k", "alpha") == live == store.find_session_by_key("alpha", "k")
    store.set_status(live.id, SessionStatus.ARCHIVED, now=NOW + timedelta(seconds=2))
    newest = store.find_session_by_key("alpha", "k")
    assert newest.id == live.id
    assert lookup_session(store, "k", "alpha") == newest


def test_the_answer_is_current_after_a_write(store: Store) -> None:
    made = store.create_session(NewSession(project="alpha", key="k"), now=NOW)
    changed = store.set_status(made.id, SessionStatus.ARCHIVED, now=NOW + timedelta(seconds=1))
    assert lookup_session(store, "k", "alpha") == changed
    assert lookup_session(store, made.id, "alpha").version == changed.version


# -- a page with the session's version: `read_messages_versioned` ------------------------------


def test_every_bundled_backend_reads_a_page_with_its_version(store: Store) -> None:
    assert isinstance(store, VersionedReadStore)


def test_a_page_comes_with_the_version_it_was_read_at(tk: Turnkeeper) -> None:
    session = tk.create_session()
    for n in range(5):
        tk.append(session, "user", f"message {n}")
    store = tk.store
    assert isinstance(store, VersionedReadStore)
    page, version = store.read_messages_versioned(
        session.id, MessageQuery(newest_first=True, limit=2)
    )
    assert [m.content for m in page] == ["message 4", "message 3"]
    assert version == tk.get_session(session).version
    assert page == store.read_messages(session.id, MessageQuery(newest_first=True, limit=2))


def test_a_page_read_with_the_current_version_is_the_current_page(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "first")
    current = tk.get_session(session)
    page = read_messages_at(tk.store, session.id, current.version, MessageQuery(newest_first=True))
    assert [m.content for m in page] == ["first"]
    tk.append(session, "user", "second")
    now = tk.get_session(session)
    page = read_messages_at(tk.store, session.id, now.version, MessageQuery(newest_first=True))
    assert [m.content for m in page] == ["second", "first"]


# -- an append with the version it wrote: `append_messages_versioned` --------------------------


def _draft(message_id: str, content: str) -> MessageDraft:
    return MessageDraft(id=message_id, role=Role.USER, content=content, tokens=1, created_at=NOW)


def test_every_bundled_backend_appends_with_the_version_it_wrote(store: Store) -> None:
    assert isinstance(store, VersionedAppendStore)


def test_an_append_gives_the_version_it_left_one_past_the_version_before(store: Store) -> None:
    assert isinstance(store, VersionedAppendStore)
    made = store.create_session(NewSession(project="alpha"), now=NOW)
    before = store.get_session(made.id).version
    stored, version = store.append_messages_versioned(
        made.id, [_draft("m-1", "one"), _draft("m-2", "two")], now=NOW
    )
    assert [m.seq for m in stored] == [1, 2]
    assert version == before + 1 == store.get_session(made.id).version


def test_a_retry_that_writes_nothing_gives_no_version(store: Store) -> None:
    assert isinstance(store, VersionedAppendStore)
    made = store.create_session(NewSession(project="alpha"), now=NOW)
    store.append_messages(made.id, [_draft("m-1", "one")], now=NOW)
    settled = store.get_session(made.id).version
    stored, version = store.append_messages_versioned(made.id, [_draft("m-1", "one")], now=NOW)
    assert [m.seq for m in stored] == [1] and version is None
    assert store.get_session(made.id).version == settled
    mixed, version = store.append_messages_versioned(
        made.id, [_draft("m-1", "one"), _draft("m-2", "two")], now=NOW
    )
    assert [m.seq for m in mixed] == [1, 2]
    assert version == settled + 1 == store.get_session(made.id).version
