"""Rows to domain values and domain values to statement parameters, for every SQL dialect.

A row is read by column name (`dialect.Row`); times and JSON go through the dialect's
encoders, so these functions are the same on SQLite and PostgreSQL. Each `…_params` function
says which statement of `queries` its tuple fills.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from turnkeeper.storage.appends import AppendPlan, AppendTarget
from turnkeeper.storage.base import project_stats, session_stats
from turnkeeper.storage.codec import encode_cursor, to_ts
from turnkeeper.storage.sql.dialect import Dialect, Row
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
    Session,
    SessionStats,
    SessionStatus,
    SummaryCheckpoint,
    TurnAttempt,
    Usage,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


_FIELD_NAMES: dict[type[DataclassInstance], tuple[str, ...]] = {}
"""Each value type's field names, found once: a row is mapped for every message or session
read."""


def value_from_row(cls: type[T], row: Row, **decoded: Any) -> T:
    """A `cls` (a dataclass) whose every field is the row's column of the same name, taken as
    the driver gives it, except the fields in `decoded` (times, JSON, enums: what the dialect
    or the type must turn into the value)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    taken = {name: row[name] for name in names if name not in decoded}
    return cls(**taken, **decoded)


def turn_attempt_from_row(row: Row, d: Dialect) -> TurnAttempt:
    return value_from_row(TurnAttempt, row, lease_until=d.decode_ts(row["lease_until"]))


def branch_from_row(row: Row, d: Dialect) -> Branch:
    return value_from_row(Branch, row, created_at=d.decode_ts(row["created_at"]))


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
    return value_from_row(
        AgentState,
        row,
        execution_ms=int(row["execution_ms"]),
        updated_at=d.decode_ts(row["updated_at"]),
    )


def summary_from_row(row: Row, d: Dialect) -> SummaryCheckpoint:
    return value_from_row(SummaryCheckpoint, row, created_at=d.decode_ts(row["created_at"]))


# -- rows → domain values ---------------------------------------------------------------------


def session_from_row(row: Row, d: Dialect) -> Session:
    return value_from_row(
        Session,
        row,
        status=SessionStatus(row["status"]),
        created_at=d.decode_ts(row["created_at"]),
        updated_at=d.decode_ts(row["updated_at"]),
        expires_at=d.decode_ts_or_none(row["expires_at"]),
        metadata=d.decode_json(row["metadata"]),
    )


_ROLES = {role.value: role for role in Role}  # a dict lookup: far cheaper than Role(value)


def message_from_row(row: Row, d: Dialect) -> Message:
    usage = None
    if row["usage_input_tokens"] is not None or row["usage_output_tokens"] is not None:
        usage = Usage(
            row["usage_input_tokens"] or 0,
            row["usage_output_tokens"] or 0,
            row["usage_cache_read_tokens"] or 0,
            row["usage_cache_creation_tokens"] or 0,
        )
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
    return value_from_row(
        ApiKey,
        row,
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
    append's rows). A message's metadata is encoded as it is when it is a dict (a draft's is a
    copy of its own, `check_metadata`), and its tool calls as the tuple they are: the JSON
    text is the same, without a copy of either a message."""
    encode_json = d.encode_json
    last: tuple[datetime, Any] | None = None
    rows = []
    for message in messages:
        if last is None or last[0] is not message.created_at:
            last = (message.created_at, d.encode_ts(message.created_at))
        usage = message.usage
        tool_calls = message.tool_calls
        metadata = message.metadata
        rows.append(
            (
                message.id,
                session_id,
                message.seq,
                message.role.value,
                message.author,
                message.content,
                message.internal,
                last[1],
                message.tokens,
                usage.input_tokens if usage else None,
                usage.output_tokens if usage else None,
                usage.cache_read_input_tokens if usage else None,
                usage.cache_creation_input_tokens if usage else None,
                encode_json(tool_calls) if tool_calls is not None else None,
                message.tool_call_id,
                encode_json(metadata if type(metadata) is dict else dict(metadata)),
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
        0,
        0,
        d.encode_json(dict(session.metadata)),
        session.version,
        session.cut_seq,
    )


def page_from_rows(rows: Sequence[Row], limit: int, d: Dialect) -> Page[Session]:
    items = tuple(session_from_row(row, d) for row in rows[:limit])
    next_cursor = None
    if len(rows) > limit:
        last = items[-1]
        next_cursor = encode_cursor(to_ts(last.updated_at), last.id)
    return Page(items=items, next_cursor=next_cursor)


def append_target_from_row(row: Row, d: Dialect) -> AppendTarget:
    expires_at = row["expires_at"]
    return AppendTarget(
        id=row["id"],
        status=_STATUS_BY_VALUE[row["status"]],
        expires_at=None if expires_at is None else d.decode_ts(expires_at),
        last_seq=row["last_seq"],
        version=row["version"],
    )


_STATUS_BY_VALUE = {status.value: status for status in SessionStatus}
"""`SessionStatus(value)` without the enum call (once an append)."""


def _totals(added: Sequence[Message | MessageDraft]) -> tuple[int, ...]:
    """Count, stored tokens, usage input, output, cache read and cache creation tokens of the
    messages an append adds."""
    if len(added) == 1:  # a single append: no generators
        (only,) = added
        usage = only.usage
        if usage is None:
            return (1, only.tokens, 0, 0, 0, 0)
        return (
            1,
            only.tokens,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
        )
    usages = [m.usage for m in added if m.usage]
    return (
        len(added),
        sum(m.tokens for m in added),
        sum(u.input_tokens for u in usages),
        sum(u.output_tokens for u in usages),
        sum(u.cache_read_input_tokens for u in usages),
        sum(u.cache_creation_input_tokens for u in usages),
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
    first = min((d.decode_ts(row["first"]) for row in rows), default=None)
    last = max((d.decode_ts(row["last"]) for row in rows), default=None)
    return session_stats(session, by_role, internal, first, last)


def project_stats_from_rows(rows: Sequence[Row]) -> list[ProjectStats]:
    """Per-project totals from `PROJECT_STATS` rows (one per project and status)."""
    return project_stats(
        (
            row["project"],
            row["status"],
            int(row["sessions"]),
            *(
                int(row[name] or 0)
                for name in (
                    "messages",
                    "tokens",
                    "usage_in",
                    "usage_out",
                    "cache_read",
                    "cache_creation",
                )
            ),
        )
        for row in rows
    )
