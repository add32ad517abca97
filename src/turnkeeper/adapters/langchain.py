"""LangChain's chat history on turnkeeper: `RunnableWithMessageHistory` (or anything else that
takes a `BaseChatMessageHistory`) keeps its conversations in turnkeeper sessions.

Rule, as for the OpenAI Agents adapter: one LangChain message is one turnkeeper message that
reads as the conversation — human → user, ai → assistant (its tool calls as OpenAI-style tool
calls), system → system, tool → tool, a legacy function result → tool answering the function by
name, a chat message with a custom role → user message whose author is that role — while its
metadata holds LangChain's own serialization (`message_to_dict`), from which the message comes
back equal: type, content, `additional_kwargs`, `response_metadata`, tool calls, name and id.
Messages other writers appended to the session come back as the equivalent LangChain messages.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from turnkeeper.adapters import MissingExtra
from turnkeeper.adapters._common import content_text, live_session, window_entries
from turnkeeper.types import JSONObject, Message, NewMessage, Role, Session, StrategyName
from turnkeeper.validation import window_budget

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("LangChain (langchain-core)", "langchain") from exc

if TYPE_CHECKING:
    from turnkeeper.service import Turnkeeper

__all__ = [
    "MESSAGE_KEY",
    "TurnkeeperChatMessageHistory",
    "from_langchain",
    "to_langchain",
    "window_messages",
]

MESSAGE_KEY = "langchain_message"
"""Metadata key holding LangChain's serialization of the message."""

_CHAT_ROLES = {"human": Role.USER, "user": Role.USER, "ai": Role.ASSISTANT}
_CHAT_ROLES |= {"assistant": Role.ASSISTANT, "system": Role.SYSTEM, "developer": Role.SYSTEM}


class TurnkeeperChatMessageHistory(BaseChatMessageHistory):
    """The history of the turnkeeper session holding `key` (in `project`, default: the
    configured one). The session is created on the first write, with `session_options`
    (`subject`, `kind`, `title`, `metadata`, `ttl`…); one that expired reads as empty.

    With `strategy` (and `budget_tokens`, `model` as for `Turnkeeper.context`), `messages` is
    only what that context strategy keeps, a summary or truncation marker as a
    `SystemMessage` where the strategy puts one; the store keeps everything. (LangChain v1
    agents: see `turnkeeper.adapters.langchain_agents.TurnkeeperMiddleware`.)
    """

    def __init__(
        self,
        key: str,
        tk: Turnkeeper,
        *,
        project: str | None = None,
        strategy: StrategyName | str | None = None,
        budget_tokens: int | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        **session_options: Any,
    ) -> None:
        self.key = key
        self.tk = tk
        self.project = project
        self.strategy = strategy
        self.budget_tokens = window_budget(budget_tokens, max_tokens, warn_as=type(self).__name__)
        self.model = model
        self._options = session_options

    @property  # LangChain's documented way to serve `messages` from a store
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        session = live_session(self.tk, self.key, self.project)
        if session is None:
            return []
        if self.strategy is None:
            return [to_langchain(m) for m in self.tk.history(session)]
        return window_messages(
            self.tk,
            session,
            strategy=self.strategy,
            budget_tokens=self.budget_tokens,
            model=self.model,
        )

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages, in order and atomically."""
        if not messages:
            return
        session, _ = self.tk.get_or_create_session(self.key, project=self.project, **self._options)
        self.tk.append_many(session, [from_langchain(message) for message in messages])

    def clear(self) -> None:
        session = live_session(self.tk, self.key, self.project)
        if session is not None:
            self.tk.reset_session(session)

    # turnkeeper's API is synchronous: the async variants run it on a worker thread.

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.add_messages, messages)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)


def window_messages(
    tk: Turnkeeper,
    session: Session,
    *,
    strategy: StrategyName | str | None,
    budget_tokens: int | None,
    model: str | None,
) -> list[BaseMessage]:
    """The LangChain messages of the window a context strategy builds from the session."""
    return [
        to_langchain(entry) if isinstance(entry, Message) else SystemMessage(entry.content)
        for entry in window_entries(
            tk, session, strategy=strategy, budget_tokens=budget_tokens, model=model
        )
    ]


def from_langchain(message: BaseMessage) -> NewMessage:
    """The turnkeeper message that stores `message`: readable, and carrying it exactly."""
    metadata = {MESSAGE_KEY: message_to_dict(message)}
    text = content_text(message.content)
    author = message.name
    if isinstance(message, AIMessage):
        calls: list[JSONObject] | None = [_openai_call(c) for c in message.tool_calls] or None
        if not text and calls is None:
            text = "[empty ai message]"
        return NewMessage(
            role=Role.ASSISTANT, content=text, author=author, tool_calls=calls, metadata=metadata
        )
    if isinstance(message, ToolMessage):
        return NewMessage(
            role=Role.TOOL, content=text, tool_call_id=message.tool_call_id, metadata=metadata
        )
    if isinstance(message, FunctionMessage):  # the legacy API answers a function by its name
        return NewMessage(
            role=Role.TOOL, content=text, tool_call_id=message.name, metadata=metadata
        )
    if isinstance(message, ChatMessage):
        role = _CHAT_ROLES.get(message.role, Role.USER)
        author = author if message.role in _CHAT_ROLES else message.role
    else:
        role = Role.SYSTEM if isinstance(message, SystemMessage) else Role.USER
    return NewMessage(
        role=role, content=text or f"[empty {message.type} message]", author=author,
        metadata=metadata,
    )  # fmt: skip


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message a stored message stands for: the stored one when it carries
    it, else the equivalent of what another turnkeeper writer appended."""
    stored = message.metadata.get(MESSAGE_KEY)
    if isinstance(stored, dict):
        (restored,) = messages_from_dict([stored])
        return restored
    if message.role is Role.TOOL:
        return ToolMessage(content=message.content, tool_call_id=message.tool_call_id or "")
    if message.role is Role.ASSISTANT:
        calls = [_langchain_call(call) for call in message.tool_calls or ()]
        return AIMessage(content=message.content, name=message.author, tool_calls=calls)
    if message.role is Role.SYSTEM:
        return SystemMessage(content=message.content)
    return HumanMessage(content=message.content, name=message.author)


def _openai_call(call: Any) -> dict[str, Any]:
    return {
        "id": call.get("id") or call["name"],  # turnkeeper needs one; LangChain's may be None
        "type": "function",
        "function": {"name": call["name"], "arguments": json.dumps(call.get("args", {}))},
    }


def _langchain_call(call: Any) -> dict[str, Any]:
    function = call.get("function") or {}
    try:
        args = json.loads(function.get("arguments") or "{}")
    except json.JSONDecodeError:
        args = {"arguments": function.get("arguments")}
    return {
        "name": function.get("name", ""),
        "args": args,
        "id": call.get("id"),
        "type": "tool_call",
    }
