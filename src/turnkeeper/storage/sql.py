"""What the SQL backends share: columns, queries, row mapping and the append rules.

SQLite and PostgreSQL store the same tables and keep the same contract, so everything that does
not depend on the driver lives here once: the column lists, the queries both dialects accept
(written with `?` placeholders; the PostgreSQL store translates them), turning rows into domain
values, and the pure decision of what an append stores. The backends keep only what differs:
connections, transactions and how their driver's errors read; every write is in `sql_store`.

A `Dialect` says how values cross the boundary: SQLite keeps times as fixed-width UTC text and
JSON as text; PostgreSQL has `timestamptz` and `jsonb`, which the driver converts itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from turnkeeper.errors import (
    SessionNotFound,
)
from turnkeeper.storage.appends import AppendPlan, AppendTarget
from turnkeeper.storage.appends import plan_append as plan_append  # the SQL stores' rule too
from turnkeeper.storage.codec import decode_cursor, encode_cursor, from_ts, to_ts
from turnkeeper.types import (
    AgentState,
    AgentStateUpdate,
    ApiKey,
    Branch,
    Message,
    MessageDraft,
    NewSession,
    Page,
    ProjectStats,
    Role,
    SeqRanges,
    Session,
    SessionFilter,
    SessionStats,
    SessionStatus,
    SummaryCheckpoint,
    TurnAttempt,
    Usage,
)


class Row(Protocol):
    """A result row addressable by column name (`sqlite3.Row`, a psycopg `dict_row`)."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """How one backend encodes times and JSON on the way in, and decodes them on the way out;
    which migration DDL it runs (`name`), what locks a selected row (`row_lock`), and how an
    append claims its seqs (`claims_by_update`)."""

    name: str
    encode_ts: Callable[[datetime], Any]
    decode_ts: Callable[[Any], datetime]
    encode_json: Callable[[Any], Any]
    decode_json: Callable[[Any], Any]
    row_lock: str = ""
    claims_by_update: bool = False
    """Whether an append's fast path claims its seqs (and adds its totals) with one
    `CLAIM_SEQS … RETURNING` rather than `SELECT_APPEND_TARGET` now and `ADD_TOTALS` after the
    insert. Over a network (PostgreSQL) a statement fewer is a round trip fewer; in process
    (SQLite) the UPDATE with RETURNING was measured slower than the two plain statements."""

    def encode_ts_or_none(self, value: datetime | None) -> Any:
        return None if value is None else self.encode_ts(value)

    def decode_ts_or_none(self, value: Any) -> datetime | None:
        return None if value is None else self.decode_ts(value)


SESSION_COLUMNS = (
    "id, key, project, subject, kind, title, phase, status, created_at, updated_at, expires_at,"
    " message_count, last_seq, stored_tokens, usage_input_tokens, usage_output_tokens,"
    " metadata, version"
)
MESSAGE_COLUMNS = (
    "id, session_id, seq, role, author, content, internal, created_at, tokens,"
    " usage_input_tokens, usage_output_tokens, tool_calls, tool_call_id, metadata"
)
SELECT_SESSION = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
INSERT_SESSION = (
    "INSERT INTO sessions (id, key, project, subject, kind, title, phase, status,"
    " created_at, updated_at, expires_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?)"
)
MESSAGE_ROW = f"({', '.join('?' * 14)})"
INSERT_MESSAGE = f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES {MESSAGE_ROW}"
IMPORT_SESSION = f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({', '.join('?' * 18)})"
SELECT_MESSAGES_BY_ID = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND id IN "  # then `placeholders(len(ids))`; message ids are scoped to their session
FIND_BY_KEY = (
    f"SELECT {SESSION_COLUMNS} FROM sessions WHERE project = ? AND key = ?"
    " ORDER BY status = 'active' DESC, updated_at DESC, id DESC LIMIT 1"
)
LOOKUP_SESSION = (
    f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ? OR (project = ? AND key = ?)"
    " ORDER BY id = ? DESC, status = 'active' DESC, updated_at DESC, id DESC LIMIT 1"
)
"""The session with an id, else the one `FIND_BY_KEY` picks, in one statement."""
LIVE_BY_KEY = (
    f"SELECT {SESSION_COLUMNS} FROM sessions WHERE project = ? AND key = ? AND status = 'active'"
)
RELEASE_STALE_KEY = (
    "UPDATE sessions SET status = 'expired', updated_at = ?, version = version + 1"
    " WHERE project = ? AND key = ? AND status = 'active'"
    " AND expires_at IS NOT NULL AND expires_at <= ?"
)
SET_STATUS = (
    "UPDATE sessions SET status = ?, updated_at = ?, version = version + 1"
    f" WHERE id = ? RETURNING {SESSION_COLUMNS}"
)
ADD_TOTALS = (
    "UPDATE sessions SET last_seq = ?, message_count = message_count + ?,"
    " stored_tokens = stored_tokens + ?, usage_input_tokens = usage_input_tokens + ?,"
    " usage_output_tokens = usage_output_tokens + ?, updated_at = ?, version = version + 1"
    " WHERE id = ?"
)
RECOMPUTE_TOTALS = (
    "UPDATE sessions SET"
    " message_count = (SELECT count(*) FROM messages WHERE session_id = sessions.id),"
    " last_seq = (SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = sessions.id),"
    " stored_tokens = (SELECT coalesce(sum(tokens), 0) FROM messages"
    "   WHERE session_id = sessions.id),"
    " usage_input_tokens = (SELECT coalesce(sum(usage_input_tokens), 0) FROM messages"
    "   WHERE session_id = sessions.id),"
    " usage_output_tokens = (SELECT coalesce(sum(usage_output_tokens), 0) FROM messages"
    "   WHERE session_id = sessions.id),"
    " updated_at = ?, version = version + 1"
    f" WHERE id = ? RETURNING {SESSION_COLUMNS}"
)
RESTORE_IMPORTED = "UPDATE sessions SET updated_at = ?, version = ? WHERE id = ?"
"""After an import's totals are recomputed: the session's own time and version, as exported."""
RESET_MESSAGES = "DELETE FROM messages WHERE session_id = ?"
KEEP_SYSTEM_MESSAGE = " AND NOT (seq = 1 AND role = 'system')"
DELETE_SESSION = "DELETE FROM sessions WHERE id = ?"
EXPIRE_DUE = (
    "UPDATE sessions SET status = 'expired', updated_at = ?, version = version + 1"
    " WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at <= ? RETURNING id"
)
EXPIRED_PAST_GRACE = (
    "SELECT id FROM sessions WHERE status = 'expired'"
    " AND coalesce(expires_at, updated_at) <= ? ORDER BY id"
)
DELETE_EXPIRED = (
    "DELETE FROM sessions WHERE status = 'expired'"
    " AND coalesce(expires_at, updated_at) <= ? RETURNING id"
)
SESSION_MESSAGE_STATS = (
    "SELECT role, internal, count(*) AS n, min(created_at) AS first,"
    " max(created_at) AS last FROM messages WHERE session_id = ? GROUP BY role, internal"
)
PROJECT_STATS = (
    "SELECT project, status, count(*) AS sessions, sum(message_count) AS messages,"
    " sum(stored_tokens) AS tokens, sum(usage_input_tokens) AS usage_in,"
    " sum(usage_output_tokens) AS usage_out FROM sessions"
)


API_KEY_COLUMNS = "id, project, name, admin, created_at, revoked_at"
INSERT_API_KEY = (
    "INSERT INTO api_keys (id, project, name, secret_hash, admin, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
REVOKE_API_KEY = (
    "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?"
    f" RETURNING {API_KEY_COLUMNS}"
)


# -- agent states and summary checkpoints (both bump the session's version when they change) --

BUMP_VERSION = "UPDATE sessions SET version = version + 1 WHERE id = ?"
"""Run first in a write that changes a session's derived data: it locks the session row (so
the write queues behind appends) and moves the version every cache key carries."""
AGENT_STATE_COLUMNS = (
    "session_id, agent, last_processed_seq, provider_session_id, execution_ms, turns, updated_at"
)
UPSERT_AGENT_STATE = (
    f"INSERT INTO agent_states ({AGENT_STATE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (session_id, agent) DO UPDATE SET"
    " last_processed_seq = coalesce(CAST(? AS INTEGER), agent_states.last_processed_seq),"
    " provider_session_id = coalesce(CAST(? AS TEXT), agent_states.provider_session_id),"
    " execution_ms = agent_states.execution_ms + excluded.execution_ms,"
    " turns = agent_states.turns + excluded.turns, updated_at = excluded.updated_at"
    f" RETURNING {AGENT_STATE_COLUMNS}"
)
SUMMARY_COLUMNS = "session_id, covers_to_seq, text, tokens, method, created_at"
INSERT_SUMMARY = (
    f"INSERT INTO summaries ({SUMMARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (session_id, covers_to_seq) DO NOTHING"
)
SELECT_SUMMARY = (
    f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE session_id = ? AND covers_to_seq = ?"
)
RESET_SUMMARIES = "DELETE FROM summaries WHERE session_id = ?"
RESET_AGENT_POSITIONS = "UPDATE agent_states SET last_processed_seq = 0 WHERE session_id = ?"
"""After a reset the seqs an agent had processed are gone (seq restarts from what is left)."""
RESET_TRACES = "DELETE FROM turn_traces WHERE session_id = ?"
INSERT_TRACE = (
    "INSERT INTO turn_traces (session_id, seq, data) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, seq) DO NOTHING"
)


# -- turn attempts: which request answers a chat turn (see `TurnAttemptStore`) -----------------

TURN_ATTEMPT_COLUMNS = "session_id, turn_id, attempt_id, lease_until, error"
BEGIN_TURN_ATTEMPT = (
    f"INSERT INTO turn_attempts ({TURN_ATTEMPT_COLUMNS}) SELECT id, ?, ?, ?, NULL FROM sessions"
    " WHERE id = ? ON CONFLICT (session_id, turn_id) DO UPDATE SET"
    " attempt_id = excluded.attempt_id, lease_until = excluded.lease_until, error = NULL"
    " WHERE turn_attempts.error IS NOT NULL OR turn_attempts.lease_until <= ?"
)
"""Take the turn for an attempt: a new record, or one replacing a failed or lapsed holder (a
live holder is left as it is). Selecting from `sessions` makes a missing session insert
nothing; one statement, so two attempts beginning at once cannot both take the turn."""
SELECT_TURN_ATTEMPT = (
    f"SELECT {TURN_ATTEMPT_COLUMNS} FROM turn_attempts WHERE session_id = ? AND turn_id = ?"
)
RENEW_TURN_ATTEMPT = (
    "UPDATE turn_attempts SET lease_until = ?"
    " WHERE session_id = ? AND turn_id = ? AND attempt_id = ? AND error IS NULL"
)
FAIL_TURN_ATTEMPT = (
    "UPDATE turn_attempts SET error = ?"
    " WHERE session_id = ? AND turn_id = ? AND attempt_id = ? AND error IS NULL"
)
DELETE_TURN_ATTEMPT = (
    "DELETE FROM turn_attempts WHERE session_id = ? AND turn_id = ? AND attempt_id = ?"
)


def turn_attempt_from_row(row: Row, d: Dialect) -> TurnAttempt:
    return TurnAttempt(
        session_id=row["session_id"],
        turn_id=row["turn_id"],
        attempt_id=row["attempt_id"],
        lease_until=d.decode_ts(row["lease_until"]),
        error=row["error"],
    )


# -- branches: the prefix of a session copied into a new one (see `ForkStore`) -----------------

COPY_MESSAGES = (
    f"INSERT INTO messages ({MESSAGE_COLUMNS}) SELECT id, ?, seq, role, author, content,"
    " internal, created_at, tokens, usage_input_tokens, usage_output_tokens, tool_calls,"
    " tool_call_id, metadata FROM messages WHERE session_id = ? AND seq <= ?"
)
COPY_TRACES = (
    "INSERT INTO turn_traces (session_id, seq, data)"
    " SELECT ?, seq, data FROM turn_traces WHERE session_id = ? AND seq <= ?"
)
COPY_SUMMARIES = (
    f"INSERT INTO summaries ({SUMMARY_COLUMNS}) SELECT ?, covers_to_seq, text, tokens, method,"
    " created_at FROM summaries WHERE session_id = ? AND covers_to_seq <= ?"
)
COPY_AGENT_STATES = (
    f"INSERT INTO agent_states ({AGENT_STATE_COLUMNS}) SELECT ?, agent,"
    " CASE WHEN last_processed_seq > ? THEN CAST(? AS INTEGER) ELSE last_processed_seq END,"
    " NULL, execution_ms, turns, updated_at FROM agent_states WHERE session_id = ?"
)
"""An agent's position is capped at the fork point; its provider session belongs to the
source's line (continuing it from the branch would show the model the source's later turns)."""
FORK_COLUMNS = "session_id, parent_id, forked_at_seq, created_at"
INSERT_FORK = f"INSERT INTO session_forks ({FORK_COLUMNS}) VALUES (?, ?, ?, ?)"
SELECT_BRANCHES = (
    f"SELECT {FORK_COLUMNS} FROM session_forks WHERE parent_id = ? ORDER BY created_at, session_id"
)
SELECT_FORK_ORIGIN = f"SELECT {FORK_COLUMNS} FROM session_forks WHERE session_id = ?"


def fork_copies(branch_id: str, source_id: str, at_seq: int) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements copying the prefix of `source_id` up to `at_seq` into `branch_id`."""
    prefix = (branch_id, source_id, at_seq)
    return [
        (COPY_MESSAGES, prefix),
        (COPY_TRACES, prefix),
        (COPY_SUMMARIES, prefix),
        (COPY_AGENT_STATES, (branch_id, at_seq, at_seq, source_id)),
    ]


