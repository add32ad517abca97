"""A cold context build on SQLite does the work its window needs, whatever the session's length.

bench/bench_sqlite.py ("Context build") times builds from a fresh connection on sessions of 100
to 100,000 messages, and time on a shared machine is noisy (issue 13: the 100,000/100 ratio
moved between 0.6× and 3.3× from run to run). What a build costs is counted here instead: the
statements it runs, SQLite's plan for each, and SQLite's virtual-machine steps (a progress
handler called at every step). A read of the session's messages must be a search of the
`(session_id, seq)` key from the newest end — never a scan, a sort, a count or a sum over the
session, nor a read of its summaries — so a build of a full window on a session ten times
longer takes the same steps.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import turnkeeper
from turnkeeper.storage.sql.sqlite import SQLiteStore
from turnkeeper.types import NewMessage

BUDGET = 2_000
"""A window of about 90 of the messages below: full on both sessions."""


def _session(url: str, messages: int) -> str:
    with turnkeeper.open(url) as tk:
        session = tk.create_session(key=f"length-{messages}", ttl=None)
        tk.append(session, "system", "You are a meticulous travel agent.")
        tk.append_many(
            session,
            [
                NewMessage("user" if i % 2 else "assistant", f"turn {i % 10}: we plan the trip")
                for i in range(1, messages)
            ],
        )
        return session.id


def _cold_build(url: str, session_id: str) -> tuple[int, list[str], int]:
    """One sliding_window build from a fresh store: (virtual-machine steps, the statements
    run, messages loaded)."""
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0  # go on

    statements: list[str] = []
    with turnkeeper.open(url) as tk:
        store = getattr(tk.store, "inner", tk.store)  # under the cache layer, if any
        assert isinstance(store, SQLiteStore)
        conn = store._connection()
        conn.set_progress_handler(step, 1)
        conn.set_trace_callback(statements.append)
        # a preview: the build reads, and stores no cut point (a write is not what is counted)
        window = tk.context(
            session_id, strategy="sliding_window", budget_tokens=BUDGET, preview=True
        )
    return steps, statements, window.report.messages_loaded


def _plan(path: Path, statement: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}")]
    finally:
        conn.close()


def test_a_cold_build_reads_the_newest_messages_through_the_key(tmp_path: Path) -> None:
    path = tmp_path / "plans.db"
    url = f"sqlite:///{path}"
    session_id = _session(url, 3_000)
    _, statements, loaded = _cold_build(url, session_id)
    assert loaded < 200  # the window, not the session
    reads = [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")]
    on_messages = [sql for sql in reads if " FROM messages " in sql]
    assert on_messages, statements
    for sql in reads:
        lowered = sql.lower()
        assert "count(" not in lowered and "sum(" not in lowered, sql
        assert "summaries" not in lowered, sql
    for sql in on_messages:
        plan = _plan(path, sql)
        # The page's rows by the key, and the session's version (a page and the version it
        # belongs to come in one statement) by the session's primary key: nothing scanned.
        allowed = ("SEARCH messages USING", "SCALAR SUBQUERY", "SEARCH sessions USING INDEX")
        assert all(step.startswith(allowed) for step in plan), (sql, plan)
        assert any(step.startswith("SEARCH messages USING") for step in plan), (sql, plan)
        assert not any("TEMP B-TREE" in step for step in plan), (sql, plan)


def test_a_cold_build_takes_the_same_steps_on_a_session_ten_times_longer(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'lengths.db'}"
    shorter, longer = _session(url, 800), _session(url, 8_000)
    _cold_build(url, longer)  # the first build of the file: the schema is read
    steps_shorter, _, loaded_shorter = _cold_build(url, shorter)
    steps_longer, _, loaded_longer = _cold_build(url, longer)
    assert loaded_shorter == loaded_longer < 800  # both windows full, the same messages
    # A search of the key is one step however deep the B-tree: equal up to a few steps.
    assert abs(steps_longer - steps_shorter) <= 20, (steps_shorter, steps_longer)
