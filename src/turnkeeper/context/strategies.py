"""Context strategies: small configured callables over a history's units.

Each strategy is configured in `__init__` (tokenizer, limits, marker wording) and selects in
`__call__(turns, budget)`, returning a `Selection`; the builder turns that into a window and a
report. They share one machinery (`_Plan`, `_take_tail`, `_fit_marker`), which is where the
invariants live:

- the trigger's unit is placed first and never dropped; if it cannot fit, the build fails;
- whole units only, newest first, stopping at the first that does not fit, so that reading
  stops there too (cost grows with the window, not the conversation);
- a marker exactly when a stored message was left out; its own tokens count, and since its
  number's width changes its size, units are given up until it fits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from turnkeeper import metrics
from turnkeeper.context.summarizer import Summarizer
from turnkeeper.context.units import Turns, Unit
from turnkeeper.errors import ContextBudgetExceeded, InvalidInput
from turnkeeper.logs import get_logger
from turnkeeper.tokens import REPLY_PRIMING, TokenCounter
from turnkeeper.types import ContextMessage, Message, Role, StrategyName

SUMMARY_PREFIX = "Previous conversation summary: "

_log = get_logger("turnkeeper.context")

Marker = Callable[[int], str]


def sliding_window_marker(left_out: int) -> str:
    """The sliding window's note."""
    return f"[Note: {left_out} older messages truncated to stay within token limit]"


def truncate_marker(left_out: int) -> str:
    """The `truncate` marker."""
    return "[Earlier messages truncated]"


def recent_marker(left_out: int) -> str:
    return f"[Note: {left_out} older messages not shown]"


def full_marker(left_out: int) -> str:
    """`full` leaves out only orphaned tool results (an API would reject them)."""
    return f"[Note: {left_out} tool results without their tool call left out]"


@dataclass(frozen=True, slots=True)
class Selection:
    """What a strategy chose: the window's entries in order, and what it left out.

    `left_out` counts every history message not in the window (dropped or summarized);
    `summarized` lists the seqs folded into the summary. The builder names the dropped ones:
    what the history read and the window neither carries nor summarized, and the older ones
    it never read (`History.unread_seqs`), so a strategy never reads them.
    """

    messages: tuple[ContextMessage, ...]
    left_out: int
    summarized: tuple[int, ...] = ()


class Strategy(Protocol):
    """Selects a window from `turns` within `budget` tokens (reply priming included)."""

    def __call__(self, turns: Turns, budget: int) -> Selection: ...


@dataclass(slots=True)
class _Plan:
    """A window being assembled: head, note, older units (newest first) and the trigger's unit."""

    trigger: Unit
    total: int = 0
    head: ContextMessage | None = None
    note: ContextMessage | None = None
    older: list[Unit] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        parts = [self.trigger.tokens, *(unit.tokens for unit in self.older)]
        parts += [entry.tokens for entry in (self.head, self.note) if entry is not None]
        return REPLY_PRIMING + sum(parts)

    @property
    def included(self) -> int:
        head = 1 if self.head is not None else 0
        return head + self.trigger.stored + sum(unit.stored for unit in self.older)

    @property
    def left_out(self) -> int:
        return self.total - self.included

    def drop_oldest(self) -> bool:
        """Give up the oldest older unit, else the head; False when only the trigger is left."""
        if self.older:
            self.older.pop()
        elif self.head is not None:
            self.head = None
        else:
            return False
        return True

    def messages(self) -> tuple[ContextMessage, ...]:
        body = [message for unit in reversed(self.older) for message in unit.messages]
        notes = [entry for entry in (self.head, self.note) if entry is not None]
        return (*notes, *body, *self.trigger.messages)

    def selection(self, loaded: Iterable[Message], *, summarized: bool = False) -> Selection:
        """The selection; with `summarized`, the loaded messages left out are the summary's."""
        if not summarized:
            return Selection(self.messages(), self.left_out)
        kept = {message.seq for message in self.messages() if message.seq is not None}
        out = tuple(message.seq for message in loaded if message.seq not in kept)
        return Selection(self.messages(), self.left_out, summarized=out)


def _note(counter: TokenCounter, text: str, kind: str = "marker") -> ContextMessage:
    return ContextMessage(Role.SYSTEM, text, counter.count_message(Role.SYSTEM, text), kind=kind)


def _start(
    turns: Turns, budget: int, head: ContextMessage | None, *, limit: int | None = None
) -> tuple[_Plan, Iterator[Unit]]:
    """The plan with the trigger's unit (which must fit) and the head, kept if it fits too
    (in tokens, and in `limit` stored messages when it counts against one)."""
    trigger, older = turns.units(head)
    plan = _Plan(trigger)
    if plan.tokens > budget:
        raise ContextBudgetExceeded("the triggering message", plan.tokens, budget)
    room = limit is None or plan.included < limit
    if head is not None and plan.tokens + head.tokens <= budget and room:
        plan.head = head
    return plan, older


