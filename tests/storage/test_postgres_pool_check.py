"""Pooled PostgreSQL connections the server ended while they idled (a restart, a failover,
`pg_terminate_backend`, an idle-connection reaper) cost no request: the first statement on a
dead connection, which is always one that changes nothing (a read, a transaction's BEGIN), runs
again on another, through the library and the async API alike. A write whose connection dies
after it has sent something is never retried: it fails, and nothing of it is stored.

An idle connection is handed out without asking the server (no empty query first)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import turnkeeper
from tests.conftest import run_async
from turnkeeper import AsyncTurnkeeper, BackendUnavailable, Turnkeeper
from turnkeeper.config import load_settings
from turnkeeper.service.aio import Workers
from turnkeeper.storage.sql.postgres import PostgresStore

POOL = 8  # the default `postgres_pool_size`


@pytest.fixture
def named_url(postgres_url: str) -> str:
    """The test's schema, with an application name that marks this test's connections (the
    shared server's other connections are never touched)."""
    return f"{postgres_url}&application_name=tk-dead-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tk(named_url: str, tmp_path: Path) -> Iterator[Turnkeeper]:
    """The library over a store whose pool keeps all its connections open (every one of them
    idle in the pool, and so every one of them ended below)."""
    settings = load_settings(database_url=named_url)
    store = PostgresStore(named_url, min_size=POOL, max_size=POOL)
    with Turnkeeper(store, settings) as opened:
        yield opened


def _application(url: str) -> str:
    return url.rsplit("application_name=", 1)[1]


def _terminate_all(server_url: str, application: str, *, expected: int) -> None:
    """Once `application` holds `expected` connections or more (a pool refills itself in
    the background), end them all from the server side, and wait until they are gone."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        pids: list[int] = []
        while len(pids) < expected:
            admin.execute("SELECT pg_sleep(0.01)")
            pids = [
                row[0]
                for row in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application,)
                )
            ]
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
        while admin.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone():
            admin.execute("SELECT pg_sleep(0.01)")


def test_an_idle_connection_is_handed_out_without_a_query(
    postgres_url: str, tmp_path: Path
) -> None:
    store = PostgresStore(postgres_url, min_size=1, max_size=1)
    trace_path = tmp_path / "libpq.trace"
    try:
        with trace_path.open("w") as trace:
            with store._pool.connection() as conn:
                conn.pgconn.trace(trace.fileno())
            store.list_sessions(turnkeeper.types.SessionFilter(), limit=1)  # the same connection
            with store._pool.connection() as conn:
                conn.pgconn.untrace()
    finally:
        store.close()
    sent = [line.split("\t") for line in trace_path.read_text().splitlines()]
    queries = [fields[4] for fields in sent if fields[1:2] == ["F"] and fields[3] == "Query"]
    answers = [fields for fields in sent if fields[1:2] == ["B"] and fields[3] == "ReadyForQuery"]
    assert '""' not in [query.strip() for query in queries]  # no empty query to check it
    assert len(answers) == 1  # the read alone: one round trip


def test_reads_and_appends_succeed_after_the_server_ended_every_idle_connection(
    tk: Turnkeeper, named_url: str, postgres_server: str
) -> None:
    session = tk.create_session(key="k")
    tk.append(session, "user", "before")
    for round_ in range(3):
        _terminate_all(postgres_server, _application(named_url), expected=POOL)
        assert [m.content for m in tk.history(session)][-1] == (
            "before" if round_ == 0 else f"after {round_ - 1}"
        )
        _terminate_all(postgres_server, _application(named_url), expected=POOL)
        tk.append(session, "user", f"after {round_}")
    contents = [m.content for m in tk.history(session)]
    assert contents == ["before", "after 0", "after 1", "after 2"]  # none lost, none doubled


def test_the_async_api_succeeds_after_the_server_ended_every_idle_connection(
    tk: Turnkeeper, named_url: str, postgres_server: str
) -> None:
    async def terminate_all() -> None:
        """Every connection of the pool, ended off the loop (waiting for them is blocking)."""
        application = _application(named_url)
        await asyncio.to_thread(_terminate_all, postgres_server, application, expected=POOL)

    workers = Workers(POOL)  # one per pooled connection, as `open_async` sizes them
    face = AsyncTurnkeeper(tk, workers)

    async def scenario() -> list[str]:
        session = await face.create_session(key="k")
        await face.append(session, "user", "before")
        for round_ in range(3):
            await terminate_all()
            assert [m.content for m in await face.history(session)][-1] == (
                "before" if round_ == 0 else f"after {round_ - 1}"
            )
            await terminate_all()
            await face.append(session, "user", f"after {round_}")
        return [m.content for m in await face.history(session)]

    try:
        assert run_async(scenario()) == ["before", "after 0", "after 1", "after 2"]
    finally:
        workers.shutdown()


def test_a_write_whose_connection_dies_after_sending_fails_and_stores_nothing(
    tk: Turnkeeper, named_url: str, postgres_url: str, postgres_server: str
) -> None:
    """The append's transaction has begun and its first write is waiting for the session row
    (locked by another connection) when its connection is ended: the write is not retried
    elsewhere (its outcome is the client's to learn, by retrying with the same message id),
    and nothing of it is stored."""
    session = tk.create_session(key="k")
    failures: list[BaseException] = []

    def append() -> None:
        try:
            tk.append(session, "user", "lost", id="m-1")
        except BaseException as exc:
            failures.append(exc)

    with psycopg.connect(postgres_url, autocommit=True) as locker, locker.transaction():
        locker.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session.id,))
        writer = threading.Thread(target=append)
        writer.start()
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            waiting = None
            while waiting is None and writer.is_alive():  # until the append waits for the lock
                waiting = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                    " AND wait_event_type = 'Lock'",
                    (_application(named_url),),
                ).fetchone()
                admin.execute("SELECT pg_sleep(0.01)")
            assert waiting is not None, failures
            admin.execute("SELECT pg_terminate_backend(%s)", (waiting[0],))
        writer.join()
    assert [type(exc) for exc in failures] == [BackendUnavailable]
    assert tk.history(session) == []
    tk.append(session, "user", "lost", id="m-1")  # the client's retry
    assert [m.id for m in tk.history(session)] == ["m-1"]
