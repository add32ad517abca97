"""Summaries of the turns a window leaves out (the `summarize` strategy, the conversation context
object).

A `Summarizer` turns messages into text no longer than a token limit. The extractive one here is
deterministic and offline, so `summarize` works (and is testable) without any model; an LLM-backed
summarizer implements the same protocol.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from turnkeeper.config import DEFAULT_SUMMARY_PROMPT
from turnkeeper.tokens import TokenCounter
from turnkeeper.types import Message, Role

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_SPACES = re.compile(r"\s+")
_ELLIPSIS = "…"


class Summarizer(Protocol):
    """Condenses messages into at most `max_tokens` tokens (as `counter.count_text` counts)."""

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        """A summary of `messages`, oldest first; `previous` is an earlier summary of the turns
        before them, to be folded in. Returns "" when there is nothing (or no room) to say."""
        ...


class ExtractiveSummarizer:
    """One line per message, `author: first sentence`, keeping what fits (the offline default).

    When not every line fits, it keeps the earliest user request (what the conversation is
    about) and then the newest lines (where it stands), because those are what a model most
    needs to carry on; lines are cut to `line_chars` characters.
    """

    method = "extractive"
    """What summary checkpoints record as their `method`."""

    def __init__(self, *, line_chars: int = 200) -> None:
        self.line_chars = line_chars

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        entries = [(message.role, line) for message in messages if (line := self._line(message))]
        lines = [line for _, line in entries]
        wanted = [index for index, (role, _) in enumerate(entries) if role is Role.USER][:1]
        if previous and previous.strip():
            lines.insert(0, previous.strip())
            wanted = [0, *(index + 1 for index in wanted)]
        if not lines or max_tokens <= 0:
            return ""
        chosen = _choose(lines, wanted, max_tokens, counter)
        if not chosen:
            return _cut(lines[wanted[0] if wanted else -1], max_tokens, counter)
        return "\n".join(lines[index] for index in sorted(chosen))

    def _line(self, message: Message) -> str:
        speaker = message.author or message.role.value
        text = _SPACES.sub(" ", message.content).strip()
        text = _SENTENCE_END.split(text, maxsplit=1)[0]
        if not text and message.tool_calls:
            names = (
                str((call.get("function") or {}).get("name", "")) for call in message.tool_calls
            )
            text = "called " + ", ".join(name for name in names if name)
        if not text:
            return ""
        if len(text) > self.line_chars:
            text = text[: self.line_chars - 1].rstrip() + _ELLIPSIS
        return f"{speaker}: {text}"


class Completer(Protocol):
    """The one `LLMClient` method the LLM summarizer needs."""

    def complete(self, body: Mapping[str, Any]) -> dict[str, Any]: ...


class LLMSummarizer:
    """Asks a (fast) model on an OpenAI-compatible endpoint for the summary.

    The earlier summary, when there is one, is sent with the new messages so the model folds
    them (recursive summarization): each call reads only what is new. The answer is cut to
    `max_tokens` if the model overran it. Failures raise (`UpstreamError`); the context builder
    falls back rather than fail the turn.
    """

    def __init__(
        self, client: Completer, *, model: str, prompt: str = DEFAULT_SUMMARY_PROMPT
    ) -> None:
        self.client = client
        self.model = model
        self.prompt = prompt
        self.method = f"llm:{model}"

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        if max_tokens <= 0 or not (messages or previous):
            return ""
        transcript = "\n".join(
            f"{m.author or m.role.value}: {m.content}" for m in messages if m.content
        )
        text = transcript
        if previous:
            text = f"Summary so far:\n{previous}\n\nNew messages:\n{transcript}"
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": self.prompt},
                {"role": "user", "content": text},
            ],
            "max_tokens": max_tokens,
        }
        answer = self.client.complete(body)
        choices = answer.get("choices") or [{}]
        summary = str((choices[0].get("message") or {}).get("content") or "").strip()
        if counter.count_text(summary) > max_tokens:
            return _cut(summary, max_tokens, counter)
        return summary


def _choose(
    lines: list[str], wanted: list[int], max_tokens: int, counter: TokenCounter
) -> set[int]:
    """Indexes of the lines to keep: `wanted` ones that fit, then the newest until one does not.

    Lines are costed one by one (plus one token for the newline joining them), which is cheap
    and, for BPE and chars/4 alike, no less than the joined text costs in practice; the joined
    text is still counted at the end and lines are given up until it fits, so the limit holds.
    """
    chosen: set[int] = set()
    used = 0
    for index in wanted:
        cost = counter.count_text(lines[index]) + 1
        if used + cost <= max_tokens + 1:
            chosen.add(index)
            used += cost
    for index in range(len(lines) - 1, -1, -1):
        if index in chosen:
            continue
        cost = counter.count_text(lines[index]) + 1
        if used + cost > max_tokens + 1:
            break
        chosen.add(index)
        used += cost
    while chosen and counter.count_text("\n".join(lines[i] for i in sorted(chosen))) > max_tokens:
        optional = chosen.difference(wanted)
        chosen.discard(min(optional) if optional else max(chosen))
    return chosen


def _cut(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of `text` (with an ellipsis) that fits `max_tokens`, or ""."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if counter.count_text(text[:middle] + _ELLIPSIS) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low] + _ELLIPSIS if low else ""
