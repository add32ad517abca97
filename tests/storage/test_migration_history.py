"""One migration history for both SQL backends, proved against databases the shipped code made.

The dumps under `fixtures/` were made by the migrations as they shipped (one per version and
backend, with a few rows of data; PostgreSQL's from step 7 on, the first it recorded in the
one numbering both backends share; an older PostgreSQL schema is proved by the fresh database,
which runs every step). Today's code must upgrade each to the latest version with the data
intact and a schema equal to a fresh database's. A shipped step's DDL is pinned by checksum, so
editing it (rather than adding a step) fails here.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.postgres_schemas import blank_schema
from turnkeeper.errors import BackendUnavailable
from turnkeeper.storage.search import SearchFilter, SearchStore, parse_query
from turnkeeper.storage.sql.postgres import PostgresStore
from turnkeeper.storage.sql.schema import LATEST_VERSION, MIGRATIONS
from turnkeeper.storage.sql.sqlite import SQLiteStore
from turnkeeper.storage.sql.store import SQLStore
from turnkeeper.types import MessageDraft, NewSession, Role

FIXTURES = Path(__file__).parent / "fixtures"
OLD = datetime(2026, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 2, 1, tzinfo=UTC)

SHIPPED = [
    (1, "sessions and messages", "eb4348157219bec1", "a22f23a0f95d0fe4"),
    (2, "usage, tool calls, user-facing index, key lookup", "bca4affd91d7faf3", "e3b0c44298fc1c14"),
    (3, "api keys", "71aca167b6c9ab4b", "d3d5f12bd0784b8f"),
    (4, "agent states and summary checkpoints", "c74bfd07791dad23", "002665a8cdbd6a80"),
    (5, "message ids scoped to their session", "87b2a857a91ba3b7", "8e64dc0bf4351166"),
    (6, "turn traces", "c33b6bf968201e2a", "c33b6bf968201e2a"),
    (7, "full-text search of message content", "9982d687dc2f5014", "e4c6fd0b83c0b75e"),
    (8, "session branches", "a13bb33189053b92", "cbcf0a5940d6d3a6"),
    (
        9,
        "leaner append: key index without updated_at, no unused message index",
        "bc72118c55ad3664",
        "69d8bcb178eb00ec",
    ),
    (
        10,
        "full-text index catches up at search, not in every append",
        "82992eaeffcaabdb",
        "e3b0c44298fc1c14",
    ),
    (11, "turn attempts", "13bd0b9a57d0fdea", "dd1f9822d043c117"),
    (12, "prompt-cache usage", "d33eb18940b9dcfe", "921e8ffecf0a7820"),
    (13, "cut points", "15ebacddaa27afca", "15ebacddaa27afca"),
    (14, "legal holds and tombstones", "dd65df865d8907ec", "b7054f7ef5dc7c97"),
]
"""(version, name, checksum of the SQLite DDL, of the PostgreSQL DDL) of every shipped step.
Add a row for a new step once it ships; never change one."""

FIRST_POSTGRES_DUMP = 7
"""The first step a PostgreSQL database recorded in the shared numbering (and has a dump)."""


def _checksum(statements: tuple[str, ...]) -> str:
    return hashlib.sha256("\n;\n".join(statements).encode()).hexdigest()[:16]


def test_no_shipped_step_has_been_edited_and_numbers_are_one_sequence() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, LATEST_VERSION + 1))
    current = [
        (m.version, m.name, _checksum(m.sqlite), _checksum(m.postgres))
        for m in MIGRATIONS[: len(SHIPPED)]
    ]
    assert current == SHIPPED


def _assert_old_data_survived(store: SQLStore, version: int) -> None:
    """The rows the fixture of `version` (in shared numbers) holds, read through the store."""
    session = store.get_session("s-1")
    assert (session.key, session.metadata, session.version) == ("legacy", {"from": "old"}, 3)
    assert (session.usage_input_tokens, session.usage_output_tokens) == (0, 0)
    messages = store.read_messages("s-1")
    assert [(m.id, m.seq, m.content, m.metadata, m.usage) for m in messages] == [
        ("m-1", 1, "old system", {}, None),
        ("m-2", 2, "old question", {"k": 1}, None),
    ]
    assert messages[0].created_at == OLD
    keys = store.list_api_keys()
    assert [(k.id, k.name) for k in keys] == ([("k-1", "old key")] if version >= 3 else [])
    states = store.list_agent_states("s-1")
    assert [(s.agent, s.last_processed_seq, s.execution_ms) for s in states] == (
        [("planner", 2, 40)] if version >= 4 else []
    )
    summaries = store.list_summaries("s-1")
    assert [s.text for s in summaries] == (["old summary"] if version >= 4 else [])
    traces = store.read_traces("s-1", upto_seq=10, limit=5)
    assert traces == ([(2, '{"trace": "old"}')] if version >= 6 else [])
    # the full-text index holds the old messages: built by the upgrade below step 7, loaded
    # from the dump (SQLite's FTS5 shadow tables, PostgreSQL's generated column) from it on
    assert isinstance(store, SearchStore)
    hits = store.search_messages(parse_query("old"), SearchFilter(project="default"), limit=5)
    assert sorted((h.message_id, h.seq) for h in hits) == [("m-1", 1), ("m-2", 2)]
    # and the upgraded database takes new writes: a new id in the old session, the old id
    # in another session (ids are scoped per session since step 5)
    new = MessageDraft(id="m-3", role=Role.ASSISTANT, content="new", tokens=2, created_at=NOW)
    assert store.append_messages("s-1", [new], now=NOW)[0].seq == 3
    other = store.create_session(NewSession(project="default"), now=NOW)
    again = MessageDraft(id="m-1", role=Role.USER, content="elsewhere", tokens=1, created_at=NOW)
    assert store.append_messages(other.id, [again], now=NOW)[0].session_id == other.id


# -- SQLite -------------------------------------------------------------------------------------


def _sqlite_schema(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
    return [tuple(row) for row in rows]


def _recorded_sqlite(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")
        return [tuple(row) for row in rows]


def _dumps(prefix: str) -> dict[str, int]:
    """The fixtures named `{prefix}{version}.sql`, by name, with their version."""
    paths = FIXTURES.glob(f"{prefix}*.sql")
    return {path.name: int(path.stem.removeprefix(prefix)) for path in sorted(paths)}


def test_every_shipped_version_has_its_frozen_dumps() -> None:
    assert sorted(_dumps("sqlite_v").values()) == list(range(1, len(SHIPPED) + 1))
    assert sorted(_dumps("postgres_v").values()) == list(
        range(FIRST_POSTGRES_DUMP, len(SHIPPED) + 1)
    )


@pytest.mark.parametrize("dump", _dumps("sqlite_v"))
def test_a_sqlite_database_of_every_shipped_version_upgrades_to_the_fresh_schema(
    tmp_path: Path, dump: str
) -> None:
    version = _dumps("sqlite_v")[dump]
    old = tmp_path / f"v{version}.db"
    with sqlite3.connect(old) as conn:
        conn.executescript((FIXTURES / dump).read_text())
    assert _recorded_sqlite(old)[-1][0] == version
    fresh = tmp_path / "fresh.db"
    SQLiteStore(f"sqlite:///{fresh}").close()

    store = SQLiteStore(f"sqlite:///{old}")
    try:
        assert store.schema_version() == LATEST_VERSION
        _assert_old_data_survived(store, version)
    finally:
        store.close()
    assert _sqlite_schema(old) == _sqlite_schema(fresh)
    assert _recorded_sqlite(old) == [(m.version, m.name) for m in MIGRATIONS]


# -- PostgreSQL ---------------------------------------------------------------------------------

PG_SCHEMA = [
    (
        "SELECT table_name, column_name, ordinal_position, data_type, is_nullable,"
        " column_default FROM information_schema.columns WHERE table_schema = current_schema()"
        " ORDER BY table_name, column_name"
    ),
    (
        "SELECT tablename, indexname, replace(indexdef, current_schema() || '.', '')"
        " FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname"
    ),
    (
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = current_schema()::regnamespace ORDER BY conname"
    ),
]


def _postgres_schema(url: str) -> list[list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return [conn.execute(query).fetchall() for query in PG_SCHEMA]


def _recorded_postgres(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT version, name FROM schema_migrations ORDER BY version"
        ).fetchall()


@pytest.fixture
def fresh_postgres(postgres_server: str) -> Iterator[str]:
    """The URL of a schema a fresh store has just migrated."""
    with blank_schema(postgres_server) as url:
        PostgresStore(url).close()
        yield url


@pytest.mark.parametrize("dump", _dumps("postgres_v"))
def test_a_postgres_database_of_every_shipped_version_upgrades_to_the_fresh_schema(
    blank_postgres_url: str, fresh_postgres: str, dump: str
) -> None:
    version = _dumps("postgres_v")[dump]
    with psycopg.connect(blank_postgres_url, autocommit=True) as conn:
        conn.execute((FIXTURES / dump).read_text().encode())
    assert _recorded_postgres(blank_postgres_url)[-1][0] == version

    store = PostgresStore(blank_postgres_url)
    try:
        assert store.schema_version() == LATEST_VERSION
        _assert_old_data_survived(store, version)
    finally:
        store.close()
    assert _postgres_schema(blank_postgres_url) == _postgres_schema(fresh_postgres)
    assert _recorded_postgres(blank_postgres_url) == [(m.version, m.name) for m in MIGRATIONS]


# -- driver errors inside a write ---------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_and_drop(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[SQLStore, Any]]:
    """A store, and a function dropping a table behind its back."""
    if request.param == "sqlite":
        path = tmp_path / "store.db"
        sqlite_store = SQLiteStore(f"sqlite:///{path}")

        def drop_sqlite(table: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(f"DROP TABLE {table}")

        yield sqlite_store, drop_sqlite
        sqlite_store.close()
        return
    url = request.getfixturevalue("blank_postgres_url")
    pg_store = PostgresStore(url)

    def drop_postgres(table: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {table}")

    yield pg_store, drop_postgres
    pg_store.close()


def test_a_statement_failing_inside_a_write_is_backend_unavailable_and_undoes_the_write(
    store_and_drop: tuple[SQLStore, Any],
) -> None:
    store, drop = store_and_drop
    session = store.create_session(NewSession(project="p"), now=NOW)
    drop("turn_traces")
    reply = MessageDraft(
        id="r-1", role=Role.ASSISTANT, content="hi", tokens=1, created_at=NOW, trace="{}"
    )
    with pytest.raises(BackendUnavailable, match="turn_traces"):
        store.append_messages(session.id, [reply], now=NOW)
    assert store.get_session(session.id).message_count == 0
    assert store.read_messages(session.id) == []
