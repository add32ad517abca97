"""The embedded default store: one SQLite file in WAL mode.

Messages are rows keyed by `(session_id, seq)`, never a JSON array rewritten per append. Writes
run in `BEGIN IMMEDIATE` transactions, which SQLite serializes across processes, so concurrent
appenders get gapless seqs in commit order without losing or duplicating anything. Each thread
gets its own connection (sqlite3 connections are not shareable across threads).

Every write is `SQLStore`'s; this module keeps the connections, the transaction and what
`sqlite3` errors mean (`_error`, applied to every read and write transaction alike).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from turnkeeper.errors import (
    BackendUnavailable,
    Conflict,
    InvalidConfig,
    InvalidInput,
    TurnkeeperError,
)
from turnkeeper.storage import locks
from turnkeeper.storage.codec import dump_json, from_ts, load_json, to_ts
from turnkeeper.storage.migrations import LATEST_VERSION
from turnkeeper.storage.sql import Dialect
from turnkeeper.storage.sql_store import Executor, SQLStore


def path_from_url(url: str) -> Path:
    """`sqlite:///abs/path.db`, `sqlite:///rel.db` or a bare path → a filesystem path."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if url.startswith("sqlite://"):
        return Path(url.removeprefix("sqlite://"))
    return Path(url)


SQLITE = Dialect(
    name="sqlite", encode_ts=to_ts, decode_ts=from_ts, encode_json=dump_json, decode_json=load_json
)
"""SQLite keeps times as fixed-width UTC text (which sorts in time order) and JSON as text."""


class SQLiteStore(SQLStore):
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

    def _error(self, exc: sqlite3.Error) -> TurnkeeperError:
        """The turnkeeper error a `sqlite3` error means (the one place they are translated)."""
        if isinstance(exc, sqlite3.IntegrityError):
            return Conflict(f"duplicate value ({exc})")
        if isinstance(exc, sqlite3.DataError):
            return InvalidInput("value", f"SQLite cannot store it: {exc}")
        return BackendUnavailable(f"SQLite database {self.path} failed: {exc}")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One serialized write transaction; rolled back on any error."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"SQLite database {self.path} is busy: {exc}") from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise self._error(exc) from exc
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise BackendUnavailable(f"commit failed on {self.path}: {exc}") from exc

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def _migrate(self, target_version: int) -> None:
        if self.schema_version() >= target_version:
            return
        with self._transaction() as tx:
            (current,) = tx.execute("PRAGMA user_version").fetchone()
            self._apply_migrations(tx, current, target_version)

    def _recorded(self, tx: Executor, version: int) -> None:
        tx.execute(f"PRAGMA user_version = {version}")

    def schema_version(self) -> int:
        (version,) = self._conn().execute("PRAGMA user_version").fetchone()
        return int(version)

    def exclusive_lock(self, name: str) -> AbstractContextManager[bool]:
        """See `turnkeeper.storage.locks`: a lock file beside the database."""
        return locks.file_lock(locks.lock_file_beside(self.path, name))

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