def _take_tail(plan: _Plan, older: Iterator[Unit], budget: int, *, limit: int | None) -> None:
    """Add the newest units that fit `budget` and keep at most `limit` stored messages in the
    window; stop reading at the first unit that does not fit. Orphans are skipped."""
    stored = plan.included
    used = plan.tokens
    for unit in older:
        if unit.orphan:
            continue
        if limit is not None and stored + unit.stored > limit:
            return
        if used + unit.tokens > budget:
            return
        plan.older.append(unit)
        stored += unit.stored
        used += unit.tokens


def _fit_marker(plan: _Plan, budget: int, marker: Marker, counter: TokenCounter) -> None:
    """Set the marker for what was left out, giving up units until marker and all fit."""
    plan.note = None
    while plan.left_out:
        note = _note(counter, marker(plan.left_out))
        if plan.tokens + note.tokens <= budget:
            plan.note = note
            return
        if not plan.drop_oldest():
            needed = plan.tokens + note.tokens
            raise ContextBudgetExceeded("the triggering message", needed, budget)


def _everything(
    turns: Turns,
    trigger: Unit,
    units: list[Unit],
    head: ContextMessage | None,
    counter: TokenCounter,
) -> _Plan:
    """Every unit of a fully read history except orphans, with `full`'s note if any."""
    plan = _Plan(trigger, turns.total(), head, older=[unit for unit in units if not unit.orphan])
    if plan.left_out:
        plan.note = _note(counter, full_marker(plan.left_out))
    return plan


def _note_after_system(plan: _Plan, turns: Turns) -> None:
    """Put the note right after the session's system message when the window opens with it.

    Strategies without a head (`full`, `recent`) keep the system message as an ordinary unit;
    a note must still follow it, never precede it, so that unit becomes the head.
    """
    if plan.head is not None or plan.note is None or not plan.older:
        return
    oldest = plan.older[-1].messages
    if len(oldest) == 1 and _is_system(oldest[0]) and turns.opens(oldest[0]):
        plan.older.pop()
        plan.head = oldest[0]


def _is_system(message: ContextMessage | None) -> bool:
    return message is not None and message.role is Role.SYSTEM


def _stands_alone(message: ContextMessage | None) -> bool:
    """A message that can open a window without its unit: not a tool call nor a tool result."""
    return message is not None and message.role is not Role.TOOL and not message.tool_calls


