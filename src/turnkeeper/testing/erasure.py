"""The contract of `ErasureStore`: erasure leaves nothing of a session but its tombstone, the
tombstone keeps the id from coming back, and a legal hold keeps a session from being erased.

Its store fixture needs the capabilities whose rows an erasure removes (agent states, summary
checkpoints, traces, turn attempts), `TransferStore` (an import must not bring an erased id
back) and `ForkStore` (nor may a fork from it).
"""

from __future__ import annotations

import uuid
from typing import Protocol

import pytest

from turnkeeper.errors import SessionErased, SessionNotFound
from turnkeeper.storage.base import (
    AgentStateStore,
    ErasureStore,
    ForkStore,
    Store,
    SummaryStore,
    TraceStore,
    TransferStore,
    TurnAttemptStore,
    lookup_session,
)
from turnkeeper.testing.values import LATER, MISSING, NOW, draft, new_session
from turnkeeper.types import AgentStateUpdate, Role, Session, SessionFilter, SummaryCheckpoint


class _Erasing(
    Store,
    ErasureStore,
    AgentStateStore,
    SummaryStore,
    TraceStore,
    TurnAttemptStore,
    TransferStore,
    ForkStore,
    Protocol,
): ...


def _project() -> str:
    """A project of the test's own (project holds are store-wide)."""
    return f"erasure-{uuid.uuid4().hex[:8]}"


def _full_session(store: _Erasing, project: str, subject: str | None = None) -> Session:
    """A session with a row of everything an erasure removes: 3 messages (one a reply with its
    trace), a summary checkpoint, two agent states and a failed turn attempt."""
    session = store.create_session(new_session(project, subject=subject), now=NOW)
    store.append_messages(
        session.id,
        [
            draft("canary question"),
            draft("canary answer", role=Role.ASSISTANT, trace='{"window": "canary"}'),
            draft("canary follow-up"),
        ],
        now=NOW,
    )
    store.save_summary(SummaryCheckpoint(session.id, 2, "canary summary", 2, "extractive", NOW))
    for agent in ("planner", "writer"):
        store.update_agent_state(session.id, agent, AgentStateUpdate(last_processed_seq=2), now=NOW)
    store.begin_turn_attempt(session.id, "turn-1", "attempt-1", now=NOW, lease_until=LATER)
    store.end_turn_attempt(session.id, "turn-1", "attempt-1", error="upstream failed")
    return store.get_session(session.id)


