"""A PostgreSQL URL may name, in its `search_path`, a schema that does not exist yet: turnkeeper
creates it (a new tenant's store), or says clearly why it cannot."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest

import turnkeeper
from turnkeeper.errors import InvalidConfig
from turnkeeper.storage.sql.postgres import search_path


def _with_search_path(server_url: str, path: str) -> str:
    separator = "&" if "?" in server_url else "?"
    return f"{server_url}{separator}options={quote(f'-csearch_path={path}')}"


@pytest.fixture
def missing_schema(postgres_server: str) -> Iterator[str]:
    """The name of a schema that does not exist; dropped afterwards if something made it."""
    name = f"tk_new_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _tables_in(server_url: str, schema: str) -> set[str]:
    with psycopg.connect(server_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
    return {row[0] for row in rows}


def test_a_search_path_schema_that_does_not_exist_is_created(
    postgres_server: str, missing_schema: str
) -> None:
    url = _with_search_path(postgres_server, missing_schema)
    with turnkeeper.open(url) as tk:
        session, _ = tk.get_or_create_session("tenant-chat")
        tk.append(session, "user", "hello from a new tenant")
    assert {"sessions", "messages", "schema_migrations"} <= _tables_in(
        postgres_server, missing_schema
    )
    with turnkeeper.open(url) as tk:  # and it is simply used the next time
        assert [m.content for m in tk.history("tenant-chat")] == ["hello from a new tenant"]


def test_a_schema_the_role_may_not_create_is_a_clear_error(
    postgres_server: str, missing_schema: str
) -> None:
    role = f"tk_role_{uuid.uuid4().hex[:12]}"  # a plain role: no CREATE on the database
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
    parts = urlsplit(postgres_server)
    as_role = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))
    try:
        with pytest.raises(InvalidConfig) as caught:
            turnkeeper.open(_with_search_path(as_role, missing_schema))
        assert str(caught.value) == (
            f"database_url: schema {missing_schema!r} (from the search_path) does not exist and"
            f" {role!r} may not create it: permission denied for database"
            f" {urlsplit(postgres_server).path[1:]}"
        )
        assert _tables_in(postgres_server, missing_schema) == set()
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize(
    ("setting", "names"),
    [
        ('"$user", public', ["$user", "public"]),
        ("Tenant_A", ["tenant_a"]),
        ('"Mixed""Case", b , c', ['Mixed"Case', "b", "c"]),
        ('a, "b,c"', ["a", "b,c"]),
        ("", []),
    ],
)
def test_search_path_settings_are_read_as_postgresql_does(setting: str, names: list[str]) -> None:
    assert search_path(setting) == names
