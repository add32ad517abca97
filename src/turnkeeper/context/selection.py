"""The machinery every context strategy selects with, and where the invariants live.

A strategy (`context.strategies`) picks a window from a history's units and returns a
`Selection`; the builder turns that into a window and a report. They share this machinery
(`Plan`, `start`, `take_tail`, `fit_marker`):

- the trigger's unit is placed first and never dropped; if it cannot fit, the build fails;
- whole units only, newest first, stopping at the first that does not fit, so that reading
  stops there too (cost grows with the window, not the conversation);
- a marker exactly when a stored message was left out; its own tokens count, and since its
  number's width changes its size, units are given up until it fits;
- a window held at a cut point (`hold_cut`) keeps every unit from the cut on while they fit,
  so its start, its marker and its prefix stay the same from turn to turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from turnkeeper import metrics
from turnkeeper.context.summarizer import Summarizer
from turnkeeper.context.units import Turns, Unit
from turnkeeper.errors import ContextBudgetExceeded
from turnkeeper.logs import get_logger
from turnkeeper.tokens import REPLY_PRIMING, TokenCounter
from turnkeeper.types import ContextMessage, CutMode, Message, Role

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
class CutRule:
    """Where a window that leaves older turns out starts: the mode, the session's stored cut
    point, and the watermarks (shares of the budget, and of a message limit) at which it
    moves and to which it frees the window."""

    mode: CutMode = CutMode.STABLE
    seq: int = 0
    """The session's cut point as stored (0: none yet)."""
    high: float = 1.0
    """The cut point moves once the window from it would fill more than this share."""
    low: float = 0.5
    """A moved cut point leaves the window filling at most this share."""


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
    cut: int | None = None
    """The cut point the window holds (`hold_cut`); None for a strategy that holds none."""


@dataclass(slots=True)
class Plan:
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

    def selection(
        self, loaded: Iterable[Message], *, summarized: bool = False, cut: int | None = None
    ) -> Selection:
        """The selection; with `summarized`, the loaded messages left out are the summary's."""
        if not summarized:
            return Selection(self.messages(), self.left_out, cut=cut)
        kept = {message.seq for message in self.messages() if message.seq is not None}
        out = tuple(message.seq for message in loaded if message.seq not in kept)
        return Selection(self.messages(), self.left_out, summarized=out, cut=cut)


def system_note(counter: TokenCounter, text: str, kind: str = "marker") -> ContextMessage:
    return ContextMessage(Role.SYSTEM, text, counter.count_message(Role.SYSTEM, text), kind=kind)


def start(
    turns: Turns, budget: int, head: ContextMessage | None, *, limit: int | None = None
) -> tuple[Plan, Iterator[Unit]]:
    """The plan with the trigger's unit (which must fit) and the head, kept if it fits too
    (in tokens, and in `limit` stored messages when it counts against one)."""
    trigger, older = turns.units(head)
    plan = Plan(trigger)
    if plan.tokens > budget:
        raise ContextBudgetExceeded("the triggering message", plan.tokens, budget)
    room = limit is None or plan.included < limit
    if head is not None and plan.tokens + head.tokens <= budget and room:
        plan.head = head
    return plan, older


def take_tail(plan: Plan, older: Iterator[Unit], budget: int, *, limit: int | None) -> None:
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


