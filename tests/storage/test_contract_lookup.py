"""`lookup_session` (a session by id, else by key, in one read), on every backend (`store`
fixture: memory, SQLite, PostgreSQL, PostgreSQL behind the caches): it answers exactly what
`get_session` and then `find_session_by_key` would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from turnkeeper.errors import SessionNotFound
from turnkeeper.storage.base import SessionLookupStore, Store, lookup_session
from turnkeeper.types import NewSession, SessionStatus

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
