"""Retention: sessions idle past their project's retention are deleted whole by `expire()` (the
sweeper, `turnkeeper gc`), archived first, kept by a legal hold and reported; on every backend
as a deployment assembles it (`memory://`, SQLite, PostgreSQL, PostgreSQL with the LRU and
Redis), an encrypted SQLite file (the data key goes), replicas on one SQLite file with the
sweep lock held by another process, and `turnkeeper gc` as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SWEEP_LOCK_HOLDER, Clock, service_over
from turnkeeper.assemble import open_store
from turnkeeper.config import Settings, load_settings
from turnkeeper.encryption.keys import generate_master_key
from turnkeeper.errors import BackendUnavailable, SessionErased, SessionNotFound
from turnkeeper.expiry import Sweeper
from turnkeeper.service.facade import Turnkeeper
from turnkeeper.types import SessionStatus

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ["memory", "sqlite", "postgres", "postgres+redis"]
POLICY: dict[str, Any] = {
    "retention": "30d",
    "project_retention": {"support": "7d", "legal": "never"},
}


def _settings(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, **more: Any
) -> Settings:
    where: dict[str, Any] = {"database_url": "memory://", "lru_size": 100}
    if backend == "sqlite":
        where["database_url"] = f"sqlite:///{tmp_path / 'tk.db'}"
    elif backend.startswith("postgres"):
        where["database_url"] = request.getfixturevalue("postgres_url")
    if backend == "postgres+redis":
        where["redis_url"] = request.getfixturevalue("redis_server")
    return load_settings(**where, **POLICY, **more)


@pytest.fixture(params=BACKENDS)
def tk(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Turnkeeper]:
    with service_over(_settings(request.param, request, tmp_path), clock) as service:
        yield service


def _talk(tk: Turnkeeper, key: str, project: str = "default") -> str:
    session = tk.create_session(key=key, project=project)
    tk.append(session, "user", f"{key}: my account number is 1234")
    tk.append(session, "assistant", f"{key}: noted")
    tk.context(session)  # a window built: the caches hold the session
    return session.id


def _gone(tk: Turnkeeper, session_id: str) -> bool:
    try:
        tk.get_session(session_id)
    except SessionErased:
        raise AssertionError("retention is not erasure: it leaves no tombstone") from None
    except SessionNotFound:
        return True
    return False


def test_sessions_past_their_projects_retention_go_whole_and_held_ones_stay(
    tk: Turnkeeper, clock: Clock
) -> None:
    idle = _talk(tk, "idle")  # default project: 30 days
    busy = _talk(tk, "busy")
    ticket = _talk(tk, "ticket", project="support")  # 7 days
    case = _talk(tk, "case", project="legal")  # never
    held = _talk(tk, "held")
    audited = _talk(tk, "audited", project="audit")
    closed = _talk(tk, "closed")
    tk.set_legal_hold(held, True)
    tk.set_legal_hold(project="audit", held=True)
    tk.archive_session(closed)  # any status
    clock.advance(timedelta(days=8))
    report = tk.transfer.expire()
    assert (report.retention_deleted, report.held) == ((ticket,), ())
    assert _gone(tk, ticket)
    clock.advance(timedelta(days=20))
    tk.append(busy, "user", "still here")  # a change restarts its retention
    clock.advance(timedelta(days=3))  # 31 days after the others' last change

    planned = tk.transfer.expire(dry_run=True)
    assert planned.retention_deleted == tuple(sorted([idle, closed]))
    assert planned.held == tuple(sorted([held, audited]))
    assert not _gone(tk, idle)  # a dry run changes nothing

    assert dict(planned.messages_deleted) == {busy: 2}  # it lives on without its old ones

    report = tk.transfer.expire()
    assert (report.retention_deleted, report.held) == (planned.retention_deleted, planned.held)
    assert report.deleted == ()  # nothing expired: retention alone deleted them
    assert report.messages_deleted == planned.messages_deleted
    assert _gone(tk, idle) and _gone(tk, closed)
    assert [m.content for m in tk.history(busy)] == ["still here"]
    for kept in (case, held, audited):
        assert len(tk.history(kept)) >= 2
    assert tk.history(held)[0].content == "held: my account number is 1234"

    again, created = tk.get_or_create_session("idle")  # no tombstone: the key is free again
    assert created and again.id != idle

    tk.set_legal_hold(held, False)
    report = tk.transfer.expire(delete=True)
    assert (report.retention_deleted, report.held) == ((held,), (audited,))
    assert _gone(tk, held)


def test_a_hold_set_while_a_run_deletes_keeps_the_sessions_it_has_not_reached(
    tk: Turnkeeper, clock: Clock
) -> None:
    first, second = sorted([_talk(tk, "first"), _talk(tk, "second")])
    clock.advance(timedelta(days=31))

    def hold_the_next(deleted: str) -> None:
        assert deleted == first
        tk.set_legal_hold(second, True)  # a hold comes in the middle of the run

    report = tk.transfer.expire(progress=hold_the_next)
    assert (report.retention_deleted, report.held) == ((first,), (second,))
    assert _gone(tk, first) and not _gone(tk, second)


def test_an_expired_session_past_both_is_deleted_once_as_expired(
    tk: Turnkeeper, clock: Clock
) -> None:
    both = tk.create_session(key="both", ttl=timedelta(days=1)).id
    clock.advance(timedelta(days=40))
    report = tk.transfer.expire(delete=True)
    assert (report.expired, report.deleted, report.retention_deleted) == ((both,), (both,), ())


def test_a_legal_hold_keeps_an_expired_session_from_gc_too(tk: Turnkeeper, clock: Clock) -> None:
    kept = tk.create_session(key="kept", ttl=timedelta(hours=1), project="legal").id
    tk.set_legal_hold(kept, True)
    clock.advance(timedelta(hours=2))
    report = tk.transfer.expire(delete=True)
    assert (report.expired, report.deleted, report.held) == ((kept,), (), (kept,))
    assert tk.get_session(kept).status is SessionStatus.EXPIRED


def test_the_archive_is_complete_on_disk_before_anything_is_deleted(
    tmp_path: Path, clock: Clock
) -> None:
    settings = load_settings(database_url=f"sqlite:///{tmp_path / 'a.db'}", **POLICY)
    with Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock) as tk:
        old = [_talk(tk, f"old-{i}") for i in range(3)]
        clock.advance(timedelta(days=31))
        blocked = tmp_path / "not-a-directory"
        blocked.write_text("")
        with pytest.raises(BackendUnavailable, match="cannot write the archive"):
            tk.transfer.expire(archive_dir=blocked)
        assert not any(_gone(tk, session_id) for session_id in old)  # no archive, no delete

        archive = tmp_path / "cold"
        report = tk.transfer.expire(archive_dir=archive)
        assert report.retention_deleted == tuple(sorted(old))
        assert report.archive_path is not None and not list(archive.glob(".*"))
        lines = [json.loads(line) for line in Path(report.archive_path).read_text().splitlines()]
        assert sorted(r["id"] for r in lines if r["type"] == "session") == sorted(old)
        assert sum(r["type"] == "message" for r in lines) == 6

        imported = tk.transfer.import_sessions(Path(report.archive_path))
        assert imported.sessions_created == 3  # it reads back: retention deleted, not erased
        assert tk.history(old[0])[0].content == "old-0: my account number is 1234"


def test_retention_destroys_an_encrypted_sessions_data_key(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "enc.db"
    settings = load_settings(
        database_url=f"sqlite:///{path}", encryption_key=generate_master_key("k1"), **POLICY
    )
    with Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock) as tk:
        old = _talk(tk, "old")
        keystore = tk.store.keys.store  # type: ignore[attr-defined]
        assert keystore.find(old) is not None
        clock.advance(timedelta(days=31))
        assert tk.transfer.expire().retention_deleted == (old,)
        assert keystore.find(old) is None


def test_one_sweeper_at_a_time_applies_retention_across_processes(
    tmp_path: Path, clock: Clock
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    settings = load_settings(database_url=url, archive_dir=tmp_path / "cold", **POLICY)
    a = Turnkeeper(open_store(url, settings), settings, clock=clock)
    b = Turnkeeper(open_store(url, settings), settings, clock=clock)
    try:
        old, held = _talk(a, "old"), _talk(a, "held")
        b.set_legal_hold(held, True)  # set by the other replica
        clock.advance(timedelta(days=31))
        holder = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(SWEEP_LOCK_HOLDER), url],
            cwd=ROOT,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            assert Sweeper(a).run_once() is None and Sweeper(b).run_once() is None
            assert not _gone(b, old)
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=60)
        report = Sweeper(b).run_once()
        assert report is not None
        assert (report.retention_deleted, report.held) == ((old,), (held,))
        assert _gone(a, old) and not _gone(a, held)
        assert len(list((tmp_path / "cold").glob("*.jsonl"))) == 1
    finally:
        a.close()
        b.close()


SWEEPER = """
    import json, sys
    import turnkeeper
    from turnkeeper.expiry import Sweeper

    with turnkeeper.open(sys.argv[1], retention="30d", archive_dir=sys.argv[2]) as tk:
        sys.stdin.readline()  # both processes start their sweep at once
        report = Sweeper(tk).run_once()
        print(json.dumps(None if report is None else list(report.retention_deleted)))
