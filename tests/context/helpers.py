"""Hand-built conversations for context tests: stored `Message`s counted like the service does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from turnkeeper.context.builder import ContextBuilder
from turnkeeper.context.formats import wire_name
from turnkeeper.context.history import ListHistory
from turnkeeper.context.selection import CutRule
from turnkeeper.context.summarizer import Summarizer
from turnkeeper.tokens import TokenCounter, counter_for
from turnkeeper.types import ContextWindow, CutMode, Message, MessageDraft, Role, StrategyName

APPROX = counter_for("approx_chars4")
SLIDE = CutRule(CutMode.SLIDE)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def call(call_id: str, name: str = "lookup", arguments: str = '{"q": 1}') -> dict[str, Any]:
    """An OpenAI-style tool call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tokens_of(
    role: str,
    content: str,
    *,
    counter: TokenCounter = APPROX,
    author: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    tool_call_id: str | None = None,
) -> int:
    return counter.count_message(
        role,
        content,
        name=wire_name(role, author),
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
    )


def msg(
    seq: int,
    role: Role | str,
    content: str = "",
    *,
    counter: TokenCounter = APPROX,
    author: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    tool_call_id: str | None = None,
    internal: bool = False,
    id: str | None = None,
) -> Message:
    """A stored message whose `tokens` were counted with `counter`."""
    role = Role(role)
    calls = tuple(tool_calls) if tool_calls else None
    return Message(
        id=id or f"m{seq}",
        session_id="s1",
        seq=seq,
        role=role,
        content=content,
        created_at=T0,
        tokens=tokens_of(
            role, content, counter=counter, author=author, tool_calls=calls,
            tool_call_id=tool_call_id,
        ),
        author=author,
        internal=internal,
        tool_calls=calls,
        tool_call_id=tool_call_id,
    )  # fmt: skip


def chat(*turns: tuple[str, str], counter: TokenCounter = APPROX) -> list[Message]:
    """Plain (role, content) turns, seqs from 1."""
    return [msg(i, role, text, counter=counter) for i, (role, text) in enumerate(turns, 1)]


def long_chat(
    turns: int, *, system: str | None = "You are terse.", words: int = 10
) -> list[Message]:
    """A system message (if given) and `turns` alternating user/assistant turns."""
    head = [("system", system)] if system else []
    body = [
        ("user" if i % 2 == 0 else "assistant", f"turn {i} " + "word " * words)
        for i in range(turns)
    ]
    return chat(*head, *body)


def draft(
    content: str,
    *,
    id: str = "pending-1",
    role: Role = Role.USER,
    tool_call_id: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
) -> MessageDraft:
    """The pending turn (its own `tokens` are not used: the builder recounts it)."""
    return MessageDraft(
        id=id,
        role=role,
        content=content,
        tokens=-1,
        created_at=T0,
        tool_call_id=tool_call_id,
        tool_calls=tuple(tool_calls) if tool_calls else None,
    )


def build(
    messages: Sequence[Message],
    strategy: StrategyName | str,
    budget: int = 100_000,
    *,
    keep_recent: int = 10,
    max_messages: int | None = None,
    pending: MessageDraft | None = None,
    counter: TokenCounter = APPROX,
    stored_encoding: str | None = None,
    summarizer: Summarizer | None = None,
    cut: CutRule = SLIDE,
) -> ContextWindow:
    """The window `strategy` builds of `messages`; by default in `slide` mode, the rule most
    of these tests pin (`cut` gives a stable rule and a stored cut point)."""
    builder = ContextBuilder(
        counter, stored_encoding=stored_encoding or counter.encoding, summarizer=summarizer
    )
    return builder.build(
        "s1",
        ListHistory(messages),
        strategy=StrategyName(strategy),
        budget=budget,
        keep_recent=keep_recent,
        max_messages=max_messages,
        pending=pending,
        cut=cut,
    )


def contents(window: ContextWindow) -> list[str]:
    return [message.content for message in window.messages]


def seqs(window: ContextWindow) -> list[int | None]:
    return [message.seq for message in window.messages]


class Failing:
    """A summarizer whose model is down: every call raises `error`."""

    method = "failing"

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error or TimeoutError("the summary model timed out")

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        raise self.error
