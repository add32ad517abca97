"""The OpenAI Agents SDK's `Session` on turnkeeper: `Runner.run(agent, …, session=…)` keeps its
memory in a turnkeeper session, next to every other conversation and with its audit trail.

Rule: one SDK item is one turnkeeper message, translated as `turnkeeper.openai_items` says (the
translation the Conversations and Responses APIs use too). The message is what a person reading
the history (or turnkeeper's context builder) expects — user/assistant/system text, a function
call as an assistant tool call, its output as a tool message, reasoning and hosted-tool items as
internal assistant notes — and its metadata holds the item's JSON text exactly as the SDK's own
`SQLiteSession` stores it (`json.dumps`), so the SDK gets back the very item it stored, keys in
the same order, whichever of those stored it. Messages that other writers appended to the same
session (without an item) are offered to the SDK as the equivalent items.

Behaviour matches `SQLiteSession` call for call (tested side by side): `get_items(limit)` is the
latest `limit` items in chronological order (`limit=0` none, a negative limit all, `None` the
`session_settings.limit`), `pop_item` removes and returns the newest item, `clear_session`
empties the session. The session is created on the first `add_items`; one that has expired
holds no items (an expired conversation starts afresh).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from turnkeeper.adapters import MissingExtra
from turnkeeper.adapters._common import live_session, window_entries
from turnkeeper.errors import Conflict, SessionExpired, SessionNotFound
from turnkeeper.openai_items import ITEM_KEY, given_items, items_of, message_from_item
from turnkeeper.service.aio import AsyncTurnkeeper
from turnkeeper.types import Message, Session, StrategyName
from turnkeeper.validation import window_budget

try:
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the OpenAI Agents SDK (openai-agents)", "openai-agents") from exc

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

    from turnkeeper.service import Turnkeeper

__all__ = ["ITEM_KEY", "TurnkeeperSession", "item_to_message", "message_to_items"]

P = ParamSpec("P")
R = TypeVar("R")

item_to_message = message_from_item
"""The turnkeeper message that stores an SDK item (`turnkeeper.openai_items`)."""
message_to_items = items_of
"""The SDK items a stored message stands for (`turnkeeper.openai_items`)."""


class TurnkeeperSession:
    """An OpenAI Agents SDK `Session` whose `session_id` is a turnkeeper session key.

    `project` is the turnkeeper project the key lives in (default: the configured one);
    `session_options` are passed to `get_or_create_session` when the session is first made
    (`subject`, `kind`, `title`, `metadata`, `ttl`…).

    With `strategy` (and `budget_tokens`, `model` as for `Turnkeeper.context`), `get_items` hands
    the agent only what that turnkeeper context strategy keeps — the SDK would otherwise send
    the whole history every turn — with a summary or truncation marker as a system item where
    the strategy puts one. The store keeps everything; `limit` then applies to what is kept.

    `tk` is a `Turnkeeper` or an `AsyncTurnkeeper`. Each SDK call is one hop to a thread that
    does all its store work (a turn is one read and one write transaction): asyncio's default
    threads for a `Turnkeeper`, the `AsyncTurnkeeper`'s own workers for that (one per pooled
    PostgreSQL connection; SQLite's dedicated writer thread).
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        tk: Turnkeeper | AsyncTurnkeeper,
        *,
        project: str | None = None,
        session_settings: SessionSettings | None = None,
        strategy: StrategyName | str | None = None,
        budget_tokens: int | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        **session_options: Any,
    ) -> None:
        self.session_id = session_id
        self._async = tk if isinstance(tk, AsyncTurnkeeper) else None
        self.tk = tk.sync if isinstance(tk, AsyncTurnkeeper) else tk
        self.project = project
        self.session_settings = session_settings
        self.strategy = strategy
        self.budget_tokens = window_budget(budget_tokens, max_tokens, warn_as=type(self).__name__)
        self.model = model
        self._options = session_options
        self._known: Session | None = None

    # -- the Session protocol ---------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest `limit` items (all with None and no default limit), oldest first."""
        wanted = resolve_session_limit(limit, self.session_settings)
        return await self._hop(self._get_items, wanted)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, in order and atomically, creating the session if needed."""
        if items:
            await self._hop(self._add_items, items)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item and return it (None when there is none)."""
        return await self._hop(self._pop_item)

    async def clear_session(self) -> None:
        """Forget every item (the turnkeeper session stays, empty)."""
        await self._hop(self._clear)

    async def _hop(self, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """`work` on a thread: the `AsyncTurnkeeper`'s workers, else asyncio's default ones."""
        if self._async is not None:
            return await self._async.run_sync(work, *args, **kwargs)
        return await asyncio.to_thread(work, *args, **kwargs)

    # -- the work, on a worker thread: each SDK call is one hop ------------------------------

    def _live(self) -> Session | None:
        """The live session of the key. Once found, it is remembered while it is active and
        not past its expiry, so a turn costs one read and one write transaction, like
        `SQLiteSession`'s (a session archived or reset by another writer meanwhile is still
        found here, its items then read as they are)."""
        known = self._known
        if known is not None and not known.is_expired_at(self.tk.now()):
            return known
        self._known = live_session(self.tk, self.session_id, self.project)
        return self._known

    def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        session = self._live()
        if session is None or limit == 0:
            return []
        if self.strategy is not None:
            kept = self._trimmed(session)
            return kept if limit is None or limit < 0 else kept[-limit:]
        # The whole history right after an append (every turn of an agent loop) is the store
        # cache's page, carried over that append: no read of the messages.
        wanted = None if limit is None or limit < 0 else limit
        newest = self.tk.history(session, newest_first=True, limit=wanted)
        items: list[TResponseInputItem] = given_items(reversed(newest))
        return items if wanted is None else items[-wanted:]

    def _trimmed(self, session: Session) -> list[TResponseInputItem]:
        """The items of what the context strategy keeps, in the window's order."""
        entries = window_entries(
            self.tk,
            session,
            strategy=self.strategy,
            budget_tokens=self.budget_tokens,
            model=self.model,
        )
        items: list[Any] = []
        for entry in entries:
            if isinstance(entry, Message):
                items.extend(message_to_items(entry))
            else:  # a summary or a marker of what was left out
                items.append({"role": entry.role.value, "content": entry.content})
        return items

    def _add_items(self, items: list[TResponseInputItem]) -> None:
        messages = [item_to_message(item) for item in items]
        session = self._live()
        if session is not None:
            try:
                self.tk.append_many(session, messages)
                return
            except (Conflict, SessionExpired, SessionNotFound):
                self._known = None
                fresh = self._live()
                if fresh is not None and fresh.id == session.id:  # the failure was real
                    raise
        self._known, _ = self.tk.get_or_create_session(
            self.session_id, project=self.project, **self._options
        )
        self.tk.append_many(self._known, messages)

    def _pop_item(self) -> TResponseInputItem | None:
        session = self._live()
        if session is None:
            return None
        deleted = self.tk.pop_last_message(session)
        return None if deleted is None else message_to_items(deleted)[-1]

    def _clear(self) -> None:
        session = self._live()
        if session is not None:
            self.tk.reset_session(session)
        self._known = None