"""


def test_two_sweeping_processes_delete_and_archive_each_session_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    settings = load_settings(database_url=url)
    with Turnkeeper(open_store(url, settings), settings, clock=Clock()) as tk:
        old = sorted(_talk(tk, f"old-{i}") for i in range(200))  # 2026-01-01: long ago
    archive = tmp_path / "cold"
    sweepers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(SWEEPER), url, str(archive)],
            cwd=ROOT,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for sweeper in sweepers:
        assert sweeper.stdin is not None
        sweeper.stdin.write("go\n")
        sweeper.stdin.flush()
    reports = []
    for sweeper in sweepers:
        out, err = sweeper.communicate(timeout=120)
        assert sweeper.returncode == 0, err
        reports.append(json.loads(out))
    deleted = [i for report in reports if report for i in report]
    assert sorted(deleted) == old  # each once: the other skipped, or came after and found none
    archived = [
        json.loads(line)["id"]
        for path in archive.glob("*.jsonl")
        for line in path.read_text().splitlines()
        if json.loads(line)["type"] == "session"
    ]
    assert sorted(archived) == old


# -- turnkeeper gc, a real process ----------------------------------------------------------


@pytest.fixture
def gc(tmp_path: Path) -> Any:
    """`gc(*args, **env)`: run `python -m turnkeeper gc ARGS --db <this test's file>` with
    TURNKEEPER_ variables `env` (and no other)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TURNKEEPER_", "OPENAI_"))}
    clean |= {
        "PYTHONPATH": str(ROOT / "src"),
        "TURNKEEPER_CONFIG": str(tmp_path / "no-such-config.toml"),
        "COLUMNS": "300",
    }

    def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "turnkeeper", "gc", *args, "--db", _db(tmp_path)],
            capture_output=True,
            text=True,
            env=clean | {f"TURNKEEPER_{name.upper()}": value for name, value in env.items()},
            timeout=60,
        )

    return run


