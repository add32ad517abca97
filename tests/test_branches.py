"""Branches through the library on every backend: a branch is an ordinary session to context
windows, statistics, export/import and expiry, and its source's fate does not touch it."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import turnkeeper
from tests.conftest import Clock
from turnkeeper.service import Turnkeeper
from turnkeeper.types import StrategyName


def _conversation(tk: Turnkeeper, ttl: timedelta | None) -> str:
    session = tk.create_session(key="trip", title="Lisbon", ttl=ttl)
    tk.append(session, "system", "You are a travel agent.")
    tk.append(session, "user", "Where should I stay?")
    tk.append(session, "assistant", "Alfama or Baixa.")
    tk.append(session, "user", "Which is quieter?")
    return session.id


def test_windows_and_stats_of_a_branch_see_its_whole_history(tk: Turnkeeper) -> None:
    source = _conversation(tk, ttl=None)
    branch = tk.fork(source, 3, title="Livelier")
    tk.append(branch, "user", "Which is livelier?")
    window = tk.context(branch, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=2000)
    assert [m.content for m in window.messages] == [
        "You are a travel agent.",
        "Where should I stay?",
        "Alfama or Baixa.",
        "Which is livelier?",
    ]
    stats = tk.session_stats(branch)
    assert (stats.message_count, stats.messages_by_role) == (
        4,
        {"system": 1, "user": 2, "assistant": 1},
    )
    assert tk.get_session(branch).title == "Livelier"
    source_window = tk.context(source, strategy=StrategyName.SLIDING_WINDOW, budget_tokens=2000)
    assert "Which is livelier?" not in [m.content for m in source_window.messages]


def test_an_exported_branch_imports_elsewhere_with_its_whole_history(
    tk: Turnkeeper, tmp_path: Path
) -> None:
    source = _conversation(tk, ttl=None)
    branch = tk.fork(source, 2, key="trip-b")
    tk.append(branch, "assistant", "Try Bairro Alto.")
    out = io.StringIO()
    assert tk.transfer.export_sessions([branch], out) == (1, 3)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["content"] for r in records if r["type"] == "message"] == [
        "You are a travel agent.",
        "Where should I stay?",
        "Try Bairro Alto.",
    ]
    path = tmp_path / "branch.jsonl"
    path.write_text(out.getvalue(), encoding="utf-8")
    elsewhere = turnkeeper.open("memory://")
    elsewhere.transfer.import_sessions(path)
    assert [m.content for m in elsewhere.history("trip-b")][-1] == "Try Bairro Alto."


def test_expiry_deletes_an_expired_branch_and_spares_its_source(
    tk: Turnkeeper, clock: Clock
) -> None:
    source = _conversation(tk, ttl=None)
    branch = tk.fork(source, 2, ttl=timedelta(hours=1))
    clock.advance(timedelta(hours=2))
    report = tk.transfer.expire(delete=True, grace=timedelta(0))
    assert report.deleted == (branch.id,)
    assert tk.branches(source) == []
    assert tk.get_session(source).message_count == 4


def test_a_branch_outlives_its_expired_and_deleted_source(tk: Turnkeeper, clock: Clock) -> None:
    source = _conversation(tk, ttl=timedelta(hours=1))
    branch = tk.fork(source, 4, ttl=None)
    clock.advance(timedelta(hours=2))
    assert tk.transfer.expire(delete=True, grace=timedelta(0)).deleted == (source,)
    assert [m.seq for m in tk.history(branch)] == [1, 2, 3, 4]
    origin = tk.fork_origin(branch)
    assert origin is not None and (origin.parent_id, origin.forked_at_seq) == (source, 4)
    tk.append(branch, "user", "Still here?")
    assert tk.get_session(branch).message_count == 5
