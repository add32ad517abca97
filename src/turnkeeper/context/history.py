"""Lazy access to one session's stored history, for the context builder.

Strategies must cost what the window costs, not what the conversation costs, so they never get
a list of every message: they get a `History` that reads the first message and pages backwards
from the newest on demand, through the store's `(session_id, seq)` index.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from turnkeeper.storage.base import Store, message_seq_runs, read_messages_at
from turnkeeper.types import NO_SEQS, Message, MessageQuery, SeqRanges


class History(Protocol):
    """The messages of one session (already filtered for `internal`), read lazily."""

    @property
    def messages_in_store(self) -> int:
        """How many messages the session holds (before any filtering)."""
        ...

    @property
    def messages_loaded(self) -> int:
        """How many messages have been read so far (for the report)."""
        ...

    def head(self) -> Message | None:
        """The oldest message, or None for an empty history."""
        ...

    def newest_first(self) -> Iterator[Message]:
        """Messages from the newest back to the oldest, read a page at a time."""
        ...

    def chronological(self) -> list[Message]:
        """Every message, oldest first (reads the whole history)."""
        ...

    def between(self, first: int, last: int) -> list[Message]:
        """The messages with a seq from `first` to `last` (both included), oldest first: what
        a strategy recalls from the middle of a history (`relevant`) reads, and no more."""
        ...

    def count_before(self, seq: int) -> int:
        """How many messages have a seq below `seq`, without reading them.

        Lets a strategy that stopped reading early say how many older messages it left out;
        the history may be filtered, so seq arithmetic cannot tell.
        """
        ...

    def loaded_seqs(self) -> SeqRanges:
        """The seqs of the messages read so far (`messages_loaded` of them)."""
        ...

    def unread_seqs(self) -> SeqRanges:
        """The seqs of the messages not read so far, without reading them: the report names
        every message a build left out, the older ones it never looked at too."""
        ...


class _Reads:
    """What every `History` keeps for the report: the session's message count and the seqs
    read so far."""

    def __init__(self, messages_in_store: int) -> None:
        self._count = messages_in_store
        self._loaded: set[int] = set()

    @property
    def messages_in_store(self) -> int:
        return self._count

    @property
    def messages_loaded(self) -> int:
        return len(self._loaded)

    def _remember(self, messages: Iterable[Message]) -> list[Message]:
        """`messages`, as a list, noted as read."""
        read = list(messages)
        self._loaded.update(message.seq for message in read)
        return read

    def loaded_seqs(self) -> SeqRanges:
        return SeqRanges.of(self._loaded)


class StoreHistory(_Reads):
    """A `History` backed by a store; pages of `page_size` messages, newest first."""

    def __init__(
        self,
        store: Store,
        session_id: str,
        *,
        messages_in_store: int,
        include_internal: bool,
        page_size: int = 128,
        version: int | None = None,
    ) -> None:
        """`version`: the session's version when it was read for this build (its
        `messages_in_store` too), so that a cache answers for that version without reading
        the session row again (`read_messages_at`)."""
        super().__init__(messages_in_store)
        self._store = store
        self._version = version
        self._session_id = session_id
        self._include_internal = include_internal
        self._page_size = max(1, page_size)
        self._tail_floor: int | None = None  # every message from here to the newest is loaded

    def head(self) -> Message | None:
        first = read_messages_at(
            self._store,
            self._session_id,
            self._version,
            MessageQuery(include_internal=self._include_internal, limit=1),
        )
        return self._remember(first)[0] if first else None

    @staticmethod
    def page_size_for(budget: int, average_tokens: float) -> int:
        """A first page just larger than what `budget` holds at the session's average message
        size, so a window is usually read in one query without reading much it won't use;
        rounded up to one of eight steps per power of two (at most 12.5% more): the average
        moves with every append, and a size that moved with it would name a new page each turn
        that no cache holds (`cache.store` carries a session's pages across an append)."""
        if average_tokens <= 0:
            return 128
        wanted = max(16, int(budget / average_tokens * 1.05) + 4)
        step = max(1, (1 << (wanted - 1).bit_length()) // 8)
        return min(1000, -(-wanted // step) * step)

    def newest_first(self) -> Iterator[Message]:
        upper: int | None = None
        size = self._page_size
        while True:
            page = self._page(upper, size)
            last = len(page) < size or page[-1].seq <= 1  # seqs start at 1: nothing older
            for message in self._remember(page):
                self._tail_floor = message.seq
                yield message
            if last:
                return
            upper = page[-1].seq - 1
            size = max(16, self._page_size // 4)  # past the estimate: the rest is usually small

    def _page(self, upper: int | None, size: int) -> Sequence[Message]:
        """The `size` newest messages with a seq up to `upper` (any, when None), newest first."""
        return read_messages_at(
            self._store,
            self._session_id,
            self._version,
            MessageQuery(
                to_seq=upper, include_internal=self._include_internal, newest_first=True, limit=size
            ),
        )

    def chronological(self) -> list[Message]:
        return self._remember(
            read_messages_at(
                self._store,
                self._session_id,
                self._version,
                MessageQuery(include_internal=self._include_internal),
            )
        )

    def between(self, first: int, last: int) -> list[Message]:
        return self._remember(
            read_messages_at(
                self._store,
                self._session_id,
                self._version,
                MessageQuery(from_seq=first, to_seq=last, include_internal=self._include_internal),
            )
        )

    def count_before(self, seq: int) -> int:
        if self._include_internal and self._tail_floor is not None and seq >= self._tail_floor:
            # Everything from `seq` to the newest is loaded, and the session's count covers
            # the rest: no query, so a build on a huge session stays as cheap as its window.
            return max(0, self._count - sum(1 for loaded in self._loaded if loaded >= seq))
        return self._store.count_messages(
            self._session_id, before_seq=seq, include_internal=self._include_internal
        )

    def unread_seqs(self) -> SeqRanges:
        """The gaps below the newest message read. A whole view's seqs have no gaps (they
        run from 1 to `last_seq`), so when the gaps hold as many seqs as there are unread
        messages, they are the answer, with no query; a view without internal messages (or an
        imported history with holes) asks the store where its messages sit."""
        loaded = self.loaded_seqs()
        newest = loaded.last
        if newest is None:
            return NO_SEQS
        gaps = SeqRanges.span(1, newest) - loaded
        if not gaps:
            return NO_SEQS
        if self._include_internal and self.count_before(newest + 1) - len(loaded) == len(gaps):
            return gaps  # counted from memory (`count_before`): no query
        first, last = gaps.runs[0][0], gaps.runs[-1][1]
        held = message_seq_runs(
            self._store, self._session_id, from_seq=first, to_seq=last,
            include_internal=self._include_internal,
        )  # fmt: skip
        return held - loaded


class ListHistory(_Reads):
    """A `History` over messages already in memory (tests, imports, previews)."""

    def __init__(self, messages: Sequence[Message], *, messages_in_store: int | None = None):
        self._messages = sorted(messages, key=lambda message: message.seq)
        super().__init__(len(self._messages) if messages_in_store is None else messages_in_store)

    def head(self) -> Message | None:
        return self._remember(self._messages[:1])[0] if self._messages else None

    def newest_first(self) -> Iterator[Message]:
        for message in reversed(self._messages):
            yield from self._remember([message])

    def chronological(self) -> list[Message]:
        return self._remember(self._messages)

    def between(self, first: int, last: int) -> list[Message]:
        low = bisect_left(self._messages, first, key=lambda message: message.seq)
        high = bisect_left(self._messages, last + 1, key=lambda message: message.seq)
        return self._remember(self._messages[low:high])

    def count_before(self, seq: int) -> int:
        return bisect_left(self._messages, seq, key=lambda message: message.seq)

    def unread_seqs(self) -> SeqRanges:
        return SeqRanges.of(m.seq for m in self._messages if m.seq not in self._loaded)
