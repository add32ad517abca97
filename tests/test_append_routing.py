"""An append by session id goes straight to the store's locked write; everything else a
reference can be (a key, a key shaped like an id, a session of a named project) still
resolves as before, and errors keep their order."""

from __future__ import annotations

import uuid

import pytest

from turnkeeper.errors import InvalidInput, SessionNotFound
from turnkeeper.service import Turnkeeper
from turnkeeper.types import NewMessage


def test_an_append_by_id_and_by_session_lands_in_that_session(tk: Turnkeeper) -> None:
    session = tk.create_session(key="routing")
    first = tk.append(session.id, "user", "by id")
    second = tk.append(session, "assistant", "by session")
    assert [(m.session_id, m.seq) for m in (first, second)] == [(session.id, 1), (session.id, 2)]
    assert tk.get_session(session.id).message_count == 2


def test_a_key_shaped_like_an_id_is_resolved_as_a_key(tk: Turnkeeper) -> None:
    key = "01234567-89ab-cdef-0123-456789abcdef"
    session = tk.create_session(key=key)
    stored = tk.append(key, "user", "hello")
    assert (stored.session_id, stored.seq) == (session.id, 1)


def test_an_unknown_id_is_not_found(tk: Turnkeeper) -> None:
    with pytest.raises(SessionNotFound):
        tk.append("01234567-89ab-cdef-0123-456789abcdef", "user", "hello")


def test_a_missing_session_is_reported_before_a_bad_message(tk: Turnkeeper) -> None:
    with pytest.raises(SessionNotFound):
        tk.append("01234567-89ab-cdef-0123-456789abcdef", "user", "")


def test_a_bad_message_to_an_existing_session_names_the_field(tk: Turnkeeper) -> None:
    session = tk.create_session()
    with pytest.raises(InvalidInput) as caught:
        tk.append(session.id, "user", "   ")
    assert caught.value.field == "content"
    assert tk.get_session(session.id).message_count == 0


def test_a_session_of_another_project_is_not_found_by_id_with_a_project(tk: Turnkeeper) -> None:
    session = tk.create_session(project="other")
    with pytest.raises(SessionNotFound):
        tk.append(session.id, "user", "hello", project="default")
    assert tk.get_session(session.id).message_count == 0


def test_a_batch_is_appended_at_one_instant_with_distinct_v4_ids(tk: Turnkeeper) -> None:
    session = tk.create_session()
    stored = tk.append_many(session, [NewMessage(role="user", content=f"m {n}") for n in range(50)])
    assert len({m.created_at for m in stored}) == 1
    ids = [uuid.UUID(m.id) for m in stored]
    assert len(set(ids)) == 50
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
    assert [str(i) for i in ids] == [m.id for m in stored]
