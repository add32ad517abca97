"""The statements of the SQL store: column lists, the SQL text both dialects accept, and the
queries built from arguments.

Written once with `?` placeholders (the PostgreSQL driver translates them to `%s`); both
dialects accept `RETURNING` and `ON CONFLICT … DO NOTHING`. What a statement's parameters are
made from is in `rows`; what differs between the dialects is in `dialect`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from turnkeeper.storage.codec import decode_cursor, from_ts
from turnkeeper.storage.sql.dialect import Dialect
from turnkeeper.types import MessageQuery, SessionFilter

SESSION_COLUMNS = (
    "id, key, project, subject, kind, title, phase, status, created_at, updated_at, expires_at,"
    " message_count, last_seq, stored_tokens, usage_input_tokens, usage_output_tokens,"
    " usage_cache_read_tokens, usage_cache_creation_tokens, metadata, version, cut_seq"
)
MESSAGE_COLUMNS = (
    "id, session_id, seq, role, author, content, internal, created_at, tokens,"
    " usage_input_tokens, usage_output_tokens, usage_cache_read_tokens,"
    " usage_cache_creation_tokens, tool_calls, tool_call_id, metadata"
)
SELECT_SESSION = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
INSERT_SESSION = (
    "INSERT INTO sessions (id, key, project, subject, kind, title, phase, status,"
    " created_at, updated_at, expires_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?)"
)
SELECT_META = "SELECT value FROM meta WHERE name = ?"
INSERT_META = "INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
INSERT_SESSION_IF_KEY_FREE = (
    INSERT_SESSION
    + " ON CONFLICT (project, key) WHERE status = 'active' AND key IS NOT NULL DO NOTHING"
)
RECORD_MIGRATION = "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"
MESSAGE_ROW = f"({', '.join('?' * 16)})"
INSERT_MESSAGE = f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES {MESSAGE_ROW}"
IMPORT_SESSION = f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({', '.join('?' * 21)})"
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
    " usage_output_tokens = usage_output_tokens + ?,"
    " usage_cache_read_tokens = usage_cache_read_tokens + ?,"
    " usage_cache_creation_tokens = usage_cache_creation_tokens + ?,"
    " updated_at = ?, version = version + 1"
    " WHERE id = ?"
)
MESSAGE_TOTALS = (
    " message_count = (SELECT count(*) FROM messages WHERE session_id = sessions.id),"
    " stored_tokens = (SELECT coalesce(sum(tokens), 0) FROM messages"
    "   WHERE session_id = sessions.id),"
    " usage_input_tokens = (SELECT coalesce(sum(usage_input_tokens), 0) FROM messages"
    "   WHERE session_id = sessions.id),"
    " usage_output_tokens = (SELECT coalesce(sum(usage_output_tokens), 0) FROM messages"
    "   WHERE session_id = sessions.id),"
    " usage_cache_read_tokens = (SELECT coalesce(sum(usage_cache_read_tokens), 0)"
    "   FROM messages WHERE session_id = sessions.id),"
    " usage_cache_creation_tokens = (SELECT coalesce(sum(usage_cache_creation_tokens), 0)"
    "   FROM messages WHERE session_id = sessions.id),"
)
"""The `SET` assignments giving a session the totals of the messages it has left."""
RECOMPUTE_TOTALS = (
    "UPDATE sessions SET"
    + MESSAGE_TOTALS
    + " cut_seq = CASE WHEN cut_seq > (SELECT coalesce(max(seq), 0) FROM messages"
    "   WHERE session_id = sessions.id) THEN 0 ELSE cut_seq END,"
    " last_seq = (SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = sessions.id),"
    " updated_at = ?, version = version + 1"
    f" WHERE id = ? RETURNING {SESSION_COLUMNS}"
)
MOVE_CUT_POINT = "UPDATE sessions SET cut_seq = ? WHERE id = ? AND version = ?"
"""`CutPointStore.move_cut_point`: a compare-and-set on the version, which it leaves as is."""
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
    " sum(usage_output_tokens) AS usage_out, sum(usage_cache_read_tokens) AS cache_read,"
    " sum(usage_cache_creation_tokens) AS cache_creation FROM sessions"
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


# -- branches: the prefix of a session copied into a new one (see `ForkStore`) -----------------

COPY_MESSAGES = (
    f"INSERT INTO messages ({MESSAGE_COLUMNS}) SELECT id, ?, seq, role, author, content,"
    " internal, created_at, tokens, usage_input_tokens, usage_output_tokens,"
    " usage_cache_read_tokens, usage_cache_creation_tokens, tool_calls,"
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
COPY_CUT_POINT = (
    "UPDATE sessions SET cut_seq = (SELECT cut_seq FROM sessions AS source WHERE source.id = ?)"
    " WHERE id = ?"
)
"""A branch starts at its source's cut point (`RECOMPUTE_TOTALS` then drops one past the
fork point), so its first window is the prefix its source's provider cache holds."""
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
        (COPY_CUT_POINT, (source_id, branch_id)),
    ]


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


PAGE_VERSION = ", (SELECT version FROM sessions WHERE id = ?) AS session_version"


def read_messages_query(
    session_id: str, query: MessageQuery, with_version: bool = False
) -> tuple[str, list[Any]]:
    """The page's query; `with_version` adds the session's `version` to every row (as
    `session_version`), read in the same statement, so of the same snapshot as the page."""
    clauses = ["session_id = ?"]
    params: list[Any] = [session_id, session_id] if with_version else [session_id]
    if not query.include_internal:
        clauses.append("NOT internal")
    if query.from_seq is not None:
        clauses.append("seq >= ?")
        params.append(query.from_seq)
    if query.to_seq is not None:
        clauses.append("seq <= ?")
        params.append(query.to_seq)
    columns = MESSAGE_COLUMNS + (PAGE_VERSION if with_version else "")
    sql = (
        f"SELECT {columns} FROM messages WHERE {' AND '.join(clauses)}"
        f" ORDER BY seq {'DESC' if query.newest_first else 'ASC'}"
    )
    if query.limit is not None:
        sql += " LIMIT ?"
        params.append(query.limit)
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