def _db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gc.db'}"


def test_gc_reports_deletes_and_archives_what_retention_reaches(tmp_path: Path, gc: Any) -> None:
    settings = load_settings(database_url=_db(tmp_path))
    past = Clock()  # 2026-01-01: long before the real clock the CLI runs on
    with Turnkeeper(open_store(settings.database_url, settings), settings, clock=past) as tk:
        old, held, case = _talk(tk, "old"), _talk(tk, "held"), _talk(tk, "case", "legal")
        tk.set_legal_hold(held, True)
    policy = {"retention": "30d", "project_retention": "legal=never,support=7d"}

    dry = gc("--dry-run", **policy)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout == (
        "Would expire 0 sessions and delete 1 session past retention; kept 1 session under "
        "legal hold; nothing was changed (--json lists them).\n"
    )
    assert gc("--delete", "--dry-run", **policy).stdout.startswith(
        "Would expire 0 sessions, delete 0 sessions and delete 1 session past retention; kept"
    )
    listed = json.loads(gc("--dry-run", "--json", **policy).stdout)
    assert (listed["retention_deleted"], listed["held"], listed["dry_run"]) == ([old], [held], True)

    assert gc().stdout == "Expired 0 sessions.\n"  # no retention set: nothing deleted
    archive = tmp_path / "cold"
    done = gc("--archive-dir", str(archive), **policy)
    assert done.returncode == 0, done.stderr
    (archived,) = archive.glob("*.jsonl")
    assert done.stdout == (
        f"Expired 0 sessions, deleted 1 session past retention (archived to {archived}); "
        "kept 1 session under legal hold.\n"
    )
    with Turnkeeper(open_store(settings.database_url, settings), settings) as tk:
        assert {s.id for s in tk.list_sessions().items} == {held, case}


