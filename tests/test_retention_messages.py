"""Message retention: a session that lives on loses the messages older than its project's
retention in every `expire()` run (the sweeper, `turnkeeper gc`), with the summary checkpoints
and turn traces that may hold their text, while windows, history, stats, search, appends,
pops, forks and exports go on from what is left; on every backend as a deployment assembles
it, a replica sharing Redis, an encrypted SQLite file and the raw bytes of a SQLite file
(`turnkeeper gc` as a real process is in tests/test_retention.py, beside its fixture)."""

from __future__ import annotations

import io
import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from tests.conftest import Clock, service_over
from tests.test_retention import BACKENDS, POLICY, _settings
from turnkeeper.assemble import open_store
from turnkeeper.config import load_settings
from turnkeeper.encryption.keys import generate_master_key
from turnkeeper.service.facade import Turnkeeper
from turnkeeper.storage.base import SummaryStore, TraceStore
from turnkeeper.storage.search import SearchStore
from turnkeeper.testing import draft
from turnkeeper.types import Role


@pytest.fixture(params=BACKENDS)
def tk(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Turnkeeper]:
    with service_over(_settings(request.param, request, tmp_path), clock) as service:
        yield service


def _long_chat(tk: Turnkeeper, clock: Clock, canary: str) -> str:
    """A support chat (retention 7 days): 4 messages holding `canary`, a summarized window and
    a reply with its trace written then; 10 days later 2 new messages and a window built."""
    session = tk.create_session(key=f"chat-{uuid.uuid4().hex[:6]}", project="support")
    for i in range(2):
        tk.append(session, "user", f"{canary} question {i}: my card is 4111")
        tk.append(session, "assistant", f"{canary} answer {i}")
    tk.context(session, strategy="summarize", budget_tokens=60, keep_recent=1)
    trace = json.dumps({"w": canary})
    reply = draft(f"{canary} traced reply", role=Role.ASSISTANT, created_at=clock(), trace=trace)
    tk.store.append_messages(session.id, [reply], now=clock())
    clock.advance(timedelta(days=10))
    tk.append(session, "user", "a new question")
    tk.append(session, "assistant", "a new answer")
    tk.context(session)  # the caches hold the session with its old messages
    tk.history(session)
    return session.id


def _summaries_and_traces(tk: Turnkeeper, session_id: str) -> tuple[int, int]:
    store = tk.store
    assert isinstance(store, SummaryStore) and isinstance(store, TraceStore)
    summaries = store.list_summaries(session_id)
    return len(summaries), len(store.read_traces(session_id, upto_seq=100, limit=100))


def test_old_messages_go_with_what_holds_their_text_and_the_session_goes_on(
    tk: Turnkeeper, clock: Clock
) -> None:
    canary = f"canary-{uuid.uuid4().hex[:8]}"
    chat = _long_chat(tk, clock, canary)
    other = tk.create_session(key="other").id  # default project: 30 days
    tk.append(other, "user", f"{canary} kept for 30 days")
    summaries, traces = _summaries_and_traces(tk, chat)
    assert summaries >= 1 and traces == 1
    cut = tk.get_session(chat)
    assert tk.store.move_cut_point(chat, 3, version=cut.version)  # type: ignore[attr-defined]
    before = tk.get_session(chat)

    planned = tk.transfer.expire(dry_run=True)
    assert dict(planned.messages_deleted) == {chat: 5}
    assert len(tk.history(chat)) == 7  # a dry run changes nothing

    counted = REGISTRY.get_sample_value("turnkeeper_messages_retention_deleted_total") or 0.0
    report = tk.transfer.expire()
    assert dict(report.messages_deleted) == {chat: 5}
    assert (report.retention_deleted, report.held) == ((), ())
    assert REGISTRY.get_sample_value("turnkeeper_messages_retention_deleted_total") == counted + 5
    history = tk.history(chat)
    assert [(m.seq, m.content) for m in history] == [(6, "a new question"), (7, "a new answer")]
    assert _summaries_and_traces(tk, chat) == (0, 0)
    after = tk.get_session(chat)
    assert (after.message_count, after.last_seq, after.cut_seq) == (2, 7, 3)
    assert after.stored_tokens == sum(m.tokens for m in history)
    assert after.version > before.version and after.updated_at == before.updated_at
    stats = tk.session_stats(chat)
    assert (stats.message_count, stats.first_message_at) == (2, history[0].created_at)

    for strategy in ("full", "recent", "summarize"):
        window = tk.context(chat, strategy=strategy)
        assert canary not in str(window) and [m.seq for m in window.messages][-2:] == [6, 7]
    if isinstance(tk.store, SearchStore):  # the SQL backends' full-text index
        found = [hit.session_id for hit in tk.search(canary)]
        assert chat not in found and other in found

    added = tk.append(chat, "user", "after retention")
    assert added.seq == 8
    popped = tk.pop_last_message(chat)
    assert popped is not None and popped.seq == 8
    branch = tk.fork(chat, 6)
    assert [m.seq for m in tk.history(branch)] == [6]
    out = io.StringIO()
    assert tk.transfer.export_sessions([chat], out) == (1, 2)
    assert canary not in out.getvalue()
    assert tk.transfer.expire().messages_deleted == {}  # nothing left to delete

    clock.advance(timedelta(days=8))  # its last change is past the retention now: whole
    assert chat in tk.transfer.expire().retention_deleted


