"""The conversation context object, and the planner text made from it.

For an app whose context *is* the conversation (anonymous users, no profile), each request gets
a small digest of it: how long it is, whether this is the first message, the last few messages,
the entity ids earlier answers referred to (`metadata.referenced_ids` of assistant messages), and
a summary once the conversation is long. This module is pure: the service gathers the messages
(through the cached store) and the summary (through the rolling checkpoints).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from turnkeeper.records import to_ts
from turnkeeper.types import Message, Role

RECENT_MESSAGES = 10
"""The anonymous chat planner's CONTEXT_WINDOW_MESSAGES."""
PLANNER_MESSAGES = 5
PLANNER_TEXT_CHARS = 200
PLANNER_ENTITIES = 10


@dataclass(frozen=True, slots=True)
class RecentMessage:
    role: str
    text: str
    timestamp: datetime | None


@dataclass(frozen=True, slots=True)
class ConversationContext:
    """The anonymous chat planner's `ConversationContext`. The empty one (`empty`) is what a
    caller gets when the
    store cannot be reached: the turn goes on as a first message rather than fail."""

    conversation_id: str
    message_count: int = 0
    is_first_message: bool = True
    recent_messages: tuple[RecentMessage, ...] = ()
    referenced_entities: tuple[str, ...] = ()
    summary: str | None = None

    @classmethod
    def empty(cls, conversation_id: str) -> ConversationContext:
        return cls(conversation_id)

    def as_dict(self) -> dict[str, Any]:
        """The planner's dict shape (timestamps as ISO 8601 text)."""
        return {
            "conversation_id": self.conversation_id,
            "message_count": self.message_count,
            "is_first_message": self.is_first_message,
            "recent_messages": [
                {
                    "role": m.role,
                    "text": m.text,
                    "timestamp": to_ts(m.timestamp) if m.timestamp else "",
                }
                for m in self.recent_messages
            ],
            "referenced_entities": list(self.referenced_entities),
            "summary": self.summary,
        }


def referenced_ids(messages: Iterable[Message]) -> tuple[str, ...]:
    """Ids in assistant messages' `metadata.referenced_ids`, each once, first mention first
    (the planner used a set; keeping order makes the planner text stable)."""
    seen: dict[str, None] = {}
    for message in messages:
        if message.role is not Role.ASSISTANT:
            continue
        ids = message.metadata.get("referenced_ids") or []
        if isinstance(ids, list | tuple):
            seen.update((str(entity), None) for entity in ids)
    return tuple(seen)


def build(
    conversation_id: str,
    *,
    message_count: int,
    recent: Iterable[Message],
    referenced: tuple[str, ...],
    summary: str | None,
) -> ConversationContext:
    return ConversationContext(
        conversation_id=conversation_id,
        message_count=message_count,
        is_first_message=message_count <= 1,
        recent_messages=tuple(RecentMessage(m.role.value, m.content, m.created_at) for m in recent),
        referenced_entities=referenced,
        summary=summary,
    )


def planner_context(context: ConversationContext) -> str:
    """The anonymous chat planner's `build_planner_context`: the summary line, the last 5
    messages cut to 200
    characters, the first-message note, and up to 10 referenced entities."""
    parts: list[str] = []
    if context.summary:
        parts.append(f"Conversation summary: {context.summary}")
    if context.recent_messages:
        parts.append("Recent conversation:")
        for message in context.recent_messages[-PLANNER_MESSAGES:]:
            parts.append(f"  {message.role}: {message.text[:PLANNER_TEXT_CHARS]}")
    if context.is_first_message:
        parts.append("This is the user's first message in this conversation.")
    if context.referenced_entities:
        entities = ", ".join(context.referenced_entities[:PLANNER_ENTITIES])
        parts.append(f"Previously mentioned entities: {entities}")
    return "\n".join(parts)
