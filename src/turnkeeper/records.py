"""Domain values ↔ plain JSON data: the one place a record's wire shape is written.

Every reader and writer of turnkeeper's data outside the database speaks these shapes: the JSONL
export and archive (`turnkeeper.jsonl`), the CLI's `--json` output, the Redis cache's entries
(`turnkeeper.cache`) and the HTTP service's payloads where they carry the same fields. Keeping the
shapes in a leaf module (it imports only the foundation's `types`, `jsonenc` and `validation`) is
what lets all of them share it without importing one another: the cache needs no part of the
export format's machinery, and the export format none of the importers'.

Times are fixed-width UTC ISO 8601 strings (`to_ts`), which sort in time order as text.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from turnkeeper import jsonenc
from turnkeeper.types import (
    AgentState,
    ContextReport,
    Message,
    Role,
    SeqRanges,
    Session,
    SessionStats,
    SessionStatus,
    SummaryCheckpoint,
    Usage,
)
from turnkeeper.validation import MAX_TRACE_DEPTH

FORMAT_VERSION = 2
"""The JSONL export format a `session` record declares. Format 2 added the trace records."""


# -- times -----------------------------------------------------------------------------------


def to_ts(value: datetime) -> str:
    """A fixed-width UTC ISO 8601 string: sorts lexicographically in time order."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def to_ts_or_none(value: datetime | None) -> str | None:
    return None if value is None else to_ts(value)


def from_ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def from_ts_or_none(value: str | None) -> datetime | None:
    return None if value is None else from_ts(value)


# -- sessions, messages, traces (the JSONL records) -------------------------------------------


def session_record(session: Session) -> dict[str, Any]:
    return {
        "type": "session",
        "format": FORMAT_VERSION,
        "id": session.id,
        "key": session.key,
        "project": session.project,
        "subject": session.subject,
        "kind": session.kind,
        "title": session.title,
        "phase": session.phase,
        "status": session.status.value,
        "created_at": to_ts(session.created_at),
        "updated_at": to_ts(session.updated_at),
        "expires_at": to_ts_or_none(session.expires_at),
        "message_count": session.message_count,
        "last_seq": session.last_seq,
        "stored_tokens": session.stored_tokens,
        "usage_input_tokens": session.usage_input_tokens,
        "usage_output_tokens": session.usage_output_tokens,
        "metadata": dict(session.metadata),
        "version": session.version,
        "cut_seq": session.cut_seq,
    }


def session_from_record(record: dict[str, Any]) -> Session:
    return Session(
        id=record["id"],
        key=record.get("key"),
        project=record["project"],
        subject=record.get("subject"),
        kind=record.get("kind"),
        title=record.get("title"),
        phase=record.get("phase"),
        status=SessionStatus(record["status"]),
        created_at=from_ts(record["created_at"]),
        updated_at=from_ts(record["updated_at"]),
        expires_at=from_ts_or_none(record.get("expires_at")),
        message_count=whole(record, "message_count", 0),
        last_seq=whole(record, "last_seq", 0),
        stored_tokens=whole(record, "stored_tokens", 0),
        usage_input_tokens=whole(record, "usage_input_tokens", 0),
        usage_output_tokens=whole(record, "usage_output_tokens", 0),
        metadata=json_object(record.get("metadata"), "metadata"),
        version=whole(record, "version", 0),
        cut_seq=whole(record, "cut_seq", 0),
    )


def message_record(message: Message) -> dict[str, Any]:
    return {
        "type": "message",
        "id": message.id,
        "session_id": message.session_id,
        "seq": message.seq,
        "role": message.role.value,
        "author": message.author,
        "content": message.content,
        "internal": message.internal,
        "created_at": to_ts(message.created_at),
        "tokens": message.tokens,
        "usage": None if message.usage is None else message.usage.counts(),
        "tool_calls": list(message.tool_calls) if message.tool_calls is not None else None,
        "tool_call_id": message.tool_call_id,
        "metadata": dict(message.metadata),
    }


