"""Turn traces: a record, stored with each assistant reply, of what the model saw.

A window is built fresh on every turn and then forgotten, so "why did it forget X on turn 17?"
cannot be answered from the audit trail alone. `ChatTurns` therefore stores, next to each
reply it produces, the window exactly as it was sent (every entry with its role, text, tokens
and the seq it renders), the knobs that shaped it (strategy, budget, model, encoding), what was
left out or summarized, the summary checkpoint used, and what the upstream said it cost.

Stored compactly: an entry that renders a stored message verbatim is kept as a reference to
its seq (the audit trail is append-only, and deleting a message deletes the traces that could
refer to it), while markers, summaries and another agent's attributed turns, which are not
stored messages, are kept whole; seq lists are kept as runs. So a trace costs about a
window's worth of seqs, not a window's worth of text (`encode` / `decode`).

A trace names every message it counts: `dropped_seqs` holds every message left out (the older
ones the build never read too), so its length is what the window's marker says was left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from turnkeeper import jsonenc
from turnkeeper.context.formats import to_openai
from turnkeeper.errors import NotFound
from turnkeeper.service import SessionRef, Turnkeeper
from turnkeeper.storage.base import Store, TraceStore, require
from turnkeeper.types import (
    NO_SEQS,
    ContextMessage,
    ContextReport,
    ContextWindow,
    Message,
    MessageQuery,
    Role,
    SeqRanges,
    StrategyName,
    Usage,
)
from turnkeeper.validation import MAX_TRACE_DEPTH


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One entry of the window as sent: `seq` is the stored message it renders (None for a
    marker or a summary); `internal` marks a message the product keeps from its users."""

    role: str
    content: str
    tokens: int
    kind: str = "message"
    seq: int | None = None
    author: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    internal: bool = False

    @classmethod
    def from_window(cls, entry: ContextMessage) -> TraceEntry:
        return cls(
            role=entry.role.value, content=entry.content, tokens=entry.tokens, kind=entry.kind,
            seq=entry.seq, author=entry.author, tool_call_id=entry.tool_call_id,
            tool_calls=[dict(call) for call in entry.tool_calls] if entry.tool_calls else None,
            internal=entry.internal,
        )  # fmt: skip

    def to_window(self) -> ContextMessage:
        return ContextMessage(
            role=Role(self.role), content=self.content, tokens=self.tokens, kind=self.kind,
            seq=self.seq, author=self.author, tool_call_id=self.tool_call_id,
            tool_calls=tuple(self.tool_calls) if self.tool_calls else None,
            internal=self.internal,
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
    dropped_seqs: SeqRanges
    summarized_seqs: SeqRanges
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
    loaded_seqs: SeqRanges = NO_SEQS
    """The messages the build read (empty in traces stored before it was recorded)."""
    cut_seq: int | None = None
    """The session's cut point the window was held at (`ContextReport.cut_seq`): None for a
    strategy that holds none, and in traces stored before it was recorded."""

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
        """The trace of a reply to the turn `turn_seq`, sent `window` (`usage`'s prompt-cache
        counts are kept when the upstream reported some)."""
        report = window.report
        has_summary = any(entry.kind == "summary" for entry in window.messages)
        return cls(
            session_id=report.session_id,
            seq=seq,
            turn_seq=turn_seq,
            source=source,
            model=model,
            strategy=str(report.strategy),
            budget=report.budget,
            encoding=report.encoding,
            kept_seqs=[entry.seq for entry in window.messages if entry.seq is not None],
            dropped_seqs=report.dropped_seqs,
            summarized_seqs=report.summarized_seqs,
            summary_covers_to_seq=report.summarized_seqs.last if has_summary else None,
            tokens_sent=report.tokens_used,
            latency_ms=latency_ms,
            created_at=created_at.isoformat(),
            window=[TraceEntry.from_window(entry) for entry in window.messages],
            usage=None if usage is None else usage.counts(),
            request_id=request_id,
            stream=stream,
            messages_in_store=report.messages_in_store,
            markers=list(report.markers),
            loaded_seqs=report.loaded_seqs,
            cut_seq=report.cut_seq,
        )

    def to_window(self) -> ContextWindow:
        """The window re-rendered from the trace, with a report of how it was built."""
        # A trace stored before `loaded_seqs` was recorded listed only the dropped messages
        # its build read: those, the kept and the summarized ones are what it read.
        loaded = self.loaded_seqs or (
            SeqRanges.of(self.kept_seqs) | self.dropped_seqs | self.summarized_seqs
        )
        report = ContextReport(
            strategy=_strategy_name(self.strategy),
            session_id=self.session_id,
            messages_in_store=self.messages_in_store,
            messages_loaded=len(loaded),
            messages_included=len(self.kept_seqs),
            messages_dropped=len(self.dropped_seqs),
            messages_summarized=len(self.summarized_seqs),
            tokens_used=self.tokens_sent,
            budget=self.budget,
            encoding=self.encoding,
            markers=tuple(self.markers),
            dropped_seqs=self.dropped_seqs,
            summarized_seqs=self.summarized_seqs,
            loaded_seqs=loaded,
            cut_seq=self.cut_seq,
        )
        return ContextWindow(tuple(entry.to_window() for entry in self.window), report)

    def messages(self) -> list[dict[str, Any]]:
        """The window re-rendered as the OpenAI `messages` that were sent."""
        return to_openai(self.to_window())


@dataclass(frozen=True, slots=True)
class WindowDiff:
    """How a turn's window differs from the previous turn's: what entered, what fell out
    (entries in window order), and how many stayed.

    `prefix_matched` says whether the previous window, as rendered for the model, is the start
    of this one (None: there is no previous turn): a provider's prompt cache can serve only such
    a prefix, so a turn that rewrote its history (a moved cut point, a changed marker, a new
    summary) pays for the whole window again. When it is False, `prefix_broken_at` is the index,
    in this window, of the first message that differs (this window's length when it is shorter
    than the previous one and matches it up to there)."""

    entered: list[TraceEntry]
    left: list[TraceEntry]
    stayed: int
    prefix_matched: bool | None = None
    prefix_broken_at: int | None = None


def window_diff(previous: TurnTrace | None, current: TurnTrace) -> WindowDiff:
    """`current`'s window against `previous`'s (everything entered when there is none)."""
    before = {entry.identity for entry in previous.window} if previous else set()
    now = {entry.identity for entry in current.window}
    broken_at = prefix_break(previous.messages(), current.messages()) if previous else None
    return WindowDiff(
        entered=[entry for entry in current.window if entry.identity not in before],
        left=[entry for entry in previous.window if entry.identity not in now] if previous else [],
        stayed=len(before & now),
        prefix_matched=None if previous is None else broken_at is None,
        prefix_broken_at=broken_at,
    )


def prefix_break(
    before: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]]
) -> int | None:
    """The index of the first of `now`'s rendered messages where `before` stops being its
    prefix, or None when `before` is a prefix of `now` (compared as the model receives them,
    so the byte-stable rendering of a message is what counts)."""
    for index, message in enumerate(before):
        if index >= len(now) or now[index] != message:
            return index
    return None


