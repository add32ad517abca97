"""Expiry: cold storage for expired sessions, and the sweeper that runs expiry on a timer.

`tk.transfer.expire()` marks sessions past `expires_at` expired and, with `delete`, removes
those past the grace period. With an archive directory it first writes them to one JSONL file
per run, in `turnkeeper.jsonl`'s export format, so `turnkeeper import FILE` brings them back.
The file is written under a temporary name, flushed to disk and renamed before anything is
deleted: a session is never deleted unless its archive is complete and durable.

The same run deletes the sessions past their project's retention (`turnkeeper.retention`),
archived in the same file, and then the messages past it in the sessions that live on (not
archived). A legal hold keeps a session from all of it, and the report lists it.

The `Sweeper` runs expiry every `cleanup_interval` in a service process. Replicas share one
database, so only one of them may sweep at a time: each run first tries the store's
`exclusive_lock("sweep")`, shared by every process on that database (a PostgreSQL advisory lock;
a lock file beside a SQLite database; see `turnkeeper.storage.locks`), and skips the run if
another sweeper holds it.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from turnkeeper import jsonl, metrics, retention
from turnkeeper.config import Settings
from turnkeeper.errors import BackendUnavailable, TurnkeeperError
from turnkeeper.logs import get_logger
from turnkeeper.storage import locks
from turnkeeper.storage.base import AdminStore, Store, every_session, require
from turnkeeper.types import ExpiryReport, Session, SessionFilter, SessionStatus

if TYPE_CHECKING:
    from turnkeeper.encryption.keys import MasterKeys

SweepLock = Callable[[], AbstractContextManager[bool]]
"""Enters a lock without waiting; yields whether this process got it."""


def expired_before(store: Store, cutoff: datetime) -> list[str]:
    """Ids of expired sessions whose expiry (or, lacking one, last activity) is <= `cutoff`."""
    return _ids_where(
        store, SessionStatus.EXPIRED, lambda s: (s.expires_at or s.updated_at) <= cutoff
    )


def plan(
    store: Store,
    *,
    now: datetime,
    grace: timedelta | None,
    keep_for: retention.KeepFor | None = None,
) -> ExpiryReport:
    """What a run would do, changing nothing (`gc --dry-run`): the active sessions it would
    mark expired; with a `grace` (a deleting run), the expired sessions it would delete; with
    `keep_for` (a retention), the sessions past it it would delete; and those of both a legal
    hold keeps."""
    due = _ids_where(
        store, SessionStatus.ACTIVE, lambda s: s.expires_at is not None and s.expires_at <= now
    )
    gone: set[str] = set()
    if grace is not None:
        cutoff = now - grace
        gone.update(expired_before(store, cutoff))
        gone.update(
            _ids_where(
                store,
                SessionStatus.ACTIVE,
                lambda s: s.expires_at is not None and s.expires_at <= cutoff,
            )
        )
    expired = retention.split_held(store, sorted(gone))
    retained = retention.due(store, keep_for, now, skip=gone)
    old = retention.old_messages(
        store, keep_for, now, skip={*gone, *retained.deletable, *retained.held}
    )
    return ExpiryReport(
        expired=tuple(due),
        deleted=expired.deletable,
        retention_deleted=retained.deletable,
        held=tuple(sorted({*expired.held, *retained.held, *old.held})),
        messages_deleted=old.counts,
    )


def _ids_where(store: Store, status: SessionStatus, wanted: Callable[[Session], bool]) -> list[str]:
    return sorted(s.id for s in every_session(store, SessionFilter(status=status)) if wanted(s))


def archive_sessions(
    store: Store,
    session_ids: list[str],
    archive_dir: Path,
    now: datetime,
    seal_with: MasterKeys | None = None,
) -> Path:
    """Write the sessions and their messages to a new JSONL file in `archive_dir`; returns it.
    With master keys (`seal_with`) it is an encrypted export, named `….jsonl.enc`.

    The file appears under its final name only once complete and flushed to disk.
    """
    try:
        archive_dir.mkdir(parents=True, exist_ok=True)
        suffix = ".jsonl" if seal_with is None else ".jsonl.enc"
        stamp = f"{now:%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:8]}"
        final = archive_dir / f"turnkeeper-archive-{stamp}{suffix}"
        partial = final.with_name(f".{final.name}.partial")
        with partial.open("w", encoding="utf-8") as out:
            jsonl.export_sessions(store, session_ids, out, seal_with=seal_with)
            out.flush()
            os.fsync(out.fileno())
        partial.rename(final)
        directory = os.open(archive_dir, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        raise BackendUnavailable(f"cannot write the archive in {archive_dir}: {exc}") from exc
    return final


def delete_expired(
    store: Store,
    *,
    now: datetime,
    grace: timedelta | None,
    archive_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    seal_with: MasterKeys | None = None,
    keep_for: retention.KeepFor | None = None,
) -> ExpiryReport:
    """Mark due sessions expired, then delete the expired ones past `grace` (none when it is
    None) and, with `keep_for`, every session past its project's retention, one by one
    (`progress` is called with each deleted id), after first archiving them all in one file
    when an `archive_dir` is given; then, with `keep_for`, the messages past the retention of
    the sessions left (`turnkeeper.retention.delete_old_messages`; not archived). A session a
    legal hold covers is kept and reported.

    Only the sessions written to the archive are deleted (by id), so a session that expires
    while the archive is being written waits for the next run rather than being lost.
    """
    marked = require(store, AdminStore, "expiry").expire_sessions(now=now)
    expired = retention.split_held(
        store, [] if grace is None else expired_before(store, now - grace)
    )
    retained = retention.due(store, keep_for, now, skip={*expired.deletable, *expired.held})
    doomed = [*expired.deletable, *retained.deletable]
    held = [*expired.held, *retained.held]
    path = (
        None
        if archive_dir is None or not doomed
        else archive_sessions(store, doomed, archive_dir, now, seal_with=seal_with)
    )
    gone = retention.delete_unless_held(store, expired.deletable, progress)
    retained_out = retention.delete_unless_held(store, retained.deletable, progress)
    if path is not None:
        metrics.SESSIONS_ARCHIVED.inc(len(doomed))
    old = retention.old_messages(store, keep_for, now, skip={*doomed, *held})
    trimmed = retention.delete_old_messages(store, old)
    return ExpiryReport(
        expired=marked.expired,
        deleted=gone.deletable,
        archive_path=None if path is None else str(path),
        retention_deleted=retained_out.deletable,
        held=tuple(sorted({*held, *gone.held, *retained_out.held, *trimmed.held})),
        messages_deleted=trimmed.counts,
    )


# -- one sweeper at a time --------------------------------------------------------------------

SWEEP_LOCK = "sweep"
"""The name of the lock every sweeper on a database shares (`Store.exclusive_lock`)."""


def sweep_lock(store: Store) -> SweepLock:
    """The lock every sweeper on `store`'s database shares: the store's own `exclusive_lock`
    (see `turnkeeper.storage.locks`), whatever the backend and whatever wraps it."""
    return lambda: locks.exclusive_lock(store, SWEEP_LOCK)


class ExpiresDue(Protocol):
    """The expiry operation of a service (`tk.transfer`)."""

    def expire(self, *, delete: bool = ...) -> ExpiryReport: ...


class Expires(Protocol):
    """What a sweeper runs: the service's `expire` (a `Turnkeeper`), its settings and store."""

    @property
    def settings(self) -> Settings: ...

    @property
    def store(self) -> Store: ...

    @property
    def transfer(self) -> ExpiresDue: ...


