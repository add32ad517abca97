"""Remembered session tails: the newest messages a context build read, kept for the next build.

The common loop is "append a turn, build the context": each build would read the same tail
again from the store (a query, a page of rows decoded, each message rendered for the window),
only one or two messages longer than last time. A service remembers, per session, the tail its
last build read (`Tail`) and the messages it appended since; the next build reads its pages from
that memory (`TailReader`), and asks the store only for what lies below it.

A remembered tail is used only when the session is provably what it was plus those appends:

- the session's `version` is the tail's (nothing was written since), or
- it is one more, the session's `last_seq` grew by exactly the messages this service appended
  since, and their seqs continue the tail's: the one write since the tail was read was that
  append (an append only adds rows above `last_seq`; every other write either moves the version
  without adding them, or comes with a second version step).

Anything else — another replica's write, an edit, a delete, a reset, two appends — reads from
the store, as a service without memory would. The pages served are exactly the store's pages,
so a window and its report are the same either way.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnkeeper.context.history import StoreHistory
from turnkeeper.recent import RecentlyUsed
from turnkeeper.storage.base import Store
from turnkeeper.types import ContextMessage, Message, Session

TAIL_LIMIT = 1000
"""The most messages a remembered tail keeps (the newest ones): a `full` build of a huge session
would otherwise keep all of it."""


@dataclass(frozen=True, slots=True)
class Tail:
    """The newest messages of one view of a session (with or without internal ones), as read at
    `version`, and the messages this service appended since."""

    version: int
    last_seq: int
    """The session's `last_seq` at `version`: `newest` holds nothing above it."""
    include_internal: bool
    newest: tuple[Message, ...]
    """Newest first: every message of the view from the oldest of these up to `last_seq`."""
    reaches_start: bool
    """True when nothing of the view is older than `newest`."""
    head: Message | None
    """The oldest message of the view, when a build read it (it does not change on append)."""
    encoding: str
    rendered: Mapping[int, ContextMessage]
    """Window entries already made from these messages with `encoding`, by seq."""
    appended: tuple[Message, ...] = ()
    """The messages of this service's one append since `version`, oldest first, seqs from
    `last_seq + 1`."""

    def after_append(self, stored: Sequence[Message]) -> Tail | None:
        """This tail with an append's stored messages, or None when they do not continue it
        (another writer's messages came in between)."""
        top = self.last_seq + len(self.appended)
        added = sorted((message for message in stored if message.seq > top), key=_seq)
        if not added:
            return self  # retries of stored messages only: nothing new
        if self.appended:
            return None  # a second write since `version`: the tail can no longer stand for it
        if [message.seq for message in added] != list(range(top + 1, top + 1 + len(added))):
            return None
        return dataclasses.replace(self, appended=(*self.appended, *added))

    def view(self, session: Session, include_internal: bool) -> tuple[Message, ...] | None:
        """The view's newest messages (newest first) as `session` stands, or None when this tail
        cannot tell (see the module's rule)."""
        if include_internal != self.include_internal:
            return None
        if session.version == self.version:
            unchanged = session.last_seq == self.last_seq and not self.appended
            return self.newest if unchanged else None
        if session.version != self.version + 1 or not self.appended:
            return None
        if session.last_seq != self.last_seq + len(self.appended):
            return None
        added = [m for m in reversed(self.appended) if include_internal or not m.internal]
        return (*added, *self.newest)


def _seq(message: Message) -> int:
    return message.seq


def _minus_seq(message: Message) -> int:
    """The sort key of a newest-first sequence (bisect wants ascending keys)."""
    return -message.seq


