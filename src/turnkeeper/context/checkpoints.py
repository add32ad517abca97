"""Durable, rolling summaries: a `Summarizer` that folds stored checkpoints.

Summarizing the whole left-out history on every turn costs O(history) per turn and loses the
work on a restart. `Checkpointed` wraps any summarizer and keeps its results in the store as
`SummaryCheckpoint`s keyed by the last seq they cover: asked to summarize messages up to seq N,
it starts from the latest checkpoint at or below N and hands the inner summarizer only the
messages after it, with the checkpoint's text as `previous` (recursive summarization). So each
message is read into the summarizer once, whatever the number of turns, and a new process picks
up where the last one stopped.

A covered range is built at most once: builders in one process queue on a per-session lock,
and across processes the store keeps the first checkpoint saved for a seq (`save_summary`), so
a late builder adopts the winner's text.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from turnkeeper import metrics
from turnkeeper.context.summarizer import Summarizer
from turnkeeper.storage.base import Store, SummaryStore, require
from turnkeeper.tokens import TokenCounter
from turnkeeper.types import Message, SummaryCheckpoint


class SessionLocks:
    """One lock per session id, made on first use (shared by every build of a service)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def __call__(self, session_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(session_id, threading.Lock())


def method_of(summarizer: Summarizer) -> str:
    """What a checkpoint records as its method (`extractive`, `llm:<model>`, a class name)."""
    return str(getattr(summarizer, "method", type(summarizer).__name__))


class Checkpointed:
    """A `Summarizer` for one session that stores and reuses rolling checkpoints.

    The messages it is given must be the session's summarizable messages oldest first, ending
    at the seq the summary should cover (the builders hand it the contiguous older part of the
    history). A stored checkpoint longer than a later `max_tokens` is shortened on the fly
    (from its text alone; no message is read again) and not stored.
    """

    def __init__(
        self,
        inner: Summarizer,
        store: Store,
        session_id: str,
        *,
        clock: Callable[[], datetime],
        locks: SessionLocks,
    ) -> None:
        self.inner = inner
        self.store = require(store, SummaryStore, "summary checkpoints")
        self.session_id = session_id
        self.clock = clock
        self.locks = locks
        self.method = method_of(inner)

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        if not messages:
            return self.inner.summarize(
                messages, max_tokens=max_tokens, counter=counter, previous=previous
            )
        text = self.checkpoint(messages, max_tokens=max_tokens, counter=counter).text
        if counter.count_text(text) > max_tokens:
            return self.inner.summarize([], max_tokens=max_tokens, counter=counter, previous=text)
        return text

    def checkpoint(
        self, messages: Sequence[Message], *, max_tokens: int, counter: TokenCounter
    ) -> SummaryCheckpoint:
        """The checkpoint covering up to the last of `messages`, built (and stored) if needed
        from the latest earlier one plus only the messages after it."""
        last = messages[-1].seq
        with self.locks(self.session_id):
            base = self.store.latest_summary(self.session_id, upto_seq=last)
            if base is not None and base.covers_to_seq == last:
                return base
            fresh = [m for m in messages if base is None or m.seq > base.covers_to_seq]
            text = self.inner.summarize(
                fresh,
                max_tokens=max_tokens,
                counter=counter,
                previous=None if base is None else base.text,
            )
            stored = self.store.save_summary(
                SummaryCheckpoint(
                    session_id=self.session_id,
                    covers_to_seq=last,
                    text=text,
                    tokens=counter.count_text(text),
                    method=self.method,
                    created_at=self.clock(),
                )
            )
            metrics.SUMMARY_CHECKPOINTS.inc()
            return stored
