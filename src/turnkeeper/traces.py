"""Turn traces: a record, stored with each assistant reply, of what the model saw.

A window is built fresh on every turn and then forgotten, so "why did it forget X on turn 17?"
cannot be answered from the audit trail alone. `ChatTurns` therefore stores, next to each
reply it produces, the window exactly as it was sent (every entry with its role, text, tokens
and the seq it renders), the knobs that shaped it (strategy, budget, model, encoding), what was
left out or summarized, the summary checkpoint used, and what the upstream said it cost.

The window is stored whole rather than as a list of seqs: markers, summaries and another
agent's attributed turns are not stored messages, and "exact" must survive later summaries.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from turnkeeper.context.formats import to_openai
from turnkeeper.errors import NotFound
from turnkeeper.service import SessionRef, Turnkeeper
from turnkeeper.types import (
    ContextMessage,
    ContextReport,
    ContextWindow,
    Role,
    StrategyName,
    Usage,
)


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One entry of the window as sent: `seq` is the stored message it renders (None for a
    marker or a summary)."""

    role: str
    content: str
    tokens: int
    kind: str = "message"
    seq: int | None = None
    author: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    @classmethod
    def from_window(cls, entry: ContextMessage) -> TraceEntry:
        return cls(
            role=entry.role.value, content=entry.content, tokens=entry.tokens, kind=entry.kind,
            seq=entry.seq, author=entry.author, tool_call_id=entry.tool_call_id,
            tool_calls=[dict(call) for call in entry.tool_calls] if entry.tool_calls else None,
        )  # fmt: skip

    def to_window(self) -> ContextMessage:
        return ContextMessage(
            role=Role(self.role), content=self.content, tokens=self.tokens, kind=self.kind,
            seq=self.seq, author=self.author, tool_call_id=self.tool_call_id,
            tool_calls=tuple(self.tool_calls) if self.tool_calls else None,
        )  # fmt: skip

    @property
    def identity(self) -> tuple[str, ...]:
        """What makes two windows' entries "the same" for a diff: the stored seq, or for a
        marker or summary its kind and text."""
        return ("seq", str(self.seq)) if self.seq is not None else (self.kind, self.content)


@dataclass(frozen=True, slots=True)
class TurnTrace:
    """What the model saw for the reply at `seq`, and what it cost."""

    session_id: str
    seq: int
    turn_seq: int
    source: str
    model: str
    strategy: str
    budget: int
    encoding: str
    kept_seqs: list[int]
    dropped_seqs: list[int]
    summarized_seqs: list[int]
    summary_covers_to_seq: int | None
    tokens_sent: int
    latency_ms: int
    created_at: str
    window: list[TraceEntry] = field(default_factory=list)
    usage: dict[str, int] | None = None
    request_id: str | None = None
    stream: bool = False
    messages_in_store: int = 0
    markers: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        window: ContextWindow,
        *,
        seq: int,
        turn_seq: int,
        source: str,
        model: str,
        usage: Usage | None,
        latency_ms: int,
        created_at: datetime,
        request_id: str | None,
        stream: bool,
    ) -> TurnTrace:
        report = window.report
        summarized = sorted(report.summarized_seqs)
        has_summary = any(entry.kind == "summary" for entry in window.messages)
        return cls(
            session_id=report.session_id,
            seq=seq,
            turn_seq=turn_seq,
            source=source,
            model=model,
            strategy=report.strategy.value,
            budget=report.budget,
            encoding=report.encoding,
            kept_seqs=[entry.seq for entry in window.messages if entry.seq is not None],
            dropped_seqs=sorted(report.dropped_seqs),
            summarized_seqs=summarized,
            summary_covers_to_seq=summarized[-1] if has_summary and summarized else None,
            tokens_sent=report.tokens_used,
            latency_ms=latency_ms,
            created_at=created_at.isoformat(),
            window=[TraceEntry.from_window(entry) for entry in window.messages],
            usage=None
            if usage is None
            else {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            request_id=request_id,
            stream=stream,
            messages_in_store=report.messages_in_store,
            markers=list(report.markers),
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str) -> TurnTrace:
        raw: dict[str, Any] = json.loads(data)
        window = [TraceEntry(**entry) for entry in raw.pop("window", [])]
        return cls(**raw, window=window)

    def to_window(self) -> ContextWindow:
        """The window re-rendered from the trace, with a report of how it was built."""
        report = ContextReport(
            strategy=StrategyName(self.strategy),
            session_id=self.session_id,
            messages_in_store=self.messages_in_store,
            messages_loaded=len(self.kept_seqs) + len(self.dropped_seqs),
            messages_included=len(self.kept_seqs),
            messages_dropped=len(self.dropped_seqs),
            messages_summarized=len(self.summarized_seqs),
            tokens_used=self.tokens_sent,
            budget=self.budget,
            encoding=self.encoding,
            markers=tuple(self.markers),
            dropped_seqs=tuple(self.dropped_seqs),
            summarized_seqs=tuple(self.summarized_seqs),
        )
        return ContextWindow(tuple(entry.to_window() for entry in self.window), report)

    def messages(self) -> list[dict[str, Any]]:
        """The window re-rendered as the OpenAI `messages` that were sent."""
        return to_openai(self.to_window())


@dataclass(frozen=True, slots=True)
class WindowDiff:
    """How a turn's window differs from the previous turn's: what entered, what fell out
    (entries in window order), and how many stayed."""

    entered: list[TraceEntry]
    left: list[TraceEntry]
    stayed: int


def window_diff(previous: TurnTrace | None, current: TurnTrace) -> WindowDiff:
    """`current`'s window against `previous`'s (everything entered when there is none)."""
    before = {entry.identity for entry in previous.window} if previous else set()
    now = {entry.identity for entry in current.window}
    return WindowDiff(
        entered=[entry for entry in current.window if entry.identity not in before],
        left=[entry for entry in previous.window if entry.identity not in now] if previous else [],
        stayed=len(before & now),
    )


def trace_of(
    tk: Turnkeeper, ref: SessionRef, seq: int, *, project: str | None = None
) -> tuple[TurnTrace, TurnTrace | None]:
    """The trace of the reply at `seq`, and the previous turn's (None for the first), for
    `window_diff`. Raises `NotFound` when `seq` is not a reply a chat turn produced."""
    session = tk.get_session(ref, project=project)
    rows = tk.store.read_traces(session.id, upto_seq=seq, limit=2)
    if not rows or rows[0][0] != seq:
        raise NotFound(
            f"message {seq} of session {session.id} has no trace"
            " (only replies produced by a chat turn have one)"
        )
    traces = [TurnTrace.from_json(data) for _, data in rows]
    return traces[0], traces[1] if len(traces) > 1 else None
