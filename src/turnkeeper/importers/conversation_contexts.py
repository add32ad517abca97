"""Import an older conversation service's PostgreSQL table `conversation_contexts` into turnkeeper.

One row is one session: `session_id` becomes the key (and the id, when it is a UUID as that service
makes them), its subject column (`bead_id`) the subject, `project_id` the project, `expires_at` the expiry, and the
JSONB `messages` array (`ChatMessage`: role, content, timestamp, token_count) the messages. The
row's cumulative `token_count` and its `metadata` (agent and provider ids) are kept in the
session's metadata; a message's `token_count` — the completion tokens that service records on
assistant turns — becomes that message's output usage.

The table is read with plain SQL from the URL given (`--source-db`); a schema other than the
default is chosen with the URL's `options=-csearch_path=…`. Errors name the row and the
message's index in its array (`conversation_contexts[session_id=…].messages[2]`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from turnkeeper.errors import BackendUnavailable, InvalidInput
from turnkeeper.importers.base import (
    Batch,
    ImportReport,
    ImportTarget,
    SourceMessage,
    build_batch,
    derived_id,
    parse_time,
)
from turnkeeper.types import NewMessage, Session, SessionStatus, Usage
from turnkeeper.validation import check_name

TABLE = "conversation_contexts"
QUERY = (
    "SELECT session_id, bead_id, project_id, messages, created_at, updated_at, expires_at,"
    f" token_count, metadata FROM {TABLE} ORDER BY created_at, session_id"
)


def read_batches(tk: ImportTarget, url: str, report: ImportReport) -> Iterator[Batch]:
    """One batch per row of `conversation_contexts` in the database at `url`."""
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError:  # pragma: no cover - psycopg comes with the postgres extra
        raise BackendUnavailable(
            "reading conversation_contexts needs psycopg: pip install 'turnkeeper[postgres]'"
        ) from None
    try:
        conn = psycopg.connect(url, row_factory=dict_row, connect_timeout=10)
    except psycopg.Error as exc:
        raise BackendUnavailable(f"cannot connect to the source database: {exc}") from None
    with conn:
        try:
            rows = conn.execute(QUERY)
        except psycopg.Error as exc:
            raise BackendUnavailable(f"cannot read {TABLE}: {exc}") from None
        for row in rows:
            batch = _batch(tk, row, report)
            if batch is not None:
                yield batch


def _batch(tk: ImportTarget, row: dict[str, Any], report: ImportReport) -> Batch | None:
    where = f"{TABLE}[session_id={row['session_id']}]"
    try:
        created_at = parse_time(row["created_at"], "created_at")
        if not isinstance(row["messages"], list):
            raise ValueError("messages must be a JSON array")
        session = Session(
            id=_session_id(row["session_id"]),
            project=check_name("project_id", row["project_id"]) or "",
            status=SessionStatus.ACTIVE,
            created_at=created_at,
            updated_at=parse_time(row["updated_at"], "updated_at"),
            key=check_name("session_id", row["session_id"]),
            subject=row["bead_id"],
            expires_at=parse_time(row["expires_at"], "expires_at"),
            metadata={
                **(row["metadata"] or {}),
                "token_count": row["token_count"],
                "source": TABLE,
            },
        )
    except (ValueError, TypeError, InvalidInput) as exc:
        report.errors.append(f"{where}: {exc}")
        return None
    messages = []
    for index, raw in enumerate(row["messages"]):
        try:
            messages.append(_message(f"{where}.messages[{index}]", raw, created_at))
        except ValueError as exc:
            report.errors.append(f"{where}.messages[{index}]: {exc}")
    return build_batch(tk, session, where, messages, report)


def _session_id(source: str) -> str:
    """The row's own id when it is a UUID (so links that carry it still work), else one
    derived from it."""
    try:
        return str(uuid.UUID(source))
    except ValueError:
        return derived_id(TABLE, source)


def _message(where: str, raw: Any, fallback: Any) -> SourceMessage:
    if not isinstance(raw, dict):
        raise ValueError("a message must be a JSON object")
    role, content = raw.get("role"), raw.get("content")
    if not isinstance(role, str):
        raise ValueError("missing role")
    if not isinstance(content, str):
        raise ValueError("content must be text")
    stamp = raw.get("timestamp")
    created_at = parse_time(stamp) if stamp is not None else fallback
    if created_at.year <= 1:  # Go's zero time: the service left it unset
        created_at = fallback
    count = raw.get("token_count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
        raise ValueError("token_count must be a non-negative integer")
    message = NewMessage(
        role=role,
        content=content,
        usage=Usage(0, count) if count and role == "assistant" else None,
        metadata={} if count is None else {"token_count": count},
    )
    return SourceMessage(where, f"{role}|{stamp}|{content}", message, created_at)
