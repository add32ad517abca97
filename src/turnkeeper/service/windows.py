"""Context windows: the token budget of a build and the message list the model sees next.

A mixin of the `Turnkeeper` facade (`tk.context` is flat). Reads go through a lazy
`StoreHistory`, so a build costs what the window costs; an agent's perspective asks
`tk.agents` where the agent stands.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from turnkeeper import metrics, telemetry
from turnkeeper.context.builder import ContextBuilder, record_build
from turnkeeper.context.history import StoreHistory
from turnkeeper.context.tails import Tails
from turnkeeper.errors import InvalidInput
from turnkeeper.recent import RecentlyUsed
from turnkeeper.service.core import SessionRef, agent_name, refuse_expired
from turnkeeper.service.messages import Messages
from turnkeeper.storage.base import check_retry
from turnkeeper.tokens import context_window_for_model, counter_for, encoding_for_model
from turnkeeper.types import (
    ContextWindow,
    Message,
    MessageDraft,
    NewMessage,
    StrategyName,
)
from turnkeeper.validation import (
    check_non_negative,
    check_positive,
    check_strategy,
    window_budget,
)

REMEMBERED_WINDOWS = 64
"""Sessions whose newest window a service remembers (one window each)."""

_MEMO_STRATEGIES = frozenset(
    {StrategyName.SLIDING_WINDOW, StrategyName.TRUNCATE, StrategyName.RECENT, StrategyName.FULL}
)
"""Strategies whose window is a function of the stored messages and the build's arguments
alone (`summarize` may call a model and save checkpoints; it is always built)."""


class WindowMemo:
    """The last window built per session, under a key holding the session's `version`.

    Every write to a session moves its version (the cache's rule, `cache/store.py`), and the
    build reads the session row first, so a remembered window is handed out only while the
    session is exactly as it was when the window was built, on any replica. Building the same
    window again costs a few microseconds per message (a rendered entry and a unit each):
    with the caches on, an unchanged session's window is built once. Thread-safe, bounded
    to the `size` most recently used sessions."""

    def __init__(self, size: int = REMEMBERED_WINDOWS) -> None:
        self._entries: RecentlyUsed[str, tuple[Hashable, ContextWindow]] = RecentlyUsed(size)
        self.tails = Tails(size)
        """The tail each session's last build read, for the next build (`context.tails`)."""

    def get(self, session_id: str, key: Hashable) -> ContextWindow | None:
        found = self._entries.get(session_id)
        return None if found is None or found[0] != key else found[1]

    def put(self, session_id: str, key: Hashable, window: ContextWindow) -> None:
        self._entries.put(session_id, (key, window))


class Windows(Messages):
    """The context operations of `Turnkeeper` (they draft a pending turn as `append` would)."""

    _windows: WindowMemo | None
    """Remembered windows (None when the caches are off: `lru_size` 0)."""

    def budget_for(
        self,
        strategy: StrategyName,
        *,
        budget_tokens: int | None,
        reserved_tokens: int | None,
        model: str,
    ) -> int:
        """The token budget of a build: `budget_tokens - reserved_tokens`.

        Defaults: `truncate` uses its own `max_context_tokens` and `reserved_tokens`; every
        other strategy uses `budget_tokens` from the settings, or else `budget_ratio` × the
        model's context window, with nothing reserved. The default reserve belongs to the
        default budget: a caller who gives `budget_tokens` without `reserved_tokens` gets a
        window of at most `budget_tokens`, with nothing reserved.
        """
        if budget_tokens is not None:
            check_positive("budget_tokens", budget_tokens)
        if reserved_tokens is not None:
            check_non_negative("reserved_tokens", reserved_tokens)
        settings = self.settings
        if strategy is StrategyName.TRUNCATE:
            limit = budget_tokens or settings.max_context_tokens
            default_reserve = settings.reserved_tokens if budget_tokens is None else 0
            reserved = default_reserve if reserved_tokens is None else reserved_tokens
        else:
            window = context_window_for_model(model, settings.default_context_window)
            limit = (
                budget_tokens
                or settings.budget_tokens
                or math.floor(window * settings.budget_ratio)
            )
            reserved = reserved_tokens or 0
        if limit - reserved <= 0:
            raise InvalidInput(
                "reserved_tokens",
                f"{reserved} reserved tokens leave no room in a budget of {limit} tokens",
            )
        return limit - reserved

    @telemetry.traced_build
    def context(
        self,
        ref: SessionRef,
        *,
        strategy: StrategyName | str | None = None,
        budget_tokens: int | None = None,
        reserved_tokens: int | None = None,
        keep_recent: int | None = None,
        model: str | None = None,
        new_message: NewMessage | None = None,
        include_internal: bool | None = None,
        project: str | None = None,
        agent: str | None = None,
        trigger: int | None = None,
        max_tokens: int | None = None,
    ) -> ContextWindow:
        """Build the message list the model sees for the next turn, within `budget_tokens`
        (less `reserved_tokens`; see `budget_for`). `max_tokens` is the budget's old name,
        still accepted (deprecated: to a model API it is the reply's limit).

        `new_message` is the turn being answered, if it is not stored yet; if it is already
        stored (same id) it still appears once. `include_internal` defaults to False for
        `recent` (user-facing context) and True for the other strategies and for an
        agent's perspective.

        With `agent`, the window is that agent's perspective (`context.perspective`):
        the full history before the trigger (`new_message`, else the stored message with seq
        `trigger`, else the newest), others' turns attributed, the "while you were away" block
        after its `last_processed_seq`, the marker, the trigger; `strategy` does not apply, and
        the older history is summarized only when the whole does not fit the budget.

        Raises `SessionExpired` for an expired session and `ContextBudgetExceeded` when the
        triggering message alone cannot fit.
        """
        session = self.get_session(ref, project=project)
        refuse_expired(session)
        chosen = check_strategy(strategy or self.settings.strategy)
        model_name = model or self.settings.model
        budget = self.budget_for(
            chosen,
            budget_tokens=window_budget(budget_tokens, max_tokens, warn_as="context"),
            reserved_tokens=reserved_tokens,
            model=model_name,
        )
        recent = check_positive(
            "keep_recent",
            self.settings.keep_recent_messages if keep_recent is None else keep_recent,
        )
        if include_internal is None:  # an agent's perspective sees everything by default
            include_internal = chosen is not StrategyName.RECENT or agent is not None
        encoding = encoding_for_model(model_name, default=self.encoding)
        max_messages = (
            self.settings.max_history_messages if chosen is StrategyName.TRUNCATE else None
        )
        memo_key: Hashable = None
        memo = self._windows if new_message is None and agent is None else None
        if memo is not None and chosen in _MEMO_STRATEGIES:
            memo_key = (
                session.version, chosen, budget, include_internal, recent, max_messages, encoding
            )  # fmt: skip
            remembered = memo.get(session.id, memo_key)
            if remembered is not None:
                metrics.CACHE_HITS.labels("window").inc()
                record_build(remembered)
                return remembered
        page_size = StoreHistory.page_size_for(
            budget, session.stored_tokens / max(1, session.message_count)
        )
        tails = self._windows.tails if self._windows is not None and agent is None else None
        reader = (
            None
            if tails is None
            else tails.reader(
                self.store, session, include_internal=include_internal, page_size=page_size,
                encoding=encoding,
            )
        )  # fmt: skip
        history = reader or StoreHistory(
            self.store,
            session.id,
            messages_in_store=session.message_count,
            version=session.version,  # the caches need not read the session row again
            include_internal=include_internal,
            page_size=page_size,
        )
        # Checkpoints cover every stored message, so only a build that sees them all
        # may use (and extend) them; only summaries use them.
        checkpointed = include_internal and (agent is not None or chosen is StrategyName.SUMMARIZE)
        builder = ContextBuilder(
            counter_for(encoding),
            stored_encoding=self.encoding,
            summarizer=self._checkpointed(session.id) if checkpointed else self._summarizer,
            rendered=None if reader is None else reader.rendered,
        )
        pending = self.draft(new_message) if new_message is not None else None
        stored_pending = self._stored(session.id, pending)
        if stored_pending is not None and stored_pending.internal and not include_internal:
            pending = None  # stored, and not part of this view: no turn of its own either
        if agent is not None:
            name = agent_name("agent", agent)
            if trigger is not None:
                check_positive("trigger", trigger)
            return builder.build_perspective(
                session.id,
                history,
                agent=name,
                last_processed_seq=self.agents.position(session.id, name),
                budget=budget,
                trigger_seq=trigger,
                pending=pending,
            )
        window = builder.build(
            session.id,
            history,
            strategy=chosen,
            budget=budget,
            keep_recent=recent,
            max_messages=max_messages,
            pending=None if stored_pending is not None else pending,
        )
        if memo is not None and memo_key is not None:
            memo.put(session.id, memo_key, window)
        if tails is not None and reader is not None:  # the next build reads what this one read
            tails.remember(reader)
        return window

    def _appended(self, session_id: str, stored: list[Message]) -> None:
        """The next build may read these from memory, with the tail it remembers."""
        if self._windows is not None:
            self._windows.tails.appended(session_id, stored)

    def _stored(self, session_id: str, pending: MessageDraft | None) -> Message | None:
        """The stored message when the pending turn is stored already (same id, anywhere in the
        session): it is then part of the history, and must not be added a second time. The same
        id with other content is a `Conflict`, as appending it would be."""
        if pending is None:
            return None
        stored = self.store.find_messages(session_id, [pending.id]).get(pending.id)
        if stored is None:
            return None
        check_retry(stored, pending)
        return stored
