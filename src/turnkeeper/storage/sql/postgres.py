"""The shared store: PostgreSQL, for many processes and service replicas on one database.

Same tables, statements and contract as the SQLite store (all of it in `SQLStore`); what differs
is concurrency. Every append runs in one transaction that first
locks the session row (`SELECT … FOR UPDATE`): appenders to one session queue on that lock, so
each sees the seq its predecessor committed and seqs are gapless and in commit order, while
appenders to different sessions never wait for each other. A retried message id is found by the
locked transaction and returned as stored (idempotent).

Connections come from a `psycopg_pool.ConnectionPool`. Driver errors are mapped once, in
`_mapped_errors`: an unreachable server or an exhausted pool is `BackendUnavailable`, a unique
violation is `Conflict`, a value PostgreSQL cannot store (a NUL character) is `InvalidInput`.

Every statement is bounded twice: the server cancels one that runs past `statement_timeout`
(set on each connection), and a `Watchdog` cuts off the connection of one whose answer has not
come `socket_timeout` after it was sent (a frozen server, a cut network), so no request waits
longer; the broken connection is dropped, never pooled again. Migrations and expiry sweeps,
which may rightly run long, run without either bound.

A pooled connection may have died while idle (a restart, a failover, `pg_terminate_backend`, an
idle-connection reaper). It fails at the first statement sent on it, and that statement is
always one that changes nothing, a read or a transaction's `BEGIN`: so `_checked_out` runs it
again on another connection, and a dead idle connection is never a failed request. Nothing sent
after it is retried: a transaction whose connection broke before its `COMMIT` was answered has
an outcome the client cannot know.

The tables live in the first schema of the connection's `search_path`, so a URL such as
`postgresql://host/db?options=-csearch_path%3Dtenant_a` selects an independent store.

Every read and write is `SQLStore`'s (`sql/store.py`); this thin driver keeps the pool, the
transaction (`_transaction`, whose cursor takes the shared `?` placeholders), the error mapping
and the migration lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from turnkeeper.errors import (
    BackendUnavailable,
    Conflict,
    InvalidConfig,
    InvalidInput,
    SearchTooSlow,
    TurnkeeperError,
)
from turnkeeper.storage import locks
from turnkeeper.storage.codec import load_json
from turnkeeper.storage.sql.dialect import POSTGRES, format_placeholders
from turnkeeper.storage.sql.schema import LATEST_VERSION, MIGRATION_LOCK
from turnkeeper.storage.sql.search import PostgresSearch
from turnkeeper.storage.sql.store import Executor, Result, SQLStore
from turnkeeper.storage.sql.watchdog import Watchdog

try:
    import psycopg
    import psycopg.sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import TransactionStatus
    from psycopg.rows import DictRow, dict_row
    from psycopg.types.json import JsonbLoader
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise InvalidConfig(
        "database_url", "PostgreSQL needs its driver: pip install 'turnkeeper[postgres]'"
    ) from exc

Cursor = psycopg.Cursor[DictRow]
T = TypeVar("T")

_CONSTRAINT_MEANINGS = {
    "sessions_live_key": "the key is held by another live session of the project",
    "sessions_pkey": "a session with this id already exists",
    "messages_session_id_id_key": "a message with this id is already stored in this session",
    "api_keys_pkey": "an API key with this id exists already",
}


class _JsonbLoader(JsonbLoader):
    """psycopg's `jsonb` loader, reading as SQLite's columns are read (`codec.load_json`): the
    empty object (nearly every message's and session's `metadata`) made without the JSON
    parser (a page of messages was one `json.loads` per row, a tenth of a context build's
    CPU), and a value nested too deep read with its deep part cut off, never an error."""

    def load(self, data: Any) -> Any:
        if data == b"{}":
            return {}  # a new dict each time: callers may keep it
        return load_json(bytes(data).decode("utf-8"))


class Unanswered(psycopg.OperationalError):
    """The server did not answer a statement within the socket timeout: the watchdog cut its
    connection off. Whether the statement ran is unknown, so it is never retried."""


class _Bound:
    """How long a statement may wait for its answer, and the watchdog that enforces it."""

    def __init__(self, watchdog: Watchdog, seconds: float) -> None:
        self.watchdog = watchdog
        self.seconds = seconds

    @contextmanager
    def watching(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """The block's statement on `conn`, cut off (`Unanswered`) if its answer takes longer
        than allowed."""
        watch = self.watchdog.watch(conn.pgconn.socket, self.seconds)
        try:
            yield
        except psycopg.OperationalError as exc:
            if watch.expired:
                raise Unanswered(f"no answer within {self.seconds:g} s") from exc
            raise
        finally:
            self.watchdog.release(watch)


class _Statements:
    """A pooled connection's cursor that takes the shared `?`-placeholder SQL (the store's
    `Executor`), each statement bounded by `bound` (None: unbounded)."""

    def __init__(self, cur: Cursor, bound: _Bound | None) -> None:
        self.cur = cur
        self.bound = bound

    @property
    def connection(self) -> psycopg.Connection[Any]:
        return self.cur.connection

    def execute(self, query: str, params: Sequence[Any] = (), /) -> Cursor:
        return self._send(lambda: self.cur.execute(format_placeholders(query), params))

    def executemany(self, query: str, params: Iterable[Sequence[Any]], /) -> Cursor:
        self._send(lambda: self.cur.executemany(format_placeholders(query), params))
        return self.cur

    def _send(self, send: Callable[[], T]) -> T:
        if self.bound is None:
            return send()
        with self.bound.watching(self.connection):
            return send()

    def found_dead(self, exc: psycopg.OperationalError) -> bool:
        """Whether `exc` says the connection was dead (the server had closed it), rather than
        that a statement failed on a live one or went unanswered."""
        return self.connection.broken and not isinstance(exc, Unanswered)

    def roll_back(self) -> None:
        """End the transaction after an error, if the connection still holds one."""
        status = self.connection.info.transaction_status
        if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            self.execute("ROLLBACK")


def _network_settings(url: str, socket_seconds: float) -> dict[str, Any]:
    """libpq's own bounds on the network, from the socket timeout: data the server's machine
    does not acknowledge within it (a cut network, a machine gone) ends the connection, and an
    idle pooled connection is probed every few seconds, so one whose server vanished without a
    word is found broken (and replaced) before a request is sent on it. What the URL sets
    itself is kept."""
    seconds = max(1, round(socket_seconds))
    wanted: dict[str, Any] = {
        "tcp_user_timeout": round(socket_seconds * 1000),
        "keepalives": 1,
        "keepalives_idle": seconds,
        "keepalives_interval": seconds,
        "keepalives_count": 3,
    }
    given = conninfo_to_dict(url)
    return {name: value for name, value in wanted.items() if name not in given}


def search_path(setting: str) -> list[str]:
    """The schema names of a `search_path` setting, in order: `"$user", Tenant_A, "Mixed"`
    gives `["$user", "tenant_a", "Mixed"]` (unquoted names fold to lower case, as in SQL)."""
    names: list[str] = []
    rest = setting.strip()
    while rest:
        if rest.startswith('"'):
            end = rest.index('"', 1)
            while rest[end + 1 : end + 2] == '"':  # a doubled quote is a quote in the name
                end = rest.index('"', end + 2)
            names.append(rest[1:end].replace('""', '"'))
            rest = rest[end + 1 :].strip().removeprefix(",")
        else:
            name, _, rest = rest.partition(",")
            if name.strip():
                names.append(name.strip().lower())
        rest = rest.strip()
    return names


def redact(url: str) -> str:
    """The URL without its password, for messages and `Store.url`."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsed lazily; a bad port raises here
    except ValueError as exc:
        raise InvalidConfig("database_url", f"not a valid PostgreSQL URL ({exc})") from None
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    netloc = f"{parts.username}@{host}" if parts.username else host
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresStore(SQLStore, PostgresSearch):
    """`Store` on PostgreSQL. See `turnkeeper.storage.base.Store` for the contract."""

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 2.0,
        pool_timeout: float = 2.0,
        statement_timeout: float = 5.0,
        socket_timeout: float = 6.0,
        search_timeout: float = 3.0,
        target_version: int = LATEST_VERSION,
    ) -> None:
        self.url = redact(url)
        connect_seconds = max(2, round(connect_timeout))  # libpq: whole seconds, 2 at least
        self._max_size = max_size
        self._statement_ms = max(1, round(statement_timeout * 1000))
        self.search_timeout = search_timeout
        self._watchdog = Watchdog(f"turnkeeper-watchdog:{self.url}")
        # A statement's answer is awaited `socket_timeout`, and never less than a second
        # beyond the statement's own timeout: the server's cancel comes first when it can.
        self._bound = _Bound(self._watchdog, max(socket_timeout, statement_timeout + 1))
        self._search_bound = _Bound(self._watchdog, max(socket_timeout, search_timeout + 1))
        self._network = _network_settings(url, socket_timeout)
        # Fail fast while the database is away: a request waits `pool_timeout` for a
        # connection at most (then 503), and a failing reconnection gives up after about a
        # connection attempt, so the next request starts a fresh one instead of waiting out an
        # ever longer back-off. Connections are not checked as they are handed out (a round
        # trip each): a dead one fails at its first statement, which `_checked_out` runs again
        # elsewhere.
        self._pool: ConnectionPool[psycopg.Connection[DictRow]] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=pool_timeout,
            reconnect_timeout=connect_seconds,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "connect_timeout": connect_seconds,
                **self._network,
            },
            configure=self._configure,
            name=f"turnkeeper:{self.url}",
            open=False,
        )
        with self._mapped_errors():
            # One plain connection first: an unreachable server is one clear error now,
            # rather than the pool's own retries and warnings until it gives up.
            psycopg.connect(url, connect_timeout=connect_seconds, **self._network).close()
            self._pool.open(wait=True, timeout=connect_seconds)
        try:
            self._migrate(target_version)
        except BaseException:
            self.close()
            raise

    def _configure(self, conn: psycopg.Connection[DictRow]) -> None:
        """What every new connection is told first (one round trip)."""
        conn.adapters.register_loader("jsonb", _JsonbLoader)
        with self._bound.watching(conn):
            conn.execute(f"SET TIME ZONE 'UTC'; SET statement_timeout = {self._statement_ms}")

    # -- connections, transactions and errors -----------------------------------------------

    def _error(self, exc: Exception) -> TurnkeeperError:
        """The turnkeeper error a driver error means (the one place they are translated)."""
        if isinstance(exc, psycopg.errors.UniqueViolation):
            meaning = _CONSTRAINT_MEANINGS.get(exc.diag.constraint_name or "", "duplicate value")
            return Conflict(f"{meaning} ({exc.diag.message_detail or exc})")
        if isinstance(exc, psycopg.DataError):
            return InvalidInput("value", f"PostgreSQL cannot store it: {exc}")
        if isinstance(exc, PoolTimeout):
            return BackendUnavailable(f"no PostgreSQL connection free at {self.url}: {exc}")
        return BackendUnavailable(f"PostgreSQL at {self.url} failed: {exc}")

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        try:
            yield
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._error(exc) from exc

    @contextmanager
    def _checked_out(
        self, first: str, params: Sequence[Any] = (), *, bound: _Bound | None
    ) -> Iterator[tuple[_Statements, Result]]:
        """A pooled connection on which `first` ran, and what `first` left.

        `first` must change nothing (a read, or a transaction's `BEGIN`): when it fails
        because the connection was dead (closed by the server while it idled in the pool), it
        runs again on another connection. The pool drops each dead one, so after as many tries
        as it holds connections it hands out a fresh one; only a database that cannot be
        reached at all (the pool times out) or a failure on a live connection is an error."""
        tries = self._max_size + 1
        while True:
            tries -= 1
            with self._pool.connection() as conn, conn.cursor() as cur:
                tx = _Statements(cur, bound)
                try:
                    result = tx.execute(first, params)
                except psycopg.OperationalError as exc:
                    if tries and tx.found_dead(exc):
                        continue
                    raise
                yield tx, result
                return

    @contextmanager
    def _transaction_on(self, bound: _Bound | None) -> Iterator[_Statements]:
        """One transaction on a pooled connection, each statement bounded by `bound` (None:
        by nothing, not even the statement timeout), begun by `_checked_out`; rolled back on
        any error."""
        with self._mapped_errors(), self._checked_out("BEGIN", bound=bound) as (tx, _):
            if bound is None:
                tx.execute("SET LOCAL statement_timeout = 0")
            try:
                yield tx
            except BaseException:
                tx.roll_back()
                raise
            tx.execute("COMMIT")

    def _transaction(self) -> AbstractContextManager[Executor]:
        return self._transaction_on(self._bound)

    def _maintenance_transaction(self) -> AbstractContextManager[Executor]:
        return self._transaction_on(None)

    def _read(self, query: str, params: Sequence[Any] = ()) -> list[DictRow]:
        with (
            self._mapped_errors(),
            self._checked_out(query, params, bound=self._bound) as (_, rows),
        ):
            return list(rows.fetchall())

    def _read_within(self, seconds: float, query: str, params: Sequence[Any]) -> list[DictRow]:
        """`_read` with a statement timeout of its own (a search's): past it, `SearchTooSlow`."""
        with self._transaction_on(self._search_bound) as tx:
            tx.execute(f"SET LOCAL statement_timeout = {max(1, round(seconds * 1000))}")
            try:
                return list(tx.execute(query, params).fetchall())
            except psycopg.errors.QueryCanceled as exc:
                raise SearchTooSlow(seconds) from exc

    def _migrate(self, target_version: int) -> None:
        if self.schema_version() >= target_version:
            return
        with self._transaction_on(None) as tx:  # a migration may take long: unbounded
            tx.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            self._create_schema(tx.cur)
            current = self._version(tx.cur)  # another process may have migrated meanwhile
            self._apply_migrations(tx, current, target_version)

    def _create_schema(self, cur: Cursor) -> None:
        """Create the schema the URL's `search_path` names when none of it exists yet (a new
        tenant), rather than fail with PostgreSQL's "no schema has been selected to create in"."""
        row = cur.execute(
            "SELECT current_schema() AS current, current_setting('search_path') AS path,"
            " current_user AS role"
        ).fetchone()
        if row is None or row["current"] is not None:
            return
        names = [row["role"] if name == "$user" else name for name in search_path(row["path"])]
        if not names:
            raise InvalidConfig("database_url", "the search_path names no schema to keep tables in")
        try:
            cur.execute(
                psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    psycopg.sql.Identifier(names[0])
                )
            )
        except psycopg.errors.InsufficientPrivilege as exc:
            raise InvalidConfig(
                "database_url",
                f"schema {names[0]!r} (from the search_path) does not exist and"
                f" {row['role']!r} may not create it: {exc.diag.message_primary}",
            ) from None

    @staticmethod
    def _has_migrations_table(cur: Cursor) -> bool:
        # Read the catalog with a fresh MVCC snapshot: `to_regclass` answers from the
        # relation cache, which an advisory lock does not refresh, so a process that waited
        # for another's migration would not see the tables it just committed.
        row = cur.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname ="
            " current_schema() AND tablename = 'schema_migrations') AS present"
        ).fetchone()
        return row is not None and bool(row["present"])

    @staticmethod
    def _version(cur: Cursor) -> int:
        """The latest step recorded (0 in a schema without tables yet)."""
        if not PostgresStore._has_migrations_table(cur):
            return 0
        row = cur.execute("SELECT coalesce(max(version), 0) AS v FROM schema_migrations").fetchone()
        return 0 if row is None else int(row["v"])

    def schema_version(self) -> int:
        with self._transaction_on(self._bound) as tx:
            return self._version(tx.cur)

    def exclusive_lock(self, name: str) -> AbstractContextManager[bool]:
        """See `turnkeeper.storage.locks`: an advisory lock on one pooled connection."""

        def checked_out(first: str, params: Sequence[Any]) -> AbstractContextManager[Any]:
            return self._checked_out(first, params, bound=self._bound)

        return locks.advisory_lock(checked_out, name, mapped_errors=self._mapped_errors)

    def close(self) -> None:
        self._pool.close()
        self._watchdog.close()
