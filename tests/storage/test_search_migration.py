"""Upgrading a database made before the full-text index: the migration indexes the messages
already stored, and later writes keep the index in step."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from turnkeeper.config import load_settings
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.storage.search import SearchStore
from turnkeeper.storage.sql.schema import MIGRATIONS

NOW = datetime(2026, 1, 1, tzinfo=UTC)
(SEARCH_STEP,) = [m.version for m in MIGRATIONS if m.name == "full-text search of message content"]
BEFORE_SEARCH = SEARCH_STEP - 1

# The rows a database of that time held, written in that schema's own columns: today's store
# writes today's columns (later steps added some), so it cannot write an old database.
_OLD_ROWS = (
    "INSERT INTO sessions (id, key, project, created_at, updated_at, message_count, last_seq,"
    " stored_tokens, version) VALUES ('s-old', 'old', 'p', '2026-01-01T00:00:00+00:00',"
    " '2026-01-01T00:00:00+00:00', 1, 1, 10, 1)",
    "INSERT INTO messages (session_id, seq, id, role, content, created_at, tokens)"
    " VALUES ('s-old', 1, 'm-old', 'user', 'Before the index: a trip to Lisbon',"
    " '2026-01-01T00:00:00+00:00', 10)",
)


def _upgrade_finds_old_messages(
    open_old: Callable[[], Store], write_old: Callable[[str], None],
    open_new: Callable[[], Store], tmp_path: Path,
) -> None:  # fmt: skip
    old = open_old()  # the schema as it was before the index
    old.close()
    for statement in _OLD_ROWS:
        write_old(statement)

    settings = load_settings(database_url=f"sqlite:///{tmp_path / 'unused.db'}")
    new = Turnkeeper(open_new(), settings, clock=lambda: NOW)
    assert isinstance(new.store, SearchStore)
    (hit,) = new.search("lisbon", project="p")
    assert (hit.session_key, hit.seq) == ("old", 1)
    new.append("s-old", "user", "After the index: Lisbon again", project="p")
    assert sorted(h.seq for h in new.search("lisbon", project="p")) == [1, 2]
    new.reset_session("s-old", project="p")
    assert new.search("lisbon", project="p") == []
    new.close()


def test_a_sqlite_database_from_before_the_index_is_indexed_on_upgrade(tmp_path: Path) -> None:
    from turnkeeper.storage.sql.sqlite import SQLiteStore

    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"

    def write_old(statement: str) -> None:
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute(statement)

    _upgrade_finds_old_messages(
        lambda: SQLiteStore(url, target_version=BEFORE_SEARCH), write_old,
        lambda: SQLiteStore(url), tmp_path,
    )  # fmt: skip


def test_a_postgres_database_from_before_the_index_is_indexed_on_upgrade(
    blank_postgres_url: str, tmp_path: Path
) -> None:
    from turnkeeper.storage.sql.postgres import PostgresStore

    def write_old(statement: str) -> None:
        with psycopg.connect(blank_postgres_url, autocommit=True) as db:
            db.execute(statement)  # type: ignore[arg-type]  # a fixed statement, not user input

    _upgrade_finds_old_messages(
        lambda: PostgresStore(blank_postgres_url, target_version=BEFORE_SEARCH), write_old,
        lambda: PostgresStore(blank_postgres_url), tmp_path,
    )  # fmt: skip
