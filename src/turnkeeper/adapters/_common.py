"""What the adapters share: the live session behind a key, the window a context strategy
keeps (as stored messages, so each comes back as the framework's own item), and readable text
from the content-part lists frameworks use for multimodal messages (`content_text`, the one
`turnkeeper.openai_items` reads items with)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnkeeper.errors import SessionNotFound
from turnkeeper.openai_items import content_text
from turnkeeper.types import ContextMessage, Message, Session, SessionStatus, StrategyName

if TYPE_CHECKING:
    from turnkeeper.service import Turnkeeper

__all__ = ["content_text", "live_session", "window_entries"]


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
