"""Many processes appending to one PostgreSQL session at once lose and duplicate nothing —
and the older conversation service's literal design (a JSONB array per session, read,
appended to in the application,
written back) loses messages under the same load. That is why messages are rows.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.postgres_schemas import blank_schema
from turnkeeper import open as open_turnkeeper
from turnkeeper.errors import BackendUnavailable
from turnkeeper.storage.sql.postgres import PostgresStore
from turnkeeper.types import MessageDraft, NewSession, Role

WRITERS = 8
APPENDS = 500
RETRY_EVERY = 25
ARRAY_APPENDS = 200


def _writer(url: str, session_id: str, writer: int, barrier: Any, out: Any) -> None:
    """Appends its messages one by one, retrying some ids; reports (id, seq, start, end)."""
    acks: list[tuple[str, int, float, float]] = []
    with open_turnkeeper(url, lru_size=0) as tk:
        barrier.wait()
        for i in range(APPENDS):
            message_id = f"w{writer}-{i}"
            start = time.monotonic()
            text = f"writer {writer} message {i}"
            stored = tk.append(session_id, "user", text, id=message_id)
            acks.append((message_id, stored.seq, start, time.monotonic()))
            if i % RETRY_EVERY == 0:  # a retry (lost reply, say) must return the stored message
                again = tk.append(session_id, "user", text, id=message_id)
                assert again == stored, (again, stored)
    out.put(acks)


def _same_ids_writer(url: str, session_id: str, barrier: Any) -> None:
    """Every such writer appends the same ids: each must be stored exactly once."""
    with open_turnkeeper(url, lru_size=0) as tk:
        barrier.wait()
        for i in range(100):
            tk.append(session_id, "assistant", f"reply {i}", id=f"shared-{i}")


def _array_writer(url: str, session_id: str, writer: int, barrier: Any) -> None:
    """The older conversation service's UpdateSession: load the session's messages array,
    append, save it back."""
    import psycopg

    with psycopg.connect(url) as conn:  # READ COMMITTED, the PostgreSQL default
        barrier.wait()
        for i in range(ARRAY_APPENDS):
            with conn.transaction():
                row = conn.execute(
                    "SELECT messages, token_count FROM conversation_contexts WHERE session_id = %s",
                    (session_id,),
                ).fetchone()
                assert row is not None
                messages, tokens = row
                messages.append({"role": "user", "content": f"{writer}:{i}"})
                time.sleep(0.001)  # the application's work between load and save (the LLM call)
                conn.execute(
                    "UPDATE conversation_contexts SET messages = %s, token_count = %s,"
                    " updated_at = now() WHERE session_id = %s",
                    (json.dumps(messages), tokens + 1, session_id),
                )


def _run(target: Callable[..., None], args_for: list[tuple[Any, ...]]) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for args in args_for]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=600)
        assert proc.exitcode == 0, f"{proc.name} exited with {proc.exitcode}"


@pytest.fixture
def shared_url(postgres_server: str) -> Iterator[str]:
    with blank_schema(postgres_server) as url:
        yield url


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_eight_processes_appending_to_one_session_keep_every_message_once_in_commit_order(
    shared_url: str,
) -> None:
    with open_turnkeeper(shared_url) as tk:
        session = tk.create_session(key="busy", ttl=None)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(shared_url, session.id, w, barrier, out))
        for w in range(WRITERS)
    ]
    for proc in procs:
        proc.start()
    acks = [ack for _ in procs for ack in out.get(timeout=600)]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    with open_turnkeeper(shared_url) as tk:
        messages = tk.history(session.id)
        stored = tk.get_session(session.id)

    total = WRITERS * APPENDS
    assert [m.seq for m in messages] == list(range(1, total + 1)), "seq is gapless"
    ids = [m.id for m in messages]
    assert len(set(ids)) == len(ids) == total, "nothing duplicated"
    assert set(ids) == {f"w{w}-{i}" for w in range(WRITERS) for i in range(APPENDS)}
    assert stored.message_count == stored.last_seq == total
    assert stored.stored_tokens == sum(m.tokens for m in messages)
    # Every acknowledged seq is the stored one, and seqs follow commit order: an append that
    # was acknowledged before another one started always has the smaller seq.
    seq_of = {m.id: m.seq for m in messages}
    assert all(seq_of[message_id] == seq for message_id, seq, _, _ in acks)
    latest_start = float("-inf")
    for _, _, start, end in sorted(acks, key=lambda ack: ack[1]):
        assert end >= latest_start, "a later-committed append got a smaller seq"
        latest_start = max(latest_start, start)


@pytest.mark.slow
def test_processes_retrying_the_same_ids_store_each_once(shared_url: str) -> None:
    with open_turnkeeper(shared_url) as tk:
        session = tk.create_session(ttl=None)
    barrier = mp.get_context("spawn").Barrier(4)
    _run(_same_ids_writer, [(shared_url, session.id, barrier) for _ in range(4)])
    with open_turnkeeper(shared_url) as tk:
        messages = tk.history(session.id)
    assert [m.seq for m in messages] == list(range(1, 101))
    assert sorted(m.id for m in messages) == sorted(f"shared-{i}" for i in range(100))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_older_service_json_array_read_modify_write_loses_messages_under_the_same_load(
    shared_url: str,
) -> None:
    import psycopg

    with psycopg.connect(shared_url, autocommit=True) as conn:
        conn.execute(  # that service's table, without the foreign keys to its other tables
            "CREATE TABLE conversation_contexts (session_id TEXT PRIMARY KEY,"
            " messages JSONB NOT NULL DEFAULT '[]', updated_at TIMESTAMP NOT NULL DEFAULT now(),"
            " token_count INTEGER NOT NULL DEFAULT 0)"
        )
        conn.execute("INSERT INTO conversation_contexts (session_id) VALUES ('s')")
    barrier = mp.get_context("spawn").Barrier(WRITERS)
    _run(_array_writer, [(shared_url, "s", w, barrier) for w in range(WRITERS)])
    with psycopg.connect(shared_url) as conn:
        row = conn.execute(
            "SELECT jsonb_array_length(messages), token_count FROM conversation_contexts"
        ).fetchone()
    assert row is not None
    kept, counted = row
    acknowledged = WRITERS * ARRAY_APPENDS
    lost = acknowledged - kept
    print(f"JSON array design: {acknowledged} appends acknowledged, {kept} kept, {lost} lost")
    assert lost > 0 and kept == counted  # every writer was told "saved"; many were not


class _PausingStore(PostgresStore):
    """The real store, whose write transactions stop just before COMMIT while `hold` is set:
    what an append holds (its row lock, its index entries, its WAL) stays held."""

    def __init__(self, url: str) -> None:
        self.hold = threading.Event()
        self.paused = threading.Event()
        self.release = threading.Event()
        super().__init__(url, min_size=1, max_size=2)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with super()._transaction() as tx:
            yield tx
            if self.hold.is_set():
                self.paused.set()
                self.release.wait(timeout=60)


class _LockTimeoutStore(PostgresStore):
    """The real store, whose lock waits give up after `LOCK_TIMEOUT` instead of forever: a
    writer that would queue behind another fails with an error rather than hanging the test."""

    LOCK_TIMEOUT = "5s"

    def _configure(self, conn: Any) -> None:  # type: ignore[override]
        super()._configure(conn)
        conn.execute(f"SET lock_timeout = '{self.LOCK_TIMEOUT}'")


def _draft(text: str) -> MessageDraft:
    return MessageDraft(
        id=str(uuid.uuid4()), role=Role.USER, content=text, tokens=3, created_at=datetime.now(UTC)
    )


def test_an_append_does_not_wait_for_an_open_append_to_another_session(shared_url: str) -> None:
    """Writers to distinct sessions share nothing an append locks (no counter row, no shared
    row of the project, the sessions' indexes take no locks): with an append to session `a`
    held open just before its COMMIT, an append to session `b` of the same project commits."""
    holder = _PausingStore(shared_url)
    other = _LockTimeoutStore(shared_url, min_size=1, max_size=2)
    try:
        now = datetime.now(UTC)
        a = holder.create_session(NewSession(project="p", key="a"), now=now)
        b = holder.create_session(NewSession(project="p", key="b"), now=now)
        holder.hold.set()
        held = ThreadPoolExecutor(max_workers=1).submit(
            holder.append_messages, a.id, [_draft("held open")], now=now
        )
        assert holder.paused.wait(timeout=60)

        (stored,) = other.append_messages(b.id, [_draft("not blocked")], now=now)

        assert stored.seq == 1
        assert [m.content for m in other.read_messages(b.id)] == ["not blocked"]
        assert other.read_messages(a.id) == []  # `a`'s append is still open: not visible yet
        holder.release.set()
        assert [m.seq for m in held.result(timeout=60)] == [1]
        assert [m.content for m in other.read_messages(a.id)] == ["held open"]
    finally:
        holder.release.set()
        holder.close()
        other.close()


def test_an_append_to_the_same_session_does_wait_for_the_open_one(shared_url: str) -> None:
    """The check above can fail: an append to the session whose append is held open queues
    on its row lock (here: gives up after the lock timeout)."""
    holder = _PausingStore(shared_url)
    other = _LockTimeoutStore(shared_url, min_size=1, max_size=2)
    other_fast = type("Fast", (_LockTimeoutStore,), {"LOCK_TIMEOUT": "100ms"})
    impatient = other_fast(shared_url, min_size=1, max_size=1)
    try:
        now = datetime.now(UTC)
        a = holder.create_session(NewSession(project="p", key="a"), now=now)
        holder.hold.set()
        held = ThreadPoolExecutor(max_workers=1).submit(
            holder.append_messages, a.id, [_draft("held open")], now=now
        )
        assert holder.paused.wait(timeout=60)

        with pytest.raises(BackendUnavailable, match="lock timeout"):
            impatient.append_messages(a.id, [_draft("queued")], now=now)

        holder.release.set()
        held.result(timeout=60)
        (after,) = other.append_messages(a.id, [_draft("after")], now=now)
        assert after.seq == 2
    finally:
        holder.release.set()
        holder.close()
        other.close()
        impatient.close()
