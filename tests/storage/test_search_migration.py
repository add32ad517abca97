"""Upgrading a database made before the full-text index: the migration indexes the messages
already stored, and later writes keep the index in step."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from turnkeeper.config import load_settings
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.storage.search import SearchStore
from turnkeeper.storage.sql.schema import MIGRATIONS

NOW = datetime(2026, 1, 1, tzinfo=UTC)
(SEARCH_STEP,) = [m.version for m in MIGRATIONS if m.name == "full-text search of message content"]
BEFORE_SEARCH = SEARCH_STEP - 1


def _upgrade_finds_old_messages(open_store: Callable[[int | None], Store], tmp_path: Path) -> None:
    settings = load_settings(database_url=f"sqlite:///{tmp_path / 'unused.db'}")
    old = Turnkeeper(open_store(-1), settings, clock=lambda: NOW)
    session = old.create_session(key="old", project="p")
    old.append(session, "user", "Before the index: a trip to Lisbon", project="p")
    old.close()

    new = Turnkeeper(open_store(None), settings, clock=lambda: NOW)
    assert isinstance(new.store, SearchStore)
    (hit,) = new.search("lisbon", project="p")
    assert (hit.session_key, hit.seq) == ("old", 1)
    new.append(session.id, "user", "After the index: Lisbon again", project="p")
    assert sorted(h.seq for h in new.search("lisbon", project="p")) == [1, 2]
    new.reset_session(session.id, project="p")
    assert new.search("lisbon", project="p") == []
    new.close()


def test_a_sqlite_database_from_before_the_index_is_indexed_on_upgrade(tmp_path: Path) -> None:
    from turnkeeper.storage.sql.sqlite import SQLiteStore

    url = f"sqlite:///{tmp_path / 'old.db'}"

    def open_store(version: int | None) -> Store:
        if version is None:
            return SQLiteStore(url)
        return SQLiteStore(url, target_version=BEFORE_SEARCH)

    _upgrade_finds_old_messages(open_store, tmp_path)


def test_a_postgres_database_from_before_the_index_is_indexed_on_upgrade(
    postgres_url: str, tmp_path: Path
) -> None:
    from turnkeeper.storage.sql.postgres import PostgresStore

    def open_store(version: int | None) -> Store:
        if version is None:
            return PostgresStore(postgres_url)
        return PostgresStore(postgres_url, target_version=BEFORE_SEARCH)

    _upgrade_finds_old_messages(open_store, tmp_path)