def trace_of(
    tk: Turnkeeper, ref: SessionRef, seq: int, *, project: str | None = None
) -> tuple[TurnTrace, TurnTrace | None]:
    """The trace of the reply at `seq`, and the previous turn's (None for the first), for
    `window_diff`. Raises `NotFound` when `seq` is not a reply a chat turn produced."""
    session = tk.get_session(ref, project=project)
    rows = require(tk.store, TraceStore, "turn traces").read_traces(
        session.id, upto_seq=seq, limit=2
    )
    if not rows or rows[0][0] != seq:
        raise NotFound(
            f"message {seq} of session {session.id} has no trace"
            " (only replies produced by a chat turn have one)"
        )
    traces = decode(tk.store, session.id, rows)
    return traces[0], traces[1] if len(traces) > 1 else None


# -- storage encoding -------------------------------------------------------------------------

_SEQ_SETS = ("dropped_seqs", "summarized_seqs", "loaded_seqs")
"""Fields holding a `SeqRanges`, stored as its runs; `kept_seqs` (window order) as runs too."""


def _expand(runs: Sequence[Sequence[int]]) -> list[int]:
    return [seq for first, last in runs for seq in range(first, last + 1)]


def _stored(store: Store, session_id: str, seqs: Iterable[int]) -> dict[int, Message]:
    """The stored messages at `seqs`, read a run of consecutive seqs at a time."""
    found: dict[int, Message] = {}
    for first, last in SeqRanges.of(seqs).runs:
        for message in store.read_messages(session_id, MessageQuery(from_seq=first, to_seq=last)):
            found[message.seq] = message
    return found


