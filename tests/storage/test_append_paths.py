"""An SQL store writes the common append (all drafts new) by a fast path that does not look the
drafts' ids up first, and hands anything else to the deciding path after rolling the attempt
back. Both paths must leave the same thing behind: here one session takes every append through
`append_messages` (fast path first), its twin in the same store only through the deciding path,
and the two are compared call by call and at the end, on SQLite and on PostgreSQL (where the
seqs are claimed by one UPDATE … RETURNING)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import open_test_store
from turnkeeper.errors import TurnkeeperError
from turnkeeper.storage.sql import store as sql_store
from turnkeeper.storage.sql.store import SQLStore
from turnkeeper.testing.values import LATER, NOW, draft, new_session
from turnkeeper.types import Message, MessageDraft, Role, SessionStatus, Usage


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLStore]:
    backend = open_test_store(request.param, request, tmp_path)
    assert isinstance(backend, SQLStore)
    yield backend
    backend.close()


Append = Callable[..., list[Message]]


def outcome(append: Append, session_id: str, drafts: Sequence[MessageDraft], **kw: Any) -> Any:
    """What one append returned or raised, without the session's id (the twins' differ)."""
    try:
        return [
            (m.id, m.seq, m.content, m.tokens, m.usage) for m in append(session_id, drafts, **kw)
        ]
    except TurnkeeperError as exc:
        return type(exc).__name__, str(exc).replace(session_id, "<session>")


def state(store: SQLStore, session_id: str) -> Any:
    """Everything an append may change, without the session's id."""
    session = store.get_session(session_id)
    messages = [replace(m, session_id="") for m in store.read_messages(session_id)]
    traces = store.read_traces(session_id, upto_seq=10**9, limit=1_000)
    return replace(session, id=""), messages, traces


def test_the_fast_path_writes_only_an_append_of_new_messages(store: SQLStore) -> None:
    session = store.create_session(new_session(), now=NOW)
    written, version = store._append_new(
        session.id, [draft("a", id="m-1", trace="t1")], expected_last_seq=None, now=NOW
    )
    assert [(m.id, m.seq) for m in written] == [("m-1", 1)]
    assert version == store.get_session(session.id).version == session.version + 1
    before = state(store, session.id)
    for drafts, expected in (
        ([draft("a", id="m-1")], None),  # a retry
        ([draft("b", id="m-2"), draft("a", id="m-1")], None),  # a retry mixed with new
        ([draft("other", id="m-1")], None),  # an id taken by other content
        ([draft(id="m-2")], 0),  # a stale expected seq
        ([draft(id="m-2"), draft(id="m-2")], None),  # one id twice
    ):
        with pytest.raises(sql_store._NotAllNew):
            store._append_new(session.id, drafts, expected_last_seq=expected, now=LATER)
        assert state(store, session.id) == before
    with pytest.raises(sql_store._NotAllNew):
        store._append_new(
            "00000000-0000-0000-0000-000000000000", [draft()], expected_last_seq=None, now=NOW
        )


def test_both_paths_leave_the_same_state_after_every_kind_of_append(store: SQLStore) -> None:
    fast = store.create_session(new_session(expires_at=NOW + timedelta(days=1)), now=NOW)
    deciding = store.create_session(new_session(expires_at=NOW + timedelta(days=1)), now=NOW)
    script: list[tuple[list[MessageDraft], dict[str, Any]]] = [
        ([draft("one", id="m-1", tokens=4)], {}),
        (
            [
                draft("two", id="m-2", role=Role.ASSISTANT, usage=Usage(50, 9), trace="t2"),
                draft("three", id="m-3", internal=True, metadata={"k": [1]}),
            ],
            {"expected_last_seq": 1},
        ),
        ([draft("one", id="m-1", tokens=4)], {}),  # a retry
        (
            [
                draft("four", id="m-4", trace="t4"),
                draft("two", id="m-2", role=Role.ASSISTANT, usage=Usage(50, 9)),
            ],
            {},
        ),
        ([draft("changed", id="m-3"), draft("five", id="m-5")], {}),  # a conflict
        ([draft("five", id="m-5")], {"expected_last_seq": 2}),  # a stale expected seq
        ([draft("dup", id="m-6"), draft("dup", id="m-6")], {}),  # one id twice
        ([draft(f"many {n}", id=f"b-{n}", tokens=n) for n in range(1_200)], {}),  # many parts
        ([draft("late", id="m-7")], {"now": NOW + timedelta(days=2)}),  # expired by then
    ]
    for drafts, kw in script:
        kw = {"now": LATER, **kw}
        assert outcome(store.append_messages, fast.id, drafts, **kw) == outcome(
            deciding_append(store), deciding.id, drafts, **kw
        )
        assert state(store, fast.id) == state(store, deciding.id)
    for session in (fast, deciding):
        store.set_status(session.id, SessionStatus.ARCHIVED, now=LATER)
    archived = [draft("after", id="m-8")]
    assert outcome(store.append_messages, fast.id, archived, now=LATER) == outcome(
        deciding_append(store), deciding.id, archived, now=LATER
    )
    assert state(store, fast.id) == state(store, deciding.id)
    assert state(store, fast.id)[0].last_seq == 1_204


def deciding_append(store: SQLStore) -> Append:
    """`append_messages` as it is decided when the fast path declines."""

    def append(
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None = None,
        now: Any,
    ) -> list[Message]:
        stored, version = store._append_deciding(
            session_id, drafts, expected_last_seq=expected_last_seq, now=now
        )
        assert version in (None, store.get_session(session_id).version)
        return stored

    return append
