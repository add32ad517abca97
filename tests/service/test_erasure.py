"""Erasure, tombstones and legal holds through the library (`tk.erase`, `tk.set_legal_hold`),
on every backend as a deployment assembles it: `memory://`, SQLite, PostgreSQL, and
PostgreSQL with the LRU and Redis in front; then two replicas sharing Redis, an encrypted
SQLite database, an export that would bring an erased session back, and hostile input."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Clock, service_over
from turnkeeper.assemble import open_store
from turnkeeper.cache import CachedStore, keys
from turnkeeper.config import Settings, load_settings
from turnkeeper.encryption.keys import generate_master_key
from turnkeeper.errors import (
    InvalidInput,
    KeyUnavailable,
    SessionErased,
    SessionHeld,
    SessionNotFound,
)
from turnkeeper.service.aio import AsyncTurnkeeper
from turnkeeper.service.facade import Turnkeeper
from turnkeeper.storage.search import SearchStore
from turnkeeper.types import ErasureReceipt, NewMessage, Session, SummaryCheckpoint

BACKENDS = ["memory", "sqlite", "postgres", "postgres+redis"]


def _settings(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if backend == "memory":
        return load_settings(database_url="memory://", lru_size=100)
    if backend == "sqlite":
        return load_settings(database_url=f"sqlite:///{tmp_path / 'tk.db'}", lru_size=100)
    url = request.getfixturevalue("postgres_url")
    if backend == "postgres":
        return load_settings(database_url=url)
    redis_url = request.getfixturevalue("redis_server")
    return load_settings(database_url=url, redis_url=redis_url, lru_size=100)


@pytest.fixture(params=BACKENDS)
def tk(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Turnkeeper]:
    with service_over(_settings(request.param, request, tmp_path), clock) as service:
        yield service


def _conversation(tk: Turnkeeper, project: str, subject: str | None, text: str) -> Session:
    """A session with messages (one reply with its trace), a summary checkpoint and an agent
    state, and a window built (the service remembers it)."""
    session = tk.create_session(project=project, subject=subject)
    tk.append(session, "user", f"{text} question")
    reply = NewMessage(role="assistant", content=f"{text} answer")
    tk.append_traced(session, reply, json.dumps({"built_from": text}))
    tk.append(session, "user", f"{text} follow-up")
    tk.agents.update_state(session, "planner", last_processed_seq=2)
    summary = SummaryCheckpoint(session.id, 2, f"{text} summary", 3, "extractive", tk.now())
    tk.store.save_summary(summary)  # type: ignore[attr-defined]
    tk.context(session)
    return tk.get_session(session)


def test_erasing_a_subject_removes_its_sessions_in_every_project_and_nothing_else(
    tk: Turnkeeper,
) -> None:
    first = _conversation(tk, "clinic", "patient-7", "canary-one")
    second = _conversation(tk, "billing", "patient-7", "canary-two")
    other = _conversation(tk, "clinic", "patient-8", "untouched")
    receipt = tk.erase(subject="patient-7")
    assert isinstance(receipt, ErasureReceipt)
    assert sorted(receipt.sessions) == sorted([first.id, second.id])
    assert (receipt.messages, receipt.traces, receipt.agent_states) == (6, 2, 2)
    assert receipt.summaries == 2
    assert (receipt.held, receipt.already_erased, receipt.subject) == ((), (), "patient-7")
    assert receipt.erased_at == tk.now() and not receipt.dry_run
    for gone in (first, second):
        with pytest.raises(SessionErased, match="erased"):
            tk.get_session(gone.id)
        with pytest.raises(SessionErased):
            tk.append(gone.id, "user", "a late append")
        with pytest.raises(SessionErased):
            tk.history(gone.id)
        with pytest.raises(SessionErased):
            tk.fork(gone.id, 1)
    assert [s.id for s in tk.list_sessions(subject="patient-7").items] == []
    assert len(tk.history(other)) == 3
    if isinstance(tk.store, SearchStore):  # the SQL stores' full-text index forgot it too
        assert tk.search("untouched") and not tk.search("canary")


def test_a_project_narrows_a_subject_and_a_session_takes_its_branches_along(
    tk: Turnkeeper,
) -> None:
    here = _conversation(tk, "clinic", "patient-7", "here")
    there = _conversation(tk, "billing", "patient-7", "there")
    assert tk.erase(subject="patient-7", project="clinic").sessions == (here.id,)
    assert tk.get_session(there.id).id == there.id
    source = _conversation(tk, "billing", None, "source")
    branch = tk.fork(source, 2)
    twig = tk.fork(branch, 1)
    receipt = tk.erase(session=source.id)
    assert receipt.sessions == (source.id, branch.id, twig.id)
    assert receipt.session == source.id
    assert tk.erase(session=source.id).already_erased == (source.id,)


def test_erasing_a_project_takes_every_session_of_it(tk: Turnkeeper) -> None:
    ids = {_conversation(tk, "gone", f"s-{n}", f"gone{n}").id for n in range(3)}
    kept = _conversation(tk, "stays", None, "stays")
    receipt = tk.erase(project="gone")
    assert set(receipt.sessions) == ids and receipt.messages == 9
    assert tk.list_sessions(project="gone").items == ()
    assert tk.get_session(kept.id).message_count == 3


def test_a_legal_hold_keeps_sessions_whole_and_the_receipt_says_so(tk: Turnkeeper) -> None:
    held = _conversation(tk, "clinic", "patient-7", "held")
    free = _conversation(tk, "clinic", "patient-7", "free")
    hold = tk.set_legal_hold(held, True)
    assert hold is not None and (hold.session_id, hold.project) == (held.id, "clinic")
    assert tk.held_sessions([held.id, free.id, "nope"]) == frozenset({held.id})
    receipt = tk.erase(subject="patient-7")
    assert (receipt.sessions, receipt.held) == ((free.id,), (held.id,))
    assert receipt.messages == 3
    assert len(tk.history(held)) == 3
    project_hold = tk.set_legal_hold(project="clinic", held=True)
    assert project_hold is not None and project_hold.session_id is None
    assert tk.set_legal_hold(held, False) is None
    assert tk.erase(session=held.id).held == (held.id,)  # the project's hold stands
    assert [(h.project, h.session_id) for h in tk.legal_holds()] == [("clinic", None)]
    assert tk.set_legal_hold(project="clinic", held=False) is None
    assert tk.legal_holds(project="clinic") == []
    assert tk.erase(session=held.id).sessions == (held.id,)


def test_a_legal_hold_keeps_a_session_from_delete_and_reset_by_hand(tk: Turnkeeper) -> None:
    held = _conversation(tk, "clinic", "patient-7", "held")
    before = tk.history(held)
    assert len(before) == 3
    for hold in (
        lambda on: tk.set_legal_hold(held, on),
        lambda on: tk.set_legal_hold(project="clinic", held=on),
    ):
        hold(True)
        with pytest.raises(SessionHeld, match="legal hold") as refused:
            tk.delete_session(held.id)
        assert refused.value.session_id == held.id
        with pytest.raises(SessionHeld):
            tk.reset_session(held, project="clinic")
        assert tk.history(held) == before and tk.get_session(held.id).message_count == 3
        hold(False)
    assert tk.reset_session(held).message_count == 0
    tk.delete_session(held.id)
    with pytest.raises(SessionNotFound):
        tk.get_session(held.id)


def test_a_dry_run_changes_nothing_and_counts_what_the_erasure_then_removes(
    tk: Turnkeeper,
) -> None:
    session = _conversation(tk, "clinic", "patient-7", "dry")
    version = tk.get_session(session).version
    preview = tk.erase(subject="patient-7", dry_run=True)
    assert preview.dry_run and preview.sessions == (session.id,)
    assert tk.get_session(session).version == version
    done = tk.erase(subject="patient-7")
    counts = ("messages", "summaries", "traces", "agent_states")
    assert [getattr(preview, c) for c in counts] == [getattr(done, c) for c in counts]


def test_hostile_selectors_are_refused_naming_the_field_and_change_nothing(
    tk: Turnkeeper,
) -> None:
    session = _conversation(tk, "clinic", "patient-7", "kept")
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "subject"),
        ({"subject": 7}, "subject"),
        ({"subject": True}, "subject"),
        ({"subject": ["patient-7"]}, "subject"),
        ({"subject": ""}, "subject"),
        ({"subject": "x" * 256}, "subject"),
        ({"subject": "patient-7", "session": session.id}, "session"),
        ({"session": 42}, "session"),
        ({"project": "../etc"}, "project"),
        ({"project": ""}, "project"),
        ({"subject": "patient-7", "dry_run": "yes"}, "dry_run"),
    ]
    for arguments, field in cases:
        with pytest.raises(InvalidInput) as raised:
            tk.erase(**arguments)
        assert raised.value.field == field, arguments
    with pytest.raises(SessionNotFound) as missing:
        tk.erase(session="no-such-session")
    assert not isinstance(missing.value, SessionErased)
    with pytest.raises(InvalidInput) as bad_hold:
        tk.set_legal_hold(session, "yes")  # type: ignore[arg-type]
    assert bad_hold.value.field == "held"
    with pytest.raises(InvalidInput) as no_target:
        tk.set_legal_hold()
    assert no_target.value.field == "session"
    for ids in (session.id, [session.id, 7]):
        with pytest.raises(InvalidInput) as bad_ids:
            tk.held_sessions(ids)  # type: ignore[arg-type]
        assert bad_ids.value.field == "session_ids"
    assert tk.get_session(session).message_count == 3 and tk.legal_holds() == []


def test_another_projects_tombstone_is_not_found_there(tk: Turnkeeper) -> None:
    session = _conversation(tk, "clinic", "patient-7", "isolated")
    tk.erase(session=session.id)
    with pytest.raises(SessionErased):
        tk.get_session(session.id, project="clinic")
    with pytest.raises(SessionNotFound) as elsewhere:
        tk.get_session(session.id, project="billing")
    assert not isinstance(elsewhere.value, SessionErased)


def test_an_old_export_does_not_bring_an_erased_session_back_unless_allowed(
    tk: Turnkeeper, tmp_path: Path
) -> None:
    erased = _conversation(tk, "clinic", "patient-7", "exported")
    kept = _conversation(tk, "clinic", "patient-8", "kept")
    export = tmp_path / "old.jsonl"
    with export.open("w") as out:
        tk.transfer.export_sessions([erased.id, kept.id], out)
    tk.erase(subject="patient-7")
    tk.delete_session(kept)
    report = tk.transfer.import_sessions(export)
    assert report.sessions_created == 1
    [error] = report.errors
    assert error.startswith(f"{export}:1: ") and erased.id in error and "erased" in error
    assert "--allow-erased" in error
    with pytest.raises(SessionErased):
        tk.get_session(erased.id)
    restored = tk.transfer.import_sessions(export, allow_erased=True)
    assert restored.errors == [] and restored.sessions_created == 1
    assert tk.history(erased.id)[0].content == "exported question"


def test_the_async_face_erases_and_holds_too(tk: Turnkeeper) -> None:
    session = _conversation(tk, "clinic", "patient-7", "async")
    face = AsyncTurnkeeper(tk)

    async def run() -> ErasureReceipt:
        await face.set_legal_hold(session, True)
        assert await face.held_sessions([session.id]) == frozenset({session.id})
        assert len(await face.legal_holds()) == 1
        await face.set_legal_hold(session, False)
        return await face.erase(subject="patient-7")

    try:
        assert asyncio.run(run()).sessions == (session.id,)
    finally:
        face._workers.shutdown()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_appends_racing_an_erasure_never_bring_the_session_back(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> None:
    # Three writers hammer the connection pool while the erasure waits its turns for one: with
    # every core of the machine busy (the whole suite), such a wait passed the default 2 s once.
    settings = _settings(backend, request, tmp_path).model_copy(
        update={"postgres_acquire_timeout": timedelta(seconds=30)}
    )
    tk = Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock)
    session = _conversation(tk, "clinic", "patient-7", "racing")
    outcomes: list[str] = []

    def append_until_erased() -> None:
        for n in range(200):
            try:
                tk.append(session.id, "user", f"late {n}")
            except SessionErased:
                outcomes.append("erased")
                return
        outcomes.append("never refused")

    writers = [threading.Thread(target=append_until_erased) for _ in range(3)]
    try:
        for writer in writers:
            writer.start()
        receipt = tk.erase(session=session.id)
        for writer in writers:
            writer.join(30)
        assert outcomes == ["erased"] * 3
        assert receipt.sessions == (session.id,) and receipt.messages >= 3
        with pytest.raises(SessionErased):
            tk.get_session(session.id)
        assert tk.store.read_messages(session.id) == []
        assert tk.list_sessions(project="clinic").items == ()
    finally:
        tk.close()


# -- replicas sharing Redis ------------------------------------------------------------------------


def test_a_replica_sharing_redis_neither_serves_nor_recreates_an_erased_session(
    postgres_url: str, redis_server: str, clock: Clock
) -> None:
    settings = load_settings(database_url=postgres_url, redis_url=redis_server, lru_size=100)
    replicas = [
        Turnkeeper(open_store(postgres_url, settings), settings, clock=clock) for _ in range(2)
    ]
    eraser, other = replicas
    try:
        session = _conversation(eraser, "clinic", "patient-7", "replicated")
        assert len(other.history(session.id)) == 3  # its LRU and Redis hold the pages now
        cache = other.store
        assert isinstance(cache, CachedStore) and cache.redis is not None
        client = cache.redis._client
        pattern = keys.of_session(cache._ns, session.id)
        assert list(client.scan_iter(match=pattern))
        version = other.get_session(session.id).version
        eraser.erase(subject="patient-7")
        assert [k for k in client.scan_iter(match=pattern)] == [
            keys.erased(cache._ns, session.id).encode()
        ]
        with pytest.raises(SessionErased):
            other.history(session.id)
        with pytest.raises(SessionErased):
            other.append(session.id, "user", "late, from the other replica")
        assert cache.lru is not None and cache.lru.get(session.id, version, "any") is None
        # a read that began before the erasure writes its page afterwards: refused
        cache.redis.set(
            keys.count(cache._ns, session.id, version, before_seq=None, include_internal=True),
            b"3",
            unless=keys.erased(cache._ns, session.id),
        )
        assert [k for k in client.scan_iter(match=pattern)] == [
            keys.erased(cache._ns, session.id).encode()
        ]
    finally:
        for replica in replicas:
            replica.close()


# -- encrypted -------------------------------------------------------------------------------------


def test_erasure_destroys_the_key_so_a_copy_taken_before_is_unreadable(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "enc.db"
    key = generate_master_key("k1")
    settings = load_settings(database_url=f"sqlite:///{path}", encryption_key=key, lru_size=100)
    tk = Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock)
    try:
        erased = _conversation(tk, "clinic", "patient-7", "canary-xyzzy")
        kept = _conversation(tk, "clinic", "patient-8", "kept-plugh")
        for suffix in ("", "-wal"):
            if Path(f"{path}{suffix}").exists():
                shutil.copy(f"{path}{suffix}", tmp_path / f"backup.db{suffix}")
        keystore = tk.store.keys.store  # type: ignore[attr-defined]
        assert keystore.find(erased.id) is not None
        tk.erase(subject="patient-7")
        assert keystore.find(erased.id) is None
    finally:
        tk.close()
    at_rest = b"".join(
        p.read_bytes() for p in (path, Path(f"{path}-wal"), Path(f"{path}.keys")) if p.exists()
    )
    assert b"canary-xyzzy" not in at_rest and b"patient-7" not in at_rest
    backup = tmp_path / "backup.db"
    copied = load_settings(
        database_url=f"sqlite:///{backup}", encryption_key=key, key_store=f"sqlite:///{path}.keys"
    )
    with Turnkeeper(open_store(copied.database_url, copied), copied, clock=clock) as old:
        assert old.history(kept.id)[0].content == "kept-plugh question"
        with pytest.raises(KeyUnavailable):
            old.history(erased.id)
