"""The embedded default store: one SQLite file in WAL mode.

Messages are rows keyed by `(session_id, seq)`, never a JSON array rewritten per append. Writes
run in `BEGIN IMMEDIATE` transactions, which SQLite serializes across processes, so concurrent
appenders get gapless seqs in commit order without losing or duplicating anything. Each thread
gets its own connection (sqlite3 connections are not shareable across threads).
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from turnkeeper.errors import (
    BackendUnavailable,
    Conflict,
    InvalidConfig,
    NotFound,
    SessionNotFound,
)
from turnkeeper.storage import sql
from turnkeeper.storage.codec import dump_json, from_ts, load_json, to_ts
from turnkeeper.storage.search_sql import SQLiteSearch
from turnkeeper.storage.sql import Dialect
from turnkeeper.storage.sqlite_schema import LATEST_VERSION, MIGRATIONS
from turnkeeper.types import (
    AgentState,
    AgentStateUpdate,
    ApiKey,
    ExpiryReport,
    Message,
    MessageDraft,
    NewSession,
    Session,
    SessionPatch,
    SessionStatus,
    SummaryCheckpoint,
)


def path_from_url(url: str) -> Path:
    """`sqlite:///abs/path.db`, `sqlite:///rel.db` or a bare path → a filesystem path."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if url.startswith("sqlite://"):
        return Path(url.removeprefix("sqlite://"))
    return Path(url)


SQLITE = Dialect(encode_ts=to_ts, decode_ts=from_ts, encode_json=dump_json, decode_json=load_json)
"""SQLite keeps times as fixed-width UTC text (which sorts in time order) and JSON as text."""


