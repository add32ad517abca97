"""The async face: `turnkeeper.open_async()` gives `AsyncTurnkeeper`, the whole `Turnkeeper`
surface awaited, over the same core. (Every behaviour of the contract suites in tests/storage is
also proven through this face on every backend; see tests/storage/conftest.py.)"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from pathlib import Path
from typing import Any

import pytest

import turnkeeper
from tests.conftest import Clock, make_sqlite_store, run_async
from turnkeeper import AsyncTurnkeeper, SessionNotFound, Turnkeeper
from turnkeeper.config import Settings, load_settings
from turnkeeper.service.aio import Face, Workers
from turnkeeper.storage.sqlite import SQLiteStore
from turnkeeper.types import Message, NewMessage

PLAIN = {"now", "budget_for", "draft", "remembered"}
"""The operations that touch no store: plain calls on both faces."""


def _public(obj: object) -> set[str]:
    names = {name for name in dir(obj) if not name.startswith("_")}
    return {
        name
        for name in names
        if not (getattr(type(obj), name, None).__doc__ or "").startswith("Deprecated")
    }


def _same_surface(sync: Any, face: Any, where: str) -> None:
    assert isinstance(face, Face) and face.sync is sync, where
    for name in _public(sync):
        assert hasattr(face, name), f"{where}.{name} is missing on the async face"
        ours, theirs = getattr(sync, name), getattr(face, name)
        if isinstance(theirs, Face):
            _same_surface(ours, theirs, f"{where}.{name}")
        elif inspect.ismethod(ours) and name not in PLAIN:
            awaited = inspect.iscoroutinefunction(theirs) or inspect.isasyncgenfunction(theirs)
            assert awaited, f"{where}.{name} is not awaitable"
            assert inspect.isasyncgenfunction(theirs) == inspect.isgeneratorfunction(ours)
            assert inspect.signature(theirs) == inspect.signature(ours), f"{where}.{name}"
            assert name == "close" or theirs.__doc__ == ours.__doc__
        elif inspect.ismethod(ours):
            assert not inspect.iscoroutinefunction(theirs)
            assert inspect.signature(theirs) == inspect.signature(ours), f"{where}.{name}"
        else:
            assert theirs is ours or theirs == ours, f"{where}.{name}"
    extra = _public(face) - _public(sync) - {"sync", "run_sync"}
    assert extra == set(), f"{where} has names Turnkeeper lacks: {extra}"


def test_the_async_face_has_every_operation_of_turnkeeper_with_its_signature(
    tmp_path: Path, settings: Settings
) -> None:
    sync = Turnkeeper(make_sqlite_store(tmp_path / "surface.db"), settings)
    face = AsyncTurnkeeper(sync)
    try:
        _same_surface(sync, face, "tk")
        assert {"agents", "transfer", "keys"} <= _public(face)
    finally:
        face._workers.shutdown()
        sync.close()


def test_open_async_stores_what_open_reads_and_raises_the_same_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"

    async def talk() -> tuple[str, list[str], type[Exception]]:
        async with turnkeeper.open_async(url) as tk:
            session, created = await tk.get_or_create_session("support-42", project="acme")
            assert created
            await tk.append(session, "user", "Where is my order?")
            await tk.append_many(session, [NewMessage("assistant", "On its way.")])
            window = await tk.context(session, budget_tokens=500)
            await tk.agents.set_phase(session, "verification")
            ids = [sid async for sid in tk.iter_session_ids(project="acme")]
            try:
                await tk.get_session("nobody", project="acme")
            except SessionNotFound as exc:
                error = type(exc)
            return session.id, [m.content for m in window.messages] + ids, error

    session_id, seen, error = run_async(talk())
    assert seen == ["Where is my order?", "On its way.", session_id]
    assert error is SessionNotFound
    with turnkeeper.open(url) as tk:
        history = tk.history("support-42", project="acme")
        assert [m.content for m in history][:2] == ["Where is my order?", "On its way."]
        assert tk.get_session(session_id).phase == "verification"


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="-")


class ThreadRecordingStore(SQLiteStore):
    """A real SQLite store that notes which thread each append ran on, and the caller's
    `REQUEST` context variable as the append saw it."""

    def __init__(self, url: str) -> None:
        super().__init__(url, synchronous="NORMAL")
        self.threads: set[str] = set()
        self.requests: list[str] = []

    def append_messages(self, *args: Any, **kwargs: Any) -> list[Message]:
        self.threads.add(threading.current_thread().name)
        self.requests.append(REQUEST.get())
        return super().append_messages(*args, **kwargs)


def test_sqlite_writes_run_on_one_dedicated_thread_and_the_loop_stays_free(
    tmp_path: Path, clock: Clock
) -> None:
    store = ThreadRecordingStore(f"sqlite:///{tmp_path / 'writer.db'}")
    settings = load_settings(database_url=f"sqlite:///{tmp_path / 'writer.db'}")
    face = AsyncTurnkeeper(Turnkeeper(store, settings, clock=clock))
    assert face._workers.threads == 1

    async def talk() -> tuple[list[int], int]:
        session = await face.create_session(key="busy")
        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beating = asyncio.create_task(heartbeat())
        stored = await asyncio.gather(*(face.append(session, "user", f"m{n}") for n in range(40)))
        beating.cancel()
        await face.close()
        return sorted(m.seq for m in stored), ticks

    seqs, ticks = run_async(talk())
    assert seqs == list(range(1, 41))  # gapless, none lost, none doubled
    assert ticks > 0  # the loop ran other tasks while the appends were on the writer thread
    assert len(store.threads) == 1 and next(iter(store.threads)).startswith("turnkeeper-async")


def test_the_callers_context_variables_reach_the_operation(tmp_path: Path, clock: Clock) -> None:
    """Request ids in the logs follow the call onto the worker, as with `asyncio.to_thread`."""
    store = ThreadRecordingStore(f"sqlite:///{tmp_path / 'context.db'}")
    face = AsyncTurnkeeper(Turnkeeper(store, load_settings(), clock=clock))

    async def request(name: str) -> None:
        REQUEST.set(name)
        await face.append("ctx", "user", f"from {name}")

    async def talk() -> None:
        await face.create_session(key="ctx")
        await asyncio.gather(request("req-1"), request("req-2"))
        await face.close()

    run_async(talk())
    assert sorted(store.requests) == ["req-1", "req-2"]


def test_postgres_gets_one_worker_per_pooled_connection() -> None:
    pooled = load_settings(database_url="postgresql://app@db/x", postgres_pool_size=7)
    assert Workers.for_settings(pooled).threads == 7
    assert Workers.for_settings(load_settings(database_url="memory://")).threads == 1
    with pytest.raises(ValueError, match="at least one worker"):
        Workers(0)


def test_open_async_picks_native_drivers_on_postgresql_unless_told_not_to(
    postgres_url: str, tmp_path: Path
) -> None:
    from turnkeeper.errors import InvalidConfig
    from turnkeeper.service.aio import Bridge

    async def scenario() -> None:
        for native, runner in ((None, Bridge), (True, Bridge), (False, Workers)):
            async with turnkeeper.open_async(postgres_url, native=native) as tk:
                assert isinstance(tk._workers, runner), native
                session = await tk.create_session(key=f"native-{native}")
                await tk.append(session.id, "user", "hi")
                assert [m.content for m in await tk.history(session.id)] == ["hi"]
        with pytest.raises(InvalidConfig, match="native"):
            turnkeeper.open_async(f"sqlite:///{tmp_path / 'n.db'}", native=True)
        async with turnkeeper.open_async(f"sqlite:///{tmp_path / 'n.db'}") as tk:
            assert isinstance(tk._workers, Workers)

    run_async(scenario())