class Full:
    """Every message, in order; fails rather than leave any turn out."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def __call__(self, turns: Turns, budget: int) -> Selection:
        trigger, older = turns.units()
        plan = _everything(turns, trigger, list(older), None, self.counter)
        if plan.tokens > budget:
            raise ContextBudgetExceeded("the full history", plan.tokens, budget)
        _note_after_system(plan, turns)
        return plan.selection(turns.loaded())


class Tail:
    """A head, then the most recent units that fit, with a marker when anything is left out.

    Configures `recent`, `sliding_window` and `truncate`: `head` picks the message kept at the
    top (or None), `limit` caps the stored messages in the window, `marker` words the note.
    """

    def __init__(
        self,
        counter: TokenCounter,
        *,
        marker: Marker,
        head: Callable[[ContextMessage | None], bool] | None = None,
        limit: int | None = None,
    ) -> None:
        self.counter = counter
        self.marker = marker
        self.head = head
        self.limit = limit

    def __call__(self, turns: Turns, budget: int) -> Selection:
        head = None
        if self.head is not None:
            opening = turns.opening()
            head = opening if self.head(opening) else None
        plan, older = _start(turns, budget, head, limit=self.limit)
        _take_tail(plan, older, budget, limit=self.limit)
        plan.total = turns.total()
        _fit_marker(plan, budget, self.marker, self.counter)
        _note_after_system(plan, turns)
        return plan.selection(turns.loaded())


def recent(counter: TokenCounter, *, keep_recent: int) -> Tail:
    """The last `keep_recent` messages that fit."""
    return Tail(counter, marker=recent_marker, limit=keep_recent)


def sliding_window(counter: TokenCounter) -> Tail:
    """The system message and the most recent messages that fit (sliding window)."""
    return Tail(counter, marker=sliding_window_marker, head=_is_system)


def truncate(counter: TokenCounter, *, max_messages: int | None = None) -> Tail:
    """The first message and the most recent that fit, at most `max_messages`."""
    return Tail(counter, marker=truncate_marker, head=_stands_alone, limit=max_messages)


class Summarize:
    """The system message, a summary of the older turns, and the last `keep_recent` verbatim.

    When everything fits it is `full`. Otherwise the verbatim tail may use the budget left after
    the trigger and head minus `summary_share` of it, reserved for the summary (capped at
    `max_summary_tokens`). A summary that does not fit is asked for again, shorter; if none
    fits, the left-out turns get the sliding-window marker instead.
    """

    def __init__(
        self,
        counter: TokenCounter,
        summarizer: Summarizer,
        *,
        keep_recent: int,
        summary_share: float = 0.25,
        max_summary_tokens: int = 1024,
        attempts: int = 4,
    ) -> None:
        self.counter = counter
        self.summarizer = summarizer
        self.keep_recent = keep_recent
        self.summary_share = summary_share
        self.max_summary_tokens = max_summary_tokens
        self.attempts = attempts

    def __call__(self, turns: Turns, budget: int) -> Selection:
        opening = turns.opening()
        head = opening if _is_system(opening) else None
        plan, rest = _start(turns, budget, head)
        units = list(rest)
        whole = _everything(turns, plan.trigger, units, head, self.counter)
        if whole.tokens <= budget:
            return whole.selection(turns.loaded())

        room = budget - plan.tokens
        reserve = min(int(room * self.summary_share), self.max_summary_tokens)
        limit = self.keep_recent + (1 if plan.head is not None else 0)  # K excludes the head
        _take_tail(plan, iter(units), budget - reserve, limit=limit)
        plan.total = whole.total
        kept = {message.seq for message in plan.messages()}
        left = [message for message in turns.loaded() if message.seq not in kept]
        try:
            plan.note = self._summary(left, budget - plan.tokens)
        except SummarizerFailed:  # the sliding_window result, from the units already read
            plan = _Plan(plan.trigger, whole.total, head if _is_system(head) else None)
            if plan.head is not None and plan.tokens > budget:
                plan.head = None
            _take_tail(plan, iter(units), budget, limit=None)
            _fit_marker(plan, budget, sliding_window_marker, self.counter)
            return plan.selection(turns.loaded())
        if plan.note is not None:
            return plan.selection(turns.loaded(), summarized=True)
        _fit_marker(plan, budget, sliding_window_marker, self.counter)
        return plan.selection(turns.loaded())

    def _summary(self, messages: list[Message], room: int) -> ContextMessage | None:
        return summary_note(
            self.summarizer, messages, room, self.counter,
            max_summary_tokens=self.max_summary_tokens, attempts=self.attempts,
        )  # fmt: skip


class SummarizerFailed(Exception):
    """The summarizer raised; the build falls back to what it would be without a summary."""


def summary_note(
    summarizer: Summarizer,
    messages: Sequence[Message],
    room: int,
    counter: TokenCounter,
    *,
    max_summary_tokens: int = 1024,
    attempts: int = 4,
) -> ContextMessage | None:
    """A "Previous conversation summary" message of at most `room` tokens, or None if none
    fits; a summary that comes back too long is asked for again, shorter.

    A summarizer that raises (an LLM down, a bad answer) must never fail the turn: the error is
    logged and counted (`turnkeeper_summary_failures_total`) and `SummarizerFailed` tells the
    caller to fall back.
    """
    overhead = counter.count_message(Role.SYSTEM, SUMMARY_PREFIX)
    limit = min(max_summary_tokens, room - overhead)
    for _ in range(attempts):
        if limit <= 0:
            return None
        try:
            text = summarizer.summarize(messages, max_tokens=limit, counter=counter)
        except Exception as exc:
            metrics.SUMMARY_FAILURES.inc()
            _log.warning("summary_failed", error=str(exc), error_type=type(exc).__name__)
            raise SummarizerFailed(str(exc)) from exc
        if not text:
            return None
        note = _note(counter, SUMMARY_PREFIX + text, kind="summary")
        if note.tokens <= room:
            return note
        limit -= note.tokens - room
    return None


def strategy_for(
    name: StrategyName,
    counter: TokenCounter,
    *,
    keep_recent: int,
    max_messages: int | None = None,
    summarizer: Summarizer,
) -> Strategy:
    """The strategy called `name`, configured for one build."""
    match name:
        case StrategyName.FULL:
            return Full(counter)
        case StrategyName.RECENT:
            return recent(counter, keep_recent=keep_recent)
        case StrategyName.SLIDING_WINDOW:
            return sliding_window(counter)
        case StrategyName.TRUNCATE:
            return truncate(counter, max_messages=max_messages)
        case StrategyName.SUMMARIZE:
            return Summarize(counter, summarizer, keep_recent=keep_recent)
    raise InvalidInput("strategy", f"unknown context strategy {name!r}")
