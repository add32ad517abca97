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
    SeqConflict,
    SessionExpired,
    SessionNotFound,
)
from turnkeeper.storage.codec import (
    decode_cursor,
    dump_json,
    encode_cursor,
    from_ts,
    from_ts_or_none,
    load_json,
    to_ts,
    to_ts_or_none,
)
from turnkeeper.storage.sqlite_schema import LATEST_VERSION, MIGRATIONS
from turnkeeper.types import (
    ExpiryReport,
    Message,
    MessageDraft,
    NewSession,
    Page,
    ProjectStats,
    Role,
    Session,
    SessionFilter,
    SessionPatch,
    SessionStats,
    SessionStatus,
    Usage,
)

_SESSION_COLUMNS = (
    "id, key, project, subject, kind, title, phase, status, created_at, updated_at, expires_at,"
    " message_count, last_seq, stored_tokens, usage_input_tokens, usage_output_tokens,"
    " metadata, version"
)
_MESSAGE_COLUMNS = (
    "id, session_id, seq, role, author, content, internal, created_at, tokens,"
    " usage_input_tokens, usage_output_tokens, tool_calls, tool_call_id, metadata"
)


def path_from_url(url: str) -> Path:
    """`sqlite:///abs/path.db`, `sqlite:///rel.db` or a bare path → a filesystem path."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if url.startswith("sqlite://"):
        return Path(url.removeprefix("sqlite://"))
    return Path(url)


def _session_from_row(row: sqlite3.Row) -> Session:
    return Session(
        id=row["id"],
        key=row["key"],
        project=row["project"],
        subject=row["subject"],
        kind=row["kind"],
        title=row["title"],
        phase=row["phase"],
        status=SessionStatus(row["status"]),
        created_at=from_ts(row["created_at"]),
        updated_at=from_ts(row["updated_at"]),
        expires_at=from_ts_or_none(row["expires_at"]),
        message_count=row["message_count"],
        last_seq=row["last_seq"],
        stored_tokens=row["stored_tokens"],
        usage_input_tokens=row["usage_input_tokens"],
        usage_output_tokens=row["usage_output_tokens"],
        metadata=load_json(row["metadata"]),
        version=row["version"],
    )


def _message_from_row(row: sqlite3.Row) -> Message:
    usage = None
    if row["usage_input_tokens"] is not None or row["usage_output_tokens"] is not None:
        usage = Usage(row["usage_input_tokens"] or 0, row["usage_output_tokens"] or 0)
    tool_calls = load_json(row["tool_calls"])
    return Message(
        id=row["id"],
        session_id=row["session_id"],
        seq=row["seq"],
        role=Role(row["role"]),
        author=row["author"],
        content=row["content"],
        internal=bool(row["internal"]),
        created_at=from_ts(row["created_at"]),
        tokens=row["tokens"],
        usage=usage,
        tool_calls=tuple(tool_calls) if tool_calls is not None else None,
        tool_call_id=row["tool_call_id"],
        metadata=load_json(row["metadata"]),
    )


def _message_params(session_id: str, seq: int, message: MessageDraft | Message) -> tuple[Any, ...]:
    usage = message.usage
    return (
        message.id,
        session_id,
        seq,
        message.role.value,
        message.author,
        message.content,
        int(message.internal),
        to_ts(message.created_at),
        message.tokens,
        usage.input_tokens if usage else None,
        usage.output_tokens if usage else None,
        dump_json(list(message.tool_calls)) if message.tool_calls is not None else None,
        message.tool_call_id,
        dump_json(dict(message.metadata)),
    )


_INSERT_MESSAGE = f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES ({', '.join('?' * 14)})"


class SQLiteStore:
    """`Store` on a SQLite file. See `turnkeeper.storage.base.Store` for the contract."""

    def __init__(
        self,
        url: str,
        *,
        synchronous: str = "FULL",
        busy_timeout: timedelta = timedelta(seconds=60),
        target_version: int = LATEST_VERSION,
    ) -> None:
        self.path = path_from_url(url)
        self.url = f"sqlite:///{self.path}"
        self._synchronous = synchronous
        self._busy_timeout_ms = int(busy_timeout.total_seconds() * 1000)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendUnavailable(f"cannot create the directory of {self.path}: {exc}") from exc
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
        with self._write() as tx:
            tx.execute("INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", (name, default))
            (value,) = tx.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return str(value)

    # -- sessions ---------------------------------------------------------------------------

    def _session_row(self, conn: sqlite3.Connection, session_id: str) -> Session:
        row = conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return _session_from_row(row)

    def _release_stale_key(self, tx: sqlite3.Connection, new: NewSession, now: datetime) -> None:
        """A live key holder past its expiry is marked expired so the key can be reused."""
        tx.execute(
            "UPDATE sessions SET status = 'expired', updated_at = ?, version = version + 1"
            " WHERE project = ? AND key = ? AND status = 'active'"
            " AND expires_at IS NOT NULL AND expires_at <= ?",
            (to_ts(now), new.project, new.key, to_ts(now)),
        )

    def _insert_session(self, tx: sqlite3.Connection, new: NewSession, now: datetime) -> Session:
        session_id = str(uuid.uuid4())
        try:
            tx.execute(
                "INSERT INTO sessions (id, key, project, subject, kind, title, phase, status,"
                " created_at, updated_at, expires_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?)",
                (
                    session_id,
                    new.key,
                    new.project,
                    new.subject,
                    new.kind,
                    new.title,
                    new.phase,
                    to_ts(now),
                    to_ts(now),
                    to_ts_or_none(new.expires_at),
                    dump_json(dict(new.metadata)),
                ),
            )
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
            row = tx.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions"
                " WHERE project = ? AND key = ? AND status = 'active'",
                (new.project, new.key),
            ).fetchone()
            if row is not None:
                return _session_from_row(row), False
            return self._insert_session(tx, new, now), True

    def get_session(self, session_id: str) -> Session:
        rows = self._read(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        if not rows:
            raise SessionNotFound(session_id)
        return _session_from_row(rows[0])

    def find_session_by_key(self, project: str, key: str) -> Session:
        rows = self._read(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE project = ? AND key = ?"
            " ORDER BY status = 'active' DESC, updated_at DESC, id DESC LIMIT 1",
            (project, key),
        )
        if not rows:
            raise SessionNotFound(key, project)
        return _session_from_row(rows[0])

    def list_sessions(
        self, where: SessionFilter, *, limit: int, cursor: str | None = None
    ) -> Page[Session]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("project", where.project),
            ("subject", where.subject),
            ("kind", where.kind),
            ("key", where.key),
            ("status", where.status.value if where.status else None),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if where.updated_since is not None:
            clauses.append("updated_at >= ?")
            params.append(to_ts(where.updated_since))
        if cursor is not None:
            after_updated, after_id = decode_cursor(cursor)
            clauses.append("(updated_at < ? OR (updated_at = ? AND id < ?))")
            params.extend([after_updated, after_updated, after_id])
        sql = f"SELECT {_SESSION_COLUMNS} FROM sessions"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        rows = self._read(sql, [*params, limit + 1])
        items = tuple(_session_from_row(row) for row in rows[:limit])
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_cursor(last["updated_at"], last["id"])
        return Page(items=items, next_cursor=next_cursor)

    def update_session(self, session_id: str, patch: SessionPatch, *, now: datetime) -> Session:
        changes = patch.changes()
        columns: list[str] = []
        params: list[Any] = []
        for name, value in changes.items():
            columns.append(f"{name} = ?")
            if name == "metadata":
                params.append(dump_json(dict(value)))
            elif name == "expires_at":
                params.append(to_ts_or_none(value))
            else:
                params.append(value)
        with self._write() as tx:
            self._session_row(tx, session_id)
            tx.execute(
                "UPDATE sessions SET "
                + "".join(f"{column}, " for column in columns)
                + "updated_at = ?, version = version + 1 WHERE id = ?",
                (*params, to_ts(now), session_id),
            )
            return self._session_row(tx, session_id)

    def set_status(self, session_id: str, status: SessionStatus, *, now: datetime) -> Session:
        with self._write() as tx:
            current = self._session_row(tx, session_id)
            try:
                tx.execute(
                    "UPDATE sessions SET status = ?, updated_at = ?, version = version + 1"
                    " WHERE id = ?",
                    (status.value, to_ts(now), session_id),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(
                    f"key {current.key!r} is already held by another live session"
                    f" of project {current.project!r}"
                ) from exc
            return self._session_row(tx, session_id)

    def reset_session(
        self, session_id: str, *, keep_system_message: bool, now: datetime
    ) -> Session:
        with self._write() as tx:
            self._session_row(tx, session_id)
            keep = " AND NOT (seq = 1 AND role = 'system')" if keep_system_message else ""
            tx.execute(f"DELETE FROM messages WHERE session_id = ?{keep}", (session_id,))
            self._recompute_totals(tx, session_id, now)
            return self._session_row(tx, session_id)

    def _recompute_totals(self, tx: sqlite3.Connection, session_id: str, now: datetime) -> None:
        tx.execute(
            "UPDATE sessions SET"
            " message_count = (SELECT count(*) FROM messages WHERE session_id = :id),"
            " last_seq = (SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = :id),"
            " stored_tokens = (SELECT coalesce(sum(tokens), 0) FROM messages"
            "   WHERE session_id = :id),"
            " usage_input_tokens = (SELECT coalesce(sum(usage_input_tokens), 0) FROM messages"
            "   WHERE session_id = :id),"
            " usage_output_tokens = (SELECT coalesce(sum(usage_output_tokens), 0) FROM messages"
            "   WHERE session_id = :id),"
            " updated_at = :now, version = version + 1"
            " WHERE id = :id",
            {"id": session_id, "now": to_ts(now)},
        )

    def delete_session(self, session_id: str) -> None:
        with self._write() as tx:
            deleted = tx.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount
            if not deleted:
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
        with self._write() as tx:
            session = self._session_row(tx, session_id)
            ids = list(dict.fromkeys(draft.id for draft in drafts))
            stored = {
                row["id"]: _message_from_row(row)
                for row in tx.execute(
                    f"SELECT {_MESSAGE_COLUMNS} FROM messages"
                    f" WHERE id IN ({', '.join('?' * len(ids))})",
                    ids,
                )
            }
            for message in stored.values():
                if message.session_id != session_id:
                    raise Conflict(f"message id {message.id} is already stored in another session")
            fresh = [draft for draft in drafts if draft.id not in stored]
            if fresh:
                if expected_last_seq is not None and expected_last_seq != session.last_seq:
                    raise SeqConflict(session_id, expected_last_seq, session.last_seq)
                if session.status is SessionStatus.EXPIRED or session.is_expired_at(now):
                    raise SessionExpired(session_id, to_ts_or_none(session.expires_at) or "")
                if session.status is not SessionStatus.ACTIVE:
                    raise Conflict(f"session {session_id} is {session.status.value}")
            seq = session.last_seq
            rows = []
            for draft in fresh:
                if draft.id in stored:
                    continue  # the same id twice in one batch
                seq += 1
                rows.append(_message_params(session_id, seq, draft))
                stored[draft.id] = Message(
                    id=draft.id,
                    session_id=session_id,
                    seq=seq,
                    role=draft.role,
                    content=draft.content,
                    created_at=draft.created_at,
                    tokens=draft.tokens,
                    author=draft.author,
                    internal=draft.internal,
                    usage=draft.usage,
                    tool_calls=draft.tool_calls,
                    tool_call_id=draft.tool_call_id,
                    metadata=draft.metadata,
                )
            if rows:
                tx.executemany(_INSERT_MESSAGE, rows)
                added = [stored[row[0]] for row in rows]
                tx.execute(
                    "UPDATE sessions SET last_seq = ?, message_count = message_count + ?,"
                    " stored_tokens = stored_tokens + ?,"
                    " usage_input_tokens = usage_input_tokens + ?,"
                    " usage_output_tokens = usage_output_tokens + ?,"
                    " updated_at = ?, version = version + 1 WHERE id = ?",
                    (
                        seq,
                        len(added),
                        sum(message.tokens for message in added),
                        sum(m.usage.input_tokens for m in added if m.usage),
                        sum(m.usage.output_tokens for m in added if m.usage),
                        to_ts(now),
                        session_id,
                    ),
                )
        return [stored[draft.id] for draft in drafts]

    def read_messages(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        to_seq: int | None = None,
        include_internal: bool = True,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[Message]:
        clauses = ["session_id = ?"]
        params: list[Any] = [session_id]
        if not include_internal:
            clauses.append("internal = 0")
        if from_seq is not None:
            clauses.append("seq >= ?")
            params.append(from_seq)
        if to_seq is not None:
            clauses.append("seq <= ?")
            params.append(to_seq)
        sql = (
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE {' AND '.join(clauses)}"
            f" ORDER BY seq {'DESC' if newest_first else 'ASC'}"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_message_from_row(row) for row in self._read(sql, params)]

    def count_messages(
        self, session_id: str, *, before_seq: int | None = None, include_internal: bool = True
    ) -> int:
        """How many messages have `seq < before_seq` (all of them when None)."""
        clauses = ["session_id = ?"]
        params: list[Any] = [session_id]
        if not include_internal:
            clauses.append("internal = 0")
        if before_seq is not None:
            clauses.append("seq < ?")
            params.append(before_seq)
        rows = self._read(f"SELECT count(*) FROM messages WHERE {' AND '.join(clauses)}", params)
        return int(rows[0][0])

    # -- lifecycle and statistics -----------------------------------------------------------

    def expire_sessions(
        self, *, now: datetime, delete: bool = False, grace: timedelta = timedelta(0)
    ) -> ExpiryReport:
        with self._write() as tx:
            expired = tx.execute(
                "UPDATE sessions SET status = 'expired', updated_at = ?, version = version + 1"
                " WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at <= ?"
                " RETURNING id",
                (to_ts(now), to_ts(now)),
            ).fetchall()
            deleted: list[sqlite3.Row] = []
            if delete:
                deleted = tx.execute(
                    "DELETE FROM sessions WHERE status = 'expired'"
                    " AND coalesce(expires_at, updated_at) <= ? RETURNING id",
                    (to_ts(now - grace),),
                ).fetchall()
        return ExpiryReport(
            expired=tuple(sorted(row["id"] for row in expired)),
            deleted=tuple(sorted(row["id"] for row in deleted)),
        )

    def session_stats(self, session_id: str) -> SessionStats:
        session = self.get_session(session_id)
        rows = self._read(
            "SELECT role, internal, count(*) AS n, min(created_at) AS first,"
            " max(created_at) AS last FROM messages WHERE session_id = ? GROUP BY role, internal",
            (session_id,),
        )
        by_role: dict[str, int] = {}
        internal = 0
        firsts = [row["first"] for row in rows]
        lasts = [row["last"] for row in rows]
        for row in rows:
            by_role[row["role"]] = by_role.get(row["role"], 0) + row["n"]
            if row["internal"]:
                internal += row["n"]
        return SessionStats(
            session_id=session_id,
            message_count=session.message_count,
            user_facing_messages=session.message_count - internal,
            internal_messages=internal,
            messages_by_role=by_role,
            stored_tokens=session.stored_tokens,
            usage_input_tokens=session.usage_input_tokens,
            usage_output_tokens=session.usage_output_tokens,
            first_message_at=from_ts(min(firsts)) if firsts else None,
            last_message_at=from_ts(max(lasts)) if lasts else None,
        )

    def project_stats(self, project: str | None = None) -> list[ProjectStats]:
        sql = (
            "SELECT project, status, count(*) AS sessions, sum(message_count) AS messages,"
            " sum(stored_tokens) AS tokens, sum(usage_input_tokens) AS usage_in,"
            " sum(usage_output_tokens) AS usage_out FROM sessions"
        )
        params: list[Any] = []
        if project is not None:
            sql += " WHERE project = ?"
            params.append(project)
        sql += " GROUP BY project, status ORDER BY project"
        totals: dict[str, dict[str, Any]] = {}
        for row in self._read(sql, params):
            entry = totals.setdefault(
                row["project"],
                {"by_status": {}, "messages": 0, "tokens": 0, "usage_in": 0, "usage_out": 0},
            )
            entry["by_status"][row["status"]] = row["sessions"]
            for name in ("messages", "tokens", "usage_in", "usage_out"):
                entry[name] += row[name] or 0
        return [
            ProjectStats(
                project=name,
                sessions_by_status=entry["by_status"],
                message_count=entry["messages"],
                stored_tokens=entry["tokens"],
                usage_input_tokens=entry["usage_in"],
                usage_output_tokens=entry["usage_out"],
            )
            for name, entry in totals.items()
        ]

    # -- bulk transfer ----------------------------------------------------------------------

    def import_session(self, session: Session, messages: Sequence[Message]) -> int:
        with self._write() as tx:
            tx.execute(
                f"INSERT OR IGNORE INTO sessions ({_SESSION_COLUMNS})"
                f" VALUES ({', '.join('?' * 18)})",
                (
                    session.id,
                    session.key,
                    session.project,
                    session.subject,
                    session.kind,
                    session.title,
                    session.phase,
                    session.status.value,
                    to_ts(session.created_at),
                    to_ts(session.updated_at),
                    to_ts_or_none(session.expires_at),
                    0,
                    0,
                    0,
                    0,
                    0,
                    dump_json(dict(session.metadata)),
                    session.version,
                ),
            )
            if tx.execute("SELECT 1 FROM sessions WHERE id = ?", (session.id,)).fetchone() is None:
                raise Conflict(
                    f"cannot import session {session.id}: key {session.key!r} is held by"
                    f" another live session of project {session.project!r}"
                )
            before = tx.total_changes
            tx.executemany(
                _INSERT_MESSAGE.replace("INSERT", "INSERT OR IGNORE", 1),
                [_message_params(session.id, message.seq, message) for message in messages],
            )
            added = tx.total_changes - before
            if added:
                self._recompute_totals(tx, session.id, session.updated_at)
                tx.execute(
                    "UPDATE sessions SET updated_at = ?, version = ? WHERE id = ?",
                    (to_ts(session.updated_at), session.version, session.id),
                )
        return added
