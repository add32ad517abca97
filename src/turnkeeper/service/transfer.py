"""Moving sessions in and out, as `tk.transfer`: JSONL export and import, and the expiry
sweep with retention (which archives what it deletes in the same JSONL form).

These are operator tasks, not turn-time operations; the whole-store calls they make
(`jsonl`, `expiry`) stay in this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Protocol

from turnkeeper import expiry, jsonl, metrics
from turnkeeper.encryption import configured_master_keys
from turnkeeper.errors import InvalidConfig, InvalidInput
from turnkeeper.importers.base import ImportTarget
from turnkeeper.logs import get_logger
from turnkeeper.service.core import SessionRef
from turnkeeper.storage.base import AdminStore, require
from turnkeeper.types import ExpiryReport, Session


class TransferTarget(ImportTarget, Protocol):
    """What `Transfer` uses of the `Turnkeeper` it belongs to (named here: the facade is built
    on top of this module)."""

    def get_session(self, ref: SessionRef, *, project: str | None = None) -> Session: ...

    def iter_session_ids(self, *, project: str | None = None) -> Iterator[str]: ...

    def now(self) -> datetime: ...


class Transfer:
    """Export, import and expiry of a `Turnkeeper`'s sessions (`tk.transfer`)."""

    def __init__(self, tk: TransferTarget) -> None:
        self._tk = tk

    def export_sessions(
        self,
        refs: Iterable[SessionRef] | None,
        out: IO[str],
        *,
        project: str | None = None,
        progress: Callable[[Session], None] | None = None,
        encrypt: bool = False,
    ) -> tuple[int, int]:
        """Write sessions (all of them, or of `project`, when `refs` is None) as JSONL.
        Returns (sessions, messages) written.

        With `encrypt`, the file holds no plaintext: a fresh file key wrapped by the current
        master key of `encryption_key` (which must be set), so that it still reads once the
        sessions in it are deleted (docs/privacy.md)."""
        tk = self._tk
        master = configured_master_keys(tk.settings) if encrypt else None
        if encrypt and master is None:
            raise InvalidConfig(
                "encryption_key",
                "is not set: an encrypted export wraps its file key with the current master"
                " key (turnkeeper encryption generate-key makes one)",
            )
        ids = (
            tk.iter_session_ids(project=project)
            if refs is None
            else [tk.get_session(ref, project=project).id for ref in refs]
        )
        return jsonl.export_sessions(tk.store, ids, out, progress=progress, seal_with=master)

    def import_sessions(
        self,
        path: Path,
        *,
        dry_run: bool = False,
        progress: Callable[[Session], None] | None = None,
        allow_erased: bool = False,
    ) -> jsonl.ImportReport:
        """Import a JSONL export: idempotent; every line is checked as the API checks what it
        carries (limits included; tokens are counted again), a line that fails is reported by
        file:line and the rest is imported. A session that was erased is refused (reported
        by file:line) unless `allow_erased`, which lifts its tombstone and imports it again."""
        if not isinstance(allow_erased, bool):
            raise InvalidInput("allow_erased", "must be true or false")
        return jsonl.import_sessions(
            self._tk, path, dry_run=dry_run, progress=progress, allow_erased=allow_erased
        )

    def expire(
        self,
        *,
        delete: bool = False,
        grace: timedelta | None = None,
        archive_dir: Path | None = None,
        progress: Callable[[str], None] | None = None,
        dry_run: bool = False,
    ) -> ExpiryReport:
        """Mark sessions past `expires_at` expired; with `delete`, delete expired sessions
        older than the grace period (default: `expiry_grace`), calling `progress` with each.
        With `dry_run`, change nothing and report what a run would expire and delete.

        When a `retention` (or `project_retention`) is set, every run also deletes the
        sessions whose last change is older than their project's retention, whole and
        whatever their status (`retention_deleted` in the report), through the store's delete
        path (the caches forget them; when encrypted, their data keys are destroyed); then,
        in the sessions that live on, the messages created more than the retention ago, with
        the checkpoints and traces that may hold their text (`messages_deleted`, by session;
        not archived; `turnkeeper.retention`). A session under a legal hold is neither
        deleted by expiry nor by retention: the report lists it in `held`.

        With an archive directory (`archive_dir`, default: the `archive_dir` setting), the
        sessions to delete are first written to a new JSONL file there (`archive_path` in the
        report), which `turnkeeper import` reads back; nothing is deleted unless its archive
        is on disk. With `encryption_key` set, the archive is an encrypted export: a copy of
        an encrypted store's sessions in plaintext would undo what encryption protects.
        """
        tk = self._tk
        now = tk.now()
        grace = tk.settings.expiry_grace if grace is None else grace
        keep_for = tk.settings.retention_for if tk.settings.retains else None
        if dry_run:
            return expiry.plan(
                tk.store, now=now, grace=grace if delete else None, keep_for=keep_for
            )
        if delete or keep_for is not None:
            report = expiry.delete_expired(
                tk.store,
                now=now,
                grace=grace if delete else None,
                archive_dir=archive_dir or tk.settings.archive_dir,
                progress=progress,
                seal_with=configured_master_keys(tk.settings),
                keep_for=keep_for,
            )
        else:
            report = require(tk.store, AdminStore, "expiry").expire_sessions(now=now)
        if report.archive_path is not None:
            get_logger("turnkeeper.expiry").info(
                "sessions_archived",
                path=report.archive_path,
                sessions=len(report.deleted) + len(report.retention_deleted),
            )
        metrics.SESSIONS_EXPIRED.inc(len(report.expired))
        metrics.SESSIONS_DELETED.inc(len(report.deleted))
        metrics.SESSIONS_RETAINED_OUT.inc(len(report.retention_deleted))
        metrics.MESSAGES_RETAINED_OUT.inc(sum(report.messages_deleted.values()))
        metrics.SESSIONS_HELD.inc(len(report.held))
        return report
