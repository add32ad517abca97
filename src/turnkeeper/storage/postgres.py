"""The shared store: PostgreSQL, for many processes and service replicas on one database.

Same tables and contract as the SQLite store (the queries and row mapping that are the same live
in `storage.sql`); what differs is concurrency. Every append runs in one transaction that first
locks the session row (`SELECT … FOR UPDATE`): appenders to one session queue on that lock, so
each sees the seq its predecessor committed and seqs are gapless and in commit order, while
appenders to different sessions never wait for each other. A retried message id is found by the
locked transaction and returned as stored (idempotent).

Connections come from a `psycopg_pool.ConnectionPool`. Driver errors are mapped once, in
`_mapped_errors`: an unreachable server or an exhausted pool is `BackendUnavailable`, a unique
violation is `Conflict`, a value PostgreSQL cannot store (a NUL character) is `InvalidInput`.

The tables live in the first schema of the connection's `search_path`, so a URL such as
`postgresql://host/db?options=-csearch_path%3Dtenant_a` selects an independent store.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from turnkeeper.errors import (
    BackendUnavailable,
    Conflict,
    InvalidConfig,
    InvalidInput,
    NotFound,
    SessionNotFound,
    TurnkeeperError,
)
from turnkeeper.storage import sql
from turnkeeper.storage.postgres_schema import LATEST_VERSION, MIGRATION_LOCK, MIGRATIONS
from turnkeeper.storage.search_sql import PostgresSearch
from turnkeeper.storage.sql import Dialect
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

try:
    import psycopg
    import psycopg.sql
    from psycopg.rows import DictRow, dict_row
    from psycopg.types.json import Jsonb
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise InvalidConfig(
        "database_url", "PostgreSQL needs its driver: pip install 'turnkeeper[postgres]'"
    ) from exc

Cursor = psycopg.Cursor[DictRow]

_CONSTRAINT_MEANINGS = {
    "sessions_live_key": "the key is held by another live session of the project",
    "sessions_pkey": "a session with this id already exists",
    "messages_session_id_id_key": "a message with this id is already stored in this session",
    "api_keys_pkey": "an API key with this id exists already",
}


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _as_utc(value: Any) -> datetime:
    return _aware(value).astimezone(UTC)


def _same(value: Any) -> Any:
    return value


POSTGRES = Dialect(encode_ts=_aware, decode_ts=_as_utc, encode_json=Jsonb, decode_json=_same)
"""PostgreSQL has `timestamptz` and `jsonb`; the driver converts both, so little is left to do."""


def _pg(query: str) -> str:
    """The shared `?`-placeholder SQL in psycopg's `%s` style."""
    return query.replace("%", "%%").replace("?", "%s")


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