def branch_from_row(row: Row, d: Dialect) -> Branch:
    return Branch(
        session_id=row["session_id"],
        parent_id=row["parent_id"],
        forked_at_seq=row["forked_at_seq"],
        created_at=d.decode_ts(row["created_at"]),
    )


def trace_params(session_id: str, traces: Sequence[tuple[int, str]]) -> list[tuple[str, int, str]]:
    """Parameters of `INSERT_TRACE` for `(seq, data)` traces of one session."""
    return [(session_id, seq, data) for seq, data in traces]


def agent_state_params(
    session_id: str, agent: str, update: AgentStateUpdate, now: datetime, d: Dialect
) -> tuple[Any, ...]:
    """Parameters of `UPSERT_AGENT_STATE`: the new row, then the fields to keep when None."""
    return (
        session_id,
        agent,
        update.last_processed_seq or 0,
        update.provider_session_id,
        update.add_execution_ms,
        update.add_turns,
        d.encode_ts(now),
        update.last_processed_seq,
        update.provider_session_id,
    )


def summary_params(checkpoint: SummaryCheckpoint, d: Dialect) -> tuple[Any, ...]:
    """Parameters of `INSERT_SUMMARY`."""
    c = checkpoint
    return (c.session_id, c.covers_to_seq, c.text, c.tokens, c.method, d.encode_ts(c.created_at))


