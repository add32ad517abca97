"""Every PostgreSQL statement is bounded, through the library and the async API alike: the
server cancels one that runs past `postgres_statement_timeout`, and a server that stops
answering altogether (every process frozen with SIGSTOP: connections stay open and the kernel
still acknowledges every packet) costs a statement `postgres_socket_timeout`, after which its
connection is dropped; either is a `BackendUnavailable`, and the store serves on once the server
answers again. Nothing is stored twice or half. The async API's workers run the same bounded
statements, so an awaited call on a frozen server is answered within the bound too.

The frozen server is one of the test's own (tests/hostile/throwaway_postgres.py); the shared
server is only ever locked, never stopped. The time each bound takes is measured by
bench/bench_outage.py, not asserted here."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import psycopg
import pytest

import turnkeeper
from tests.conftest import run_async
from tests.hostile.throwaway_postgres import ThrowawayPostgres
from turnkeeper import BackendUnavailable

T = TypeVar("T")

GUARD_SECONDS = 60
"""Unbounded, a statement on a frozen server would wait for ever: the server is thawed after
this long whatever happens, so such a test ends (and fails) instead of hanging."""


@pytest.fixture(scope="module")
def server() -> Iterator[ThrowawayPostgres]:
    with ThrowawayPostgres() as running:
        yield running


@pytest.fixture
def frozen_later(server: ThrowawayPostgres) -> Iterator[Callable[[], None]]:
    """Freezes the server when called; it is thawed at the test's end (or by the guard)."""
    guard = threading.Timer(GUARD_SECONDS, server.thaw)
    guard.start()
    try:
        yield server.freeze
    finally:
        guard.cancel()
        server.thaw()


def _first_success(call: Callable[[], T]) -> T:
    """`call()` once the store has reconnected (a connection attempt that met the frozen
    server may still be running out when it is thawed)."""
    for _ in range(50):
        try:
            return call()
        except BackendUnavailable:
            continue
    return call()


def test_a_statement_past_the_statement_timeout_fails_and_the_store_serves_on(
    postgres_url: str,
) -> None:
    release = threading.Event()
    locked = threading.Event()

    def hold_the_session_row(session_id: str) -> None:
        with psycopg.connect(postgres_url, autocommit=True) as locker, locker.transaction():
            locker.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
            locked.set()
            release.wait(GUARD_SECONDS)  # unbounded, the append would wait until then

    with turnkeeper.open(postgres_url, postgres_statement_timeout="300ms") as tk:
        session = tk.create_session(key="k")
        locker = threading.Thread(target=hold_the_session_row, args=(session.id,))
        locker.start()
        locked.wait()
        try:
            with pytest.raises(BackendUnavailable):
                tk.append(session, "user", "waited too long")
        finally:
            release.set()
            locker.join()
        tk.append(session, "user", "after")
        assert [m.content for m in tk.history(session)] == ["after"]


def test_a_frozen_server_fails_reads_and_writes_then_serves_again(
    server: ThrowawayPostgres, frozen_later: Callable[[], None]
) -> None:
    with turnkeeper.open(server.url) as tk:  # the default bounds
        session = tk.create_session(key="sync")
        tk.append(session, "user", "before")
        frozen_later()
        with pytest.raises(BackendUnavailable):
            tk.history(session)  # on the pool's idle connection: the socket timeout
        with pytest.raises(BackendUnavailable):
            tk.append(session, "user", "while frozen")
        server.thaw()
        _first_success(lambda: tk.append(session, "user", "after"))
        assert [m.content for m in tk.history(session)] == ["before", "after"]


def test_the_async_api_on_a_frozen_server_fails_then_serves_again(
    server: ThrowawayPostgres, frozen_later: Callable[[], None]
) -> None:
    async def scenario() -> list[str]:
        async with turnkeeper.open_async(server.url) as face:  # the default bounds
            session = await face.create_session(key="async")
            await face.append(session, "user", "before")
            frozen_later()
            with pytest.raises(BackendUnavailable):
                await face.history(session)
            with pytest.raises(BackendUnavailable):
                await face.append(session, "user", "while frozen")
            await asyncio.to_thread(server.thaw)
            for _ in range(50):
                try:
                    await face.append(session, "user", "after")
                    break
                except BackendUnavailable:
                    continue
            return [m.content for m in await face.history(session)]

    assert run_async(scenario()) == ["before", "after"]
