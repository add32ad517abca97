"""Tool-call units, and the newest-first view of a history that strategies select from.

An assistant message that calls tools and the tool results answering it are one *unit*: a model
API rejects a tool result whose call is missing, and a call whose results are missing invites
the model to call again. So every strategy keeps or drops whole units, and never sends an
*orphan* (a tool result whose call is not in the unit right before it), unless it is the very
turn being answered.

Units are formed while reading from the newest end, one message of look-ahead at most, so a
strategy that stops early has read only the tail it keeps (plus that one message).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, takewhile

from turnkeeper.context.history import History
from turnkeeper.types import ContextMessage, Message, Role


@dataclass(frozen=True, slots=True)
class Unit:
    """Messages kept or dropped together, in chronological order.

    `orphan` marks a lone tool result whose call is not right before it: strategies never
    include one unless it is the triggering message.
    """

    messages: tuple[ContextMessage, ...]
    orphan: bool = False
    tokens: int = field(init=False)
    stored: int = field(init=False)
    """How many of its messages are stored ones (a pending turn is not)."""

    def __post_init__(self) -> None:
        # Computed once: strategies ask for these for every unit, often repeatedly.
        if len(self.messages) == 1:  # most units: no generators (a build makes hundreds)
            (only,) = self.messages
            object.__setattr__(self, "tokens", only.tokens)
            object.__setattr__(self, "stored", 0 if only.seq is None else 1)
            return
        object.__setattr__(self, "tokens", sum(message.tokens for message in self.messages))
        object.__setattr__(
            self, "stored", sum(1 for message in self.messages if message.seq is not None)
        )


def call_ids(message: ContextMessage) -> frozenset[str]:
    """Ids of the tool calls an assistant message makes (empty for any other message)."""
    if message.role is not Role.ASSISTANT or not message.tool_calls:
        return frozenset()
    return frozenset(str(call["id"]) for call in message.tool_calls if "id" in call)


def group_newest_first(messages: Iterable[ContextMessage]) -> Iterator[Unit]:
    """Group a newest-first stream into units, yielded newest first (by their newest message).

    Tool results are held until the message before them shows whether their call is there; the
    results it answers join its unit, the others become orphan units. Internal messages stored
    between a call and its results (a system note written while the tool ran) are held too and
    join the unit *before* the call: a model API wants the results right after their call, and
    the turn being answered stays last. Any other message ends the wait. Yielding by newest
    member keeps the unit holding the first message of the stream (the trigger) first.
    """
    waiting: list[tuple[int, ContextMessage]] = []  # tool results, newest first, with position
    between: list[tuple[int, ContextMessage]] = []  # internal messages among them
    for position, message in enumerate(messages):
        if message.role is Role.TOOL:
            waiting.append((position, message))
            continue
        if not waiting:  # the common case: a plain message is a unit of its own
            yield Unit((message,))
            continue
        calls = call_ids(message)
        answers = [(at, result) for at, result in waiting if result.tool_call_id in calls]
        if not answers and message.internal and not calls:
            between.append((position, message))
            continue
        answered = {at for at, _ in answers}
        batch = [(at, Unit((result,), orphan=True)) for at, result in waiting if at not in answered]
        if answers:
            # Only the notes older than an answer sit between the call and its results.
            inside = [(at, note) for at, note in between if at > answers[0][0]]
            batch += [(at, Unit((note,))) for at, note in between if at < answers[0][0]]
            notes = tuple(note for _, note in reversed(inside))
            members = (*notes, message, *(result for _, result in reversed(answers)))
            batch.append((answers[0][0], Unit(members)))
        else:
            batch += [(at, Unit((note,))) for at, note in between]
            batch.append((position, Unit((message,))))
        waiting.clear()
        between.clear()
        yield from (unit for _, unit in sorted(batch, key=lambda entry: entry[0]))
    batch = [(at, Unit((result,), orphan=True)) for at, result in waiting]
    batch += [(at, Unit((note,))) for at, note in between]
    yield from (unit for _, unit in sorted(batch, key=lambda entry: entry[0]))


class Turns:
    """One build's view of a history: the trigger, an optional head, and older units.

    The trigger is `pending` unless it is absent or already stored as the newest message (same
    id: the duplication trap), in which case it is the newest stored message. Creating a
    `Turns` reads that newest message; everything else is read on demand. Every stored message
    is rendered (and so counted) once, by `render`.
    """

    def __init__(
        self,
        history: History,
        *,
        render: Callable[[Message], ContextMessage],
        pending: ContextMessage | None = None,
    ) -> None:
        self._history = history
        self._render = render
        self._loaded: dict[int, Message] = {}
        self._first: Message | None = None
        self._oldest_read: int | None = None
        self._exhausted = False
        self._stream = self._read(history.newest_first())
        self._newest = next(self._stream, None)
        already_stored = (
            pending is not None
            and self._newest is not None
            and pending.message_id is not None
            and pending.message_id == self._newest.message_id
        )
        self._pending = None if already_stored else pending

    @property
    def empty(self) -> bool:
        """True when there is no turn at all to answer."""
        return self._newest is None and self._pending is None

    def _read(self, messages: Iterator[Message]) -> Iterator[ContextMessage]:
        for message in messages:
            self._loaded[message.seq] = message
            self._oldest_read = message.seq
            yield self._render(message)
        self._exhausted = True

    def opening(self) -> ContextMessage | None:
        """The oldest stored message, unless it is the trigger itself (then None)."""
        first = self._history.head()
        if first is None or (self._pending is None and first.seq == self._seq_of_newest()):
            return None
        self._first = first
        self._loaded[first.seq] = first
        return self._render(first)

    def opens(self, message: ContextMessage) -> bool:
        """True when `message` is the oldest stored message of the history."""
        return message.seq is not None and self._history.count_before(message.seq) == 0

    def next_seq(self) -> int:
        """The seq the next stored message will have (a pending turn's, once stored)."""
        return 1 if self._newest is None else (self._newest.seq or 0) + 1

    def _seq_of_newest(self) -> int | None:
        return None if self._newest is None else self._newest.seq

    def units(self, head: ContextMessage | None = None) -> tuple[Unit, Iterator[Unit]]:
        """The trigger's unit, and the older units newest first, stopping before `head`.

        Call once per build: the units come from a single pass over the history.
        """
        stored: Iterator[ContextMessage] = chain(
            [self._newest] if self._newest is not None else [], self._stream
        )
        if head is not None:
            stored = takewhile(lambda message: message.seq != head.seq, stored)
        pending = [self._pending] if self._pending is not None else []
        grouped = group_newest_first(chain(pending, stored))
        return next(grouped), grouped

    def around(self, first: int, last: int) -> list[Unit]:
        """The units of the stored messages from seq `first` to `last`, oldest first: read by
        that range alone (a strategy recalling part of the middle of a history), each message
        rendered once. A unit cut by the range's edge comes out an orphan or a call without
        all its results; the caller reads a wider range or leaves it out."""
        read = self._history.between(first, last)
        for message in read:
            self._loaded.setdefault(message.seq, message)
        rendered = [self._render(message) for message in reversed(read)]
        return list(reversed(list(group_newest_first(rendered))))

    def stored_tokens(self, unit: Unit) -> int:
        """The tokens `unit`'s stored messages were counted with when stored (0 for a pending
        turn): where a message sits in the session's stored tokens, whatever the encoding of
        this build."""
        return sum(self._loaded[m.seq].tokens for m in unit.messages if m.seq in self._loaded)

    def total(self) -> int:
        """How many messages the history holds, reading none beyond what was read already."""
        if self._oldest_read is None:
            return len(self._loaded)
        reached_start = self._exhausted or (
            self._first is not None and self._oldest_read <= self._first.seq
        )
        older = 0 if reached_start else self._history.count_before(self._oldest_read)
        read = sum(1 for seq in self._loaded if seq >= self._oldest_read)
        return read + older

    def loaded(self) -> list[Message]:
        """Every stored message read so far, oldest first."""
        return [self._loaded[seq] for seq in sorted(self._loaded)]