class Sweeper:
    """Runs `tk.transfer.expire(delete=…)` every `interval` on a background thread; one at a time
    across every process sharing the database. `start()` and `stop()` it with the service."""

    def __init__(
        self,
        tk: Expires,
        *,
        interval: timedelta | None = None,
        delete: bool = True,
        lock: SweepLock | None = None,
        logger: Any = None,
    ) -> None:
        self.tk = tk
        self.interval = interval or tk.settings.cleanup_interval
        self.delete = delete
        self.lock = lock or sweep_lock(tk.store)
        self._logger = logger or get_logger("turnkeeper.expiry")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> ExpiryReport | None:
        """One sweep now; None if another sweeper holds the lock or the sweep failed."""
        try:
            with self.lock() as acquired:
                if not acquired:
                    metrics.SWEEPS.labels("skipped").inc()
                    return None
                report = self.tk.transfer.expire(delete=self.delete)
        except TurnkeeperError as exc:  # the next run tries again
            metrics.SWEEPS.labels("failed").inc()
            self._logger.warning("expiry_sweep_failed", error=str(exc))
            return None
        metrics.SWEEPS.labels("ran").inc()
        self._logger.info(
            "expiry_sweep",
            expired=len(report.expired),
            deleted=len(report.deleted),
            retention_deleted=len(report.retention_deleted),
            messages_deleted=sum(report.messages_deleted.values()),
            held=len(report.held),
        )
        return report

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            self._stop.wait(self.interval.total_seconds())

    def start(self) -> None:
        """Sweep now, then every `interval`, on a daemon thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="turnkeeper-sweeper", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the current sweep (if any) finishes."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
