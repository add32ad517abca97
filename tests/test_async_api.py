"""The async face: `turnkeeper.open_async()` gives `AsyncTurnkeeper`, the whole `Turnkeeper`
surface awaited, over the same core on worker threads (one dedicated thread on SQLite and
`memory://`, one per pooled connection on PostgreSQL). The behaviours themselves are proven
once, through `Turnkeeper`, by the contract suites (tests/storage); here: the face has every
operation with its signature, the threads it runs on, and one scripted conversation per part
through the face on every backend."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import io
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import turnkeeper
from tests.conftest import Clock, make_sqlite_store, open_test_store, run_async
from turnkeeper import (
    AsyncTurnkeeper,
    SeqConflict,
    SessionNotFound,
    Turnkeeper,
    Unauthenticated,
)
from turnkeeper.config import Settings, load_settings
from turnkeeper.errors import Unsupported
from turnkeeper.service.aio import Face, Offload, Workers
from turnkeeper.service.transfer import Transfer
from turnkeeper.storage.search import SearchStore
from turnkeeper.types import Message, NewMessage, SessionStatus

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


def test_a_face_missing_an_operation_fails_when_its_class_is_made() -> None:
    """A new sync operation without its awaited line is an import error, not a gap found by
    a user: the class statement names what is missing, and what is awaited but should not be."""
    with pytest.raises(TypeError, match=r"mirrors Transfer: expire is missing") as missing:

        class Partial(Face[Transfer], mirrors=Transfer):
            export_sessions = Offload(Transfer.export_sessions)
            import_sessions = Offload(Transfer.import_sessions)

    assert "export_sessions" not in str(missing.value)
    with pytest.raises(TypeError, match=r"expire must be a plain call"):

        class TooAwaited(Face[Transfer], mirrors=Transfer, plain={"expire"}):
            export_sessions = Offload(Transfer.export_sessions)
            import_sessions = Offload(Transfer.import_sessions)
            expire = Offload(Transfer.expire)

    with pytest.raises(TypeError, match=r"must name the class it mirrors"):

        class Unchecked(Face[Transfer]):
            pass


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


# -- the threads it runs on ----------------------------------------------------------------

REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="-")


class ThreadRecording(Turnkeeper):
    """The real service, noting for each append the thread it ran on, the caller's `REQUEST`
    context variable as the append saw it, and how many appends ran at once at most."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads: set[str] = set()
        self.requests: list[str] = []
        self.most_at_once = 0
        self._running = 0
        self._guard = threading.Lock()

    def append(self, *args: Any, **kwargs: Any) -> Message:
        with self._guard:
            self.threads.add(threading.current_thread().name)
            self.requests.append(REQUEST.get())
            self._running += 1
            self.most_at_once = max(self.most_at_once, self._running)
        try:
            return super().append(*args, **kwargs)
        finally:
            with self._guard:
                self._running -= 1


def test_sqlite_writes_run_on_one_dedicated_thread_and_the_loop_stays_free(
    tmp_path: Path, clock: Clock
) -> None:
    url = f"sqlite:///{tmp_path / 'writer.db'}"
    sync = ThreadRecording(make_sqlite_store(tmp_path / "writer.db"), load_settings(database_url=url), clock=clock)  # fmt: skip
    face = AsyncTurnkeeper(sync)
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
    assert len(sync.threads) == 1 and next(iter(sync.threads)).startswith("turnkeeper-async")
    assert sync.most_at_once == 1


def test_the_callers_context_variables_reach_the_operation(tmp_path: Path, clock: Clock) -> None:
    """Request ids in the logs follow the call onto the worker, as with `asyncio.to_thread`."""
    sync = ThreadRecording(make_sqlite_store(tmp_path / "context.db"), load_settings(), clock=clock)
    face = AsyncTurnkeeper(sync)

    async def request(name: str) -> None:
        REQUEST.set(name)
        await face.append("ctx", "user", f"from {name}")

    async def talk() -> None:
        await face.create_session(key="ctx")
        await asyncio.gather(request("req-1"), request("req-2"))
        await face.close()

    run_async(talk())
    assert sorted(sync.requests) == ["req-1", "req-2"]


def test_postgres_gets_one_worker_per_pooled_connection() -> None:
    pooled = load_settings(database_url="postgresql://app@db/x", postgres_pool_size=7)
    assert Workers.for_settings(pooled).threads == 7
    assert Workers.for_settings(load_settings(database_url="memory://")).threads == 1
    with pytest.raises(ValueError, match="at least one worker"):
        Workers(0)


