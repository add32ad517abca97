"""Replaying a conversation through a policy: what each window holds, and what it is billed.

At every turn the model answers (each user turn and each tool result) the policy builds the
window, which is rendered as the OpenAI and the Anthropic request and charged under each rule
(a cold cache at the first request of a sitting). At a question it is also scored: the share of
its evidence turns whose message is in the window (`evidence recall`) and whether the answer
string is anywhere in the window's text (`answer present`: notes and summaries count).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import turnkeeper
from windows.billing import (
    AnthropicPromptCache,
    Bill,
    OpenAIPrefixCache,
    Rendering,
    anthropic_request,
)
from windows.conversations import Conversation
from windows.policies import Policy


class OverBudget(AssertionError):
    """A policy built a window larger than its budget."""


@dataclass
class Scores:
    """What one policy's windows held and cost, over one or more conversations."""

    questions: int = 0
    evidence: int = 0
    evidence_held: int = 0
    answers_held: int = 0
    openai: Bill = field(default_factory=Bill)
    anthropic: Bill = field(default_factory=Bill)
    windows: int = 0
    window_tokens: int = 0
    broken_pairs: int = 0
    """Windows holding a tool result without the call it answers (a provider refuses them)."""
    by_category: dict[str, list[int]] = field(default_factory=dict)
    """Per question category (`Question.category`): [evidence turns, of them in the window]."""

    def merge(self, other: Scores) -> None:
        self.questions += other.questions
        self.evidence += other.evidence
        self.evidence_held += other.evidence_held
        self.answers_held += other.answers_held
        self.openai.merge(other.openai)
        self.anthropic.merge(other.anthropic)
        self.windows += other.windows
        self.window_tokens += other.window_tokens
        self.broken_pairs += other.broken_pairs
        for category, (evidence, held) in other.by_category.items():
            mine = self.by_category.setdefault(category, [0, 0])
            mine[0] += evidence
            mine[1] += held

    @property
    def recall(self) -> float:
        return self.evidence_held / self.evidence if self.evidence else float("nan")

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scores:
        bills = {name: Bill(**data[name]) for name in ("openai", "anthropic")}
        return cls(**{**data, **bills})

    def recall_of(self, category: str) -> float:
        evidence, held = self.by_category.get(category, (0, 0))
        return held / evidence if evidence else float("nan")

    @property
    def answered(self) -> float:
        return self.answers_held / self.questions if self.questions else float("nan")


def window_text(window: turnkeeper.ContextWindow, *, skip_seq: int) -> str:
    """The text of every entry of the window but the question's own turn (lower case)."""
    parts = []
    for message in window.messages:
        if message.seq == skip_seq and message.kind != "summary":
            continue
        parts.append(message.content)
        parts.extend(str(call["function"]["arguments"]) for call in message.tool_calls or ())
    return "\n".join(parts).lower()


def broken_pair(window: turnkeeper.ContextWindow) -> bool:
    calls = {str(call["id"]) for m in window.messages for call in m.tool_calls or ()}
    return any(m.tool_call_id and m.tool_call_id not in calls for m in window.messages)


def replay(conversation: Conversation, policy: Policy, budget: int, rendering: Rendering) -> Scores:
    """Replay `conversation` through `policy` at `budget` tokens."""
    scores = Scores()
    run = policy.start(conversation, budget)
    openai, anthropic = OpenAIPrefixCache(), AnthropicPromptCache()
    questions = conversation.question_at()
    sitting = None
    for turn in conversation.turns:
        run.add(turn)
        if not turn.asks_the_model:
            continue
        window = run.window()
        used = window.report.tokens_used
        if policy.budgeted and used > budget:
            raise OverBudget(f"{policy.label}: {used} tokens at a budget of {budget}")
        if turn.sitting != sitting:
            sitting = turn.sitting
            openai.cold()
            anthropic.cold()
        scores.openai.add(openai.charge(rendering.openai(window)))
        scores.anthropic.add(anthropic.charge(rendering.anthropic(anthropic_request(window))))
        scores.windows += 1
        scores.window_tokens += used
        scores.broken_pairs += broken_pair(window)
        question = questions.get(turn.seq)
        if question is not None:
            held = {message.seq for message in window.messages if message.kind == "message"}
            scores.questions += 1
            found = sum(seq in held for seq in question.evidence)
            scores.evidence += len(question.evidence)
            scores.evidence_held += found
            category = scores.by_category.setdefault(question.category, [0, 0])
            category[0] += len(question.evidence)
            category[1] += found
            text = window_text(window, skip_seq=turn.seq)
            scores.answers_held += question.answer.lower() in text
    return scores