def message_from_record(record: dict[str, Any]) -> Message:
    usage = record.get("usage")
    tool_calls = record.get("tool_calls")
    content = record["content"]
    if not isinstance(content, str):
        raise ValueError("content must be text")
    if usage is not None and not isinstance(usage, dict):
        raise ValueError("usage must be an object of input_tokens and output_tokens")
    return Message(
        id=str(record["id"]),
        session_id=str(record["session_id"]),
        seq=whole(record, "seq"),
        role=Role(record["role"]),
        author=record.get("author"),
        content=content,
        internal=record.get("internal", False),  # a bool; an import's `draft` checks it
        created_at=from_ts(record["created_at"]),
        tokens=whole(record, "tokens"),
        usage=None
        if usage is None
        else Usage(
            whole(usage, "input_tokens"),
            whole(usage, "output_tokens"),
            whole(usage, "cache_read_input_tokens", 0),
            whole(usage, "cache_creation_input_tokens", 0),
        ),
        tool_calls=tuple(tool_calls) if tool_calls is not None else None,
        tool_call_id=record.get("tool_call_id"),
        metadata=json_object(record.get("metadata"), "metadata"),
    )


def trace_record(session_id: str, seq: int, data: str) -> dict[str, Any]:
    """A stored trace: the reply's seq and the trace document as stored (its window entries
    refer to the exported messages by seq, which import keeps)."""
    trace = jsonenc.loads_within(data, MAX_TRACE_DEPTH)
    return {"type": "trace", "session_id": session_id, "seq": seq, "trace": trace}


def trace_from_record(record: dict[str, Any], replies: set[int]) -> tuple[int, str]:
    """`(seq, data)` of a trace record; its seq must be a reply exported before it."""
    seq = record["seq"]
    if not isinstance(seq, int) or seq not in replies:
        raise ValueError(f"trace seq {seq!r} is not an assistant message of its session")
    trace = json_object(record["trace"], "trace")
    return seq, json.dumps(trace, separators=(",", ":"), ensure_ascii=False)


def whole(record: Mapping[str, Any], name: str, default: int | None = None) -> int:
    """The integer `record[name]` (`default` when it is absent, if given); `ValueError` naming
    it if it is anything else (a float, a numeral in a string, true), rather than `int()`'s
    guess at one."""
    value = record[name] if default is None else record.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    return value


def json_object(value: Any, name: str) -> dict[str, Any]:
    """`value` as a JSON object (None: empty); `ValueError` naming `name` if it is not one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object")
    return value


# -- statistics, summaries, agent states (cache entries, `--json`) ----------------------------


def stats_record(stats: SessionStats) -> dict[str, Any]:
    record = _fields(stats)
    record["messages_by_role"] = dict(stats.messages_by_role)
    return record


def stats_from_record(record: dict[str, Any]) -> SessionStats:
    return SessionStats(
        **{
            **record,
            "first_message_at": from_ts_or_none(record["first_message_at"]),
            "last_message_at": from_ts_or_none(record["last_message_at"]),
        }
    )


def summary_record(checkpoint: SummaryCheckpoint) -> dict[str, Any]:
    return _fields(checkpoint)


def summary_from_record(record: dict[str, Any]) -> SummaryCheckpoint:
    return SummaryCheckpoint(**{**record, "created_at": from_ts_or_none(record["created_at"])})


def agent_state_record(state: AgentState) -> dict[str, Any]:
    return _fields(state)


def agent_state_from_record(record: dict[str, Any]) -> AgentState:
    return AgentState(**{**record, "updated_at": from_ts_or_none(record["updated_at"])})


# -- anything else ----------------------------------------------------------------------------


def seq_runs(seqs: SeqRanges) -> list[list[int]]:
    """A set of seqs as its runs, `[[first, last], …]` (inclusive): the wire shape of every
    seq set of a report or a trace, so naming a hundred thousand dropped messages is a pair."""
    return [[first, last] for first, last in seqs.runs]


def plain(value: Any) -> Any:
    """Any domain value as plain JSON data: sessions and messages in their JSONL shapes,
    other dataclasses field by field, times as `to_ts` strings, enums as their values."""
    if isinstance(value, Session):
        return session_record(value)
    if isinstance(value, Message):
        return message_record(value)
    if isinstance(value, ContextReport):
        return {**_fields(value), "truncated": value.truncated}
    if isinstance(value, SeqRanges):
        return seq_runs(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if isinstance(value, datetime):
        return to_ts(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
