"""What the benchmark replays: conversations of turns, with questions whose evidence is known.

A conversation is what turnkeeper stores as one session. It is held in several *sittings*
(LoCoMo calls them sessions): a break between two sittings is hours or days, so a provider's
prompt cache is cold when the next one starts. `Turn.seq` is the seq turnkeeper gives the turn
when the conversation is appended in order (1 for the system message), so a window's seqs can be
compared with a question's evidence directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Turn:
    """One stored message of a conversation."""

    seq: int
    role: str  # system | user | assistant | tool
    content: str
    sitting: int
    tool_calls: tuple[dict[str, Any], ...] | None = None
    tool_call_id: str | None = None

    @property
    def text(self) -> str:
        """Everything a reader of the turn sees: its content and its tool calls' arguments."""
        calls = " ".join(str(call["function"]["arguments"]) for call in self.tool_calls or ())
        return f"{self.content} {calls}".strip()

    @property
    def asks_the_model(self) -> bool:
        """Whether the model is called right after this turn: a user turn or a tool result
        (the model then reads the result and goes on)."""
        return self.role in ("user", "tool")


@dataclass(frozen=True, slots=True)
class Question:
    """A user turn that asks about something said much earlier."""

    seq: int
    """The question's own turn."""
    answer: str
    """The string a window must hold for a model to answer (case-insensitive)."""
    evidence: tuple[int, ...]
    """The seqs of the turns that hold the answer (an update: the old turn and the new one)."""
    kind: str = ""
    """What is asked about: name, date, number or identifier."""
    paraphrased: bool = False
    """Whether the question avoids the words of its evidence."""
    previous: str | None = None
    """For a fact that was updated: the value it replaced (in the first evidence turn)."""

    @property
    def category(self) -> str:
        """How it is asked: about an updated fact, in other words, or in the same words."""
        if self.previous is not None:
            return "updated fact"
        return "other words" if self.paraphrased else "same words"


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation to replay: its turns in order and the questions among them."""

    key: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...] = ()
    source: str = "generated"
    notes: dict[str, Any] = field(default_factory=dict)

    def question_at(self) -> dict[int, Question]:
        """The questions by the seq of the turn that asks them."""
        return {question.seq: question for question in self.questions}

    @property
    def sittings(self) -> int:
        return len({turn.sitting for turn in self.turns})
