"""The Store contract for turn traces, on every backend: the first trace of a reply stands,
reads come newest first up to a seq, and traces go when what they describe goes."""

from __future__ import annotations

from tests.conftest import Clock
from turnkeeper.storage.base import Store
from turnkeeper.types import MessageDraft, NewSession, Role


def _session_with_messages(store: Store, clock: Clock, count: int) -> str:
    session = store.create_session(NewSession(project="p", key="k"), now=clock())
    drafts = [
        MessageDraft(id=f"m{n}", role=Role.USER, content=f"m{n}", created_at=clock(), tokens=1)
        for n in range(1, count + 1)
    ]
    store.append_messages(session.id, drafts, expected_last_seq=None, now=clock())
    return session.id


def test_the_first_trace_of_a_reply_stands_and_reads_are_newest_first(
    store: Store, clock: Clock
) -> None:
    session = _session_with_messages(store, clock, 6)
    for seq in (2, 4, 6):
        store.save_trace(session, seq, f'{{"seq": {seq}}}')
    store.save_trace(session, 4, '{"seq": "second writer"}')
    assert store.read_traces(session, upto_seq=5, limit=2) == [
        (4, '{"seq": 4}'),
        (2, '{"seq": 2}'),
    ]
    assert store.read_traces(session, upto_seq=1, limit=2) == []


def test_deleting_the_last_message_reset_and_delete_remove_traces(
    store: Store, clock: Clock
) -> None:
    session = _session_with_messages(store, clock, 4)
    store.save_trace(session, 2, "{}")
    store.save_trace(session, 4, "{}")
    store.delete_last_message(session, now=clock())
    assert [seq for seq, _ in store.read_traces(session, upto_seq=10, limit=10)] == [2]
    store.reset_session(session, keep_system_message=False, now=clock())
    assert store.read_traces(session, upto_seq=10, limit=10) == []
    store.save_trace(session, 1, "{}")
    store.delete_session(session)
    assert store.read_traces(session, upto_seq=10, limit=10) == []
