"""Values the contract tests build stores' inputs from: a fixed clock and small factories."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from turnkeeper.types import JSONObject, MessageDraft, NewSession, Role

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
"""The time every contract test starts at (stores take `now` as an argument, never the clock)."""

LATER = NOW + timedelta(minutes=5)
MISSING = "ffffffff-ffff-4fff-bfff-ffffffffffff"
"""A session id no store has."""


def new_session(
    project: str = "contract", *, metadata: JSONObject | None = None, **fields: Any
) -> NewSession:
    """A `NewSession` of `project` with the other fields given (`key`, `title`, `subject`,
    `kind`, `phase`, `expires_at`), checked by `NewSession` itself."""
    return NewSession(project=project, metadata=metadata or {}, **fields)


def draft(
    content: str = "hello",
    *,
    id: str | None = None,
    role: Role = Role.USER,
    tokens: int = 3,
    created_at: datetime = NOW,
    metadata: JSONObject | None = None,
    **fields: Any,
) -> MessageDraft:
    """A finished message as the service hands it to a store (a fresh id unless given), with
    the other fields given (`author`, `internal`, `usage`, `trace`, …)."""
    return MessageDraft(
        id=id or f"m-{uuid.uuid4().hex[:12]}",
        role=role,
        content=content,
        tokens=tokens,
        created_at=created_at,
        metadata=metadata or {},
        **fields,
    )