def hold_cut(
    plan: Plan,
    older: Iterator[Unit],
    budget: int,
    *,
    limit: int | None,
    rule: CutRule,
    reserve: int,
) -> None:
    """Add the units a window held at `rule.seq` keeps: every unit from the cut point on
    while the window fits `rule.high` of the budget (and of `limit` stored messages); when it
    does not, only the newest units that fit `rule.low` of them (the cut moves forward and
    frees the rest). Older units that fit `rule.low` are kept too, which moves a cut point
    back only when the budget grew: after a move the window fills up to `rule.low`, and later
    turns only add to it. `reserve` is kept free for the marker throughout.

    Reads newest first and stops at the first unit the window will not hold, so a build
    costs what its window holds. Orphans are skipped, as by `take_tail`."""
    low_tokens, high_tokens = budget * rule.low, budget * rule.high
    low_count = None if limit is None else math.floor(limit * rule.low)
    used, stored = plan.tokens + reserve, plan.included
    taken: list[Unit] = []
    within_low, orphans, unmarked = 0, False, False
    for unit in older:
        if unit.orphan:
            orphans = True
            continue
        used, stored = used + unit.tokens, stored + unit.stored
        if used <= low_tokens and (low_count is None or stored <= low_count):
            taken.append(unit)
            within_low = len(taken)
            continue
        if first_seq(unit) >= rule.seq:
            if used - reserve <= high_tokens and (limit is None or stored <= limit):
                # past `high` only by the marker's reserve: it fits if nothing is left out
                unmarked = unmarked or used > high_tokens
                taken.append(unit)
                continue
            del taken[within_low:]  # the window from the cut overflows: move it to `low`
        elif unmarked:  # something older is left out after all
            del taken[within_low:]
        break
    else:
        if unmarked and orphans:
            del taken[within_low:]
    plan.older.extend(taken)


def first_seq(unit: Unit) -> int:
    """The lowest stored seq in `unit` (a unit of only a pending turn: none, so 0)."""
    return min((message.seq for message in unit.messages if message.seq is not None), default=0)


def cut_of(plan: Plan, after: int) -> int:
    """The cut point `plan` holds: its oldest kept stored seq below the trigger's, or, when it
    keeps nothing older, the trigger's own (`after`: the next seq when it is not stored yet);
    0 when nothing is left out."""
    if not plan.left_out:
        return 0
    seqs = [first_seq(unit) for unit in plan.older] or [first_seq(plan.trigger) or after]
    return min(seqs)


def fit_marker(plan: Plan, budget: int, marker: Marker, counter: TokenCounter) -> None:
    """Set the marker for what was left out, giving up units until marker and all fit."""
    plan.note = None
    while plan.left_out:
        note = system_note(counter, marker(plan.left_out))
        if plan.tokens + note.tokens <= budget:
            plan.note = note
            return
        if not plan.drop_oldest():
            needed = plan.tokens + note.tokens
            raise ContextBudgetExceeded("the triggering message", needed, budget)


def everything(
    turns: Turns,
    trigger: Unit,
    units: list[Unit],
    head: ContextMessage | None,
    counter: TokenCounter,
) -> Plan:
    """Every unit of a fully read history except orphans, with `full`'s note if any."""
    plan = Plan(trigger, turns.total(), head, older=[unit for unit in units if not unit.orphan])
    if plan.left_out:
        plan.note = system_note(counter, full_marker(plan.left_out))
    return plan


def note_after_system(plan: Plan, turns: Turns) -> None:
    """Put the note right after the session's system message when the window opens with it.

    Strategies without a head (`full`, `recent`) keep the system message as an ordinary unit;
    a note must still follow it, never precede it, so that unit becomes the head.
    """
    if plan.head is not None or plan.note is None or not plan.older:
        return
    oldest = plan.older[-1].messages
    if len(oldest) == 1 and is_system(oldest[0]) and turns.opens(oldest[0]):
        plan.older.pop()
        plan.head = oldest[0]


def is_system(message: ContextMessage | None) -> bool:
    return message is not None and message.role is Role.SYSTEM


def stands_alone(message: ContextMessage | None) -> bool:
    """A message that can open a window without its unit: not a tool call nor a tool result."""
    return message is not None and message.role is not Role.TOOL and not message.tool_calls


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
        note = system_note(counter, SUMMARY_PREFIX + text, kind="summary")
        if note.tokens <= room:
            return note
        limit -= note.tokens - room
    return None
