"""`delete_last_message` (what the OpenAI Agents adapter's `pop_item` stands on), on every
backend (`tk`/`store` fixtures)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import Clock
from turnkeeper.errors import SessionNotFound
from turnkeeper.service import Turnkeeper
from turnkeeper.types import AgentStateUpdate, SummaryCheckpoint, Usage


def test_the_newest_message_is_deleted_and_returned_and_totals_follow(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = tk.create_session()
    tk.append(session, "user", "first")
    last = tk.append(session, "assistant", "second", usage=Usage(7, 3))
    before = tk.get_session(session)
    clock.advance(timedelta(seconds=5))
    assert tk.store.delete_last_message(session.id, now=clock()) == last
    after = tk.get_session(session)
    assert [m.content for m in tk.history(session)] == ["first"]
    assert (after.message_count, after.last_seq, after.usage_output_tokens) == (1, 1, 0)
    assert after.stored_tokens == before.stored_tokens - last.tokens
    assert after.version > before.version and after.updated_at == clock()


def test_the_freed_seq_is_reused_and_a_deleted_id_can_be_appended_again(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "a", id="m-1")
    tk.append(session, "user", "b", id="m-2")
    tk.store.delete_last_message(session.id, now=tk.get_session(session).updated_at)
    again = tk.append(session, "user", "b again", id="m-2")
    assert (again.seq, again.content) == (2, "b again")
    assert [m.seq for m in tk.history(session)] == [1, 2]


def test_an_empty_session_gives_none(tk: Turnkeeper, clock: Clock) -> None:
    session = tk.create_session()
    assert tk.store.delete_last_message(session.id, now=clock()) is None
    assert tk.get_session(session).version == session.version


def test_a_missing_session_is_not_found(tk: Turnkeeper, clock: Clock) -> None:
    with pytest.raises(SessionNotFound):
        tk.store.delete_last_message("no-such-session", now=clock())


def test_checkpoints_and_agent_positions_past_the_deleted_seq_let_go(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = tk.create_session()
    for text in ("a", "b", "c"):
        tk.append(session, "user", text)
    for covers in (2, 3):
        tk.store.save_summary(SummaryCheckpoint(session.id, covers, "s", 1, "extractive", clock()))
    tk.store.update_agent_state(
        session.id, "coder", AgentStateUpdate(last_processed_seq=3), now=clock()
    )
    tk.store.update_agent_state(
        session.id, "reviewer", AgentStateUpdate(last_processed_seq=1), now=clock()
    )
    tk.store.delete_last_message(session.id, now=clock())
    assert [c.covers_to_seq for c in tk.store.list_summaries(session.id)] == [2]
    positions = {s.agent: s.last_processed_seq for s in tk.store.list_agent_states(session.id)}
    assert positions == {"coder": 2, "reviewer": 1}
