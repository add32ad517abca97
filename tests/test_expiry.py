"""Expiry: archiving to cold storage that `turnkeeper import` reads back, the sweeper (one at
a time across replicas), `turnkeeper gc --archive-dir`, and sliding expiry."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from typer.testing import CliRunner

import turnkeeper
from tests.conftest import Clock, make_sqlite_store
from turnkeeper.assemble import open_store
from turnkeeper.cli import app
from turnkeeper.config import Settings, load_settings
from turnkeeper.errors import SessionExpired, SessionNotFound
from turnkeeper.expiry import Sweeper
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.types import SessionStatus


def _archived_ids(archive_dir: Path) -> list[str]:
    """Session ids in every archive file of the directory (with repeats, if any)."""
    return [
        record["id"]
        for path in sorted(archive_dir.glob("*.jsonl"))
        for record in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if record["type"] == "session"
    ]


def _expiring(tk: Turnkeeper, count: int, *, ttl: timedelta = timedelta(hours=1)) -> list[str]:
    ids = []
    for i in range(count):
        session = tk.create_session(key=f"conv-{i}", ttl=ttl, metadata={"n": i})
        tk.append(session, "system", "You are terse.")
        tk.append(session, "user", f"question {i}", id=f"{session.id}-q")
        ids.append(session.id)
    return ids


def test_expired_sessions_are_archived_before_deletion_and_import_restores_them(
    tk: Turnkeeper, clock: Clock, tmp_path: Path
) -> None:
    doomed = _expiring(tk, 3)
    kept = tk.create_session(ttl=timedelta(days=7))
    before = {sid: (tk.get_session(sid), tk.history(sid)) for sid in doomed}
    clock.advance(timedelta(hours=2))
    archive = tmp_path / "cold"
    assert (
        tk.transfer.expire(delete=True, grace=timedelta(hours=3), archive_dir=archive).deleted == ()
    )
    assert not archive.exists() or not list(archive.iterdir())  # nothing past the grace yet
    clock.advance(timedelta(hours=3))
    report = tk.transfer.expire(delete=True, grace=timedelta(hours=3), archive_dir=archive)
    assert report.deleted == tuple(sorted(doomed))
    for sid in doomed:
        with pytest.raises(SessionNotFound):
            tk.get_session(sid)
    assert tk.get_session(kept.id).status is SessionStatus.ACTIVE
    files = list(archive.glob("*.jsonl"))
    assert len(files) == 1 and not list(archive.glob(".*"))  # one complete file per run
    assert report.archive_path == str(files[0])
    assert sorted(_archived_ids(archive)) == sorted(doomed)

    result = CliRunner().invoke(
        app, ["import", str(files[0]), "--db", f"sqlite:///{tmp_path / 'restored.db'}"]
    )
    assert result.exit_code == 0, result.output
    with turnkeeper.open(f"sqlite:///{tmp_path / 'restored.db'}") as restored:
        for sid, (session, messages) in before.items():
            back = restored.get_session(sid)
            assert back.status is SessionStatus.EXPIRED
            assert (back.key, back.metadata, back.message_count) == (
                session.key,
                session.metadata,
                session.message_count,
            )
            assert restored.history(sid) == messages


def test_gc_archive_dir_archives_then_deletes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gc.db'}"
    settings = load_settings(database_url=url)
    past = Clock()  # 2026-01-01: long before the real clock the CLI runs on
    with Turnkeeper(open_store(url, settings), settings, clock=past) as tk:
        doomed = _expiring(tk, 2)
    runner = CliRunner()
    archive = tmp_path / "archive"
    result = runner.invoke(app, ["gc", "--delete", "--archive-dir", str(archive), "--db", url])
    assert result.exit_code == 0, result.output
    (archived,) = archive.glob("*.jsonl")
    assert result.output == f"Expired 2 sessions, deleted 2 sessions (archived to {archived}).\n"
    assert sorted(_archived_ids(archive)) == sorted(doomed)
    with turnkeeper.open(url) as tk:
        assert tk.list_sessions().items == ()


def _replica(store: Store, settings: Settings, clock: Clock) -> Turnkeeper:
    return Turnkeeper(store, settings, clock=clock)


@pytest.fixture(params=["sqlite", "postgres"])
def two_replicas(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> Iterator[tuple[Turnkeeper, Turnkeeper]]:
    """Two service replicas (each with its own store and connections) on one database."""
    settings = load_settings(
        database_url="unused", archive_dir=tmp_path / "archive", expiry_grace=timedelta(0)
    )
    stores: list[Store]
    if request.param == "sqlite":
        stores = [make_sqlite_store(tmp_path / "shared.db") for _ in range(2)]
    else:
        from turnkeeper.storage.sql.postgres import PostgresStore

        url = request.getfixturevalue("postgres_url")
        stores = [PostgresStore(url) for _ in range(2)]
    replicas = (_replica(stores[0], settings, clock), _replica(stores[1], settings, clock))
    yield replicas
    for replica in replicas:
        replica.close()


def _sweeps(outcome: str) -> float:
    return REGISTRY.get_sample_value("turnkeeper_sweeps_total", {"outcome": outcome}) or 0.0


def test_a_sweeper_skips_its_run_while_another_replica_sweeps(
    two_replicas: tuple[Turnkeeper, Turnkeeper], clock: Clock
) -> None:
    a, b = two_replicas
    doomed = _expiring(a, 2)
    clock.advance(timedelta(hours=2))
    first, second = Sweeper(a), Sweeper(b)
    skipped = _sweeps("skipped")
    with first.lock() as held:
        assert held
        assert second.run_once() is None
    assert _sweeps("skipped") == skipped + 1
    report = second.run_once()
    assert report is not None and report.deleted == tuple(sorted(doomed))


def test_concurrent_sweepers_never_both_archive_or_delete_a_session(
    two_replicas: tuple[Turnkeeper, Turnkeeper], clock: Clock, tmp_path: Path
) -> None:
    a, b = two_replicas
    doomed = _expiring(a, 40)
    clock.advance(timedelta(hours=2))
    sweepers = [Sweeper(a), Sweeper(b)]
    barrier = threading.Barrier(2)
    reports: list[list[tuple[str, ...]]] = [[], []]

    def sweep(index: int) -> None:
        barrier.wait()
        for _ in range(5):
            report = sweepers[index].run_once()
            if report is not None:
                reports[index].append(report.deleted)

    threads = [threading.Thread(target=sweep, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    deleted = [sid for side in reports for run in side for sid in run]
    assert sorted(deleted) == sorted(doomed), "each session deleted exactly once"
    assert sorted(_archived_ids(tmp_path / "archive")) == sorted(doomed), "archived once"


def test_started_sweeper_expires_on_its_interval_until_stopped(
    tk: Turnkeeper, clock: Clock
) -> None:
    doomed = _expiring(tk, 1)[0]
    clock.advance(timedelta(hours=2))
    sweeper = Sweeper(tk, interval=timedelta(milliseconds=20), delete=False)
    sweeper.start()
    try:
        deadline = time.monotonic() + 10
        while tk.store.get_session(doomed).status is not SessionStatus.EXPIRED:
            assert time.monotonic() < deadline, "the sweeper never ran"
            time.sleep(0.01)
    finally:
        sweeper.stop()
    later = tk.create_session(ttl=timedelta(minutes=1))
    clock.advance(timedelta(minutes=2))
    time.sleep(0.1)
    assert tk.store.get_session(later.id).status is SessionStatus.ACTIVE  # stopped: no sweeps


def test_by_default_a_conversation_in_use_is_kept_past_a_day(tk: Turnkeeper, clock: Clock) -> None:
    """The default configuration forgets nothing: a day (or a month) later, append still
    works and get-or-create finds the same session with its messages."""
    session, created = tk.get_or_create_session("support-42")
    assert created and session.expires_at is None
    tk.append(session, "user", "My order never arrived.")
    for later in (timedelta(hours=25), timedelta(days=40)):
        clock.advance(later)
        tk.append(session, "user", f"Still waiting after {later}.")
        again, created = tk.get_or_create_session("support-42")
        assert (again.id, created) == (session.id, False)
        assert tk.history(again)[0].content == "My order never arrived."
        assert tk.transfer.expire(delete=True).expired == ()
    window = tk.context("support-42")
    assert window.messages[0].content == "My order never arrived."


def test_a_configured_lifetime_counts_from_the_last_activity(
    store: Store, settings: Settings, clock: Clock
) -> None:
    configured = settings.model_copy(update={"session_expiration": timedelta(hours=1)})
    tk = Turnkeeper(store, configured, clock=clock)
    session = tk.create_session()
    for turn in range(5):  # five hours of activity, never an hour apart
        clock.advance(timedelta(minutes=50))
        tk.append(session, "user", f"turn {turn}")
        assert tk.get_session(session.id).expires_at == clock.now + timedelta(hours=1)
    retry_at = clock.now
    clock.advance(timedelta(minutes=30))
    tk.append(session, "user", "turn 4", id=tk.history(session)[-1].id)  # a retry is no activity
    assert tk.get_session(session.id).expires_at == retry_at + timedelta(hours=1)
    clock.advance(timedelta(minutes=31))
    with pytest.raises(SessionExpired):
        tk.append(session, "user", "too late")
    forever = tk.create_session(ttl=None)
    tk.append(forever, "user", "hi")
    assert tk.get_session(forever.id).expires_at is None


def test_without_sliding_expiry_a_session_expires_a_lifetime_after_its_creation(
    store: Store, settings: Settings, clock: Clock
) -> None:
    fixed = settings.model_copy(
        update={"sliding_expiry": False, "session_expiration": timedelta(hours=24)}
    )
    tk = Turnkeeper(store, fixed, clock=clock)
    session, _ = tk.get_or_create_session("support-42")
    clock.advance(timedelta(hours=23))
    tk.append(session, "user", "hi")
    assert tk.get_session(session.id).expires_at == session.expires_at
    clock.advance(timedelta(hours=2))
    with pytest.raises(SessionExpired):
        tk.append(session, "user", "still there?")
    fresh, created = tk.get_or_create_session("support-42")
    assert created and fresh.id != session.id


def test_project_stats_count_sessions_by_status_including_expired(
    tk: Turnkeeper, clock: Clock
) -> None:
    _expiring(tk, 2)
    tk.create_session(ttl=None)
    clock.advance(timedelta(hours=2))
    assert dict(tk.project_stats("default")[0].sessions_by_status) == {"active": 3}
    tk.transfer.expire()
    stats = tk.project_stats("default")[0]
    assert dict(stats.sessions_by_status) == {"active": 1, "expired": 2}
    assert stats.message_count == 4


def test_deletion_reports_each_session_to_the_progress_callback(
    tk: Turnkeeper, clock: Clock
) -> None:
    doomed = _expiring(tk, 4)
    clock.advance(timedelta(hours=2))
    seen: list[str] = []
    report = tk.transfer.expire(delete=True, grace=timedelta(0), progress=seen.append)
    assert sorted(seen) == sorted(doomed) == list(report.deleted)
    assert report.archive_path is None
