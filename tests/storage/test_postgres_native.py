"""The native async face on PostgreSQL: the store's one sync code awaits psycopg's async pool
on the loop (no worker thread), many tasks share a small pool, and a cancelled operation
leaves no connection checked out and no transaction open."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from tests.conftest import Clock, run_async
from turnkeeper.bridge import in_bridge
from turnkeeper.config import Settings
from turnkeeper.service import Turnkeeper
from turnkeeper.service.aio import AsyncTurnkeeper, Bridge
from turnkeeper.storage.postgres import PostgresStore


class NotingStore(PostgresStore):
    """A real PostgreSQL store that notes, for each read and transaction, whether it ran in
    the bridge and on which thread."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        self.seen: list[tuple[bool, str]] = []
        super().__init__(url, **kwargs)

    def _read(self, query: str, params: Sequence[Any] = ()) -> Any:
        self.seen.append((in_bridge(), threading.current_thread().name))
        return super()._read(query, params)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        self.seen.append((in_bridge(), threading.current_thread().name))
        with super()._transaction() as tx:
            yield tx


def _checked_out(store: PostgresStore) -> int:
    stats = next(iter(store._async_pools.values())).result().get_stats()
    return int(stats["pool_size"]) - int(stats["pool_available"])


def test_operations_run_in_the_bridge_on_the_loop_thread_with_no_worker_thread(
    postgres_url: str, settings: Settings, clock: Clock
) -> None:
    store = NotingStore(postgres_url, max_size=4)
    sync = Turnkeeper(store, settings, clock=clock)
    face = AsyncTurnkeeper(sync)
    assert isinstance(face._workers, Bridge)
    store.seen.clear()

    async def talk() -> tuple[str, list[str]]:
        session, _ = await face.get_or_create_session("native-1")
        await face.append(session, "user", "hello")
        window = await face.context(session, max_tokens=500)
        ids = [sid async for sid in face.iter_session_ids()]
        workers = [t.name for t in threading.enumerate() if t.name.startswith("turnkeeper-async")]
        await face.close()
        assert ids == [session.id]
        return threading.current_thread().name, [m.content for m in window.messages] + workers

    loop_thread, seen = run_async(talk())
    assert seen == ["hello"]  # and no worker thread was started
    assert store.seen and set(store.seen) == {(True, loop_thread)}


def test_fifty_concurrent_operations_share_a_pool_of_four_and_keep_seqs_gapless(
    postgres_url: str, settings: Settings, clock: Clock
) -> None:
    store = PostgresStore(postgres_url, max_size=4)
    face = AsyncTurnkeeper(Turnkeeper(store, settings, clock=clock))

    async def crowd() -> tuple[list[int], int, int]:
        session = await face.create_session()

        async def turn(i: int) -> None:
            await face.append(session, "user", f"message {i}")
            await face.context(session, max_tokens=300)

        await asyncio.gather(*(turn(i) for i in range(50)))
        seqs = [m.seq for m in await face.history(session)]
        stats = next(iter(store._async_pools.values())).result().get_stats()
        await face.close()
        return seqs, int(stats["pool_max"]), int(stats["requests_num"])

    seqs, pool_max, requests = run_async(crowd())
    assert seqs == list(range(1, 51))
    assert pool_max == 4 and requests >= 100


def test_a_cancelled_append_rolls_back_and_returns_its_connection(
    postgres_url: str, settings: Settings, clock: Clock
) -> None:
    store = PostgresStore(postgres_url, max_size=2)
    sync = Turnkeeper(store, settings, clock=clock)
    face = AsyncTurnkeeper(sync)
    session = sync.create_session()
    # Writes to `messages` wait on this lock, reads do not: the append locks its session row,
    # then waits at its INSERT, holding the row lock while it is cancelled.
    blocker = psycopg.connect(postgres_url)
    blocker.execute("LOCK TABLE messages IN EXCLUSIVE MODE")

    async def cancel_midway() -> tuple[bool, int, list[int]]:
        try:
            task = asyncio.create_task(face.append(session, "user", "never stored"))
            await asyncio.sleep(0.5)
            assert not task.done()  # waiting inside its transaction
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            deadline = time.monotonic() + 5
            while _checked_out(store) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            # The session row is free again while the table lock still stands: the cancelled
            # transaction is over, not left open holding it.
            with psycopg.connect(postgres_url) as probe:
                row = probe.execute(
                    "SELECT id FROM sessions WHERE id = %s FOR UPDATE NOWAIT", (session.id,)
                ).fetchone()
            checked_out = _checked_out(store)
        finally:
            blocker.rollback()
            blocker.close()
        await face.append(session, "user", "stored")
        seqs = [m.seq for m in await face.history(session)]
        await face.close()
        return row is not None, checked_out, seqs

    free, checked_out, seqs = run_async(cancel_midway())
    assert free and checked_out == 0
    assert seqs == [1]
