"""The policies compared: turnkeeper's strategies through the public API, and two references.

A `Policy` starts a `Replay` for one conversation at one budget; the replay is given every turn
in order (`add`) and asked for the window the model would be sent after each user turn and tool
result (`window`), a `turnkeeper.ContextWindow` whatever built it, so every policy's windows are
rendered and billed by the same code.

- `Strategy(name_or_object)`: `tk.append` each turn to a session of its own on a real SQLite
  file, and `tk.context(session, strategy=…, budget_tokens=B)`. Any strategy registered by name,
  or a `turnkeeper.Strategy` object, is measured the same way.
- `Relevance` (the issue's BM25 reference): the system message, the newest turns for half the
  budget, and older turns ranked by BM25 against the turn being answered for the rest, each
  kept whole with its tool results, in conversation order, with one note.
- `HeldCut` (the cut-point reference): everything after a cut point; the cut stays put while the
  window fits, and when it overflows moves forward so that half the budget is free again. The
  note naming what was left out changes only when the cut moves.

The two references are written against the conversation, not the store: they are the bars
the library's strategies are measured against, not candidates for it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import turnkeeper
from turnkeeper.tokens import REPLY_PRIMING, TokenCounter
from windows.conversations import Conversation, Turn


class Replay(Protocol):
    def add(self, turn: Turn) -> None:
        """The conversation's next turn."""

    def window(self) -> turnkeeper.ContextWindow:
        """The window for the newest turn."""


class Policy(Protocol):
    label: str
    """The row's name in the tables."""
    budgeted: bool
    """False for a policy that ignores the budget (`full`): replayed once, shown in each."""

    def start(self, conversation: Conversation, budget: int) -> Replay: ...


class Counted:
    """Token counts of one conversation's turns and notes, each counted once (a turn by its
    seq and shape: a policy may hold part of one, its text without its tool call)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._turns: dict[tuple[int, int, int], int] = {}
        self._notes: dict[str, int] = {}

    def turn(self, turn: Turn) -> int:
        key = (turn.seq, len(turn.content), len(turn.tool_calls or ()))
        found = self._turns.get(key)
        if found is None:
            found = self._turns[key] = tokens_of(self.counter, turn)
        return found

    def note(self, text: str) -> int:
        found = self._notes.get(text)
        if found is None:
            found = self._notes[text] = self.counter.count_message("system", text)
        return found


def window_of(
    entries: Sequence[Turn | str],
    counted: Counted,
    *,
    label: str,
    budget: int,
    stored: int,
) -> turnkeeper.ContextWindow:
    """A `ContextWindow` of a policy's choice: turns as stored messages, strings as notes."""
    messages = []
    for entry in entries:
        if isinstance(entry, str):
            note = turnkeeper.ContextMessage(
                turnkeeper.Role.SYSTEM, entry, counted.note(entry), "marker"
            )
            messages.append(note)
        else:
            messages.append(
                turnkeeper.ContextMessage(
                    turnkeeper.Role(entry.role),
                    entry.content,
                    counted.turn(entry),
                    seq=entry.seq,
                    tool_calls=entry.tool_calls,
                    tool_call_id=entry.tool_call_id,
                )
            )
    included = sum(1 for entry in entries if not isinstance(entry, str))
    report = turnkeeper.ContextReport(
        strategy=label,
        session_id=label,
        messages_in_store=stored,
        messages_loaded=stored,
        messages_included=included,
        messages_dropped=stored - included,
        messages_summarized=0,
        tokens_used=REPLY_PRIMING + sum(message.tokens for message in messages),
        budget=budget,
        encoding=counted.counter.encoding,
    )
    return turnkeeper.ContextWindow(tuple(messages), report)


def tokens_of(counter: TokenCounter, turn: Turn) -> int:
    return counter.count_message(
        turn.role, turn.content, tool_calls=turn.tool_calls, tool_call_id=turn.tool_call_id
    )


