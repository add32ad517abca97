"""Context windows: the token budget of a build and the message list the model sees next.

A part of `Turnkeeper` (`tk.context` is flat). `context()` resolves the strategy (an object
that declares its budget rule, its defaults and what it may remember: `context.strategies`)
and hands the build over; it knows no strategy by name. Reads go through a lazy
`StoreHistory`, so a build costs what the window costs, and the store's cache remembers the
pages; the one memo above it is the last window per session (`cache.windows`), with the
entries its build rendered, which a build of the same version for other arguments reuses. An
agent's perspective asks `tk.agents` where the agent stands.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace

from turnkeeper import telemetry
from turnkeeper.cache.windows import Rendered, WindowCache
from turnkeeper.context.builder import ContextBuilder, record_build
from turnkeeper.context.history import StoreHistory
from turnkeeper.context.registry import Strategies
from turnkeeper.context.retrieval import FullTextRetriever
from turnkeeper.context.selection import CutRule
from turnkeeper.context.strategies import Strategy
from turnkeeper.errors import InvalidInput
from turnkeeper.service.core import AgentPositions, Core, SessionRef, agent_name, refuse_expired
from turnkeeper.service.messages import Messages
from turnkeeper.storage.base import CutPointStore, check_retry
from turnkeeper.tokens import counter_for, encoding_for_model
from turnkeeper.types import ContextWindow, Message, MessageDraft, NewMessage, Session, StrategyName
from turnkeeper.validation import check_non_negative, check_positive, window_budget


@dataclass(frozen=True, slots=True)
class _Request:
    """One build's arguments, resolved: what every strategy (and a perspective) is built with."""

    session: Session
    budget: int
    keep_recent: int
    include_internal: bool
    encoding: str
    pending: MessageDraft | None
    stored_pending: Message | None
    preview: bool = False


