"""The one SQL store: every read, write and migration of the `Store` contract, written once
for SQLite and PostgreSQL.

A driver (`sql/sqlite.py`, `sql/postgres.py`) supplies only what its connection makes
different, as hooks:

- `_read()`: one query outside a write transaction, rows addressable by column name;
- `_transaction()`: one write transaction, yielding an `Executor` that takes the shared
  `?`-placeholder SQL (PostgreSQL's translates it to `%s`), rolls back on any error and maps
  driver errors to turnkeeper's at its boundary (the one place each driver translates them);
- `_maintenance_transaction()`: the same, for work that may rightly run long (expiry
  sweeps); a driver that bounds its statements' time lifts the bound there;
- `_recorded()`: what a driver notes after a migration step besides `schema_migrations`;
- `dialect` (`sql/dialect.py`): how times and JSON cross the boundary, what locks a selected
  row (` FOR UPDATE` on PostgreSQL; nothing on SQLite, whose `BEGIN IMMEDIATE` already holds
  the database's one write lock) and how an append claims its seqs.

The statements are in `queries`, the row mapping in `rows`, the search in `search` (one class
per dialect's full-text index), the schema history in `schema`. Unique violations surface as
`Conflict` from the transaction; where the contract names a clearer reason (a key held by a
live session, an API key id taken) the write says so here.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from turnkeeper.errors import Conflict, NotFound, SessionErased, SessionNotFound, TurnkeeperError
from turnkeeper.storage.appends import plan_append
from turnkeeper.storage.base import Store, WithoutVersion, check_fork
from turnkeeper.storage.codec import to_ts
from turnkeeper.storage.sql import queries
from turnkeeper.storage.sql.dialect import Dialect, Row
from turnkeeper.storage.sql.rows import (
    agent_state_from_row,
    agent_state_params,
    api_key_from_row,
    api_key_params,
    append_target_from_row,
    branch_from_row,
    claim_params,
    imported_session_params,
    message_from_row,
    message_rows,
    new_session_params,
    page_from_rows,
    project_stats_from_rows,
    session_from_row,
    session_stats_from_rows,
    summary_from_row,
    summary_params,
    totals_params,
    trace_params,
    turn_attempt_from_row,
)
from turnkeeper.storage.sql.schema import MIGRATIONS
from turnkeeper.types import (
    AgentState,
    AgentStateUpdate,
    ApiKey,
    Branch,
    ErasedSession,
    ExpiryReport,
    LegalHold,
    Message,
    MessageDraft,
    MessageQuery,
    NewSession,
    Page,
    ProjectStats,
    SeqRanges,
    Session,
    SessionFilter,
    SessionPatch,
    SessionStats,
    SessionStatus,
    SummaryCheckpoint,
    Tombstone,
    TurnAttempt,
)


class Result(Protocol):
    """What a statement leaves behind (a `sqlite3.Cursor`, a psycopg cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Sequence[Any]: ...


class Executor(Protocol):
    """Runs the shared `?`-placeholder SQL inside one transaction."""

    def execute(self, query: str, params: Sequence[Any] = (), /) -> Result: ...

    def executemany(self, query: str, params: Iterable[Sequence[Any]], /) -> Result: ...


class _NotAllNew(Exception):
    """Raised inside `_append_new`'s transaction to roll it back: the append is not the common
    case that path writes, and `_append_deciding` takes it."""


class SQLStore:
    """`Store` over a driver's hooks (see the module docstring); a driver adds its search
    (`sql/search.py`) and locks (`storage/locks.py`)."""

    dialect: Dialect

    def _read(self, query: str, params: Sequence[Any] = ()) -> Sequence[Row]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Executor]:
        raise NotImplementedError

    def _maintenance_transaction(self) -> AbstractContextManager[Executor]:
        """A transaction for work that may rightly run long (an expiry sweep over many
        sessions): a backend that bounds each statement's time lifts the bound here."""
        return self._transaction()

    def _recorded(self, tx: Executor, version: int) -> None:
        """Called after migration step `version` is recorded; nothing by default."""

    # -- migrations -------------------------------------------------------------------------

    def _apply_migrations(self, tx: Executor, current: int, target: int) -> None:
        """Run, in order, the steps after `current` up to `target`, recording each."""
        for migration in MIGRATIONS:
            if current < migration.version <= target:
                for statement in migration.statements(self.dialect.name):
                    tx.execute(statement)
                tx.execute(
                    queries.RECORD_MIGRATION,
                    (migration.version, migration.name, self.dialect.encode_ts(datetime.now(UTC))),
                )
                self._recorded(tx, migration.version)

    def meta(self, name: str, default: str) -> str:
        # Read first: opening a store happens per process or request, and a write
        # transaction there would cost a commit (an fsync) every time.
        rows = self._read(queries.SELECT_META, (name,))
        if rows:
            return str(rows[0]["value"])
        with self._transaction() as tx:
            tx.execute(queries.INSERT_META, (name, default))
            row = tx.execute(queries.SELECT_META, (name,)).fetchone()
        return str(row["value"])

    # -- reads ------------------------------------------------------------------------------

    def get_session(self, session_id: str) -> Session:
        rows = self._read(queries.SELECT_SESSION, (session_id,))
        if not rows:
            raise self._gone(session_id)
        return session_from_row(rows[0], self.dialect)

    def find_session_by_key(self, project: str, key: str) -> Session:
        rows = self._read(queries.FIND_BY_KEY, (project, key))
        if not rows:
            raise SessionNotFound(key, project)
        return session_from_row(rows[0], self.dialect)

    def lookup_session(self, ref: str, project: str) -> Session:
        rows = self._read(queries.LOOKUP_SESSION, (ref, project, ref, ref))
        if not rows:
            raise self._gone(ref, project=project)
        return session_from_row(rows[0], self.dialect)

    def list_sessions(
        self, where: SessionFilter, *, limit: int, cursor: str | None = None
    ) -> Page[Session]:
        query, params = queries.list_sessions_query(where, limit, cursor, self.dialect)
        return page_from_rows(self._read(query, params), limit, self.dialect)

    def read_messages(self, session_id: str, query: MessageQuery = MessageQuery()) -> list[Message]:
        return self._page(session_id, query, with_version=False)[0]

    def read_messages_versioned(
        self, session_id: str, query: MessageQuery = MessageQuery()
    ) -> tuple[list[Message], int | None]:
        return self._page(session_id, query, with_version=True)

    def _page(
        self, session_id: str, query: MessageQuery, *, with_version: bool
    ) -> tuple[list[Message], int | None]:
        """The page, and with `with_version` the session's version read in the same statement
        (None for an empty page, or without it)."""
        rows = self._read(*queries.read_messages_query(session_id, query, with_version))
        version = int(rows[0]["session_version"]) if rows and with_version else None
        return [message_from_row(row, self.dialect) for row in rows], version

    def find_messages(self, session_id: str, ids: Sequence[str]) -> dict[str, Message]:
        if not ids:
            return {}
        rows = self._read(
            queries.SELECT_MESSAGES_BY_ID + queries.placeholders(len(ids)), [session_id, *ids]
        )
        return {row["id"]: message_from_row(row, self.dialect) for row in rows}

    def count_messages(
        self, session_id: str, *, before_seq: int | None = None, include_internal: bool = True
    ) -> int:
        query, params = queries.count_messages_query(
            session_id, before_seq=before_seq, include_internal=include_internal
        )
        return int(self._read(query, params)[0]["n"])

    def message_seq_runs(
        self, session_id: str, *, from_seq: int, to_seq: int, include_internal: bool = True
    ) -> SeqRanges:
        query, params = queries.seq_runs_query(
            session_id, from_seq=from_seq, to_seq=to_seq, include_internal=include_internal
        )
        rows = self._read(query, params)
        return SeqRanges.from_runs((row["run_first"], row["run_last"]) for row in rows)

    def session_stats(self, session_id: str) -> SessionStats:
        session = self.get_session(session_id)
        rows = self._read(queries.SESSION_MESSAGE_STATS, (session_id,))
        return session_stats_from_rows(session, rows, self.dialect)

    def project_stats(self, project: str | None = None) -> list[ProjectStats]:
        return project_stats_from_rows(self._read(*queries.project_stats_query(project)))

    def find_api_key(self, key_id: str) -> tuple[ApiKey, str] | None:
        rows = self._read(
            f"SELECT {queries.API_KEY_COLUMNS}, secret_hash FROM api_keys WHERE id = ?", (key_id,)
        )
        if not rows:
            return None
        return api_key_from_row(rows[0], self.dialect), str(rows[0]["secret_hash"])

    def list_api_keys(self, project: str | None = None) -> list[ApiKey]:
        where, params = ("WHERE project = ?", (project,)) if project is not None else ("", ())
        query = f"SELECT {queries.API_KEY_COLUMNS} FROM api_keys {where} ORDER BY created_at, id"
        return [api_key_from_row(row, self.dialect) for row in self._read(query, params)]

    def get_agent_state(self, session_id: str, agent: str) -> AgentState | None:
        rows = self._read(
            f"SELECT {queries.AGENT_STATE_COLUMNS} FROM agent_states WHERE session_id = ? AND agent = ?",
            (session_id, agent),
        )
        return agent_state_from_row(rows[0], self.dialect) if rows else None

    def list_agent_states(self, session_id: str) -> list[AgentState]:
        query = f"SELECT {queries.AGENT_STATE_COLUMNS} FROM agent_states WHERE session_id = ? ORDER BY agent"
        return [agent_state_from_row(row, self.dialect) for row in self._read(query, (session_id,))]

    def latest_summary(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> SummaryCheckpoint | None:
        query = f"SELECT {queries.SUMMARY_COLUMNS} FROM summaries WHERE session_id = ?"
        params: list[Any] = [session_id]
        if upto_seq is not None:
            query += " AND covers_to_seq <= ?"
            params.append(upto_seq)
        rows = self._read(query + " ORDER BY covers_to_seq DESC LIMIT 1", params)
        return summary_from_row(rows[0], self.dialect) if rows else None

    def list_summaries(self, session_id: str) -> list[SummaryCheckpoint]:
        query = f"SELECT {queries.SUMMARY_COLUMNS} FROM summaries WHERE session_id = ? ORDER BY covers_to_seq"
        return [summary_from_row(row, self.dialect) for row in self._read(query, (session_id,))]

    def get_turn_attempt(self, session_id: str, turn_id: str) -> TurnAttempt | None:
        rows = self._read(queries.SELECT_TURN_ATTEMPT, (session_id, turn_id))
        return turn_attempt_from_row(rows[0], self.dialect) if rows else None

    def read_traces(self, session_id: str, *, upto_seq: int, limit: int) -> list[tuple[int, str]]:
        query = (
            "SELECT seq, data FROM turn_traces WHERE session_id = ? AND seq <= ?"
            " ORDER BY seq DESC LIMIT ?"
        )
        rows = self._read(query, (session_id, upto_seq, limit))
        return [(int(row["seq"]), str(row["data"])) for row in rows]

    # -- sessions ---------------------------------------------------------------------------

    def _locked_session(self, tx: Executor, session_id: str) -> Session:
        """The session row, locked until the transaction ends (writers to it queue here)."""
        row = tx.execute(queries.SELECT_SESSION + self.dialect.row_lock, (session_id,)).fetchone()
        if row is None:
            raise self._gone(session_id, tx)
        return session_from_row(row, self.dialect)

    def _returning_session(self, tx: Executor, query: str, params: Sequence[Any]) -> Session:
        row = tx.execute(query, params).fetchone()
        if row is None:
            raise self._gone(params[-1], tx)
        return session_from_row(row, self.dialect)

    def _release_stale_key(self, tx: Executor, new: NewSession, now: datetime) -> None:
        """A live key holder past its expiry is marked expired so the key can be reused."""
        at = self.dialect.encode_ts(now)
        tx.execute(queries.RELEASE_STALE_KEY, (at, new.project, new.key, at))

    def _insert_session(
        self, tx: Executor, new: NewSession, now: datetime, *, if_key_free: bool
    ) -> Session | None:
        query = queries.INSERT_SESSION_IF_KEY_FREE if if_key_free else queries.INSERT_SESSION
        params = new_session_params(str(uuid.uuid4()), new, now, self.dialect)
        row = tx.execute(query + f" RETURNING {queries.SESSION_COLUMNS}", params).fetchone()
        return None if row is None else session_from_row(row, self.dialect)

    def create_session(self, new: NewSession, *, now: datetime) -> Session:
        try:
            with self._transaction() as tx:
                if new.key is not None:
                    self._release_stale_key(tx, new, now)
                created = self._insert_session(tx, new, now, if_key_free=False)
        except Conflict as exc:
            raise Conflict(
                f"key {new.key!r} is held by a live session of project {new.project!r}"
            ) from exc
        assert created is not None
        return created

    def get_or_create_session(self, new: NewSession, *, now: datetime) -> tuple[Session, bool]:
        if new.key is None:
            raise ValueError("get_or_create_session needs a key")
        with self._transaction() as tx:
            self._release_stale_key(tx, new, now)
            # On PostgreSQL ON CONFLICT waits for a concurrent creator to commit, then yields
            # to it; the SELECT (a new snapshot under READ COMMITTED) then sees its session.
            created = self._insert_session(tx, new, now, if_key_free=True)
            if created is not None:
                return created, True
            row = tx.execute(queries.LIVE_BY_KEY, (new.project, new.key)).fetchone()
        if row is None:  # pragma: no cover - the holder was archived in between; rare
            raise Conflict(f"key {new.key!r} changed hands while being looked up; retry")
        return session_from_row(row, self.dialect), False

    def update_session(self, session_id: str, patch: SessionPatch, *, now: datetime) -> Session:
        query, params = queries.update_session_query(session_id, patch.changes(), now, self.dialect)
        with self._transaction() as tx:
            return self._returning_session(tx, query, params)

    def set_status(self, session_id: str, status: SessionStatus, *, now: datetime) -> Session:
        current: Session | None = None
        try:
            with self._transaction() as tx:
                current = self._locked_session(tx, session_id)
                params = (status.value, self.dialect.encode_ts(now), session_id)
                return self._returning_session(tx, queries.SET_STATUS, params)
        except Conflict as exc:
            if current is None:
                raise
            raise Conflict(
                f"key {current.key!r} is already held by another live session"
                f" of project {current.project!r}"
            ) from exc

    def reset_session(
        self, session_id: str, *, keep_system_message: bool, now: datetime
    ) -> Session:
        with self._transaction() as tx:
            self._locked_session(tx, session_id)
            keep = queries.KEEP_SYSTEM_MESSAGE if keep_system_message else ""
            tx.execute(queries.RESET_MESSAGES + keep, (session_id,))
            tx.execute(queries.RESET_SUMMARIES, (session_id,))
            tx.execute(queries.RESET_AGENT_POSITIONS, (session_id,))
            tx.execute(queries.RESET_TRACES, (session_id,))
            params = (self.dialect.encode_ts(now), session_id)
            return self._returning_session(tx, queries.RECOMPUTE_TOTALS, params)

    def delete_session(self, session_id: str) -> None:
        with self._transaction() as tx:
            if not tx.execute(queries.DELETE_SESSION, (session_id,)).rowcount:
                raise self._gone(session_id, tx)

    # -- messages ---------------------------------------------------------------------------

    append_messages = WithoutVersion(Store.append_messages)

    def append_messages_versioned(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None = None,
        now: datetime,
    ) -> tuple[list[Message], int | None]:
        if not drafts:
            return [], None
        try:
            return self._append_new(
                session_id, drafts, expected_last_seq=expected_last_seq, now=now
            )
        except _NotAllNew:
            pass  # rolled back: nothing of the attempt is left
        return self._append_deciding(
            session_id, drafts, expected_last_seq=expected_last_seq, now=now
        )

    def _append_new(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None,
        now: datetime,
    ) -> tuple[list[Message], int]:
        """The common append — every draft new, the session open to it — without looking the
        drafts' ids up first: the rows are inserted with `ON CONFLICT DO NOTHING` and counted.

        Anything else (an unknown session, a refusal, an id already stored: a retry or a
        conflict) raises `_NotAllNew` inside the transaction, which rolls it back whole, and
        `_append_deciding` decides the append from scratch; so every outcome is that path's.
        Where the dialect `claims_by_update`, one statement locks the row, takes the seqs and
        adds the totals (4 round trips with BEGIN and COMMIT, rather than 6)."""
        d = self.dialect
        with self._transaction() as tx:
            if d.claims_by_update:
                params = claim_params(drafts, session_id, now, d)
                row = tx.execute(queries.CLAIM_SEQS, params).fetchone()
            else:
                row = tx.execute(
                    queries.SELECT_APPEND_TARGET + d.row_lock, (session_id,)
                ).fetchone()
            if row is None:
                raise _NotAllNew
            target = append_target_from_row(row, d)
            if d.claims_by_update:  # the seqs and the version before the claim
                target = dataclasses.replace(
                    target, last_seq=target.last_seq - len(drafts), version=target.version - 1
                )
            try:
                plan = plan_append(target, drafts, {}, expected_last_seq=expected_last_seq, now=now)
            except TurnkeeperError as exc:  # maybe no refusal at all if some are retries
                raise _NotAllNew from exc
            rows = message_rows(session_id, plan.added, d)
            if self._insert_messages(tx, rows, suffix=" ON CONFLICT DO NOTHING") != len(rows):
                raise _NotAllNew
            if not d.claims_by_update:
                tx.execute(queries.ADD_TOTALS, totals_params(plan, session_id, now, d))
            if plan.traces:
                tx.executemany(queries.INSERT_TRACE, trace_params(session_id, plan.traces))
        return plan.result, target.version + 1

    def _append_deciding(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None,
        now: datetime,
    ) -> tuple[list[Message], int | None]:
        """Any append: the drafts' stored ids are looked up under the session's row lock and
        `plan_append` decides what is new, what is a retry and what is refused."""
        d = self.dialect
        ids = list(dict.fromkeys(draft.id for draft in drafts))
        with self._transaction() as tx:
            row = tx.execute(queries.SELECT_APPEND_TARGET + d.row_lock, (session_id,)).fetchone()
            if row is None:
                raise self._gone(session_id, tx)
            target = append_target_from_row(row, d)
            stored = self._stored_messages(tx, session_id, ids)
            plan = plan_append(target, drafts, stored, expected_last_seq=expected_last_seq, now=now)
            if not plan.added:
                return plan.result, None
            self._insert_messages(tx, message_rows(session_id, plan.added, d))
            tx.execute(queries.ADD_TOTALS, totals_params(plan, session_id, now, d))
            if plan.traces:
                tx.executemany(queries.INSERT_TRACE, trace_params(session_id, plan.traces))
        return plan.result, target.version + 1

    def _stored_messages(
        self, tx: Executor, session_id: str, ids: Sequence[str]
    ) -> dict[str, Message]:
        """The messages of the session with these ids, by id (`queries.IDS_PER_SELECT` a query)."""
        stored = {}
        for start in range(0, len(ids), queries.IDS_PER_SELECT):
            part = ids[start : start + queries.IDS_PER_SELECT]
            query = queries.SELECT_MESSAGES_BY_ID + queries.placeholders(len(part))
            for row in tx.execute(query, [session_id, *part]).fetchall():
                stored[row["id"]] = message_from_row(row, self.dialect)
        return stored

    @staticmethod
    def _insert_messages(tx: Executor, rows: Sequence[Sequence[Any]], *, suffix: str = "") -> int:
        """Insert message rows (`message_rows`) in statements of up to
        `queries.ROWS_PER_INSERT` rows each (see `queries.insert_messages_query` for why not
        `executemany`); how many rows were inserted."""
        if len(rows) == 1:  # a single append: no chunks, no flattening
            return max(tx.execute(queries.insert_messages_query(1) + suffix, rows[0]).rowcount, 0)
        added = 0
        for start in range(0, len(rows), queries.ROWS_PER_INSERT):
            chunk = rows[start : start + queries.ROWS_PER_INSERT]
            query = queries.insert_messages_query(len(chunk)) + suffix
            added += max(tx.execute(query, [value for row in chunk for value in row]).rowcount, 0)
        return added

    # -- agent states and summary checkpoints -----------------------------------------------

    def _bump_version(self, tx: Executor, session_id: str) -> None:
        """Lock the session row (queueing behind appends to it) and move its version."""
        if not tx.execute(queries.BUMP_VERSION, (session_id,)).rowcount:
            raise self._gone(session_id, tx)

    def update_agent_state(
        self, session_id: str, agent: str, update: AgentStateUpdate, *, now: datetime
    ) -> AgentState:
        with self._transaction() as tx:
            self._bump_version(tx, session_id)
            params = agent_state_params(session_id, agent, update, now, self.dialect)
            row = tx.execute(queries.UPSERT_AGENT_STATE, params).fetchone()
        return agent_state_from_row(row, self.dialect)

    def save_summary(self, checkpoint: SummaryCheckpoint) -> SummaryCheckpoint:
        key = (checkpoint.session_id, checkpoint.covers_to_seq)
        with self._transaction() as tx:
            # Locking the row first serializes concurrent savers of one session, so the loser
            # of a race sees the winner's checkpoint rather than an error.
            self._locked_session(tx, checkpoint.session_id)
            params = summary_params(checkpoint, self.dialect)
            if tx.execute(queries.INSERT_SUMMARY, params).rowcount:
                self._bump_version(tx, checkpoint.session_id)
            row = tx.execute(queries.SELECT_SUMMARY, key).fetchone()
        return summary_from_row(row, self.dialect)

    # -- turn attempts ----------------------------------------------------------------------

    def begin_turn_attempt(
        self,
        session_id: str,
        turn_id: str,
        attempt_id: str,
        *,
        now: datetime,
        lease_until: datetime,
    ) -> TurnAttempt:
        d = self.dialect
        params = (turn_id, attempt_id, d.encode_ts(lease_until), session_id, d.encode_ts(now))
        with self._transaction() as tx:
            tx.execute(queries.BEGIN_TURN_ATTEMPT, params)
            row = tx.execute(queries.SELECT_TURN_ATTEMPT, (session_id, turn_id)).fetchone()
        if row is None:
            raise self._gone(session_id)
        return turn_attempt_from_row(row, d)

    def renew_turn_attempt(
        self, session_id: str, turn_id: str, attempt_id: str, *, lease_until: datetime
    ) -> bool:
        params = (self.dialect.encode_ts(lease_until), session_id, turn_id, attempt_id)
        with self._transaction() as tx:
            return tx.execute(queries.RENEW_TURN_ATTEMPT, params).rowcount > 0

    def end_turn_attempt(
        self, session_id: str, turn_id: str, attempt_id: str, *, error: str | None = None
    ) -> None:
        ids = (session_id, turn_id, attempt_id)
        with self._transaction() as tx:
            if error is None:
                tx.execute(queries.DELETE_TURN_ATTEMPT, ids)
            else:
                tx.execute(queries.FAIL_TURN_ATTEMPT, (error, *ids))

    # -- lifecycle --------------------------------------------------------------------------

    def expire_sessions(
        self, *, now: datetime, delete: bool = False, grace: timedelta = timedelta(0)
    ) -> ExpiryReport:
        at = self.dialect.encode_ts(now)
        with self._maintenance_transaction() as tx:
            expired = tx.execute(queries.EXPIRE_DUE, (at, at)).fetchall()
            deleted: Sequence[Any] = []
            if delete:
                past_grace = self.dialect.encode_ts(now - grace)
                deleted = tx.execute(queries.DELETE_EXPIRED, (past_grace,)).fetchall()
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
        d = self.dialect
        with self._transaction() as tx:
            if erased := self._tombstones([session.id], tx):
                raise _erased(erased[session.id])
            tx.execute(
                queries.IMPORT_SESSION + " ON CONFLICT DO NOTHING",
                imported_session_params(session, d),
            )
            if (
                tx.execute(queries.SELECT_SESSION + d.row_lock, (session.id,)).fetchone() is None
            ):  # another live session holds the key
                raise Conflict(
                    f"cannot import session {session.id}: key {session.key!r} is held by"
                    f" another live session of project {session.project!r}"
                )
            added = self._insert_messages(
                tx, message_rows(session.id, messages, d), suffix=" ON CONFLICT DO NOTHING"
            )
            if traces:
                tx.executemany(queries.INSERT_TRACE, trace_params(session.id, traces))
            if added:
                at = d.encode_ts(session.updated_at)
                tx.execute(queries.RECOMPUTE_TOTALS, (at, session.id)).fetchall()
                tx.execute(queries.RESTORE_IMPORTED, (at, session.version, session.id))
        return added

    # -- branches ---------------------------------------------------------------------------

    def fork_session(
        self, source_id: str, at_seq: int, new: NewSession, *, now: datetime
    ) -> Session:
        checked = False
        try:
            with self._transaction() as tx:
                # The source's row lock holds appends to it back while its prefix is copied.
                check_fork(self._locked_session(tx, source_id), at_seq, new, now)
                checked = True
                if new.key is not None:
                    self._release_stale_key(tx, new, now)
                branch = self._insert_session(tx, new, now, if_key_free=False)
                assert branch is not None
                for query, params in queries.fork_copies(branch.id, source_id, at_seq):
                    tx.execute(query, params)
                at = self.dialect.encode_ts(now)
                tx.execute(queries.INSERT_FORK, (branch.id, source_id, at_seq, at))
                return self._returning_session(tx, queries.RECOMPUTE_TOTALS, (at, branch.id))
        except Conflict as exc:
            if not checked:  # the source's own state, said by `check_fork`
                raise
            raise Conflict(
                f"key {new.key!r} is held by a live session of project {new.project!r}"
            ) from exc

    def list_branches(self, session_id: str) -> list[Branch]:
        self.get_session(session_id)
        rows = self._read(queries.SELECT_BRANCHES, (session_id,))
        return [branch_from_row(row, self.dialect) for row in rows]

    def fork_origin(self, session_id: str) -> Branch | None:
        self.get_session(session_id)
        rows = self._read(queries.SELECT_FORK_ORIGIN, (session_id,))
        return branch_from_row(rows[0], self.dialect) if rows else None

    # -- API keys ---------------------------------------------------------------------------

    def create_api_key(self, key: ApiKey, *, secret_hash: str) -> None:
        try:
            with self._transaction() as tx:
                tx.execute(queries.INSERT_API_KEY, api_key_params(key, secret_hash, self.dialect))
        except Conflict as exc:
            raise Conflict(f"API key {key.id!r} exists already") from exc

    def revoke_api_key(self, key_id: str, *, now: datetime) -> ApiKey:
        with self._transaction() as tx:
            row = tx.execute(
                queries.REVOKE_API_KEY, (self.dialect.encode_ts(now), key_id)
            ).fetchone()
        if row is None:
            raise NotFound(f"API key {key_id!r} not found")
        return api_key_from_row(row, self.dialect)

    def move_cut_point(self, session_id: str, cut_seq: int, *, version: int) -> bool:
        with self._transaction() as tx:
            return bool(tx.execute(queries.MOVE_CUT_POINT, (cut_seq, session_id, version)).rowcount)

    def delete_last_message(self, session_id: str, *, now: datetime) -> Message | None:
        with self._transaction() as tx:
            self._locked_session(tx, session_id)
            row = tx.execute(queries.DELETE_LAST_MESSAGE, (session_id, session_id)).fetchone()
            if row is None:
                return None
            deleted = message_from_row(row, self.dialect)
            for query, params in queries.forget_from_seq(session_id, deleted.seq):
                tx.execute(query, params)
            params = (self.dialect.encode_ts(now), session_id)
            self._returning_session(tx, queries.RECOMPUTE_TOTALS, params)
        return deleted

    # -- message retention ------------------------------------------------------------------

    def count_messages_before(self, session_id: str, cutoff: datetime) -> int:
        params = (session_id, self.dialect.encode_ts(cutoff))
        return int(self._read(queries.COUNT_MESSAGES_BEFORE, params)[0]["n"])

    def delete_messages_before(self, session_id: str, cutoff: datetime) -> int | None:
        params = (session_id, self.dialect.encode_ts(cutoff))
        with self._maintenance_transaction() as tx:
            if self._locked_for_deletion(session_id, tx)["held"]:
                return None
            first = tx.execute(queries.FIRST_SEQ_BEFORE, params).fetchone()["seq"]
            if first is None:
                return 0
            deleted = tx.execute(queries.DELETE_MESSAGES_BEFORE, params).rowcount
            for query, forget in queries.forget_before(session_id, int(first)):
                tx.execute(query, forget)
            tx.execute(queries.RETOTAL_KEEPING_SEQ, (session_id,))
        return int(deleted)

    # -- erasure, tombstones and legal holds ------------------------------------------------

    def _locked_for_deletion(self, session_id: str, tx: Executor) -> Row:
        """The session's project and whether a legal hold keeps it (`held`), its row locked
        for `tx` so that a concurrent append waits for the deletion; `_gone` if not there."""
        row: Row | None = tx.execute(
            queries.SELECT_ERASABLE + self.dialect.row_lock, (session_id,)
        ).fetchone()
        if row is None:
            raise self._gone(session_id, tx)
        return row

    def _gone(
        self, session_id: str, tx: Executor | None = None, *, project: str | None = None
    ) -> SessionNotFound:
        """The error for a session that is not there: `SessionErased` when its id is a
        tombstone (read in `tx` when one is open), else `SessionNotFound`."""
        found = self._tombstones([session_id], tx)
        return _erased(found[session_id]) if found else SessionNotFound(session_id, project)

    def _tombstones(
        self, session_ids: Sequence[str], tx: Executor | None = None
    ) -> dict[str, Tombstone]:
        """The tombstones of these ids, read in `tx` when one is open."""
        found: dict[str, Tombstone] = {}
        for start in range(0, len(session_ids), queries.IDS_PER_SELECT):
            part = session_ids[start : start + queries.IDS_PER_SELECT]
            query = queries.SELECT_TOMBSTONES + queries.placeholders(len(part))
            rows = self._read(query, part) if tx is None else tx.execute(query, part).fetchall()
            for row in rows:
                erased_at = self.dialect.decode_ts(row["erased_at"])
                found[row["id"]] = Tombstone(row["id"], row["project"], erased_at)
        return found

    def tombstones(self, session_ids: Sequence[str]) -> dict[str, Tombstone]:
        return self._tombstones(list(dict.fromkeys(session_ids)))

    def lift_tombstones(self, session_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(session_ids))
        lifted = 0
        with self._transaction() as tx:
            for start in range(0, len(ids), queries.IDS_PER_SELECT):
                part = ids[start : start + queries.IDS_PER_SELECT]
                query = queries.DELETE_TOMBSTONES + queries.placeholders(len(part))
                lifted += max(tx.execute(query, part).rowcount, 0)
        return lifted

    def erase_session(self, session_id: str, *, now: datetime) -> ErasedSession | None:
        with self._transaction() as tx:
            row = self._locked_for_deletion(session_id, tx)
            if row["held"]:
                return None
            counts = tx.execute(queries.COUNT_ERASED, (session_id,) * 5).fetchone()
            tx.execute(queries.DELETE_SESSION, (session_id,))
            at = self.dialect.encode_ts(now)
            tx.execute(queries.INSERT_TOMBSTONE, (session_id, row["project"], at))
        return ErasedSession(
            session_id=session_id,
            project=str(row["project"]),
            messages=int(counts["messages"]),
            summaries=int(counts["summaries"]),
            traces=int(counts["traces"]),
            agent_states=int(counts["agent_states"]),
            turn_attempts=int(counts["turn_attempts"]),
        )

    def set_session_hold(self, session_id: str, held: bool, *, now: datetime) -> bool:
        with self._transaction() as tx:
            if held:
                params: tuple[Any, ...] = (self.dialect.encode_ts(now), session_id)
                changed = tx.execute(queries.HOLD_SESSION, params).rowcount
            else:
                changed = tx.execute(queries.RELEASE_SESSION, (session_id,)).rowcount
            if not changed:
                raise self._gone(session_id, tx)
        return held

    def set_project_hold(self, project: str, held: bool, *, now: datetime) -> bool:
        with self._transaction() as tx:
            if held:
                tx.execute(queries.HOLD_PROJECT, (project, self.dialect.encode_ts(now)))
            else:
                tx.execute(queries.RELEASE_PROJECT, (project,))
        return held

    def legal_holds(self, project: str | None = None) -> list[LegalHold]:
        rows = self._read(*queries.legal_holds_query(project))
        return [
            LegalHold(row["project"], row["session_id"], self.dialect.decode_ts(row["held_at"]))
            for row in rows
        ]

    def held_sessions(self, session_ids: Sequence[str]) -> frozenset[str]:
        ids = list(dict.fromkeys(session_ids))
        held: set[str] = set()
        for start in range(0, len(ids), queries.IDS_PER_SELECT):
            part = ids[start : start + queries.IDS_PER_SELECT]
            rows = self._read(queries.SELECT_HELD + queries.placeholders(len(part)), part)
            held.update(row["id"] for row in rows)
        return frozenset(held)


def _erased(tombstone: Tombstone) -> SessionErased:
    return SessionErased(tombstone.session_id, tombstone.project, to_ts(tombstone.erased_at))