def agent_state_from_row(row: Row, d: Dialect) -> AgentState:
    return AgentState(
        session_id=row["session_id"],
        agent=row["agent"],
        last_processed_seq=row["last_processed_seq"],
        provider_session_id=row["provider_session_id"],
        execution_ms=int(row["execution_ms"]),
        turns=row["turns"],
        updated_at=d.decode_ts(row["updated_at"]),
    )


def summary_from_row(row: Row, d: Dialect) -> SummaryCheckpoint:
    return SummaryCheckpoint(
        session_id=row["session_id"],
        covers_to_seq=row["covers_to_seq"],
        text=row["text"],
        tokens=row["tokens"],
        method=row["method"],
        created_at=d.decode_ts(row["created_at"]),
    )


IDS_PER_SELECT = 5_000
"""Most message ids one `SELECT_MESSAGES_BY_ID` looks up: PostgreSQL takes at most 65,535
parameters a statement, so a larger batch is looked up in parts."""

ROWS_PER_INSERT = 500
"""Most message rows one INSERT writes (7,000 parameters: under SQLite's 32,766 and
PostgreSQL's 65,535)."""


@functools.lru_cache(maxsize=64)
def insert_messages_query(rows: int) -> str:
    """One INSERT of `rows` messages (`message_rows`, flattened, in order).

    A batch is written as one statement per `ROWS_PER_INSERT` rows, not one execution per row:
    on SQLite each execution of a statement whose trigger writes the full-text index opens a
    statement savepoint, and FTS5 flushes its pending terms to a new index segment at every
    savepoint — so a row per execution made a segment per message (and the merges that follow),
    five times the cost of the rows themselves. One statement flushes once."""
    return f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES " + ", ".join([MESSAGE_ROW] * rows)


