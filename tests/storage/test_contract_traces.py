"""The Store contract for turn traces, on every backend: a trace is stored by the append that
stores its reply (one transaction: never a reply without its trace), the first trace of a reply
stands, import stores traces idempotently, reads come newest first up to a seq, and traces go
when what they describe goes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Clock
from turnkeeper.storage.base import Store
from turnkeeper.types import MessageDraft, NewSession, Role


def _draft(clock: Clock, id: str, trace: str | None = None) -> MessageDraft:
    role = Role.ASSISTANT if trace else Role.USER
    return MessageDraft(id=id, role=role, content=id, created_at=clock(), tokens=1, trace=trace)


def _session_with_messages(store: Store, clock: Clock, count: int) -> str:
    """A session whose even seqs are replies, each stored with its trace `{"n": seq}`."""
    session = store.create_session(NewSession(project="p", key="k"), now=clock())
    drafts = [
        _draft(clock, f"m{n}", f'{{"n": {n}}}' if n % 2 == 0 else None) for n in range(1, count + 1)
    ]
    store.append_messages(session.id, drafts, expected_last_seq=None, now=clock())
    return session.id


def test_a_reply_is_stored_with_its_trace_and_the_first_trace_stands(
    store: Store, clock: Clock
) -> None:
    session = _session_with_messages(store, clock, 6)
    retry = store.append_messages(
        session, [_draft(clock, "m4", '{"n": "second writer"}')], now=clock()
    )
    assert retry[0].seq == 4
    assert store.read_traces(session, upto_seq=5, limit=2) == [(4, '{"n": 4}'), (2, '{"n": 2}')]
    assert store.read_traces(session, upto_seq=1, limit=2) == []


@pytest.mark.parametrize("store", ["sqlite", "postgres", "postgres+redis"], indirect=True)
def test_a_reply_whose_trace_cannot_be_stored_is_not_stored_either(
    store: Store, clock: Clock, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    session = _session_with_messages(store, clock, 1)
    backend = request.node.callspec.params["store"]
    if backend == "sqlite":
        with sqlite3.connect(tmp_path / "contract.db") as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON turn_traces"
                " BEGIN SELECT RAISE(ABORT, 'trace refused'); END"
            )
    else:
        import psycopg

        with psycopg.connect(request.getfixturevalue("postgres_url"), autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN RAISE EXCEPTION 'trace refused'; END $$"
            )
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON turn_traces"
                " FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
    with pytest.raises(Exception, match="trace refused"):
        store.append_messages(session, [_draft(clock, "reply", '{"n": 2}')], now=clock())
    assert [m.id for m in store.read_messages(session)] == ["m1"]
    assert store.get_session(session).last_seq == 1


def test_import_stores_traces_once(store: Store, clock: Clock) -> None:
    session_id = _session_with_messages(store, clock, 2)
    session, messages = store.get_session(session_id), store.read_messages(session_id)
    store.delete_session(session_id)
    assert store.import_session(session, messages, [(2, '{"n": "imported"}')]) == 2
    assert store.import_session(session, messages, [(2, '{"n": "again"}')]) == 0
    assert store.read_traces(session_id, upto_seq=2, limit=5) == [(2, '{"n": "imported"}')]


def test_deleting_the_last_message_reset_and_delete_remove_traces(
    store: Store, clock: Clock
) -> None:
    session = _session_with_messages(store, clock, 4)
    store.delete_last_message(session, now=clock())
    assert [seq for seq, _ in store.read_traces(session, upto_seq=10, limit=10)] == [2]
    store.reset_session(session, keep_system_message=False, now=clock())
    assert store.read_traces(session, upto_seq=10, limit=10) == []
    store.append_messages(session, [_draft(clock, "again", "{}")], now=clock())
    store.delete_session(session)
    assert store.read_traces(session, upto_seq=10, limit=10) == []


def test_messages_are_found_by_id_within_their_session(store: Store, clock: Clock) -> None:
    session = _session_with_messages(store, clock, 3)
    other = store.create_session(NewSession(project="p", key="other"), now=clock())
    store.append_messages(other.id, [_draft(clock, "elsewhere")], now=clock())
    found = store.find_messages(session, ["m3", "m1", "unknown", "elsewhere"])
    assert {id_: m.seq for id_, m in found.items()} == {"m1": 1, "m3": 3}
    assert store.find_messages(session, []) == {}
