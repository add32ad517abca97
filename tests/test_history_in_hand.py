"""`history` of a `Session` in hand reads its messages first and looks the session up only
when none are found: the answers are those of looking it up first, on every backend."""

from __future__ import annotations

import pytest

from turnkeeper.errors import SessionNotFound
from turnkeeper.service import Turnkeeper
from turnkeeper.types import NewMessage, Role


def test_the_messages_of_a_session_in_hand_are_those_of_its_id(tk: Turnkeeper) -> None:
    session = tk.create_session(key="in-hand")
    tk.append_many(session, [NewMessage(Role.USER, f"question {n}") for n in range(5)])
    for options in ({}, {"newest_first": True, "limit": 2}, {"from_seq": 2, "to_seq": 3}):
        assert tk.history(session, **options) == tk.history(session.id, **options)  # type: ignore[arg-type]
    assert tk.history(session, from_seq=9) == []


def test_an_empty_session_in_hand_has_no_history(tk: Turnkeeper) -> None:
    session = tk.create_session(key="empty")
    assert tk.history(session) == []
    assert tk.history(session, newest_first=True, limit=20) == []


def test_a_deleted_session_in_hand_is_not_found(tk: Turnkeeper) -> None:
    session = tk.create_session(key="gone")
    tk.append(session, Role.USER, "hello")
    tk.delete_session(session)
    with pytest.raises(SessionNotFound):
        tk.history(session)
    with pytest.raises(SessionNotFound):
        tk.history(session, newest_first=True, limit=20)
