"""The contract of `ForkStore`: a branch is a copy of its source's prefix, then its own line.

A branch's store fixture needs the capabilities whose data a fork carries over (summary
checkpoints, agent states, turn traces) besides `ForkStore` itself.
"""

from __future__ import annotations

from typing import Protocol

import pytest

from turnkeeper.errors import Conflict, InvalidInput, SessionExpired, SessionNotFound
from turnkeeper.storage.base import (
    AgentStateStore,
    ForkStore,
    Store,
    SummaryStore,
    TraceStore,
)
from turnkeeper.testing.values import LATER, MISSING, NOW, draft, new_session
from turnkeeper.types import (
    AgentStateUpdate,
    Message,
    Role,
    Session,
    SessionFilter,
    SessionStatus,
    SummaryCheckpoint,
    Usage,
)


class _Forks(Store, ForkStore, SummaryStore, AgentStateStore, TraceStore, Protocol): ...


def _without_session(messages: list[Message]) -> list[tuple[object, ...]]:
    """What a copy keeps of a message: everything but the session it belongs to."""
    return [
        (m.id, m.seq, m.role, m.content, m.created_at, m.tokens, m.usage, m.metadata)
        for m in messages
    ]


class ForkContract:
    """`ForkStore`: branches copy their source's prefix; after the fork the two lines are apart."""

    def _source(self, store: _Forks, count: int = 4) -> Session:
        session = store.create_session(new_session(title="source"), now=NOW)
        usage = Usage(
            input_tokens=5,
            output_tokens=7,
            cache_read_input_tokens=3,
            cache_creation_input_tokens=1,
        )
        store.append_messages(
            session.id,
            [
                draft(f"turn {n}", id=f"s-{n}", usage=usage if n % 2 == 0 else None)
                for n in range(1, count + 1)
            ],
            now=NOW,
        )
        return store.get_session(session.id)

    def test_a_branch_holds_a_copy_of_the_prefix_and_says_where_it_came_from(
        self, store: _Forks
    ) -> None:
        source = self._source(store)
        branch = store.fork_session(source.id, 2, new_session(title="branch"), now=LATER)
        assert branch.id != source.id
        assert (branch.title, branch.status, branch.created_at) == (
            "branch",
            SessionStatus.ACTIVE,
            LATER,
        )
        assert (branch.message_count, branch.last_seq) == (2, 2)
        assert branch.stored_tokens == 6
        assert (branch.usage_input_tokens, branch.usage_output_tokens) == (5, 7)
        assert (branch.usage_cache_read_tokens, branch.usage_cache_creation_tokens) == (3, 1)
        copied = store.read_messages(branch.id)
        assert _without_session(copied) == _without_session(store.read_messages(source.id)[:2])
        assert {m.session_id for m in copied} == {branch.id}
        origin = store.fork_origin(branch.id)
        assert origin is not None
        assert (origin.session_id, origin.parent_id, origin.forked_at_seq) == (
            branch.id,
            source.id,
            2,
        )
        assert store.list_branches(source.id) == [origin]
        assert store.fork_origin(source.id) is None
        assert store.list_branches(branch.id) == []

    def test_appends_after_the_fork_stay_on_their_own_line(self, store: _Forks) -> None:
        source = self._source(store, count=3)
        branch = store.fork_session(source.id, 1, new_session(), now=NOW)
        (on_branch,) = store.append_messages(branch.id, [draft("branch only")], now=LATER)
        (on_source,) = store.append_messages(source.id, [draft("source only")], now=LATER)
        assert (on_branch.seq, on_source.seq) == (2, 4)
        assert [m.content for m in store.read_messages(branch.id)] == ["turn 1", "branch only"]
        assert [m.content for m in store.read_messages(source.id)] == [
            "turn 1",
            "turn 2",
            "turn 3",
            "source only",
        ]
        # the prefix's ids are the branch's own: a retry of one is recognized, not stored again
        (retried,) = store.append_messages(branch.id, [draft("turn 1", id="s-1")], now=LATER)
        assert retried.seq == 1
        assert store.get_session(branch.id).message_count == 2

    def test_the_prefix_summaries_traces_and_agent_positions_come_along(
        self, store: _Forks
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(
            session.id,
            [draft(f"t{n}", trace=f'{{"n": {n}}}', role=Role.ASSISTANT) for n in range(1, 5)],
            now=NOW,
        )
        for covers in (1, 2, 3):
            store.save_summary(
                SummaryCheckpoint(session.id, covers, f"up to {covers}", 2, "x", NOW)
            )
        update = AgentStateUpdate(
            last_processed_seq=4, provider_session_id="conv-1", add_execution_ms=30, add_turns=2
        )
        store.update_agent_state(session.id, "planner", update, now=NOW)
        store.update_agent_state(
            session.id, "critic", AgentStateUpdate(last_processed_seq=1), now=NOW
        )

        branch = store.fork_session(session.id, 2, new_session(), now=LATER)
        assert [
            (c.session_id, c.covers_to_seq, c.text) for c in store.list_summaries(branch.id)
        ] == [
            (branch.id, 1, "up to 1"),
            (branch.id, 2, "up to 2"),
        ]
        assert store.read_traces(branch.id, upto_seq=10, limit=10) == [
            (2, '{"n": 2}'),
            (1, '{"n": 1}'),
        ]
        states = {s.agent: s for s in store.list_agent_states(branch.id)}
        assert states["planner"].last_processed_seq == 2
        assert states["planner"].provider_session_id is None
        assert (states["planner"].execution_ms, states["planner"].turns) == (30, 2)
        assert states["critic"].last_processed_seq == 1
        assert {s.session_id for s in states.values()} == {branch.id}
        # the source keeps its own, untouched
        assert len(store.list_summaries(session.id)) == 3
        planner = store.get_agent_state(session.id, "planner")
        assert planner is not None and planner.provider_session_id == "conv-1"

    def test_deleting_or_resetting_the_source_leaves_its_branches_whole(
        self, store: _Forks
    ) -> None:
        source = self._source(store)
        kept = store.fork_session(source.id, 3, new_session(), now=NOW)
        store.reset_session(source.id, keep_system_message=False, now=LATER)
        assert len(store.read_messages(kept.id)) == 3
        store.delete_session(source.id)
        assert [m.content for m in store.read_messages(kept.id)] == ["turn 1", "turn 2", "turn 3"]
        assert store.get_session(kept.id).message_count == 3
        origin = store.fork_origin(kept.id)
        assert origin is not None and origin.parent_id == source.id
        with pytest.raises(SessionNotFound):
            store.list_branches(source.id)
        (added,) = store.append_messages(kept.id, [draft("after the source went")], now=LATER)
        assert added.seq == 4

    def test_a_deleted_branch_leaves_the_list(self, store: _Forks) -> None:
        source = self._source(store, count=2)
        first = store.fork_session(source.id, 1, new_session(), now=NOW)
        second = store.fork_session(source.id, 2, new_session(), now=LATER)
        assert [b.session_id for b in store.list_branches(source.id)] == [first.id, second.id]
        store.delete_session(first.id)
        assert [(b.session_id, b.forked_at_seq) for b in store.list_branches(source.id)] == [
            (second.id, 2)
        ]

    def test_a_fork_at_zero_is_an_empty_branch_and_a_branch_can_be_forked(
        self, store: _Forks
    ) -> None:
        source = self._source(store, count=2)
        empty = store.fork_session(source.id, 0, new_session(), now=NOW)
        assert (empty.message_count, empty.last_seq, store.read_messages(empty.id)) == (0, 0, [])
        child = store.fork_session(source.id, 2, new_session(), now=NOW)
        store.append_messages(child.id, [draft("child")], now=NOW)
        grandchild = store.fork_session(child.id, 3, new_session(), now=LATER)
        assert [m.content for m in store.read_messages(grandchild.id)] == [
            "turn 1",
            "turn 2",
            "child",
        ]
        origin = store.fork_origin(grandchild.id)
        assert origin is not None and (origin.parent_id, origin.forked_at_seq) == (child.id, 3)

    @pytest.mark.parametrize("at_seq", [-1, 5])
    def test_a_fork_point_outside_the_history_is_invalid_input_naming_at_seq(
        self, store: _Forks, at_seq: int
    ) -> None:
        source = self._source(store)
        with pytest.raises(InvalidInput) as caught:
            store.fork_session(source.id, at_seq, new_session(), now=NOW)
        assert caught.value.field == "at_seq"
        assert store.list_branches(source.id) == []

    def test_forking_what_cannot_be_forked_says_why_and_creates_nothing(
        self, store: _Forks
    ) -> None:
        with pytest.raises(SessionNotFound):
            store.fork_session(MISSING, 0, new_session(), now=NOW)
        source = self._source(store, count=1)
        with pytest.raises(InvalidInput) as caught:
            store.fork_session(source.id, 1, new_session("elsewhere"), now=NOW)
        assert caught.value.field == "project"
        store.create_session(new_session(key="taken"), now=NOW)
        with pytest.raises(Conflict, match="taken"):
            store.fork_session(source.id, 1, new_session(key="taken"), now=NOW)
        assert store.list_branches(source.id) == []
        store.set_status(source.id, SessionStatus.ARCHIVED, now=NOW)
        with pytest.raises(Conflict, match="archived"):
            store.fork_session(source.id, 1, new_session(), now=NOW)
        expiring = store.create_session(new_session(expires_at=NOW), now=NOW)
        with pytest.raises(SessionExpired):
            store.fork_session(expiring.id, 0, new_session(), now=LATER)
        keyed = [s.key for s in _all_sessions(store)]
        assert keyed.count("taken") == 1

    def test_a_branch_may_take_the_key_of_an_expired_holder(self, store: _Forks) -> None:
        source = self._source(store, count=1)
        stale = store.create_session(new_session(key="k", expires_at=NOW), now=NOW)
        branch = store.fork_session(source.id, 1, new_session(key="k"), now=LATER)
        assert branch.key == "k"
        assert store.get_session(stale.id).status is SessionStatus.EXPIRED
        assert store.find_session_by_key("contract", "k").id == branch.id


def _all_sessions(store: Store) -> list[Session]:
    return list(store.list_sessions(SessionFilter(project="contract"), limit=100).items)
