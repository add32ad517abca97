"""The `relevant` strategy: the system message, the newest turns, and the older turns relevant to
the turn being answered, with one note saying what was recalled.

The window, in order (the layout that bills least, measured in bench/bench_windows.py; see
docs/concepts/strategies.md):

    the system message
    the newest turns, from a cut that stays put      <- the stable part: a cached prefix
    one note: how many older messages were left out, and that those below were recalled
    the recalled turns, in conversation order
    the turn being answered: the last user message, and the tool calls and results since

Recalled turns come from a `Retriever` (`context.retrieval`; by default the store's full-text
index) asked with the last user message, ranked, each kept whole with its tool calls and
results (a unit read around it by seq range), the best first while they fit `recall_share` of
the budget. The cut of the newest turns is stateless and stable: units whose place in the
session's stored tokens holds a multiple of a step (`recent_share` / 2 of the budget) may open
the block, so the block starts at the same message turn after turn until it outgrows
`recent_share` of the budget, and then moves by one step. Everything the strategy reads is
bounded by the budget and the number of candidates: a build costs the same at 100 messages as
at 100,000.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from turnkeeper.context.retrieval import Retriever
from turnkeeper.context.selection import (
    Plan,
    Selection,
    fit_marker,
    full_marker,
    is_system,
    start,
    system_note,
)
from turnkeeper.context.strategies import Build, Strategy
from turnkeeper.context.units import Turns, Unit, call_ids
from turnkeeper.errors import ContextBudgetExceeded, InvalidInput
from turnkeeper.types import ContextMessage, Role, StrategyName

NEIGHBOURS = 8
"""How far around a recalled tool call or result its unit is looked for (messages each side)."""


def relevant_marker(left_out: int, recalled: int) -> str:
    """The one note of a `relevant` window."""
    if not recalled:
        return f"[Note: {left_out} older messages left out to stay within the token limit]"
    return (
        f"[Note: {left_out} older messages left out to stay within the token limit;"
        f" {recalled} older ones below recalled as relevant to this turn]"
    )


@dataclass(slots=True)
class _Layout:
    """A `relevant` window being assembled; every unit list is oldest first."""

    plan: Plan
    floor: int | None = None
    """The seq of the session's opening system message: never recalled (it leads or is out)."""
    recent: list[Unit] = field(default_factory=list)
    recalled: list[tuple[int, Unit]] = field(default_factory=list)
    """With each unit's rank (0 is the best), kept in conversation order."""
    tail: list[Unit] = field(default_factory=list)
    note: ContextMessage | None = None

    def units(self) -> list[Unit]:
        return [*self.recent, *(unit for _, unit in self.recalled), *self.tail]

    @property
    def tokens(self) -> int:
        note = self.note.tokens if self.note is not None else 0
        return self.plan.tokens + note + sum(unit.tokens for unit in self.units())

    @property
    def included(self) -> int:
        return self.plan.included + sum(unit.stored for unit in self.units())


