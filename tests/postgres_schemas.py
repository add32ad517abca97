"""PostgreSQL schemas for tests: a blank one of a test's own, or an empty migrated one from a pool.

Creating a schema and running every migration in it costs the server about 0.1 s of CPU (dozens
of DDL statements, each its own commit), and dropping it again more; over a thousand tests open a
fresh PostgreSQL store, which made this a tenth of the whole suite's CPU on a two-core machine.
Most of those tests need an empty store, not a blank schema, so `MigratedSchemas` keeps the
schemas it made: one handed back is emptied (`DELETE` of every row, a millisecond or two) and
handed out again. What a test sees is what a freshly migrated schema holds: every table empty
except the migrations' own record. A schema a test changed — a table, a column or a trigger
added, dropped or altered (a test that makes writes fail with a trigger of its own) — is
dropped instead of reused, and so is one that cannot be emptied at once (a connection the test
left open still holding a lock).

Tests of migrations, and of a blank schema's first open, use `blank_schema` (the
`blank_postgres_url` fixture): a schema of their own, dropped afterwards.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import psycopg
from psycopg import sql

MIGRATIONS_TABLE = "schema_migrations"
"""The one table a migrated schema holds rows in; kept when a schema is emptied."""


_SHAPE = """
SELECT md5(string_agg(part, ';' ORDER BY part)) FROM (
    SELECT name || ':' || coalesce(to_regclass(name)::oid::text, 'gone') AS part
    FROM unnest(%(tables)s::text[]) AS name
    UNION ALL
    SELECT attrelid::text || ':' || attname || ':' || atttypid::text || ':' || attnotnull::text
    FROM pg_attribute WHERE attrelid = ANY(%(oids)s) AND attnum > 0 AND NOT attisdropped
    UNION ALL
    SELECT tgrelid::text || ':' || tgname || ':' || tgenabled::text
    FROM pg_trigger WHERE tgrelid = ANY(%(oids)s)
) AS parts
"""
"""What a test could change in a schema that would reach the next test: its tables (one
dropped, or made again), their columns, and the triggers on them. Every lookup goes through a
catalog index (by name, by the tables' oids), so it stays cheap on a server whose catalogs
thousands of schemas made and dropped have bloated."""


def schema_url(server_url: str, schema: str, lease: int | None = None) -> str:
    """`server_url` with connections using `schema` (their `search_path`); with `lease`, a
    setting of no effect (`tk.lease`) makes the URL, and so the Redis namespace, one of its own."""
    separator = "&" if "?" in server_url else "?"
    options = f"-csearch_path={schema}" + ("" if lease is None else f" -ctk.lease={lease}")
    return f"{server_url}{separator}options={quote(options)}"


def _new_name() -> str:
    return f"tk_{uuid.uuid4().hex[:16]}"


def _drop(conn: psycopg.Connection, schema: str) -> None:
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def blank_schema(server_url: str) -> Iterator[str]:
    """A new empty schema of the caller's own (not even migrated); yields a URL whose
    connections use it, and drops it with everything in it afterwards."""
    schema = _new_name()
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield schema_url(server_url, schema)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            _drop(conn, schema)


class MigratedSchemas:
    """Empty, migrated schemas on one server, reused within this test process (see the module).

    Each schema handed out has a URL of its own (`schema_url`'s `lease`), so the Redis cache's
    namespace, a digest of the store's URL, is new for every test as it is for a new schema:
    nothing a test cached (sessions imported with fixed ids included) reaches the next."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self._idle: list[str] = []
        self._abandoned: list[str] = []
        self._made: dict[str, tuple[list[str], str]] = {}
        """Each schema made here: its tables to empty, and its shape (`_SHAPE`) once made."""
        self._leases = itertools.count(1)
        self._conn: psycopg.Connection | None = None

    def _admin(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.server_url, autocommit=True)
            self._conn.execute("SET lock_timeout = '2s'")
        return self._conn

    def _create(self) -> str:
        from turnkeeper.storage.sql.postgres import PostgresStore

        schema = _new_name()
        self._admin().execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        PostgresStore(schema_url(self.server_url, schema), min_size=1, max_size=1).close()
        rows = self._admin().execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> %s",
            (schema, MIGRATIONS_TABLE),
        )
        tables = [table for (table,) in rows]
        self._made[schema] = (tables, self._shape(schema, [*tables, MIGRATIONS_TABLE]))
        return schema

    def _shape(self, schema: str, tables: list[str]) -> str:
        """`_SHAPE` of `schema`, whose tables are `tables`."""
        names = [f'"{schema}"."{table}"' for table in tables]
        conn = self._admin()
        oids = conn.execute(
            "SELECT array_agg(to_regclass(name)::oid) FROM unnest(%s::text[]) AS name", (names,)
        ).fetchone()
        assert oids is not None
        row = conn.execute(_SHAPE, {"tables": names, "oids": oids[0]}).fetchone()
        assert row is not None
        return str(row[0])

    def take(self) -> tuple[str, str]:
        """An empty migrated schema, and a URL whose connections use it, until `give_back`."""
        schema = self._idle.pop() if self._idle else self._create()
        return schema, schema_url(self.server_url, schema, next(self._leases))

    @contextmanager
    def lease(self) -> Iterator[str]:
        """A URL on an empty migrated schema only the caller uses, for the `with` block."""
        schema, url = self.take()
        try:
            yield url
        finally:
            self.give_back(schema)

    def give_back(self, schema: str) -> None:
        """Empty `schema` for the next `take` (drop it if it cannot be emptied now).

        Rows are deleted with the server's triggers off (`session_replication_role`), foreign
        keys included, so the tables empty in any order; `TRUNCATE` would make new files for
        every table and index, ten times the cost for the few rows a test writes."""
        conn = self._admin()
        tables, shape = self._made[schema]
        try:
            if self._shape(schema, [*tables, MIGRATIONS_TABLE]) != shape:
                raise ValueError(f"the test changed schema {schema}")
            with conn.transaction():
                conn.execute("SET LOCAL session_replication_role = replica")
                for table in tables:
                    conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, table)))
        except (psycopg.Error, ValueError):
            del self._made[schema]
            try:
                _drop(conn, schema)
            except psycopg.Error:  # still locked: dropped when the process ends
                self._abandoned.append(schema)
            return
        self._idle.append(schema)

    def close(self) -> None:
        """Drop every schema made here."""
        conn = self._admin()
        conn.execute("SET lock_timeout = '10s'")
        for schema in self._idle + self._abandoned:
            with contextlib.suppress(psycopg.Error):  # held by a connection left open: left
                _drop(conn, schema)
        self._idle.clear()
        self._abandoned.clear()
        conn.close()
