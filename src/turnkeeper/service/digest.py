"""Digests of a conversation: the conversation context object and the stored summaries.

A part of `Turnkeeper` (`tk.conversation_context`, `tk.summaries`).

The context object needs the last few user-facing messages, a summary of what came before them
and every entity id assistant answers referenced. The last of these depends on the whole
history, so the digest reads the whole history (through the store's cache: a second call for an
unchanged session is served from it, and an append moves the version, so it never sees stale
data).
"""

from __future__ import annotations

from turnkeeper import metrics
from turnkeeper.context import conversation
from turnkeeper.context.conversation import RECENT_MESSAGES, ConversationContext
from turnkeeper.errors import BackendUnavailable
from turnkeeper.logs import get_logger
from turnkeeper.service.core import Capability, Core, SessionRef
from turnkeeper.storage.base import SummaryStore
from turnkeeper.types import Message, Session, SummaryCheckpoint
from turnkeeper.validation import check_positive

SUMMARY_TOKENS = 150
"""Longest summary in the conversation context object (the anonymous chat
planner's `max_tokens=150`)."""

_log = get_logger("turnkeeper.service")


class Digest:
    """The digest operations of `Turnkeeper`."""

    _summaries = Capability(SummaryStore, "summary checkpoints")

    def __init__(self, core: Core) -> None:
        self.core = core

    def summaries(self, ref: SessionRef, *, project: str | None = None) -> list[SummaryCheckpoint]:
        """The session's stored summary checkpoints, oldest first."""
        return self._summaries.list_summaries(self.core.get_session(ref, project=project).id)

    def conversation_context(
        self, ref: SessionRef, *, recent: int = RECENT_MESSAGES, project: str | None = None
    ) -> ConversationContext:
        """A digest of a conversation: count, first-message flag, the last `recent`
        user-facing messages, entities earlier answers referenced, and a summary of what came
        before the recent ones once there are more than `summary_threshold` messages.

        Reads the whole history, through the store's caches (a second call for an unchanged
        session is served from them; an append moves the version, so it never sees stale
        data). If the store cannot be reached, returns the empty context and logs the error
        instead of raising.
        """
        check_positive("recent", recent)
        try:
            session = self.core.get_session(ref, project=project)
            history = self.core.store.read_messages(session.id)
            shown = [message for message in history if not message.internal][-recent:]
            older: list[Message] = []
            if session.message_count > self.core.settings.summary_threshold and shown:
                older = self._unsummarized(session.id, history, before=shown[0].seq)
        except BackendUnavailable as exc:
            _log.error("conversation_fetch_failed", session=str(ref), error=str(exc))
            return ConversationContext.empty(ref.id if isinstance(ref, Session) else ref)
        return conversation.build(
            session.key or session.id,
            message_count=session.message_count,
            recent=shown,
            referenced=conversation.referenced_ids(history),
            summary=self._conversation_summary(session.id, older),
        )

    def _unsummarized(
        self, session_id: str, history: list[Message], *, before: int
    ) -> list[Message]:
        """What the rolling summary of the messages before seq `before` still has to read:
        those after the latest stored checkpoint below it (just the last one when a
        checkpoint covers them all already, which the checkpoint is then found from)."""
        last = before - 1
        if last < 1:
            return []
        base = self._summaries.latest_summary(session_id, upto_seq=last)
        since = 0 if base is None else min(last - 1, base.covers_to_seq)
        return [message for message in history if since < message.seq <= last]

    def _conversation_summary(self, session_id: str, older: list[Message]) -> str | None:
        """The rolling summary of `older`, or None if there is nothing or it failed (logged
        and counted: a summary is never worth failing the request)."""
        if not older:
            return None
        try:
            return self.core.checkpointed(session_id).summarize(
                older, max_tokens=SUMMARY_TOKENS, counter=self.core.counter
            )
        except Exception as exc:
            metrics.SUMMARY_FAILURES.inc()
            _log.warning("summary_failed", session_id=session_id, error=str(exc))
            return None