class Relevant(Strategy):
    """The system message, the newest turns, and older turns relevant to this one.

    `retriever`: who finds the relevant turns (`turnkeeper.Retriever`); None uses the
    store's full-text index. `recent_share` of the budget at most goes to the newest turns,
    `recall_share` at most to recalled ones (less spent is less billed); `candidates` is how
    many the retriever is asked for. `recalled_first` puts the note and the recalled turns
    right after the system message instead of after the newest turns (measured worse: the
    recalled part changes with every question, and everything after it leaves the cache).
    """

    name = StrategyName.RELEVANT

    def __init__(
        self,
        retriever: Retriever | None = None,
        *,
        recent_share: float = 0.5,
        recall_share: float = 0.3,
        candidates: int = 32,
        recalled_first: bool = False,
    ) -> None:
        if retriever is not None and not callable(retriever):
            raise InvalidInput("retriever", f"must be a callable, got {retriever!r}")
        for field_name, share in (("recent_share", recent_share), ("recall_share", recall_share)):
            if not 0 < share < 1:
                raise InvalidInput(field_name, f"must be between 0 and 1, got {share!r}")
        if candidates < 1:
            raise InvalidInput("candidates", f"must be at least 1, got {candidates!r}")
        self.retriever = retriever
        self.recent_share = recent_share
        self.recall_share = recall_share
        self.candidates = candidates
        self.recalled_first = recalled_first
        # a retriever of the caller's may answer differently for the same session version
        self.window_per_version = retriever is None

    def select(self, turns: Turns, budget: int, build: Build) -> Selection:
        opening = turns.opening()
        head = opening if is_system(opening) else None
        plan, older = start(turns, budget, head)
        read: list[Unit] = []
        used = plan.tokens
        for unit in older:
            read.append(unit)
            used += 0 if unit.orphan else unit.tokens
            if used > budget:
                break
        else:  # everything fits: the whole history, in order
            plan.older = [unit for unit in read if not unit.orphan]
            plan.total = turns.total()
            fit_marker(plan, budget, full_marker, build.counter)
            return plan.selection(turns.loaded())
        layout = _Layout(plan, floor=None if head is None else head.seq)
        query, taken = self._tail(layout, read, budget)
        self._recent(layout, turns, (read[:taken], read[taken:]), budget, build)
        self._recall(layout, turns, query, budget, build)
        total = turns.total()
        self._fit(layout, total, budget, build)
        return Selection(self._messages(layout), total - layout.included)

    def _tail(self, layout: _Layout, read: list[Unit], budget: int) -> tuple[str, int]:
        """The units after the last user message (it included), which stay last; the query
        (that message's text, else the trigger's); how many of `read` (newest first) it went
        through."""
        asks = [m for m in layout.plan.trigger.messages if m.role is Role.USER]
        query = asks[-1].content if asks else ""
        taken = 0
        while not asks and taken < len(read):
            unit = read[taken]
            taken += 1
            if unit.orphan:
                continue
            if layout.tokens + unit.tokens > budget:
                break
            layout.tail.insert(0, unit)
            asks = [m for m in unit.messages if m.role is Role.USER]
            query = asks[-1].content if asks else query
        if not query:
            query = " ".join(m.content for m in layout.plan.trigger.messages)
        return query, taken

    def _recent(
        self,
        layout: _Layout,
        turns: Turns,
        read: tuple[list[Unit], list[Unit]],
        budget: int,
        build: Build,
    ) -> None:
        """The newest units before the tail (`read`: the units the tail went through, and the
        rest, newest first), from the oldest unit holding a step of the session's stored tokens
        that keeps the block within `recent_share` of the budget."""
        session = build.session
        limit = min(self.recent_share * budget, budget - layout.tokens)
        step = max(1, int(self.recent_share * budget / 2))
        passed, rest = read
        after = sum(turns.stored_tokens(unit) for unit in (layout.plan.trigger, *passed))
        used = 0
        opens = 0  # how many of `rest` the block takes
        for index, unit in enumerate(rest):
            stored = turns.stored_tokens(unit)
            after += stored
            used += 0 if unit.orphan else unit.tokens
            if used > limit:
                break
            if session is None:  # no stored totals to place a step: the newest that fit
                opens = index + 1
                continue
            end = session.stored_tokens - after + stored
            begin = end - stored
            if -(-begin // step) * step < end:  # the unit holds a multiple of `step`
                opens = index + 1
        layout.recent = [unit for unit in reversed(rest[:opens]) if not unit.orphan]

    def _recall(self, layout: _Layout, turns: Turns, query: str, budget: int, build: Build) -> None:
        """The best-ranked older units that fit `recall_share` of the budget, each whole."""
        retriever = self.retriever or build.retriever
        session = build.session
        kept = [m.seq for unit in layout.units() for m in unit.messages if m.seq is not None]
        kept += [m.seq for m in layout.plan.trigger.messages if m.seq is not None]
        if retriever is None or session is None or not kept:
            return
        below = min(kept)
        floor = layout.floor
        asked = retriever(session, query, self.candidates + len(kept))
        hits = [
            seq
            for seq in dict.fromkeys(int(seq) for seq in asked)
            if 0 < seq < below and (floor is None or seq > floor)
        ][: self.candidates]
        room = min(self.recall_share * budget, budget - layout.tokens)
        held: set[int] = set()
        for rank, unit in enumerate(_units_of(turns, hits, below, floor)):
            seqs = {m.seq for m in unit.messages if m.seq is not None}
            if seqs & held or unit.tokens > room:
                continue
            held |= seqs
            room -= unit.tokens
            layout.recalled.append((rank, unit))
        layout.recalled.sort(key=lambda ranked: ranked[1].messages[0].seq or 0)

    def _fit(self, layout: _Layout, total: int, budget: int, build: Build) -> None:
        """The note, giving up the worst recalled unit, then the oldest newest one, until the
        window and the note fit."""
        while True:
            left_out = total - layout.included
            layout.note = None
            if not left_out:
                return
            text = relevant_marker(left_out, sum(u.stored for _, u in layout.recalled))
            layout.note = system_note(build.counter, text)
            if layout.tokens <= budget:
                return
            if layout.recalled:
                worst = max(layout.recalled, key=lambda ranked: ranked[0])
                layout.recalled.remove(worst)
            elif layout.recent:
                layout.recent.pop(0)
            elif layout.tail:
                layout.tail.pop(0)
            elif layout.plan.head is not None:
                layout.plan.head = None
            else:
                raise ContextBudgetExceeded("the triggering message", layout.tokens, budget)

    def _messages(self, layout: _Layout) -> tuple[ContextMessage, ...]:
        head = [layout.plan.head] if layout.plan.head is not None else []
        note = [layout.note] if layout.note is not None else []
        recent = [m for unit in layout.recent for m in unit.messages]
        recalled = [m for _, unit in layout.recalled for m in unit.messages]
        tail = [m for unit in layout.tail for m in unit.messages]
        trigger = list(layout.plan.trigger.messages)
        if self.recalled_first:
            return (*head, *note, *recalled, *recent, *tail, *trigger)
        return (*head, *recent, *note, *recalled, *tail, *trigger)


def _units_of(turns: Turns, hits: list[int], below: int, floor: int | None) -> list[Unit]:
    """The whole unit of each hit, in the hits' order; a hit whose unit is not whole within
    `floor` < seq < `below` (a tool result whose call is out of reach, a call missing a result)
    is left out. Hits are read by runs of nearby seqs; tool calls and results once more with
    their neighbours."""
    found: dict[int, Unit] = {}
    for first, last in _runs(sorted(hits)):
        for read in turns.around(first, last):
            found.update((m.seq, read) for m in read.messages if m.seq is not None)
    low = (floor or 0) + 1
    for seq in hits:
        hit = found.get(seq)
        if hit is not None and not _whole(hit):
            around = turns.around(max(low, seq - NEIGHBOURS), min(below - 1, seq + NEIGHBOURS))
            for candidate in around:
                if any(m.seq == seq for m in candidate.messages):
                    found[seq] = candidate
    units = [found[seq] for seq in hits if seq in found]
    return [unit for unit in units if _whole(unit)]


def _whole(unit: Unit) -> bool:
    """Not an orphan tool result, and every tool call it makes answered within it."""
    if unit.orphan:
        return False
    calls = frozenset().union(*(call_ids(m) for m in unit.messages))
    answered = {m.tool_call_id for m in unit.messages if m.role is Role.TOOL}
    return calls <= answered


def _runs(seqs: list[int], gap: int = 3) -> list[tuple[int, int]]:
    """Sorted seqs as ranges, joining those at most `gap` apart (one read for each)."""
    runs: list[tuple[int, int]] = []
    for seq in seqs:
        if runs and seq - runs[-1][1] <= gap:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    return runs