def test_gc_deletes_and_reports_old_messages_of_sessions_that_live_on(
    tmp_path: Path, gc: Any
) -> None:
    url = _db(tmp_path)
    settings = load_settings(database_url=url)
    with Turnkeeper(open_store(url, settings), settings, clock=Clock()) as past:  # 2026-01-01
        chat = past.create_session(key="chat").id
        held = past.create_session(key="held").id
        for session_id in (chat, held):
            past.append(session_id, "user", "canary from long ago")
    with Turnkeeper(open_store(url, settings), settings) as now:  # the real clock
        for session_id in (chat, held):
            now.append(session_id, "user", "said today")
        now.set_legal_hold(held, True)

    dry = gc("--dry-run", retention="30d")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout == (
        "Would expire 0 sessions, delete 0 sessions past retention and delete 1 message past "
        "retention from 1 session that live on; kept 1 session under legal hold; nothing was "
        "changed (--json lists them).\n"
    )
    listed = json.loads(gc("--dry-run", "--json", retention="30d").stdout)
    assert (listed["messages_deleted"], listed["held"]) == ({chat: 1}, [held])
    done = gc("--json", retention="30d")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["messages_deleted"] == {chat: 1}
    again = gc(retention="30d")
    assert again.stdout == (
        "Expired 0 sessions, deleted 0 sessions past retention; kept 1 session under legal hold.\n"
    )
    with Turnkeeper(open_store(url, settings), settings) as tk:
        assert [m.content for m in tk.history(chat)] == ["said today"]
        assert len(tk.history(held)) == 2


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("retention", "-30d"),
        ("retention", "soon"),
        ("project_retention", "../up=30d"),
        ("project_retention", "support=-1h"),
        ("project_retention", "support"),
    ],
)
def test_gc_refuses_a_bad_retention_in_one_line_and_deletes_nothing(
    tmp_path: Path, gc: Any, setting: str, value: str
) -> None:
    settings = load_settings(database_url=_db(tmp_path))
    with Turnkeeper(open_store(settings.database_url, settings), settings, clock=Clock()) as tk:
        old = _talk(tk, "old")
    done = gc(**{setting: value, "retention": "1d"} if setting != "retention" else {setting: value})
    assert done.returncode != 0 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert setting in line and "Traceback" not in done.stderr
    with Turnkeeper(open_store(settings.database_url, settings), settings) as tk:
        assert tk.get_session(old).id == old