class Windows:
    """The context operations of `Turnkeeper` (they draft a pending turn as `append` would)."""

    def __init__(self, core: Core, messages: Messages, agents: AgentPositions) -> None:
        self.core = core
        self._messages = messages
        self._agents = agents
        self.strategies = Strategies()
        """The strategies this service knows by name: the built-ins, and any registered."""
        self._remembers = bool(core.settings.lru_size)
        self._remembered = WindowCache()
        self._retriever = FullTextRetriever(core.store)
        """What `relevant` recalls with unless given a retriever: the store's full-text index."""

    def forget(self, session_id: str) -> None:
        """Drop the window remembered of the session (it was erased)."""
        self._remembered.forget(session_id)

    def budget_for(
        self,
        strategy: Strategy | StrategyName | str,
        *,
        budget_tokens: int | None,
        reserved_tokens: int | None,
        model: str,
    ) -> int:
        """The token budget of a build: the strategy's limit less its reserve.

        Defaults (each strategy's `budget_rule`): `truncate` uses its own `max_context_tokens`
        and `reserved_tokens`; every other strategy uses `budget_tokens` from the settings, or
        else `budget_ratio` × the model's context window, with nothing reserved. The default
        reserve belongs to the default budget: a caller who gives `budget_tokens` without
        `reserved_tokens` gets a window of at most `budget_tokens`, with nothing reserved.
        """
        if budget_tokens is not None:
            check_positive("budget_tokens", budget_tokens)
        if reserved_tokens is not None:
            check_non_negative("reserved_tokens", reserved_tokens)
        limit, reserved = self.strategies.resolve(strategy).budget_rule(
            self.core.settings,
            budget_tokens=budget_tokens,
            reserved_tokens=reserved_tokens,
            model=model,
        )
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
        strategy: Strategy | StrategyName | str | None = None,
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
        preview: bool = False,
    ) -> ContextWindow:
        """Build the message list the model sees for the next turn, within `budget_tokens`
        (less `reserved_tokens`; see `budget_for`). `max_tokens` is the budget's old name,
        still accepted (deprecated: to a model API it is the reply's limit).

        `strategy` is a name (a built-in, or one registered with `tk.strategies.register`) or
        a `turnkeeper.Strategy` object. `new_message` is the turn being answered, if it is not
        stored yet; if it is already stored (same id) it still appears once.
        `include_internal` defaults to the strategy's (False for `recent`, True for the
        others) and to True for an agent's perspective.

        With `agent`, the window is that agent's perspective (`context.perspective`):
        the full history before the trigger (`new_message`, else the stored message with seq
        `trigger`, else the newest), others' turns attributed, the "while you were away" block
        after its `last_processed_seq`, the marker, the trigger; `strategy` does not apply, and
        the older history is summarized only when the whole does not fit the budget. A
        `preview` stores nothing, not even where the session's cut point moved (`_held`).

        Raises `SessionExpired` for an expired session and `ContextBudgetExceeded` when the
        triggering message alone cannot fit.
        """
        session = self.core.get_session(ref, project=project)
        refuse_expired(session)
        chosen = self.strategies.resolve(strategy or self.core.settings.strategy)
        budget = window_budget(budget_tokens, max_tokens, warn_as="context")
        model_name = model or self.core.settings.model
        request = self._request(
            session,
            budget=self.budget_for(
                chosen, budget_tokens=budget, reserved_tokens=reserved_tokens, model=model_name
            ),
            keep_recent=keep_recent,
            include_internal=(
                include_internal
                if include_internal is not None
                else chosen.include_internal or agent is not None
            ),
            encoding=encoding_for_model(model_name, default=self.core.encoding),
            new_message=new_message,
        )
        if agent is not None:
            return self._perspective(request, agent_name("agent", agent), trigger)
        return self._held(replace(request, preview=preview), chosen)

    def _request(
        self,
        session: Session,
        *,
        budget: int,
        keep_recent: int | None,
        include_internal: bool,
        encoding: str,
        new_message: NewMessage | None,
    ) -> _Request:
        """The build's arguments checked and resolved; the pending turn drafted, and left out
        when it is stored already as an internal message this view does not show."""
        recent = check_positive(
            "keep_recent",
            self.core.settings.keep_recent_messages if keep_recent is None else keep_recent,
        )
        pending = self._messages.draft(new_message) if new_message is not None else None
        stored_pending = self._stored(session.id, pending)
        if stored_pending is not None and stored_pending.internal and not include_internal:
            pending = None  # stored, and not part of this view: no turn of its own either
        return _Request(
            session, budget, recent, include_internal, encoding, pending, stored_pending
        )

    def _build(self, request: _Request, strategy: Strategy) -> ContextWindow:
        """The window `strategy` selects, or the one remembered for the same build of the
        session as it stands (`cache.windows`). Checkpoints cover every stored message, so
        only a build that sees them all may use (and extend) them, and only if the strategy
        may."""
        session_id = request.session.id
        key = self._cache_key(request, strategy)
        remembered = None if key is None else self._remembered.get(session_id, key)
        if remembered is not None:
            record_build(remembered)  # logged and counted as a build, as it was one
            return remembered
        checkpointed = strategy.uses_checkpoints and request.include_internal
        builder = self._builder(request, checkpointed=checkpointed)
        version = request.session.version
        if key is not None:  # entries of the remembered build of this version: not made again
            builder.rendered.update(
                self._remembered.rendered(session_id, version, request.encoding)
            )
        window = builder.build(
            session_id,
            self._history(request),
            strategy=strategy,
            budget=request.budget,
            keep_recent=request.keep_recent,
            max_messages=self.core.settings.max_history_messages,
            pending=None if request.stored_pending is not None else request.pending,
            session=request.session,
            retriever=self._retriever,
            cut=self._cut_rule(request.session),
        )
        if key is not None:
            rendered = Rendered(version, request.encoding, builder.rendered)
            held = window.report.cut_seq
            if held is not None and not request.preview:  # the cut point it is stored at now
                key = self._cache_key(request, strategy, cut=held)
            self._remembered.put(session_id, key, window, rendered)
        return window

    def _cache_key(
        self, request: _Request, strategy: Strategy, *, cut: int | None = None
    ) -> Hashable | None:
        """What a remembered window must have been built from, the session's version first,
        then its cut point (`cut`, else the stored one: a build that moved the cut point is
        remembered under the new one, from which the same build gives the same window);
        None for a build whose window is not remembered (caches off, a pending turn, a
        strategy that may call a model and write checkpoints, or one whose window depends on
        more than the stored session: `window_per_version`)."""
        pending = request.pending is not None or request.stored_pending is not None
        if not self._remembers or pending or strategy.uses_checkpoints:
            return None
        if not strategy.window_per_version:
            return None
        return (
            request.session.version,
            request.session.cut_seq if cut is None else cut,
            strategy, request.budget,
            request.include_internal, request.keep_recent,
            self.core.settings.max_history_messages, request.encoding,
        )  # fmt: skip

    def _cut_rule(self, session: Session) -> CutRule:
        """The session's stored cut point, under the settings' rule for it."""
        settings = self.core.settings
        return CutRule(
            settings.window_cut, session.cut_seq,
            high=settings.cut_high_watermark, low=settings.cut_low_watermark,
        )  # fmt: skip

    def _held(self, request: _Request, strategy: Strategy) -> ContextWindow:
        """The window `strategy` selects (`_build`), with the cut point it holds stored when
        it moved (not for a preview): with the version the window was built from, so a build
        of an older state never overwrites the cut point of a newer one
        (`CutPointStore.move_cut_point`)."""
        window = self._build(request, strategy)
        session, cut = request.session, window.report.cut_seq
        if request.preview or cut is None or cut == session.cut_seq:
            return window
        store = self.core.store
        if not isinstance(store, CutPointStore):
            return window
        if not store.move_cut_point(session.id, cut, version=session.version):
            # A build that saved a summary checkpoint moved the version itself: the history
            # is the one the window was built from while no message came or went meanwhile.
            now = store.get_session(session.id) if strategy.uses_checkpoints else session
            if now is not session and (now.last_seq, now.message_count) == (
                session.last_seq, session.message_count,
            ):  # fmt: skip
                store.move_cut_point(session.id, cut, version=now.version)
        return window

    def _perspective(self, request: _Request, agent: str, trigger: int | None) -> ContextWindow:
        """`agent`'s view of the session (see `context`), summarized with checkpoints when the
        view sees every message."""
        if trigger is not None:
            check_positive("trigger", trigger)
        session_id = request.session.id
        builder = self._builder(request, checkpointed=request.include_internal)
        return builder.build_perspective(
            session_id,
            self._history(request),
            agent=agent,
            last_processed_seq=self._agents.position(session_id, agent),
            budget=request.budget,
            trigger_seq=trigger,
            pending=request.pending,
        )

    def _builder(self, request: _Request, *, checkpointed: bool) -> ContextBuilder:
        core = self.core
        return ContextBuilder(
            counter_for(request.encoding),
            stored_encoding=core.encoding,
            summarizer=core.checkpointed(request.session.id) if checkpointed else core.summarizer,
        )

    def _history(self, request: _Request) -> StoreHistory:
        """The session's history, read lazily a page at a time: the first page sized to what
        the budget holds at the session's average message size."""
        session = request.session
        return StoreHistory(
            self.core.store,
            session.id,
            messages_in_store=session.message_count,
            version=session.version,  # the caches need not read the session row again
            include_internal=request.include_internal,
            page_size=StoreHistory.page_size_for(
                request.budget, session.stored_tokens / max(1, session.message_count)
            ),
        )

    def _stored(self, session_id: str, pending: MessageDraft | None) -> Message | None:
        """The stored message when the pending turn is stored already (same id, anywhere in the
        session): it is then part of the history, and must not be added a second time. The same
        id with other content is a `Conflict`, as appending it would be."""
        if pending is None:
            return None
        stored = self.core.store.find_messages(session_id, [pending.id]).get(pending.id)
        if stored is None:
            return None
        check_retry(stored, pending)
        return stored
