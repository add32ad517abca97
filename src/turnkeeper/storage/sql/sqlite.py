"""The embedded default store: one SQLite file in WAL mode.

Messages are rows keyed by `(session_id, seq)`, never a JSON array rewritten per append. Writes
run in `BEGIN IMMEDIATE` transactions, which SQLite serializes across processes, so concurrent
appenders get gapless seqs in commit order without losing or duplicating anything. Each thread
gets its own connection (sqlite3 connections are not shareable across threads).

Every read and write is `SQLStore`'s (`sql/store.py`); this thin driver keeps the
connections, the transaction and what `sqlite3` errors mean (`_error`, applied to every read and
write transaction alike).

Opening is kept to what an open must know, because a CLI call or a request handler may open a
store just to run one statement (bench/bench_sqlite.py, "open"): the schema version, read from
the file's header when no log is pending (`_examine`), else with `PRAGMA user_version` (a header
read, no schema parse). A connection is made at first use, and its set-up pragmas run then, in
one call; the file's writer queue is looked up at the first write; and the `meta` values
(written once, when the database is made, never changed) are remembered per file identity, so a
second open of an unchanged file does not read them again.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

from turnkeeper.errors import (
    BackendUnavailable,
    Conflict,
    InvalidConfig,
    InvalidInput,
    SearchTooSlow,
    TurnkeeperError,
)
from turnkeeper.storage import locks
from turnkeeper.storage.sql.dialect import SQLITE
from turnkeeper.storage.sql.schema import LATEST_VERSION
from turnkeeper.storage.sql.search import SQLiteSearch
from turnkeeper.storage.sql.store import Executor, SQLStore
from turnkeeper.storage.sql.write_queue import WriteQueue, queue_for


def path_from_url(url: str) -> Path:
    """`sqlite:///abs/path.db`, `sqlite:///rel.db` or a bare path → a filesystem path."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if url.startswith("sqlite://"):
        return Path(url.removeprefix("sqlite://"))
    return Path(url)


FileIdentity = tuple[int, int, int, int]
"""`(st_dev, st_ino, st_size, st_ctime_ns)` of a database file: another file put in its place
(a new inode), a rewrite in place (size, ctime) or a checkpoint of new writes (size, ctime)
changes it."""

_REMEMBERED_META: dict[tuple[int, int], tuple[FileIdentity, dict[str, str]]] = {}
"""The `meta` values read from each file (by device and inode; one entry per file, replaced when
its identity changes), valid while the file's identity is the one they were read under."""


PROGRESS_STEPS = 10_000
"""Virtual-machine steps between two looks at a bounded statement's clock (well under a
millisecond of work)."""

SQLITE_MAGIC = b"SQLite format 3\x00"
USER_VERSION_OFFSET = 60
"""Where the header of a SQLite file keeps `PRAGMA user_version` (4 bytes, big-endian)."""


def _examine(path: Path) -> tuple[FileIdentity | None, int | None]:
    """The file's identity, and its schema version (`PRAGMA user_version`) read from its header
    when the file alone holds the database's last committed state (no write-ahead log with
    frames in it, no rollback journal); None for what is unknown (no file yet, not a SQLite
    file, a log to replay: SQLite is asked then).

    Why not ask SQLite: the first read of a WAL database that no other connection has open
    makes and maps its `-shm` index, and the last close removes it again, ~0.6 ms a cycle
    (bench/bench_sqlite.py, "open") for a value the header holds. A header read can only be
    behind SQLite's answer, never ahead (versions only grow; a committed migration sits in the
    log until a checkpoint), and a version found behind is read again by SQLite inside the
    migration's write transaction, so at worst it costs that transaction."""
    try:
        with open(path, "rb", buffering=0) as file:
            stat = os.fstat(file.fileno())
            header = file.read(USER_VERSION_OFFSET + 4)
    except OSError:
        return None, None
    identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_ctime_ns)
    if len(header) < USER_VERSION_OFFSET + 4 or not header.startswith(SQLITE_MAGIC):
        return identity, None
    if _has_frames(Path(f"{path}-wal")) or os.path.exists(f"{path}-journal"):
        return identity, None
    return identity, int.from_bytes(header[USER_VERSION_OFFSET:], "big", signed=True)


def _has_frames(log: Path) -> bool:
    try:
        return os.stat(log).st_size > 0
    except FileNotFoundError:
        return False