def test_a_legal_hold_keeps_old_messages_and_is_reported(tk: Turnkeeper, clock: Clock) -> None:
    chat = _long_chat(tk, clock, "canary-held")
    tk.set_legal_hold(chat, True)
    planned = tk.transfer.expire(dry_run=True)
    assert (dict(planned.messages_deleted), planned.held) == ({}, (chat,))
    report = tk.transfer.expire()
    assert (dict(report.messages_deleted), report.held) == ({}, (chat,))
    assert len(tk.history(chat)) == 7
    assert _summaries_and_traces(tk, chat)[1] == 1
    tk.set_legal_hold(chat, False)
    assert dict(tk.transfer.expire().messages_deleted) == {chat: 5}


def test_a_replica_sharing_redis_serves_none_of_the_deleted_messages(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> None:
    import redis

    settings = _settings("postgres+redis", request, tmp_path)
    canary = f"canary-{uuid.uuid4().hex[:8]}"
    a = Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock)
    b = Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock)
    try:
        chat = _long_chat(a, clock, canary)
        assert canary in str(b.context(chat, strategy="full"))  # b's LRU and Redis hold it
        assert len(b.history(chat)) == 7
        assert dict(a.transfer.expire().messages_deleted) == {chat: 5}
        assert [m.seq for m in b.history(chat)] == [6, 7]
        assert canary not in str(b.context(chat, strategy="full"))
        assert b.session_stats(chat).message_count == 2
        client = redis.Redis.from_url(str(settings.redis_url))
        try:
            values = [client.get(key) for key in client.scan_iter(count=1000)]
        finally:
            client.close()
        assert not [v for v in values if v is not None and canary.encode() in v]
    finally:
        a.close()
        b.close()


def test_nothing_of_the_deleted_messages_is_left_in_the_sqlite_file(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "raw.db"
    settings = load_settings(database_url=f"sqlite:///{path}", **POLICY)
    canary = f"canary-{uuid.uuid4().hex[:8]}"
    with Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock) as tk:
        chat = _long_chat(tk, clock, canary)
        assert dict(tk.transfer.expire().messages_deleted) == {chat: 5}
    with sqlite3.connect(path) as conn:  # what an operator does (docs/privacy.md)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
    conn.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("raw.db*"))
    assert b"a new question" in raw  # what is left is there: the search could find it
    assert canary.encode() not in raw


def test_an_encrypted_session_reads_its_remaining_messages(tmp_path: Path, clock: Clock) -> None:
    settings = load_settings(
        database_url=f"sqlite:///{tmp_path / 'enc.db'}",
        encryption_key=generate_master_key("k1"),
        **POLICY,
    )
    with Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock) as tk:
        chat = _long_chat(tk, clock, "canary-sealed")
        assert dict(tk.transfer.expire().messages_deleted) == {chat: 5}
        assert [m.content for m in tk.history(chat)] == ["a new question", "a new answer"]
        assert "canary" not in str(tk.context(chat, strategy="summarize"))
        assert tk.append(chat, "user", "still sealed").seq == 8
