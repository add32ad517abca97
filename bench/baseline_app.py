"""The baseline `bench_http.py` measures turnkeeper against: the same work done by hand.

A minimal FastAPI app with the routes the load uses (create a session, append a message, read
the context, read the session's message count), served by the same server stack as `turnkeeper
serve` (`turnkeeper.server.run`: the same bound socket, uvicorn settings and workers). Each
append is one INSERT of a message row; each context read is one SELECT of the newest rows. No
auth, no token counting, no validation beyond FastAPI's, no logging, no metrics: what is left
is the floor a memory layer on this stack cannot go below, so turnkeeper ÷ baseline is the
share of the hardware the memory layer leaves to the requests.

    python bench/baseline_app.py --db sqlite:///tmp/base.db --port 8100 [--workers N]
"""

from __future__ import annotations

import argparse
import threading
from datetime import UTC, datetime
from typing import Any, Protocol

from fastapi import FastAPI, Response
from pydantic import BaseModel

NEWEST = 100
"""Rows a context read returns (about the 2,000 tokens the load asks turnkeeper for)."""


class NewSession(BaseModel):
    key: str
    get_or_create: bool = False


class NewMessage(BaseModel):
    role: str
    content: str
    id: str | None = None


class Database(Protocol):
    def execute(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...


class SQLite:
    """One connection per thread, WAL and synchronous=FULL as turnkeeper's default."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.local = threading.local()
        self.execute(
            "CREATE TABLE IF NOT EXISTS messages (session TEXT NOT NULL, seq INTEGER NOT NULL,"
            " id TEXT, role TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL,"
            " PRIMARY KEY (session, seq))",
            (),
        )

    def execute(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        import sqlite3

        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=60)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            self.local.conn = conn
        return conn.execute(sql.replace("%s", "?"), params).fetchall()


class Postgres:
    """A psycopg pool of 8 connections (turnkeeper's default pool size), autocommit; the table
    is `baseline_messages` (the SQL says `messages`)."""

    def __init__(self, url: str) -> None:
        from psycopg_pool import ConnectionPool

        self.pool = ConnectionPool(url, min_size=8, max_size=8, kwargs={"autocommit": True})
        self.execute(
            "CREATE TABLE IF NOT EXISTS messages (session TEXT NOT NULL,"
            " seq INTEGER NOT NULL, id TEXT, role TEXT NOT NULL, content TEXT NOT NULL,"
            " created_at TEXT NOT NULL, PRIMARY KEY (session, seq))",
            (),
        )

    def execute(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self.pool.connection() as conn:
            cursor = conn.execute(sql.replace("messages", "baseline_messages"), params)
            return cursor.fetchall() if cursor.description else []


def create_app(database_url: str) -> FastAPI:
    """The baseline app on `database_url` (sqlite:///… or postgresql://…)."""
    app = FastAPI()
    holder: dict[str, Database] = {}

    def db() -> Database:
        if "db" not in holder:
            if database_url.startswith("sqlite:///"):
                holder["db"] = SQLite(database_url.removeprefix("sqlite:///"))
            else:
                holder["db"] = Postgres(database_url)
        return holder["db"]

    @app.get("/readyz")
    def ready() -> dict[str, str]:
        db()
        return {"status": "ok"}

    @app.post("/v1/sessions", status_code=201)
    def create_session(body: NewSession) -> dict[str, str]:
        return {"key": body.key}

    @app.post("/v1/sessions/{key}/messages", status_code=201)
    def append(key: str, body: NewMessage) -> dict[str, Any]:
        now = datetime.now(UTC).isoformat()
        rows = db().execute(
            "INSERT INTO messages (session, seq, id, role, content, created_at)"
            " SELECT %s, COALESCE(MAX(seq), 0) + 1, %s, %s, %s, %s FROM messages"
            " WHERE session = %s RETURNING seq",
            (key, body.id, body.role, body.content, now, key),
        )
        return {"id": body.id, "seq": rows[0][0], "role": body.role, "content": body.content}

    @app.get("/v1/sessions/{key}/context")
    def context(key: str, response: Response) -> dict[str, Any]:
        rows = db().execute(
            "SELECT role, content FROM messages WHERE session = %s ORDER BY seq DESC LIMIT %s",
            (key, NEWEST),
        )
        return {"messages": [{"role": r, "content": c} for r, c in reversed(rows)]}

    @app.get("/v1/sessions/{key}")
    def session(key: str) -> dict[str, Any]:
        rows = db().execute("SELECT COUNT(*) FROM messages WHERE session = %s", (key,))
        return {"key": key, "message_count": rows[0][0]}

    return app


def main() -> None:
    from turnkeeper.config import load_settings
    from turnkeeper.server import run

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    settings = load_settings(database_url=args.db, port=args.port, auth=False)
    sock = run.bind(settings)
    run.serve_app(lambda index: create_app(args.db), settings, sock, workers=args.workers)


if __name__ == "__main__":
    main()
