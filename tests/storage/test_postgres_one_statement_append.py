"""On PostgreSQL the common append (all drafts new, no traces) is one statement: the seqs are
claimed, the drafts inserted and their count checked in a data-modifying CTE that fails as a
whole unless every draft was new. Every append it declines must leave nothing behind and be
decided by the deciding path exactly as before; every append it writes must be the one the
deciding path would have written. A twin session in the same store takes each append only
through the deciding path, and the two are compared call by call."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import open_test_store
from tests.storage.test_append_paths import deciding_append, outcome, state
from turnkeeper.storage import sql_store
from turnkeeper.storage.postgres import ONE_STATEMENT_ROWS, PostgresStore
from turnkeeper.testing.values import LATER, NOW, draft, new_session
from turnkeeper.types import MessageDraft, Role, SessionStatus, Usage


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PostgresStore]:
    backend = open_test_store("postgres", request, tmp_path)
    assert isinstance(backend, PostgresStore)
    yield backend
    backend.close()


def tool_call(draft_: MessageDraft) -> MessageDraft:
    return replace(draft_, tool_calls=({"id": "c1", "function": {"name": "f"}},), tool_call_id="c0")


def test_each_declined_append_leaves_nothing_and_is_decided_as_before(
    store: PostgresStore,
) -> None:
    fast = store.create_session(new_session(expires_at=NOW + timedelta(days=1)), now=NOW)
    twin = store.create_session(new_session(expires_at=NOW + timedelta(days=1)), now=NOW)
    for session in (fast, twin):
        store.append_messages(session.id, [draft("one", id="m-1")], now=NOW)
    declined: list[tuple[list[MessageDraft], dict[str, Any]]] = [
        ([draft("one", id="m-1")], {}),  # a retry
        ([draft("two", id="m-2"), draft("one", id="m-1")], {}),  # a retry after a new one
        ([draft("changed", id="m-1")], {}),  # an id taken by other content
        ([draft("two", id="m-2"), draft("again", id="m-2")], {}),  # one id twice
        ([draft("five", id="m-5")], {"expected_last_seq": 0}),  # a stale expected seq
        ([draft("five", id="m-5")], {"expected_last_seq": 10**30}),  # beyond any integer
        ([draft("five", id="m-5")], {"now": NOW + timedelta(days=1)}),  # expired at that time
    ]
    for drafts, kw in declined:
        kw = {"now": LATER, **kw}
        before = state(store, fast.id)
        with pytest.raises(sql_store._NotAllNew):
            store._append_new(
                fast.id, drafts, expected_last_seq=kw.get("expected_last_seq"), now=kw["now"]
            )
        assert state(store, fast.id) == before
        assert outcome(store.append_messages, fast.id, drafts, **kw) == outcome(
            deciding_append(store), twin.id, drafts, **kw
        )
        assert state(store, fast.id) == state(store, twin.id)
    for session in (fast, twin):
        store.set_status(session.id, SessionStatus.ARCHIVED, now=LATER)
    archived = [draft("after", id="m-9")]
    with pytest.raises(sql_store._NotAllNew):
        store._append_new(fast.id, archived, expected_last_seq=None, now=LATER)
    assert outcome(store.append_messages, fast.id, archived, now=LATER) == outcome(
        deciding_append(store), twin.id, archived, now=LATER
    )
    assert state(store, fast.id) == state(store, twin.id)
    with pytest.raises(sql_store._NotAllNew):
        store._append_new(
            "00000000-0000-0000-0000-000000000000", [draft()], expected_last_seq=None, now=NOW
        )


def test_each_written_append_is_the_one_the_deciding_path_writes(store: PostgresStore) -> None:
    fast = store.create_session(new_session(), now=NOW)
    twin = store.create_session(new_session(), now=NOW)
    written: list[tuple[list[MessageDraft], dict[str, Any]]] = [
        ([draft("one", id="m-1", tokens=4, author="ann")], {}),
        (
            [
                draft("two", id="m-2", role=Role.ASSISTANT, usage=Usage(50, 9)),
                tool_call(draft("three", id="m-3", internal=True, metadata={"k": [1, None]})),
            ],
            {"expected_last_seq": 1},
        ),
        ([draft("", id="m-4", tokens=0, usage=Usage(0, 0))], {"expected_last_seq": 3}),
        ([draft(f"many {n}", id=f"b-{n}", tokens=n) for n in range(ONE_STATEMENT_ROWS)], {}),
        ([draft(f"more {n}", id=f"c-{n}") for n in range(ONE_STATEMENT_ROWS + 1)], {}),
    ]
    for drafts, kw in written:
        kw = {"now": LATER, **kw}
        ids = [d.id for d in drafts]
        fast_result = store._append_new(
            fast.id, drafts, expected_last_seq=kw.get("expected_last_seq"), now=LATER
        )
        twin_result = deciding_append(store)(twin.id, drafts, **kw)
        assert [m.id for m in fast_result] == ids
        assert [replace(m, session_id="") for m in fast_result] == [
            replace(m, session_id="") for m in twin_result
        ]
        assert state(store, fast.id) == state(store, twin.id)
    assert store.get_session(fast.id).last_seq == 4 + 2 * ONE_STATEMENT_ROWS + 1


def test_concurrent_appends_to_one_session_take_gapless_seqs(store: PostgresStore) -> None:
    session = store.create_session(new_session(), now=NOW)
    errors: list[BaseException] = []

    def append(worker: int) -> None:
        try:
            for n in range(20):
                store.append_messages(session.id, [draft(id=f"w{worker}-{n}")], now=LATER)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    messages = store.read_messages(session.id)
    assert [m.seq for m in messages] == list(range(1, 81))
    assert store.get_session(session.id).message_count == 80