class PostgresStore(sql.SQLReads, PostgresSearch):
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
        target_version: int = LATEST_VERSION,
    ) -> None:
        self.url = redact(url)
        connect_seconds = max(2, round(connect_timeout))  # libpq: whole seconds, 2 at least
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            # Fail fast while the database is away: a request waits `pool_timeout` for a
            # connection at most (then 503), every connection is checked as it is handed out
            # (so one left broken by a restart is replaced, not given to a request), and a
            # failing reconnection gives up after about a connection attempt, so the next
            # request starts a fresh one instead of waiting out an ever longer back-off.
            timeout=pool_timeout,
            check=ConnectionPool.check_connection,
            reconnect_timeout=connect_seconds,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "connect_timeout": connect_seconds,
            },
            configure=self._configure,
            open=False,
            name=f"turnkeeper:{self.url}",
        )
        with self._mapped_errors():
            # One plain connection first: an unreachable server is one clear error now,
            # rather than the pool's own retries and warnings until it gives up.
            psycopg.connect(url, connect_timeout=connect_seconds).close()
            self._pool.open(wait=True, timeout=connect_seconds)
        try:
            self._migrate(target_version)
        except BaseException:
            self._pool.close()
            raise

    @staticmethod
    def _configure(conn: psycopg.Connection[DictRow]) -> None:
        conn.execute("SET TIME ZONE 'UTC'")

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
    def _tx(self) -> Iterator[Cursor]:
        """One transaction on a pooled connection; rolled back on any error."""
        with (
            self._mapped_errors(),
            self._pool.connection() as conn,
            conn.transaction(),
            conn.cursor() as cur,
        ):
            yield cur

    def _read(self, query: str, params: Sequence[Any] = ()) -> list[DictRow]:
        with self._mapped_errors(), self._pool.connection() as conn:
            return conn.execute(_pg(query), params).fetchall()

    @staticmethod
    def _run(cur: Cursor, query: str, params: Sequence[Any] = ()) -> Cursor:
        return cur.execute(_pg(query), params)

    def _migrate(self, target_version: int) -> None:
        if self.schema_version() >= target_version:
            return
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            self._create_schema(cur)
            current = self._version(cur)  # another process may have migrated meanwhile
            for migration in MIGRATIONS:
                if current < migration.version <= target_version:
                    for statement in migration.statements:
                        cur.execute(_pg(statement))
                    cur.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (migration.version, migration.name),
                    )

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
    def _version(cur: Cursor) -> int:
        # Read the catalog with a fresh MVCC snapshot: `to_regclass` answers from the
        # relation cache, which an advisory lock does not refresh, so a process that waited
        # for another's migration would not see the tables it just committed.
        row = cur.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname ="
            " current_schema() AND tablename = 'schema_migrations') AS present"
        ).fetchone()
        if row is None or not row["present"]:
            return 0
        row = cur.execute("SELECT coalesce(max(version), 0) AS v FROM schema_migrations").fetchone()
        return int(row["v"]) if row else 0

    def schema_version(self) -> int:
        with self._mapped_errors(), self._pool.connection() as conn, conn.cursor() as cur:
            return self._version(cur)

    @contextmanager
    def advisory_lock(self, key: int) -> Iterator[bool]:
        """Hold a database-wide advisory lock while the block runs, if no one else holds it.

        Yields whether it was acquired; never waits. The lock belongs to a pooled connection
        kept for the block, so a process that dies releases it with its connection.
        """
        with self._mapped_errors(), self._pool.connection() as conn:
            row = conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (key,)).fetchone()
            acquired = bool(row and row["got"])
            try:
                yield acquired
            finally:
                if acquired:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def close(self) -> None:
        self._pool.close()

    def meta(self, name: str, default: str) -> str:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO meta (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                (name, default),
            )
            row = cur.execute("SELECT value FROM meta WHERE name = %s", (name,)).fetchone()
        assert row is not None
        return str(row["value"])

    # -- sessions ---------------------------------------------------------------------------

    def _locked_session(self, cur: Cursor, session_id: str) -> Session:
        """The session row, locked until the transaction ends (writers to it queue here)."""
        row = self._run(cur, sql.SELECT_SESSION + " FOR UPDATE", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return sql.session_from_row(row, POSTGRES)

    def _returning_session(self, cur: Cursor, query: str, params: Sequence[Any]) -> Session:
        row = self._run(cur, query, params).fetchone()
        if row is None:
            raise SessionNotFound(params[-1])
        return sql.session_from_row(row, POSTGRES)

    def _insert_session(
        self, cur: Cursor, new: NewSession, now: datetime, *, if_key_free: bool
    ) -> Session | None:
        query = sql.INSERT_SESSION
        if if_key_free:
            query += (
                " ON CONFLICT (project, key) WHERE status = 'active' AND key IS NOT NULL DO NOTHING"
            )
        session_id = str(uuid.uuid4())
        row = self._run(
            cur,
            query + f" RETURNING {sql.SESSION_COLUMNS}",
            sql.new_session_params(session_id, new, now, POSTGRES),
        ).fetchone()
        return None if row is None else sql.session_from_row(row, POSTGRES)

    def _release_stale_key(self, cur: Cursor, new: NewSession, now: datetime) -> None:
        self._run(cur, sql.RELEASE_STALE_KEY, (now, new.project, new.key, now))

    def create_session(self, new: NewSession, *, now: datetime) -> Session:
        with self._tx() as cur:
            if new.key is not None:
                self._release_stale_key(cur, new, now)
            created = self._insert_session(cur, new, now, if_key_free=False)
        assert created is not None
        return created

    def get_or_create_session(self, new: NewSession, *, now: datetime) -> tuple[Session, bool]:
        if new.key is None:
            raise ValueError("get_or_create_session needs a key")
        with self._tx() as cur:
            self._release_stale_key(cur, new, now)
            # ON CONFLICT waits for a concurrent creator to commit, then yields to it; the
            # SELECT (a new snapshot under READ COMMITTED) then sees its session.
            created = self._insert_session(cur, new, now, if_key_free=True)
            if created is not None:
                return created, True
            row = self._run(cur, sql.LIVE_BY_KEY, (new.project, new.key)).fetchone()
        if row is None:  # pragma: no cover - the holder was archived in between; rare
            raise Conflict(f"key {new.key!r} changed hands while being looked up; retry")
        return sql.session_from_row(row, POSTGRES), False

    def update_session(self, session_id: str, patch: SessionPatch, *, now: datetime) -> Session:
        query, params = sql.update_session_query(session_id, patch.changes(), now, POSTGRES)
        with self._tx() as cur:
            return self._returning_session(cur, query, params)

    def set_status(self, session_id: str, status: SessionStatus, *, now: datetime) -> Session:
        with self._tx() as cur:
            return self._returning_session(cur, sql.SET_STATUS, (status.value, now, session_id))

    def reset_session(
        self, session_id: str, *, keep_system_message: bool, now: datetime
    ) -> Session:
        with self._tx() as cur:
            self._locked_session(cur, session_id)
            keep = sql.KEEP_SYSTEM_MESSAGE if keep_system_message else ""
            self._run(cur, sql.RESET_MESSAGES + keep, (session_id,))
            self._run(cur, sql.RESET_SUMMARIES, (session_id,))
            self._run(cur, sql.RESET_AGENT_POSITIONS, (session_id,))
            self._run(cur, sql.RESET_TRACES, (session_id,))
            return self._returning_session(cur, sql.RECOMPUTE_TOTALS, (now, session_id))

    def delete_session(self, session_id: str) -> None:
        with self._tx() as cur:
            if not self._run(cur, sql.DELETE_SESSION, (session_id,)).rowcount:
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
        with self._tx() as cur:
            session = self._locked_session(cur, session_id)
            rows = self._run(
                cur, sql.SELECT_MESSAGES_BY_ID + sql.placeholders(len(ids)), [session_id, *ids]
            )
            stored = {row["id"]: sql.message_from_row(row, POSTGRES) for row in rows}
            plan = sql.plan_append(
                session, drafts, stored, expected_last_seq=expected_last_seq, now=now
            )
            if plan.added:
                cur.executemany(
                    _pg(sql.INSERT_MESSAGE),
                    [sql.message_params(session_id, m.seq, m, POSTGRES) for m in plan.added],
                )
                self._run(cur, sql.ADD_TOTALS, plan.totals_params(session_id, now, POSTGRES))
                self._traces(cur, session_id, plan.traces)
        return plan.result

    def _traces(self, cur: Cursor, session_id: str, traces: Sequence[tuple[int, str]]) -> None:
        if traces:
            cur.executemany(_pg(sql.INSERT_TRACE), sql.trace_params(session_id, traces))

    # -- agent states and summary checkpoints -----------------------------------------------

    def _bump_version(self, cur: Cursor, session_id: str) -> None:
        """Lock the session row (queueing behind appends to it) and move its version."""
        if not self._run(cur, sql.BUMP_VERSION, (session_id,)).rowcount:
            raise SessionNotFound(session_id)

    def update_agent_state(
        self, session_id: str, agent: str, update: AgentStateUpdate, *, now: datetime
    ) -> AgentState:
        with self._tx() as cur:
            self._bump_version(cur, session_id)
            params = sql.agent_state_params(session_id, agent, update, now, POSTGRES)
            row = self._run(cur, sql.UPSERT_AGENT_STATE, params).fetchone()
        assert row is not None
        return sql.agent_state_from_row(row, POSTGRES)

    def save_summary(self, checkpoint: SummaryCheckpoint) -> SummaryCheckpoint:
        key = (checkpoint.session_id, checkpoint.covers_to_seq)
        with self._tx() as cur:
            # Locking the row first serializes concurrent savers of one session, so the loser
            # of a race sees the winner's checkpoint rather than an error.
            self._locked_session(cur, checkpoint.session_id)
            if self._run(
                cur, sql.INSERT_SUMMARY, sql.summary_params(checkpoint, POSTGRES)
            ).rowcount:
                self._bump_version(cur, checkpoint.session_id)
            row = self._run(cur, sql.SELECT_SUMMARY, key).fetchone()
        assert row is not None
        return sql.summary_from_row(row, POSTGRES)

    # -- lifecycle and statistics -----------------------------------------------------------

    def expire_sessions(
        self, *, now: datetime, delete: bool = False, grace: timedelta = timedelta(0)
    ) -> ExpiryReport:
        with self._tx() as cur:
            expired = self._run(cur, sql.EXPIRE_DUE, (now, now)).fetchall()
            deleted: list[DictRow] = []
            if delete:
                deleted = self._run(cur, sql.DELETE_EXPIRED, (now - grace,)).fetchall()
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
        with self._tx() as cur:
            self._run(
                cur,
                sql.IMPORT_SESSION + " ON CONFLICT DO NOTHING",
                sql.imported_session_params(session, POSTGRES),
            )
            if self._run(cur, sql.SELECT_SESSION + " FOR UPDATE", (session.id,)).fetchone() is None:
                raise Conflict(
                    f"cannot import session {session.id}: key {session.key!r} is held by"
                    f" another live session of project {session.project!r}"
                )
            added = 0
            if messages:
                cur.executemany(
                    _pg(sql.INSERT_MESSAGE + " ON CONFLICT DO NOTHING"),
                    [sql.message_params(session.id, m.seq, m, POSTGRES) for m in messages],
                )
                added = max(cur.rowcount, 0)
            self._traces(cur, session.id, traces)
            if added:
                self._run(cur, sql.RECOMPUTE_TOTALS, (session.updated_at, session.id))
                self._run(
                    cur, sql.RESTORE_IMPORTED, (session.updated_at, session.version, session.id)
                )
        return added

    # -- API keys ---------------------------------------------------------------------------

    def create_api_key(self, key: ApiKey, *, secret_hash: str) -> None:
        with self._tx() as cur:
            self._run(cur, sql.INSERT_API_KEY, sql.api_key_params(key, secret_hash, POSTGRES))

    def revoke_api_key(self, key_id: str, *, now: datetime) -> ApiKey:
        with self._tx() as cur:
            row = self._run(cur, sql.REVOKE_API_KEY, (now, key_id)).fetchone()
        if row is None:
            raise NotFound(f"API key {key_id!r} not found")
        return sql.api_key_from_row(row, POSTGRES)

    def delete_last_message(self, session_id: str, *, now: datetime) -> Message | None:
        with self._tx() as cur:
            self._locked_session(cur, session_id)
            row = self._run(cur, sql.DELETE_LAST_MESSAGE, (session_id, session_id)).fetchone()
            if row is None:
                return None
            deleted = sql.message_from_row(row, POSTGRES)
            for query, params in sql.forget_from_seq(session_id, deleted.seq):
                self._run(cur, query, params)
            self._returning_session(cur, sql.RECOMPUTE_TOTALS, (now, session_id))
        return deleted