@dataclass
class Strategy:
    """A turnkeeper strategy, by name or as an object, replayed through the public API."""

    tk: turnkeeper.Turnkeeper
    strategy: str | turnkeeper.Strategy
    label: str = ""
    budgeted: bool = True
    unbounded: int = 10_000_000
    """The budget given when `budgeted` is False (`full`: everything, whatever it costs)."""

    def __post_init__(self) -> None:
        if not self.label:
            name = self.strategy if isinstance(self.strategy, str) else self.strategy.name
            self.label = f"`{name}`" + ("" if self.budgeted else " (no budget)")

    def start(self, conversation: Conversation, budget: int) -> Replay:
        name = re.sub(r"[^\w.:@+=~-]+", "-", self.label).strip("-")
        key = f"{conversation.key}:{name}:{budget if self.budgeted else 'all'}"
        session, _ = self.tk.get_or_create_session(key)
        return _StoredReplay(self, session, budget if self.budgeted else self.unbounded)


@dataclass
class _StoredReplay:
    policy: Strategy
    session: turnkeeper.Session
    budget: int

    def add(self, turn: Turn) -> None:
        stored = self.policy.tk.append(
            self.session,
            turn.role,
            turn.content,
            tool_calls=turn.tool_calls,
            tool_call_id=turn.tool_call_id,
        )
        assert stored.seq == turn.seq, (stored.seq, turn.seq)

    def window(self) -> turnkeeper.ContextWindow:
        return self.policy.tk.context(
            self.session, strategy=self.policy.strategy, budget_tokens=self.budget
        )


