"""The PostgreSQL pools hand out an idle connection without asking the server (no empty query)
while its socket has nothing to read, and still never hand out one the server has ended: a
backend killed with `pg_terminate_backend` leaves its socket readable (the error, then end of
file), so the pool checks it, finds it dead and connects afresh. Blocking and async pools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import run_async
from turnkeeper.bridge import run_bridged
from turnkeeper.storage.postgres import PostgresStore

BACKEND_PID = "SELECT pg_backend_pid() AS pid"


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    """A store whose pools hold one connection, so every read gets the same one back."""
    opened = PostgresStore(postgres_url, min_size=1, max_size=1)
    yield opened
    opened.close()


def _terminate(server_url: str, pid: int) -> None:
    """End backend `pid` from another connection, and wait until it is gone."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            admin.execute("SELECT pg_sleep(0.01)")


def _pid(store: PostgresStore) -> int:
    return int(store._read(BACKEND_PID)[0]["pid"])


def test_an_idle_connection_is_handed_out_without_a_query(
    store: PostgresStore, tmp_path: Path
) -> None:
    trace_path = tmp_path / "libpq.trace"
    with trace_path.open("w") as trace:
        with store._pool.connection() as conn:
            conn.pgconn.trace(trace.fileno())
        _pid(store)  # the same, idle connection, handed out again
        with store._pool.connection() as conn:
            conn.pgconn.untrace()
    sent = [line.split("\t") for line in trace_path.read_text().splitlines()]
    queries = [fields[4] for fields in sent if fields[1:2] == ["F"] and fields[3] == "Query"]
    answers = [fields for fields in sent if fields[1:2] == ["B"] and fields[3] == "ReadyForQuery"]
    assert '""' not in [query.strip() for query in queries]  # no empty query to check it
    assert len(answers) == 1  # the read alone: one round trip


def test_a_terminated_connection_is_replaced_by_the_blocking_pool(
    store: PostgresStore, postgres_server: str
) -> None:
    first = _pid(store)
    _terminate(postgres_server, first)
    second = _pid(store)  # no error: the dead connection was not handed out
    assert second != first
    assert store._pool.get_stats()["connections_lost"] == 1


def test_a_terminated_connection_is_replaced_by_the_async_pool(
    store: PostgresStore, postgres_server: str
) -> None:
    async def scenario() -> tuple[int, int, int]:
        first = await run_bridged(_pid, store)
        _terminate(postgres_server, first)
        second = await run_bridged(_pid, store)
        lost = (await run_bridged(store._bridged_pool)).get_stats()["connections_lost"]
        await run_bridged(store.close)
        return first, second, lost

    first, second, lost = run_async(scenario())
    assert second != first
    assert lost == 1
