"""The context builder: runs a strategy over a session's history and reports what it did.

It owns the two things every strategy must agree on: how a message is counted (stored counts
are reused when they were made with the target model's encoding, and recounted otherwise,
only for the messages actually read) and what the report says. Each build logs exactly one
`conversation_context_loaded` event, with the personal agent's field names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from turnkeeper import metrics
from turnkeeper.context.formats import wire_name
from turnkeeper.context.history import History
from turnkeeper.context.perspective import Perspective
from turnkeeper.context.registry import Strategies
from turnkeeper.context.retrieval import Retriever
from turnkeeper.context.selection import CutRule, Selection
from turnkeeper.context.strategies import Build, Strategy
from turnkeeper.context.summarizer import ExtractiveSummarizer, Summarizer
from turnkeeper.context.units import Turns
from turnkeeper.errors import InvalidInput
from turnkeeper.logs import get_logger
from turnkeeper.tokens import REPLY_PRIMING, TokenCounter
from turnkeeper.types import (
    ContextMessage,
    ContextReport,
    ContextWindow,
    Message,
    MessageDraft,
    SeqRanges,
    Session,
    StrategyName,
)

EVENT = "conversation_context_loaded"


class EventLogger(Protocol):
    """The one logger method the builder uses (`turnkeeper.logs.EventLogger` and any structlog bound logger
    have it)."""

    def info(self, event: str, /, **fields: Any) -> Any: ...


def record_build(window: ContextWindow, logger: EventLogger | None = None) -> None:
    """Log a build's `conversation_context_loaded` event and count it: once per window
    handed out."""
    report = window.report
    (logger or get_logger("turnkeeper.context")).info(
        EVENT,
        session_id=report.session_id,
        strategy=str(report.strategy),
        total_messages_in_db=report.messages_in_store,
        messages_loaded=report.messages_loaded,
        messages_included=report.messages_included,
        messages_truncated=report.messages_dropped + report.messages_summarized,
        estimated_tokens=report.tokens_used,
        budget=report.budget,
    )
    metrics.CONTEXT_BUILDS.labels(str(report.strategy)).inc()
    if report.messages_dropped + report.messages_summarized:
        metrics.CONTEXT_TRUNCATIONS.labels(str(report.strategy)).inc()


class ContextBuilder:
    """Builds the window a model sees for one turn, under a token budget.

    `counter` is the target model's tokenizer; `stored_encoding` is the one the stored
    `Message.tokens` were counted with.
    """

    def __init__(
        self,
        counter: TokenCounter,
        *,
        stored_encoding: str,
        summarizer: Summarizer | None = None,
        logger: EventLogger | None = None,
        rendered: Mapping[int, ContextMessage] | None = None,
    ) -> None:
        """`rendered`: entries an earlier build rendered from the same stored messages (the
        same session version) with this `counter`, reused instead of being made again."""
        self.counter = counter
        self.stored_encoding = stored_encoding
        self.rendered: dict[int, ContextMessage] = dict(rendered or {})
        """Every stored message's entry this builder made or was given, by seq."""
        self.summarizer = summarizer or ExtractiveSummarizer()
        self.logger: EventLogger = logger or get_logger("turnkeeper.context")

    def build(
        self,
        session_id: str,
        history: History,
        *,
        strategy: Strategy | StrategyName | str,
        budget: int,
        keep_recent: int,
        max_messages: int | None = None,
        pending: MessageDraft | None = None,
        session: Session | None = None,
        retriever: Retriever | None = None,
        cut: CutRule | None = None,
    ) -> ContextWindow:
        """The window for the turn `pending` (or, without it, the newest stored message).

        `session` (as read for this build) and `retriever` (the store's full-text recall)
        are handed to the strategy (`Build`) for those that recall by relevance.

        `strategy` is a strategy object or a built-in's name. `budget` counts every message
        of the window plus the reply priming. `cut` is the session's stored cut point and the
        rule for it (default: a stable cut, none stored yet); the report names the cut point
        the window holds (`ContextReport.cut_seq`), for the caller to store. Raises `ContextBudgetExceeded` when the
        triggering message (with its tool-call unit and, if anything is left out, the marker
        saying so) cannot fit, or for `full` when the whole history cannot; `InvalidInput`
        when there is no turn at all.
        """
        chosen = Strategies().resolve(strategy)
        turns = Turns(
            history,
            render=self._render,
            pending=None if pending is None else self._render_pending(pending),
        )
        if turns.empty:  # a new session with no turn yet: nothing to send, nothing left out
            selection = Selection(messages=(), left_out=0)
        else:
            options = Build(
                self.counter,
                keep_recent,
                self.summarizer,
                max_messages,
                session=session,
                retriever=retriever,
                cut=cut or CutRule(),
            )
            selection = chosen.select(turns, budget, options)
        return self._window(session_id, history, chosen.name, budget, selection)

    def build_perspective(
        self,
        session_id: str,
        history: History,
        *,
        agent: str,
        last_processed_seq: int,
        budget: int,
        trigger_seq: int | None = None,
        pending: MessageDraft | None = None,
    ) -> ContextWindow:
        """`agent`'s view for answering a trigger (see `context.perspective`): `pending`, else
        the stored message `trigger_seq`, else the newest stored message. A pending message
        already stored (same id) is the stored one. Reads the history before the trigger.
        The report names `summarize` when the older part was summarized, else `full`."""
        stored = history.chronological()
        trigger: Message | MessageDraft | None = None
        if pending is not None:
            trigger = next((m for m in stored if m.id == pending.id), pending)
        elif trigger_seq is not None:
            trigger = next((m for m in stored if m.seq == trigger_seq), None)
            if trigger is None:
                raise InvalidInput("trigger", f"no stored message has seq {trigger_seq}")
        elif stored:
            trigger = stored[-1]
        if trigger is None:
            selection = Selection(messages=(), left_out=0)
        else:
            before = trigger.seq if isinstance(trigger, Message) else None
            earlier = [m for m in stored if before is None or m.seq < before]
            view = Perspective(
                self.counter,
                agent=agent,
                last_processed_seq=last_processed_seq,
                render=self._render,
                summarizer=self.summarizer,
            )
            selection = view(earlier, trigger, budget, pending=before is None)
        name = StrategyName.SUMMARIZE if selection.summarized else StrategyName.FULL
        return self._window(session_id, history, name, budget, selection)

    def _window(
        self,
        session_id: str,
        history: History,
        name: StrategyName | str,
        budget: int,
        selection: Selection,
    ) -> ContextWindow:
        """The window and its report, logged as one `conversation_context_loaded` event."""
        report = self._report(session_id, history, name, budget, selection)
        window = ContextWindow(selection.messages, report)
        record_build(window, self.logger)
        return window

    def _report(
        self,
        session_id: str,
        history: History,
        strategy: StrategyName | str,
        budget: int,
        selection: Selection,
    ) -> ContextReport:
        """The numbers of a build, each with the seqs it counts. Whatever the history read
        and the window neither carries nor summarized was dropped; so were the older messages
        it never read, which the history names without reading them."""
        kept = SeqRanges.of(m.seq for m in selection.messages if m.seq is not None)
        included = len(kept)
        summarized = SeqRanges.of(selection.summarized)
        loaded = history.loaded_seqs()
        dropped = loaded - kept - summarized
        if selection.left_out - len(summarized) > len(dropped):
            dropped |= history.unread_seqs()
        return ContextReport(
            strategy=strategy,
            session_id=session_id,
            messages_in_store=history.messages_in_store,
            messages_loaded=history.messages_loaded,
            messages_included=included,
            messages_dropped=selection.left_out - len(summarized),
            messages_summarized=len(summarized),
            # an empty window is no prompt at all: nothing is sent, so no reply priming either
            tokens_used=(
                REPLY_PRIMING + sum(message.tokens for message in selection.messages)
                if selection.messages
                else 0
            ),
            budget=budget,
            encoding=self.counter.encoding,
            markers=tuple(m.content for m in selection.messages if m.kind == "marker"),
            dropped_seqs=dropped,
            summarized_seqs=summarized,
            loaded_seqs=loaded,
            cut_seq=selection.cut,
        )

    def _render(self, message: Message) -> ContextMessage:
        """A stored message as a window entry, counted with the target tokenizer: made once
        per message (`rendered`), a rebuild for another budget reuses it."""
        entry = self.rendered.get(message.seq)
        if entry is None or entry.message_id != message.id:
            recount = self.counter.encoding != self.stored_encoding
            entry = self._entry(message, recount=recount, seq=message.seq)
            self.rendered[message.seq] = entry
        return entry

    def _render_pending(self, draft: MessageDraft) -> ContextMessage:
        return self._entry(draft, recount=True, kind="pending")

    def _entry(
        self,
        message: Message | MessageDraft,
        *,
        recount: bool,
        seq: int | None = None,
        kind: str = "message",
    ) -> ContextMessage:
        """`message` as a window entry: its own count, or (`recount`) the target tokenizer's."""
        tokens = message.tokens
        if recount:
            tokens = self.counter.count_message(
                message.role,
                message.content,
                name=wire_name(message.role, message.author),
                tool_calls=message.tool_calls,
                tool_call_id=message.tool_call_id,
            )
        return ContextMessage(
            role=message.role,
            content=message.content,
            tokens=tokens,
            kind=kind,
            seq=seq,
            message_id=message.id,
            author=message.author,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
            internal=message.internal,
        )