class SQLiteStore(SQLStore, SQLiteSearch):
    """`Store` on a SQLite file. See `turnkeeper.storage.base.Store` for the contract."""

    dialect = SQLITE

    def __init__(
        self,
        url: str,
        *,
        synchronous: str = "NORMAL",
        busy_timeout: timedelta = timedelta(seconds=60),
        target_version: int = LATEST_VERSION,
        create_directory: bool = False,
        writer_lock_file: bool = False,
        search_timeout: float = 3.0,
    ) -> None:
        self.path = path_from_url(url)
        self.search_timeout = search_timeout
        self.url = f"sqlite:///{self.path}"
        self._synchronous = synchronous
        self._busy_timeout_ms = int(busy_timeout.total_seconds() * 1000)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._writer_lock_file = writer_lock_file
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
        # Taken before the first connection opens its file: whatever file that connection
        # then finds, values read through it are never remembered under another file's
        # identity (a file put in place meanwhile has a new one).
        self._identity, version = _examine(self.path)
        if version is None or version < target_version:
            self._migrate(target_version)

    # -- connections and transactions -------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, opened without any set-up (what `PRAGMA user_version`
        needs); `_conn()` is the one to run statements on."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                # `timeout` is SQLite's busy timeout (the same as `PRAGMA busy_timeout`, one
                # statement fewer on every open).
                conn = sqlite3.connect(
                    self.path,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=self._busy_timeout_ms / 1000,
                )
            except sqlite3.Error as exc:
                raise BackendUnavailable(f"cannot open SQLite database {self.path}: {exc}") from exc
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, set up: WAL, the configured `synchronous`, foreign keys
        enforced (applied in one call at the connection's first use)."""
        ready: sqlite3.Connection | None = getattr(self._local, "ready", None)
        if ready is not None:  # every statement but a thread's first: one lookup
            return ready
        conn = self._connection()
        if not getattr(self._local, "set_up", False):
            self._set_up(conn)
            self._local.set_up = True
        self._local.ready = conn
        return conn

    def _set_up(self, conn: sqlite3.Connection) -> None:
        """Run the set-up pragmas, waiting out other connections setting up the same new file.

        `PRAGMA journal_mode = WAL` needs the file to itself while a new file changes mode, and
        SQLite answers SQLITE_BUSY at once there, without calling its busy handler: two
        processes opening one new file together (the workers of `serve --workers 2`, a CLI
        call beside the service) would see "database is locked" for one of them. So the wait
        the busy handler would have done happens here, bounded by the same busy timeout.

        `secure_delete` overwrites what a delete frees (Debian's SQLite does by default; said
        here so every build does): an erased session's rows leave no bytes in the file's free
        pages (docs/privacy.md says what the WAL and the full-text index keep)."""
        script = (
            "PRAGMA journal_mode = WAL;"
            f" PRAGMA synchronous = {self._synchronous};"
            " PRAGMA foreign_keys = ON;"
            " PRAGMA secure_delete = ON;"
        )
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        pause = 0.001
        while True:
            try:
                conn.executescript(script)  # each pragma is idempotent: a retry runs them all
                return
            except sqlite3.Error as exc:
                busy = (exc.sqlite_errorcode & 0xFF) == sqlite3.SQLITE_BUSY  # any SQLITE_BUSY_*
                if not busy or time.monotonic() + pause > deadline:
                    raise BackendUnavailable(
                        f"cannot open SQLite database {self.path}: {exc}"
                    ) from exc
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    @cached_property
    def _writers(self) -> WriteQueue:
        """The file's writer queue, looked up at the first write (a path resolution that an
        open for reading does not need)."""
        return queue_for(self.path, across_processes=self._writer_lock_file)

    def _error(self, exc: sqlite3.Error) -> TurnkeeperError:
        """The turnkeeper error a `sqlite3` error means (the one place they are translated)."""
        if isinstance(exc, sqlite3.IntegrityError):
            return Conflict(f"duplicate value ({exc})")
        if isinstance(exc, sqlite3.DataError):
            return InvalidInput("value", f"SQLite cannot store it: {exc}")
        return BackendUnavailable(f"SQLite database {self.path} failed: {exc}")

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One serialized write transaction; rolled back on any error.

        The writer first waits for its turn in this process's queue for the file (see
        `turnkeeper.storage.sql.write_queue`: first come, first served, where SQLite's busy handler
        would let late writers overtake sleeping ones; with `writer_lock_file`, its turn also
        holds a lock file that orders the processes' writers), then takes SQLite's write lock,
        which excludes every other writer. The busy timeout bounds the waits together."""
        return _WriteTransaction(self)

    def _enter_transaction(self) -> sqlite3.Connection:
        """Wait for the turn, then `BEGIN IMMEDIATE` with what is left of the busy timeout."""
        conn = self._conn()
        started = time.monotonic()
        if not self._writers.acquire(self._busy_timeout_ms / 1000):
            raise BackendUnavailable(
                f"SQLite database {self.path} is busy: no turn to write within"
                f" {self._busy_timeout_ms / 1000:g} s (other writers held it)"
            )
        try:
            self._begin(conn, time.monotonic() - started)
        except BaseException:
            self._writers.release()
            raise
        return conn

    def _exit_transaction(self, conn: sqlite3.Connection, exc: BaseException | None) -> None:
        """`COMMIT`, or roll back on an error (a `sqlite3` one translated); the turn ends."""
        try:
            if exc is None:
                self._commit(conn)
                return
            self._rollback(conn)
            if isinstance(exc, sqlite3.Error):
                raise self._error(exc) from exc
        finally:
            self._writers.release()

    # `_begin` and `_commit` are functions of their own so that a profile tells the wait for
    # the lock and the commit (fsync) apart (bench/profile_http.py).

    def _begin(self, conn: sqlite3.Connection, waited: float) -> None:
        try:
            self._bound_busy_wait(conn, waited)
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"SQLite database {self.path} is busy: {exc}") from exc

    def _commit(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise BackendUnavailable(f"commit failed on {self.path}: {exc}") from exc

    def _bound_busy_wait(self, conn: sqlite3.Connection, waited: float) -> None:
        """Give SQLite's busy handler only what the queue left of the timeout. A statement is
        spent only when the bound changes, which a wait under a tenth of the timeout (the
        usual one) does not: the total then stays within 1.1× the timeout."""
        full = self._busy_timeout_ms
        waited_ms = int(waited * 1000)
        bound = full if waited_ms * 10 < full else max(full - waited_ms, 1)
        if getattr(self._local, "busy_ms", full) != bound:
            conn.execute(f"PRAGMA busy_timeout = {bound}")
            self._local.busy_ms = bound

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def _read_within(self, seconds: float, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        """`_read`, interrupted after `seconds` (a search: `SearchTooSlow`). SQLite calls the
        progress handler every `PROGRESS_STEPS` steps of the statement; a true answer stops it."""
        conn = self._conn()
        deadline = time.monotonic() + seconds
        conn.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            if exc.sqlite_errorcode == sqlite3.SQLITE_INTERRUPT:
                raise SearchTooSlow(seconds) from exc
            raise self._error(exc) from exc
        finally:
            conn.set_progress_handler(None, 0)

    def _migrate(self, target_version: int) -> None:
        if self.schema_version() >= target_version:
            return
        with self._transaction() as tx:
            (current,) = tx.execute("PRAGMA user_version").fetchone()
            self._apply_migrations(tx, current, target_version)

    def _recorded(self, tx: Executor, version: int) -> None:
        tx.execute(f"PRAGMA user_version = {version}")

    def schema_version(self) -> int:
        try:
            (version,) = self._connection().execute("PRAGMA user_version").fetchone()
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        return int(version)

    def meta(self, name: str, default: str) -> str:
        """`SQLStore.meta`, remembered for the file's identity at open: a value once written is
        never changed, so while the file is the same one it is read once per process."""
        identity = self._identity
        if identity is None:
            return super().meta(name, default)
        file = identity[:2]
        remembered = _REMEMBERED_META.get(file)
        if remembered is not None and remembered[0] == identity and name in remembered[1]:
            return remembered[1][name]
        value = super().meta(name, default)
        if remembered is None or remembered[0] != identity:
            remembered = _REMEMBERED_META[file] = (identity, {})
        remembered[1][name] = value
        return value

    def exclusive_lock(self, name: str) -> AbstractContextManager[bool]:
        """See `turnkeeper.storage.locks`: a lock file beside the database."""
        return locks.file_lock(locks.lock_file_beside(self.path, name))

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()


class _WriteTransaction:
    """`SQLiteStore._transaction`: a context manager of its own rather than a
    `@contextmanager` generator (whose object, and its two `next` calls, were a measurable part
    of an append)."""

    __slots__ = ("_conn", "_store")

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        self._conn = self._store._enter_transaction()
        return self._conn

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        self._store._exit_transaction(self._conn, exc)
