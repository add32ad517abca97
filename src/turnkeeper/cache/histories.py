"""A session's whole history as one reader last read it, and what that reader appended since.

Kept because it pays on a figure the README reports: the OpenAI Agents SDK's agent loop
(`get_items()` of the whole history, then `add_items` twice, every turn) costs 0.67× the SDK's
own session's CPU with it and 2.87× without (`bench/ab_adapters_cpu.py --against`, side by
side, `bench/results/r26-service.md`): every `add_items` moves the session's version, so each
`get_items` would miss the store cache and read and decode the whole history again. The
`TurnkeeperSession` adapter (`adapters/openai_agents.py`) holds one.

A remembered history stands for the session only when the session is provably what it was plus
this reader's appends (one read of the session row decides):

- the session's `version` is the history's (nothing was written since), or
- it is one more, the session's `last_seq` grew by exactly the messages this reader appended,
  and their seqs continue the history's: the one write since the read was that append (an
  append only adds rows above `last_seq`; every other write either moves the version without
  adding them, or comes with a second version step).

Anything else — another writer's append, an edit, a pop, a reset, two appends — means a read
from the store, as a reader without memory would do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from turnkeeper.types import Message, Session

LONGEST_REMEMBERED = 1000
"""The longest history remembered: a longer one is read from the store each time."""


@dataclass(frozen=True, slots=True)
class RememberedHistory:
    """Every message of one session as read at `version` (newest first), and the messages of
    the reader's one append since (oldest first, seqs from `last_seq + 1`)."""

    session_id: str
    version: int
    last_seq: int
    newest: tuple[Message, ...]
    appended: tuple[Message, ...] = ()

    @classmethod
    def of(cls, session: Session, newest: Sequence[Message]) -> RememberedHistory | None:
        """The history `newest` (read after `session` was), to remember at its version: only
        what that version held (a write between the two reads may show in the messages; its
        version step then keeps the memory from ever being used), and only a history of at
        most `LONGEST_REMEMBERED` messages that ends at the session's `last_seq`."""
        held = tuple(message for message in newest if message.seq <= session.last_seq)
        top = held[0].seq if held else 0
        if len(held) > LONGEST_REMEMBERED or top != session.last_seq:
            return None
        return cls(session.id, session.version, session.last_seq, held)

    def after_append(self, stored: Sequence[Message]) -> RememberedHistory | None:
        """This history with an append's stored messages, or None when they do not continue
        it (another writer's messages came in between, or this is a second append)."""
        if any(message.session_id != self.session_id for message in stored):
            return None
        top = self.last_seq + len(self.appended)
        added = sorted((m for m in stored if m.seq > top), key=lambda message: message.seq)
        if not added:
            return self  # retries of stored messages only: nothing new
        if self.appended:
            return None  # a second write since `version`: it can no longer stand for it
        if [message.seq for message in added] != list(range(top + 1, top + 1 + len(added))):
            return None
        return dataclasses.replace(self, appended=tuple(added))

    def as_of(self, session: Session) -> tuple[Message, ...] | None:
        """The whole history (newest first) as `session` stands, or None when this memory
        cannot tell (see the module's rule)."""
        if session.id != self.session_id:
            return None
        if session.version == self.version:
            unchanged = session.last_seq == self.last_seq and not self.appended
            return self.newest if unchanged else None
        if session.version != self.version + 1 or not self.appended:
            return None
        if session.last_seq != self.last_seq + len(self.appended):
            return None
        return (*reversed(self.appended), *self.newest)