class TailReader(StoreHistory):
    """A `StoreHistory` that serves its pages from a remembered tail where it can.

    Each page is the store's page (the same messages, so the same report): taken from
    `known` while it lasts, and completed from the store below it. `rendered` holds the window
    entries of earlier builds; the builder reuses and extends it.
    """

    def __init__(
        self,
        store: Store,
        session: Session,
        *,
        include_internal: bool,
        page_size: int,
        encoding: str,
        known: Sequence[Message] = (),
        reaches_start: bool = False,
        head: Message | None = None,
        rendered: Mapping[int, ContextMessage] | None = None,
    ) -> None:
        super().__init__(
            store,
            session.id,
            messages_in_store=session.message_count,
            include_internal=include_internal,
            page_size=page_size,
            version=session.version,  # the caches need not read the session row again
        )
        self.session = session
        self._known = known
        self._known_reach_start = reaches_start
        self._known_head = head
        self.encoding = encoding
        self.rendered: dict[int, ContextMessage] = dict(rendered or {})

    def head(self) -> Message | None:
        if self._known_head is None:
            return super().head()
        self._head = self._remember([self._known_head])[0]
        return self._head

    def _page(self, upper: int | None, size: int) -> Sequence[Message]:
        known = self._known
        start = 0 if upper is None else bisect_left(known, -upper, key=_minus_seq)
        taken = known[start : start + size]
        if len(taken) == size or self._known_reach_start:
            return taken
        if not known:
            return super()._page(upper, size)
        below = known[-1].seq - 1 if upper is None else min(upper, known[-1].seq - 1)
        if below < 1:
            return taken
        return [*taken, *super()._page(below, size - len(taken))]

    def tail(self) -> Tail | None:
        """What this build read, to remember for the next one (None when it read no page)."""
        session = self.session
        if self._page_floor is None and not self._pages_reach_start:
            return None
        floor = self._page_floor or 0
        newest = sorted(
            (m for seq, m in self._loaded.items() if floor <= seq <= session.last_seq),
            key=_seq,
            reverse=True,
        )
        if self._include_internal and newest and newest[0].seq != session.last_seq:
            return None  # the session changed while it was read: don't remember it
        reaches_start = self._pages_reach_start and len(newest) <= TAIL_LIMIT
        kept = tuple(newest[:TAIL_LIMIT])
        head = self._head or self._known_head
        if head is not None and head.seq > session.last_seq:
            head = None  # read after a concurrent append: not part of `version`
        if head is None and reaches_start and kept:
            head = kept[-1]
        seqs = {message.seq for message in kept}
        if head is not None:
            seqs.add(head.seq)
        return Tail(
            version=session.version,
            last_seq=session.last_seq,
            include_internal=self._include_internal,
            newest=kept,
            reaches_start=reaches_start,
            head=head,
            encoding=self.encoding,
            rendered={seq: e for seq, e in self.rendered.items() if seq in seqs},
        )


class Tails:
    """The remembered tail of the `size` most recently used sessions. Thread-safe."""

    def __init__(self, size: int) -> None:
        self._entries: RecentlyUsed[str, Tail] = RecentlyUsed(size)

    def reader(
        self,
        store: Store,
        session: Session,
        *,
        include_internal: bool,
        page_size: int,
        encoding: str,
    ) -> TailReader:
        """A history of `session` that reads what it can from the remembered tail."""
        tail = self._entries.get(session.id)
        view = None if tail is None else tail.view(session, include_internal)
        if tail is None or view is None:
            return TailReader(
                store, session, include_internal=include_internal, page_size=page_size,
                encoding=encoding,
            )  # fmt: skip
        head = tail.head
        if head is None and tail.reaches_start and view:
            head = view[-1]  # the view was empty at the tail's version: its first message now
        return TailReader(
            store,
            session,
            include_internal=include_internal,
            page_size=page_size,
            encoding=encoding,
            known=view,
            reaches_start=tail.reaches_start,
            head=head,
            rendered=tail.rendered if tail.encoding == encoding else None,
        )

    def remember(self, reader: TailReader) -> None:
        """Keep what `reader` read as its session's tail (or forget the old one)."""
        tail = reader.tail()
        session_id = reader.session.id
        if tail is None:
            self._entries.forget(session_id)
        else:
            self._entries.put(session_id, tail)

    def appended(self, session_id: str, stored: Sequence[Message]) -> None:
        """Add the messages an append stored to the session's tail, if they continue it."""
        if session_id not in self._entries:  # no tail remembered (the lock taken for nothing
            return  # was a measurable part of an append; a tail remembered meanwhile is as new)
        self._entries.change(session_id, lambda tail: tail.after_append(stored))
