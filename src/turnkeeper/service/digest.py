"""Digests of a conversation: the conversation context object and the stored summaries.

A mixin of the `Turnkeeper` facade (`tk.conversation_context`, `tk.summaries`).

The context object needs the last few user-facing messages, a summary of what came before them
and every entity id assistant answers referenced. Only the last of these depends on the whole
history, so the ids are remembered per session (`ReferenceMemo`) together with the newest
message they cover: the next call reads the tail, back to that message, instead of everything.
The memo is only a shortcut: it is trusted when the message it ends at is still stored exactly
as it was (a reset, or a popped and replaced message, leaves it unmatched, and the history is
read again), so another process's writes never make it wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from turnkeeper import metrics
from turnkeeper.context import conversation
from turnkeeper.context.conversation import RECENT_MESSAGES, ConversationContext
from turnkeeper.errors import BackendUnavailable
from turnkeeper.logs import get_logger
from turnkeeper.recent import RecentlyUsed
from turnkeeper.service.core import Core, SessionRef
from turnkeeper.storage.base import SummaryStore, require
from turnkeeper.types import Message, Session, SummaryCheckpoint
from turnkeeper.validation import check_positive

SUMMARY_TOKENS = 150
"""Longest summary in the conversation context object (the anonymous chat
planner's `max_tokens=150`)."""

MEMO_SESSIONS = 4096
"""Sessions whose referenced ids one service remembers (least recently used go first)."""

_MAX_PAGE = 1000

_log = get_logger("turnkeeper.service")


@dataclass(frozen=True, slots=True)
class References:
    """The entity ids referenced by a session's messages up to and including `newest`."""

    newest: Message
    ids: tuple[str, ...]


class ReferenceMemo:
    """Referenced ids per session, for the most recently used sessions (thread-safe)."""

    def __init__(self, size: int = MEMO_SESSIONS) -> None:
        self._entries: RecentlyUsed[str, References] = RecentlyUsed(size)

    def get(self, session_id: str) -> References | None:
        return self._entries.get(session_id)

    def put(self, session_id: str, references: References | None) -> None:
        if references is None:
            self._entries.forget(session_id)
        else:
            self._entries.put(session_id, references)


class _Tail:
    """One session's messages read newest first, a page at a time, remembered by seq."""

    def __init__(self, tk: Core, session_id: str, first_page: int) -> None:
        self._tk = tk
        self._session_id = session_id
        self._page = max(1, min(first_page, _MAX_PAGE))
        self.by_seq: dict[int, Message] = {}
        self.lowest: int | None = None  # every message from here to the newest is read
        self.complete = False  # the oldest message has been read

    def newest_first(self) -> Iterator[Message]:
        size = self._page
        while not self.complete:
            upper = None if self.lowest is None else self.lowest - 1
            page = self._tk.store.read_messages(
                self._session_id, to_seq=upper, newest_first=True, limit=size
            )
            for message in page:
                self.by_seq[message.seq] = message
                self.lowest = message.seq
                yield message
            self.complete = len(page) < size or (self.lowest is not None and self.lowest <= 1)
            size = min(size * 4, _MAX_PAGE)

    def read_from(self, seq: int) -> None:
        """Make sure every message from `seq` on is read (one range query for the rest)."""
        if self.complete or (self.lowest is not None and self.lowest <= seq):
            return
        upper = None if self.lowest is None else self.lowest - 1
        for message in self._tk.store.read_messages(self._session_id, from_seq=seq, to_seq=upper):
            self.by_seq[message.seq] = message
        self.lowest = seq
        self.complete = seq <= 1

    def chronological(self, *, since: int = 0, upto: int | None = None) -> list[Message]:
        """The messages read with `since < seq <= upto`, oldest first."""
        return [
            self.by_seq[seq]
            for seq in sorted(self.by_seq)
            if seq > since and (upto is None or seq <= upto)
        ]


class Digest(Core):
    """The digest operations of `Turnkeeper`."""

    _references: ReferenceMemo

    def summaries(self, ref: SessionRef, *, project: str | None = None) -> list[SummaryCheckpoint]:
        """The session's stored summary checkpoints, oldest first."""
        return require(self.store, SummaryStore, "summary checkpoints").list_summaries(
            self.get_session(ref, project=project).id
        )

    def conversation_context(
        self, ref: SessionRef, *, recent: int = RECENT_MESSAGES, project: str | None = None
    ) -> ConversationContext:
        """A digest of a conversation: count, first-message flag, the last `recent`
        user-facing messages, entities earlier answers referenced, and a summary of what came
        before the recent ones once there are more than `summary_threshold` messages.

        Reads only the tail of the history: back to the `recent`-th user-facing message, to
        the newest message the remembered entity ids cover, and to the latest stored summary
        checkpoint (the first call for a session in a process reads the whole history once,
        for the ids). Reads go through the store's caches (a second call for an unchanged
        session is served from them; an append moves the version, so it never sees stale
        data). If the store cannot be reached, returns the empty context and logs the error
        instead of raising.
        """
        check_positive("recent", recent)
        try:
            session = self.get_session(ref, project=project)
            tail = _Tail(self, session.id, first_page=recent + 4)
            memo = self._references.get(session.id)
            shown = self._recent(tail, recent, memo)
            referenced = self._referenced(session.id, tail, memo)
            older: list[Message] = []
            if session.message_count > self.settings.summary_threshold and shown:
                older = self._unsummarized(session.id, tail, before=shown[0].seq)
        except BackendUnavailable as exc:
            _log.error("conversation_fetch_failed", session=str(ref), error=str(exc))
            return ConversationContext.empty(ref.id if isinstance(ref, Session) else ref)
        return conversation.build(
            session.key or session.id,
            message_count=session.message_count,
            recent=shown,
            referenced=referenced,
            summary=self._conversation_summary(session.id, older),
        )

    @staticmethod
    def _recent(tail: _Tail, recent: int, memo: References | None) -> list[Message]:
        """The last `recent` user-facing messages, oldest first; reading stops as soon as they
        are found and the remembered ids' newest message (if any) is reached."""
        covered = memo.newest.seq if memo is not None else 0
        shown: list[Message] = []
        for message in tail.newest_first():
            if not message.internal and len(shown) < recent:
                shown.append(message)
            if len(shown) >= recent and message.seq <= covered:
                break
        return shown[::-1]

    def _referenced(self, session_id: str, tail: _Tail, memo: References | None) -> tuple[str, ...]:
        """Referenced ids of the whole history: the memo's plus those of the messages after
        it, or, when the memo no longer matches the store, from the whole history again."""
        if memo is not None and tail.by_seq.get(memo.newest.seq) == memo.newest:
            later = tail.chronological(since=memo.newest.seq)
            ids = tuple(dict.fromkeys(memo.ids + conversation.referenced_ids(later)))
        else:
            tail.read_from(1)
            ids = conversation.referenced_ids(tail.chronological())
        newest = tail.by_seq[max(tail.by_seq)] if tail.by_seq else None
        self._references.put(session_id, None if newest is None else References(newest, ids))
        return ids

    def _unsummarized(self, session_id: str, tail: _Tail, *, before: int) -> list[Message]:
        """What the rolling summary of the messages before seq `before` still has to read:
        those after the latest stored checkpoint below it (just the last one when a
        checkpoint covers them all already, which the checkpoint is then found from)."""
        last = before - 1
        if last < 1:
            return []
        base = require(self.store, SummaryStore, "summary checkpoints").latest_summary(
            session_id, upto_seq=last
        )
        since = 0 if base is None else min(last - 1, base.covers_to_seq)
        tail.read_from(since + 1)
        return tail.chronological(since=since, upto=last)

    def _conversation_summary(self, session_id: str, older: list[Message]) -> str | None:
        """The rolling summary of `older`, or None if there is nothing or it failed (logged
        and counted: a summary is never worth failing the request)."""
        if not older:
            return None
        try:
            return self._checkpointed(session_id).summarize(
                older, max_tokens=SUMMARY_TOKENS, counter=self.counter
            )
        except Exception as exc:
            metrics.SUMMARY_FAILURES.inc()
            _log.warning("summary_failed", session_id=session_id, error=str(exc))
            return None
