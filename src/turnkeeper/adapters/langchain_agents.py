"""LangChain v1 agents on turnkeeper: `create_agent(model, tools, middleware=[TurnkeeperMiddleware
(tk, strategy=…, budget_tokens=…)])` keeps the agent's conversation in a turnkeeper session and shows
the model turnkeeper's window of it.

LangChain v1 replaced `RunnableWithMessageHistory` (now deprecated) with agent middleware; this is
turnkeeper's. Its three hooks:

- before the model: the messages of the agent's state that are not stored yet (the user's turn,
  tool results) are appended to the session;
- around the model call: the model is sent the window turnkeeper builds from the session under
  the chosen strategy and budget, instead of the whole state — so a long conversation stays in
  budget and an earlier one (another process, another day) is remembered;
- after the model: its reply is appended.

Messages are stored as `TurnkeeperChatMessageHistory` stores them (readable, and LangChain's own
serialization in the metadata), under ids derived from the LangChain message ids LangGraph gives
every message of the state, so storing the state again stores nothing twice.

The conversation is the session holding `key`; without one, each invocation names it by its
LangGraph thread (`config={"configurable": {"thread_id": …}}`), as checkpointers do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from turnkeeper.adapters import MissingExtra
from turnkeeper.adapters.langchain import from_langchain, window_messages
from turnkeeper.errors import InvalidInput
from turnkeeper.types import NewMessage, Session, StrategyName
from turnkeeper.validation import window_budget

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import ModelResponse
    from langchain_core.messages import AnyMessage, BaseMessage
    from langgraph.config import get_config
    from langgraph.runtime import Runtime
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("LangChain (langchain)", "langchain") from exc

if TYPE_CHECKING:
    from turnkeeper.service import Turnkeeper

__all__ = ["TurnkeeperMiddleware"]


class TurnkeeperMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Agent middleware that remembers the conversation in turnkeeper and builds the model's
    window from it (`strategy`, `budget_tokens`, `model` as for `Turnkeeper.context`; None: the
    configured defaults). `project` and `session_options` (`subject`, `kind`, `title`,
    `metadata`, `ttl`…) apply when the session is first made."""

    def __init__(
        self,
        tk: Turnkeeper,
        *,
        key: str | None = None,
        project: str | None = None,
        strategy: StrategyName | str | None = None,
        budget_tokens: int | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        **session_options: Any,
    ) -> None:
        super().__init__()
        self.tk = tk
        self.key = key
        self.project = project
        self.strategy = strategy
        self.budget_tokens = window_budget(budget_tokens, max_tokens, warn_as=type(self).__name__)
        self.model = model
        self._options = session_options

    # -- the hooks ---------------------------------------------------------------------------

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._store(state["messages"])
        return None

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._store(state["messages"])
        return None

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(request.override(messages=self._window()))

    # turnkeeper's API is synchronous: the async hooks run it on a worker thread.

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        await asyncio.to_thread(self._store, state["messages"])
        return None

    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        await asyncio.to_thread(self._store, state["messages"])
        return None

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        window = await asyncio.to_thread(self._window)  # (to_thread carries LangGraph's config)
        return await handler(request.override(messages=window))

    # -- the work ------------------------------------------------------------------------------

    def _key(self) -> str:
        if self.key is not None:
            return self.key
        thread = get_config().get("configurable", {}).get("thread_id")
        if thread is None:
            raise InvalidInput(
                "key",
                "give TurnkeeperMiddleware(key=…) or invoke the agent with "
                "config={'configurable': {'thread_id': …}}",
            )
        return str(thread)

    def _session(self) -> Session:
        session, _ = self.tk.get_or_create_session(
            self._key(), project=self.project, **self._options
        )
        return session

    def _store(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages not stored yet: those after the session's newest message when
        the state holds it (a checkpointed state holds the whole conversation), else all of
        them (appending a stored id is a no-op, so nothing is stored twice either way)."""
        session = self._session()
        new = [_stored_as(session, message) for message in messages]
        newest = self.tk.history(session, newest_first=True, limit=1)
        ids = [message.id for message in new]
        if newest and newest[0].id in ids:
            new = new[len(ids) - ids[::-1].index(newest[0].id) :]
        if new:
            self.tk.append_many(session, new)

    def _window(self) -> list[AnyMessage]:
        window = window_messages(
            self.tk, self._session(), strategy=self.strategy, budget_tokens=self.budget_tokens,
            model=self.model,
        )  # fmt: skip
        return list[AnyMessage](window)  # type: ignore[arg-type]


def _stored_as(session: Session, message: BaseMessage) -> NewMessage:
    """`from_langchain`'s message, with an id derived from the LangChain one (message ids are
    unique database-wide, so it is scoped by the session)."""
    new = from_langchain(message)
    if message.id is None:
        return new
    scoped = f"{session.id}.lc.{message.id}"
    if len(scoped) > 255:
        scoped = f"{session.id}.lc.{hashlib.sha256(message.id.encode()).hexdigest()}"
    return dataclasses.replace(new, id=scoped)
