"""The service's shape: grab-bag areas live under `tk.agents` and `tk.transfer`, their old flat
names are gone (removed in 0.2), and the operations adapters need (taking back the newest message,
API keys) go through the service's clock and project scope, on every backend."""

from __future__ import annotations

import warnings
from datetime import timedelta

import pytest

from tests.conftest import Clock
from turnkeeper.errors import SessionNotFound
from turnkeeper.service import Turnkeeper


def test_pop_last_message_takes_back_the_newest_message_and_its_totals(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = tk.create_session(key="undo")
    tk.append(session, "user", "first")
    tk.append(session, "assistant", "second")
    clock.advance(timedelta(minutes=5))
    popped = tk.pop_last_message("undo")
    assert popped is not None and (popped.seq, popped.content) == (2, "second")
    after = tk.get_session(session)
    assert (after.message_count, after.last_seq) == (1, 1)
    assert after.updated_at == clock()  # the service's clock, not the wall clock
    assert [m.content for m in tk.history(session)] == ["first"]
    assert tk.append(session, "assistant", "again").seq == 2  # the freed seq is reused


def test_pop_last_message_of_an_empty_session_is_none(tk: Turnkeeper) -> None:
    session = tk.create_session(key="empty")
    assert tk.pop_last_message(session) is None
    assert tk.get_session(session).message_count == 0


def test_pop_last_message_keeps_to_the_project(tk: Turnkeeper) -> None:
    theirs = tk.create_session(key="shared", project="acme")
    tk.append(theirs, "user", "not yours")
    with pytest.raises(SessionNotFound):
        tk.pop_last_message(theirs.id, project="other")
    with pytest.raises(SessionNotFound):
        tk.pop_last_message("shared", project="other")
    assert tk.get_session(theirs).message_count == 1


def test_api_keys_are_stamped_by_the_services_clock(tk: Turnkeeper, clock: Clock) -> None:
    key, token = tk.keys.create("acme", name="ci")
    assert key.created_at == clock()
    assert tk.keys.verify(token).id == key.id
    clock.advance(timedelta(hours=1))
    assert tk.keys.revoke(key.id).revoked_at == clock()


REMOVED = {
    "set_phase": "agents.set_phase",
    "handoff": "agents.handoff",
    "agent_responded": "agents.responded",
    "agent_state": "agents.state",
    "agent_states": "agents.states",
    "update_agent_state": "agents.update_state",
    "expire": "transfer.expire",
    "export_sessions": "transfer.export_sessions",
    "import_sessions": "transfer.import_sessions",
}


def test_the_old_flat_names_are_gone_and_their_new_homes_answer(tk: Turnkeeper) -> None:
    for old, new in REMOVED.items():
        assert not hasattr(tk, old), old
        part, name = new.split(".")
        assert callable(getattr(getattr(tk, part), name)), new


def test_the_new_names_do_not_warn(tk: Turnkeeper) -> None:
    session = tk.create_session(key="team")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        tk.agents.set_phase(session, "plan", by="pm")
        tk.agents.handoff(session, "pm", "dev")
        state = tk.agents.responded(session, "dev", "ok", execution_ms=7)
        assert tk.agents.update_state(session, "dev", last_processed_seq=1).last_processed_seq == 1
        assert [s.agent for s in tk.agents.states(session)] == ["dev"]
        assert state.turns == 1 and tk.session_stats(session).execution_ms == 7
        assert tk.transfer.expire(dry_run=True).expired == ()