SELECT_APPEND_TARGET = "SELECT id, status, expires_at, last_seq, version FROM sessions WHERE id = ?"
"""Then the dialect's `row_lock`: the row writers to one session queue on."""


CLAIM_SEQS = (
    "UPDATE sessions SET last_seq = last_seq + ?, message_count = message_count + ?,"
    " stored_tokens = stored_tokens + ?, usage_input_tokens = usage_input_tokens + ?,"
    " usage_output_tokens = usage_output_tokens + ?,"
    " usage_cache_read_tokens = usage_cache_read_tokens + ?,"
    " usage_cache_creation_tokens = usage_cache_creation_tokens + ?,"
    " updated_at = ?, version = version + 1"
    " WHERE id = ? RETURNING id, status, expires_at, last_seq, version"
)
"""An append's fast path where the dialect `claims_by_update`: lock the session row, take the
next seqs and add the totals of drafts presumed all new, in one statement. The returned
`last_seq` and `version` are the new ones; the transaction is rolled back if the presumption fails."""


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


# -- message retention (`RetentionStore`) --------------------------------------------------------

COUNT_MESSAGES_BEFORE = (
    "SELECT count(*) AS n FROM messages WHERE session_id = ? AND created_at <= ?"
)
FIRST_SEQ_BEFORE = "SELECT min(seq) AS seq FROM messages WHERE session_id = ? AND created_at <= ?"
DELETE_MESSAGES_BEFORE = "DELETE FROM messages WHERE session_id = ? AND created_at <= ?"
RETOTAL_KEEPING_SEQ = "UPDATE sessions SET" + MESSAGE_TOTALS + " version = version + 1 WHERE id = ?"
"""After retention took old messages: the totals of those left and a new version, while
`last_seq`, `cut_seq` and `updated_at` stay (see `RetentionStore`)."""


def forget_before(session_id: str, first_seq: int) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that let go of what may hold the text of messages deleted from
    `first_seq` on (`RetentionStore`): the checkpoints covering any of them, and the traces
    of them and of every later reply."""
    return [
        ("DELETE FROM turn_traces WHERE session_id = ? AND seq >= ?", (session_id, first_seq)),
        (
            "DELETE FROM summaries WHERE session_id = ? AND covers_to_seq >= ?",
            (session_id, first_seq),
        ),
    ]


# -- erasure, tombstones and legal holds (`ErasureStore`) ---------------------------------------

SELECT_ERASABLE = (
    "SELECT id, project, legal_hold_at IS NOT NULL"
    " OR EXISTS (SELECT 1 FROM project_holds WHERE project_holds.project = sessions.project)"
    " AS held FROM sessions WHERE id = ?"
)
"""The session an erasure is about to remove, and whether a hold (its own or its project's)
keeps it; followed by the dialect's row lock."""
COUNT_ERASED = (
    "SELECT (SELECT count(*) FROM messages WHERE session_id = ?) AS messages,"
    " (SELECT count(*) FROM summaries WHERE session_id = ?) AS summaries,"
    " (SELECT count(*) FROM turn_traces WHERE session_id = ?) AS traces,"
    " (SELECT count(*) FROM agent_states WHERE session_id = ?) AS agent_states,"
    " (SELECT count(*) FROM turn_attempts WHERE session_id = ?) AS turn_attempts"
)
INSERT_TOMBSTONE = "INSERT INTO erased_sessions (id, project, erased_at) VALUES (?, ?, ?)"
SELECT_TOMBSTONES = "SELECT id, project, erased_at FROM erased_sessions WHERE id IN "
"""Then `placeholders(len(ids))`."""
DELETE_TOMBSTONES = "DELETE FROM erased_sessions WHERE id IN "
"""Then `placeholders(len(ids))`."""
HOLD_SESSION = "UPDATE sessions SET legal_hold_at = coalesce(legal_hold_at, ?) WHERE id = ?"
RELEASE_SESSION = "UPDATE sessions SET legal_hold_at = NULL WHERE id = ?"
HOLD_PROJECT = (
    "INSERT INTO project_holds (project, held_at) VALUES (?, ?) ON CONFLICT (project) DO NOTHING"
)
RELEASE_PROJECT = "DELETE FROM project_holds WHERE project = ?"
SELECT_HOLDS = (
    "SELECT project, NULL AS session_id, held_at FROM project_holds"
    " UNION ALL SELECT project, id AS session_id, legal_hold_at AS held_at FROM sessions"
    " WHERE legal_hold_at IS NOT NULL"
)
"""Every hold standing: projects' and sessions' (wrapped to filter and order)."""
SELECT_HELD = (
    "SELECT id FROM sessions WHERE (legal_hold_at IS NOT NULL OR EXISTS (SELECT 1 FROM"
    " project_holds WHERE project_holds.project = sessions.project)) AND id IN "
)
"""Then `placeholders(len(ids))`."""


def legal_holds_query(project: str | None) -> tuple[str, list[Any]]:
    """The holds standing, of `project` or all, as `ErasureStore.legal_holds` orders them."""
    where, params = ("WHERE project = ?", [project]) if project is not None else ("", [])
    order = "ORDER BY project, session_id IS NOT NULL, session_id"
    return (
        f"SELECT project, session_id, held_at FROM ({SELECT_HOLDS}) holds {where} {order}",
        params,
    )