def placeholders(count: int) -> str:
    return f"({', '.join('?' * count)})"


# -- rows → domain values ---------------------------------------------------------------------


def session_from_row(row: Row, d: Dialect) -> Session:
    return Session(
        id=row["id"],
        key=row["key"],
        project=row["project"],
        subject=row["subject"],
        kind=row["kind"],
        title=row["title"],
        phase=row["phase"],
        status=SessionStatus(row["status"]),
        created_at=d.decode_ts(row["created_at"]),
        updated_at=d.decode_ts(row["updated_at"]),
        expires_at=d.decode_ts_or_none(row["expires_at"]),
        message_count=row["message_count"],
        last_seq=row["last_seq"],
        stored_tokens=row["stored_tokens"],
        usage_input_tokens=row["usage_input_tokens"],
        usage_output_tokens=row["usage_output_tokens"],
        metadata=d.decode_json(row["metadata"]),
        version=row["version"],
    )


_ROLES = {role.value: role for role in Role}  # a dict lookup: far cheaper than Role(value)


def message_from_row(row: Row, d: Dialect) -> Message:
    usage = None
    if row["usage_input_tokens"] is not None or row["usage_output_tokens"] is not None:
        usage = Usage(row["usage_input_tokens"] or 0, row["usage_output_tokens"] or 0)
    tool_calls = d.decode_json(row["tool_calls"])
    return Message(
        id=row["id"],
        session_id=row["session_id"],
        seq=row["seq"],
        role=_ROLES[row["role"]],
        author=row["author"],
        content=row["content"],
        internal=bool(row["internal"]),
        created_at=d.decode_ts(row["created_at"]),
        tokens=row["tokens"],
        usage=usage,
        tool_calls=tuple(tool_calls) if tool_calls is not None else None,
        tool_call_id=row["tool_call_id"],
        metadata=d.decode_json(row["metadata"]),
    )


def api_key_from_row(row: Row, d: Dialect) -> ApiKey:
    return ApiKey(
        id=row["id"],
        project=row["project"],
        name=row["name"],
        admin=bool(row["admin"]),
        created_at=d.decode_ts(row["created_at"]),
        revoked_at=d.decode_ts_or_none(row["revoked_at"]),
    )