def test_postgres_operations_run_on_as_many_threads_as_pooled_connections(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str, clock: Clock
) -> None:
    """Fifty concurrent turns on a pool of four: four workers share them, never more appends
    at once than connections, and the seqs stay gapless."""
    settings = load_settings(database_url=postgres_url, postgres_pool_size=4)
    store = open_test_store("postgres", request, tmp_path)  # four pooled connections
    sync = ThreadRecording(store, settings, clock=clock)
    face = AsyncTurnkeeper(sync)
    assert face._workers.threads == 4

    async def crowd() -> list[int]:
        session = await face.create_session()

        async def turn(i: int) -> None:
            await face.append(session, "user", f"message {i}")
            await face.context(session, budget_tokens=300)

        await asyncio.gather(*(turn(i) for i in range(50)))
        seqs = [m.seq for m in await face.history(session)]
        await face.close()
        return seqs

    assert run_async(crowd()) == list(range(1, 51))
    assert 1 < len(sync.threads) <= 4
    assert all(name.startswith("turnkeeper-async") for name in sync.threads)
    assert sync.most_at_once <= 4


# -- one scripted conversation per part, through the face, on every backend ------------------


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres+redis"])
def face(
    request: pytest.FixtureRequest, tmp_path: Path, settings: Settings, clock: Clock
) -> Iterator[AsyncTurnkeeper]:
    """The async face over a fresh store of each backend, with threads as `open_async` gives
    them (the test stores have four pooled PostgreSQL connections)."""
    store = open_test_store(request.param, request, tmp_path)
    threads = 1 if request.param in ("memory", "sqlite") else 4
    opened = AsyncTurnkeeper(Turnkeeper(store, settings, clock=clock), Workers(threads))
    yield opened
    run_async(opened.close())


def test_sessions_through_the_async_face(face: AsyncTurnkeeper) -> None:
    async def script() -> None:
        first, created = await face.get_or_create_session("s-1", project="acme", title="First")
        again, created_again = await face.get_or_create_session("s-1", project="acme")
        assert created and not created_again and again.id == first.id
        second = await face.create_session(key="s-2", project="acme")
        renamed = await face.update_session(first.id, title="Renamed")
        assert renamed.title == "Renamed" and (await face.get_session(first.id)).title == "Renamed"
        listed = await face.list_sessions(project="acme")
        assert {s.id for s in listed.items} == {first.id, second.id}
        ids = [sid async for sid in face.iter_session_ids(project="acme")]
        assert sorted(ids) == sorted([first.id, second.id])
        assert await face.projects_holding("s-1") == ["acme"]
        await face.append(first.id, "user", "hello")
        assert (await face.session_stats(first.id)).message_count == 1
        (acme,) = await face.project_stats("acme")
        assert acme.message_count == 1
        assert (await face.reset_session(first.id)).message_count == 0
        assert (await face.archive_session(second.id)).status is SessionStatus.ARCHIVED
        await face.delete_session(second.id)
        with pytest.raises(SessionNotFound):
            await face.get_session(second.id)

    run_async(script())


def test_the_message_log_through_the_async_face(face: AsyncTurnkeeper) -> None:
    async def script() -> None:
        session = await face.create_session(key="log")
        await face.append(session, "system", "Be brief.")
        first = await face.append(session, "user", "Hi", id="m-1")
        retried = await face.append(session, "user", "Hi", id="m-1")
        assert retried.seq == first.seq == 2  # idempotent by id
        await face.append_many(
            session, [NewMessage("assistant", "Hello"), NewMessage("user", "Bye")]
        )
        with pytest.raises(SeqConflict):
            await face.append(session, "user", "late", expected_last_seq=1)
        traced = await face.append_traced(
            await face.get_session(session.id), NewMessage("assistant", "Goodbye"), '{"turn": 1}'
        )
        assert face.store.read_traces(session.id, upto_seq=traced.seq, limit=1) == [  # type: ignore[attr-defined]
            (traced.seq, '{"turn": 1}')
        ]
        contents = [m.content for m in await face.history(session)]
        assert contents == ["Be brief.", "Hi", "Hello", "Bye", "Goodbye"]
        (newest,) = await face.history(session, newest_first=True, limit=1)
        assert newest.content == "Goodbye"
        popped = await face.pop_last_message(session)
        assert popped is not None and popped.content == "Goodbye"
        assert [m.seq for m in await face.history(session)] == [1, 2, 3, 4]

    run_async(script())


