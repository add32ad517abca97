"""The contracts of the optional capabilities: one class per capability protocol.

Each class's tests need the core `Store` (to make sessions and messages) plus its capability,
so its `store` fixture must yield a store with both.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Protocol

import pytest

from turnkeeper.errors import Conflict, NotFound, SessionNotFound
from turnkeeper.storage.base import (
    AdminStore,
    AgentStateStore,
    ApiKeyStore,
    LockingStore,
    Store,
    SummaryStore,
    TraceStore,
    TransferStore,
    TurnAttemptStore,
)
from turnkeeper.testing.core import StoreContract
from turnkeeper.testing.cut_points import CutPointContract
from turnkeeper.testing.erasure import ErasureContract
from turnkeeper.testing.forks import ForkContract
from turnkeeper.testing.retention import RetentionContract
from turnkeeper.testing.values import LATER, MISSING, NOW, draft, new_session
from turnkeeper.types import (
    AgentStateUpdate,
    ApiKey,
    Message,
    Role,
    Session,
    SessionStatus,
    SummaryCheckpoint,
    Usage,
)


class _AgentStates(Store, AgentStateStore, Protocol): ...


class _Summaries(Store, SummaryStore, Protocol): ...


class _Traces(Store, TraceStore, Protocol): ...


class _Admin(Store, AdminStore, Protocol): ...


class _Transfer(Store, TransferStore, Protocol): ...


class _TurnAttempts(Store, TurnAttemptStore, Protocol): ...


def _checkpoint(session_id: str, covers: int, text: str = "summary") -> SummaryCheckpoint:
    return SummaryCheckpoint(session_id, covers, text, 2, "extractive", NOW)


class AgentStateContract:
    """`AgentStateStore`: per-agent positions, kept through resets and undo."""

    def test_a_new_state_starts_from_zero_and_adds_what_it_is_given(
        self, store: _AgentStates
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        assert store.get_agent_state(session.id, "planner") is None
        state = store.update_agent_state(
            session.id,
            "planner",
            AgentStateUpdate(last_processed_seq=3, add_execution_ms=120, add_turns=1),
            now=NOW,
        )
        assert (state.session_id, state.agent, state.last_processed_seq) == (
            session.id,
            "planner",
            3,
        )
        assert (state.provider_session_id, state.execution_ms, state.turns) == (None, 120, 1)
        assert state.updated_at == NOW
        assert store.get_agent_state(session.id, "planner") == state

    def test_an_update_keeps_unset_fields_adds_counters_and_bumps_only_the_version(
        self, store: _AgentStates
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.update_agent_state(
            session.id,
            "a",
            AgentStateUpdate(last_processed_seq=2, provider_session_id="p-1", add_turns=1),
            now=NOW,
        )
        before = store.get_session(session.id)
        state = store.update_agent_state(
            session.id, "a", AgentStateUpdate(add_execution_ms=50, add_turns=2), now=LATER
        )
        assert (state.last_processed_seq, state.provider_session_id) == (2, "p-1")
        assert (state.execution_ms, state.turns, state.updated_at) == (50, 3, LATER)
        after = store.get_session(session.id)
        assert after.version > before.version and after.updated_at == before.updated_at

    def test_states_are_listed_by_agent_name_and_scoped_to_their_session(
        self, store: _AgentStates
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        other = store.create_session(new_session(), now=NOW)
        for agent in ("writer", "critic", "planner"):
            store.update_agent_state(session.id, agent, AgentStateUpdate(add_turns=1), now=NOW)
        assert [s.agent for s in store.list_agent_states(session.id)] == [
            "critic",
            "planner",
            "writer",
        ]
        assert store.list_agent_states(other.id) == []
        assert store.get_agent_state(other.id, "critic") is None

    def test_a_missing_session_has_no_states_and_cannot_get_one(self, store: _AgentStates) -> None:
        assert store.get_agent_state(MISSING, "a") is None
        assert store.list_agent_states(MISSING) == []
        with pytest.raises(SessionNotFound):
            store.update_agent_state(MISSING, "a", AgentStateUpdate(add_turns=1), now=NOW)

    def test_reset_moves_agents_back_to_zero_and_undo_past_their_position(
        self, store: _AgentStates
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft(), draft(), draft()], now=NOW)
        store.update_agent_state(session.id, "at3", AgentStateUpdate(last_processed_seq=3), now=NOW)
        store.update_agent_state(session.id, "at1", AgentStateUpdate(last_processed_seq=1), now=NOW)
        store.delete_last_message(session.id, now=LATER)
        assert store.get_agent_state(session.id, "at3").last_processed_seq == 2  # type: ignore[union-attr]
        assert store.get_agent_state(session.id, "at1").last_processed_seq == 1  # type: ignore[union-attr]
        store.reset_session(session.id, keep_system_message=False, now=LATER)
        states = store.list_agent_states(session.id)
        assert [(s.agent, s.last_processed_seq) for s in states] == [("at1", 0), ("at3", 0)]

    def test_deleting_the_session_deletes_its_states(self, store: _AgentStates) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.update_agent_state(session.id, "a", AgentStateUpdate(add_turns=1), now=NOW)
        store.delete_session(session.id)
        assert store.list_agent_states(session.id) == []


class SummaryContract:
    """`SummaryStore`: checkpoints, first writer wins, dropped with what they cover."""

    def test_the_latest_checkpoint_at_or_before_a_seq(self, store: _Summaries) -> None:
        session = store.create_session(new_session(), now=NOW)
        assert store.latest_summary(session.id) is None
        for covers in (4, 2, 6):
            store.save_summary(_checkpoint(session.id, covers, f"to {covers}"))
        latest = store.latest_summary(session.id)
        assert latest == _checkpoint(session.id, 6, "to 6")
        assert store.latest_summary(session.id, upto_seq=5) == _checkpoint(session.id, 4, "to 4")
        assert store.latest_summary(session.id, upto_seq=4) == _checkpoint(session.id, 4, "to 4")
        assert store.latest_summary(session.id, upto_seq=1) is None
        assert [c.covers_to_seq for c in store.list_summaries(session.id)] == [2, 4, 6]

    def test_the_first_checkpoint_saved_for_a_seq_wins(self, store: _Summaries) -> None:
        session = store.create_session(new_session(), now=NOW)
        first = store.save_summary(_checkpoint(session.id, 3, "first"))
        version = store.get_session(session.id).version
        assert version > session.version
        assert store.save_summary(_checkpoint(session.id, 3, "second")) == first
        assert store.list_summaries(session.id) == [first]
        assert store.get_session(session.id).version == version

    def test_a_checkpoint_of_a_missing_session_is_refused(self, store: _Summaries) -> None:
        with pytest.raises(SessionNotFound):
            store.save_summary(_checkpoint(MISSING, 1))
        assert store.latest_summary(MISSING) is None and store.list_summaries(MISSING) == []

    def test_reset_drops_every_checkpoint_and_undo_those_covering_the_seq(
        self, store: _Summaries
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft(), draft(), draft()], now=NOW)
        for covers in (2, 3):
            store.save_summary(_checkpoint(session.id, covers))
        store.delete_last_message(session.id, now=LATER)
        assert [c.covers_to_seq for c in store.list_summaries(session.id)] == [2]
        store.reset_session(session.id, keep_system_message=False, now=LATER)
        assert store.list_summaries(session.id) == []


class TraceContract:
    """`TraceStore`: traces written with their reply, gone with it."""

    def test_traces_are_stored_with_their_reply_and_read_newest_first(self, store: _Traces) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(
            session.id,
            [
                draft("q1"),
                draft("a1", role=Role.ASSISTANT, trace='{"t":1}'),
                draft("q2"),
                draft("a2", role=Role.ASSISTANT, trace='{"t":2}'),
            ],
            now=NOW,
        )
        assert store.read_traces(session.id, upto_seq=10, limit=5) == [
            (4, '{"t":2}'),
            (2, '{"t":1}'),
        ]
        assert store.read_traces(session.id, upto_seq=3, limit=5) == [(2, '{"t":1}')]
        assert store.read_traces(session.id, upto_seq=4, limit=1) == [(4, '{"t":2}')]
        assert store.read_traces(MISSING, upto_seq=4, limit=1) == []

    def test_a_retried_reply_keeps_its_first_trace(self, store: _Traces) -> None:
        session = store.create_session(new_session(), now=NOW)
        reply = draft("a", id="r-1", role=Role.ASSISTANT, trace="first")
        store.append_messages(session.id, [reply], now=NOW)
        retry = draft("a", id="r-1", role=Role.ASSISTANT, trace="second")
        store.append_messages(session.id, [retry], now=NOW)
        assert store.read_traces(session.id, upto_seq=1, limit=5) == [(1, "first")]

    def test_undo_reset_and_delete_take_the_traces_with_them(self, store: _Traces) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(
            session.id, [draft(trace="t1"), draft(trace="t2"), draft(trace="t3")], now=NOW
        )
        store.delete_last_message(session.id, now=NOW)
        assert [seq for seq, _ in store.read_traces(session.id, upto_seq=9, limit=9)] == [2, 1]
        # The freed seq is reused: the new reply's trace is its own, not the deleted one's.
        store.append_messages(session.id, [draft(trace="new 3")], now=NOW)
        assert store.read_traces(session.id, upto_seq=3, limit=1) == [(3, "new 3")]
        store.reset_session(session.id, keep_system_message=False, now=NOW)
        assert store.read_traces(session.id, upto_seq=9, limit=9) == []
        store.append_messages(session.id, [draft(trace="again")], now=NOW)
        store.delete_session(session.id)
        assert store.read_traces(session.id, upto_seq=9, limit=9) == []


class ApiKeyContract:
    """`ApiKeyStore`: key records and secret hashes; revocation is permanent and idempotent."""

    @staticmethod
    def _key(key_id: str, project: str = "acme", *, seconds: int = 0) -> ApiKey:
        return ApiKey(key_id, project, f"name {key_id}", False, NOW + timedelta(seconds=seconds))

    def test_a_key_is_found_with_its_hash_and_listed_oldest_first(self, store: ApiKeyStore) -> None:
        store.create_api_key(self._key("k2", seconds=1), secret_hash="h2")
        store.create_api_key(self._key("k1", seconds=1), secret_hash="h1")
        store.create_api_key(self._key("k0", "other", seconds=0), secret_hash="h0")
        store.create_api_key(
            ApiKey("adm", "*", "admin", True, NOW + timedelta(seconds=2)), secret_hash="ha"
        )
        assert store.find_api_key("k1") == (self._key("k1", seconds=1), "h1")
        assert store.find_api_key("adm") == (
            ApiKey("adm", "*", "admin", True, NOW + timedelta(seconds=2)),
            "ha",
        )
        assert store.find_api_key("nope") is None
        assert [k.id for k in store.list_api_keys()] == ["k0", "k1", "k2", "adm"]
        assert [k.id for k in store.list_api_keys("acme")] == ["k1", "k2"]
        assert store.list_api_keys("nobody") == []

    def test_a_key_id_is_stored_once(self, store: ApiKeyStore) -> None:
        store.create_api_key(self._key("k"), secret_hash="h")
        with pytest.raises(Conflict):
            store.create_api_key(self._key("k", "other"), secret_hash="h2")
        assert store.find_api_key("k") == (self._key("k"), "h")

    def test_revoking_keeps_the_first_time_and_an_unknown_id_is_not_found(
        self, store: ApiKeyStore
    ) -> None:
        store.create_api_key(self._key("k"), secret_hash="h")
        revoked = store.revoke_api_key("k", now=LATER)
        assert revoked.revoked_at == LATER and revoked.id == "k"
        again = store.revoke_api_key("k", now=LATER + timedelta(hours=1))
        assert again.revoked_at == LATER
        found = store.find_api_key("k")
        assert found is not None and found[0].revoked_at == LATER
        assert store.list_api_keys()[0].revoked_at == LATER
        with pytest.raises(NotFound, match="nope"):
            store.revoke_api_key("nope", now=LATER)


class AdminContract:
    """`AdminStore`: the expiry sweep and statistics."""

    def test_expire_marks_due_sessions_then_deletes_them_after_the_grace(
        self, store: _Admin
    ) -> None:
        due = store.create_session(new_session(expires_at=NOW + timedelta(hours=1)), now=NOW)
        later = store.create_session(new_session(expires_at=NOW + timedelta(hours=5)), now=NOW)
        forever = store.create_session(new_session(), now=NOW)
        at = NOW + timedelta(hours=1)
        report = store.expire_sessions(now=at)
        assert (report.expired, report.deleted) == ((due.id,), ())
        marked = store.get_session(due.id)
        assert marked.status is SessionStatus.EXPIRED
        assert marked.updated_at == at and marked.version > due.version
        assert store.get_session(later.id).status is SessionStatus.ACTIVE
        kept = store.expire_sessions(
            now=at + timedelta(hours=1), delete=True, grace=timedelta(hours=2)
        )
        assert kept.deleted == () and store.get_session(due.id).status is SessionStatus.EXPIRED
        swept = store.expire_sessions(
            now=NOW + timedelta(hours=5), delete=True, grace=timedelta(hours=1)
        )
        assert swept.expired == (later.id,)
        assert swept.deleted == (due.id,)
        with pytest.raises(SessionNotFound):
            store.get_session(due.id)
        assert store.get_session(forever.id).status is SessionStatus.ACTIVE

    def test_expire_reports_ids_sorted_and_deletes_marked_sessions_without_expiry(
        self, store: _Admin
    ) -> None:
        ids = sorted(
            store.create_session(new_session(expires_at=NOW), now=NOW).id for _ in range(3)
        )
        manual = store.create_session(new_session(), now=NOW)
        store.set_status(manual.id, SessionStatus.EXPIRED, now=NOW)
        report = store.expire_sessions(now=NOW, delete=True)
        assert report.expired == tuple(ids)
        assert report.deleted == tuple(sorted([*ids, manual.id]))

    def test_session_stats_count_roles_visibility_tokens_and_times(self, store: _Admin) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(
            session.id,
            [
                draft(role=Role.SYSTEM, tokens=4, created_at=NOW),
                draft(tokens=2, created_at=NOW + timedelta(seconds=1)),
                draft(role=Role.ASSISTANT, tokens=5, usage=Usage(30, 5), created_at=LATER),
                draft(internal=True, tokens=1, created_at=NOW + timedelta(seconds=2)),
            ],
            now=LATER,
        )
        stats = store.session_stats(session.id)
        assert stats.session_id == session.id
        assert (stats.message_count, stats.user_facing_messages, stats.internal_messages) == (
            4,
            3,
            1,
        )
        assert dict(stats.messages_by_role) == {"system": 1, "user": 2, "assistant": 1}
        assert (stats.stored_tokens, stats.usage_input_tokens, stats.usage_output_tokens) == (
            12,
            30,
            5,
        )
        assert (stats.first_message_at, stats.last_message_at) == (NOW, LATER)
        empty = store.session_stats(store.create_session(new_session(), now=NOW).id)
        assert (empty.message_count, empty.first_message_at, empty.last_message_at) == (
            0,
            None,
            None,
        )
        with pytest.raises(SessionNotFound):
            store.session_stats(MISSING)

    def test_prompt_cache_usage_is_stored_with_each_reply_and_summed(self, store: _Admin) -> None:
        """What the upstream's prompt cache served and took of each reply's input: read back
        with the reply, added up by a single append and by a batch, in both statistics."""
        session = store.create_session(new_session("cached"), now=NOW)
        one = store.append_messages(
            session.id,
            [draft(role=Role.ASSISTANT, usage=Usage(100, 20, 60, 10))],
            now=NOW,
        )
        batch = store.append_messages(
            session.id,
            [draft(), draft(role=Role.ASSISTANT, usage=Usage(50, 5, 40, 0))],
            now=LATER,
        )
        assert [m.usage for m in store.read_messages(session.id)] == [
            Usage(100, 20, 60, 10), None, Usage(50, 5, 40, 0),
        ]  # fmt: skip
        assert [m.usage for m in (*one, *batch)] == [
            m.usage for m in store.read_messages(session.id)
        ]
        after = store.get_session(session.id)
        assert (after.usage_cache_read_tokens, after.usage_cache_creation_tokens) == (100, 10)
        stats = store.session_stats(session.id)
        assert (stats.usage_input_tokens, stats.usage_cache_read_tokens) == (150, 100)
        assert stats.usage_cache_creation_tokens == 10
        (project,) = store.project_stats("cached")
        assert (project.usage_cache_read_tokens, project.usage_cache_creation_tokens) == (100, 10)

    def test_project_stats_sum_sessions_by_status_per_project(self, store: _Admin) -> None:
        a1 = store.create_session(new_session("a"), now=NOW)
        a2 = store.create_session(new_session("a"), now=NOW)
        b1 = store.create_session(new_session("b"), now=NOW)
        store.append_messages(a1.id, [draft(tokens=2), draft(tokens=3, usage=Usage(7, 1))], now=NOW)
        store.append_messages(b1.id, [draft(tokens=10)], now=NOW)
        store.set_status(a2.id, SessionStatus.ARCHIVED, now=NOW)
        stats = store.project_stats()
        assert [p.project for p in stats] == ["a", "b"]
        a = stats[0]
        assert dict(a.sessions_by_status) == {"active": 1, "archived": 1}
        assert (a.message_count, a.stored_tokens) == (2, 5)
        assert (a.usage_input_tokens, a.usage_output_tokens) == (7, 1)
        (only_b,) = store.project_stats("b")
        assert (only_b.project, only_b.message_count, only_b.stored_tokens) == ("b", 1, 10)
        assert store.project_stats("nobody") == []


class TransferContract:
    """`TransferStore`: sessions imported exactly as exported, idempotently."""

    @staticmethod
    def _exported(session_id: str = "11111111-2222-3333-4444-555555555555") -> Session:
        return Session(
            id=session_id,
            project="moved",
            status=SessionStatus.ARCHIVED,
            created_at=NOW - timedelta(days=2),
            updated_at=NOW - timedelta(days=1),
            key="old-key",
            title="from elsewhere",
            metadata={"origin": "export"},
            # Totals as exported: the store recomputes them from the messages it adds.
            message_count=99,
            last_seq=99,
            stored_tokens=999,
            version=7,
        )

    @staticmethod
    def _messages(session_id: str, *seqs: int) -> list[Message]:
        return [
            Message(
                id=f"x-{seq}",
                session_id=session_id,
                seq=seq,
                role=Role.USER if seq % 2 else Role.ASSISTANT,
                content=f"message {seq}",
                created_at=NOW - timedelta(days=2, seconds=-seq),
                tokens=seq,
                usage=Usage(seq, 1) if seq % 2 == 0 else None,
            )
            for seq in seqs
        ]

    def test_an_import_keeps_ids_seqs_times_and_recomputes_totals(self, store: _Transfer) -> None:
        session = self._exported()
        messages = self._messages(session.id, 1, 2, 3)
        assert store.import_session(session, messages) == 3
        stored = store.get_session(session.id)
        assert (stored.status, stored.key, stored.title) == (
            SessionStatus.ARCHIVED,
            "old-key",
            "from elsewhere",
        )
        assert (stored.created_at, stored.updated_at, stored.version) == (
            session.created_at,
            session.updated_at,
            session.version,
        )
        assert (stored.message_count, stored.last_seq, stored.stored_tokens) == (3, 3, 6)
        assert (stored.usage_input_tokens, stored.usage_output_tokens) == (2, 1)
        assert store.read_messages(session.id) == messages

    def test_importing_again_adds_only_what_is_new(self, store: _Transfer) -> None:
        session = self._exported()
        store.import_session(session, self._messages(session.id, 1, 2))
        before = store.get_session(session.id)
        assert store.import_session(session, self._messages(session.id, 1, 2)) == 0
        assert store.get_session(session.id) == before
        assert store.import_session(session, self._messages(session.id, 1, 2, 3, 4)) == 2
        assert [m.seq for m in store.read_messages(session.id)] == [1, 2, 3, 4]
        assert store.get_session(session.id).message_count == 4

    def test_a_large_import_again_adds_only_what_is_new(self, store: _Transfer) -> None:
        session = self._exported()
        assert store.import_session(session, self._messages(session.id, *range(1, 1_201))) == 1_200
        again = self._messages(session.id, *range(1, 2_001))
        assert store.import_session(session, again) == 800
        assert store.read_messages(session.id) == again
        assert store.get_session(session.id).message_count == 2_000

    def test_an_imported_session_is_a_normal_one_afterwards(self, store: _Transfer) -> None:
        session = self._exported()
        store.import_session(session, self._messages(session.id, 1, 2))
        store.set_status(session.id, SessionStatus.ACTIVE, now=NOW)
        (added,) = store.append_messages(session.id, [draft(id="x-9")], now=NOW)
        assert added.seq == 3

    def test_an_active_import_whose_key_is_held_is_a_conflict(self, store: _Transfer) -> None:
        store.create_session(new_session("moved", key="old-key"), now=NOW)
        active = Session(
            id="99999999-2222-3333-4444-555555555555",
            project="moved",
            status=SessionStatus.ACTIVE,
            created_at=NOW,
            updated_at=NOW,
            key="old-key",
        )
        with pytest.raises(Conflict, match=active.id):
            store.import_session(active, self._messages(active.id, 1))
        with pytest.raises(SessionNotFound):
            store.get_session(active.id)


class TurnAttemptContract:
    """`TurnAttemptStore`: one attempt holds a turn at a time; a failed or lapsed holder is
    replaced; only the holder renews or ends its record."""

    def _session(self, store: _TurnAttempts) -> Session:
        return store.create_session(new_session(), now=NOW)

    def test_the_first_attempt_takes_the_turn_and_the_next_finds_it_held(
        self, store: _TurnAttempts
    ) -> None:
        session = self._session(store)
        first = store.begin_turn_attempt(session.id, "t-1", "a", now=NOW, lease_until=LATER)
        assert (first.attempt_id, first.lease_until, first.error) == ("a", LATER, None)
        second = store.begin_turn_attempt(session.id, "t-1", "b", now=NOW, lease_until=LATER)
        assert second == first
        assert store.get_turn_attempt(session.id, "t-1") == first
        other_turn = store.begin_turn_attempt(session.id, "t-2", "b", now=NOW, lease_until=LATER)
        assert other_turn.attempt_id == "b"
        assert store.get_turn_attempt(session.id, "t-3") is None

    def test_a_lapsed_or_failed_holder_is_replaced_and_its_error_cleared(
        self, store: _TurnAttempts
    ) -> None:
        session = self._session(store)
        soon = NOW + timedelta(seconds=10)
        store.begin_turn_attempt(session.id, "t", "a", now=NOW, lease_until=soon)
        lapsed = store.begin_turn_attempt(session.id, "t", "b", now=soon, lease_until=LATER)
        assert lapsed.attempt_id == "b"
        store.end_turn_attempt(session.id, "t", "b", error='{"failed": true}')
        failed = store.get_turn_attempt(session.id, "t")
        assert failed is not None and failed.error == '{"failed": true}'
        assert not failed.holds_turn_at(NOW)
        taken = store.begin_turn_attempt(session.id, "t", "c", now=NOW, lease_until=LATER)
        assert (taken.attempt_id, taken.error) == ("c", None)

    def test_only_the_holder_renews_its_lease(self, store: _TurnAttempts) -> None:
        session = self._session(store)
        store.begin_turn_attempt(session.id, "t", "a", now=NOW, lease_until=LATER)
        later_still = LATER + timedelta(minutes=5)
        assert store.renew_turn_attempt(session.id, "t", "a", lease_until=later_still) is True
        assert store.renew_turn_attempt(session.id, "t", "b", lease_until=NOW) is False
        assert store.renew_turn_attempt(MISSING, "t", "a", lease_until=NOW) is False
        record = store.get_turn_attempt(session.id, "t")
        assert record is not None and (record.attempt_id, record.lease_until) == (
            "a",
            later_still,
        )
        store.end_turn_attempt(session.id, "t", "a", error="failed")
        assert store.renew_turn_attempt(session.id, "t", "a", lease_until=NOW) is False

    def test_only_the_holder_ends_its_record_and_ending_well_deletes_it(
        self, store: _TurnAttempts
    ) -> None:
        session = self._session(store)
        held = store.begin_turn_attempt(session.id, "t", "a", now=NOW, lease_until=LATER)
        store.end_turn_attempt(session.id, "t", "b", error="not mine")
        store.end_turn_attempt(session.id, "t", "b")
        store.end_turn_attempt(MISSING, "t", "a")
        assert store.get_turn_attempt(session.id, "t") == held
        store.end_turn_attempt(session.id, "t", "a")
        assert store.get_turn_attempt(session.id, "t") is None

    def test_a_missing_session_has_no_attempts_and_its_records_go_with_it(
        self, store: _TurnAttempts
    ) -> None:
        with pytest.raises(SessionNotFound):
            store.begin_turn_attempt(MISSING, "t", "a", now=NOW, lease_until=LATER)
        assert store.get_turn_attempt(MISSING, "t") is None
        session = self._session(store)
        store.begin_turn_attempt(session.id, "t", "a", now=NOW, lease_until=LATER)
        store.delete_session(session.id)
        assert store.get_turn_attempt(session.id, "t") is None

    def test_of_attempts_beginning_at_once_exactly_one_holds_the_turn(
        self, store: _TurnAttempts
    ) -> None:
        session = self._session(store)
        start = threading.Barrier(8)
        holders: list[str] = []

        def begin(attempt: str) -> None:
            start.wait(timeout=10)
            record = store.begin_turn_attempt(session.id, "t", attempt, now=NOW, lease_until=LATER)
            holders.append(record.attempt_id)

        threads = [threading.Thread(target=begin, args=(f"a{n}",)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(holders) == 8 and len(set(holders)) == 1


class FullStoreContract(
    StoreContract,
    AgentStateContract,
    SummaryContract,
    TraceContract,
    ApiKeyContract,
    AdminContract,
    TransferContract,
    ForkContract,
    TurnAttemptContract,
    CutPointContract,
    ErasureContract,
    RetentionContract,
):
    """Every contract but locking: what a store standing in for the bundled ones must pass."""


class LockingContract:
    """`LockingStore`: one holder per lock name at a time, never waiting."""

    def test_a_held_lock_is_refused_to_others_until_released(self, store: LockingStore) -> None:
        with store.exclusive_lock("sweep") as first:
            assert first is True
            with store.exclusive_lock("sweep") as second:
                assert second is False
            with store.exclusive_lock("other") as other:
                assert other is True
        with store.exclusive_lock("sweep") as after:
            assert after is True

    def test_another_thread_does_not_get_a_held_lock_and_does_not_wait(
        self, store: LockingStore
    ) -> None:
        seen: list[bool] = []

        def contend() -> None:
            with store.exclusive_lock("sweep") as got:
                seen.append(got)

        with store.exclusive_lock("sweep") as held:
            assert held
            thread = threading.Thread(target=contend)
            thread.start()
            thread.join(timeout=10)
            assert not thread.is_alive()
        assert seen == [False]

    def test_a_failing_block_releases_the_lock(self, store: LockingStore) -> None:
        with pytest.raises(RuntimeError), store.exclusive_lock("sweep") as got:
            assert got
            raise RuntimeError("the guarded work failed")
        with store.exclusive_lock("sweep") as again:
            assert again is True