class SQLiteStore(sql.SQLReads, SQLiteSearch):
    """`Store` on a SQLite file. See `turnkeeper.storage.base.Store` for the contract."""

    dialect = SQLITE

    def __init__(
        self,
        url: str,
        *,
        synchronous: str = "FULL",
        busy_timeout: timedelta = timedelta(seconds=60),
        target_version: int = LATEST_VERSION,
        create_directory: bool = False,
    ) -> None:
        self.path = path_from_url(url)
        self.url = f"sqlite:///{self.path}"
        self._synchronous = synchronous
        self._busy_timeout_ms = int(busy_timeout.total_seconds() * 1000)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        if create_directory:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BackendUnavailable(
                    f"cannot create the directory of {self.path}: {exc}"
                ) from exc
        elif not self.path.parent.is_dir():
            raise InvalidConfig(
                "database_url",
                f"directory {self.path.parent} does not exist (a new database file is created, "
                "its directory is not: create it first)",
            )
        self._migrate(target_version)

    # -- connections and transactions -------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=60
                )
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                conn.execute("PRAGMA foreign_keys = ON")
            except sqlite3.Error as exc:
                raise BackendUnavailable(f"cannot open SQLite database {self.path}: {exc}") from exc
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One serialized write transaction; rolled back on any error."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise BackendUnavailable(f"SQLite database {self.path} is busy: {exc}") from exc
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise BackendUnavailable(f"commit failed on {self.path}: {exc}") from exc

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            raise BackendUnavailable(f"read failed on {self.path}: {exc}") from exc

    def _migrate(self, target_version: int) -> None:
        conn = self._conn()
        (current,) = conn.execute("PRAGMA user_version").fetchone()
        if current >= target_version:
            return
        with self._write() as tx:
            (current,) = tx.execute("PRAGMA user_version").fetchone()
            for migration in MIGRATIONS:
                if current < migration.version <= target_version:
                    for statement in migration.statements:
                        tx.execute(statement)
                    tx.execute(
                        "INSERT INTO schema_migrations (version, name, applied_at)"
                        " VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'))",
                        (migration.version, migration.name),
                    )
                    tx.execute(f"PRAGMA user_version = {migration.version}")

    def schema_version(self) -> int:
        (version,) = self._conn().execute("PRAGMA user_version").fetchone()
        return int(version)

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def meta(self, name: str, default: str) -> str:
        # Read first: opening a store happens per process or request, and a write
        # transaction there would cost a commit (an fsync) every time.
        rows = self._read("SELECT value FROM meta WHERE name = ?", (name,))
        if rows:
            return str(rows[0][0])
        with self._write() as tx:
            tx.execute("INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", (name, default))
            (value,) = tx.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return str(value)

    # -- sessions ---------------------------------------------------------------------------

    def _session_row(self, conn: sqlite3.Connection, session_id: str) -> Session:
        row = conn.execute(sql.SELECT_SESSION, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return sql.session_from_row(row, SQLITE)

    def _release_stale_key(self, tx: sqlite3.Connection, new: NewSession, now: datetime) -> None:
        """A live key holder past its expiry is marked expired so the key can be reused."""
        tx.execute(sql.RELEASE_STALE_KEY, (to_ts(now), new.project, new.key, to_ts(now)))

    def _insert_session(self, tx: sqlite3.Connection, new: NewSession, now: datetime) -> Session:
        session_id = str(uuid.uuid4())
        try:
            tx.execute(sql.INSERT_SESSION, sql.new_session_params(session_id, new, now, SQLITE))
        except sqlite3.IntegrityError as exc:
            raise Conflict(
                f"key {new.key!r} is held by a live session of project {new.project!r}"
            ) from exc
        return self._session_row(tx, session_id)

    def create_session(self, new: NewSession, *, now: datetime) -> Session:
        with self._write() as tx:
            if new.key is not None:
                self._release_stale_key(tx, new, now)
            return self._insert_session(tx, new, now)

    def get_or_create_session(self, new: NewSession, *, now: datetime) -> tuple[Session, bool]:
        if new.key is None:
            raise ValueError("get_or_create_session needs a key")
        with self._write() as tx:
            self._release_stale_key(tx, new, now)
            row = tx.execute(sql.LIVE_BY_KEY, (new.project, new.key)).fetchone()
            if row is not None:
                return sql.session_from_row(row, SQLITE), False
            return self._insert_session(tx, new, now), True

    def _returning_session(self, tx: sqlite3.Connection, query: str, params: Any) -> Session:
        row = tx.execute(query, params).fetchone()
        if row is None:
            raise SessionNotFound(params[-1])
        return sql.session_from_row(row, SQLITE)

    def update_session(self, session_id: str, patch: SessionPatch, *, now: datetime) -> Session:
        query, params = sql.update_session_query(session_id, patch.changes(), now, SQLITE)
        with self._write() as tx:
            return self._returning_session(tx, query, params)

    def set_status(self, session_id: str, status: SessionStatus, *, now: datetime) -> Session:
        with self._write() as tx:
            current = self._session_row(tx, session_id)
            try:
                return self._returning_session(
                    tx, sql.SET_STATUS, (status.value, to_ts(now), session_id)
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(
                    f"key {current.key!r} is already held by another live session"
                    f" of project {current.project!r}"
                ) from exc

    def reset_session(
        self, session_id: str, *, keep_system_message: bool, now: datetime
    ) -> Session:
        with self._write() as tx:
            self._session_row(tx, session_id)
            keep = sql.KEEP_SYSTEM_MESSAGE if keep_system_message else ""
            tx.execute(sql.RESET_MESSAGES + keep, (session_id,))
            tx.execute(sql.RESET_SUMMARIES, (session_id,))
            tx.execute(sql.RESET_AGENT_POSITIONS, (session_id,))
            tx.execute(sql.RESET_TRACES, (session_id,))
            return self._returning_session(tx, sql.RECOMPUTE_TOTALS, (to_ts(now), session_id))

    def delete_session(self, session_id: str) -> None:
        with self._write() as tx:
            if not tx.execute(sql.DELETE_SESSION, (session_id,)).rowcount:
                raise SessionNotFound(session_id)

    # -- messages ---------------------------------------------------------------------------

    def append_messages(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None = None,
        now: datetime,
    ) -> list[Message]:
        if not drafts:
            return []
        ids = list(dict.fromkeys(draft.id for draft in drafts))
        with self._write() as tx:
            session = self._session_row(tx, session_id)
            rows = tx.execute(
                sql.SELECT_MESSAGES_BY_ID + sql.placeholders(len(ids)), [session_id, *ids]
            )
            stored = {row["id"]: sql.message_from_row(row, SQLITE) for row in rows}
            plan = sql.plan_append(
                session, drafts, stored, expected_last_seq=expected_last_seq, now=now
            )
            if plan.added:
                tx.executemany(
                    sql.INSERT_MESSAGE,
                    [sql.message_params(session_id, m.seq, m, SQLITE) for m in plan.added],
                )
                tx.execute(sql.ADD_TOTALS, plan.totals_params(session_id, now, SQLITE))
                tx.executemany(sql.INSERT_TRACE, sql.trace_params(session_id, plan.traces))
        return plan.result

    # -- agent states and summary checkpoints -----------------------------------------------

    def _bump_version(self, tx: sqlite3.Connection, session_id: str) -> None:
        if not tx.execute(sql.BUMP_VERSION, (session_id,)).rowcount:
            raise SessionNotFound(session_id)

    def update_agent_state(
        self, session_id: str, agent: str, update: AgentStateUpdate, *, now: datetime
    ) -> AgentState:
        with self._write() as tx:
            self._bump_version(tx, session_id)
            params = sql.agent_state_params(session_id, agent, update, now, SQLITE)
            row = tx.execute(sql.UPSERT_AGENT_STATE, params).fetchone()
        return sql.agent_state_from_row(row, SQLITE)

    def save_summary(self, checkpoint: SummaryCheckpoint) -> SummaryCheckpoint:
        key = (checkpoint.session_id, checkpoint.covers_to_seq)
        with self._write() as tx:
            self._session_row(tx, checkpoint.session_id)
            if tx.execute(sql.INSERT_SUMMARY, sql.summary_params(checkpoint, SQLITE)).rowcount:
                self._bump_version(tx, checkpoint.session_id)
            row = tx.execute(sql.SELECT_SUMMARY, key).fetchone()
        return sql.summary_from_row(row, SQLITE)

    # -- lifecycle and statistics -----------------------------------------------------------

    def expire_sessions(
        self, *, now: datetime, delete: bool = False, grace: timedelta = timedelta(0)
    ) -> ExpiryReport:
        with self._write() as tx:
            expired = tx.execute(sql.EXPIRE_DUE, (to_ts(now), to_ts(now))).fetchall()
            deleted: list[sqlite3.Row] = []
            if delete:
                deleted = tx.execute(sql.DELETE_EXPIRED, (to_ts(now - grace),)).fetchall()
        return ExpiryReport(
            expired=tuple(sorted(row["id"] for row in expired)),
            deleted=tuple(sorted(row["id"] for row in deleted)),
        )

    # -- bulk transfer ----------------------------------------------------------------------

    def import_session(
        self,
        session: Session,
        messages: Sequence[Message],
        traces: Sequence[tuple[int, str]] = (),
    ) -> int:
        with self._write() as tx:
            tx.execute(
                sql.IMPORT_SESSION.replace("INSERT", "INSERT OR IGNORE", 1),
                sql.imported_session_params(session, SQLITE),
            )
            if tx.execute("SELECT 1 FROM sessions WHERE id = ?", (session.id,)).fetchone() is None:
                raise Conflict(
                    f"cannot import session {session.id}: key {session.key!r} is held by"
                    f" another live session of project {session.project!r}"
                )
            # The cursor's rowcount, not the connection's total_changes: the latter also
            # counts the rows the full-text index's triggers write.
            added = max(
                tx.executemany(
                    sql.INSERT_MESSAGE.replace("INSERT", "INSERT OR IGNORE", 1),
                    [sql.message_params(session.id, m.seq, m, SQLITE) for m in messages],
                ).rowcount,
                0,
            )
            tx.executemany(sql.INSERT_TRACE, sql.trace_params(session.id, traces))
            if added:
                tx.execute(sql.RECOMPUTE_TOTALS, (to_ts(session.updated_at), session.id)).fetchall()
                tx.execute(
                    sql.RESTORE_IMPORTED,
                    (to_ts(session.updated_at), session.version, session.id),
                )
        return added

    # -- API keys ---------------------------------------------------------------------------

    def create_api_key(self, key: ApiKey, *, secret_hash: str) -> None:
        with self._write() as tx:
            try:
                tx.execute(sql.INSERT_API_KEY, sql.api_key_params(key, secret_hash, SQLITE))
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"API key {key.id!r} exists already") from exc

    def revoke_api_key(self, key_id: str, *, now: datetime) -> ApiKey:
        with self._write() as tx:
            row = tx.execute(sql.REVOKE_API_KEY, (to_ts(now), key_id)).fetchone()
        if row is None:
            raise NotFound(f"API key {key_id!r} not found")
        return sql.api_key_from_row(row, SQLITE)

    def delete_last_message(self, session_id: str, *, now: datetime) -> Message | None:
        with self._write() as tx:
            self._session_row(tx, session_id)
            row = tx.execute(sql.DELETE_LAST_MESSAGE, (session_id, session_id)).fetchone()
            if row is None:
                return None
            deleted = sql.message_from_row(row, SQLITE)
            for query, params in sql.forget_from_seq(session_id, deleted.seq):
                tx.execute(query, params)
            self._returning_session(tx, sql.RECOMPUTE_TOTALS, (to_ts(now), session_id))
        return deleted
