"""The service's shape: grab-bag areas live under `tk.agents` and `tk.transfer`, their old flat
names still work and warn, and the operations adapters need (taking back the newest message,
API keys) go through the service's clock and project scope, on every backend."""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

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


MOVED: list[tuple[str, str, Callable[[Turnkeeper, str], Any]]] = [
    ("set_phase", "tk.agents.set_phase", lambda tk, s: tk.set_phase(s, "plan", by="pm")),
    ("handoff", "tk.agents.handoff", lambda tk, s: tk.handoff(s, "pm", "dev", "go")),
    ("agent_responded", "tk.agents.responded", lambda tk, s: tk.agent_responded(s, "dev", "ok")),
    ("agent_state", "tk.agents.state", lambda tk, s: tk.agent_state(s, "dev")),
    ("agent_states", "tk.agents.states", lambda tk, s: tk.agent_states(s)),
    (
        "update_agent_state",
        "tk.agents.update_state",
        lambda tk, s: tk.update_agent_state(s, "dev", provider_session_id="p-1"),
    ),
    ("expire", "tk.transfer.expire", lambda tk, s: tk.expire(dry_run=True)),
    (
        "export_sessions",
        "tk.transfer.export_sessions",
        lambda tk, s: tk.export_sessions([s], io.StringIO()),
    ),
]


@pytest.mark.parametrize(("old", "new", "call"), MOVED, ids=[old for old, _, _ in MOVED])
def test_moved_names_still_work_and_warn_with_the_new_name(
    tk: Turnkeeper, old: str, new: str, call: Callable[[Turnkeeper, str], Any]
) -> None:
    session = tk.create_session(key="team")
    tk.append(session, "user", "hello")
    with pytest.warns(DeprecationWarning, match=rf"Turnkeeper\.{old} is deprecated; use {new}"):
        result = call(tk, session.id)
    assert result is not None


def test_the_old_names_give_what_the_new_ones_give(tk: Turnkeeper, tmp_path: Path) -> None:
    session = tk.create_session(key="team")
    tk.agents.responded(session, "dev", "done", execution_ms=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert tk.agent_state(session, "dev") == tk.agents.state(session, "dev")
        assert tk.agent_states(session) == tk.agents.states(session)
        out = io.StringIO()
        assert tk.export_sessions([session], out) == (1, 1)
    path = tmp_path / "team.jsonl"
    path.write_text(out.getvalue(), encoding="utf-8")
    with pytest.warns(DeprecationWarning):
        report = tk.import_sessions(path, dry_run=True)
    assert report == tk.transfer.import_sessions(path, dry_run=True)


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
