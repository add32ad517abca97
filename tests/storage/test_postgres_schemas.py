"""The test suite's pool of migrated PostgreSQL schemas (`tests/postgres_schemas.py`): a schema
handed back is empty when it is handed out again, and one a test changed is never reused."""

from __future__ import annotations

import psycopg

import turnkeeper
from tests.postgres_schemas import MigratedSchemas


def test_a_schema_handed_back_comes_back_empty(postgres_server: str) -> None:
    pool = MigratedSchemas(postgres_server)
    try:
        schema, url = pool.take()
        with turnkeeper.open(url) as tk:
            session = tk.create_session(key="left-behind")
            tk.append(session, "user", "words a later test must not see")
        pool.give_back(schema)
        again, url = pool.take()
        assert again == schema
        with turnkeeper.open(url) as tk:
            assert tk.list_sessions().items == ()
            assert tk.search("words") == []
        pool.give_back(again)
    finally:
        pool.close()


def test_a_schema_a_test_changed_is_not_reused(postgres_server: str) -> None:
    pool = MigratedSchemas(postgres_server)
    try:
        schema, url = pool.take()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$"
            )
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON messages"
                " FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        pool.give_back(schema)
        other, url = pool.take()
        assert other != schema
        with turnkeeper.open(url) as tk:
            tk.append(tk.create_session(), "user", "stored")
        pool.give_back(other)
        with psycopg.connect(postgres_server) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
        assert row == (0,)
    finally:
        pool.close()