def api_key_params(key: ApiKey, secret_hash: str, d: Dialect) -> tuple[Any, ...]:
    """Parameters of `INSERT_API_KEY`."""
    return (key.id, key.project, key.name, secret_hash, key.admin, d.encode_ts(key.created_at))


# -- domain values → parameters ---------------------------------------------------------------


def message_rows(session_id: str, messages: Sequence[Message], d: Dialect) -> list[tuple[Any, ...]]:
    """The parameters of `INSERT_MESSAGE` (`MESSAGE_COLUMNS`) for each message, at its own seq.
    The messages of one append share their time, so it is encoded once, not once a message;
    the row is built in the loop (a function call a row was a measurable share of a large
    append's rows)."""
    encode_json = d.encode_json
    last: tuple[datetime, Any] | None = None
    rows = []
    for message in messages:
        if last is None or last[0] is not message.created_at:
            last = (message.created_at, d.encode_ts(message.created_at))
        usage = message.usage
        tool_calls = message.tool_calls
        rows.append(
            (
                message.id,
                session_id,
                message.seq,
                message.role._value_,  # `.value` is an enum property: a cost per message
                message.author,
                message.content,
                message.internal,
                last[1],
                message.tokens,
                usage.input_tokens if usage else None,
                usage.output_tokens if usage else None,
                encode_json(list(tool_calls)) if tool_calls is not None else None,
                message.tool_call_id,
                encode_json(dict(message.metadata)),
            )
        )
    return rows


def new_session_params(
    session_id: str, new: NewSession, now: datetime, d: Dialect
) -> tuple[Any, ...]:
    """Parameters of `INSERT_SESSION` for a `NewSession`."""
    return (
        session_id,
        new.key,
        new.project,
        new.subject,
        new.kind,
        new.title,
        new.phase,
        d.encode_ts(now),
        d.encode_ts(now),
        d.encode_ts_or_none(new.expires_at),
        d.encode_json(dict(new.metadata)),
    )


def imported_session_params(session: Session, d: Dialect) -> tuple[Any, ...]:
    """Parameters of `IMPORT_SESSION`: the session as given, with zero totals (the messages
    that are actually added recompute them)."""
    return (
        session.id,
        session.key,
        session.project,
        session.subject,
        session.kind,
        session.title,
        session.phase,
        session.status.value,
        d.encode_ts(session.created_at),
        d.encode_ts(session.updated_at),
        d.encode_ts_or_none(session.expires_at),
        0,
        0,
        0,
        0,
        0,
        d.encode_json(dict(session.metadata)),
        session.version,
    )


def update_session_query(
    session_id: str, changes: Mapping[str, Any], now: datetime, d: Dialect
) -> tuple[str, list[Any]]:
    """The UPDATE applying a `SessionPatch` (and bumping `updated_at` and `version`), returning
    the updated row; no row means no such session."""
    columns: list[str] = []
    params: list[Any] = []
    for name, value in changes.items():
        columns.append(f"{name} = ?, ")
        if name == "metadata":
            params.append(d.encode_json(dict(value)))
        elif name == "expires_at":
            params.append(d.encode_ts_or_none(value))
        else:
            params.append(value)
    query = (
        f"UPDATE sessions SET {''.join(columns)}updated_at = ?, version = version + 1"
        f" WHERE id = ? RETURNING {SESSION_COLUMNS}"
    )
    return query, [*params, d.encode_ts(now), session_id]


# -- queries built from arguments -------------------------------------------------------------


SEARCHED = ("key", "subject", "title")
"""The columns `SessionFilter.search` looks in."""


