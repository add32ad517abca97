"""The PostgreSQL schema: numbered migrations recorded once, the indexes queries rely on,
JSONB columns, cascading deletes, and driver errors mapped to turnkeeper's."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest

from turnkeeper.errors import BackendUnavailable, InvalidInput
from turnkeeper.storage.sql.postgres import PostgresStore, redact
from turnkeeper.storage.sql.schema import LATEST_VERSION, MIGRATIONS
from turnkeeper.types import MessageDraft, NewSession, Role

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def pg(blank_postgres_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(blank_postgres_url)
    yield store
    store.close()


def _plan(url: str, query: str, *params: object) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # tiny test tables: ask what the index allows
        rows = conn.execute(f"EXPLAIN {query}", params).fetchall()
    return "\n".join(row[0] for row in rows)


def _open(url: str) -> None:
    PostgresStore(url).close()


def test_a_blank_schema_gets_every_migration_once_even_with_racing_processes(
    blank_postgres_url: str,
) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_open, args=(blank_postgres_url,)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    store = PostgresStore(blank_postgres_url)
    assert store.schema_version() == LATEST_VERSION
    store.close()
    with psycopg.connect(blank_postgres_url) as conn:
        recorded = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")
        assert recorded.fetchall() == [(m.version, m.name) for m in MIGRATIONS]


def test_metadata_is_jsonb_and_times_are_timestamptz(
    pg: PostgresStore, blank_postgres_url: str
) -> None:
    with psycopg.connect(blank_postgres_url) as conn:
        types = dict(
            conn.execute(
                "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = current_schema()"
                " AND column_name IN ('metadata', 'tool_calls', 'created_at', 'expires_at')"
            ).fetchall()
        )
    assert types["sessions.metadata"] == types["messages.metadata"] == "jsonb"
    assert types["messages.tool_calls"] == "jsonb"
    assert types["sessions.expires_at"] == "timestamp with time zone"


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("SELECT id FROM sessions WHERE subject = 'ticket-1'", "sessions_by_subject"),
        (
            "SELECT id FROM sessions WHERE status = 'active' AND expires_at <= now()",
            "sessions_by_expiry",
        ),
        (
            "SELECT id FROM sessions ORDER BY updated_at DESC, id DESC LIMIT 10",
            "sessions_by_updated",
        ),
        ("SELECT id FROM sessions WHERE project = 'p' AND key = 'k'", "sessions_"),
        (
            "SELECT project, status, count(*), sum(message_count) FROM sessions"
            " WHERE project = 'p' GROUP BY project, status",
            "sessions_project_totals",
        ),
        (
            "SELECT * FROM messages WHERE session_id = 's' AND seq <= 5 ORDER BY seq DESC LIMIT 10",
            "messages_pkey",
        ),
        (
            "SELECT * FROM messages WHERE session_id = 's' AND NOT internal ORDER BY seq LIMIT 10",
            "messages_",
        ),
    ],
)
def test_queries_are_served_by_indexes(
    pg: PostgresStore, blank_postgres_url: str, query: str, index: str
) -> None:
    plan = _plan(blank_postgres_url, query)
    assert "Seq Scan" not in plan and index in plan, plan


def test_project_statistics_read_the_totals_index_only(
    pg: PostgresStore, blank_postgres_url: str
) -> None:
    plan = _plan(
        blank_postgres_url,
        "SELECT project, status, count(*), sum(message_count), sum(stored_tokens),"
        " sum(usage_input_tokens), sum(usage_output_tokens) FROM sessions GROUP BY project, status",
    )
    assert "Index Only Scan using sessions_project_totals" in plan, plan


def test_deleting_a_session_cascades_to_its_messages(
    pg: PostgresStore, blank_postgres_url: str
) -> None:
    session = pg.create_session(NewSession(project="p"), now=NOW)
    draft = MessageDraft(id="m1", role=Role.USER, content="hi", tokens=3, created_at=NOW)
    pg.append_messages(session.id, [draft], now=NOW)
    with psycopg.connect(blank_postgres_url, autocommit=True) as conn:
        conn.execute("DELETE FROM sessions WHERE id = %s", (session.id,))
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)


def test_text_postgresql_cannot_store_is_invalid_input_and_changes_nothing(
    pg: PostgresStore,
) -> None:
    session = pg.create_session(NewSession(project="p"), now=NOW)
    draft = MessageDraft(id="m1", role=Role.USER, content="nul \x00 byte", tokens=3, created_at=NOW)
    with pytest.raises(InvalidInput):
        pg.append_messages(session.id, [draft], now=NOW)
    assert pg.get_session(session.id).message_count == 0


def test_an_unreachable_server_is_backend_unavailable() -> None:
    with pytest.raises(BackendUnavailable, match="PostgreSQL"):
        PostgresStore("postgresql://postgres@127.0.0.1:1/test", connect_timeout=1)


def test_the_store_url_never_shows_the_password() -> None:
    assert redact("postgresql://app:s3cret@db:5432/tk?sslmode=require") == (
        "postgresql://app@db:5432/tk?sslmode=require"
    )