def _verbatim(entry: TraceEntry, message: Message) -> bool:
    """Whether the entry renders `message` unchanged (so the trace may refer to it)."""
    calls = [dict(call) for call in message.tool_calls] if message.tool_calls else None
    return (
        entry.role == message.role.value
        and entry.content == message.content
        and entry.author == message.author
        and entry.tool_call_id == message.tool_call_id
        and entry.tool_calls == calls
    )


def encode(store: Store, trace: TurnTrace) -> str:
    """The trace as stored: verbatim entries as references to their seqs, seq lists as runs.
    The reply's own seq is left out: it is the key the trace is stored under, and is not known
    until the append that stores the reply with its trace (`MessageDraft.trace`) gives it."""
    stored = _stored(store, trace.session_id, (e.seq for e in trace.window if e.seq is not None))
    raw = asdict(trace)
    del raw["seq"]
    raw["window"] = [
        {"role": e.role, "tokens": e.tokens, "kind": e.kind, "seq": e.seq, "stored": True}
        if e.seq in stored and _verbatim(e, stored[e.seq])
        else asdict(e)
        for e in trace.window
    ]
    raw["kept_seqs"] = [list(run) for run in SeqRanges.of(trace.kept_seqs).runs]
    for name in _SEQ_SETS:
        raw[name] = [list(run) for run in getattr(trace, name).runs]
    return json.dumps(raw, separators=(",", ":"))


def decode(store: Store, session_id: str, rows: Sequence[tuple[int, str]]) -> list[TurnTrace]:
    """Stored traces `(seq, data)` of one session back to `TurnTrace`s, the referred messages
    read once."""
    raws: list[dict[str, Any]] = [
        jsonenc.loads_within(data, MAX_TRACE_DEPTH) | {"seq": seq} for seq, data in rows
    ]
    wanted = (e["seq"] for raw in raws for e in raw["window"] if e.get("stored"))
    stored = _stored(store, session_id, wanted)
    traces = []
    for raw in raws:
        window = [_entry(e, stored) for e in raw.pop("window")]
        raw["kept_seqs"] = _expand(raw["kept_seqs"])
        for name in _SEQ_SETS:
            raw[name] = SeqRanges.from_runs(raw.get(name, ()))
        traces.append(TurnTrace(**raw, window=window))
    return traces


def _entry(raw: dict[str, Any], stored: dict[int, Message]) -> TraceEntry:
    if not raw.pop("stored", False):
        return TraceEntry(**raw)
    message = stored[raw["seq"]]
    return TraceEntry(
        **raw, content=message.content, author=message.author,
        tool_calls=[dict(c) for c in message.tool_calls] if message.tool_calls else None,
        tool_call_id=message.tool_call_id, internal=message.internal,
    )  # fmt: skip


def _strategy_name(name: str) -> StrategyName | str:
    """A built-in strategy's `StrategyName`, or a custom strategy's own name."""
    return StrategyName(name) if name in StrategyName.__members__.values() else name
