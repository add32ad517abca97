"""The SQLite schema upgrades in place: a database made by schema version 1 opens with the
latest code, keeps its data and gains the new columns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from turnkeeper import open as open_turnkeeper
from turnkeeper.storage.sql.schema import LATEST_VERSION, MIGRATIONS
from turnkeeper.storage.sql.sqlite import SQLiteStore
from turnkeeper.types import Usage


def _make_v1_database(path: Path) -> None:
    old = SQLiteStore(f"sqlite:///{path}", target_version=1)
    assert old.schema_version() == 1
    old.close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO sessions (id, key, project, status, created_at, updated_at, expires_at,"
            " message_count, last_seq, stored_tokens, metadata)"
            " VALUES ('s-1', 'legacy', 'default', 'active', '2026-01-01T00:00:00.000000+00:00',"
            " '2026-01-01T00:00:00.000000+00:00', NULL, 2, 2, 20, '{\"from\": \"v1\"}')"
        )
        conn.executemany(
            "INSERT INTO messages (session_id, seq, id, role, content, internal, created_at,"
            " tokens, metadata) VALUES ('s-1', ?, ?, ?, ?, 0, '2026-01-01T00:00:00.000000+00:00',"
            " 10, '{}')",
            [(1, "m-1", "system", "old system"), (2, "m-2", "user", "old question")],
        )


def test_version_1_database_upgrades_in_place_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    _make_v1_database(path)
    with open_turnkeeper(f"sqlite:///{path}") as tk:
        assert tk.store.schema_version() == LATEST_VERSION  # type: ignore[attr-defined]
        session = tk.get_session("legacy")
        assert session.id == "s-1" and session.metadata == {"from": "v1"}
        assert (session.usage_input_tokens, session.usage_output_tokens) == (0, 0)
        old = tk.history(session)
        assert [(m.seq, m.content, m.usage, m.tool_calls) for m in old] == [
            (1, "old system", None, None),
            (2, "old question", None, None),
        ]
        new = tk.append(session, "assistant", "new answer", usage=Usage(5, 6))
        assert new.seq == 3 and tk.get_session("legacy").usage_output_tokens == 6
        other = tk.create_session()  # message ids are scoped to their session since version 5
        assert tk.append(other, "user", "elsewhere", id="m-1").session_id == other.id
        assert [m.id for m in tk.history(session)] == ["m-1", "m-2", new.id]
    with sqlite3.connect(path) as conn:
        recorded = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")
        assert [tuple(row) for row in recorded] == [(m.version, m.name) for m in MIGRATIONS]


def test_a_blank_database_gets_every_migration_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'blank.db'}"
    for _ in range(2):  # reopening does not migrate again
        store = SQLiteStore(url)
        assert store.schema_version() == LATEST_VERSION
        store.close()
    with sqlite3.connect(tmp_path / "blank.db") as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(
            MIGRATIONS
        )
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_messages_are_rows_indexed_by_session_and_seq(tmp_path: Path) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path / 'plan.db'}")
    plan = (
        store._conn()
        .execute(
            "EXPLAIN QUERY PLAN SELECT * FROM messages WHERE session_id = ? AND seq <= ?"
            " ORDER BY seq DESC LIMIT 10",
            ("s", 5),
        )
        .fetchall()
    )
    store.close()
    detail = " ".join(str(row[-1]) for row in plan)
    assert "USING" in detail and "SCAN messages" not in detail