def list_sessions_query(
    where: SessionFilter, limit: int, cursor: str | None, d: Dialect
) -> tuple[str, list[Any]]:
    """Sessions matching `where` after `cursor`, newest activity first, one more than `limit`
    (so the caller can tell whether there is a next page)."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("project", where.project),
        ("subject", where.subject),
        ("kind", where.kind),
        ("key", where.key),
        ("status", where.status.value if where.status else None),
        ("phase", where.phase),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if where.search:
        # LOWER on both sides: SQLite's LIKE ignores ASCII case, PostgreSQL's does not.
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", where.search.lower()) + "%"
        clauses.append("(" + " OR ".join(f"LOWER({c}) LIKE ? ESCAPE '\\'" for c in SEARCHED) + ")")
        params.extend([pattern] * len(SEARCHED))
    if where.updated_since is not None:
        clauses.append("updated_at >= ?")
        params.append(d.encode_ts(where.updated_since))
    if cursor is not None:
        after_updated, after_id = decode_cursor(cursor)
        after = d.encode_ts(from_ts(after_updated))
        clauses.append("(updated_at < ? OR (updated_at = ? AND id < ?))")
        params.extend([after, after, after_id])
    sql = f"SELECT {SESSION_COLUMNS} FROM sessions"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
    return sql, [*params, limit + 1]


def page_from_rows(rows: Sequence[Row], limit: int, d: Dialect) -> Page[Session]:
    items = tuple(session_from_row(row, d) for row in rows[:limit])
    next_cursor = None
    if len(rows) > limit:
        last = items[-1]
        next_cursor = encode_cursor(to_ts(last.updated_at), last.id)
    return Page(items=items, next_cursor=next_cursor)


PAGE_VERSION = ", (SELECT version FROM sessions WHERE id = ?) AS session_version"


def read_messages_query(
    session_id: str,
    *,
    from_seq: int | None,
    to_seq: int | None,
    include_internal: bool,
    newest_first: bool,
    limit: int | None,
    with_version: bool = False,
) -> tuple[str, list[Any]]:
    """The page's query; `with_version` adds the session's `version` to every row (as
    `session_version`), read in the same statement, so of the same snapshot as the page."""
    clauses = ["session_id = ?"]
    params: list[Any] = [session_id, session_id] if with_version else [session_id]
    if not include_internal:
        clauses.append("NOT internal")
    if from_seq is not None:
        clauses.append("seq >= ?")
        params.append(from_seq)
    if to_seq is not None:
        clauses.append("seq <= ?")
        params.append(to_seq)
    columns = MESSAGE_COLUMNS + (PAGE_VERSION if with_version else "")
    sql = (
        f"SELECT {columns} FROM messages WHERE {' AND '.join(clauses)}"
        f" ORDER BY seq {'DESC' if newest_first else 'ASC'}"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return sql, params


def count_messages_query(
    session_id: str, *, before_seq: int | None, include_internal: bool
) -> tuple[str, list[Any]]:
    clauses = ["session_id = ?"]
    params: list[Any] = [session_id]
    if not include_internal:
        clauses.append("NOT internal")
    if before_seq is not None:
        clauses.append("seq < ?")
        params.append(before_seq)
    return f"SELECT count(*) AS n FROM messages WHERE {' AND '.join(clauses)}", params


def seq_runs_query(
    session_id: str, *, from_seq: int, to_seq: int, include_internal: bool
) -> tuple[str, list[Any]]:
    """Runs of consecutive seqs: within a run, seq minus the row's rank is one number."""
    internal = "" if include_internal else " AND NOT internal"
    return (
        "SELECT min(seq) AS run_first, max(seq) AS run_last FROM ("
        "SELECT seq, seq - row_number() OVER (ORDER BY seq) AS run FROM messages"
        f" WHERE session_id = ? AND seq >= ? AND seq <= ?{internal}"
        ") AS numbered GROUP BY run ORDER BY run_first",
        [session_id, from_seq, to_seq],
    )


def project_stats_query(project: str | None) -> tuple[str, list[Any]]:
    if project is None:
        return PROJECT_STATS + " GROUP BY project, status ORDER BY project", []
    return PROJECT_STATS + " WHERE project = ? GROUP BY project, status ORDER BY project", [project]


# -- the append rules -------------------------------------------------------------------------


SELECT_APPEND_TARGET = "SELECT id, status, expires_at, last_seq FROM sessions WHERE id = ?"
"""Then the dialect's `row_lock`: the row writers to one session queue on."""


def append_target_from_row(row: Row, d: Dialect) -> AppendTarget:
    expires_at = row["expires_at"]
    return AppendTarget(
        id=row["id"],
        status=_STATUS_BY_VALUE[row["status"]],
        expires_at=None if expires_at is None else d.decode_ts(expires_at),
        last_seq=row["last_seq"],
    )


_STATUS_BY_VALUE = {status.value: status for status in SessionStatus}
"""`SessionStatus(value)` without the enum call (once an append)."""


CLAIM_SEQS = (
    "UPDATE sessions SET last_seq = last_seq + ?, message_count = message_count + ?,"
    " stored_tokens = stored_tokens + ?, usage_input_tokens = usage_input_tokens + ?,"
    " usage_output_tokens = usage_output_tokens + ?, updated_at = ?, version = version + 1"
    " WHERE id = ? RETURNING id, status, expires_at, last_seq"
)
"""An append's fast path where the dialect `claims_by_update`: lock the session row, take the
next seqs and add the totals of drafts presumed all new, in one statement. The returned
`last_seq` is the new one; the transaction is rolled back if the presumption fails."""


def _totals(added: Sequence[Message | MessageDraft]) -> tuple[int, int, int, int]:
    """Count, stored tokens, usage input and output tokens of the messages an append adds."""
    if len(added) == 1:  # a single append: no generators
        (only,) = added
        usage = only.usage
        return (
            1,
            only.tokens,
            usage.input_tokens if usage else 0,
            usage.output_tokens if usage else 0,
        )
    return (
        len(added),
        sum(m.tokens for m in added),
        sum(m.usage.input_tokens for m in added if m.usage),
        sum(m.usage.output_tokens for m in added if m.usage),
    )


