"""Values the contract tests build stores' inputs from: a fixed clock and small factories."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from turnkeeper.types import JSONObject, MessageDraft, NewSession, Role, Usage

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
"""The time every contract test starts at (stores take `now` as an argument, never the clock)."""

LATER = NOW + timedelta(minutes=5)
MISSING = "ffffffff-ffff-4fff-bfff-ffffffffffff"
"""A session id no store has."""


def new_session(
    project: str = "contract",
    *,
    key: str | None = None,
    title: str | None = None,
    subject: str | None = None,
    kind: str | None = None,
    phase: str | None = None,
    expires_at: datetime | None = None,
    metadata: JSONObject | None = None,
) -> NewSession:
    return NewSession(
        project=project,
        key=key,
        subject=subject,
        kind=kind,
        title=title,
        phase=phase,
        expires_at=expires_at,
        metadata=metadata or {},
    )


def draft(
    content: str = "hello",
    *,
    id: str | None = None,
    role: Role = Role.USER,
    tokens: int = 3,
    internal: bool = False,
    author: str | None = None,
    usage: Usage | None = None,
    metadata: JSONObject | None = None,
    trace: str | None = None,
    created_at: datetime = NOW,
) -> MessageDraft:
    """A finished message as the service hands it to a store (a fresh id unless given)."""
    return MessageDraft(
        id=id or f"m-{uuid.uuid4().hex[:12]}",
        role=role,
        content=content,
        tokens=tokens,
        created_at=created_at,
        author=author,
        internal=internal,
        usage=usage,
        metadata=metadata or {},
        trace=trace,
    )
