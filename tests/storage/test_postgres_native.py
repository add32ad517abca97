"""The native async face on PostgreSQL: the store's one sync code awaits psycopg's async pool
on the loop (no worker thread), many tasks share a small pool, a cancelled operation leaves no
connection checked out and no transaction open, and a model's summary waits off the loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest

from tests.conftest import Clock, run_async
from turnkeeper.bridge import in_bridge
from turnkeeper.config import Settings
from turnkeeper.context.summarizer import LLMSummarizer
from turnkeeper.llm import LLMClient
from turnkeeper.service import Turnkeeper
from turnkeeper.service.aio import AsyncTurnkeeper, Bridge
from turnkeeper.storage.postgres import PostgresStore
from turnkeeper.types import NewMessage

TEXT = "We compared three hotels near the river and argued about the budget for the trip."


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
        window = await face.context(session, budget_tokens=500)
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
            await face.context(session, budget_tokens=300)

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


class SlowModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that takes 0.6 s to answer every summary request."""

    calls = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).calls += 1
        time.sleep(0.6)
        body = json.dumps({"choices": [{"message": {"content": "The gist so far."}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_model_summary_waits_off_the_loop_and_concurrent_builds_share_it(
    postgres_url: str, settings: Settings, clock: Clock
) -> None:
    SlowModel.calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = LLMClient(f"http://127.0.0.1:{server.server_address[1]}/v1", max_retries=0)
    summarizer = LLMSummarizer(client, model="summary-model")
    sync = Turnkeeper(
        PostgresStore(postgres_url, max_size=4), settings, clock=clock, summarizer=summarizer
    )
    face = AsyncTurnkeeper(sync)
    session = sync.create_session()
    sync.append_many(session, [NewMessage("user", f"{TEXT} {i}") for i in range(40)])

    async def build_twice_while_ticking() -> tuple[list[Any], int]:
        ticks = 0
        done = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        windows = await asyncio.gather(
            *(
                face.context(session, strategy="summarize", budget_tokens=400, keep_recent=4)
                for _ in range(2)
            )
        )
        done.set()
        await ticker
        await face.close()
        return list(windows), ticks

    try:
        windows, ticks = run_async(build_twice_while_ticking())
    finally:
        server.shutdown()
        client.close()
    for window in windows:
        assert window.report.messages_summarized > 0
        assert any("The gist so far." in (m.content or "") for m in window.messages)
    assert SlowModel.calls == 1  # the second build waited for the first's checkpoint
    assert ticks >= 30, ticks  # the loop kept running through the model's 0.6 s