def totals_params(plan: AppendPlan, session_id: str, now: datetime, d: Dialect) -> tuple[Any, ...]:
    """Parameters of `ADD_TOTALS` for the messages a plan adds (its last seq included)."""
    return (plan.last_seq, *_totals(plan.added), d.encode_ts(now), session_id)


def claim_params(
    drafts: Sequence[MessageDraft], session_id: str, now: datetime, d: Dialect
) -> tuple[Any, ...]:
    """Parameters of `CLAIM_SEQS` for drafts presumed all new: one seq each."""
    return (len(drafts), *_totals(drafts), d.encode_ts(now), session_id)


# -- statistics from aggregate rows -----------------------------------------------------------


def session_stats_from_rows(session: Session, rows: Sequence[Row], d: Dialect) -> SessionStats:
    """Per-session statistics from `SESSION_MESSAGE_STATS` rows and the session's totals."""
    by_role: dict[str, int] = {}
    internal = 0
    for row in rows:
        by_role[row["role"]] = by_role.get(row["role"], 0) + row["n"]
        if row["internal"]:
            internal += row["n"]
    firsts = [d.decode_ts(row["first"]) for row in rows]
    lasts = [d.decode_ts(row["last"]) for row in rows]
    return SessionStats(
        session_id=session.id,
        message_count=session.message_count,
        user_facing_messages=session.message_count - internal,
        internal_messages=internal,
        messages_by_role=by_role,
        stored_tokens=session.stored_tokens,
        usage_input_tokens=session.usage_input_tokens,
        usage_output_tokens=session.usage_output_tokens,
        first_message_at=min(firsts) if firsts else None,
        last_message_at=max(lasts) if lasts else None,
    )


def project_stats_from_rows(rows: Sequence[Row]) -> list[ProjectStats]:
    """Per-project totals from `PROJECT_STATS` rows (one per project and status)."""
    totals: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = totals.setdefault(
            row["project"],
            {"by_status": {}, "messages": 0, "tokens": 0, "usage_in": 0, "usage_out": 0},
        )
        entry["by_status"][row["status"]] = int(row["sessions"])
        for name in ("messages", "tokens", "usage_in", "usage_out"):
            entry[name] += int(row[name] or 0)
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


# -- the reads, which are the same on every SQL backend ---------------------------------------


