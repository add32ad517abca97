"""What the adapters share: the live session behind a key, the window a context strategy
keeps (as stored messages, so each comes back as the framework's own item), and readable text
from the content-part lists frameworks use for multimodal messages."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from turnkeeper.errors import SessionNotFound
from turnkeeper.types import ContextMessage, Message, Session, SessionStatus, StrategyName

if TYPE_CHECKING:
    from turnkeeper.service import Turnkeeper


def live_session(tk: Turnkeeper, key: str, project: str | None) -> Session | None:
    """The active session holding `key`, or None: a framework's history of a session that
    never existed, was archived or has expired is empty (an expired conversation starts
    afresh), and the next write makes a new session take the key."""
    try:
        session = tk.get_session(key, project=project)
    except SessionNotFound:
        return None
    return session if session.status is SessionStatus.ACTIVE else None


def window_entries(
    tk: Turnkeeper,
    session: Session,
    *,
    strategy: StrategyName | str | None,
    budget_tokens: int | None,
    model: str | None,
) -> list[Message | ContextMessage]:
    """What the context strategy keeps, in the window's order: the stored message for each
    entry that renders one (read back from the window's oldest seq on, not the whole history),
    and the entry itself for a summary or a marker of what was left out."""
    window = tk.context(session, strategy=strategy, budget_tokens=budget_tokens, model=model)
    seqs = [entry.seq for entry in window.messages if entry.seq is not None]
    stored = {m.id: m for m in tk.history(session, from_seq=min(seqs))} if seqs else {}
    return [
        stored.get(entry.message_id, entry) if entry.message_id else entry
        for entry in window.messages
    ]


def content_text(value: Any) -> str:
    """The readable text of a message's content: a string, or its parts' texts joined by
    newlines (a part without text shows as `[its type]`)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if len(value) == 1:  # one part with its text (the usual output message): no join
            (part,) = value
            if type(part) is dict and type(part.get("text")) is str:
                return part["text"]  # type: ignore[no-any-return]
        return "\n".join(filter(None, (_part_text(part) for part in value)))
    return json.dumps(value)


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return str(part)
    for field in ("text", "refusal", "transcript"):
        if isinstance(part.get(field), str):
            return str(part[field])
    return f"[{part.get('type', 'part')}]"