def test_context_windows_through_the_async_face(face: AsyncTurnkeeper) -> None:
    async def script() -> None:
        session = await face.create_session(key="window")
        await face.append(session, "system", "You plan trips.")
        for i in range(30):
            await face.append(
                session, "user", f"Day {i}: we walked along the river to the old mill."
            )
        window = await face.context(session, strategy="sliding_window", budget_tokens=120)
        assert window.messages[0].content == "You plan trips."
        assert window.messages[-1].content.startswith("Day 29:")
        assert 2 < len(window.messages) < 31  # the budget left the middle out
        summarized = await face.context(
            session, strategy="summarize", budget_tokens=200, keep_recent=2
        )
        assert summarized.report.messages_summarized > 0
        assert await face.summaries(session)  # the summary was kept as a checkpoint
        digest = await face.conversation_context(session.id, recent=2)
        assert digest.message_count == 31 and not digest.is_first_message
        assert len(digest.recent_messages) == 2

    run_async(script())


def test_search_through_the_async_face(face: AsyncTurnkeeper) -> None:
    async def script() -> None:
        session = await face.create_session(key="trip", project="acme")
        await face.append(session, "user", "Book the hotel by the river.")
        await face.append(session, "assistant", "Booked: two nights.")
        if not isinstance(face.store, SearchStore):  # memory:// keeps no full-text index
            with pytest.raises(Unsupported, match="full-text search"):
                await face.search("river", project="acme")
            return
        (hit,) = await face.search("river", project="acme")
        assert (hit.session_id, hit.seq) == (session.id, 1)

    run_async(script())


def test_branches_through_the_async_face(face: AsyncTurnkeeper) -> None:
    async def script() -> None:
        session = await face.create_session(key="trip")
        for text in ("Book the hotel.", "Booked: two nights.", "Add a dinner table."):
            await face.append(session, "user", text)
        branch = await face.fork(session, 2, key="trip-b")
        assert [m.content for m in await face.history(branch)] == [
            "Book the hotel.",
            "Booked: two nights.",
        ]
        assert [b.session_id for b in await face.branches(session)] == [branch.id]
        origin = await face.fork_origin(branch)
        assert origin is not None and (origin.parent_id, origin.forked_at_seq) == (session.id, 2)

    run_async(script())


def test_agents_through_the_async_face(face: AsyncTurnkeeper) -> None:
    async def script() -> None:
        session = await face.create_session(key="team")
        await face.append(session, "user", "Plan the release.")
        await face.agents.set_phase(session, "plan", by="lead")
        await face.agents.handoff(session, "planner", "writer", "Draft the notes.")
        await face.agents.update_state(session, "planner", last_processed_seq=1)
        state = await face.agents.responded(session, "writer", "Notes drafted.", execution_ms=40)
        assert state.turns == 1 and state.execution_ms == 40
        assert (await face.agents.state(session, "planner")).last_processed_seq == 1
        assert {s.agent for s in await face.agents.states(session)} == {"planner", "writer"}
        assert await face.agents.position(session.id, "writer") == state.last_processed_seq > 1
        assert await face.agents.execution_ms(session.id) == 40
        assert (await face.get_session(session.id)).phase == "plan"

    run_async(script())


def test_transfer_through_the_async_face(
    face: AsyncTurnkeeper, tmp_path: Path, clock: Clock
) -> None:
    async def script() -> None:
        session = await face.create_session(key="moved")
        await face.append_many(session, [NewMessage("user", "one"), NewMessage("assistant", "two")])
        out = io.StringIO()
        exported: list[str] = []
        assert await face.transfer.export_sessions(
            [session.id], out, progress=lambda s: exported.append(s.id)
        ) == (1, 2)
        assert exported == [session.id]
        await face.delete_session(session.id)
        path = tmp_path / "moved.jsonl"
        path.write_text(out.getvalue())
        report = await face.transfer.import_sessions(path)
        assert (report.sessions_created, report.messages_added, report.errors) == (1, 2, [])
        assert [m.content for m in await face.history(session.id)] == ["one", "two"]
        brief = await face.create_session(key="brief", ttl=timedelta(minutes=5))
        clock.now += timedelta(minutes=10)
        assert (await face.transfer.expire()).expired == (brief.id,)

    run_async(script())


def test_api_keys_through_the_async_face(face: AsyncTurnkeeper) -> None:
    async def script() -> None:
        key, token = await face.keys.create("acme", name="ci")
        assert (await face.keys.verify(token)).id == key.id
        remembered = face.keys.remembered(token)  # a plain call, no store read
        assert remembered is not None and remembered.id == key.id
        assert [k.id for k in await face.keys.list_keys("acme")] == [key.id]
        assert (await face.keys.revoke(key.id)).revoked_at is not None
        with pytest.raises(Unauthenticated):
            await face.keys.verify(token)

    run_async(script())