class SQLReads:
    """The read half of the `Store` contract, for a backend that can run a `?`-placeholder
    query and return rows addressable by column name (`_read`) in its `dialect`."""

    dialect: Dialect

    def _read(self, query: str, params: Sequence[Any] = ()) -> Sequence[Row]:
        raise NotImplementedError

    def get_session(self, session_id: str) -> Session:
        rows = self._read(SELECT_SESSION, (session_id,))
        if not rows:
            raise SessionNotFound(session_id)
        return session_from_row(rows[0], self.dialect)

    def find_session_by_key(self, project: str, key: str) -> Session:
        rows = self._read(FIND_BY_KEY, (project, key))
        if not rows:
            raise SessionNotFound(key, project)
        return session_from_row(rows[0], self.dialect)

    def lookup_session(self, ref: str, project: str) -> Session:
        rows = self._read(LOOKUP_SESSION, (ref, project, ref, ref))
        if not rows:
            raise SessionNotFound(ref, project)
        return session_from_row(rows[0], self.dialect)

    def list_sessions(
        self, where: SessionFilter, *, limit: int, cursor: str | None = None
    ) -> Page[Session]:
        query, params = list_sessions_query(where, limit, cursor, self.dialect)
        return page_from_rows(self._read(query, params), limit, self.dialect)

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
        query, params = read_messages_query(
            session_id,
            from_seq=from_seq,
            to_seq=to_seq,
            include_internal=include_internal,
            newest_first=newest_first,
            limit=limit,
        )
        return [message_from_row(row, self.dialect) for row in self._read(query, params)]

    def read_messages_versioned(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        to_seq: int | None = None,
        include_internal: bool = True,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> tuple[list[Message], int | None]:
        query, params = read_messages_query(
            session_id,
            from_seq=from_seq,
            to_seq=to_seq,
            include_internal=include_internal,
            newest_first=newest_first,
            limit=limit,
            with_version=True,
        )
        rows = self._read(query, params)
        version = int(rows[0]["session_version"]) if rows else None
        return [message_from_row(row, self.dialect) for row in rows], version

    def find_messages(self, session_id: str, ids: Sequence[str]) -> dict[str, Message]:
        if not ids:
            return {}
        rows = self._read(SELECT_MESSAGES_BY_ID + placeholders(len(ids)), [session_id, *ids])
        return {row["id"]: message_from_row(row, self.dialect) for row in rows}

    def count_messages(
        self, session_id: str, *, before_seq: int | None = None, include_internal: bool = True
    ) -> int:
        query, params = count_messages_query(
            session_id, before_seq=before_seq, include_internal=include_internal
        )
        return int(self._read(query, params)[0]["n"])

    def message_seq_runs(
        self, session_id: str, *, from_seq: int, to_seq: int, include_internal: bool = True
    ) -> SeqRanges:
        query, params = seq_runs_query(
            session_id, from_seq=from_seq, to_seq=to_seq, include_internal=include_internal
        )
        rows = self._read(query, params)
        return SeqRanges.from_runs((row["run_first"], row["run_last"]) for row in rows)

    def session_stats(self, session_id: str) -> SessionStats:
        session = self.get_session(session_id)
        rows = self._read(SESSION_MESSAGE_STATS, (session_id,))
        return session_stats_from_rows(session, rows, self.dialect)

    def project_stats(self, project: str | None = None) -> list[ProjectStats]:
        return project_stats_from_rows(self._read(*project_stats_query(project)))

    def find_api_key(self, key_id: str) -> tuple[ApiKey, str] | None:
        rows = self._read(
            f"SELECT {API_KEY_COLUMNS}, secret_hash FROM api_keys WHERE id = ?", (key_id,)
        )
        if not rows:
            return None
        return api_key_from_row(rows[0], self.dialect), str(rows[0]["secret_hash"])

    def list_api_keys(self, project: str | None = None) -> list[ApiKey]:
        where, params = ("WHERE project = ?", (project,)) if project is not None else ("", ())
        query = f"SELECT {API_KEY_COLUMNS} FROM api_keys {where} ORDER BY created_at, id"
        return [api_key_from_row(row, self.dialect) for row in self._read(query, params)]

    def get_agent_state(self, session_id: str, agent: str) -> AgentState | None:
        rows = self._read(
            f"SELECT {AGENT_STATE_COLUMNS} FROM agent_states WHERE session_id = ? AND agent = ?",
            (session_id, agent),
        )
        return agent_state_from_row(rows[0], self.dialect) if rows else None

    def list_agent_states(self, session_id: str) -> list[AgentState]:
        query = (
            f"SELECT {AGENT_STATE_COLUMNS} FROM agent_states WHERE session_id = ? ORDER BY agent"
        )
        return [agent_state_from_row(row, self.dialect) for row in self._read(query, (session_id,))]

    def latest_summary(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> SummaryCheckpoint | None:
        query = f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE session_id = ?"
        params: list[Any] = [session_id]
        if upto_seq is not None:
            query += " AND covers_to_seq <= ?"
            params.append(upto_seq)
        rows = self._read(query + " ORDER BY covers_to_seq DESC LIMIT 1", params)
        return summary_from_row(rows[0], self.dialect) if rows else None

    def list_summaries(self, session_id: str) -> list[SummaryCheckpoint]:
        query = (
            f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE session_id = ? ORDER BY covers_to_seq"
        )
        return [summary_from_row(row, self.dialect) for row in self._read(query, (session_id,))]

    def get_turn_attempt(self, session_id: str, turn_id: str) -> TurnAttempt | None:
        rows = self._read(SELECT_TURN_ATTEMPT, (session_id, turn_id))
        return turn_attempt_from_row(rows[0], self.dialect) if rows else None

    def read_traces(self, session_id: str, *, upto_seq: int, limit: int) -> list[tuple[int, str]]:
        query = (
            "SELECT seq, data FROM turn_traces WHERE session_id = ? AND seq <= ?"
            " ORDER BY seq DESC LIMIT ?"
        )
        rows = self._read(query, (session_id, upto_seq, limit))
        return [(int(row["seq"]), str(row["data"])) for row in rows]


# -- delete_last_message ------------------------------------------------------------------------

DELETE_LAST_MESSAGE = (
    "DELETE FROM messages WHERE session_id = ? AND seq ="
    " (SELECT max(seq) FROM messages WHERE session_id = ?)"
    f" RETURNING {MESSAGE_COLUMNS}"
)


def forget_from_seq(session_id: str, seq: int) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements (and their parameters) that let go of what points at a deleted seq:
    summary checkpoints covering it, turn traces of it and later, and agents' positions at or
    past it."""
    return [
        ("DELETE FROM turn_traces WHERE session_id = ? AND seq >= ?", (session_id, seq)),
        ("DELETE FROM summaries WHERE session_id = ? AND covers_to_seq >= ?", (session_id, seq)),
        (
            "UPDATE agent_states SET last_processed_seq = ?"
            " WHERE session_id = ? AND last_processed_seq >= ?",
            (seq - 1, session_id, seq),
        ),
    ]
