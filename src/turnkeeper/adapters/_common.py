"""What both adapters need: the live session behind a key, and readable text from the
content-part lists frameworks use for multimodal messages."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from turnkeeper.errors import SessionNotFound
from turnkeeper.types import Session, SessionStatus

if TYPE_CHECKING:
    from turnkeeper.service import Turnkeeper


def live_session(tk: Turnkeeper, key: str, project: str | None) -> Session | None:
    """The active session holding `key`, or None: a framework's history of a session that
    never existed, was archived or has expired is empty (seed 000: an expired conversation
    starts afresh), and the next write makes a new session take the key."""
    try:
        session = tk.get_session(key, project=project)
    except SessionNotFound:
        return None
    return session if session.status is SessionStatus.ACTIVE else None


def content_text(value: Any) -> str:
    """The readable text of a message's content: a string, or its parts' texts joined by
    newlines (a part without text shows as `[its type]`)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(filter(None, (_part_text(part) for part in value)))
    return json.dumps(value)


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return str(part)
    for field in ("text", "refusal", "transcript"):
        if isinstance(part.get(field), str):
            return str(part[field])
    return f"[{part.get('type', 'part')}]"