class ErasureContract:
    """`ErasureStore`: erasure, tombstones, legal holds."""

    def test_erasure_removes_every_row_of_the_session_and_counts_them(
        self, store: _Erasing
    ) -> None:
        project = _project()
        session = _full_session(store, project, subject="ticket-7")
        kept = _full_session(store, project, subject="ticket-8")
        erased = store.erase_session(session.id, now=LATER)
        assert erased is not None
        assert (erased.session_id, erased.project) == (session.id, project)
        counts = (erased.messages, erased.summaries, erased.traces, erased.agent_states)
        assert counts == (3, 1, 1, 2)
        assert erased.turn_attempts == 1
        assert store.read_messages(session.id) == []
        assert store.find_messages(session.id, ["anything"]) == {}
        assert store.list_summaries(session.id) == []
        assert store.read_traces(session.id, upto_seq=10, limit=10) == []
        assert store.list_agent_states(session.id) == []
        assert store.get_turn_attempt(session.id, "turn-1") is None
        listed = store.list_sessions(SessionFilter(project=project), limit=10).items
        assert [s.id for s in listed] == [kept.id]
        assert len(store.read_messages(kept.id)) == 3  # the other session is untouched

    def test_an_erased_id_is_a_tombstone_every_method_names(self, store: _Erasing) -> None:
        project = _project()
        session = _full_session(store, project)
        store.erase_session(session.id, now=LATER)
        tombstone = store.tombstones([session.id, MISSING])[session.id]
        assert (tombstone.session_id, tombstone.project, tombstone.erased_at) == (
            session.id,
            project,
            LATER,
        )
        assert list(store.tombstones([session.id, MISSING])) == [session.id]
        for call in (
            lambda: store.get_session(session.id),
            lambda: lookup_session(store, session.id, project),
            lambda: store.append_messages(session.id, [draft("late")], now=LATER),
            lambda: store.fork_session(session.id, 1, new_session(project), now=LATER),
            lambda: store.set_session_hold(session.id, True, now=LATER),
            lambda: store.erase_session(session.id, now=LATER),
            lambda: store.delete_session(session.id),
        ):
            with pytest.raises(SessionErased) as raised:
                call()
            assert isinstance(raised.value, SessionNotFound)
            assert session.id in str(raised.value) and "erased" in str(raised.value)
        assert store.read_messages(session.id) == []

    def test_an_erased_id_is_not_imported_again_until_its_tombstone_is_lifted(
        self, store: _Erasing
    ) -> None:
        session = _full_session(store, _project())
        messages = store.read_messages(session.id)
        store.erase_session(session.id, now=LATER)
        with pytest.raises(SessionErased):
            store.import_session(session, messages)
        with pytest.raises(SessionErased):
            store.get_session(session.id)
        assert store.lift_tombstones([session.id, MISSING]) == 1
        assert store.tombstones([session.id]) == {}
        assert store.import_session(session, messages) == 3
        assert store.read_messages(session.id)[0].content == "canary question"

    def test_a_missing_session_is_not_found_not_erased(self, store: _Erasing) -> None:
        for call in (
            lambda: store.erase_session(MISSING, now=NOW),
            lambda: store.set_session_hold(MISSING, True, now=NOW),
            lambda: store.get_session(MISSING),
        ):
            with pytest.raises(SessionNotFound) as raised:
                call()
            assert not isinstance(raised.value, SessionErased)
        assert store.held_sessions([MISSING]) == frozenset()

    def test_a_session_hold_keeps_the_session_whole_until_cleared(self, store: _Erasing) -> None:
        project = _project()
        held = _full_session(store, project)
        other = _full_session(store, project)
        assert store.set_session_hold(held.id, True, now=NOW) is True
        assert store.set_session_hold(held.id, True, now=LATER) is True  # keeps its first time
        after = store.get_session(held.id)
        assert (after.version, after.updated_at) == (held.version, held.updated_at)
        assert store.held_sessions([held.id, other.id, MISSING]) == frozenset({held.id})
        assert [(h.project, h.session_id, h.held_at) for h in store.legal_holds(project)] == [
            (project, held.id, NOW)
        ]
        assert store.erase_session(held.id, now=LATER) is None
        assert len(store.read_messages(held.id)) == 3
        assert store.tombstones([held.id]) == {}
        assert store.set_session_hold(held.id, False, now=LATER) is False
        assert store.held_sessions([held.id]) == frozenset()
        assert store.legal_holds(project) == []
        assert store.erase_session(held.id, now=LATER) is not None

    def test_a_project_hold_covers_its_sessions_present_and_future(self, store: _Erasing) -> None:
        project, elsewhere = _project(), _project()
        before = _full_session(store, project)
        assert store.set_project_hold(project, True, now=NOW) is True
        after = store.create_session(new_session(project), now=LATER)
        outside = store.create_session(new_session(elsewhere), now=LATER)
        assert store.set_session_hold(before.id, True, now=LATER)
        ids = [before.id, after.id, outside.id]
        assert store.held_sessions(ids) == frozenset({before.id, after.id})
        holds = [(h.project, h.session_id) for h in store.legal_holds(project)]
        assert holds == [(project, None), (project, before.id)]
        assert store.legal_holds(elsewhere) == []
        assert {(h.project, h.session_id) for h in store.legal_holds()} >= set(holds)
        assert store.erase_session(after.id, now=LATER) is None
        assert store.erase_session(outside.id, now=LATER) is not None
        assert store.set_project_hold(project, False, now=LATER) is False
        assert store.held_sessions(ids) == frozenset({before.id})  # its own hold stands
        assert store.erase_session(after.id, now=LATER) is not None

    def test_erasing_a_source_leaves_its_branch_and_the_branch_keeps_its_copies(
        self, store: _Erasing
    ) -> None:
        project = _project()
        source = _full_session(store, project)
        branch = store.fork_session(source.id, 2, new_session(project), now=NOW)
        assert store.erase_session(source.id, now=LATER) is not None
        assert [m.seq for m in store.read_messages(branch.id)] == [1, 2]
        with pytest.raises(SessionErased):
            store.list_branches(source.id)