class _Units:
    """The turns so far, grouped in the units a window keeps whole (a tool call with its
    results), with each unit's tokens."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counted = Counted(counter)
        self.system: Turn | None = None
        self.units: list[list[Turn]] = []
        self.tokens: list[int] = []
        self.messages = 0

    def add(self, turn: Turn) -> bool:
        """Add `turn`; True when it starts a new unit."""
        self.messages += 1
        cost = self.counted.turn(turn)
        if turn.role == "system" and self.system is None and not self.units:
            self.system = turn
            return False
        last = self.units[-1] if self.units else None
        answers = last and last[0].tool_calls and turn.tool_call_id
        if answers and any(call["id"] == turn.tool_call_id for call in last[0].tool_calls or ()):
            last.append(turn)
            self.tokens[-1] += cost
            return False
        self.units.append([turn])
        self.tokens.append(cost)
        return True

    def head(self) -> list[Turn | str]:
        return [self.system] if self.system else []

    def head_tokens(self) -> int:
        return self.counted.turn(self.system) if self.system else 0

    def note_tokens(self, note: str) -> int:
        return self.counted.note(note)

    def window(
        self, entries: Sequence[Turn | str], *, label: str, budget: int
    ) -> turnkeeper.ContextWindow:
        return window_of(entries, self.counted, label=label, budget=budget, stored=self.messages)


@dataclass
class HeldCut:
    """The reference that holds its cut point until the window overflows, then frees half."""

    counter: TokenCounter
    free_share: float = 0.5
    label: str = "reference: held cut point"
    budgeted: bool = True

    def start(self, conversation: Conversation, budget: int) -> Replay:
        return _HeldCutReplay(self, budget, _Units(self.counter))


@dataclass
class _HeldCutReplay:
    policy: HeldCut
    budget: int
    turns: _Units
    cut: int = 0
    """The first unit in the window."""
    left_out: int = 0
    """Messages before the cut (the note says so; it changes only when the cut moves)."""

    def add(self, turn: Turn) -> None:
        self.turns.add(turn)

    def _note(self) -> str:
        return f"[Note: {self.left_out} older messages left out to stay within the token limit]"

    def _cost(self, cut: int, left_out: int) -> int:
        note = self.turns.note_tokens(self._note()) if left_out else 0
        fixed = REPLY_PRIMING + self.turns.head_tokens() + note
        return fixed + sum(self.turns.tokens[cut:])

    def window(self) -> turnkeeper.ContextWindow:
        units = self.turns.units
        if self._cost(self.cut, self.left_out) > self.budget:
            target = self.budget * (1 - self.policy.free_share)
            while self.cut < len(units) - 1:
                self.left_out += len(units[self.cut])
                self.cut += 1
                if self._cost(self.cut, self.left_out) <= target:
                    break
        entries: list[Turn | str] = self.turns.head()
        if self.left_out:
            entries.append(self._note())
        entries.extend(turn for unit in units[self.cut :] for turn in unit)
        return self.turns.window(entries, label=self.policy.label, budget=self.budget)


_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass
class BM25:
    """Okapi BM25 over documents added one at a time (k1 = 1.5, b = 0.75, Lucene's idf)."""

    k1: float = 1.5
    b: float = 0.75
    frequencies: list[Counter[str]] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    postings: dict[str, list[int]] = field(default_factory=dict)

    def add(self, text: str) -> None:
        """Add a document (its number is the count before it)."""
        terms = Counter(words(text))
        number = len(self.frequencies)
        self.frequencies.append(terms)
        self.lengths.append(sum(terms.values()))
        for term in terms:
            self.postings.setdefault(term, []).append(number)

    def extend(self, number: int, text: str) -> None:
        """Add `text` to document `number`."""
        extra = Counter(words(text))
        for term in extra:
            if term not in self.frequencies[number]:
                self.postings.setdefault(term, []).append(number)
        self.frequencies[number].update(extra)
        self.lengths[number] += sum(extra.values())

    def scores(self, query: str, below: int) -> dict[int, float]:
        """Scores of documents numbered below `below` that share a word with `query`."""
        count = len(self.frequencies)
        average = sum(self.lengths) / count if count else 1.0
        found: dict[int, float] = {}
        for term in set(words(query)):
            posting = self.postings.get(term, ())
            idf = math.log(1 + (count - len(posting) + 0.5) / (len(posting) + 0.5))
            for number in posting:
                if number >= below:
                    break
                tf = self.frequencies[number][term]
                norm = 1 - self.b + self.b * self.lengths[number] / average
                found[number] = found.get(number, 0.0) + idf * tf * (self.k1 + 1) / (
                    tf + self.k1 * norm
                )
        return found


@dataclass
class Relevance:
    """The BM25 reference: newest turns for half the budget, older ones ranked for the rest."""

    counter: TokenCounter
    recent_share: float = 0.5
    label: str = "reference: BM25, newest half"
    budgeted: bool = True
    note: str = "[Note: older turns left out; those below were recalled as relevant to this turn]"

    def start(self, conversation: Conversation, budget: int) -> Replay:
        return _RelevanceReplay(self, budget, _Units(self.counter), BM25())


@dataclass
class _RelevanceReplay:
    policy: Relevance
    budget: int
    turns: _Units
    index: BM25
    query: str = ""

    def add(self, turn: Turn) -> None:
        if self.turns.add(turn):
            self.index.add(turn.text)
        elif turn.role != "system":
            self.index.extend(len(self.turns.units) - 1, turn.text)
        if turn.role == "user":
            self.query = turn.content

    def window(self) -> turnkeeper.ContextWindow:
        units, tokens = self.turns.units, self.turns.tokens
        note_cost = self.turns.note_tokens(self.policy.note)
        room = self.budget - REPLY_PRIMING - self.turns.head_tokens()
        recent_room = self.budget * self.policy.recent_share
        first, used = len(units) - 1, tokens[-1]
        while first > 0 and used + tokens[first - 1] <= min(recent_room, room):
            first -= 1
            used += tokens[first]
        recalled: list[int] = []
        if first > 0:
            left = room - used - note_cost
            ranked = sorted(
                self.index.scores(self.query, first).items(), key=lambda s: (-s[1], -s[0])
            )
            for number, _ in ranked:
                if tokens[number] <= left:
                    recalled.append(number)
                    left -= tokens[number]
        entries: list[Turn | str] = self.turns.head()
        if first > 0:
            entries.append(self.policy.note)
        chosen = sorted(recalled) + list(range(first, len(units)))
        entries.extend(turn for number in chosen for turn in units[number])
        return self.turns.window(entries, label=self.policy.label, budget=self.budget)
